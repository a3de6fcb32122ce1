//! Stage two: checks a [`RawConfig`] and builds the [`Config`], filling in defaults. Each
//! check names the key path of the value it refuses and says what would be accepted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::raw::{self, Failure, RawConfig, RawLimits, RawServer, RawServers};
use super::{
    ActivityConfig, Config, Durability, Error, IntentConfig, LimitsConfig, MAX_PLUGIN_MEMORY_MIB,
    MAX_PLUGIN_TIMEOUT_MS, MAX_TOOL_CALL_TIMEOUT_MS, PluginsConfig, Result, RetentionConfig,
    ServerConfig, Transport, UpstreamConfig, days, mib_to_bytes,
};

/// The longest `activity.async_flush_ms` accepted.
const MAX_ASYNC_FLUSH_MS: u64 = 60_000;
/// The longest `activity.retention.max_age_days` accepted: a century.
const MAX_AGE_DAYS: u64 = 36_500;
/// The largest `activity.max_argument_bytes` accepted.
const MAX_ARGUMENT_BYTES: u64 = 16 << 20;
/// The longest `upstream.reconnect_*_ms` accepted: one hour.
const MAX_RECONNECT_MS: u64 = 3_600_000;
/// The longest `upstream.tools_refresh_secs` accepted: one day.
const MAX_TOOLS_REFRESH_SECS: u64 = 86_400;
/// The longest server or plugin name.
const MAX_NAME_LEN: usize = 64;

/// Where the text came from, and how to resolve the paths in it.
pub(super) struct Context<'a> {
    origin: &'a str,
    /// The directory relative paths are resolved against, and the home directory `~`
    /// stands for. `None`: keep paths as written.
    resolve: Option<(&'a Path, Option<&'a Path>)>,
}

impl<'a> Context<'a> {
    pub(super) fn new(origin: &'a str) -> Self {
        Self {
            origin,
            resolve: None,
        }
    }

    pub(super) fn resolving(self, dir: &'a Path, home: Option<&'a Path>) -> Self {
        Self {
            resolve: Some((dir, home)),
            ..self
        }
    }

    fn err(&self, key: &str, message: impl Into<String>) -> Error {
        Error::Invalid {
            origin: self.origin.to_owned(),
            key: key.to_owned(),
            message: message.into(),
        }
    }

    /// `value` unless it lies outside `lo..=hi`; `unit` follows the range in the message.
    fn range(&self, key: &str, value: u64, lo: u64, hi: u64, unit: &str) -> Result<u64> {
        if (lo..=hi).contains(&value) {
            Ok(value)
        } else {
            Err(self.err(
                key,
                format!("{value} is out of range: use {lo} to {hi}{unit}"),
            ))
        }
    }

    fn at_least_one(&self, key: &str, value: u64) -> Result<u64> {
        if value == 0 {
            Err(self.err(key, "0 is out of range: use 1 or more"))
        } else {
            Ok(value)
        }
    }

    fn not_empty(&self, key: &str, value: &str, what: &str) -> Result<()> {
        if value.trim().is_empty() {
            Err(self.err(key, format!("{what} is empty")))
        } else {
            Ok(())
        }
    }

