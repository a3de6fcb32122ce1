//! Stage two's body: checks each part of a raw config against its limits and builds the
//! `Config`, collecting every error with its key path.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::super::model::Isolation;
use super::super::raw::{self, Failure, RawConfig};
use super::super::{
    Config, Error, HttpConfig, IntentConfig, MAX_TOOL_CALL_TIMEOUT_MS, Result, UpstreamConfig,
    is_secret_text,
};
use super::activity::activity_from;
use super::plugins::plugins_from;
use super::servers::servers_from;
use super::telemetry::telemetry_from;

/// The longest `upstream.reconnect_*_ms` accepted: one hour.
const MAX_RECONNECT_MS: u64 = 3_600_000;
/// The longest `upstream.tools_refresh_secs` accepted: one day.
const MAX_TOOLS_REFRESH_SECS: u64 = 86_400;
/// The longest server or plugin name.
pub(super) const MAX_NAME_LEN: usize = 64;

/// Where the text came from, and how to resolve the paths in it.
pub(crate) struct Context<'a> {
    origin: &'a str,
    /// The directory relative paths are resolved against, and the home directory `~`
    /// stands for. `None`: keep paths as written.
    resolve: Option<(&'a Path, Option<&'a Path>)>,
}

impl<'a> Context<'a> {
    pub(crate) fn new(origin: &'a str) -> Self {
        Self {
            origin,
            resolve: None,
        }
    }

    pub(crate) fn resolving(self, dir: &'a Path, home: Option<&'a Path>) -> Self {
        Self {
            resolve: Some((dir, home)),
            ..self
        }
    }

    pub(super) fn err(&self, key: &str, message: impl Into<String>) -> Error {
        Error::Invalid {
            origin: self.origin.to_owned(),
            key: key.to_owned(),
            message: message.into(),
        }
    }

    /// `value` unless it lies outside `lo..=hi`; `unit` follows the range in the message.
    pub(super) fn range(&self, key: &str, value: u64, lo: u64, hi: u64, unit: &str) -> Result<u64> {
        if (lo..=hi).contains(&value) {
            Ok(value)
        } else {
            Err(self.err(
                key,
                format!("{value} is out of range: use {lo} to {hi}{unit}"),
            ))
        }
    }

    pub(super) fn at_least_one(&self, key: &str, value: u64) -> Result<u64> {
        if value == 0 {
            Err(self.err(key, "0 is out of range: use 1 or more"))
        } else {
            Ok(value)
        }
    }

    pub(super) fn not_empty(&self, key: &str, value: &str, what: &str) -> Result<()> {
        if value.trim().is_empty() {
            Err(self.err(key, format!("{what} is empty")))
        } else {
            Ok(())
        }
    }

    /// A path from the file: a leading `~` is the home directory, and a relative path is
    /// relative to the file's directory.
    pub(super) fn path(&self, key: &str, value: &str) -> Result<PathBuf> {
        self.not_empty(key, value, "the path")?;
        let home_relative = if value == "~" {
            Some("")
        } else {
            value.strip_prefix("~/")
        };
        if value.starts_with('~') && home_relative.is_none() {
            return Err(self.err(
                key,
                format!(
                    "'{value}': only '~' or '~/' at the start is expanded (to your home directory); write the full path"
                ),
            ));
        }
        let Some((dir, home)) = self.resolve else {
            return Ok(PathBuf::from(value));
        };
        if let Some(rest) = home_relative {
            let Some(home) = home else {
                return Err(self.err(
                    key,
                    format!("cannot expand '~' in '{value}': the home directory is not known; write the full path"),
                ));
            };
            return Ok(if rest.is_empty() {
                home.to_owned()
            } else {
                home.join(rest)
            });
        }
        Ok(dir.join(value))
    }
}

