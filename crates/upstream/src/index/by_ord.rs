//! Ties broken by term ordinals, in an index of one segment.
//!
//! Hits of equal score are ordered by server, then name. tantivy's `SortByString` compares
//! a segment's term ordinals (their order is the strings' order) and turns each kept hit's
//! ordinal back into its string with one dictionary lookup apiece, which decompresses the
//! dictionary block from its start every time: over 10,000 tools those lookups were about
//! a fifth of a search's CPU (docs/benchmarks.md). In an index of one segment the ordinals
//! alone order every hit, so [`SortByTermOrd`] keeps them as the sort key, and
//! [`terms_of`] reads the few strings needed in one pass over the dictionary.
//!
//! A query that scores is collected by [`top_by_score`] instead: tantivy skips whole blocks
//! of documents that cannot reach the best `limit` scores (block-max WAND) only when it
//! collects by score alone, so ties would be cut arbitrarily at the last place. Here the
//! bound it prunes with stays just under the `limit`-th best score, every document that
//! ties with it is kept, and the ordinals sort the few kept ones. Pruning adds a document's
//! term scores in another order than tantivy's union does, so the kept documents are scored
//! again, clause by clause in the union's order ([`rescore_by_clause`]): each hit's score is
//! the one every other search gives it, to the last bit.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::Arc;

use tantivy::collector::sort_key::NaturalComparator;
use tantivy::collector::{SegmentSortKeyComputer, SortKeyComputer};
use tantivy::columnar::StrColumn;
use tantivy::query::{
    BooleanQuery, BooleanWeight, EnableScoring, Explanation, Occur, Query, Scorer, SumCombiner,
    Weight,
};
use tantivy::termdict::TermOrdinal;
use tantivy::{DocId, DocSet, Score, Searcher, SegmentReader, TERMINATED};

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

/// One hit as collected: its score and the term ordinals of its server and name.
pub(super) type OrdHit = (Score, Option<TermOrdinal>, Option<TermOrdinal>);

/// The `limit` best hits of `query` in `segment` (the searcher's only one): by score, then
/// server, then name, pruned as the module's doc says.
///
/// Block-max WAND adds a document's term scores in another order than the plain scorer,
/// so two documents that score the same can differ in the last bits there: the bound keeps
/// a margin ([`SCORE_MARGIN`]) far wider than that, and the kept documents are scored again
/// by the plain scorer, whose scores rank and tie as every other search's do.
pub(super) fn top_by_score(
    searcher: &Searcher,
    segment: &SegmentReader,
    query: &dyn Query,
    limit: usize,
    (server, name): (&str, &str),
) -> tantivy::Result<Vec<OrdHit>> {
    let scoring = EnableScoring::enabled_from_searcher(searcher);
    let (weight, clauses) = match clause_weights(query, scoring)? {
        Some(Clauses { minimum, weights }) => {
            let shared = weights
                .iter()
                .map(|weight| {
                    (
                        Occur::Should,
                        Box::new(Shared(weight.clone())) as Box<dyn Weight>,
                    )
                })
                .collect();
            let weight: Box<dyn Weight> =
                Box::new(BooleanWeight::with_minimum_number_should_match(
                    shared,
                    minimum,
                    true,
                    Box::new(SumCombiner::default),
                ));
            (weight, Some(weights))
        }
        None => (query.weight(scoring)?, None),
    };
    let alive = segment.alive_bitset();
    // The `limit` best scores so far, the worst on top.
    let mut best: BinaryHeap<Reverse<Ranked>> = BinaryHeap::with_capacity(limit + 1);
    let mut kept: Vec<(Score, DocId)> = Vec::new();
    let mut bound = Score::MIN;
    weight.for_each_pruning(Score::MIN, segment, &mut |doc, score| {
        if alive.is_some_and(|alive| alive.is_deleted(doc)) {
            return bound;
        }
        kept.push((score, doc));
        best.push(Reverse(Ranked(score)));
        if best.len() > limit {
            best.pop();
        }
        if best.len() == limit
            && let Some(Reverse(Ranked(last))) = best.peek()
        {
            bound = below(*last);
        }
        bound
    })?;
    // Scored again in document order, as the scorer every other search uses adds them up.
    kept.retain(|(score, _)| *score > bound);
    kept.sort_unstable_by_key(|(_, doc)| *doc);
    match clauses {
        Some(clauses) => rescore_by_clause(&clauses, segment, &mut kept)?,
        None => {
            let mut scorer = weight.scorer(segment, 1.0)?;
            for (score, doc) in &mut kept {
                if scorer.doc() < *doc {
                    scorer.seek(*doc);
                }
                if scorer.doc() == *doc {
                    *score = scorer.score();
                }
            }
        }
    }
    let servers = segment.fast_fields().str(server)?;
    let names = segment.fast_fields().str(name)?;
    let ord = |column: &Option<StrColumn>, doc| column.as_ref().and_then(|c| c.ords().first(doc));
    let mut hits: Vec<OrdHit> = kept
        .into_iter()
        .map(|(score, doc)| (score, ord(&servers, doc), ord(&names, doc)))
        .collect();
    hits.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    hits.truncate(limit);
    Ok(hits)
}

