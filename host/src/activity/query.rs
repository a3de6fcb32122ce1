//! Filtered, newest-first paging over the journal.
//!
//! A query walks ONE index (preferring tool > server > intent type > status > type; with no
//! filter, the records table itself) newest-first within the time range (ULID bounds from the
//! milliseconds), applies the other filters to each record, skips `offset` matches and returns
//! `limit` plus whether more exist. A first page therefore reads about as many rows as it
//! returns, plus what the non-indexed filters reject.
//!
//! The tool index is keyed `server:tool`. A tool filter without a server first lists the
//! `*:tool` keys (a skip-scan over the distinct keys of the tool index) and merges their walks
//! newest-first. A tool filter may also be given qualified, as `server:tool`.

use std::ops::Bound;

use redb::{ReadOnlyTable, ReadableDatabase, ReadableTable};
use serde::Serialize;

use super::Result;
use super::journal::{
    IDX_INTENT, IDX_SERVER, IDX_STATUS, IDX_TOOL, IDX_TYPE, INDEXES, Journal, RECORDS, key_id,
    key_ms, parse_key,
};
use super::record::ActivityRecord;

/// Which records a query wants; `None` fields do not filter. String filters on intent type,
/// status and type ignore ASCII case; server and tool are exact.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Intent type (`read`, `write`, `destructive`, ...): the declared operation type, else
    /// the tool variant's suffix.
    pub intent_type: Option<String>,
    /// Upstream server name.
    pub server: Option<String>,
    /// Tool name, or `server:tool`.
    pub tool: Option<String>,
    /// `pending` | `success` | `error` | `blocked`.
    pub status: Option<String>,
    /// `tool_call` | `policy_decision`.
    pub record_type: Option<String>,
    /// Inclusive lower bound, unix ms.
    pub start_ms: Option<u64>,
    /// Inclusive upper bound, unix ms.
    pub end_ms: Option<u64>,
}

impl Filter {
    /// Whether `rec` passes every filter, time range included (taken from its id).
    pub fn matches(&self, rec: &ActivityRecord) -> bool {
        let ci = |want: &Option<String>, have: &str| {
            want.as_deref().is_none_or(|w| w.eq_ignore_ascii_case(have))
        };
        let in_time = || match parse_key(&rec.id) {
            Ok(key) => {
                let ms = key_ms(&key);
                self.start_ms.is_none_or(|s| ms >= s) && self.end_ms.is_none_or(|e| ms <= e)
            }
            Err(_) => self.start_ms.is_none() && self.end_ms.is_none(),
        };
        let tool_ok = || {
            self.tool.as_deref().is_none_or(|t| {
                rec.tool_name == t || format!("{}:{}", rec.server_name, rec.tool_name) == t
            })
        };
        let intent_ok = || {
            self.intent_type.as_deref().is_none_or(|w| {
                rec.intent_type()
                    .is_some_and(|have| have.eq_ignore_ascii_case(w))
            })
        };
        self.server.as_deref().is_none_or(|s| rec.server_name == s)
            && ci(&self.status, rec.status.as_str())
            && ci(&self.record_type, rec.record_type.as_str())
            && tool_ok()
            && intent_ok()
            && in_time()
    }

    /// How many of the non-time filters are set.
    fn predicates(&self) -> usize {
        [
            &self.intent_type,
            &self.server,
            &self.tool,
            &self.status,
            &self.record_type,
        ]
        .iter()
        .filter(|f| f.is_some())
        .count()
    }
}

/// One page of results, newest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Page {
    /// The records.
    pub records: Vec<ActivityRecord>,
    /// Whether more records match past this page.
    pub has_more: bool,
}

/// Where a query reads candidates from.
enum Plan {
    /// The records table.
    Records,
    /// The index `idx` at these keys (merged newest-first when several).
    Index { idx: usize, keys: Vec<String> },
}

/// Largest ULID timestamp.
const MAX_MS: u64 = (1 << 48) - 1;

