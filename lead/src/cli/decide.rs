//! The operator's decisions from the command line: `lead approve` and
//! `lead reject` (a plan, a result, an amendment or a permission), `lead
//! allow` and `lead deny` (the same, worded for a permission). Each is one
//! `Operator.Decide`: the lead reviews the request as its type says, and
//! the answer (the request as it stands) says what it was.

use mesh_core::grant::{check_relative_glob, Mode};
use shared::{pb, wire::ToPb};

use super::{CliError, Operator};
use crate::render;

/// `lead approve`: `mode` and `write` make a plan's grant (neither: the
/// plan's own files in accept-edits); a request of another type takes
/// none.
pub async fn approve(
    client: &mut Operator,
    request_id: String,
    mode: Option<String>,
    write: Vec<String>,
    feedback: String,
    allow_overlap: bool,
) -> Result<String, CliError> {
    let grant = match (mode, write.is_empty()) {
        (None, true) => None,
        (mode, _) => {
            let mode = Mode::parse("--mode", mode.as_deref().unwrap_or("accept-edits"))
                .map_err(|e| CliError::Usage(e.to_string()))?;
            for path in &write {
                check_relative_glob("--write", path).map_err(|e| CliError::Usage(e.to_string()))?;
            }
            Some(pb::PermissionGrant {
                mode: mode.to_pb() as i32,
                write_paths: write,
                expires_at_unix_ms: 0,
            })
        }
    };
    let decided = decide(
        client,
        pb::DecideRequest {
            request_id,
            approve: true,
            feedback,
            grant,
            refuse_overlap: !allow_overlap,
            r#type: 0,
        },
    )
    .await?;
    Ok(said(&decided, true))
}

/// `lead reject`.
pub async fn reject(
    client: &mut Operator,
    request_id: String,
    feedback: String,
) -> Result<String, CliError> {
    let decided = decide(client, refusal(request_id, feedback)).await?;
    Ok(said(&decided, false))
}

/// `lead allow` / `lead deny`.
pub async fn permit(
    client: &mut Operator,
    request_id: String,
    approve: bool,
    feedback: String,
) -> Result<String, CliError> {
    let ask = pb::DecideRequest {
        approve,
        ..refusal(request_id, feedback)
    };
    let decided = decide(client, ask).await?;
    Ok(said(&decided, approve))
}

/// A no to `request_id`, for `feedback`.
fn refusal(request_id: String, feedback: String) -> pb::DecideRequest {
    pb::DecideRequest {
        request_id,
        approve: false,
        feedback,
        grant: None,
        refuse_overlap: false,
        r#type: 0,
    }
}

async fn decide(
    client: &mut Operator,
    ask: pb::DecideRequest,
) -> Result<pb::ProtocolState, CliError> {
    Ok(client.decide(ask).await?.into_inner())
}

/// What the command says of `decided`, by its type.
fn said(decided: &pb::ProtocolState, approve: bool) -> String {
    let id = &decided.request_id;
    let kind = pb::RequestType::try_from(decided.r#type).unwrap_or_default();
    match (kind, approve) {
        (pb::RequestType::Result, true) => format!(
            "approved result {id}; it lands on the team branch (lead watch shows the merge)\n"
        ),
        (pb::RequestType::Result, false) => {
            format!("rejected result {id}: {}\n", decided.feedback)
        }
        (pb::RequestType::Amendment, true) => format!("approved amendment {id}\n"),
        (pb::RequestType::Amendment, false) => format!("rejected amendment {id}\n"),
        (pb::RequestType::Permission, true) => format!("allowed {id}\n"),
        (pb::RequestType::Permission, false) => format!("denied {id}\n"),
        (_, true) => format!(
            "approved {id} with mode {}\n",
            render::mode(decided.grant.as_ref().map_or(0, |g| g.mode))
        ),
        (_, false) => format!("rejected {id}: {}\n", decided.feedback),
    }
}
