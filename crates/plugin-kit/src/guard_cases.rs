//! `plugins check` for result guards: the smoke call (a small tool result through the
//! guard under its limits) and an author's result cases (`--cases`): results (what the
//! guard is told about the request, and the items) with the answer each must get. Parsing
//! is strict, as for a validator's cases: an unknown key or a wrong type names the case's
//! index and the key.

use mcpproxy_policy::{
    GuardAnswer, GuardContext, GuardItem, ItemAction, ItemKind, OperationType, ResultKind,
};

use crate::cases::CasesError;
use crate::suite::CaseResult;
use mcpproxy_plugin_host::Plugin;

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
            mcpproxy_support::quote(&block.reason)
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

/// What a result case expects of the guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum Expected {
    /// Every item passes.
    Pass,
    /// Some item is redacted (and, with `kinds`, exactly those kinds are found).
    Redact,
    /// Some item is marked.
    Mark,
    /// The result is blocked (with `message`, the reason contains it).
    Block,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResult {
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    server: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    variant: Option<OperationType>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(untagged)]
enum RawItem {
    Text(String),
    Full {
        #[serde(default)]
        kind: Option<String>,
        text: String,
        #[serde(default)]
        uri: Option<String>,
    },
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGuardCase {
    /// Read before this is deserialized (error messages name the case); allowed here.
    #[serde(default, rename = "name")]
    _name: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    result: Option<RawResult>,
    items: Vec<RawItem>,
    #[serde(default)]
    settings: Option<serde_json::Map<String, serde_json::Value>>,
    expect: Expected,
    #[serde(default)]
    kinds: Option<Vec<String>>,
    #[serde(default)]
    message: Option<String>,
}

/// One result case of a cases file, checked.
#[derive(Debug)]
pub struct GuardCase {
    pub name: String,
    context: GuardContext,
    items: Vec<GuardItem>,
    settings: Option<serde_json::Value>,
    expect: Expected,
    kinds: Option<Vec<String>>,
    message: Option<String>,
}

/// Reads the result cases of a guard's cases file: a JSON array of
/// `{"name", "result": {"kind", "server", "name", "variant"}, "items": ["text" or
/// {"kind", "text", "uri"}], "settings", "expect": "pass"|"redact"|"mark"|"block", "kinds",
/// "message"}`.
pub fn load(path: &std::path::Path) -> Result<Vec<GuardCase>, CasesError> {
    crate::cases::load_items(path, guard_case)
}

/// Parses the text of a guard's cases file (`file` names it in errors).
pub fn parse(text: &str, file: &str) -> Result<Vec<GuardCase>, CasesError> {
    crate::cases::parse_items(text, file, guard_case)
}

fn guard_case(item: &serde_json::Value, index: usize, file: &str) -> Result<GuardCase, CasesError> {
    let name = item
        .get("name")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned);
    let error = |key: String, reason: String| CasesError::Case {
        file: file.to_owned(),
        index,
        name: name
            .as_deref()
            .map(|n| format!(" ({n:?})"))
            .unwrap_or_default(),
        key,
        reason,
    };
    let raw: RawGuardCase = serde_path_to_error::deserialize(item).map_err(|e| {
        let key = e.path().to_string();
        error(key, e.into_inner().to_string())
    })?;
    let result = raw.result.unwrap_or(RawResult {
        kind: None,
        server: None,
        name: None,
        variant: None,
    });
    let kind = match result.kind.as_deref() {
        None | Some("tool-result") => ResultKind::ToolResult,
        Some("prompt") => ResultKind::Prompt,
        Some("resource") => ResultKind::Resource,
        Some(other) => {
            return Err(error(
                "result.kind".into(),
                format!("'{other}' is not one of tool-result, prompt, resource"),
            ));
        }
    };
    let mut items = Vec::with_capacity(raw.items.len());
    for (i, item) in raw.items.into_iter().enumerate() {
        items.push(match item {
            RawItem::Text(text) => GuardItem::text(text),
            RawItem::Full { kind, text, uri } => GuardItem {
                kind: match kind.as_deref() {
                    None | Some("text") => ItemKind::Text,
                    Some("resource-text") => ItemKind::ResourceText,
                    Some("structured") => ItemKind::Structured,
                    Some(other) => {
                        return Err(error(
                            format!("items[{i}].kind"),
                            format!("'{other}' is not one of text, resource-text, structured"),
                        ));
                    }
                },
                text,
                uri,
            },
        });
    }
    if raw.expect != Expected::Block && raw.message.is_some() {
        return Err(error(
            "message".into(),
            "only a `block` has a message: remove `message`, or expect block".into(),
        ));
    }
    Ok(GuardCase {
        name: name.unwrap_or_else(|| format!("case {index}")),
        context: GuardContext {
            kind,
            server: result.server.unwrap_or_else(|| "example".into()),
            name: result.name.unwrap_or_else(|| "list_items".into()),
            variant: match kind {
                ResultKind::Prompt => result.variant,
                _ => Some(result.variant.unwrap_or(OperationType::Read)),
            },
            intent: None,
            annotations: None,
        },
        items,
        settings: raw.settings.map(serde_json::Value::Object),
        expect: raw.expect,
        kinds: raw.kinds,
        message: raw.message,
    })
}

impl GuardCase {
    /// Runs the case against `plugin` (with the case's settings, else `settings`).
    pub fn run(&self, plugin: &Plugin, settings: &serde_json::Value) -> CaseResult {
        let settings = self.settings.as_ref().unwrap_or(settings).to_string();
        let expected = match (&self.expect, &self.kinds, &self.message) {
            (Expected::Redact, Some(kinds), _) => format!("redact ({})", kinds.join(", ")),
            (Expected::Block, _, Some(message)) => format!("block containing {message:?}"),
            (expect, _, _) => format!("{expect:?}").to_lowercase(),
        };
        let answer = plugin.guard_with_settings(&self.context, &self.items, &settings);
        let (passed, got) = match answer {
            Err(fault) => (false, fault.to_string()),
            Ok(answer) => (self.matches(&answer), describe(&answer)),
        };
        CaseResult {
            name: self.name.clone(),
            passed,
            expected,
            got,
        }
    }

    fn matches(&self, answer: &GuardAnswer) -> bool {
        let actions = match answer {
            GuardAnswer::Block(block) => {
                return self.expect == Expected::Block
                    && self
                        .message
                        .as_ref()
                        .is_none_or(|m| block.reason.contains(m.as_str()));
            }
            GuardAnswer::Items(actions) => actions,
        };
        let redacted: Vec<String> = actions
            .iter()
            .filter_map(|a| match a {
                ItemAction::Redact(spans) if !spans.is_empty() => Some(spans),
                _ => None,
            })
            .flatten()
            .map(|s| mcpproxy_policy::clean_kind(&s.kind))
            .collect();
        let marked = actions.iter().any(|a| matches!(a, ItemAction::Mark(_)));
        match self.expect {
            Expected::Pass => redacted.is_empty() && !marked,
            Expected::Mark => marked,
            Expected::Block => false,
            Expected::Redact => match &self.kinds {
                None => !redacted.is_empty(),
                Some(kinds) => {
                    let mut got = redacted;
                    got.sort();
                    got.dedup();
                    let mut want: Vec<String> = kinds
                        .iter()
                        .map(|k| mcpproxy_policy::clean_kind(k))
                        .collect();
                    want.sort();
                    want.dedup();
                    got == want
                }
            },
        }
    }
}

#[cfg(test)]
mod tests;