    /// A path from the file: a leading `~` is the home directory, and a relative path is
    /// relative to the file's directory.
    fn path(&self, key: &str, value: &str) -> Result<PathBuf> {
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

/// Parses and validates `text`.
pub(super) fn validate(text: &str, ctx: &Context<'_>) -> Result<Config> {
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
        if key.is_empty() || key.chars().any(|c| c.is_whitespace() || c.is_control()) {
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
    if let Some(servers) = raw.mcp_servers {
        config.servers = servers_from(servers, ctx)?;
    }
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
    Ok(config)
}

fn tool_call_timeout(ctx: &Context<'_>, key: &str, ms: u64) -> Result<Duration> {
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

/// One entry of `mcpServers` with the key path it was found at.
struct Entry {
    key: String,
    /// The name from the map form's key.
    map_name: Option<String>,
    raw: RawServer,
}

fn servers_from(servers: RawServers, ctx: &Context<'_>) -> Result<Vec<ServerConfig>> {
    let entries: Vec<Entry> = match servers {
        RawServers::List(list) => list
            .into_iter()
            .enumerate()
            .map(|(i, raw)| Entry {
                key: format!("mcpServers[{i}]"),
                map_name: None,
                raw,
            })
            .collect(),
        RawServers::Map(map) => map
            .into_iter()
            .map(|(name, raw)| {
                let mut key = String::from("mcpServers");
                raw::push_key(&mut key, &name);
                Entry {
                    key,
                    map_name: Some(name),
                    raw,
                }
            })
            .collect(),
    };
    // Name -> key path of the first server with it.
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut servers = Vec::with_capacity(entries.len());
    for entry in entries {
        let server = server_from(entry.raw, entry.map_name.as_deref(), &entry.key, ctx)?;
        if let Some(first) = seen.get(&server.name) {
            return Err(if entry.map_name.is_some() {
                ctx.err(
                    &entry.key,
                    format!(
                        "the server '{}' is defined twice: server names must be unique",
                        server.name
                    ),
                )
            } else {
                ctx.err(
                    &format!("{}.name", entry.key),
                    format!(
                        "'{}' is also the name of {first}: server names must be unique",
                        server.name
                    ),
                )
            });
        }
        seen.insert(server.name.clone(), entry.key);
        servers.push(server);
    }
    Ok(servers)
}

fn server_from(
    raw: RawServer,
    map_name: Option<&str>,
    key: &str,
    ctx: &Context<'_>,
) -> Result<ServerConfig> {
    let at = |field: &str| format!("{key}.{field}");
    let name = match (map_name, raw.name) {
        (Some(map_name), Some(name)) if name != map_name => {
            return Err(ctx.err(
                &at("name"),
                format!("'{name}' differs from the server's key '{map_name}': drop 'name' or make the two the same"),
            ));
        }
        (Some(map_name), _) => {
            check_server_name(map_name).map_err(|why| ctx.err(key, why))?;
            map_name.to_owned()
        }
        (None, Some(name)) => {
            check_server_name(&name).map_err(|why| ctx.err(&at("name"), why))?;
            name
        }
        (None, None) => {
            return Err(ctx.err(
                key,
                "missing key 'name': every server needs one (it is the 'server' in 'server:tool')",
            ));
        }
    };

    let protocol = match raw.protocol.as_deref() {
        None => None,
        Some("stdio") => Some(Protocol::Stdio),
        Some("http" | "streamable-http") => Some(Protocol::Http),
        Some("sse") => {
            return Err(ctx.err(
                &at("protocol"),
                "'sse' is not supported (the SSE transport is deprecated): use 'streamable-http', or leave 'protocol' out",
            ));
        }
        Some(other) => {
            return Err(ctx.err(
                &at("protocol"),
                format!("'{other}' is not a protocol: use 'stdio', 'http' or 'streamable-http', or leave it out to infer it from 'command' or 'url'"),
            ));
        }
    };

    let transport = match (raw.command, raw.url) {
        (Some(_), Some(_)) => {
            return Err(ctx.err(
                key,
                "both 'command' and 'url' are given: use 'command' to start a local server (stdio) or 'url' to reach a remote one (HTTP), not both",
            ));
        }
        (None, None) => {
            return Err(ctx.err(
                key,
                match protocol {
                    Some(Protocol::Stdio) => "missing key 'command': a stdio server is started with a command",
                    Some(Protocol::Http) => "missing key 'url': an HTTP server is reached at a URL",
                    None => "missing key 'command' or 'url': give 'command' to start a local server (stdio) or 'url' to reach a remote one (HTTP)",
                },
            ));
        }
        (Some(command), None) => {
            if protocol == Some(Protocol::Http) {
                return Err(ctx.err(
                    &at("protocol"),
                    format!(
                        "'{}' needs 'url', but this server has 'command'",
                        raw.protocol.unwrap_or_default()
                    ),
                ));
            }
            if raw.headers.is_some() {
                return Err(ctx.err(
                    &at("headers"),
                    "'headers' only applies to a server reached by 'url'; this one has 'command'",
                ));
            }
            ctx.not_empty(&at("command"), &command, "the command")?;
            let env = raw.env.unwrap_or_default();
            for (name, value) in &env {
                let mut env_key = at("env");
                raw::push_key(&mut env_key, name);
                if name.is_empty() || name.contains(['=', '\0']) {
                    return Err(ctx.err(
                        &env_key,
                        format!("'{name}' is not an environment variable name: it must be non-empty, without '='"),
                    ));
                }
                if value.contains('\0') {
                    return Err(ctx.err(&env_key, "the value contains a NUL character"));
                }
            }
            let working_dir = match raw.working_dir {
                Some(dir) => Some(ctx.path(&at("working_dir"), &dir)?),
                None => None,
            };
            Transport::Stdio {
                command,
                args: raw.args.unwrap_or_default(),
                env,
                working_dir,
            }
        }
        (None, Some(url)) => {
            if protocol == Some(Protocol::Stdio) {
                return Err(ctx.err(
                    &at("protocol"),
                    "'stdio' needs 'command', but this server has 'url'",
                ));
            }
            for (field, given) in [
                ("args", raw.args.is_some()),
                ("env", raw.env.is_some()),
                ("working_dir", raw.working_dir.is_some()),
            ] {
                if given {
                    return Err(ctx.err(
                        &at(field),
                        format!("'{field}' only applies to a server started with 'command'; this one has 'url'"),
                    ));
                }
            }
            check_url(&url).map_err(|why| ctx.err(&at("url"), why))?;
            let headers = raw.headers.unwrap_or_default();
            for (name, value) in &headers {
                let mut header_key = at("headers");
                raw::push_key(&mut header_key, name);
                if !is_header_name(name) {
                    return Err(ctx.err(
                        &header_key,
                        format!("'{name}' is not an HTTP header name: use letters, digits and '-'"),
                    ));
                }
                if value.chars().any(|c| matches!(c, '\r' | '\n' | '\0')) {
                    return Err(ctx.err(
                        &header_key,
                        "the value contains a line break or NUL character",
                    ));
                }
            }
            Transport::Http { url, headers }
        }
    };

    let tool_call_timeout = match raw.tool_call_timeout_ms {
        Some(ms) => Some(tool_call_timeout(ctx, &at("tool_call_timeout_ms"), ms)?),
        None => None,
    };
    Ok(ServerConfig {
        name,
        transport,
        enabled: raw.enabled.unwrap_or(true),
        quarantined: raw.quarantined.unwrap_or(false),
        tool_call_timeout,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Stdio,
    Http,
}

/// `[A-Za-z0-9_-]{1,64}`.
fn check_server_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("the server name is empty: use letters, digits, '-' and '_'".to_owned());
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!(
            "'{name}' is not a valid server name: use at most {MAX_NAME_LEN} characters"
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "'{name}' is not a valid server name: use letters, digits, '-' and '_' (no ':' — it separates server and tool)"
        ));
    }
    Ok(())
}

/// An `http://` or `https://` URL with a host.
fn check_url(url: &str) -> std::result::Result<(), String> {
    let lower = url.to_ascii_lowercase();
    let Some(rest) = lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("https://"))
    else {
        let hint = if url.contains("://") {
            String::new()
        } else {
            format!(", e.g. 'http://{url}'")
        };
        return Err(format!("'{url}' is not an http:// or https:// URL{hint}"));
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "'{url}' is not a valid URL: it needs a host and no spaces, e.g. http://127.0.0.1:3000/mcp"
        ));
    }
    Ok(())
}

