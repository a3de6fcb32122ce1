//! The validated config ([`Config`]) and its parts, with the defaults a missing key takes
//! (file name, data dir, listen address, timeouts).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::time::Duration;
use std::{fmt, io};

use mcpproxy_policy::journal::{DeliveryOptions, Durability, Retention};
use mcpproxy_policy::{Grant, Limits};

/// The config file's name inside [`DEFAULT_DIR`].
pub(crate) const FILE_NAME: &str = "mcp_config.json";
/// The directory under the home directory that holds the default config file.
pub(crate) const DEFAULT_DIR: &str = ".mcpproxy";
/// Loopback only, so nothing off this machine can reach the proxy unless asked to.
pub(crate) const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080));
/// How long one upstream tool call may take unless its server says otherwise.
pub(crate) const DEFAULT_TOOL_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest `tool_call_timeout_ms` accepted: one hour.
pub const MAX_TOOL_CALL_TIMEOUT_MS: u64 = 3_600_000;
/// With `durability: async`, the longest a record waits before it is written.
pub const DEFAULT_ASYNC_FLUSH: Duration = Duration::from_millis(100);
/// Argument keys whose values the activity journal replaces with a placeholder.
/// A key is redacted when it contains one of these, compared without case, `_` or `-`.
pub(crate) const DEFAULT_REDACT_KEYS: [&str; 9] = [
    "password",
    "passwd",
    "token",
    "secret",
    "api_key",
    "authorization",
    "cookie",
    "private_key",
    "credential",
];

pub use super::error::{Error, Result};

/// The validated configuration, with every default filled in. Its `Debug` output hides
/// the API key, `env` values and header values.
#[derive(Clone, PartialEq)]
pub struct Config {
    /// Where the MCP endpoint and the REST API listen (`listen`).
    pub listen: SocketAddr,
    /// `data_dir` with a leading `~` expanded; `None` means the CLI's default.
    pub data_dir: Option<PathBuf>,
    /// The REST API key; `None` means one is generated on first start.
    pub api_key: Option<String>,
    /// `Origin` values accepted besides loopback ones (DNS-rebinding protection).
    pub allowed_origins: Vec<String>,
    /// `Host` header values accepted besides loopback ones.
    pub allowed_hosts: Vec<String>,
    /// The default deadline of one upstream tool call.
    pub tool_call_timeout: Duration,
    /// The upstream servers, in the order the file lists them.
    pub servers: Vec<ServerConfig>,
    /// `intent_declaration`: settings of the default validator.
    pub intent: IntentConfig,
    pub plugins: PluginsConfig,
    pub activity: ActivityConfig,
    pub upstream: UpstreamConfig,
    /// `http`: who may use the HTTP listener, and how much of it.
    pub http: HttpConfig,
    /// `telemetry`: where traces go (nowhere by default).
    pub telemetry: TelemetryConfig,
    /// `management`: changing the upstream servers while running.
    pub management: ManagementConfig,
    /// `isolation`: the default sandbox of every stdio server (each server's own
    /// `isolation` keys win; the resolved settings are in [`ServerConfig::isolation`]).
    pub isolation: Isolation,
    /// `code_execution`: the `code_execution` tool (off by default) and its limits.
    pub code_execution: CodeExecutionConfig,
    /// `auth`: clients log in with access tokens of this issuer (`None`: no login).
    pub auth: Option<super::AuthConfig>,
    /// `cluster`: replicas sharing one state (PostgreSQL), one journal, sticky sessions.
    pub cluster: super::ClusterConfig,
    /// `scopes`: servers and tools hidden from logged-in callers, by subject or group.
    pub scopes: Vec<super::ScopeRule>,
    /// `rate_limits`: token buckets per caller, per tool and per upstream.
    pub rate_limits: super::RateLimitsConfig,
    /// `approvals`: the calls that wait for a person before they are sent.
    pub approvals: super::ApprovalsConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: DEFAULT_LISTEN,
            data_dir: None,
            api_key: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            tool_call_timeout: DEFAULT_TOOL_CALL_TIMEOUT,
            servers: Vec::new(),
            intent: IntentConfig::default(),
            plugins: PluginsConfig::default(),
            activity: ActivityConfig::default(),
            upstream: UpstreamConfig::default(),
            http: HttpConfig::default(),
            telemetry: TelemetryConfig::default(),
            management: ManagementConfig::default(),
            isolation: Isolation::default(),
            code_execution: CodeExecutionConfig::default(),
            auth: None,
            cluster: super::ClusterConfig::default(),
            scopes: Vec::new(),
            rate_limits: super::RateLimitsConfig::default(),
            approvals: super::ApprovalsConfig::default(),
        }
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("listen", &self.listen)
            .field("data_dir", &self.data_dir)
            .field("api_key", &self.api_key.as_ref().map(|_| Hidden))
            .field("allowed_origins", &self.allowed_origins)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("tool_call_timeout", &self.tool_call_timeout)
            .field("servers", &self.servers)
            .field("intent", &self.intent)
            .field("plugins", &self.plugins)
            .field("activity", &self.activity)
            .field("upstream", &self.upstream)
            .field("http", &self.http)
            .field("telemetry", &self.telemetry)
            .field("management", &self.management)
            .field("code_execution", &self.code_execution)
            .field("auth", &self.auth)
            .field("scopes", &self.scopes)
            .field("rate_limits", &self.rate_limits)
            .field("approvals", &self.approvals)
            .finish()
    }
}

