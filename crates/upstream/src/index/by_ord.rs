//! Ties broken by term ordinals, in an index of one segment.
//!
//! Hits of equal score are ordered by server, then name. tantivy's `SortByString` compares
//! a segment's term ordinals (their order is the strings' order) and turns each kept hit's
//! ordinal back into its string with one dictionary lookup apiece, which decompresses the
//! dictionary block from its start every time: over 10,000 tools those lookups were about
//! a fifth of a search's CPU (docs/benchmarks.md). In an index of one segment the ordinals
//! alone order every hit, so [`SortByTermOrd`] keeps them as the sort key, and
//! [`terms_of`] reads the few strings needed in one pass over the dictionary.

use tantivy::collector::sort_key::NaturalComparator;
use tantivy::collector::{SegmentSortKeyComputer, SortKeyComputer};
use tantivy::columnar::StrColumn;
use tantivy::termdict::TermOrdinal;
use tantivy::{DocId, Score, SegmentReader};

/// Sorts by the term ordinal of a string fast field's value: the string's order within
/// one segment, and only there (the caller checks the index has one segment).
#[derive(Debug, Clone, Copy)]
pub(super) struct SortByTermOrd {
    column: &'static str,
}

impl SortByTermOrd {
    pub(super) fn for_field(column: &'static str) -> Self {
        Self { column }
    }
}

impl SortKeyComputer for SortByTermOrd {
    type SortKey = Option<TermOrdinal>;
    type Child = TermOrdOfDoc;
    type Comparator = NaturalComparator;

    fn segment_sort_key_computer(&self, segment: &SegmentReader) -> tantivy::Result<TermOrdOfDoc> {
        Ok(TermOrdOfDoc {
            column: segment.fast_fields().str(self.column)?,
        })
    }
}

/// [`SortByTermOrd`] in one segment.
pub(super) struct TermOrdOfDoc {
    column: Option<StrColumn>,
}

impl SegmentSortKeyComputer for TermOrdOfDoc {
    type SortKey = Option<TermOrdinal>;
    type SegmentSortKey = Option<TermOrdinal>;
    type SegmentComparator = NaturalComparator;

    #[inline]
    fn segment_sort_key(&mut self, doc: DocId, _score: Score) -> Option<TermOrdinal> {
        self.column.as_ref()?.ords().first(doc)
    }

    fn convert_segment_sort_key(&self, ord: Option<TermOrdinal>) -> Option<TermOrdinal> {
        ord
    }
}

/// The strings of `ords` in `segment`'s column `column`, in one pass over its dictionary:
/// a sorted list of (ordinal, string) to look each up in.
pub(super) fn terms_of(
    segment: &SegmentReader,
    column: &str,
    ords: impl Iterator<Item = TermOrdinal>,
) -> tantivy::Result<Vec<(TermOrdinal, String)>> {
    let Some(column) = segment.fast_fields().str(column)? else {
        return Ok(Vec::new());
    };
    let mut sorted: Vec<TermOrdinal> = ords.collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut terms = Vec::with_capacity(sorted.len());
    column
        .dictionary()
        .sorted_ords_to_term_cb(&sorted, |bytes| {
            terms.push(String::from_utf8_lossy(bytes).into_owned());
        })?;
    Ok(sorted.into_iter().zip(terms).collect())
}

/// The string of `ord` in what [`terms_of`] read (empty when it is not there).
pub(super) fn term(terms: &[(TermOrdinal, String)], ord: Option<TermOrdinal>) -> String {
    ord.and_then(|ord| terms.binary_search_by_key(&ord, |(o, _)| *o).ok())
        .and_then(|at| terms.get(at))
        .map(|(_, term)| term.clone())
        .unwrap_or_default()
}