/// ULID key bounds `[lo, hi]` for a millisecond range.
fn key_bounds(start_ms: Option<u64>, end_ms: Option<u64>) -> ([u8; 16], [u8; 16]) {
    let lo = ulid::Ulid::from_parts(start_ms.unwrap_or(0).min(MAX_MS), 0);
    let hi = ulid::Ulid::from_parts(end_ms.unwrap_or(MAX_MS).min(MAX_MS), u128::MAX);
    (lo.to_bytes(), hi.to_bytes())
}

type Index = ReadOnlyTable<(&'static str, [u8; 16]), ()>;
type IndexRange = redb::Range<'static, (&'static str, [u8; 16]), ()>;

/// The distinct keys of `index` accepted by `keep`, by skipping from key to key.
fn distinct_keys(index: &Index, keep: impl Fn(&str) -> bool) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let next = match &after {
            None => index.first()?.map(|(k, _)| k.value().0.to_string()),
            Some(prev) => {
                let lower = (prev.as_str(), [0xff_u8; 16]);
                let mut range =
                    index.range::<(&str, [u8; 16])>((Bound::Excluded(lower), Bound::Unbounded))?;
                match range.next() {
                    Some(row) => Some(row?.0.value().0.to_string()),
                    None => None,
                }
            }
        };
        let Some(key) = next else { return Ok(out) };
        if keep(&key) {
            out.push(key.clone());
        }
        after = Some(key);
    }
}

/// Newest-first merge of several index walks, yielding record keys.
struct Merge {
    walks: Vec<std::iter::Rev<IndexRange>>,
    heads: Vec<Option<[u8; 16]>>,
}

impl Merge {
    fn new(index: &Index, keys: &[String], lo: [u8; 16], hi: [u8; 16]) -> Result<Self> {
        let mut walks = Vec::with_capacity(keys.len());
        let mut heads = Vec::with_capacity(keys.len());
        for key in keys {
            let mut walk = index.range((key.as_str(), lo)..=(key.as_str(), hi))?.rev();
            heads.push(Self::pull(&mut walk)?);
            walks.push(walk);
        }
        Ok(Self { walks, heads })
    }

    fn pull(walk: &mut std::iter::Rev<IndexRange>) -> Result<Option<[u8; 16]>> {
        match walk.next() {
            Some(row) => Ok(Some(row?.0.value().1)),
            None => Ok(None),
        }
    }

    fn next(&mut self) -> Result<Option<[u8; 16]>> {
        let best = self
            .heads
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.map(|h| (h, i)))
            .max();
        let Some((key, i)) = best else {
            return Ok(None);
        };
        self.heads[i] = Self::pull(&mut self.walks[i])?;
        Ok(Some(key))
    }
}

/// Applies offset and limit to the stream of matches.
struct Collector {
    offset: usize,
    limit: usize,
    skipped: usize,
    page: Page,
}

impl Collector {
    /// Counts or keeps one match; false once the page is full and one more match was seen.
    fn take(&mut self, rec: ActivityRecord) -> bool {
        if self.skipped < self.offset {
            self.skipped += 1;
            true
        } else if self.page.records.len() < self.limit {
            self.page.records.push(rec);
            true
        } else {
            self.page.has_more = true;
            false
        }
    }
}

/// Parses a stored row, logging and skipping a corrupt one.
fn parse_row(key: &[u8; 16], json: &[u8]) -> Option<ActivityRecord> {
    match serde_json::from_slice(json) {
        Ok(rec) => Some(rec),
        Err(e) => {
            tracing::warn!(id = %key_id(key), "skipping corrupt activity record: {e}");
            None
        }
    }
}

