//! The policy's vocabulary and pipeline: what a call, a tool and a verdict are, the
//! [`Annotator`] and [`Validator`] stages, and the [`Pipeline`] that combines them into one
//! [`Evaluation`]; besides them the small rules every crate above shares: plugin resource
//! [`Limits`], the plugin-name rule ([`is_plugin_name`]), the hosts a sink may reach
//! ([`Grant`]), the [`ToolScanner`] a reviewer's analysis runs and the tracing target of
//! exported spans ([`SPAN_TARGET`]).
//!
//! This crate is the vocabulary at the bottom of the workspace graph (only
//! `mcpproxy-support`'s helpers are below it): it knows neither WebAssembly, nor MCP, nor an
//! async runtime. The plugin host implements the stage traits for WebAssembly
//! components; the activity record and the proxy's call report are built from its types.

mod limits;

mod caller;
mod compact_json;

mod grant;
mod guard;
pub mod journal;
mod memo;
mod pipeline;
mod plugin_name;
mod scan;
mod spans;
mod stage;
mod types;

pub use caller::{Caller, current_caller, with_caller};
pub use compact_json::CompactJson;
pub use grant::{Grant, authority_of};
pub use guard::{
    Block, DELIMITER_REMOVED, GuardAction, GuardAnswer, GuardContext, GuardItem, GuardReport,
    GuardTally, Guarded, Guards, ItemAction, ItemKind, Mark, Redaction, ResultGuard, ResultKind,
    UNTRUSTED_CLOSE, UNTRUSTED_OPEN, Withheld, clean_kind, neutralise_delimiters, wrap_marked,
};
pub use limits::{Limits, mib_to_bytes};
pub use pipeline::{Evaluation, Judgement, Outcome, Pipeline, Warning};
pub use plugin_name::is_plugin_name;
pub use scan::{Finding, Severity, ToolScanner};
pub use spans::TARGET as SPAN_TARGET;
pub use stage::{Annotator, Fault, FaultKind, Validator};
pub use types::*;
