//! `GET /api/v1/plugins`: the policy plugins in force; `POST /api/v1/plugins/reload`: loaded
//! again, checked and put in force (see `runtime::reload`); a refused set leaves the plugins
//! in force judging.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{ApiError, ApiState, ok};

/// `POST /plugins/reload`: `{"annotators": [...], "validators": [...]}` now in force, or
/// `409` with why the new set was refused.
pub(super) async fn reload(State(state): State<ApiState>) -> Result<Response, ApiError> {
    let Some(reloader) = state.reloader.clone() else {
        return Err(ApiError::with_status(
            StatusCode::CONFLICT,
            "this process does not run the proxy (no owner); start `mcpproxy serve` and reload there",
        ));
    };
    let reloaded = tokio::task::spawn_blocking(move || reloader.reload())
        .await
        .map_err(|e| ApiError::internal("the plugin reload failed", e))?;
    match reloaded {
        Ok(reloaded) => Ok(ok(reloaded)),
        Err(e) => Err(ApiError::with_status(StatusCode::CONFLICT, e.to_string())),
    }
}

/// `GET /plugins`: `{"annotators": [...], "validators": [...], "guards": [...]}` in force,
/// each `name version`, in order.
pub(super) async fn in_force(State(state): State<ApiState>) -> Result<Response, ApiError> {
    let Some(reloader) = state.reloader.as_ref() else {
        return Err(ApiError::with_status(
            StatusCode::CONFLICT,
            "this process does not run the proxy (no owner); start `mcpproxy serve`",
        ));
    };
    Ok(ok(reloader.in_force()))
}
