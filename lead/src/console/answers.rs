//! How the console's handlers answer: a hub error as its HTTP status, a
//! decision as JSON.

use axum::{
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use mesh_core::protocol::{Request, Status};
use serde_json::{json, Value};

use crate::error::HubError;

/// A hub error as an HTTP answer that names the problem.
pub(super) fn failed(error: impl std::fmt::Display, status: StatusCode) -> Response {
    (status, Json(json!({"error": error.to_string()}))).into_response()
}

/// A hub error as an HTTP answer: its status (see
/// [`HubError::http_status`]) and its message (which names the field or the
/// state).
pub(super) fn hub_failed(error: HubError) -> Response {
    let status = error.http_status();
    failed(error, status)
}

pub(super) fn no_store(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, "no-store".parse().expect("valid"));
    response
}
/// A decided request, as the page hears of its decision.
pub(super) fn decision_json(request: Request) -> Value {
    json!({
        "request_id": request.id().to_string(),
        "approve": request.status == Status::Approved,
    })
}

/// A hub call's result as the answer.
pub(super) fn decided(result: Result<Value, HubError>) -> Response {
    match result {
        Ok(value) => Json(value).into_response(),
        Err(e) => hub_failed(e),
    }
}