/// A JSON value in a few words, for "found ..." messages.
pub(super) fn describe(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Null => "null".to_owned(),
        serde_json::Value::Bool(b) => b.to_string(),
        serde_json::Value::Number(n) => format!("the number {n}"),
        serde_json::Value::String(s) => {
            format!("the string {}", serde_json::Value::from(s.as_str()))
        }
        serde_json::Value::Array(_) => "a list".to_owned(),
        serde_json::Value::Object(_) => "an object".to_owned(),
    }
}

/// Parses and validates `text`.
pub(crate) fn validate(text: &str, ctx: &Context<'_>) -> Result<Config> {
    let raw = raw::parse(text).map_err(|failure| match failure {
        Failure::Syntax {
            line,
            column,
            message,
        } => Error::Syntax {
            origin: ctx.origin.to_owned(),
            line,
            column,
            message,
        },
        Failure::Shape { key, message } => ctx.err(&key, message),
    })?;
    build(raw, ctx)
}

fn build(raw: RawConfig, ctx: &Context<'_>) -> Result<Config> {
    let mut config = Config::default();
    if let Some(listen) = raw.listen {
        config.listen = listen.parse().map_err(|_| {
            let mut message = format!(
                "'{listen}' is not a valid listen address: use IP:PORT, e.g. 127.0.0.1:8080"
            );
            if let Some(port) = listen.strip_prefix("localhost:") {
                message.push_str(&format!(" (write 127.0.0.1:{port} for localhost)"));
            }
            ctx.err("listen", message)
        })?;
    }
    if let Some(dir) = raw.data_dir {
        config.data_dir = Some(ctx.path("data_dir", &dir)?);
    }
    if let Some(key) = raw.api_key {
        if !is_secret_text(&key) {
            return Err(ctx.err(
                "api_key",
                "the API key must be non-empty, with no spaces or control characters (or leave api_key out to have one generated)",
            ));
        }
        config.api_key = Some(key);
    }
    if let Some(origins) = raw.allowed_origins {
        for (i, origin) in origins.iter().enumerate() {
            if !is_origin(origin) {
                return Err(ctx.err(
                    &format!("allowed_origins[{i}]"),
                    format!("'{origin}' is not an origin: write scheme://host or scheme://host:port with no path, e.g. https://app.example.com"),
                ));
            }
        }
        config.allowed_origins = origins;
    }
    if let Some(hosts) = raw.allowed_hosts {
        for (i, host) in hosts.iter().enumerate() {
            if !is_host(host) {
                return Err(ctx.err(
                    &format!("allowed_hosts[{i}]"),
                    format!("'{host}' is not a Host header value: write host or host:port with no scheme or path, e.g. proxy.lan:8080"),
                ));
            }
        }
        config.allowed_hosts = hosts;
    }
    if let Some(ms) = raw.tool_call_timeout_ms {
        config.tool_call_timeout = tool_call_timeout(ctx, "tool_call_timeout_ms", ms)?;
    }
    let isolation = match &raw.isolation {
        Some(raw) => {
            super::isolation::isolation_from(raw, &Isolation::default(), "isolation", ctx)?
        }
        None => Isolation::default(),
    };
    let start = super::start::start_from(
        raw.start.as_deref(),
        raw.idle_stop_secs,
        &crate::Start::default(),
        "",
        ctx,
    )?;
    if let Some(servers) = raw.mcp_servers {
        config.servers = servers_from(servers, &isolation, &start, ctx)?;
    }
    config.isolation = isolation;
    if let Some(intent) = raw.intent_declaration {
        let default = IntentConfig::default();
        config.intent = IntentConfig {
            strict_server_validation: intent
                .strict_server_validation
                .unwrap_or(default.strict_server_validation),
            require_operation_type: intent
                .require_operation_type
                .unwrap_or(default.require_operation_type),
        };
    }
    if let Some(plugins) = raw.plugins {
        config.plugins = plugins_from(plugins, ctx)?;
    }
    if let Some(activity) = raw.activity {
        config.activity = activity_from(activity, ctx)?;
    }
    if let Some(upstream) = raw.upstream {
        config.upstream = upstream_from(upstream, ctx)?;
    }
    if let Some(http) = raw.http {
        config.http = http_from(http, ctx)?;
    }
    if let Some(telemetry) = raw.telemetry {
        config.telemetry = telemetry_from(telemetry, ctx)?;
    }
    if let Some(management) = raw.management {
        config.management = super::management::management_from(management, ctx)?;
    }
    if let Some(code) = raw.code_execution {
        config.code_execution = super::code_execution::code_execution_from(code, ctx)?;
    }
    if let Some(auth) = raw.auth {
        config.auth = Some(super::auth::auth_from(auth, ctx)?);
    }
    if let Some(cluster) = raw.cluster {
        config.cluster = super::cluster::cluster_from(cluster, &config.plugins.sinks, ctx)?;
    }
    if let Some(scopes) = raw.scopes {
        config.scopes = super::scopes::scopes_from(scopes, ctx)?;
    }
    if let Some(limits) = raw.rate_limits {
        config.rate_limits = super::rate_limits::rate_limits_from(limits, ctx)?;
    }
    if let Some(approvals) = raw.approvals {
        config.approvals = super::approvals::approvals_from(approvals, ctx)?;
    }
    Ok(config)
}

