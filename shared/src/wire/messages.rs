//! Messages on the wire both ways: an envelope's body as the core's
//! [`Message`] and back, a result's changed files, what a message costs an
//! inbox, and the answer to a send.

use crate::{pb, plan::Plan};
use mesh_core::{
    effect::{Ended, Message},
    error::FieldError,
    grant::Grant,
    names::RequestId,
    op::Sent,
    result::FileChange,
    tasks::Task,
};
use pb::envelope::Body;

use super::ToPb;

impl ToPb for Message {
    type Pb = Body;
    fn to_pb(&self) -> Body {
        match self {
            Message::Text { content } => Body::Text(pb::Text {
                content: content.clone(),
            }),
            Message::PlanApprovalRequest {
                request_id,
                plan,
                supersedes,
            } => Body::PlanApprovalRequest(pb::PlanApprovalRequest {
                request_id: request_id.to_string(),
                plan: Some(plan.to_pb()),
                supersedes: supersedes.clone(),
            }),
            Message::PlanDecided {
                request_id,
                approve,
                feedback,
                grant,
            } => Body::PlanApprovalResponse(pb::PlanApprovalResponse {
                request_id: request_id.to_string(),
                approve: *approve,
                feedback: feedback.clone(),
                grant: grant.as_ref().map(Grant::to_pb),
            }),
            Message::PermissionRequest {
                request_id,
                tool,
                args_json,
            } => Body::PermissionRequest(pb::PermissionRequest {
                request_id: request_id.to_string(),
                tool: tool.clone(),
                args_json: args_json.clone(),
            }),
            Message::PermissionDecided {
                request_id,
                approve,
                feedback,
            } => Body::PermissionResponse(pb::PermissionResponse {
                request_id: request_id.to_string(),
                approve: *approve,
                feedback: feedback.clone(),
            }),
            Message::Terminated(ended) => Body::TeammateTerminated(terminated(ended)),
            Message::ShutdownRequest {
                request_id,
                target,
                reason,
                deadline_unix_ms,
            } => shutdown_request(request_id, target, reason, *deadline_unix_ms),
            Message::ShutdownResponse {
                request_id,
                approve,
                reason,
            } => Body::ShutdownResponse(pb::ShutdownResponse {
                request_id: request_id.to_string(),
                approve: *approve,
                reason: reason.clone(),
            }),
            Message::Idle { reason } => Body::IdleNotification(pb::IdleNotification {
                reason: reason.clone(),
            }),
            Message::TaskClaimable(task) => Body::TaskClaimable(task.to_pb()),
            Message::BudgetChanged { token_budget } => Body::BudgetChanged(pb::BudgetChanged {
                token_budget: *token_budget,
            }),
            Message::ResultRequest {
                request_id,
                task_id,
                base,
                summary,
                files,
                supersedes,
            } => result_request(request_id, task_id, base, summary, files, supersedes),
            Message::AmendmentRequest {
                request_id,
                plan_id,
                files,
                steps,
                why,
            } => Body::AmendmentRequest(pb::AmendmentRequest {
                request_id: request_id.to_string(),
                files: files.clone(),
                steps: steps.clone(),
                why: why.clone(),
                plan_id: plan_id.clone(),
            }),
            Message::AmendmentDecided {
                request_id,
                approve,
                feedback,
                grant,
            } => Body::AmendmentResponse(pb::AmendmentResponse {
                request_id: request_id.to_string(),
                approve: *approve,
                feedback: feedback.clone(),
                grant: grant.as_ref().map(Grant::to_pb),
            }),
            Message::ResultDecided {
                request_id,
                approve,
                feedback,
                commit,
                conflicts,
                branch_head,
            } => result_decided(
                request_id,
                *approve,
                feedback,
                commit,
                conflicts,
                branch_head,
            ),
        }
    }
}

/// A teammate's ended members on the wire: the first in the fields every
/// release reads, the rest in `more`.
fn terminated(ended: &[Ended]) -> pb::TeammateTerminated {
    let mut ended = ended.iter().map(|e| pb::TerminatedMember {
        name: e.name.clone(),
        reason: e.reason.clone(),
    });
    let first = ended.next().unwrap_or_default();
    pb::TeammateTerminated {
        name: first.name,
        reason: first.reason,
        more: ended.collect(),
    }
}

/// A shutdown asked for, as an envelope's body: its `traceparent` is the
/// lead's to set as it delivers it (when it exports traces), not the core's.
fn shutdown_request(
    request_id: &RequestId,
    target: &str,
    reason: &str,
    deadline_unix_ms: i64,
) -> Body {
    Body::ShutdownRequest(pb::ShutdownRequest {
        request_id: request_id.to_string(),
        target: target.to_owned(),
        reason: reason.to_owned(),
        deadline_unix_ms,
        traceparent: String::new(),
    })
}

/// A result's review asked for, as an envelope's body: the diff and the
/// test output stay in the request's payload, never in the envelope.
fn result_request(
    request_id: &RequestId,
    task_id: &str,
    base: &str,
    summary: &str,
    files: &[FileChange],
    supersedes: &str,
) -> Body {
    Body::ResultRequest(pb::ResultRequest {
        request_id: request_id.to_string(),
        task_id: task_id.to_owned(),
        base: base.to_owned(),
        diff: String::new(),
        summary: summary.to_owned(),
        test_output: String::new(),
        supersedes: supersedes.to_owned(),
        files: files.iter().map(file_change_to_pb).collect(),
    })
}

