//! The `upstream_servers` tool's arguments read into a [`crate::manage`] call, and its
//! answer. Every field an agent sends is checked here or by the config's validation, which
//! names what is wrong.

use serde_json::{Map, Value, json};

use crate::manage::{Actor, Change, Manager, applied_json};
use mcpproxy_activity::IdentityRecord;
use mcpproxy_config::document::SERVER_KEYS;

/// The most lines `tail_log` returns.
const MAX_LINES: u64 = 500;
const DEFAULT_LINES: u64 = 50;

/// Fields of a server entry the tool passes on, each also in a `_json` string form: every
/// entry key but `auto_approve_tool_changes`, which is taken as given (a boolean).
fn entry_fields() -> impl Iterator<Item = &'static str> {
    SERVER_KEYS
        .into_iter()
        .filter(|key| *key != "auto_approve_tool_changes")
}

/// Runs one operation; the error is the message the agent reads.
pub(super) async fn run(
    manager: &Manager,
    arguments: &Map<String, Value>,
    identity: Option<IdentityRecord>,
) -> Result<Value, String> {
    let operation = match arguments.get("operation") {
        Some(Value::String(op)) => op.as_str(),
        _ => {
            return Err(
                "Parameter 'operation' is required: one of list, add, remove, update, patch, tail_log"
                    .into(),
            );
        }
    };
    if operation == "list" {
        let servers = manager.list();
        return Ok(json!({"total": servers.len(), "servers": servers}));
    }
    let name = match arguments.get("name") {
        Some(Value::String(name)) if !name.is_empty() => name.clone(),
        _ => {
            return Err(format!(
                "Parameter 'name' (the server's name) is required for {operation}"
            ));
        }
    };
    let change = match operation {
        "tail_log" => {
            let lines = match arguments.get("lines") {
                None | Some(Value::Null) => DEFAULT_LINES,
                Some(v) => match v.as_u64() {
                    Some(n) if (1..=MAX_LINES).contains(&n) => n,
                    _ => {
                        return Err(format!(
                            "Parameter 'lines' must be a whole number from 1 to {MAX_LINES}"
                        ));
                    }
                },
            };
            let (lines, total) = manager
                .logs(&name, lines as usize)
                .map_err(|e| e.to_string())?;
            return Ok(json!({"server": name, "lines": lines, "total_lines": total}));
        }
        "remove" => Change::Remove { name },
        "add" => Change::Add {
            entry: entry(arguments, false)?,
            name,
        },
        "update" | "patch" => Change::Patch {
            patch: entry(arguments, true)?,
            name,
        },
        other => {
            return Err(format!(
                "Unknown operation '{other}': use list, add, remove, update, patch or tail_log"
            ));
        }
    };
    let applied = manager
        .change_by(
            change,
            Actor::Agent,
            crate::manage::Approve::Launch,
            identity,
        )
        .await
        .map_err(|e| e.to_string())?;
    Ok(applied_json(&applied))
}

/// The server fields among the arguments, `args_json`-style strings decoded. In a patch a
/// field may be `null` (remove it).
fn entry(arguments: &Map<String, Value>, patch: bool) -> Result<Value, String> {
    let mut fields = Map::new();
    for field in entry_fields() {
        let json_key = format!("{field}_json");
        let value = match (arguments.get(field), arguments.get(&json_key)) {
            (Some(_), Some(_)) => {
                return Err(format!("Give '{field}' or '{json_key}', not both"));
            }
            (Some(value), None) => value.clone(),
            (None, Some(Value::String(text))) => serde_json::from_str(text)
                .map_err(|e| format!("Parameter '{json_key}' is not valid JSON: {e}"))?,
            (None, Some(_)) => return Err(format!("Parameter '{json_key}' must be a JSON string")),
            (None, None) => continue,
        };
        if value.is_null() && !patch {
            continue;
        }
        fields.insert(field.to_owned(), value);
    }
    if let Some(unknown) = arguments.keys().find(|k| {
        !matches!(
            k.as_str(),
            "operation" | "name" | "lines" | "auto_approve_tool_changes"
        ) && !entry_fields().any(|field| field == k.as_str())
            && !k
                .strip_suffix("_json")
                .is_some_and(|base| entry_fields().any(|field| field == base))
    }) {
        return Err(format!(
            "Unknown parameter '{unknown}' for upstream_servers; server fields are {}",
            entry_fields().collect::<Vec<_>>().join(", ")
        ));
    }
    if let Some(value) = arguments.get("auto_approve_tool_changes") {
        fields.insert("auto_approve_tool_changes".into(), value.clone());
    }
    if fields.is_empty() && patch {
        return Err("Nothing to change: give the fields to change (e.g. enabled: false)".into());
    }
    Ok(Value::Object(fields))
}
