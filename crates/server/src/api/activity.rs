//! `GET /api/v1/activity` (filtered, newest first; a damaged journal answers 500 with a
//! message naming `mcpproxy activity repair`), `GET /api/v1/activity/export` (every
//! matching record as JSON Lines or CSV, streamed), `GET /api/v1/activity/{id}` and
//! `GET /api/v1/activity/sinks` (each sink's cursor, backlog, lag and errors) and
//! `GET /api/v1/activity/verify` (the hash chain walked, every break named) and
//! `GET /api/v1/activity/checkpoint` (the head signed now, for a witness).
//!
//! `cluster=true` on `/activity`, `/activity/{id}` and `/activity/stats` reads the cluster's
//! journal (`cluster.journal`, every replica's records) instead of this replica's: the same
//! filters, the same answers.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use mcpproxy_activity::ExportFormat;
use mcpproxy_activity::SCAN_CHUNK;
use mcpproxy_activity::{Filter, RecordType, Status, parse_record_id, parse_timestamp};
use mcpproxy_policy::OperationType;

use super::{ApiError, ApiState, ok};
use mcpproxy_cluster::journal::ClusterJournal;

/// The default and largest page.
pub(super) const DEFAULT_LIMIT: usize = 50;
pub(super) const MAX_LIMIT: usize = 1000;

/// The filters every activity query takes (besides `apikey`, which the key check reads).
const FILTER_PARAMS: &[&str] = &[
    "intent_type",
    "server",
    "tool",
    "status",
    "type",
    "session",
    "start_time",
    "end_time",
    "replica",
    "approval",
];

/// Parses the query of `GET /activity` into a filter and a page.
pub(super) fn parse_query(
    query: &HashMap<String, String>,
) -> Result<(Filter, usize, usize), ApiError> {
    parse_query_of(query, &[FILTER_PARAMS, &["limit", "offset"]].concat())
}

/// Parses a query into a filter and a page, allowing only the parameters in `params`.
fn parse_query_of(
    query: &HashMap<String, String>,
    params: &[&str],
) -> Result<(Filter, usize, usize), ApiError> {
    if let Some(unknown) = query
        .keys()
        .find(|k| *k != "apikey" && !params.contains(&k.as_str()))
    {
        return Err(ApiError::bad_request(format!(
            "unknown parameter '{unknown}'; use {}",
            params.join(", ")
        )));
    }
    let text = |key: &str| -> Result<Option<String>, ApiError> {
        match query.get(key) {
            Some(v) if v.trim().is_empty() => Err(ApiError::bad_request(format!(
                "{key} is empty; leave it out to match all"
            ))),
            other => Ok(other.cloned()),
        }
    };
    let time = |key: &str| -> Result<Option<u64>, ApiError> {
        query
            .get(key)
            .map(|v| {
                parse_timestamp(v).map_err(|e| ApiError::bad_request(format!("{key} '{v}': {e}")))
            })
            .transpose()
    };
    let number = |key: &str,
                  default: usize,
                  range: std::ops::RangeInclusive<usize>|
     -> Result<usize, ApiError> {
        match query.get(key) {
            None => Ok(default),
            Some(v) => match v.parse::<usize>() {
                Ok(n) if range.contains(&n) => Ok(n),
                _ => Err(ApiError::bad_request(format!(
                    "{key} '{v}' is not valid: use a whole number from {} to {}",
                    range.start(),
                    range.end()
                ))),
            },
        }
    };
    let filter = Filter {
        intent_type: one_of(
            query,
            "intent_type",
            &OperationType::ALL,
            OperationType::as_str,
        )?
        .map(|op| op.as_str().to_owned()),
        server: text("server")?,
        tool: text("tool")?,
        status: one_of(query, "status", &Filter::STATUSES, Status::as_str)?,
        record_type: one_of(query, "type", &RecordType::ALL, RecordType::as_str)?,
        session: text("session")?,
        start_ms: time("start_time")?,
        end_ms: time("end_time")?,
        replica: text("replica")?,
        approval: match query.get("approval") {
            None => None,
            Some(v) if Filter::APPROVALS.contains(&v.as_str()) => Some(v.clone()),
            Some(v) => {
                return Err(ApiError::bad_request(format!(
                    "approval '{v}' is not valid: use {}",
                    Filter::APPROVALS.join(", ")
                )));
            }
        },
    };
    if let (Some(start), Some(end)) = (filter.start_ms, filter.end_ms)
        && start > end
    {
        return Err(ApiError::bad_request("start_time is after end_time"));
    }
    let limit = number("limit", DEFAULT_LIMIT, 1..=MAX_LIMIT)?;
    let offset = number("offset", 0, 0..=usize::MAX)?;
    Ok((filter, limit, offset))
}

