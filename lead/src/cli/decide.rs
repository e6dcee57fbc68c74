//! The operator's decisions from the command line: `lead approve` and
//! `lead reject` (a plan, a result or an amendment, by the request's kind),
//! `lead allow` and `lead deny` (a permission).

use shared::wire::*;

use mesh_core::grant::{check_relative_glob, Mode};
use shared::pb;

use super::{CliError, Operator};
use crate::render;

/// `lead approve`.
pub async fn approve(
    client: &mut Operator,
    request_id: String,
    mode: &str,
    write: Vec<String>,
    feedback: String,
    allow_overlap: bool,
) -> Result<String, CliError> {
    match request_type(client, &request_id).await? {
        t if t == pb::RequestType::Result as i32 => {
            return review_result(client, request_id, true, feedback).await
        }
        t if t == pb::RequestType::Amendment as i32 => {
            return review_amendment(client, request_id, true, feedback).await
        }
        _ => {}
    }
    let mode = Mode::parse("--mode", mode).map_err(|e| CliError::Usage(e.to_string()))?;
    for path in &write {
        check_relative_glob("--write", path).map_err(|e| CliError::Usage(e.to_string()))?;
    }
    let review = pb::PlanReview {
        request_id,
        approve: true,
        feedback,
        grant: Some(pb::PermissionGrant {
            mode: mode.to_pb() as i32,
            write_paths: write,
            expires_at_unix_ms: 0,
        }),
        refuse_overlap: !allow_overlap,
    };
    let response = client.review_plan(review).await?.into_inner();
    Ok(format!(
        "approved {} with mode {}\n",
        response.request_id,
        render::mode(response.grant.map_or(0, |g| g.mode))
    ))
}

/// The type of request `request_id` (`lead approve` and `lead reject`
/// answer plans, results and amendments alike).
async fn request_type(client: &mut Operator, request_id: &str) -> Result<i32, CliError> {
    let request = client
        .get_request(pb::GetRequestRequest {
            request_id: request_id.to_owned(),
        })
        .await?
        .into_inner();
    Ok(request.r#type)
}

/// `lead approve` / `lead reject` of an amendment.
async fn review_amendment(
    client: &mut Operator,
    request_id: String,
    approve: bool,
    feedback: String,
) -> Result<String, CliError> {
    let state = client
        .review_amendment(pb::AmendmentReview {
            request_id,
            approve,
            feedback,
        })
        .await?
        .into_inner();
    let verdict = if approve { "approved" } else { "rejected" };
    Ok(format!("{verdict} amendment {}\n", state.request_id))
}

/// `lead approve` / `lead reject` of a result: an approval lands it.
async fn review_result(
    client: &mut Operator,
    request_id: String,
    approve: bool,
    feedback: String,
) -> Result<String, CliError> {
    let review = pb::ResultReview {
        request_id,
        approve,
        feedback,
    };
    let state = client.review_result(review).await?.into_inner();
    Ok(if approve {
        format!(
            "approved result {}; it lands on the team branch (lead watch shows the merge)\n",
            state.request_id
        )
    } else {
        format!("rejected result {}: {}\n", state.request_id, state.feedback)
    })
}

/// `lead reject`.
pub async fn reject(
    client: &mut Operator,
    request_id: String,
    feedback: String,
) -> Result<String, CliError> {
    match request_type(client, &request_id).await? {
        t if t == pb::RequestType::Result as i32 => {
            return review_result(client, request_id, false, feedback).await
        }
        t if t == pb::RequestType::Amendment as i32 => {
            return review_amendment(client, request_id, false, feedback).await
        }
        _ => {}
    }
    let review = pb::PlanReview {
        request_id,
        approve: false,
        feedback,
        grant: None,
        refuse_overlap: false,
    };
    let response = client.review_plan(review).await?.into_inner();
    Ok(format!(
        "rejected {}: {}\n",
        response.request_id, response.feedback
    ))
}

/// `lead allow` / `lead deny`: answers a permission request.
pub async fn permit(
    client: &mut Operator,
    request_id: String,
    approve: bool,
    feedback: String,
) -> Result<String, CliError> {
    let review = pb::PermissionReview {
        request_id,
        approve,
        feedback,
    };
    let response = client.review_permission(review).await?.into_inner();
    let verdict = if response.approve {
        "allowed"
    } else {
        "denied"
    };
    Ok(format!("{verdict} {}\n", response.request_id))
}
