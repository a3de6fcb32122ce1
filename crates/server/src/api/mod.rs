//! The REST API under `/api/v1` (same listener as `/mcp`): the activity log, tool search
//! and calls (for `mcpproxy call` and scripts), upstream review and approval, and the
//! proxy's status; beside it `GET /metrics` (Prometheus text, with the key unless
//! `http.metrics_public`), `GET /healthz` and `GET /readyz` (no key: only whether it is
//! ready; with the key, why). Every
//! `/api/v1` route needs the API key (`X-API-Key` header or `?apikey=`);
//! responses use the envelope `{success, data, error}`. Errors say what was wrong and how
//! to fix it; internal failures are logged and reported without their details.

mod activity;
mod approvals;
mod code;
pub mod key;
mod login;
mod plugins;
mod router;
mod tools;
mod upstreams;

pub use router::{ApiError, ApiState, ok, router};
