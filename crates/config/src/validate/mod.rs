//! Stage two: checks a [`RawConfig`] and builds the [`Config`], filling in defaults. Each
//! check names the key path of the value it refuses and says what would be accepted.
//!
//! Parts: `servers` (`mcpServers`), `isolation`, `plugins`, `activity` and `telemetry`; the top-level keys,
//! `intent_declaration` and `upstream` are checked here.

mod activity;
mod approvals;
mod auth;
mod build;
mod cluster;
mod code_execution;
mod isolation;
mod management;
mod oauth;
mod plugins;
mod rate_limits;
mod scopes;
mod servers;
mod start;
mod telemetry;

pub(crate) use build::{Context, validate};
use build::{MAX_NAME_LEN, describe, tool_call_timeout};
