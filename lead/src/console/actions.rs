//! The operator's decisions made in the console: a plan approved or
//! rejected, a permission allowed or denied, a result or an amendment
//! decided, a member asked to shut down; each the op the `Operator` service
//! would apply.

use axum::{extract::State, http::StatusCode, response::Response, Json};
use mesh_core::{
    access::Call,
    error::FieldError,
    grant::{Grant, Mode},
    limits,
    names::{Name, RequestId},
    op::{Op, PlanVerdict},
};
use serde::Deserialize;
use serde_json::json;

use super::{
    answers::{decided, decision_json, failed, operator},
    session::Operator,
    Console,
};
use crate::error::HubError;

#[derive(Deserialize)]
pub(super) struct Approve {
    request_id: String,
    #[serde(default)]
    mode: String,
    #[serde(default)]
    write_paths: Vec<String>,
    #[serde(default)]
    feedback: String,
    #[serde(default)]
    allow_overlap: bool,
}

pub(super) async fn approve(
    State(console): State<Console>,
    _: Operator,
    Json(form): Json<Approve>,
) -> Response {
    let mode = match form.mode.as_str() {
        "" | "accept-edits" => Mode::AcceptEdits,
        "default" => Mode::Default,
        "bypass" => Mode::Bypass,
        other => {
            return failed(
                format!("mode: {other:?} is not accept-edits, default or bypass"),
                StatusCode::BAD_REQUEST,
            )
        }
    };
    let verdict = limits::check("feedback", &form.feedback, limits::REASON)
        .and_then(|()| Grant::checked("grant", mode, form.write_paths, None))
        .map(|grant| PlanVerdict::Approve {
            grant,
            feedback: form.feedback,
            allow_overlap: form.allow_overlap,
        });
    review_plan(&console, &form.request_id, verdict).await
}

/// An operator's decision on a plan, made in the console.
async fn review_plan(
    console: &Console,
    request_id: &str,
    verdict: Result<PlanVerdict, FieldError>,
) -> Response {
    let op = RequestId::existing("request_id", request_id)
        .and_then(|request_id| {
            Ok(Op::ReviewPlan {
                request_id,
                verdict: verdict?,
                by: "operator (console)".into(),
            })
        })
        .map_err(HubError::from);
    decided(
        console
            .hub
            .apply(operator(), Call::Operator, op)
            .await
            .map(decision_json),
    )
}

#[derive(Deserialize)]
pub(super) struct Reject {
    request_id: String,
    feedback: String,
}

pub(super) async fn reject(
    State(console): State<Console>,
    _: Operator,
    Json(form): Json<Reject>,
) -> Response {
    let verdict = limits::check("feedback", &form.feedback, limits::REASON)
        .and_then(|()| PlanVerdict::reject(form.feedback));
    review_plan(&console, &form.request_id, verdict).await
}

#[derive(Deserialize)]
pub(super) struct Permission {
    request_id: String,
    approve: bool,
    #[serde(default)]
    feedback: String,
}

pub(super) async fn permission(
    State(console): State<Console>,
    _: Operator,
    Json(form): Json<Permission>,
) -> Response {
    let op = RequestId::existing("request_id", &form.request_id)
        .and_then(|request_id| {
            limits::check("feedback", &form.feedback, limits::REASON)?;
            Ok(Op::ReviewPermission {
                request_id,
                approve: form.approve,
                feedback: form.feedback,
                by: "operator (console)".into(),
            })
        })
        .map_err(HubError::from);
    decided(
        console
            .hub
            .apply(operator(), Call::Operator, op)
            .await
            .map(decision_json),
    )
}
/// A decision on a result or an amendment.
#[derive(Deserialize)]
pub(super) struct Decide {
    request_id: String,
    /// `result` or `amendment`.
    kind: String,
    approve: bool,
    #[serde(default)]
    feedback: String,
}

pub(super) async fn decide(
    State(console): State<Console>,
    _: Operator,
    Json(form): Json<Decide>,
) -> Response {
    let by = "operator (console)";
    let op = RequestId::existing("request_id", &form.request_id).and_then(|request_id| match form
        .kind
        .as_str()
    {
        "result" => Op::review_result(request_id, form.approve, form.feedback, by),
        "amendment" => Op::review_amendment(request_id, form.approve, form.feedback, by),
        other => Err(FieldError::new(
            "kind",
            format!("{other:?} is not result or amendment"),
        )),
    });
    let op = op.map_err(HubError::from);
    decided(
        console
            .hub
            .apply(operator(), Call::Operator, op)
            .await
            .map(decision_json),
    )
}

#[derive(Deserialize)]
pub(super) struct Shutdown {
    name: String,
    #[serde(default)]
    reason: String,
}

pub(super) async fn shutdown(
    State(console): State<Console>,
    _: Operator,
    Json(form): Json<Shutdown>,
) -> Response {
    let op = Name::parse("target", &form.name)
        .and_then(|target| {
            limits::check("reason", &form.reason, limits::REASON)?;
            Ok(Op::RequestShutdown {
                request_id: RequestId::generate(),
                target,
                reason: form.reason,
                deadline_unix_ms: None,
            })
        })
        .map_err(HubError::from);
    decided(
        console
            .hub
            .apply(operator(), Call::Operator, op)
            .await
            .map(|id: RequestId| json!({"request_id": id.to_string()})),
    )
}