/// Stands for a secret in `Debug` output.
struct Hidden;

impl fmt::Debug for Hidden {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<hidden>")
    }
}

/// A map's keys with every value shown as [`Hidden`].
fn keys_only(map: &BTreeMap<String, String>) -> BTreeMap<&str, Hidden> {
    map.keys().map(|k| (k.as_str(), Hidden)).collect()
}

impl Config {
    /// Parses and validates config text. `origin` names the text in errors (usually the
    /// file's path). Paths are kept as written: a leading `~` is not expanded and relative
    /// paths are not resolved; [`load`] does both.
    pub fn from_json(text: &str, origin: &str) -> Result<Config> {
        super::validate::validate(text, &super::validate::Context::new(origin))
    }

    /// Like [`Config::from_json`], but as if read from a file in `dir`: a leading `~` in
    /// `data_dir`, `plugins.dir` and `working_dir` becomes `home`, and relative paths are
    /// resolved against `dir`.
    pub fn from_json_in(
        text: &str,
        origin: &str,
        dir: &Path,
        home: Option<&Path>,
    ) -> Result<Config> {
        super::validate::validate(
            text,
            &super::validate::Context::new(origin).resolving(dir, home),
        )
    }

    /// The server called `name`, if there is one.
    pub fn server(&self, name: &str) -> Option<&ServerConfig> {
        self.servers.iter().find(|s| s.name == name)
    }

    /// What to tell someone who named a server the config does not have.
    pub fn unknown_server(&self, name: &str) -> String {
        let known: Vec<&str> = self.servers.iter().map(|s| s.name.as_str()).collect();
        format!(
            "unknown server '{name}'; configured servers: {}",
            if known.is_empty() {
                "none (add them to mcp_config.json)".to_owned()
            } else {
                known.join(", ")
            }
        )
    }
}

/// One upstream MCP server (an entry of `mcpServers`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// `[A-Za-z0-9_-]{1,64}`, unique; the `server` in `server:tool`.
    pub name: String,
    pub transport: Transport,
    /// A disabled server is kept in the config but not connected.
    pub enabled: bool,
    /// A quarantined server is connected and listed, but its tools are not searchable and a
    /// call returns a security analysis instead of running, until a person approves it.
    pub quarantined: bool,
    /// Accept tools that are new or changed since approval at once (still recorded),
    /// instead of holding them until approved.
    pub auto_approve_tool_changes: bool,
    /// Overrides [`Config::tool_call_timeout`] for this server.
    pub tool_call_timeout: Option<Duration>,
    /// When it runs: with mcpproxy, or from its first call until it idles (`start`).
    pub start: crate::Start,
    /// The sandbox the server's process runs in (stdio servers only).
    pub isolation: Isolation,
    /// How mcpproxy logs in to the server when it asks for it (HTTP servers only).
    pub oauth: OAuthConfig,
}

/// `oauth`: how mcpproxy logs in to an HTTP server that answers `401` with an OAuth
/// challenge (docs/configuration.md). Every key is optional: without any, mcpproxy
/// discovers the authorization server and registers itself (dynamic client registration).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OAuthConfig {
    /// `false`: a `401` stays an error; mcpproxy never starts a login for this server.
    pub disabled: bool,
    /// A client registered with the authorization server beforehand.
    pub client_id: Option<String>,
    /// Its secret, for a confidential client (a `${secret:NAME}` reference in the file).
    pub client_secret: Option<String>,
    /// The HTTPS URL of a Client ID Metadata Document describing mcpproxy, used when the
    /// authorization server supports them and no `client_id` is given.
    pub client_metadata_url: Option<String>,
    /// The name shown on the authorization server's consent page (dynamic registration).
    pub client_name: Option<String>,
    /// The scopes to ask for; empty: the server's challenge, else its `scopes_supported`.
    pub scopes: Vec<String>,
    /// A fixed port for the loopback redirect URI (for a client pre-registered with one);
    /// `None`: any free port.
    pub redirect_port: Option<u16>,
}

