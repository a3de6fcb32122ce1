//! The scanner's [`Settings`], read from the host's `config()` JSON: `ignore_kinds`, a list
//! of finding kinds to drop. Anything wrong with them is a message for the single
//! `scanner-error` finding that replaces the scan.

use serde_json::Value;

use super::evidence::clip;
use super::finding::KINDS;

/// The scanner's settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// Kinds whose findings are dropped.
    pub ignore_kinds: Vec<&'static str>,
}

impl Settings {
    /// Reads the settings JSON. Keys other than `ignore_kinds` belong to the host and are
    /// ignored; empty text means no settings.
    pub fn parse(config: &str) -> Result<Settings, String> {
        if config.trim().is_empty() {
            return Ok(Settings::default());
        }
        let value: Value = serde_json::from_str(config)
            .map_err(|e| format!("they are not valid JSON ({})", clip(&e.to_string(), 120)))?;
        let Value::Object(map) = value else {
            return Err(format!(
                "they must be a JSON object, not {}",
                json_type(&value)
            ));
        };
        let mut settings = Settings::default();
        match map.get("ignore_kinds") {
            None => {}
            Some(Value::Array(items)) => {
                for item in items {
                    let Value::String(given) = item else {
                        return Err(format!(
                            "`ignore_kinds` must list kinds as strings, but it holds {}",
                            json_type(item)
                        ));
                    };
                    let Some(kind) = KINDS.iter().find(|k| **k == given.as_str()) else {
                        return Err(format!(
                            "`ignore_kinds` names '{}', which is not a finding kind (the kinds \
                             are {})",
                            clip(given, 40),
                            KINDS.join(", ")
                        ));
                    };
                    if !settings.ignore_kinds.contains(kind) {
                        settings.ignore_kinds.push(kind);
                    }
                }
            }
            Some(other) => {
                return Err(format!(
                    "`ignore_kinds` must be a list of finding kinds, not {}",
                    json_type(other)
                ));
            }
        }
        Ok(settings)
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
