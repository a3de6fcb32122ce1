//! `mcp_config.json`: where it lives, its defaults, and its validation.
//!
//! Parsing has two stages. `raw` reads the file as written (serde, `deny_unknown_fields`,
//! every key optional); `validate` checks it and builds the [`Config`] the rest of the
//! proxy uses, with defaults filled in, milliseconds turned into [`Duration`](std::time::Duration)s and paths
//! resolved. Every [`Error`] names the file, the key path (`mcpServers[2].url`,
//! `plugins.limits.timeout_ms`) and what was expected.
//!
//! This module reads configuration only; it does not start servers, load plugins or
//! create the data directory.
//!
//! ```
//! # use mcpproxy_config::Config;
//! let text = r#"{"mcpServers": [{"name": "docs", "url": "http://127.0.0.1:9000/mcp"}]}"#;
//! let config = Config::from_json(text, "inline.json").unwrap();
//! assert_eq!(config.servers[0].name, "docs");
//!
//! let err = Config::from_json(r#"{"mcpServers": [{"name": "docs"}]}"#, "inline.json");
//! assert_eq!(
//!     err.unwrap_err().to_string(),
//!     "inline.json: mcpServers[0]: missing key 'command' or 'url': give 'command' to start \
//!      a local server (stdio) or 'url' to reach a remote one (HTTP)"
//! );
//! ```

mod approvals;
mod auth;
mod checkpoints;
mod cluster;
pub mod document;
mod error;
mod launch;
mod model;
mod rate;
mod raw;
pub mod reference;
mod start;
mod team;
#[cfg(test)]
mod tests;
mod validate;

pub use approvals::{
    ApprovalRule, ApprovalsConfig, CallClass, MAX_APPROVAL_SECS, ServerApprovals, Via, glob_matches,
};
pub use auth::AuthConfig;
pub use checkpoints::{Checkpoints, MAX_CHECKPOINT_RECORDS, MAX_CHECKPOINT_SECS};
pub use cluster::ClusterConfig;
pub use launch::{LaunchPart, StdioLaunch};
pub use model::Config;
pub use model::{
    ActivityConfig, CodeExecutionConfig, Error, HttpConfig, IntentConfig, Isolation,
    ManagementConfig, OAuthConfig, OtlpConfig, PluginsConfig, ServerConfig, TelemetryConfig,
    Transport, UpstreamConfig,
};
pub use model::{
    DEFAULT_ASYNC_FLUSH, Loaded, MAX_TOOL_CALL_TIMEOUT_MS, Result, default_path, is_secret_text,
    load, read_bounded,
};
pub use rate::{Limit, Per};
pub use start::{DEFAULT_IDLE_STOP, MAX_IDLE_STOP_SECS, Start, StartMode};
pub use team::{RateLimitsConfig, ScopeRule};