/// An HTTP token (RFC 9110 section 5.6.2).
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c))
}

/// 1 to 64 of `[a-z0-9-]`, not starting or ending with `-` (as the plugin loader checks).
fn is_plugin_name(name: &str) -> bool {
    crate::plugin::is_valid_name(name)
}

fn plugin_name_error(name: &str) -> String {
    format!(
        "'{name}' is not a valid plugin name: use 1 to {MAX_NAME_LEN} lowercase letters, digits and '-' (not first or last)"
    )
}

fn plugins_from(raw: raw::RawPlugins, ctx: &Context<'_>) -> Result<PluginsConfig> {
    let mut plugins = PluginsConfig::default();
    if let Some(dir) = raw.dir {
        plugins.dir = Some(ctx.path("plugins.dir", &dir)?);
    }
    plugins.annotators = raw
        .annotators
        .map(|names| plugin_list(names, "plugins.annotators", ctx))
        .transpose()?;
    plugins.validators = raw
        .validators
        .map(|names| plugin_list(names, "plugins.validators", ctx))
        .transpose()?;
    if let Some(sinks) = raw.sinks {
        plugins.sinks = plugin_list(sinks, "plugins.sinks", ctx)?;
    }
    if let Some(limits) = raw.limits {
        plugins.limits = limits_from(limits, plugins.limits, "plugins.limits", ctx)?;
    }
    for (name, limits) in raw.plugin_limits.unwrap_or_default() {
        let mut key = String::from("plugins.plugin_limits");
        raw::push_key(&mut key, &name);
        if !is_plugin_name(&name) {
            return Err(ctx.err(&key, plugin_name_error(&name)));
        }
        if limits.timeout_ms.is_some() {
            plugins.explicit_timeouts.insert(name.clone());
        }
        let limits = limits_from(limits, plugins.limits, &key, ctx)?;
        plugins.plugin_limits.insert(name, limits);
    }
    for (name, settings) in raw.settings.unwrap_or_default() {
        let mut key = String::from("plugins.settings");
        raw::push_key(&mut key, &name);
        if !is_plugin_name(&name) {
            return Err(ctx.err(&key, plugin_name_error(&name)));
        }
        if !settings.is_object() {
            return Err(ctx.err(
                &key,
                format!(
                    "expected an object (the settings the plugin '{name}' reads), found {}",
                    describe(&settings)
                ),
            ));
        }
        plugins.settings.insert(name, settings);
    }
    // A sink reaches only the hosts its settings grant: say now if they cannot be read.
    for name in &plugins.sinks {
        if let Some(problem) = plugins.sink_grant_problem(name) {
            let mut key = String::from("plugins.settings");
            raw::push_key(&mut key, name);
            return Err(ctx.err(&key, problem));
        }
    }
    Ok(plugins)
}

