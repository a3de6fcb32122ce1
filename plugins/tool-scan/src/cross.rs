//! `cross-server-reference`: another server's tool named as `server:tool`, or its bare name
//! as a whole word (4+ characters, not a common word, not a tool of this server), which can
//! steer the agent towards it.

use std::collections::{BTreeMap, BTreeSet};

use super::collect::{Collector, Location};
use super::evidence::clip;
use super::finding::{CROSS_SERVER_REFERENCE, Severity};
use super::pattern::{Norm, find_bounded};

/// Common words that are not taken for a tool name when they appear bare.
#[rustfmt::skip]
const STOP_WORDS: &[&str] = &[
    "about", "analyse", "analyze", "audio", "back", "bash", "browse", "build", "calculate",
    "calendar", "call", "chat", "check", "click", "clock", "close", "code", "command", "commands",
    "comment", "comments", "compute", "config", "contacts", "convert", "copy", "count", "crawl",
    "create", "data", "database", "date", "delete", "deploy", "describe", "download", "drag",
    "echo", "edit", "email", "evaluate", "event", "events", "execute", "explain", "extract",
    "fetch", "file", "files", "fill", "filter", "find", "form", "format", "generate", "help",
    "hello", "hover", "html", "image", "images", "index", "info", "insert", "install", "invoke",
    "issue", "issues", "item", "items", "json", "link", "links", "list", "load", "login", "logout",
    "lookup", "math", "memory", "merge", "message", "messages", "move", "navigate", "news", "next",
    "note", "notes", "open", "page", "pages", "parse", "ping", "plan", "post", "posts", "press",
    "price", "print", "prompt", "prompts", "query", "quote", "random", "read", "record", "records",
    "refresh", "reload", "remember", "remove", "render", "reply", "resolve", "resource",
    "resources", "review", "save", "schedule", "schema", "scrape", "screenshot", "scroll", "search",
    "select", "send", "settings", "shell", "show", "sleep", "sort", "split", "start", "status",
    "stock", "stop", "store", "submit", "summarize", "sync", "table", "tables", "task", "tasks",
    "terminal", "test", "text", "think", "time", "tool", "tools", "translate", "type", "update",
    "upload", "user", "users", "validate", "version", "video", "view", "wait", "weather", "write",
];

/// The other servers' tools, grouped by lowercased tool name.
pub(crate) struct Others {
    tools: Vec<OtherTool>,
}

/// One tool name of the other servers.
struct OtherTool {
    /// Lowercased, for matching.
    key: String,
    /// As the first server spells it, for details.
    name: String,
    servers: Vec<String>,
}

impl Others {
    pub(crate) fn new(other_tools: &[&str]) -> Others {
        let mut index: BTreeMap<String, usize> = BTreeMap::new();
        let mut tools: Vec<OtherTool> = Vec::new();
        for entry in other_tools {
            let (server, name) = entry.split_once(':').unwrap_or(("", entry));
            let name = name.trim();
            if name.is_empty() {
                continue;
            }
            let slot = *index.entry(name.to_lowercase()).or_insert_with_key(|key| {
                tools.push(OtherTool {
                    key: key.clone(),
                    name: name.to_string(),
                    servers: Vec::new(),
                });
                tools.len() - 1
            });
            let server = server.trim().to_string();
            if !tools[slot].servers.contains(&server) {
                tools[slot].servers.push(server);
            }
        }
        Others { tools }
    }
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-'
}

pub(crate) fn cross_references(
    c: &mut Collector,
    location: &Location,
    norm: &Norm<'_>,
    others: &Others,
    own: &BTreeSet<String>,
) {
    if others.tools.is_empty() {
        return;
    }
    let text = norm.text.as_str();
    let mut words: BTreeMap<&str, usize> = BTreeMap::new();
    let mut start = None;
    for (i, ch) in text
        .char_indices()
        .chain(std::iter::once((text.len(), ' ')))
    {
        match (is_name_char(ch), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                words.entry(&text[s..i]).or_insert(s);
                start = None;
            }
            _ => {}
        }
    }
    for OtherTool {
        key: name,
        name: shown,
        servers,
    } in &others.tools
    {
        let plain = name.chars().all(is_name_char);
        let present = if plain {
            words.contains_key(name.as_str())
        } else {
            text.contains(name.as_str())
        };
        if !present {
            continue;
        }
        let qualified = servers.iter().filter(|s| !s.is_empty()).find_map(|server| {
            let needle = format!("{}:{name}", server.to_lowercase());
            find_bounded(text, &needle, is_name_char).map(|at| (at, at + needle.len(), server))
        });
        let detail = if let Some((a, b, server)) = qualified {
            format!(
                "{} names '{}:{}', a tool of another server, which can steer the agent into \
                 calling it: {}.",
                location.subject(),
                clip(server, 40),
                clip(shown, 60),
                norm.quote(a, b)
            )
        } else {
            let eligible = name.chars().count() >= 4
                && !STOP_WORDS.contains(&name.as_str())
                && !own.contains(name);
            let at = if plain {
                words.get(name.as_str()).copied()
            } else {
                find_bounded(text, name, is_name_char)
            };
            let Some(at) = at.filter(|_| eligible) else {
                continue;
            };
            let known: Vec<&String> = servers.iter().filter(|s| !s.is_empty()).collect();
            let mut named: Vec<String> = known
                .iter()
                .take(3)
                .map(|s| format!("'{}'", clip(s, 40)))
                .collect();
            if known.len() > 3 {
                named.push(format!("{} more", known.len() - 3));
            }
            let whose = match named.len() {
                0 => "another server".to_string(),
                1 => format!("server {}", named[0]),
                _ => format!("servers {}", named.join(", ")),
            };
            format!(
                "{} mentions '{}', a tool of {whose}, which can steer the agent towards \
                 another server's tool: {}.",
                location.subject(),
                clip(shown, 60),
                norm.quote(at, at + name.len())
            )
        };
        c.add(
            CROSS_SERVER_REFERENCE,
            Severity::Warning,
            name.clone(),
            || detail,
        );
    }
}