/// The value of the parameter `key`: one of `values`, each written as `name` gives it, or a
/// 400 listing them.
fn one_of<T: Copy>(
    query: &HashMap<String, String>,
    key: &str,
    values: &[T],
    name: fn(T) -> &'static str,
) -> Result<Option<T>, ApiError> {
    let Some(v) = query.get(key) else {
        return Ok(None);
    };
    match values.iter().copied().find(|value| name(*value) == v) {
        Some(value) => Ok(Some(value)),
        None => Err(ApiError::bad_request(format!(
            "{key} '{v}' is not valid: use one of {}",
            values
                .iter()
                .map(|value| name(*value))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Takes `cluster` out of `query`: the cluster's journal when `cluster=true`, `None` for this
/// replica's; a 400 for any other value, or when the cluster has no readable journal.
fn cluster_of(
    state: &ApiState,
    query: &mut HashMap<String, String>,
) -> Result<Option<Arc<ClusterJournal>>, ApiError> {
    match query.remove("cluster").as_deref() {
        None | Some("false") => Ok(None),
        Some("true") => match &state.cluster_journal {
            Ok(cluster) => Ok(Some(cluster.clone())),
            Err(why) => Err(ApiError::bad_request(why.clone())),
        },
        Some(other) => Err(ApiError::bad_request(format!(
            "cluster '{}' is not valid: use true or false",
            mcpproxy_support::quote(other)
        ))),
    }
}

/// A cluster journal error: a query too wide is the caller's to narrow (400); anything else
/// is the cluster journal's (502), its message saying what to check.
fn cluster_error(error: mcpproxy_cluster::journal::Error) -> ApiError {
    let status = match error {
        mcpproxy_cluster::journal::Error::TooMany { .. } => http::StatusCode::BAD_REQUEST,
        _ => http::StatusCode::BAD_GATEWAY,
    };
    tracing::warn!("reading the cluster journal failed: {error}");
    ApiError::with_status(status, error.to_string())
}

pub(super) async fn list(
    State(state): State<ApiState>,
    Query(mut query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let cluster = cluster_of(&state, &mut query)?;
    let (filter, limit, offset) = parse_query(&query)?;
    let mut page = match cluster {
        Some(cluster) => cluster
            .query(&filter, limit, offset)
            .await
            .map_err(cluster_error)?,
        None => {
            let journal = state.journal.clone();
            tokio::task::spawn_blocking(move || journal.query(&filter, limit, offset))
                .await
                .map_err(|e| ApiError::internal("the activity query failed", e))?
                .map_err(|e| journal_error("the activity query failed", e))?
        }
    };
    let cut = within_budget(&page.records, MAX_PAGE_BYTES);
    if cut < page.records.len() {
        page.records.truncate(cut);
        page.has_more = true;
    }
    Ok(ok(json!({
        "records": page.records,
        "limit": limit,
        "offset": offset,
        "has_more": page.has_more,
    })))
}

/// The most record JSON one page of `GET /activity` carries: past it, the page ends early
/// with `has_more` (a page always holds at least one record). Each record is bounded, but a
/// thousand records with large arguments would still be a large answer.
pub(super) const MAX_PAGE_BYTES: usize = 8 << 20;

/// How many of `records`, from the first, fit in `budget` bytes of JSON (at least one).
fn within_budget(records: &[mcpproxy_activity::ActivityRecord], budget: usize) -> usize {
    let mut used = 0;
    for (i, record) in records.iter().enumerate() {
        used += serde_json::to_vec(record).map_or(0, |json| json.len());
        if used > budget && i > 0 {
            return i;
        }
    }
    records.len()
}

pub(super) async fn show(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    Query(mut query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let cluster = cluster_of(&state, &mut query)?;
    let no_record = || {
        ApiError::not_found(format!(
            "no activity record with id '{id}'; `mcpproxy activity list` shows the ids"
        ))
    };
    // Not a record id (a ULID): no record can have it.
    if parse_record_id(&id).is_none() {
        return Err(no_record());
    }
    if let Some(cluster) = cluster {
        return cluster
            .get(&id)
            .await
            .map_err(cluster_error)?
            .map(ok)
            .ok_or_else(no_record);
    }
    let journal = state.journal.clone();
    let lookup = id.clone();
    tokio::task::spawn_blocking(move || journal.get(&lookup))
        .await
        .map_err(|e| ApiError::internal("reading the activity record failed", e))?
        .map_err(|e| journal_error("reading the activity record failed", e))?
        .map(ok)
        .ok_or_else(no_record)
}

/// `GET /activity/export?format=jsonl|csv&<filters>`: every matching record, oldest first,
/// streamed a chunk at a time (memory stays flat however many records match).
pub(super) async fn export(
    State(state): State<ApiState>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let format: ExportFormat = match query.get("format") {
        None => ExportFormat::Jsonl,
        Some(f) => f.parse().map_err(ApiError::bad_request)?,
    };
    let proof = flag(&query, "proof")?;
    let (filter, _, _) = parse_query_of(&query, &[FILTER_PARAMS, &["format", "proof"]].concat())?;
    let journal = state.journal.clone();
    // The first chunk is read before answering, so a damaged journal is a clean 500.
    let first = {
        let (journal, filter) = (journal.clone(), filter.clone());
        tokio::task::spawn_blocking(move || journal.scan_export(&filter, None, SCAN_CHUNK))
            .await
            .map_err(|e| ApiError::internal("the activity export failed", e))?
            .map_err(|e| journal_error("the activity export failed", e))?
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    tokio::task::spawn_blocking(move || {
        // `false` once the client went away.
        let send = |chunk: &[ExportRow], mut buf: Vec<u8>| {
            for (record, row) in chunk {
                format.write_row(record, row.as_deref(), &mut buf);
            }
            buf.is_empty() || tx.blocking_send(Ok(Bytes::from(buf))).is_ok()
        };
        if !send(&first, format.header().as_bytes().to_vec()) {
            return;
        }
        let rest = if first.len() < SCAN_CHUNK {
            Ok(())
        } else {
            let after = first.last().map(|(r, _)| r.id.clone());
            journal
                .for_each_export_chunk(&filter, after.as_deref(), |chunk| send(chunk, Vec::new()))
        };
        // With `proof=true`, the chain's checkpoints and state follow the records, so the
        // export verifies offline (`mcpproxy activity verify --file`).
        let rest = rest.and_then(|()| {
            if proof && format == ExportFormat::Jsonl {
                let trailer = journal.chain_trailer()?;
                let _ = tx.blocking_send(Ok(Bytes::from(trailer)));
            }
            Ok(())
        });
        if let Err(e) = rest {
            tracing::error!("the activity export stopped: {e}");
            // Cuts the response short, so the client sees it incomplete.
            let _ = tx.blocking_send(Err(std::io::Error::other(e.to_string())));
        }
    });
    let body = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Ok((
        [(http::header::CONTENT_TYPE, format.content_type())],
        axum::body::Body::from_stream(body),
    )
        .into_response())
}

/// A record of an export and its row as stored when it is in the hash chain.
type ExportRow = (mcpproxy_activity::ActivityRecord, Option<Vec<u8>>);

/// A `true`/`false` query parameter (absent: false).
fn flag(query: &HashMap<String, String>, key: &str) -> Result<bool, ApiError> {
    match query.get(key).map(String::as_str) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "{key} '{other}' is not valid: use true or false"
        ))),
    }
}

/// `GET /activity/verify?since=<time>&key=<public key>[&cluster=true]`: walks this journal's
/// hash chain (with `cluster=true`, every replica's in the cluster journal) and
/// its signed checkpoints (against `key`, hex, else the journal's own key) and answers the
/// report: `ok`, the counts, and every break with the records and times around it. A broken
/// chain is a report with `ok: false`, not an HTTP error.
pub(super) async fn verify(
    State(state): State<ApiState>,
    Query(mut query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    if let Some(unknown) = query
        .keys()
        .find(|k| !["apikey", "since", "key", "cluster"].contains(&k.as_str()))
    {
        return Err(ApiError::bad_request(format!(
            "unknown parameter '{unknown}'; use since, key, cluster"
        )));
    }
    let cluster = cluster_of(&state, &mut query)?;
    let since = query
        .get("since")
        .map(|v| parse_timestamp(v).map_err(|e| ApiError::bad_request(format!("since '{v}': {e}"))))
        .transpose()?;
    let key = query.get("key").cloned();
    if let Some(key) = &key
        && (key.len() != 64 || !key.chars().all(|c| c.is_ascii_hexdigit()))
    {
        return Err(ApiError::bad_request(format!(
            "key '{key}' is not a public key: give the 64 hex digits `mcpproxy activity key` \
             prints"
        )));
    }
    if let Some(cluster) = cluster {
        let keys = mcpproxy_cluster::journal::ClusterKeys {
            all: key,
            ..Default::default()
        };
        let report = cluster
            .verify_chains(&keys, since, Vec::new())
            .await
            .map_err(cluster_error)?;
        return Ok(ok(report));
    }
    let journal = state.journal.clone();
    let report = tokio::task::spawn_blocking(move || journal.verify_chain(key.as_deref(), since))
        .await
        .map_err(|e| ApiError::internal("verifying the activity journal failed", e))?
        .map_err(|e| journal_error("verifying the activity journal failed", e))?;
    Ok(ok(report))
}

/// `GET /activity/checkpoint`: the chain's head signed now (if records were chained since
/// the last checkpoint) and the journal's public key: what a witness on another machine
/// fetches and keeps, `{"checkpoint": {...} | null, "key": "<hex>"}`.
pub(super) async fn checkpoint(
    State(state): State<ApiState>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    if let Some(unknown) = query.keys().find(|k| *k != "apikey") {
        return Err(ApiError::bad_request(format!(
            "unknown parameter '{unknown}': /activity/checkpoint takes none"
        )));
    }
    let journal = state.journal.clone();
    let key = journal.public_key();
    let checkpoint = tokio::task::spawn_blocking(move || journal.latest_checkpoint())
        .await
        .map_err(|e| ApiError::internal("signing the activity chain failed", e))?
        .map_err(|e| journal_error("signing the activity chain failed", e))?;
    Ok(ok(json!({ "checkpoint": checkpoint, "key": key })))
}

/// `GET /activity/stats?<filters>`: tool calls (or the records of the `type` asked for) by
/// server, tool, variant, status and decision, with p50/p99 durations.
pub(super) async fn stats(
    State(state): State<ApiState>,
    Query(mut query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let cluster = cluster_of(&state, &mut query)?;
    let (filter, _, _) = parse_query_of(&query, FILTER_PARAMS)?;
    if let Some(cluster) = cluster {
        return Ok(ok(cluster
            .call_stats(&filter)
            .await
            .map_err(cluster_error)?));
    }
    let journal = state.journal.clone();
    let stats = tokio::task::spawn_blocking(move || journal.call_stats(&filter))
        .await
        .map_err(|e| ApiError::internal("the activity statistics failed", e))?
        .map_err(|e| journal_error("the activity statistics failed", e))?;
    Ok(ok(stats))
}

/// How often the live feed looks for new records.
const STREAM_POLL: std::time::Duration = std::time::Duration::from_millis(250);
/// A record still `pending` after this long no longer holds the feed's cursor back.
const STREAM_PENDING_PATIENCE_MS: u64 = 10 * 60 * 1000;

/// `GET /activity/stream?<filters>`: Server-Sent Events, one `record` event per finished
/// record (id = the record's id, data = its JSON), from now on, or from `start_time`, or
/// after the record `after` names, or after the `Last-Event-ID` a reconnecting client sends.
/// A record is sent once it is finished (not `pending`), so a call shows with its outcome.
pub(super) async fn stream(
    State(state): State<ApiState>,
    headers: http::HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let mut query = query;
    let after = query.remove("after");
    let (filter, _, _) = parse_query_of(&query, FILTER_PARAMS)?;
    // A reconnecting client's Last-Event-ID wins over the `after` it first asked for.
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or(after);
    if let Some(id) = &resume
        && parse_record_id(id).is_none()
    {
        return Err(ApiError::bad_request(format!(
            "'{id}' (Last-Event-ID or after) is not a record id"
        )));
    }
    let journal = state.journal.clone();
    // Without a start, the feed begins after the newest record now.
    let cursor = match (&resume, filter.start_ms) {
        (Some(id), _) => Some(id.clone()),
        (None, Some(_)) => None,
        (None, None) => {
            let journal = journal.clone();
            tokio::task::spawn_blocking(move || journal.query(&Filter::default(), 1, 0))
                .await
                .map_err(|e| ApiError::internal("the activity feed failed", e))?
                .map_err(|e| journal_error("the activity feed failed", e))?
                .records
                .first()
                .map(|r| r.id.clone())
        }
    };
    let feed = Feed {
        _open: state
            .proxy
            .metrics()
            .opened(crate::metrics::Open::Stream, "activity"),
        journal,
        filter,
        cursor,
        sent: std::collections::BTreeSet::new(),
        ready: std::collections::VecDeque::new(),
    };
    let events = futures::stream::unfold(feed, |mut feed| async move {
        loop {
            if let Some(event) = feed.ready.pop_front() {
                return Some((Ok::<_, std::convert::Infallible>(event), feed));
            }
            tokio::time::sleep(STREAM_POLL).await;
            let (journal, filter, cursor) = (
                feed.journal.clone(),
                feed.filter.clone(),
                feed.cursor.clone(),
            );
            let chunk = tokio::task::spawn_blocking(move || {
                journal.scan_after(&filter, cursor.as_deref(), 500)
            })
            .await;
            match chunk {
                Ok(Ok(chunk)) => feed.take(chunk),
                Ok(Err(e)) => {
                    tracing::error!("the activity feed stopped: {e}");
                    return None;
                }
                Err(_) => return None,
            }
        }
    });
    Ok(axum::response::sse::Sse::new(events)
        .keep_alive(axum::response::sse::KeepAlive::default())
        .into_response())
}

/// The live feed's state between polls.
struct Feed {
    /// Counted in `mcpproxy_open_streams` while the feed lives.
    _open: crate::metrics::OpenGuard,
    journal: Arc<mcpproxy_activity::Journal>,
    filter: Filter,
    /// Every record up to this id was sent or skipped for good.
    cursor: Option<String>,
    /// Records after the cursor already sent (the cursor waits behind a pending one).
    sent: std::collections::BTreeSet<String>,
    ready: std::collections::VecDeque<axum::response::sse::Event>,
}

impl Feed {
    fn take(&mut self, chunk: Vec<mcpproxy_activity::ActivityRecord>) {
        let now = mcpproxy_activity::now_ms();
        let mut held = false;
        for record in chunk {
            let pending = record.status == Status::Pending
                && parse_record_id(&record.id)
                    .is_some_and(|ms| now.saturating_sub(ms) < STREAM_PENDING_PATIENCE_MS);
            if pending {
                held = true;
                continue;
            }
            if !self.sent.contains(&record.id) {
                if let Ok(data) = serde_json::to_string(&record) {
                    self.ready.push_back(
                        axum::response::sse::Event::default()
                            .event("record")
                            .id(record.id.clone())
                            .data(data),
                    );
                }
                if held {
                    self.sent.insert(record.id.clone());
                }
            }
            if !held {
                self.sent.remove(&record.id);
                self.cursor = Some(record.id);
            }
        }
    }
}

/// A journal error as a 500: a damaged journal is named with what to do (`mcpproxy activity
/// repair`), anything else only logged.
fn journal_error(context: &str, error: mcpproxy_activity::Error) -> ApiError {
    match error {
        e @ mcpproxy_activity::Error::Damaged { .. } => {
            tracing::error!("{context}: {e}");
            ApiError {
                status: http::StatusCode::INTERNAL_SERVER_ERROR,
                message: format!("{context}: {e}"),
            }
        }
        e => ApiError::internal(context, e),
    }
}

/// `GET /activity/sinks`: every registered sink's delivery status.
pub(super) async fn sinks(State(state): State<ApiState>) -> Result<Response, ApiError> {
    let report = match &state.delivery {
        Some(delivery) => delivery.report(),
        None => mcpproxy_activity::offline_report(&state.journal),
    }
    .map_err(|e| journal_error("cannot read the sinks' status", e))?;
    Ok(ok(report))
}

#[cfg(test)]
mod budget_tests {
    use super::*;
    use mcpproxy_activity::{ActivityRecord, Source};

    #[test]
    fn a_page_ends_at_its_byte_budget_but_holds_at_least_one_record() {
        let mut record = ActivityRecord::new(RecordType::ToolCall, Source::Mcp, "fx", "echo");
        record.arguments = Some(json!({"text": "x".repeat(1000)}));
        let records = vec![record; 10];
        let one = serde_json::to_vec(&records[0]).unwrap().len();
        assert_eq!(within_budget(&records, one * 3 + 1), 3);
        assert_eq!(within_budget(&records, 1), 1);
        assert_eq!(within_budget(&records, usize::MAX), 10);
    }

    #[test]
    fn the_type_filter_takes_every_record_type_and_names_them_when_wrong() {
        for name in [
            "tool_call",
            "prompt_get",
            "completion",
            "subscription",
            "server_change",
            "code_execution",
            "egress",
        ] {
            let query = HashMap::from([("type".to_owned(), name.to_owned())]);
            let (filter, _, _) = parse_query(&query).unwrap();
            assert_eq!(filter.record_type.map(RecordType::as_str), Some(name));
        }
        let query = HashMap::from([("type".to_owned(), "prompt".to_owned())]);
        let error = parse_query(&query).unwrap_err();
        assert!(
            error
                .message
                .ends_with("subscription, server_change, code_execution, egress"),
            "{}",
            error.message
        );
    }
}
