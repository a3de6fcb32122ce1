//! The config file as a document, for the changes mcpproxy makes itself (the
//! `upstream_servers` tool, `mcpproxy upstream add|remove|enable|disable|import`, the REST
//! API): the JSON is edited in place, keys stay in the order they were written, and
//! everything the change does not touch is kept as it was. The caller validates the new
//! text as a whole ([`super::Config::from_json_in`]) before [`write_atomically`] replaces
//! the file.

use std::fmt;
use std::io::Write;
use std::path::Path;

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The keys of an `mcpServers` entry besides `name`, in the order the docs list them and a
/// server added by mcpproxy is written in: first how the server is started or reached
/// ([`LAUNCH_KEYS`]), then how mcpproxy treats it.
pub const SERVER_KEYS: [&str; 15] = [
    "command",
    "args",
    "env",
    "working_dir",
    "url",
    "headers",
    "protocol",
    "isolation",
    "enabled",
    "quarantined",
    "auto_approve_tool_changes",
    "tool_call_timeout_ms",
    "start",
    "idle_stop_secs",
    "oauth",
];

/// The keys of an `mcpServers` entry that say how the server is started or reached.
pub const LAUNCH_KEYS: &[&str] = SERVER_KEYS.split_at(8).0;

/// Why an edit could not be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EditError {
    #[error("the config file is not a JSON object")]
    NotAnObject,
    #[error("mcpServers in the config file is neither a list nor an object")]
    ServersNotAList,
    #[error("a server named '{0}' already exists; use update or patch to change it")]
    Exists(String),
    #[error("no server named '{0}' in the config file")]
    NoSuchServer(String),
    #[error("'name' cannot be changed by a patch; remove the server and add it again")]
    Rename,
}

/// A JSON value whose objects keep their keys in order.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Object(Vec<(String, Node)>),
    Array(Vec<Node>),
    Scalar(Value),
}

