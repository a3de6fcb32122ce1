//! [`ClusterJournal`]: the local journal's queries ([`Journal::query`], [`Journal::get`],
//! [`Journal::call_stats`]) over the cluster journal's table. Rows are read newest first, a
//! chunk at a time, each id once; each row's `record` is parsed back into an
//! [`ActivityRecord`] and kept only if [`Filter::matches`] it, so the answer is the one the
//! local journal would give over the union of every replica's records. A row whose record
//! does not parse is skipped with a warning, as the local journal skips a corrupt row.
//!
//! [`Journal::query`]: mcpproxy_activity::Journal::query
//! [`Journal::get`]: mcpproxy_activity::Journal::get
//! [`Journal::call_stats`]: mcpproxy_activity::Journal::call_stats

use serde::Deserialize;

use mcpproxy_activity::{
    ActivityRecord, CallStats, Filter, Page, RecordType, StatsTally, parse_record_id,
};

use super::Error;
use super::client::{Client, MAX_ROWS};
use super::sql;
use super::target::Target;
use mcpproxy_config::Config;

/// The most rows one query reads (a page deep in the trail, statistics over a long window):
/// past it the query fails asking for a narrower one.
pub(super) const MAX_SCAN: usize = 1_000_000;

/// The cluster's journal, read from the ClickHouse sink's table.
pub struct ClusterJournal {
    client: Client,
    table: String,
}

/// One row as ClickHouse writes it (`FORMAT JSONEachRow`).
#[derive(Deserialize)]
struct Row {
    id: String,
    record: String,
}

impl ClusterJournal {
    /// The reader of the journal `cluster.journal` names; an error when none is configured
    /// or its settings do not say where the table is.
    pub fn from_config(config: &Config) -> Result<Self, Error> {
        let target = Target::from_config(config)?;
        let table = sql::table(&target.database, &target.table).ok_or_else(|| Error::Settings {
            sink: target.sink.clone(),
            key: "table",
            problem: "is not a plain ClickHouse name".to_owned(),
        })?;
        Ok(Self {
            client: Client::new(target)?,
            table,
        })
    }

    /// The quoted `database`.`table`.
    pub(super) fn table(&self) -> &str {
        &self.table
    }

    /// The HTTP client of the table's ClickHouse.
    pub(super) fn client(&self) -> &Client {
        &self.client
    }

    /// Where the journal is, as messages show it (no credentials).
    pub fn shown_url(&self) -> &str {
        &self.client.target().shown
    }

    /// Records matching `filter`, newest first: skips `offset` matches, returns up to
    /// `limit` and whether more match.
    pub async fn query(&self, filter: &Filter, limit: usize, offset: usize) -> Result<Page, Error> {
        let mut page = Page::default();
        if filter
            .start_ms
            .zip(filter.end_ms)
            .is_some_and(|(s, e)| s > e)
        {
            return Ok(page);
        }
        let mut skipped = 0;
        let want = offset.saturating_add(limit).saturating_add(1);
        self.scan(filter, want, |record| {
            if skipped < offset {
                skipped += 1;
                true
            } else if page.records.len() < limit {
                page.records.push(record);
                true
            } else {
                page.has_more = true;
                false
            }
        })
        .await?;
        Ok(page)
    }

    /// The record with id `id`, if any replica delivered it.
    pub async fn get(&self, id: &str) -> Result<Option<ActivityRecord>, Error> {
        if parse_record_id(id).is_none() {
            return Ok(None);
        }
        let text = self.client.run(&sql::by_id(&self.table, id)).await?;
        Ok(self
            .rows(&text)?
            .into_iter()
            .find_map(|row| self.parse(&row).filter(|record| record.id == id)))
    }

    /// The statistics of the records matching `filter` of one type (the filter's, else tool
    /// calls), as [`Journal::call_stats`](mcpproxy_activity::Journal::call_stats) gives them.
    pub async fn call_stats(&self, filter: &Filter) -> Result<CallStats, Error> {
        let record_type = filter.record_type.unwrap_or(RecordType::ToolCall);
        let filter = Filter {
            record_type: Some(record_type),
            ..filter.clone()
        };
        let mut tally = StatsTally::default();
        if filter
            .start_ms
            .zip(filter.end_ms)
            .is_none_or(|(s, e)| s <= e)
        {
            // One stream, in no order (the tally does not need one), each id once.
            let sql = sql::all(&self.table, &filter);
            self.client
                .stream(&sql, MAX_SCAN, |line| {
                    let row = self.row(line)?;
                    if let Some(record) = self.parse(&row)
                        && filter.matches(&record)
                    {
                        tally.add(&record);
                    }
                    Ok(())
                })
                .await?;
        }
        Ok(tally.finish(record_type))
    }

    /// Calls `visit` with each record matching `filter`, newest first, each id once, until
    /// it returns `false` or none are left. `want` is how many the caller expects to take:
    /// the first chunk is no larger; the next ones (the rows the filter's columns let through
    /// but its records did not) are full-sized.
    async fn scan(
        &self,
        filter: &Filter,
        want: usize,
        mut visit: impl FnMut(ActivityRecord) -> bool,
    ) -> Result<(), Error> {
        let mut chunk = want.clamp(1, MAX_ROWS);
        let mut before: Option<String> = None;
        let mut read = 0usize;
        loop {
            let sql = sql::page(&self.table, filter, before.as_deref(), chunk);
            let text = self.client.run(&sql).await?;
            let rows = self.rows(&text)?;
            let full = rows.len() >= chunk;
            read += rows.len();
            let mut moved = false;
            for row in &rows {
                // Each chunk starts below the last id of the one before: a row that is not
                // strictly older is one the server should not have sent.
                if before.as_deref().is_some_and(|b| row.id.as_str() >= b) {
                    continue;
                }
                before = Some(row.id.clone());
                moved = true;
                let Some(record) = self.parse(row) else {
                    continue;
                };
                if filter.matches(&record) && !visit(record) {
                    return Ok(());
                }
            }
            if !full {
                return Ok(());
            }
            if !moved {
                return Err(self.client.bad_line(
                    "",
                    "a chunk of rows none older than the last one read".to_owned(),
                ));
            }
            if read >= MAX_SCAN {
                return Err(Error::TooMany { max: MAX_SCAN });
            }
            chunk = MAX_ROWS;
        }
    }

    /// The rows of an answer.
    fn rows(&self, text: &str) -> Result<Vec<Row>, Error> {
        text.lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| self.row(line))
            .collect()
    }

    /// One line of an answer as a row.
    fn row(&self, line: &str) -> Result<Row, Error> {
        serde_json::from_str::<Row>(line).map_err(|e| self.client.bad_line(line, e.to_string()))
    }

    /// A row's record; `None` (logged) when its JSON is not a record, or names another id
    /// than the row (a row a writer other than the sink inserted).
    fn parse(&self, row: &Row) -> Option<ActivityRecord> {
        let id = mcpproxy_support::quote(&row.id);
        match serde_json::from_str::<ActivityRecord>(&row.record) {
            Ok(record) if record.id == row.id => Some(record),
            Ok(_) => {
                tracing::warn!(%id, "skipping a cluster journal row whose record has another id");
                None
            }
            Err(e) => {
                tracing::warn!(%id, "skipping a corrupt cluster journal record: {e}");
                None
            }
        }
    }
}
