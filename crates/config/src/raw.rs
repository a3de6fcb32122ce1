//! Stage one: the file as written. Every key is optional and unknown keys are refused; the
//! values keep the file's own units (milliseconds, MiB, strings for paths and enums), so
//! [`super::validate`] can say exactly which value is wrong and why.
//!
//! Serde's messages are rewritten here into words for the person editing the file
//! (`expected a whole number, found the string "5"`), and the key path comes from
//! `serde_path_to_error`.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde_path_to_error::Segment;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawConfig {
    pub listen: Option<String>,
    pub data_dir: Option<String>,
    pub api_key: Option<String>,
    pub allowed_origins: Option<Vec<String>>,
    pub allowed_hosts: Option<Vec<String>>,
    pub tool_call_timeout_ms: Option<u64>,
    pub start: Option<String>,
    pub idle_stop_secs: Option<u64>,
    #[serde(rename = "mcpServers")]
    pub mcp_servers: Option<RawServers>,
    pub intent_declaration: Option<RawIntent>,
    pub plugins: Option<RawPlugins>,
    pub activity: Option<RawActivity>,
    pub upstream: Option<RawUpstream>,
    pub http: Option<RawHttp>,
    pub telemetry: Option<RawTelemetry>,
    pub management: Option<RawManagement>,
    pub isolation: Option<RawIsolation>,
    pub code_execution: Option<RawCodeExecution>,
    pub auth: Option<RawAuth>,
    pub cluster: Option<RawCluster>,
    pub scopes: Option<Vec<RawScope>>,
    pub rate_limits: Option<RawRateLimits>,
    pub approvals: Option<RawApprovals>,
}

/// `approvals`: the calls that wait for a person.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawApprovals {
    pub ask: Option<Vec<String>>,
    pub via: Option<String>,
    pub timeout_secs: Option<u64>,
    pub servers: Option<BTreeMap<String, RawServerApprovals>>,
}

/// `approvals.servers.NAME`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawServerApprovals {
    pub ask: Option<Vec<String>>,
    pub via: Option<String>,
    pub tools: Option<BTreeMap<String, Vec<String>>>,
}

/// One `scopes` rule: who it names and what they do not see.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawScope {
    pub subjects: Option<Vec<String>>,
    pub groups: Option<Vec<String>>,
    pub hide_servers: Option<Vec<String>>,
    pub hide_tools: Option<Vec<String>>,
    pub only_servers: Option<Vec<String>>,
}

/// `rate_limits`: token buckets per caller, per tool, per upstream.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawRateLimits {
    pub identity: Option<RawRate>,
    pub tools: Option<BTreeMap<String, RawRate>>,
    pub upstreams: Option<BTreeMap<String, RawRate>>,
}

/// One limit: `rate` calls per `per`, `burst` at once.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawRate {
    pub rate: Option<f64>,
    pub per: Option<String>,
    pub burst: Option<u64>,
}

/// `auth`: the authorization server whose access tokens `/mcp` takes.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawAuth {
    pub issuer: Option<String>,
    pub audience: Option<String>,
    pub resource: Option<String>,
    pub subject_claim: Option<String>,
    pub groups_claim: Option<String>,
}

/// `cluster`: replicas that share one state.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawCluster {
    pub postgres: Option<String>,
    pub replica: Option<String>,
    pub journal: Option<String>,
}

/// `mcpServers`: canonically a list; the Claude Desktop form maps names to servers.
#[derive(Debug)]
pub(super) enum RawServers {
    List(Vec<RawServer>),
    /// In document order; a name given twice appears twice.
    Map(Vec<(String, RawServer)>),
}

impl<'de> Deserialize<'de> for RawServers {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ServersVisitor)
    }
}

struct ServersVisitor;

