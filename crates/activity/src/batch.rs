//! A batch for a sink: finished records as the journal stores them (their JSON), in outbox
//! order.
//!
//! The journal keeps each record as one compact JSON object, so a batch carries those bytes
//! as they are: a sink that stores JSON text gets them joined into NDJSON
//! ([`SinkBatch::ndjson`]) without a record being decoded or encoded again, and a sink that
//! wants typed records decodes them ([`SinkBatch::records`]). Rows are checked for framing
//! when read ([`StoredRecord::framed`]): a row that is not one line of JSON holding its own
//! id is skipped with a warning, as a query skips a row it cannot decode, so a damaged row
//! can neither split a line of NDJSON nor pass for another record.

use super::journal::key_id;
use super::record::ActivityRecord;

/// One record as the journal stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    /// The record's id (a ULID).
    pub id: String,
    /// The record's JSON: one compact object, no line feed, starting with its id.
    pub json: Vec<u8>,
}

impl StoredRecord {
    /// The row stored under `key`, if it is framed as the writer frames every record: one
    /// JSON object on one line whose first member is `"id"` with the key's own id. Anything
    /// else (a damaged page, a row written by something else) is logged and skipped.
    pub(super) fn framed(key: &[u8; 16], json: &[u8]) -> Option<Self> {
        let id = key_id(key);
        let head = [b"{\"id\":\"".as_slice(), id.as_bytes(), b"\""].concat();
        let problem = if !json.starts_with(&head) {
            Some("it does not start with its own id")
        } else if json.last() != Some(&b'}') {
            Some("it does not end with '}'")
        } else if json.contains(&b'\n') || json.contains(&b'\r') {
            Some("it contains a line break")
        } else {
            None
        };
        match problem {
            None => Some(Self {
                id,
                json: json.to_vec(),
            }),
            Some(problem) => {
                tracing::warn!(id = %id, "not delivering corrupt activity record: {problem}");
                None
            }
        }
    }

    /// The stored form of `record`, as the journal's writer would store it.
    pub fn encode(record: &ActivityRecord) -> Result<Self, serde_json::Error> {
        Ok(Self {
            id: record.id.clone(),
            json: serde_json::to_vec(record)?,
        })
    }

    /// The record, decoded; `None` (logged) if it does not decode.
    pub fn decode(&self) -> Option<ActivityRecord> {
        match serde_json::from_slice(&self.json) {
            Ok(record) => Some(record),
            Err(e) => {
                tracing::warn!(id = %self.id, "not delivering corrupt activity record: {e}");
                None
            }
        }
    }
}

/// The next records a sink should deliver.
#[derive(Debug, Clone, Default)]
pub struct SinkBatch {
    pub rows: Vec<StoredRecord>,
    /// The sequence number to move the cursor to once `rows` are delivered.
    pub last_seq: u64,
    /// More records were waiting behind this batch when it was read (it stopped at the
    /// batch size, not at the end of the outbox): the sink is draining a backlog.
    pub more: bool,
}

impl SinkBatch {
    /// A batch of `records` (for tests, benches and `mcpproxy plugins check`'s samples),
    /// encoded as the journal's writer encodes them.
    pub fn of(records: &[ActivityRecord]) -> Result<Self, serde_json::Error> {
        Ok(Self {
            rows: records
                .iter()
                .map(StoredRecord::encode)
                .collect::<Result<_, _>>()?,
            last_seq: 0,
            more: false,
        })
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn first_id(&self) -> Option<&str> {
        self.rows.first().map(|r| r.id.as_str())
    }

    pub fn last_id(&self) -> Option<&str> {
        self.rows.last().map(|r| r.id.as_str())
    }

    /// Bytes of JSON in the batch.
    pub fn json_bytes(&self) -> usize {
        self.rows.iter().map(|r| r.json.len()).sum()
    }

    /// The records as NDJSON: each one's JSON followed by a line feed.
    pub fn ndjson(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.ndjson_into(&mut out);
        out
    }

    /// [`Self::ndjson`] into `out`, replacing what it held (and reusing its allocation).
    pub fn ndjson_into(&self, out: &mut Vec<u8>) {
        out.clear();
        out.reserve(self.json_bytes() + self.rows.len());
        for row in &self.rows {
            out.extend_from_slice(&row.json);
            out.push(b'\n');
        }
    }

    /// The records decoded, each with its stored JSON; rows that do not decode are logged
    /// and left out.
    pub fn records(&self) -> Vec<(ActivityRecord, &StoredRecord)> {
        self.rows
            .iter()
            .filter_map(|row| Some((row.decode()?, row)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::parse_key;
    use crate::{RecordType, Source};

    fn record(tool: &str) -> ActivityRecord {
        ActivityRecord::new(RecordType::ToolCall, Source::Api, "github", tool)
    }

    #[test]
    fn stored_rows_frame_and_join_into_ndjson() {
        let records = [record("a"), record("b\nc")];
        let batch = SinkBatch::of(&records).unwrap();
        assert_eq!(batch.len(), 2);
        assert_eq!(batch.first_id(), Some(records[0].id.as_str()));
        assert_eq!(batch.last_id(), Some(records[1].id.as_str()));
        let ndjson = batch.ndjson();
        let lines: Vec<&[u8]> = ndjson
            .strip_suffix(b"\n")
            .unwrap()
            .split(|b| *b == b'\n')
            .collect();
        assert_eq!(
            lines.len(),
            2,
            "a line feed inside a record is escaped by the encoder"
        );
        for (line, rec) in lines.iter().zip(&records) {
            let back: ActivityRecord = serde_json::from_slice(line).unwrap();
            assert_eq!(&back, rec);
        }
        let decoded = batch.records();
        assert_eq!(decoded.len(), 2);
        assert_eq!(decoded[1].0.tool_name, "b\nc");
        // Every encoded row passes the writer's framing.
        for row in &batch.rows {
            let key = parse_key(&row.id).unwrap();
            assert_eq!(StoredRecord::framed(&key, &row.json).as_ref(), Some(row));
        }
    }

    #[test]
    fn rows_that_are_not_one_line_of_their_own_record_are_skipped() {
        let row = StoredRecord::encode(&record("a")).unwrap();
        let key = parse_key(&row.id).unwrap();
        let other = parse_key(&StoredRecord::encode(&record("b")).unwrap().id).unwrap();
        assert!(
            StoredRecord::framed(&other, &row.json).is_none(),
            "another id"
        );
        let cut = &row.json[..row.json.len() - 1];
        assert!(StoredRecord::framed(&key, cut).is_none(), "truncated");
        let mut split = row.json.clone();
        split.insert(40, b'\n');
        assert!(StoredRecord::framed(&key, &split).is_none(), "line feed");
        assert!(StoredRecord::framed(&key, b"").is_none());
        assert!(StoredRecord::framed(&key, b"\xff\xfe garbage }").is_none());
        // Framed but not JSON: skipped when decoded.
        let mut bad = row.json.clone();
        bad.insert(bad.len() - 1, b',');
        let bad = StoredRecord::framed(&key, &bad).unwrap();
        assert!(bad.decode().is_none());
    }
}