/// `isolation`: the sandbox of a stdio server (docs/security.md says what each part stops).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Isolation {
    /// `false` runs the server as the user, with mcpproxy's environment: explicit, shown in
    /// `upstream list` and the security analysis.
    pub enabled: bool,
    pub network: mcpproxy_sandbox::Network,
    /// Paths the server may read besides the system directories and its install tree.
    pub read: Vec<PathBuf>,
    /// Paths the server may read and write.
    pub write: Vec<PathBuf>,
    /// Variables of mcpproxy's environment passed on by name.
    pub env_passthrough: Vec<String>,
    pub limits: mcpproxy_sandbox::ResourceLimits,
    /// Refuse to start the server when the kernel lacks a part of the sandbox.
    pub required: bool,
}

impl Default for Isolation {
    fn default() -> Self {
        Self {
            enabled: true,
            network: mcpproxy_sandbox::Network::None,
            read: Vec::new(),
            write: Vec::new(),
            env_passthrough: Vec::new(),
            limits: mcpproxy_sandbox::ResourceLimits::DEFAULT,
            required: false,
        }
    }
}

impl Isolation {
    /// The defaults, unchanged.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// How to reach an upstream server. `Debug` hides `env` and header values, which often
/// hold tokens.
#[derive(Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking MCP over stdin/stdout (`command`).
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        /// Resolved against the config file's directory when loaded from a file.
        working_dir: Option<PathBuf>,
    },
    /// A streamable-HTTP endpoint (`url`).
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Transport::Stdio {
                command,
                args,
                env,
                working_dir,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &keys_only(env))
                .field("working_dir", working_dir)
                .finish(),
            Transport::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", url)
                .field("headers", &keys_only(headers))
                .finish(),
        }
    }
}

/// `intent_declaration`: what the default validator (`intent-matrix`) is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntentConfig {
    /// Reject calls whose variant contradicts the server's annotations (else warn).
    pub strict_server_validation: bool,
    /// Reject calls that do not declare `intent.operation_type`.
    pub require_operation_type: bool,
}

impl Default for IntentConfig {
    fn default() -> Self {
        Self {
            strict_server_validation: true,
            require_operation_type: false,
        }
    }
}

impl IntentConfig {
    /// These settings as the JSON object a validator plugin reads from `config()`.
    pub fn as_settings(&self) -> serde_json::Value {
        serde_json::json!({
            "strict_server_validation": self.strict_server_validation,
            "require_operation_type": self.require_operation_type,
        })
    }
}

/// `plugins`: which policy plugins run, their limits and their settings.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PluginsConfig {
    /// A directory of extra `*.wasm` plugins.
    pub dir: Option<PathBuf>,
    /// Annotators in the order they run; `None` means every loaded annotator, embedded first.
    pub annotators: Option<Vec<String>>,
    /// Validators in the order they run; `None` means every loaded validator, embedded first.
    pub validators: Option<Vec<String>>,
    /// Sink plugins that receive the activity journal.
    pub sinks: Vec<String>,
    /// Limits of every plugin without its own entry in `plugin_limits`.
    pub limits: Limits,
    /// Per-plugin limits; keys left out of an entry come from `limits`.
    pub plugin_limits: BTreeMap<String, Limits>,
    /// Plugins whose `plugin_limits` entry sets `timeout_ms` (sinks default to 30 s and
    /// scanners to 5 s, not to `limits.timeout_ms`, unless their own entry says otherwise).
    pub explicit_timeouts: std::collections::BTreeSet<String>,
    /// Plugins whose `plugin_limits` entry sets `reuse_instance`.
    pub explicit_reuse: std::collections::BTreeSet<String>,
    /// `plugins.limits` sets `reuse_instance` for every plugin.
    pub reuse_set_for_all: bool,
    /// Per-plugin settings, each a JSON object.
    pub settings: BTreeMap<String, serde_json::Value>,
    /// Result guards in the order they run; `None` means every loaded guard but the opt-in
    /// ones (the embedded `secret-redactor`, not `injection-marker`).
    pub guards: Option<Vec<String>>,
}

