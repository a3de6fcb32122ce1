//! The inner calls of a `code_execution` record, under it as a tree, for `activity show`:
//! each call's record is read by the id the execution's `details.calls` lists, and printed
//! one line each (escaped: every field may come from a caller or an upstream).

use anyhow::Result;
use serde_json::Value;

use mcpproxy_activity::ActivityRecord;
use mcpproxy_policy::OperationType;
use mcpproxy_support::quote;

use super::store::{Store, Trail};

/// Prints `record`'s inner calls, if it has any.
pub(super) async fn print_inner_calls(store: &Trail, record: &ActivityRecord) -> Result<()> {
    let ids: Vec<&str> = record
        .details
        .as_ref()
        .and_then(|d| d.get("calls"))
        .and_then(Value::as_array)
        .map(|ids| ids.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if ids.is_empty() {
        return Ok(());
    }
    println!("Inner calls: {}", ids.len());
    for (i, id) in ids.iter().enumerate() {
        let branch = if i + 1 == ids.len() {
            "└─"
        } else {
            "├─"
        };
        match read(store, id).await? {
            Some(call) => println!("{branch} {}", line(&call)),
            None => println!("{branch} {} (no record: removed by retention?)", quote(id)),
        }
    }
    Ok(())
}

async fn read(store: &Trail, id: &str) -> Result<Option<ActivityRecord>> {
    match store {
        Trail::Store(Store::Remote(remote)) => {
            match remote.get(&format!("/activity/{id}"), &[]).await {
                Ok(value) => Ok(serde_json::from_value(value).ok()),
                Err(_) => Ok(None),
            }
        }
        Trail::Store(Store::Local(journal)) => Ok(journal.get(id)?),
        Trail::Cluster(cluster) => Ok(cluster.get(id).await?),
    }
}

/// `ID server:tool via call_tool_read: status, N ms[: why]`.
fn line(call: &ActivityRecord) -> String {
    let mut line = format!(
        "{} {}:{} via {}: {}, {} ms",
        quote(&call.id),
        quote(&call.server_name),
        quote(&call.tool_name),
        call.tool_variant.map_or("-", OperationType::tool_name),
        quote(call.status.as_str()),
        call.duration_ms
    );
    let why = call
        .error_message
        .as_deref()
        .or(call.verdict.message.as_deref());
    if let Some(why) = why {
        line.push_str(": ");
        line.push_str(&quote(why));
    }
    line
}