fn plugin_list(names: Vec<String>, key: &str, ctx: &Context<'_>) -> Result<Vec<String>> {
    for (i, name) in names.iter().enumerate() {
        let at = format!("{key}[{i}]");
        if !is_plugin_name(name) {
            return Err(ctx.err(&at, plugin_name_error(name)));
        }
        if let Some(first) = names[..i].iter().position(|n| n == name) {
            return Err(ctx.err(&at, format!("'{name}' is already listed at {key}[{first}]")));
        }
    }
    Ok(names)
}

/// `raw` over `base`: a key left out keeps the base value.
fn limits_from(
    raw: RawLimits,
    base: LimitsConfig,
    key: &str,
    ctx: &Context<'_>,
) -> Result<LimitsConfig> {
    let mut limits = base;
    if let Some(ms) = raw.timeout_ms {
        let ms = ctx.range(
            &format!("{key}.timeout_ms"),
            ms,
            1,
            MAX_PLUGIN_TIMEOUT_MS,
            " milliseconds",
        )?;
        limits.timeout = Duration::from_millis(ms);
    }
    if let Some(mib) = raw.memory_mib {
        let mib = ctx.range(
            &format!("{key}.memory_mib"),
            mib,
            1,
            MAX_PLUGIN_MEMORY_MIB,
            " MiB",
        )?;
        limits.memory_bytes = mib_to_bytes(mib);
    }
    if let Some(reuse) = raw.reuse_instance {
        limits.reuse_instance = reuse;
    }
    Ok(limits)
}