impl<'de> Visitor<'de> for ServersVisitor {
    type Value = RawServers;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of servers (or an object from server names to servers)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawServers, A::Error> {
        let mut servers = Vec::new();
        while let Some(server) = seq.next_element()? {
            servers.push(server);
        }
        Ok(RawServers::List(servers))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawServers, A::Error> {
        let mut servers = Vec::new();
        while let Some(name) = map.next_key::<String>()? {
            let server = map.next_value()?;
            servers.push((name, server));
        }
        Ok(RawServers::Map(servers))
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawServer {
    pub name: Option<String>,
    pub command: Option<String>,
    pub args: Option<Vec<String>>,
    pub env: Option<BTreeMap<String, String>>,
    pub working_dir: Option<String>,
    pub url: Option<String>,
    pub headers: Option<BTreeMap<String, String>>,
    pub protocol: Option<String>,
    pub enabled: Option<bool>,
    pub quarantined: Option<bool>,
    pub auto_approve_tool_changes: Option<bool>,
    pub tool_call_timeout_ms: Option<u64>,
    pub start: Option<String>,
    pub idle_stop_secs: Option<u64>,
    pub isolation: Option<RawIsolation>,
    pub oauth: Option<RawOAuth>,
}

/// `oauth`, how mcpproxy logs in to an HTTP server that asks for it (OAuth 2.1).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawOAuth {
    pub enabled: Option<bool>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub client_metadata_url: Option<String>,
    pub client_name: Option<String>,
    pub scopes: Option<Vec<String>>,
    pub redirect_port: Option<u16>,
}

/// `isolation`, the sandbox of a stdio server: at the top level the default of every server,
/// in a server its own settings (each key given there wins).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawIsolation {
    pub enabled: Option<bool>,
    pub network: Option<serde_json::Value>,
    pub read: Option<Vec<String>>,
    pub write: Option<Vec<String>>,
    pub env_passthrough: Option<Vec<String>>,
    pub memory_mb: Option<u64>,
    pub max_processes: Option<u64>,
    pub open_files: Option<u64>,
    pub cpu_seconds: Option<u64>,
    pub required: Option<bool>,
    pub image: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawIntent {
    pub strict_server_validation: Option<bool>,
    pub require_operation_type: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawPlugins {
    pub dir: Option<String>,
    pub annotators: Option<Vec<String>>,
    pub validators: Option<Vec<String>>,
    pub sinks: Option<Vec<String>>,
    pub limits: Option<RawLimits>,
    pub plugin_limits: Option<BTreeMap<String, RawLimits>>,
    pub settings: Option<BTreeMap<String, serde_json::Value>>,
    pub guards: Option<Vec<String>>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawLimits {
    pub timeout_ms: Option<u64>,
    pub memory_mib: Option<u64>,
    pub reuse_instance: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawActivity {
    pub durability: Option<String>,
    pub async_flush_ms: Option<u64>,
    pub retention: Option<RawRetention>,
    pub delivery: Option<RawDelivery>,
    pub max_argument_bytes: Option<u64>,
    pub redact_keys: Option<Vec<String>>,
    pub checkpoints: Option<RawCheckpoints>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawCheckpoints {
    pub every_records: Option<u64>,
    pub every_secs: Option<u64>,
    pub signing_key: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawRetention {
    pub max_age_days: Option<u64>,
    pub min_age_hours: Option<u64>,
    pub interval_seconds: Option<u64>,
    pub max_records: Option<u64>,
    pub max_bytes: Option<u64>,
    pub max_undelivered_bytes: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawDelivery {
    pub batch_records: Option<u64>,
    pub batch_bytes: Option<u64>,
    pub interval_ms: Option<u64>,
    pub max_backoff_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawUpstream {
    pub reconnect_initial_ms: Option<u64>,
    pub reconnect_max_ms: Option<u64>,
    pub tools_refresh_secs: Option<u64>,
    pub advertise_roots: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawHttp {
    pub auth_token: Option<String>,
    pub max_connections: Option<u64>,
    pub max_sessions: Option<u64>,
    pub max_sessions_per_client: Option<u64>,
    pub header_timeout_ms: Option<u64>,
    pub session_idle_secs: Option<u64>,
    pub metrics_public: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawTelemetry {
    pub otlp_endpoint: Option<String>,
    pub otlp_headers: Option<BTreeMap<String, String>>,
    pub service_name: Option<String>,
    pub sample_ratio: Option<f64>,
    pub export_interval_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawManagement {
    pub upstream_servers_tool: Option<bool>,
    pub read_only: Option<bool>,
    pub subjects: Option<Vec<String>>,
    pub groups: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RawCodeExecution {
    pub enabled: Option<bool>,
    pub timeout_ms: Option<u64>,
    pub max_tool_calls: Option<u64>,
    pub memory_mib: Option<u64>,
    pub max_concurrent: Option<u64>,
}

/// A struct derived with `remote = "Self"`: its derived deserializer is an inherent function.
trait Derived<'de>: Sized {
    fn derived<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error>;
}

/// Accepts only a JSON object. serde's derive would also take a list of the fields'
/// values in declaration order, which no one writing a config means.
struct ObjectOnly<T>(PhantomData<T>);

impl<'de, T: Derived<'de>> Visitor<'de> for ObjectOnly<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::derived(MapAccessDeserializer::new(map))
    }
}

macro_rules! object_only {
    ($($raw:ident),* $(,)?) => {$(
        impl<'de> Derived<'de> for $raw {
            fn derived<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                $raw::deserialize(deserializer)
            }
        }

        impl<'de> Deserialize<'de> for $raw {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_map(ObjectOnly(PhantomData))
            }
        }
    )*};
}

object_only!(
    RawConfig,
    RawServer,
    RawIntent,
    RawPlugins,
    RawLimits,
    RawActivity,
    RawRetention,
    RawDelivery,
    RawCheckpoints,
    RawUpstream,
    RawHttp,
    RawTelemetry,
    RawManagement,
    RawIsolation,
    RawCodeExecution,
    RawOAuth,
    RawAuth,
    RawCluster,
    RawScope,
    RawRateLimits,
    RawRate,
    RawApprovals,
    RawServerApprovals,
);

/// Why the text could not be read as a [`RawConfig`].
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Failure {
    /// Not JSON at all.
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    /// JSON, but not the shape of a config: `key` is the key path.
    Shape { key: String, message: String },
}

/// Reads `text` as a [`RawConfig`].
pub(super) fn parse(text: &str) -> Result<RawConfig, Failure> {
    // Some editors on Windows start UTF-8 files with a byte-order mark; JSON does not.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Err(Failure::Shape {
            key: String::new(),
            message: "the file is empty: write `{}` for a config that keeps every default"
                .to_owned(),
        });
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let raw = match serde_path_to_error::deserialize::<_, RawConfig>(&mut de) {
        Ok(raw) => raw,
        Err(e) => {
            let path = e.path().clone();
            let inner = e.into_inner();
            return Err(if inner.is_syntax() || inner.is_eof() || inner.is_io() {
                syntax(text, &inner)
            } else {
                shape(&path, &inner)
            });
        }
    };
    de.end().map_err(|e| syntax(text, &e))?;
    Ok(raw)
}

fn syntax(text: &str, e: &serde_json::Error) -> Failure {
    let mut message = without_position(e);
    let at = text
        .lines()
        .nth(e.line().saturating_sub(1))
        .and_then(|line| line.get(e.column().saturating_sub(1)..));
    if at.is_some_and(|rest| rest.starts_with("//") || rest.starts_with("/*")) {
        message.push_str(" (JSON has no comments)");
    }
    Failure::Syntax {
        line: e.line(),
        column: e.column(),
        message,
    }
}

/// serde_json's message without its trailing " at line L column C".
fn without_position(e: &serde_json::Error) -> String {
    let message = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    match message.strip_suffix(&suffix) {
        Some(m) => m.to_owned(),
        None => message,
    }
}

fn shape(path: &serde_path_to_error::Path, e: &serde_json::Error) -> Failure {
    let mut segments: Vec<&Segment> = path.iter().collect();
    let message = without_position(e);
    // Name the unknown or repeated key itself, and the object holding it: serde_path_to_error
    // includes an unknown key in the path but not a repeated one.
    let (name, valid) = match unknown_field(&message) {
        Some((name, valid)) => (Some(name), Some(valid)),
        None => (
            message
                .strip_prefix("duplicate field `")
                .and_then(|rest| rest.strip_suffix('`')),
            None,
        ),
    };
    let Some(name) = name else {
        let key = key_path(&segments);
        let message = type_mismatch(&message, &key).unwrap_or(message);
        return Failure::Shape { key, message };
    };
    if matches!(segments.last(), Some(Segment::Map { key }) if key == name) {
        segments.pop();
    }
    let parent = key_path(&segments);
    let mut key = parent.clone();
    push_key(&mut key, name);
    let message = match valid {
        Some(valid) => unknown_key(name, &valid, &parent),
        None => format!("the key '{name}' is given twice: keep one"),
    };
    Failure::Shape { key, message }
}

fn key_path(segments: &[&Segment]) -> String {
    let mut key = String::new();
    for segment in segments {
        match segment {
            Segment::Seq { index } => push_index(&mut key, *index),
            Segment::Map { key: k } | Segment::Enum { variant: k } => push_key(&mut key, k),
            Segment::Unknown => {}
        }
    }
    key
}

/// Appends `.name` to a key path (just `name` at the top); names that are not plain words
/// are quoted: `mcpServers["git hub"]`.
pub(super) fn push_key(path: &mut String, name: &str) {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !plain {
        path.push('[');
        path.push_str(&serde_json::Value::from(name).to_string());
        path.push(']');
    } else {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(name);
    }
}

/// Appends `[index]` to a key path.
pub(super) fn push_index(path: &mut String, index: usize) {
    path.push_str(&format!("[{index}]"));
}

/// Splits serde's "unknown field `foo`, expected one of `a`, `b`" into the key and the
/// valid keys (whose names are ours and hold no backquote).
fn unknown_field(message: &str) -> Option<(&str, Vec<&str>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (name, valid) = match rest.rfind("`, expected ") {
        Some(at) => (&rest[..at], &rest[at + "`, expected ".len()..]),
        None => (rest.strip_suffix("`, there are no fields")?, ""),
    };
    Some((name, valid.split('`').skip(1).step_by(2).collect()))
}

/// "unknown key 'x'; valid keys in PARENT: ..." with a guess at what was meant.
fn unknown_key(name: &str, valid: &[&str], parent: &str) -> String {
    let mut message = format!("unknown key '{name}'");
    if let Some(close) = closest(name, valid) {
        message.push_str(&format!(" (did you mean '{close}'?)"));
    }
    let level = if parent.is_empty() {
        "top-level keys".to_owned()
    } else {
        format!("keys in {parent}")
    };
    message.push_str(&format!("; valid {level}: {}", valid.join(", ")));
    message
}

/// serde's "invalid type: X, expected Y" as "expected Y, found X", in words. `key` is the
/// key path of the value; its suffix (`_ms`, `_mib`) names the unit of a number.
fn type_mismatch(message: &str, key: &str) -> Option<String> {
    let (found, expected) = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))?
        .rsplit_once(", expected ")?;
    let mut expected = expected_words(expected);
    if expected == WHOLE_NUMBER {
        let unit = [
            ("_ms", "milliseconds"),
            ("_secs", "seconds"),
            ("_days", "days"),
            ("_mib", "MiB"),
            ("_bytes", "bytes"),
        ]
        .into_iter()
        .find(|(suffix, _)| key.ends_with(suffix));
        if let Some((_, unit)) = unit {
            expected = format!("a whole number of {unit}");
        }
    }
    Some(format!("expected {expected}, found {}", found_words(found)))
}

const WHOLE_NUMBER: &str = "a whole number (0 or more)";

/// Keys other MCP clients and proxies use for what is spelled differently here.
const SYNONYMS: [(&str, &str); 8] = [
    ("cmd", "command"),
    ("cwd", "working_dir"),
    ("workdir", "working_dir"),
    ("type", "protocol"),
    ("transport", "protocol"),
    ("environment", "env"),
    ("disabled", "enabled"),
    ("timeout", "tool_call_timeout_ms"),
];

/// The valid key `name` was most likely meant to be: a known synonym, the same letters
/// ignoring case, `_` and `-` (`mcp_servers`), or at most two typing mistakes away.
fn closest<'a>(name: &str, valid: &[&'a str]) -> Option<&'a str> {
    let synonym = SYNONYMS
        .iter()
        .find(|(other, _)| other.eq_ignore_ascii_case(name))
        .and_then(|(_, ours)| valid.iter().find(|v| *v == ours));
    if let Some(ours) = synonym {
        return Some(ours);
    }
    let norm = |s: &str| -> Vec<char> {
        s.chars()
            .filter(|c| *c != '_' && *c != '-')
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let wanted = norm(name);
    valid
        .iter()
        .map(|v| (edit_distance(&wanted, &norm(v)), *v))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, v)| v)
}

