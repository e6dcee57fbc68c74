//! The operator's decisions made in the console: a plan approved or
//! rejected, a permission allowed or denied, a result or an amendment
//! decided, a member asked to shut down; each the op the `Operator` service
//! would apply.

use axum::{extract::State, http::StatusCode, response::Response, Json};
use mesh_core::{
    error::FieldError,
    grant::{Grant, Mode},
    limits,
    names::{Name, RequestId},
    op::{Decide, RequestShutdown},
    protocol::Kind,
};
use serde::Deserialize;
use serde_json::json;

use super::{
    answers::{decided, decision_json, failed},
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
    operator: Operator,
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
    let grant = match Grant::checked("grant", mode, form.write_paths, None) {
        Ok(grant) => grant,
        Err(e) => return decided(Err(e.into())),
    };
    let decision = Decision {
        approve: true,
        feedback: form.feedback,
        grant: Some(grant),
        allow_overlap: form.allow_overlap,
    };
    decide_as(
        &console,
        &operator,
        &form.request_id,
        Some(Kind::PlanApproval),
        decision,
    )
    .await
}

/// What the operator decided in the console, of a request it takes to be
/// of `kind` (if it says).
struct Decision {
    approve: bool,
    feedback: String,
    grant: Option<Grant>,
    allow_overlap: bool,
}

impl Decision {
    /// A yes or a no, with `feedback`, and no grant.
    fn plain(approve: bool, feedback: String) -> Self {
        Self {
            approve,
            feedback,
            grant: None,
            allow_overlap: false,
        }
    }
}

/// The one op every decision of the console is: [`Decide`], which the
/// core reviews as the request's kind says (refused if it is not `kind`).
async fn decide_as(
    console: &Console,
    operator: &Operator,
    request_id: &str,
    kind: Option<Kind>,
    decision: Decision,
) -> Response {
    let op = RequestId::existing("request_id", request_id)
        .map(|request_id| Decide {
            request_id,
            approve: decision.approve,
            feedback: decision.feedback,
            grant: decision.grant,
            allow_overlap: decision.allow_overlap,
            by: operator.signer(),
            kind,
        })
        .map_err(HubError::from);
    decided(
        console
            .hub
            .operate(operator.claim(), op)
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
    operator: Operator,
    Json(form): Json<Reject>,
) -> Response {
    let decision = Decision::plain(false, form.feedback);
    decide_as(
        &console,
        &operator,
        &form.request_id,
        Some(Kind::PlanApproval),
        decision,
    )
    .await
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
    operator: Operator,
    Json(form): Json<Permission>,
) -> Response {
    let decision = Decision::plain(form.approve, form.feedback);
    decide_as(
        &console,
        &operator,
        &form.request_id,
        Some(Kind::Permission),
        decision,
    )
    .await
}

/// A decision on a request of any kind; `kind` (`result`, `amendment`,
/// `plan`, `permission`), if given, is the kind the operator takes it for.
#[derive(Deserialize)]
pub(super) struct DecideForm {
    request_id: String,
    #[serde(default)]
    kind: String,
    approve: bool,
    #[serde(default)]
    feedback: String,
}

pub(super) async fn decide(
    State(console): State<Console>,
    operator: Operator,
    Json(form): Json<DecideForm>,
) -> Response {
    let kind = match form.kind.as_str() {
        "" => None,
        "plan" => Some(Kind::PlanApproval),
        "permission" => Some(Kind::Permission),
        "result" => Some(Kind::Result),
        "amendment" => Some(Kind::Amendment),
        other => {
            let e = FieldError::new(
                "kind",
                format!("{other:?} is not plan, permission, result or amendment"),
            );
            return decided(Err(e.into()));
        }
    };
    let decision = Decision::plain(form.approve, form.feedback);
    decide_as(&console, &operator, &form.request_id, kind, decision).await
}

#[derive(Deserialize)]
pub(super) struct Shutdown {
    name: String,
    #[serde(default)]
    reason: String,
}

pub(super) async fn shutdown(
    State(console): State<Console>,
    operator: Operator,
    Json(form): Json<Shutdown>,
) -> Response {
    let op = Name::parse("target", &form.name)
        .and_then(|target| {
            limits::check("reason", &form.reason, limits::REASON)?;
            Ok(RequestShutdown {
                request_id: RequestId::generate(),
                target,
                reason: form.reason,
                deadline_unix_ms: None,
                asked_by: operator.signer(),
            })
        })
        .map_err(HubError::from);
    decided(
        console
            .hub
            .operate(operator.claim(), op)
            .await
            .map(|id: RequestId| json!({"request_id": id.to_string()})),
    )
}