/// A JSON value in a few words, for "found ..." messages.
fn describe(value: &serde_json::Value) -> String {
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

fn activity_from(raw: raw::RawActivity, ctx: &Context<'_>) -> Result<ActivityConfig> {
    let mut activity = ActivityConfig::default();
    match raw.durability.as_deref() {
        None => {}
        Some("sync") => activity.durability = Durability::Sync,
        Some("async") => activity.durability = Durability::Async,
        Some(other) => {
            return Err(ctx.err(
                "activity.durability",
                format!("'{other}' is not a durability: use 'sync' (a record is on disk before the call returns) or 'async' (written within async_flush_ms)"),
            ));
        }
    }
    if let Some(ms) = raw.async_flush_ms {
        let ms = ctx.range(
            "activity.async_flush_ms",
            ms,
            1,
            MAX_ASYNC_FLUSH_MS,
            " milliseconds",
        )?;
        activity.async_flush = Duration::from_millis(ms);
    }
    if let Some(retention) = raw.retention {
        let mut r = RetentionConfig::default();
        if let Some(d) = retention.max_age_days {
            r.max_age = days(ctx.range(
                "activity.retention.max_age_days",
                d,
                1,
                MAX_AGE_DAYS,
                " days",
            )?);
        }
        if let Some(n) = retention.max_records {
            r.max_records = ctx.at_least_one("activity.retention.max_records", n)?;
        }
        if let Some(n) = retention.max_bytes {
            r.max_bytes = ctx.at_least_one("activity.retention.max_bytes", n)?;
        }
        if let Some(n) = retention.max_undelivered_bytes {
            r.max_undelivered_bytes =
                ctx.at_least_one("activity.retention.max_undelivered_bytes", n)?;
        }
        activity.retention = r;
    }
    if let Some(delivery) = raw.delivery {
        let d = &mut activity.delivery;
        if let Some(n) = delivery.batch_records {
            let n = ctx.range("activity.delivery.batch_records", n, 1, 10_000, " records")?;
            d.batch_records = usize::try_from(n).unwrap_or(10_000);
        }
        if let Some(n) = delivery.batch_bytes {
            let n = ctx.range("activity.delivery.batch_bytes", n, 1024, 64 << 20, " bytes")?;
            d.batch_bytes = usize::try_from(n).unwrap_or(64 << 20);
        }
        if let Some(ms) = delivery.interval_ms {
            let ms = ctx.range(
                "activity.delivery.interval_ms",
                ms,
                10,
                3_600_000,
                " milliseconds",
            )?;
            d.interval = Duration::from_millis(ms);
        }
        if let Some(ms) = delivery.max_backoff_ms {
            let ms = ctx.range(
                "activity.delivery.max_backoff_ms",
                ms,
                100,
                3_600_000,
                " milliseconds",
            )?;
            d.max_backoff = Duration::from_millis(ms);
        }
    }
    if let Some(n) = raw.max_argument_bytes {
        let n = ctx.range(
            "activity.max_argument_bytes",
            n,
            0,
            MAX_ARGUMENT_BYTES,
            " bytes",
        )?;
        activity.max_argument_bytes = usize::try_from(n).unwrap_or(usize::MAX);
    }
    if let Some(keys) = raw.redact_keys {
        for (i, k) in keys.iter().enumerate() {
            ctx.not_empty(&format!("activity.redact_keys[{i}]"), k, "the key")?;
        }
        activity.redact_keys = keys;
    }
    Ok(activity)
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
    fn server_names() {
        assert!(check_server_name("github").is_ok());
        assert!(check_server_name("My_Server-2").is_ok());
        assert!(check_server_name(&"a".repeat(64)).is_ok());
        assert!(check_server_name(&"a".repeat(65)).is_err());
        assert!(check_server_name("").is_err());
        assert!(check_server_name("a:b").is_err());
        assert!(check_server_name("git hub").is_err());
        assert!(check_server_name("é").is_err());
    }

    #[test]
    fn plugin_names() {
        assert!(is_plugin_name("intent-matrix"));
        assert!(is_plugin_name("v2"));
        assert!(!is_plugin_name(""));
        assert!(!is_plugin_name("Intent"));
        assert!(!is_plugin_name("-x"));
        assert!(!is_plugin_name("x-"));
        assert!(!is_plugin_name("a_b"));
        assert!(!is_plugin_name(&"a".repeat(65)));
    }

    #[test]
    fn urls() {
        assert!(check_url("http://127.0.0.1:3000/mcp").is_ok());
        assert!(check_url("HTTPS://example.com").is_ok());
        assert_eq!(
            check_url("localhost:3000/mcp").unwrap_err(),
            "'localhost:3000/mcp' is not an http:// or https:// URL, e.g. 'http://localhost:3000/mcp'"
        );
        assert!(check_url("ws://x").is_err());
        assert!(check_url("http:///mcp").is_err());
        assert!(check_url("http://a b/").is_err());
    }

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
    fn header_names() {
        assert!(is_header_name("Authorization"));
        assert!(is_header_name("X-Api-Key"));
        assert!(!is_header_name("Bad Header"));
        assert!(!is_header_name("a:b"));
        assert!(!is_header_name(""));
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