impl PluginsConfig {
    /// The limits that apply to the plugin called `name`.
    pub fn limits_for(&self, name: &str) -> Limits {
        self.plugin_limits.get(name).copied().unwrap_or(self.limits)
    }

    /// Whether the operator chose `reuse_instance` for `name` (in its `plugin_limits` entry
    /// or in `plugins.limits`): then the embedded plugins' own default does not apply.
    pub fn reuse_chosen(&self, name: &str) -> bool {
        self.reuse_set_for_all || self.explicit_reuse.contains(name)
    }

    /// The limits of a plugin whose kind has a deadline of its own (sinks, scanners): as
    /// [`limits_for`](Self::limits_for), but the deadline is `kind_timeout` unless the
    /// plugin's own `plugin_limits` entry sets `timeout_ms`.
    pub fn limits_with_timeout(&self, name: &str, kind_timeout: Duration) -> Limits {
        let mut limits = self.limits_for(name);
        if !self.explicit_timeouts.contains(name) {
            limits.timeout = kind_timeout;
        }
        limits
    }

    /// Why the sink called `name` cannot be given outbound access, if it cannot: its `url`
    /// or `allowed_hosts` settings are unreadable, or grant no host at all (a sink with no
    /// granted host could only fail, so that is a configuration error, not a silent drop).
    pub fn sink_grant_problem(&self, name: &str) -> Option<String> {
        let (grant, problems) = Grant::from_settings(&self.settings_for(name));
        if let Some(problem) = problems.into_iter().next() {
            return Some(format!(
                "{problem} (a sink may reach only the host of its `url` and its `allowed_hosts`)"
            ));
        }
        if grant.authorities().next().is_none() {
            return Some(format!(
                "the sink '{name}' has no `url`, so it may reach no host: set \
                 plugins.settings.{name}.url to where it should deliver, e.g. \
                 {{\"url\": \"http://127.0.0.1:8123\"}} (see docs/sinks.md)"
            ));
        }
        None
    }

    /// The settings object of the plugin called `name` (`{}` if none were given).
    pub fn settings_for(&self, name: &str) -> serde_json::Value {
        self.settings
            .get(name)
            .cloned()
            .unwrap_or_else(|| serde_json::Value::Object(serde_json::Map::new()))
    }
}

/// `activity`: the local journal of every call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivityConfig {
    /// When a record is on disk (`durability`, `async_flush_ms`).
    pub durability: Durability,
    pub retention: Retention,
    /// How sinks are fed.
    pub delivery: DeliveryOptions,
    /// Arguments longer than this are cut when recorded; 0 records none.
    pub max_argument_bytes: usize,
    /// Argument keys whose values are redacted when recorded (replaces the default list).
    pub redact_keys: Vec<String>,
    /// When the hash chain's head is signed.
    pub checkpoints: crate::Checkpoints,
}

impl Default for ActivityConfig {
    fn default() -> Self {
        Self {
            durability: Durability::Sync,
            retention: Retention::default(),
            delivery: DeliveryOptions::default(),
            max_argument_bytes: 4096,
            redact_keys: DEFAULT_REDACT_KEYS
                .iter()
                .map(|k| (*k).to_owned())
                .collect(),
            checkpoints: crate::Checkpoints::default(),
        }
    }
}

/// The largest config file read: far more than any real config (`--config /dev/zero` must
/// not fill the memory).
pub(crate) const MAX_CONFIG_BYTES: u64 = 4 << 20;

/// The file's text, refused past [`MAX_CONFIG_BYTES`] (`--config /dev/zero` is not a config).
pub fn read_bounded(path: &Path) -> Result<String> {
    use std::io::Read;
    let read_err = |io| Error::Read {
        path: path.to_owned(),
        io,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(Error::Read {
            path: path.to_owned(),
            io: io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "it is larger than {} MiB, which no mcpproxy config is; is it the right file?",
                    MAX_CONFIG_BYTES >> 20
                ),
            ),
        });
    }
    String::from_utf8(bytes).map_err(|_| {
        read_err(io::Error::new(
            io::ErrorKind::InvalidData,
            "it is not UTF-8 text",
        ))
    })
}

