//! The `mcpproxy` command line (clap): one module per command, each with `run(self)`.
//! This is the binary's edge, so errors are `anyhow` here and nowhere below.

mod activity;
mod api_key;
mod app;
mod approvals;
mod call;
mod call_approval;
mod client;
mod cluster;
mod code;
mod doctor;
mod import_check;
mod login;
mod output;
mod plugins;
mod plugins_reload;
mod remote;
mod runtime;
mod secret;
mod serve;
mod servers;
mod startup_log;
mod states;
mod tools;
mod upstream;
mod upstream_edit;

use app::init_logging;
pub use app::run;
pub(crate) use app::{EXIT_FAILURE, EXIT_USAGE, Globals};