/// The weights of a query of `Should` clauses only (what `ToolIndex` builds), made once
/// for both the pruned pass and the rescoring, with its minimum of clauses to match; `None`
/// for any other query.
fn clause_weights(
    query: &dyn Query,
    scoring: EnableScoring<'_>,
) -> tantivy::Result<Option<Clauses>> {
    let Some(boolean) = query.downcast_ref::<BooleanQuery>() else {
        return Ok(None);
    };
    if boolean
        .clauses()
        .iter()
        .any(|(occur, _)| *occur != Occur::Should)
    {
        return Ok(None);
    }
    let weights = boolean
        .clauses()
        .iter()
        .map(|(_, clause)| clause.weight(scoring).map(Arc::from))
        .collect::<tantivy::Result<_>>()?;
    Ok(Some(Clauses {
        minimum: boolean.get_minimum_number_should_match(),
        weights,
    }))
}

/// Scores each of `kept` (in document order) as tantivy's union of `Should` clauses does:
/// the scores of the clauses that match it, added in clause order from zero
/// (`BufferedUnionScorer` with `SumCombiner`). The union's own scorer buffers every posting
/// of a 4,096-document window of every clause before its first seek: a quarter of a search
/// over 10,000 tools went there (docs/benchmarks.md). One scorer per clause seeks to the
/// few kept documents alone.
fn rescore_by_clause(
    clauses: &[Arc<dyn Weight>],
    segment: &SegmentReader,
    kept: &mut [(Score, DocId)],
) -> tantivy::Result<()> {
    let mut scorers = clauses
        .iter()
        .map(|weight| weight.scorer(segment, 1.0))
        .collect::<tantivy::Result<Vec<_>>>()?;
    scorers.retain(|scorer| scorer.doc() != TERMINATED);
    for (score, doc) in kept {
        let mut sum: Score = 0.0;
        for scorer in &mut scorers {
            if scorer.doc() < *doc {
                scorer.seek(*doc);
            }
            if scorer.doc() == *doc {
                sum += scorer.score();
            }
        }
        *score = sum;
    }
    Ok(())
}

/// The clauses' weights of a query of `Should` clauses, and how many must match.
struct Clauses {
    minimum: usize,
    weights: Vec<Arc<dyn Weight>>,
}

/// A clause's weight shared by the pruned pass (inside a `BooleanWeight`) and the
/// rescoring: each makes its own scorers from it.
struct Shared(Arc<dyn Weight>);

impl Weight for Shared {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        self.0.scorer(reader, boost)
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        self.0.explain(reader, doc)
    }
}

/// How far under the `limit`-th best score pruning stops, relative to it: more than ten
/// times what adding 64 term scores in another order can change an `f32` sum (64 × 2⁻²³).
const SCORE_MARGIN: Score = 1e-4;

/// The pruning bound for a `limit`-th best score of `last` (scores are never negative).
fn below(last: Score) -> Score {
    last - last.abs() * SCORE_MARGIN - Score::MIN_POSITIVE
}

/// A score ordered totally (scores are never NaN; `total_cmp` orders them as numbers).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Ranked(Score);

impl Eq for Ranked {}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}