/// `upstream`: how the proxy treats its upstream servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamConfig {
    /// The first delay before reconnecting to a server that went away; it doubles per try.
    pub reconnect_initial: Duration,
    /// The longest delay between reconnection attempts.
    pub reconnect_max: Duration,
    /// How often every server's tool list is re-read, besides on `list_changed`.
    pub tools_refresh: Duration,
    /// Whether the proxy advertises the `roots` capability to upstream servers.
    pub advertise_roots: bool,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        Self {
            reconnect_initial: Duration::from_millis(500),
            reconnect_max: Duration::from_secs(30),
            tools_refresh: Duration::from_secs(300),
            advertise_roots: false,
        }
    }
}

/// `http`: the HTTP listener's authentication and bounds. Every bound exists so that no
/// caller can take the listener away from the others (see docs/security.md).
#[derive(Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// The bearer token `/mcp` requires (`Authorization: Bearer <token>`); `None` means
    /// none, which is allowed only on a loopback `listen`.
    pub auth_token: Option<String>,
    /// Open TCP connections at most; past it, a new connection gets a 503 and is closed.
    pub max_connections: usize,
    /// MCP sessions at most, over all clients.
    pub max_sessions: usize,
    /// MCP sessions at most from one client IP address.
    pub max_sessions_per_client: usize,
    /// How long a connection may take to send a request's headers, and how long an idle
    /// keep-alive connection stays open.
    pub header_timeout: Duration,
    /// A session with no traffic for this long is closed (the client re-initializes).
    pub session_idle: Duration,
    /// `GET /metrics` answers without the API key.
    pub metrics_public: bool,
}

impl HttpConfig {
    pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
    pub const DEFAULT_MAX_SESSIONS: usize = 1024;
    pub const DEFAULT_MAX_SESSIONS_PER_CLIENT: usize = 256;
    pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
    pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(1800);
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            auth_token: None,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            max_sessions: Self::DEFAULT_MAX_SESSIONS,
            max_sessions_per_client: Self::DEFAULT_MAX_SESSIONS_PER_CLIENT,
            header_timeout: Self::DEFAULT_HEADER_TIMEOUT,
            session_idle: Self::DEFAULT_SESSION_IDLE,
            metrics_public: false,
        }
    }
}

impl fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpConfig")
            .field("auth_token", &self.auth_token.as_ref().map(|_| Hidden))
            .field("max_connections", &self.max_connections)
            .field("max_sessions", &self.max_sessions)
            .field("max_sessions_per_client", &self.max_sessions_per_client)
            .field("header_timeout", &self.header_timeout)
            .field("session_idle", &self.session_idle)
            .field("metrics_public", &self.metrics_public)
            .finish()
    }
}

/// `management`: who may add, change and remove upstream servers while mcpproxy runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagementConfig {
    /// MCP clients get the `upstream_servers` tool.
    pub upstream_servers_tool: bool,
    /// Servers can be listed and their logs read, but not changed (by the tool, the CLI
    /// or the REST API); the file can still be edited by hand.
    pub read_only: bool,
    /// Logged-in callers (`auth`) granted the `upstream_servers` tool, by token subject.
    pub subjects: Vec<String>,
    /// Logged-in callers granted the `upstream_servers` tool, by group. A caller with no
    /// identity (no `auth`, the static `http.auth_token`, stdio) needs no grant.
    pub groups: Vec<String>,
}

impl ManagementConfig {
    /// Whether the logged-in caller `subject` in `groups` holds the management grant.
    pub fn grants(&self, subject: &str, groups: &[String]) -> bool {
        self.subjects.iter().any(|s| s == subject) || groups.iter().any(|g| self.groups.contains(g))
    }
}

impl Default for ManagementConfig {
    fn default() -> Self {
        Self {
            upstream_servers_tool: true,
            read_only: false,
            subjects: Vec::new(),
            groups: Vec::new(),
        }
    }
}

/// `code_execution`: whether MCP clients get the `code_execution` tool, and the ceilings of
/// what one script may use (a script's own `options` can only lower them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeExecutionConfig {
    pub enabled: bool,
    /// `timeout_ms`: the longest one script runs, its tool calls included.
    pub timeout: Duration,
    /// The most tool calls one script makes; the next one ends it.
    pub max_tool_calls: u32,
    /// `memory_mib`, in bytes: the most memory the JavaScript runtime of one script holds.
    pub memory_bytes: usize,
    /// Scripts that run at once; more wait for one to end.
    pub max_concurrent: u32,
}