impl Node {
    fn from_value(value: &Value) -> Self {
        match value {
            Value::Object(map) => Node::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), Node::from_value(v)))
                    .collect(),
            ),
            Value::Array(items) => Node::Array(items.iter().map(Node::from_value).collect()),
            scalar => Node::Scalar(scalar.clone()),
        }
    }

    fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Object(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut Node> {
        match self {
            Node::Object(entries) => entries.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Sets `key`, in place if it exists, else at the end.
    fn set(&mut self, key: &str, value: Node) {
        if let Node::Object(entries) = self {
            match entries.iter_mut().find(|(k, _)| k == key) {
                Some((_, existing)) => *existing = value,
                None => entries.push((key.to_owned(), value)),
            }
        }
    }

    fn remove(&mut self, key: &str) -> Option<Node> {
        match self {
            Node::Object(entries) => {
                let at = entries.iter().position(|(k, _)| k == key)?;
                Some(entries.remove(at).1)
            }
            _ => None,
        }
    }

    /// Deep merge: an object merges into an object key by key; `null` removes the key;
    /// anything else (scalars, arrays) replaces.
    fn merge(&mut self, patch: &Value) {
        let Value::Object(changes) = patch else {
            *self = Node::from_value(patch);
            return;
        };
        if !matches!(self, Node::Object(_)) {
            *self = Node::Object(Vec::new());
        }
        for (key, change) in changes {
            match change {
                Value::Null => {
                    self.remove(key);
                }
                Value::Object(_) => match self.get_mut(key) {
                    Some(existing @ Node::Object(_)) => existing.merge(change),
                    _ => {
                        let mut fresh = Node::Object(Vec::new());
                        fresh.merge(change);
                        self.set(key, fresh);
                    }
                },
                other => self.set(key, Node::from_value(other)),
            }
        }
    }

    fn to_value(&self) -> Value {
        match self {
            Node::Object(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_value()))
                    .collect(),
            ),
            Node::Array(items) => Value::Array(items.iter().map(Node::to_value).collect()),
            Node::Scalar(v) => v.clone(),
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NodeVisitor;
        impl<'de> Visitor<'de> for NodeVisitor {
            type Value = Node;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("JSON")
            }
            fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
                Ok(Node::Scalar(Value::Bool(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
                Ok(Node::Scalar(Value::from(v)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
                Ok(Node::Scalar(Value::from(v)))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
                Ok(Node::Scalar(Value::from(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Node, E> {
                Ok(Node::Scalar(Value::String(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Node, E> {
                Ok(Node::Scalar(Value::String(v)))
            }
            fn visit_unit<E>(self) -> Result<Node, E> {
                Ok(Node::Scalar(Value::Null))
            }
            fn visit_none<E>(self) -> Result<Node, E> {
                Ok(Node::Scalar(Value::Null))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Node::Array(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
                let mut entries: Vec<(String, Node)> = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, Node>()? {
                    // A key written twice: the last one counts, as serde_json reads it.
                    entries.retain(|(k, _)| *k != key);
                    entries.push((key, value));
                }
                Ok(Node::Object(entries))
            }
        }
        deserializer.deserialize_any(NodeVisitor)
    }
}

impl Serialize for Node {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::Object(entries) => {
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
            Node::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Node::Scalar(v) => v.serialize(serializer),
        }
    }
}

/// The config file's JSON, edited in place.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    root: Node,
}

impl Document {
    /// An empty config (`{}`), for a file that does not exist yet.
    pub fn empty() -> Self {
        Self {
            root: Node::Object(Vec::new()),
        }
    }

    /// Reads `text` (already validated as a config, or empty).
    pub fn parse(text: &str) -> Result<Self, EditError> {
        if text.trim().is_empty() {
            return Ok(Self::empty());
        }
        let root: Node = serde_json::from_str(text).map_err(|_| EditError::NotAnObject)?;
        if !matches!(root, Node::Object(_)) {
            return Err(EditError::NotAnObject);
        }
        Ok(Self { root })
    }

    /// The text to write: indented by two spaces, ending in a newline.
    pub fn to_text(&self) -> String {
        let mut text = serde_json::to_string_pretty(&self.root).unwrap_or_default();
        text.push('\n');
        text
    }

    /// The servers as written: `(name, entry)` in file order (an entry of the Claude
    /// Desktop object form has no `name` key of its own).
    pub fn servers(&self) -> Vec<(String, Value)> {
        match self.root.get("mcpServers") {
            Some(Node::Array(items)) => items
                .iter()
                .map(|item| {
                    let value = item.to_value();
                    let name = value["name"].as_str().unwrap_or_default().to_owned();
                    (name, value)
                })
                .collect(),
            Some(Node::Object(entries)) => entries
                .iter()
                .map(|(name, entry)| (name.clone(), entry.to_value()))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Adds a server at the end, in the form the file already uses (a list unless the file
    /// maps names to servers).
    pub fn add_server(&mut self, name: &str, entry: &Value) -> Result<(), EditError> {
        if self.servers().iter().any(|(n, _)| n == name) {
            return Err(EditError::Exists(name.to_owned()));
        }
        let mut fields = entry.as_object().cloned().unwrap_or_default();
        fields.remove("name");
        match self.root.get_mut("mcpServers") {
            Some(Node::Object(entries)) => {
                entries.push((name.to_owned(), ordered_fields(fields)));
            }
            Some(Node::Array(items)) => items.push(named(name, fields)),
            Some(_) => return Err(EditError::ServersNotAList),
            None => self
                .root
                .set("mcpServers", Node::Array(vec![named(name, fields)])),
        }
        Ok(())
    }

    pub fn remove_server(&mut self, name: &str) -> Result<(), EditError> {
        let removed = match self.root.get_mut("mcpServers") {
            Some(Node::Array(items)) => {
                let before = items.len();
                items.retain(|item| item.get("name") != Some(&Node::Scalar(name.into())));
                items.len() < before
            }
            Some(Node::Object(entries)) => {
                let before = entries.len();
                entries.retain(|(k, _)| k != name);
                entries.len() < before
            }
            _ => false,
        };
        if removed {
            Ok(())
        } else {
            Err(EditError::NoSuchServer(name.to_owned()))
        }
    }

    /// Deep-merges `patch` into the server's entry: scalars and arrays replace, objects
    /// (`env`, `headers`) merge key by key, `null` removes a key.
    pub fn patch_server(&mut self, name: &str, patch: &Value) -> Result<(), EditError> {
        if patch.get("name").is_some_and(|n| n.as_str() != Some(name)) {
            return Err(EditError::Rename);
        }
        let mut patch = patch.clone();
        if let Some(fields) = patch.as_object_mut() {
            fields.remove("name");
        }
        let entry = match self.root.get_mut("mcpServers") {
            Some(Node::Array(items)) => items
                .iter_mut()
                .find(|item| item.get("name") == Some(&Node::Scalar(name.into()))),
            Some(Node::Object(entries)) => {
                entries.iter_mut().find(|(k, _)| k == name).map(|(_, v)| v)
            }
            _ => None,
        };
        let entry = entry.ok_or_else(|| EditError::NoSuchServer(name.to_owned()))?;
        entry.merge(&patch);
        Ok(())
    }
}

/// The entries of the object at `path` (object keys, in order) in any JSON text, in the
/// order they are written: `None` if the text is not JSON or has no object there. For
/// reading other programs' config files in their own order.
pub fn object_entries(text: &str, path: &[&str]) -> Option<Vec<(String, Value)>> {
    let mut node: Node = serde_json::from_str(text).ok()?;
    for key in path {
        node = node.remove(key)?;
    }
    match node {
        Node::Object(entries) => Some(
            entries
                .into_iter()
                .map(|(k, v)| (k, v.to_value()))
                .collect(),
        ),
        _ => None,
    }
}

/// Another program's JSON config (an IDE's MCP servers), with the entry `name` of the
/// object at `path` set to `fields` (in that order; the object and the ones above it made
/// if missing) or, with `None`, removed; every other key keeps its place and value. The new
/// text (indented by two spaces), or `None` if the text is not a JSON object or something
/// on `path` is not an object.
pub fn with_object_entry(
    text: &str,
    path: &[&str],
    name: &str,
    fields: Option<&[(&str, Value)]>,
) -> Option<String> {
    let mut root: Node = if text.trim().is_empty() {
        Node::Object(Vec::new())
    } else {
        serde_json::from_str(text).ok()?
    };
    let mut node = &mut root;
    for key in path {
        if !matches!(node, Node::Object(_)) {
            return None;
        }
        if node.get(key).is_none() {
            if fields.is_none() {
                return Some(Document { root }.to_text());
            }
            node.set(key, Node::Object(Vec::new()));
        }
        node = node.get_mut(key)?;
    }
    if !matches!(node, Node::Object(_)) {
        return None;
    }
    match fields {
        Some(fields) => node.set(
            name,
            Node::Object(
                fields
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), Node::from_value(v)))
                    .collect(),
            ),
        ),
        None => {
            node.remove(name);
        }
    }
    if !matches!(root, Node::Object(_)) {
        return None;
    }
    Some(Document { root }.to_text())
}

/// A list entry: `name` first, then the fields in the order the docs list them.
fn named(name: &str, fields: serde_json::Map<String, Value>) -> Node {
    let mut entries = vec![("name".to_owned(), Node::Scalar(Value::String(name.into())))];
    if let Node::Object(ordered) = ordered_fields(fields) {
        entries.extend(ordered);
    }
    Node::Object(entries)
}

/// A server's fields as an object, the usual ones first in their usual order.
fn ordered_fields(mut fields: serde_json::Map<String, Value>) -> Node {
    let mut entries = Vec::new();
    for key in SERVER_KEYS {
        if let Some(value) = fields.remove(key) {
            entries.push((key.to_owned(), Node::from_value(&value)));
        }
    }
    entries.extend(fields.iter().map(|(k, v)| (k.clone(), Node::from_value(v))));
    Node::Object(entries)
}

/// Replaces `path` with `text` so that no reader ever sees half a file: written to a
/// temporary file beside it (with the old file's permissions, 0600 for a new one), synced,
/// renamed over it, and the directory synced.
pub fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    // The config's directory is usually the data dir: made 0700 if missing.
    mcpproxy_support::create_private_dir(dir)?;
    let mode = std::fs::metadata(path).map_or(0o600, |m| m.permissions().mode() & 0o7777);
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "mcp_config.json".to_owned());
    let temporary = dir.join(format!(".{file_name}.{}.tmp", std::process::id()));
    let result = (|| {
        use std::os::unix::fs::OpenOptionsExt;
        // Created with the final mode (never wider): the file may hold tokens.
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)?;
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)?;
        if let Ok(dir) = std::fs::File::open(dir) {
            let _ = dir.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FILE: &str = r#"{
  "listen": "127.0.0.1:8080",
  "mcpServers": [
    {"name": "fs", "command": "npx", "args": ["-y", "fs"], "env": {"A": "1", "B": "2"}}
  ],
  "activity": {"durability": "async"}
}"#;

    #[test]
    fn the_launch_keys_are_the_ones_that_start_or_reach_a_server() {
        assert_eq!(
            LAUNCH_KEYS,
            [
                "command",
                "args",
                "env",
                "working_dir",
                "url",
                "headers",
                "protocol",
                "isolation"
            ]
        );
    }

    #[test]
    fn keys_keep_their_order_and_untouched_parts_stay() {
        let mut doc = Document::parse(FILE).unwrap();
        doc.add_server("gh", &json!({"url": "http://h/mcp", "quarantined": true}))
            .unwrap();
        let text = doc.to_text();
        let listen = text.find("\"listen\"").unwrap();
        let servers = text.find("\"mcpServers\"").unwrap();
        let activity = text.find("\"activity\"").unwrap();
        assert!(listen < servers && servers < activity, "{text}");
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["mcpServers"][1]["name"], "gh");
        assert_eq!(value["mcpServers"][1]["quarantined"], true);
        assert_eq!(value["activity"], json!({"durability": "async"}));
        assert_eq!(
            doc.add_server("gh", &json!({})),
            Err(EditError::Exists("gh".into()))
        );
    }

    #[test]
    fn a_patch_merges_maps_replaces_arrays_and_scalars_and_null_removes() {
        let mut doc = Document::parse(FILE).unwrap();
        doc.patch_server(
            "fs",
            &json!({"args": ["fs2"], "env": {"B": "3", "C": "4", "A": null}, "enabled": false}),
        )
        .unwrap();
        let servers = doc.servers();
        assert_eq!(
            servers[0].1,
            json!({"name": "fs", "command": "npx", "args": ["fs2"],
                   "env": {"B": "3", "C": "4"}, "enabled": false})
        );
        assert_eq!(
            doc.patch_server("nope", &json!({})),
            Err(EditError::NoSuchServer("nope".into()))
        );
        assert_eq!(
            doc.patch_server("fs", &json!({"name": "other"})),
            Err(EditError::Rename)
        );
        doc.remove_server("fs").unwrap();
        assert!(doc.servers().is_empty());
    }

    #[test]
    fn the_claude_desktop_form_stays_a_map() {
        let mut doc = Document::parse(r#"{"mcpServers": {"a": {"command": "x"}}}"#).unwrap();
        doc.add_server("b", &json!({"name": "b", "command": "y"}))
            .unwrap();
        let value: Value = serde_json::from_str(&doc.to_text()).unwrap();
        assert_eq!(
            value["mcpServers"],
            json!({"a": {"command": "x"}, "b": {"command": "y"}})
        );
        let mut empty = Document::empty();
        empty.add_server("c", &json!({"command": "z"})).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&empty.to_text()).unwrap(),
            json!({"mcpServers": [{"name": "c", "command": "z"}]})
        );
    }

    #[test]
    fn an_atomic_write_keeps_the_mode_and_leaves_no_temporary_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp_config.json");
        write_atomically(&path, "{}\n").unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_atomically(&path, "{\"listen\": \"127.0.0.1:1\"}\n").unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o640
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