impl Journal {
    fn plan(&self, filter: &Filter, txn: &redb::ReadTransaction) -> Result<Plan> {
        let lower = |s: &String| s.to_ascii_lowercase();
        if let Some(tool) = &filter.tool {
            let keys = match &filter.server {
                Some(server) => vec![format!("{server}:{tool}")],
                None => {
                    let index = txn.open_table(INDEXES[IDX_TOOL])?;
                    let suffix = format!(":{tool}");
                    distinct_keys(&index, |k| k == tool || k.ends_with(&suffix))?
                }
            };
            return Ok(Plan::Index {
                idx: IDX_TOOL,
                keys,
            });
        }
        let single = |idx: usize, key: String| Plan::Index {
            idx,
            keys: vec![key],
        };
        Ok(if let Some(server) = &filter.server {
            single(IDX_SERVER, server.clone())
        } else if let Some(intent) = &filter.intent_type {
            single(IDX_INTENT, lower(intent))
        } else if let Some(status) = &filter.status {
            single(IDX_STATUS, lower(status))
        } else if let Some(record_type) = &filter.record_type {
            single(IDX_TYPE, lower(record_type))
        } else {
            Plan::Records
        })
    }

    /// Records matching `filter`, newest first: skips `offset` matches, returns up to `limit`
    /// (the caller caps it; the REST API uses 1000) and whether more match.
    pub fn query(&self, filter: &Filter, limit: usize, offset: usize) -> Result<Page> {
        let page = Page::default();
        if filter
            .start_ms
            .zip(filter.end_ms)
            .is_some_and(|(s, e)| s > e)
        {
            return Ok(page);
        }
        let (lo, hi) = key_bounds(filter.start_ms, filter.end_ms);
        let txn = self.db.begin_read()?;
        let records = txn.open_table(RECORDS)?;
        let mut page = Collector {
            offset,
            limit,
            skipped: 0,
            page,
        };
        match self.plan(filter, &txn)? {
            Plan::Records => {
                for row in records.range(lo..=hi)?.rev() {
                    let (key, value) = row?;
                    let key = key.value();
                    let Some(rec) = parse_row(&key, value.value()) else {
                        continue;
                    };
                    if filter.matches(&rec) && !page.take(rec) {
                        break;
                    }
                }
            }
            Plan::Index { idx, keys } => {
                let index = txn.open_table(INDEXES[idx])?;
                let mut walk = Merge::new(&index, &keys, lo, hi)?;
                // A lone server / intent / status / type filter is answered by its index
                // alone, so skipped rows need not be read.
                let exact = idx != IDX_TOOL && filter.predicates() == 1;
                while let Some(key) = walk.next()? {
                    if exact && page.skipped < offset {
                        page.skipped += 1;
                        continue;
                    }
                    let Some(row) = records.get(key)? else {
                        continue;
                    };
                    let Some(rec) = parse_row(&key, row.value()) else {
                        continue;
                    };
                    if (exact || filter.matches(&rec)) && !page.take(rec) {
                        break;
                    }
                }
            }
        }
        Ok(page.page)
    }

    /// Up to `limit` records strictly after `after` (from the start if `None`), oldest first:
    /// for sinks delivering in id order. Corrupt rows are skipped with a warning.
    ///
    /// Ids are assigned before commit, so with concurrent writers a record can commit after
    /// a later id was already read; sinks should only read up to a few seconds ago, and an
    /// upsert after delivery is not seen again.
    pub fn read_after(&self, after: Option<&str>, limit: usize) -> Result<Vec<ActivityRecord>> {
        let lower = match after {
            Some(id) => Bound::Excluded(parse_key(id)?),
            None => Bound::Unbounded,
        };
        let txn = self.db.begin_read()?;
        let records = txn.open_table(RECORDS)?;
        let mut out = Vec::new();
        for row in records.range::<[u8; 16]>((lower, Bound::Unbounded))? {
            if out.len() >= limit {
                break;
            }
            let (key, value) = row?;
            if let Some(rec) = parse_row(&key.value(), value.value()) {
                out.push(rec);
            }
        }
        Ok(out)
    }
}