impl CodeExecutionConfig {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
    pub const MAX_TIMEOUT_MS: u64 = 600_000;
    pub const DEFAULT_MAX_TOOL_CALLS: u32 = 100;
    pub const MAX_TOOL_CALLS: u64 = 10_000;
    pub const DEFAULT_MEMORY_MIB: u64 = 64;
    /// The runtime itself needs about 4 MiB; less could not start it.
    pub const MIN_MEMORY_MIB: u64 = 8;
    pub const MAX_MEMORY_MIB: u64 = 4096;
    pub const DEFAULT_MAX_CONCURRENT: u32 = 4;
    pub const MAX_CONCURRENT: u64 = 64;
}

impl Default for CodeExecutionConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            timeout: Self::DEFAULT_TIMEOUT,
            max_tool_calls: Self::DEFAULT_MAX_TOOL_CALLS,
            memory_bytes: mcpproxy_policy::mib_to_bytes(Self::DEFAULT_MEMORY_MIB),
            max_concurrent: Self::DEFAULT_MAX_CONCURRENT,
        }
    }
}

/// `telemetry`: trace export. Off unless `otlp_endpoint` is set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TelemetryConfig {
    pub otlp: Option<OtlpConfig>,
}

/// Where and how spans are exported over OTLP/HTTP (protobuf).
#[derive(Clone, PartialEq)]
pub struct OtlpConfig {
    /// The collector's traces URL: `otlp_endpoint` as written when it has a path, else
    /// with `/v1/traces` added (`http://127.0.0.1:4318` → `http://127.0.0.1:4318/v1/traces`).
    pub traces_url: String,
    /// Headers sent with each export (an API key, say); their values are secrets.
    pub headers: BTreeMap<String, String>,
    /// The `service.name` resource attribute.
    pub service_name: String,
    /// The share of calls traced, 0.0 to 1.0 (a call's spans are kept or dropped together).
    pub sample_ratio: f64,
    /// How often finished spans are sent.
    pub export_interval: Duration,
}

impl OtlpConfig {
    pub const DEFAULT_SERVICE_NAME: &str = "mcpproxy";
    pub const DEFAULT_EXPORT_INTERVAL: Duration = Duration::from_secs(5);
}

impl fmt::Debug for OtlpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: BTreeMap<&str, Hidden> =
            self.headers.keys().map(|k| (k.as_str(), Hidden)).collect();
        f.debug_struct("OtlpConfig")
            .field("traces_url", &self.traces_url)
            .field("headers", &headers)
            .field("service_name", &self.service_name)
            .field("sample_ratio", &self.sample_ratio)
            .field("export_interval", &self.export_interval)
            .finish()
    }
}

/// Whether a secret (API key, bearer token) is usable as written in a header: non-empty,
/// no spaces or control characters.
pub fn is_secret_text(text: &str) -> bool {
    !text.is_empty() && !text.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// A configuration and the file it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub config: Config,
    /// `None` when no file was read and every default applies.
    pub path: Option<PathBuf>,
}

/// `<home>/.mcpproxy/mcp_config.json`; without a home directory, that path relative to the
/// current directory.
pub fn default_path(home: Option<&Path>) -> PathBuf {
    home.unwrap_or(Path::new(""))
        .join(DEFAULT_DIR)
        .join(FILE_NAME)
}

/// Reads the configuration.
///
/// With `path`, that file must exist. Without it, the default file under `home` is read if
/// it exists, and otherwise every default applies (as it does when `home` is unknown).
/// `home` also expands a leading `~` in paths; relative paths are resolved against the
/// file's directory.
pub fn load(path: Option<&Path>, home: Option<&Path>) -> Result<Loaded> {
    let path = match path {
        Some(path) => match std::fs::metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(Error::NotFound {
                    path: path.to_owned(),
                });
            }
            _ => path.to_owned(),
        },
        None => {
            let Some(home) = home else {
                return Ok(defaults());
            };
            let path = default_path(Some(home));
            match std::fs::metadata(&path) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(defaults()),
                _ => path,
            }
        }
    };
    let text = read_bounded(&path)?;
    let dir = path.parent().unwrap_or(Path::new(""));
    // An absolute base keeps resolved paths right if the process changes directory later.
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
    let origin = path.display().to_string();
    let config = Config::from_json_in(&text, &origin, &dir, home)?;
    Ok(Loaded {
        config,
        path: Some(path),
    })
}

fn defaults() -> Loaded {
    Loaded {
        config: Config::default(),
        path: None,
    }
}