fn edit_distance(a: &[char], b: &[char]) -> usize {
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != cb);
            cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// serde's name for what it wanted, in words.
fn expected_words(expected: &str) -> String {
    match expected {
        "u8" | "u16" | "u32" | "u64" | "usize" => WHOLE_NUMBER.to_owned(),
        "a boolean" => "true or false".to_owned(),
        "a sequence" => "a list".to_owned(),
        "a map" => "an object".to_owned(),
        e if e.starts_with("struct ") => "an object".to_owned(),
        e => e.to_owned(),
    }
}

/// serde_json's description of what it found, in words.
fn found_words(found: &str) -> String {
    let quoted = |prefix: &str| {
        found
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix('`'))
            .and_then(|rest| rest.strip_suffix('`'))
            .map(str::to_owned)
    };
    if let Some(b) = quoted("boolean ") {
        return b;
    }
    if let Some(n) = quoted("integer ").or_else(|| quoted("floating point ")) {
        return format!("the number {n}");
    }
    if let Some(s) = found.strip_prefix("string ") {
        return format!("the string {s}");
    }
    match found {
        "sequence" => "a list".to_owned(),
        "map" => "an object".to_owned(),
        f => f.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape_of(text: &str) -> (String, String) {
        match parse(text) {
            Err(Failure::Shape { key, message }) => (key, message),
            other => panic!("expected a shape failure, got {other:?}"),
        }
    }

    #[test]
    fn type_errors_are_in_words() {
        let (key, message) = shape_of(r#"{"tool_call_timeout_ms": "5"}"#);
        assert_eq!(key, "tool_call_timeout_ms");
        assert_eq!(
            message,
            r#"expected a whole number of milliseconds, found the string "5""#
        );
        let (_, message) = shape_of(r#"{"activity": {"retention": {"max_records": -5}}}"#);
        assert_eq!(
            message,
            "expected a whole number (0 or more), found the number -5"
        );
        let (_, message) = shape_of(r#"{"plugins": {"limits": {"memory_mib": 1.5}}}"#);
        assert_eq!(
            message,
            "expected a whole number of MiB, found the number 1.5"
        );
        let (key, message) = shape_of(r#"{"upstream": {"advertise_roots": "yes"}}"#);
        assert_eq!(key, "upstream.advertise_roots");
        assert_eq!(message, r#"expected true or false, found the string "yes""#);
        let (key, message) = shape_of(r#"{"allowed_hosts": "a"}"#);
        assert_eq!(key, "allowed_hosts");
        assert_eq!(message, r#"expected a list, found the string "a""#);
        let (key, message) = shape_of(r#"{"allowed_hosts": [null]}"#);
        assert_eq!(key, "allowed_hosts[0]");
        assert_eq!(message, "expected a string, found null");
        let (key, message) = shape_of(r#"{"plugins": []}"#);
        assert_eq!(key, "plugins");
        assert_eq!(message, "expected an object, found a list");
        let (key, message) = shape_of(r#"[]"#);
        assert_eq!(key, "");
        assert_eq!(message, "expected an object, found a list");
    }

    #[test]
    fn unknown_keys_list_the_valid_ones() {
        let (key, message) = shape_of(r#"{"upstream": {"reconect_max_ms": 5}}"#);
        assert_eq!(key, "upstream.reconect_max_ms");
        assert_eq!(
            message,
            "unknown key 'reconect_max_ms' (did you mean 'reconnect_max_ms'?); valid keys in \
             upstream: reconnect_initial_ms, reconnect_max_ms, tools_refresh_secs, advertise_roots"
        );
        let (key, message) = shape_of(r#"{"intent_declaration": {"x`, expected ": 1}}"#);
        assert_eq!(key, r#"intent_declaration["x`, expected "]"#);
        assert!(message.starts_with("unknown key 'x`, expected '; valid keys in intent_declaration: strict_server_validation, require_operation_type"), "{message}");
    }

    #[test]
    fn both_forms_of_mcp_servers_parse() {
        let raw = parse(r#"{"mcpServers": [{"name": "a", "command": "x"}]}"#).unwrap();
        assert!(matches!(raw.mcp_servers, Some(RawServers::List(ref l)) if l.len() == 1));
        let raw = parse(r#"{"mcpServers": {"b": {"url": "http://h"}, "a": {}}}"#).unwrap();
        let Some(RawServers::Map(map)) = raw.mcp_servers else {
            panic!("map form")
        };
        let names: Vec<&str> = map.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["b", "a"], "document order is kept");
        let (key, message) = shape_of(r#"{"mcpServers": {"git hub": {"cmd": "x"}}}"#);
        assert_eq!(key, r#"mcpServers["git hub"].cmd"#);
        assert!(message.starts_with("unknown key 'cmd' (did you mean 'command'?); valid keys in mcpServers[\"git hub\"]: name, command,"), "{message}");
        let (key, message) = shape_of(r#"{"mcpServers": "x"}"#);
        assert_eq!(key, "mcpServers");
        assert_eq!(
            message,
            r#"expected a list of servers (or an object from server names to servers), found the string "x""#
        );
    }

    #[test]
    fn syntax_errors_have_a_position() {
        let failure = parse("{\n  \"listen\": \"x\",\n}").unwrap_err();
        assert_eq!(
            failure,
            Failure::Syntax {
                line: 3,
                column: 1,
                message: "trailing comma".to_owned()
            }
        );
        let failure = parse("{\n  // note\n}").unwrap_err();
        let Failure::Syntax { message, .. } = failure else {
            panic!("syntax")
        };
        assert!(message.ends_with("(JSON has no comments)"), "{message}");
        assert!(matches!(
            parse("{} {}"),
            Err(Failure::Syntax {
                line: 1,
                column: 4,
                ..
            })
        ));
        assert!(parse("\u{feff}{}").is_ok());
    }

    #[test]
    fn key_paths_quote_odd_names() {
        let mut path = String::new();
        push_key(&mut path, "mcpServers");
        push_index(&mut path, 2);
        push_key(&mut path, "url");
        assert_eq!(path, "mcpServers[2].url");
        let mut path = String::from("plugins.settings");
        push_key(&mut path, "a.b");
        assert_eq!(path, r#"plugins.settings["a.b"]"#);
    }
}
