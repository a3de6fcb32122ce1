//! One activity record as the commands show it: read once into an [`ActivityRecord`], from
//! the server's JSON or from the journal. A server may be newer than this build: a record of
//! a type this build does not know is read all the same, its type kept by name (and shown by
//! its intent).

use serde::Deserialize;
use serde_json::Value;

use mcpproxy_activity::{ActivityRecord, RecordType};

/// A record and its type as this build knows it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ShownRecord {
    /// The record. Its `record_type` is meaningless when [`ShownRecord::record_type`] is
    /// `None` (it holds the default): read the type from [`ShownRecord`].
    pub(super) record: ActivityRecord,
    kind: ShownType,
}

/// A record's type, as far as this build knows it.
#[derive(Debug, Clone, PartialEq)]
enum ShownType {
    Known(RecordType),
    /// A type of a newer server, by its wire name.
    Unknown(String),
}

impl ShownRecord {
    /// Reads one record of a server's answer.
    pub(super) fn read(json: &Value) -> serde_json::Result<Self> {
        let error = match ActivityRecord::deserialize(json) {
            Ok(record) => return Ok(record.into()),
            Err(error) => error,
        };
        // Perhaps a type this build does not know: read the rest without it.
        let Some(Value::String(name)) = json.get("type") else {
            return Err(error);
        };
        let mut rest = json.clone();
        if let Some(fields) = rest.as_object_mut() {
            fields.remove("type");
        }
        let mut record = ActivityRecord::deserialize(&rest)?;
        let kind = match RecordType::parse(name) {
            Some(known) => {
                record.record_type = known;
                ShownType::Known(known)
            }
            None => ShownType::Unknown(name.clone()),
        };
        Ok(Self { record, kind })
    }

    /// The record's type; `None` for a type this build does not know.
    pub(super) fn record_type(&self) -> Option<RecordType> {
        match self.kind {
            ShownType::Known(known) => Some(known),
            ShownType::Unknown(_) => None,
        }
    }

    /// The record's type by its wire name (`tool_call`, ...), known to this build or not.
    pub(super) fn type_name(&self) -> &str {
        match &self.kind {
            ShownType::Known(known) => known.as_str(),
            ShownType::Unknown(name) => name,
        }
    }
}

impl From<ActivityRecord> for ShownRecord {
    fn from(record: ActivityRecord) -> Self {
        Self {
            kind: ShownType::Known(record.record_type),
            record,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpproxy_activity::{Source, Status};
    use serde_json::json;

    #[test]
    fn a_record_reads_as_the_journal_wrote_it() {
        let mut record = ActivityRecord::new(RecordType::PromptGet, Source::Cli, "fx", "greet");
        record.status = Status::Success;
        let shown = ShownRecord::read(&serde_json::to_value(&record).unwrap()).unwrap();
        assert_eq!(shown, ShownRecord::from(record));
        assert_eq!(shown.record_type(), Some(RecordType::PromptGet));
        assert_eq!(shown.type_name(), "prompt_get");
    }

    #[test]
    fn a_newer_servers_type_is_kept_by_name() {
        let shown = ShownRecord::read(&json!({
            "type": "future_kind", "server_name": "fx", "status": "error",
        }))
        .unwrap();
        assert_eq!(shown.record_type(), None);
        assert_eq!(shown.type_name(), "future_kind");
        assert_eq!(shown.record.server_name, "fx");
        assert_eq!(shown.record.status, Status::Error);
        // Anything else this build cannot read is still an error.
        assert!(ShownRecord::read(&json!({"type": "future_kind", "status": "odd"})).is_err());
        assert!(ShownRecord::read(&json!({"type": "tool_call", "status": "odd"})).is_err());
        assert!(ShownRecord::read(&json!([1, 2])).is_err());
    }
}