/// A result's review decided, as an envelope's body.
fn result_decided(
    request_id: &RequestId,
    approve: bool,
    feedback: &str,
    commit: &str,
    conflicts: &[String],
    branch_head: &str,
) -> Body {
    Body::ResultResponse(pb::ResultResponse {
        request_id: request_id.to_string(),
        approve,
        feedback: feedback.to_owned(),
        commit: commit.to_owned(),
        conflicts: conflicts.to_vec(),
        branch_head: branch_head.to_owned(),
    })
}

/// One changed file on the wire.
pub fn file_change_to_pb(f: &FileChange) -> pb::FileChange {
    pb::FileChange {
        path: f.path.clone(),
        added: f.added,
        removed: f.removed,
        binary: f.binary,
    }
}

/// The encoded size of `message` on the wire, which inbox budgets count.
pub fn message_bytes(message: &Message) -> usize {
    match message {
        // The hot path (a member's text), without building the message.
        Message::Text { content } => {
            let text = if content.is_empty() {
                0
            } else {
                1 + prost::encoding::encoded_len_varint(content.len() as u64) + content.len()
            };
            1 + prost::encoding::encoded_len_varint(text as u64) + text
        }
        other => other.to_pb().encoded_len(),
    }
}

/// [`Message`] from the wire (an envelope's body as the store kept it): a
/// body the core cannot hold (a malformed id or grant, an unknown status)
/// is an error naming the field.
impl TryFrom<Body> for Message {
    type Error = FieldError;
    fn try_from(body: Body) -> Result<Self, FieldError> {
        let id = |value: &str| RequestId::existing("request_id", value);
        Ok(match body {
            Body::Text(t) => Message::Text { content: t.content },
            Body::PlanApprovalRequest(r) => Message::PlanApprovalRequest {
                request_id: id(&r.request_id)?,
                plan: r.plan.as_ref().map(Plan::from).unwrap_or_default(),
                supersedes: r.supersedes,
            },
            Body::PlanApprovalResponse(r) => Message::PlanDecided {
                request_id: id(&r.request_id)?,
                approve: r.approve,
                feedback: r.feedback,
                grant: r.grant.as_ref().map(Grant::try_from).transpose()?,
            },
            Body::ShutdownRequest(r) => Message::ShutdownRequest {
                request_id: id(&r.request_id)?,
                target: r.target,
                reason: r.reason,
                deadline_unix_ms: r.deadline_unix_ms,
            },
            Body::ShutdownResponse(r) => Message::ShutdownResponse {
                request_id: id(&r.request_id)?,
                approve: r.approve,
                reason: r.reason,
            },
            Body::PermissionRequest(r) => Message::PermissionRequest {
                request_id: id(&r.request_id)?,
                tool: r.tool,
                args_json: r.args_json,
            },
            Body::PermissionResponse(r) => Message::PermissionDecided {
                request_id: id(&r.request_id)?,
                approve: r.approve,
                feedback: r.feedback,
            },
            Body::IdleNotification(i) => Message::Idle { reason: i.reason },
            Body::TeammateTerminated(t) => Message::Terminated(
                std::iter::once(Ended {
                    name: t.name,
                    reason: t.reason,
                })
                .chain(t.more.into_iter().map(|m| Ended {
                    name: m.name,
                    reason: m.reason,
                }))
                .collect(),
            ),
            Body::TaskClaimable(t) => {
                Message::TaskClaimable(Box::new(Task::try_from(t).map_err(|_| {
                    FieldError::new("task_claimable.status", "is not a task status")
                })?))
            }
            Body::BudgetChanged(b) => Message::BudgetChanged {
                token_budget: b.token_budget,
            },
            Body::ResultRequest(r) => Message::ResultRequest {
                request_id: id(&r.request_id)?,
                task_id: r.task_id,
                base: r.base,
                summary: r.summary,
                files: r
                    .files
                    .into_iter()
                    .map(|f| FileChange {
                        path: f.path,
                        added: f.added,
                        removed: f.removed,
                        binary: f.binary,
                    })
                    .collect(),
                supersedes: r.supersedes,
            },
            Body::AmendmentRequest(r) => Message::AmendmentRequest {
                request_id: id(&r.request_id)?,
                plan_id: r.plan_id,
                files: r.files,
                steps: r.steps,
                why: r.why,
            },
            Body::AmendmentResponse(r) => Message::AmendmentDecided {
                request_id: id(&r.request_id)?,
                approve: r.approve,
                feedback: r.feedback,
                grant: r.grant.as_ref().map(Grant::try_from).transpose()?,
            },
            Body::ResultResponse(r) => Message::ResultDecided {
                request_id: id(&r.request_id)?,
                approve: r.approve,
                feedback: r.feedback,
                commit: r.commit,
                conflicts: r.conflicts,
                branch_head: r.branch_head,
            },
        })
    }
}

impl ToPb for Sent {
    type Pb = pb::SendResponse;
    fn to_pb(&self) -> pb::SendResponse {
        pb::SendResponse {
            message_id: self.message_id.clone(),
            skipped: self.skipped.clone(),
        }
    }
}
