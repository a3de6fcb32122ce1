//! `plugins check` for result guards: the smoke call (a small tool result through the
//! guard under its limits) and an author's result cases (`--cases`).

use mcpproxy_policy::{
    GuardAnswer, GuardContext, GuardItem, ItemAction, OperationType, ResultKind,
};

use super::Plugin;

/// One call with a small tool result, to show the guard runs under its limits; what it
/// answered, for people.
pub fn smoke(plugin: &Plugin) -> Result<String, String> {
    let context = GuardContext {
        kind: ResultKind::ToolResult,
        server: "example".into(),
        name: "list_items".into(),
        variant: Some(OperationType::Read),
        intent: None,
        annotations: None,
    };
    let items = [GuardItem::text("item 1: apples\nitem 2: pears")];
    let answer = plugin.guard(&context, &items).map_err(|f| f.to_string())?;
    Ok(format!(
        "a result of example:list_items: {}",
        describe(&answer)
    ))
}

/// A guard's answer in a few words: `pass`, `redact 2 (aws-access-key, jwt)`, `mark`,
/// `block: REASON`.
pub fn describe(answer: &GuardAnswer) -> String {
    match answer {
        GuardAnswer::Block(block) => format!(
            "block ({}): {}",
            block.kind,
            mcpproxy_policy::quote(&block.reason)
        ),
        GuardAnswer::Items(actions) => {
            let mut kinds: Vec<String> = Vec::new();
            let mut marked = 0;
            for action in actions {
                match action {
                    ItemAction::Pass => {}
                    ItemAction::Redact(spans) => {
                        kinds.extend(spans.iter().map(|s| mcpproxy_policy::clean_kind(&s.kind)));
                    }
                    ItemAction::Mark(_) => marked += 1,
                }
            }
            let mut parts = Vec::new();
            if !kinds.is_empty() {
                let count = kinds.len();
                kinds.sort();
                kinds.dedup();
                parts.push(format!("redact {count} ({})", kinds.join(", ")));
            }
            if marked > 0 {
                parts.push(format!("mark {marked}"));
            }
            if parts.is_empty() {
                "pass".to_owned()
            } else {
                parts.join(", ")
            }
        }
    }
}