/// The most of `http.max_connections` and `http.max_sessions`.
const MAX_HTTP_BOUND: u64 = 1_000_000;

fn http_from(raw: raw::RawHttp, ctx: &Context<'_>) -> Result<HttpConfig> {
    let mut http = HttpConfig::default();
    if let Some(token) = raw.auth_token {
        if !is_secret_text(&token) || token.len() < 16 {
            return Err(ctx.err(
                "http.auth_token",
                "the token must be at least 16 characters with no spaces or control characters \
                 (e.g. the output of `openssl rand -hex 32`)",
            ));
        }
        http.auth_token = Some(token);
    }
    let count = |key: &str, v: u64| -> Result<usize> {
        let v = ctx.range(key, v, 1, MAX_HTTP_BOUND, "")?;
        Ok(usize::try_from(v).unwrap_or(usize::MAX))
    };
    if let Some(v) = raw.max_connections {
        http.max_connections = count("http.max_connections", v)?;
    }
    if let Some(v) = raw.max_sessions {
        http.max_sessions = count("http.max_sessions", v)?;
    }
    if let Some(v) = raw.max_sessions_per_client {
        http.max_sessions_per_client = count("http.max_sessions_per_client", v)?;
    }
    if http.max_sessions_per_client > http.max_sessions {
        return Err(ctx.err(
            "http.max_sessions_per_client",
            format!(
                "{} is more than http.max_sessions ({}): one client cannot have more sessions than all of them",
                http.max_sessions_per_client, http.max_sessions
            ),
        ));
    }
    if let Some(v) = raw.header_timeout_ms {
        let v = ctx.range(
            "http.header_timeout_ms",
            v,
            100,
            600_000,
            " milliseconds (10 minutes)",
        )?;
        http.header_timeout = Duration::from_millis(v);
    }
    if let Some(v) = raw.session_idle_secs {
        let v = ctx.range(
            "http.session_idle_secs",
            v,
            10,
            604_800,
            " seconds (7 days)",
        )?;
        http.session_idle = Duration::from_secs(v);
    }
    if let Some(public) = raw.metrics_public {
        http.metrics_public = public;
    }
    Ok(http)
}

pub(super) fn tool_call_timeout(ctx: &Context<'_>, key: &str, ms: u64) -> Result<Duration> {
    let ms = ctx.range(
        key,
        ms,
        1,
        MAX_TOOL_CALL_TIMEOUT_MS,
        " milliseconds (1 hour)",
    )?;
    Ok(Duration::from_millis(ms))
}

/// `scheme://host[:port]`, as browsers send it: no path, not even `/`. The port may be
/// `*` (any port), as the MCP endpoint's Origin check understands it.
fn is_origin(text: &str) -> bool {
    let Some((scheme, authority)) = text.split_once("://") else {
        return false;
    };
    let authority = authority.strip_suffix(":*").unwrap_or(authority);
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    scheme_ok && is_host(authority)
}

/// `host[:port]`: no scheme, path, query, user info or spaces.
fn is_host(text: &str) -> bool {
    !text.is_empty()
        && !text.chars().any(|c| {
            c.is_whitespace() || c.is_control() || matches!(c, '/' | '?' | '#' | '@' | '*')
        })
}

fn upstream_from(raw: raw::RawUpstream, ctx: &Context<'_>) -> Result<UpstreamConfig> {
    let mut upstream = UpstreamConfig::default();
    let ms = " milliseconds (1 hour)";
    if let Some(v) = raw.reconnect_initial_ms {
        let v = ctx.range("upstream.reconnect_initial_ms", v, 1, MAX_RECONNECT_MS, ms)?;
        upstream.reconnect_initial = Duration::from_millis(v);
    }
    if let Some(v) = raw.reconnect_max_ms {
        let v = ctx.range("upstream.reconnect_max_ms", v, 1, MAX_RECONNECT_MS, ms)?;
        upstream.reconnect_max = Duration::from_millis(v);
    }
    if upstream.reconnect_initial > upstream.reconnect_max {
        let default = if raw.reconnect_max_ms.is_none() {
            ", the default"
        } else {
            ""
        };
        return Err(ctx.err(
            "upstream.reconnect_initial_ms",
            format!(
                "{} is more than upstream.reconnect_max_ms ({}{default}): the first retry delay cannot exceed the longest",
                upstream.reconnect_initial.as_millis(),
                upstream.reconnect_max.as_millis(),
            ),
        ));
    }
    if let Some(secs) = raw.tools_refresh_secs {
        let secs = ctx.range(
            "upstream.tools_refresh_secs",
            secs,
            1,
            MAX_TOOLS_REFRESH_SECS,
            " seconds (1 day)",
        )?;
        upstream.tools_refresh = Duration::from_secs(secs);
    }
    if let Some(b) = raw.advertise_roots {
        upstream.advertise_roots = b;
    }
    Ok(upstream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_and_hosts() {
        assert!(is_origin("https://app.example.com"));
        assert!(is_origin("http://localhost:5173"));
        assert!(is_origin("vscode-webview://abc"));
        assert!(!is_origin("https://app.example.com/"));
        assert!(!is_origin("app.example.com"));
        assert!(!is_origin("*"));
        assert!(is_origin("https://app.example.com:*"));
        assert!(!is_origin("https://*.example.com"));
        assert!(is_host("proxy.lan:8080"));
        assert!(is_host("[::1]:8080"));
        assert!(!is_host("http://proxy.lan"));
        assert!(!is_host(""));
    }

    #[test]
    fn paths_expand_home_and_resolve_against_the_file() {
        let dir = Path::new("/etc/mcp");
        let home = Path::new("/home/u");
        let ctx = Context::new("c.json").resolving(dir, Some(home));
        assert_eq!(ctx.path("k", "~").unwrap(), home);
        assert_eq!(ctx.path("k", "~/x").unwrap(), home.join("x"));
        assert_eq!(ctx.path("k", "plugins").unwrap(), dir.join("plugins"));
        assert_eq!(ctx.path("k", "/abs").unwrap(), Path::new("/abs"));
        assert!(ctx.path("k", "").is_err());
        let err = ctx.path("k", "~bob/x").unwrap_err().to_string();
        assert!(err.starts_with("c.json: k: '~bob/x': only '~'"), "{err}");

        let no_home = Context::new("c.json").resolving(dir, None);
        let err = no_home.path("data_dir", "~/x").unwrap_err().to_string();
        assert!(err.contains("the home directory is not known"), "{err}");

        let as_written = Context::new("c.json");
        assert_eq!(as_written.path("k", "~/x").unwrap(), Path::new("~/x"));
        assert_eq!(as_written.path("k", "rel").unwrap(), Path::new("rel"));
    }
}
