//! The one place the generated `mesh.v1` types meet the core's: every
//! conversion between a protobuf message or enum and a `mesh-core` type.
//! `to_pb` goes to the wire; `from_pb` comes from it and refuses what the
//! core cannot hold (an unknown enum number, a malformed grant).
//!
//! The conversions are traits because the types live in `mesh-core`, which
//! knows nothing of protobuf: bring them in with `use shared::wire::*;`.

use crate::{pb, plan::Plan};
use mesh_core::{
    effect::{Ended, MemberView, Message, Notice},
    error::FieldError,
    grant::{Grant, Mode},
    lifecycle,
    names::RequestId,
    op::{Joined, Sent},
    protocol::{Kind, Request, ReviewStep, Status},
    result::FileChange,
    tasks::{Review, Task, TaskStatus},
    usage::{Standing, Usage},
};

/// A core value's wire form.
pub trait ToPb {
    /// The generated type.
    type Pb;
    /// To the wire.
    fn to_pb(&self) -> Self::Pb;
}

impl ToPb for Kind {
    type Pb = pb::RequestType;
    fn to_pb(&self) -> pb::RequestType {
        match self {
            Kind::PlanApproval => pb::RequestType::PlanApproval,
            Kind::Shutdown => pb::RequestType::Shutdown,
            Kind::Permission => pb::RequestType::Permission,
            Kind::Result => pb::RequestType::Result,
            Kind::Amendment => pb::RequestType::Amendment,
        }
    }
}

impl ToPb for Status {
    type Pb = pb::RequestStatus;
    fn to_pb(&self) -> pb::RequestStatus {
        match self {
            Status::Pending => pb::RequestStatus::Pending,
            Status::Approved => pb::RequestStatus::Approved,
            Status::Rejected => pb::RequestStatus::Rejected,
            Status::Expired => pb::RequestStatus::Expired,
        }
    }
}

impl ToPb for ReviewStep {
    type Pb = pb::ReviewStep;
    fn to_pb(&self) -> pb::ReviewStep {
        pb::ReviewStep {
            reviewer: self.reviewer.clone(),
            verdict: self.verdict.clone(),
            words: self.words.clone(),
            at_unix_ms: self.at_unix_ms,
        }
    }
}

impl ToPb for Request {
    type Pb = pb::ProtocolState;
    fn to_pb(&self) -> pb::ProtocolState {
        pb::ProtocolState {
            payload_json: self.opening.payload_json.clone(),
            ..request_without_payload(self)
        }
    }
}

/// `request` for the wire without its payload (not copied), as the event
/// history keeps it.
pub fn request_without_payload(request: &Request) -> pb::ProtocolState {
    pb::ProtocolState {
        request_id: request.opening.id.to_string(),
        r#type: request.opening.kind.to_pb() as i32,
        sender: request.opening.sender.clone(),
        target: request.opening.target.clone(),
        status: request.status.to_pb() as i32,
        payload_json: String::new(),
        feedback: request.feedback.clone(),
        created_at_unix_ms: request.created_at_unix_ms,
        resolved_at_unix_ms: request.resolved_at_unix_ms.unwrap_or(0),
        reviews: request.reviews.iter().map(ReviewStep::to_pb).collect(),
        grant: request
            .decision
            .as_ref()
            .and_then(|d| d.grant.as_ref())
            .map(Grant::to_pb),
    }
}

impl ToPb for Mode {
    type Pb = pb::PermissionMode;
    fn to_pb(&self) -> pb::PermissionMode {
        match self {
            Mode::Plan => pb::PermissionMode::Plan,
            Mode::Default => pb::PermissionMode::Default,
            Mode::AcceptEdits => pb::PermissionMode::AcceptEdits,
            Mode::Bypass => pb::PermissionMode::Bypass,
        }
    }
}

impl ToPb for Grant {
    type Pb = pb::PermissionGrant;
    fn to_pb(&self) -> pb::PermissionGrant {
        pb::PermissionGrant {
            mode: self.mode.to_pb() as i32,
            write_paths: self.write_paths.clone(),
            expires_at_unix_ms: self.expires_at_unix_ms.unwrap_or(0),
        }
    }
}

impl ToPb for TaskStatus {
    type Pb = pb::TaskStatus;
    fn to_pb(&self) -> pb::TaskStatus {
        match self {
            TaskStatus::Pending => pb::TaskStatus::Pending,
            TaskStatus::Claimed => pb::TaskStatus::Claimed,
            TaskStatus::Completed => pb::TaskStatus::Completed,
        }
    }
}

impl ToPb for Task {
    type Pb = pb::Task;
    fn to_pb(&self) -> pb::Task {
        pb::Task {
            task_id: self.task_id.clone(),
            subject: self.subject.clone(),
            description: self.description.clone(),
            status: self.status.to_pb() as i32,
            owner: self.owner.clone(),
            blocked_by: self.blocked_by.clone(),
            files: self.files.clone(),
            created_at_unix_ms: self.created_at_unix_ms,
            updated_at_unix_ms: self.updated_at_unix_ms,
            summary: self.summary.clone(),
            review: review_to_pb(self.review) as i32,
        }
    }
}

/// A task's review on the wire.
pub fn review_to_pb(review: Review) -> pb::TaskReview {
    match review {
        Review::Plan => pb::TaskReview::Plan,
        Review::Result => pb::TaskReview::Result,
        Review::Both => pb::TaskReview::Both,
    }
}

/// A task's review from the wire: UNSPECIFIED is `None`; an unknown number
/// an error naming `field`.
pub fn review_from_pb(field: &str, value: i32) -> Result<Option<Review>, FieldError> {
    match pb::TaskReview::try_from(value) {
        Ok(pb::TaskReview::Unspecified) => Ok(None),
        Ok(pb::TaskReview::Plan) => Ok(Some(Review::Plan)),
        Ok(pb::TaskReview::Result) => Ok(Some(Review::Result)),
        Ok(pb::TaskReview::Both) => Ok(Some(Review::Both)),
        Err(_) => Err(FieldError::new(
            field,
            format!("{value} is not a TaskReview"),
        )),
    }
}

impl ToPb for lifecycle::Status {
    type Pb = pb::MemberStatus;
    fn to_pb(&self) -> pb::MemberStatus {
        use pb::MemberStatus as P;
        match self {
            lifecycle::Status::Working => P::Working,
            lifecycle::Status::Idle => P::Idle,
            lifecycle::Status::Disconnected => P::Disconnected,
            lifecycle::Status::ShuttingDown => P::ShuttingDown,
            lifecycle::Status::Terminated => P::Terminated,
        }
    }
}

impl ToPb for mesh_core::members::Member {
    type Pb = pb::Member;
    /// Who it is, its status and its mode; what it used and holds are the
    /// team's to add.
    fn to_pb(&self) -> pb::Member {
        pb::Member {
            member_id: self.id.clone(),
            name: self.name.to_string(),
            role: self.role.clone(),
            status: self.life.status().to_pb() as i32,
            mode: self.mode.to_pb() as i32,
            joining: self.life.is_joining(),
            idle_reason: if self.life.is_idle() {
                self.idle_reason.clone()
            } else {
                String::new()
            },
            ..Default::default()
        }
    }
}

impl ToPb for Plan {
    type Pb = pb::Plan;
    fn to_pb(&self) -> pb::Plan {
        pb::Plan {
            summary: self.summary.clone(),
            steps: self.steps.clone(),
            files: self.files.clone(),
            tests: self.tests.clone(),
            body: self.body.clone(),
            task_id: self.task_id.clone(),
        }
    }
}

impl ToPb for Usage {
    type Pb = pb::Usage;
    fn to_pb(&self) -> pb::Usage {
        pb::Usage {
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
            calls: self.calls,
            model_ms: self.model_ms,
        }
    }
}

impl From<&pb::Usage> for Usage {
    fn from(u: &pb::Usage) -> Self {
        Self {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            calls: u.calls,
            model_ms: u.model_ms,
        }
    }
}

impl ToPb for Standing {
    type Pb = pb::UsageStatus;
    fn to_pb(&self) -> pb::UsageStatus {
        pb::UsageStatus {
            total: Some(self.total.to_pb()),
            token_budget: self.token_budget,
        }
    }
}

/// `name`'s standing as a `Watch` event's body.
pub fn member_usage(name: &str, standing: &Standing) -> pb::MemberUsage {
    pb::MemberUsage {
        name: name.to_owned(),
        total: Some(standing.total.to_pb()),
        token_budget: standing.token_budget,
    }
}

impl ToPb for MemberView {
    type Pb = pb::Member;
    fn to_pb(&self) -> pb::Member {
        pb::Member {
            usage: Some(self.standing.total.to_pb()),
            token_budget: self.standing.token_budget,
            holds: self.holds.clone(),
            ..self.member.to_pb()
        }
    }
}

impl ToPb for Message {
    type Pb = pb::envelope::Body;
    fn to_pb(&self) -> pb::envelope::Body {
        use pb::envelope::Body;
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
            Message::Terminated(ended) => {
                let mut ended = ended.iter().map(|e| pb::TerminatedMember {
                    name: e.name.clone(),
                    reason: e.reason.clone(),
                });
                let first = ended.next().unwrap_or_default();
                Body::TeammateTerminated(pb::TeammateTerminated {
                    name: first.name,
                    reason: first.reason,
                    more: ended.collect(),
                })
            }
            Message::ShutdownRequest {
                request_id,
                target,
                reason,
                deadline_unix_ms,
            } => Body::ShutdownRequest(pb::ShutdownRequest {
                request_id: request_id.to_string(),
                target: target.clone(),
                reason: reason.clone(),
                deadline_unix_ms: *deadline_unix_ms,
                traceparent: String::new(),
            }),
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
            } => Body::ResultRequest(pb::ResultRequest {
                request_id: request_id.to_string(),
                task_id: task_id.clone(),
                base: base.clone(),
                diff: String::new(),
                summary: summary.clone(),
                test_output: String::new(),
                supersedes: supersedes.clone(),
                files: files.iter().map(file_change_to_pb).collect(),
            }),
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
            } => Body::ResultResponse(pb::ResultResponse {
                request_id: request_id.to_string(),
                approve: *approve,
                feedback: feedback.clone(),
                commit: commit.clone(),
                conflicts: conflicts.clone(),
                branch_head: branch_head.clone(),
            }),
        }
    }
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

/// [`Message`] from the wire (an envelope's body as the store kept it).
pub trait MessageFromPb: Sized {
    /// A body the core cannot hold (a malformed id or grant, an unknown
    /// status) is an error naming the field.
    fn from_pb(body: pb::envelope::Body) -> Result<Self, FieldError>;
}

impl MessageFromPb for Message {
    fn from_pb(body: pb::envelope::Body) -> Result<Self, FieldError> {
        use pb::envelope::Body;
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
                grant: r
                    .grant
                    .as_ref()
                    .map(|g| Grant::from_pb("grant", g, Mode::AcceptEdits))
                    .transpose()?,
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
                Message::TaskClaimable(Task::from_pb(t).ok_or_else(|| {
                    FieldError::new("task_claimable.status", "is not a task status")
                })?)
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
                grant: r
                    .grant
                    .as_ref()
                    .map(|g| Grant::from_pb("grant", g, Mode::AcceptEdits))
                    .transpose()?,
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

/// What a watcher's event of `notice` at `at_unix_ms` is as `Watch` sends
/// it: its encoded size counts against the watcher's byte budget.
pub fn event_bytes(at_unix_ms: i64, notice: &Notice) -> usize {
    use prost::Message as _;
    pb::Event {
        at_unix_ms,
        kind: Some(notice.to_pb()),
    }
    .encoded_len()
}

/// A watcher's event on the wire.
pub fn event(at_unix_ms: i64, notice: &Notice) -> pb::Event {
    pb::Event {
        at_unix_ms,
        kind: Some(notice.to_pb()),
    }
}

impl ToPb for Notice {
    type Pb = pb::event::Kind;
    fn to_pb(&self) -> pb::event::Kind {
        match self {
            Notice::Envelope(envelope) => pb::event::Kind::Envelope(pb::Envelope {
                seq: envelope.seq,
                message_id: envelope.message_id.clone(),
                from: envelope.from.clone(),
                to: envelope.to.clone(),
                sent_at_unix_ms: envelope.sent_at_unix_ms,
                body: Some(envelope.message.to_pb()),
            }),
            Notice::ChildExited {
                name,
                pid,
                how,
                joined,
                log_path,
                log_tail,
            } => pb::event::Kind::ChildExited(pb::ChildExited {
                name: name.clone(),
                pid: *pid,
                how: how.clone(),
                joined: *joined,
                log_path: log_path.clone(),
                log_tail: log_tail.clone(),
            }),
            Notice::Member(view) => pb::event::Kind::Member(view.to_pb()),
            Notice::Request(request) => pb::event::Kind::Request(request.to_pb()),
            Notice::Task(task) => pb::event::Kind::Task(task.to_pb()),
            Notice::ToolCall {
                member,
                tool,
                args_json,
                allowed,
                outcome,
            } => pb::event::Kind::ToolCall(pb::ToolCallReport {
                tool: tool.clone(),
                args_json: args_json.clone(),
                allowed: *allowed,
                outcome: outcome.clone(),
                member: member.clone(),
            }),
            Notice::ReviewNote {
                request_id,
                reviewer,
                note,
            } => pb::event::Kind::ReviewNote(pb::ReviewNote {
                request_id: request_id.to_string(),
                reviewer: reviewer.clone(),
                note: note.clone(),
            }),
            Notice::Usage { name, standing } => {
                pb::event::Kind::Usage(member_usage(name, standing))
            }
        }
    }
}

impl From<&pb::Plan> for Plan {
    fn from(plan: &pb::Plan) -> Self {
        Self {
            summary: plan.summary.clone(),
            steps: plan.steps.clone(),
            files: plan.files.clone(),
            tests: plan.tests.clone(),
            body: plan.body.clone(),
            task_id: plan.task_id.clone(),
        }
    }
}

/// [`Kind`] from the wire.
pub trait KindFromPb: Sized {
    /// UNSPECIFIED (and unknown numbers) are `None`.
    fn from_pb(value: i32) -> Option<Self>;
}

impl KindFromPb for Kind {
    fn from_pb(value: i32) -> Option<Self> {
        match pb::RequestType::try_from(value) {
            Ok(pb::RequestType::PlanApproval) => Some(Kind::PlanApproval),
            Ok(pb::RequestType::Shutdown) => Some(Kind::Shutdown),
            Ok(pb::RequestType::Permission) => Some(Kind::Permission),
            Ok(pb::RequestType::Result) => Some(Kind::Result),
            Ok(pb::RequestType::Amendment) => Some(Kind::Amendment),
            _ => None,
        }
    }
}

/// [`Status`] from the wire.
pub trait StatusFromPb: Sized {
    /// UNSPECIFIED (and unknown numbers) are `None`.
    fn from_pb(value: i32) -> Option<Self>;
}

impl StatusFromPb for Status {
    fn from_pb(value: i32) -> Option<Self> {
        match pb::RequestStatus::try_from(value) {
            Ok(pb::RequestStatus::Pending) => Some(Status::Pending),
            Ok(pb::RequestStatus::Approved) => Some(Status::Approved),
            Ok(pb::RequestStatus::Rejected) => Some(Status::Rejected),
            Ok(pb::RequestStatus::Expired) => Some(Status::Expired),
            _ => None,
        }
    }
}

/// [`TaskStatus`] from the wire.
pub trait TaskStatusFromPb: Sized {
    /// `None` for UNSPECIFIED (or a value this build does not know).
    fn from_pb(value: i32) -> Option<Self>;
}

impl TaskStatusFromPb for TaskStatus {
    fn from_pb(value: i32) -> Option<Self> {
        match pb::TaskStatus::try_from(value).ok()? {
            pb::TaskStatus::Pending => Some(TaskStatus::Pending),
            pb::TaskStatus::Claimed => Some(TaskStatus::Claimed),
            pb::TaskStatus::Completed => Some(TaskStatus::Completed),
            pb::TaskStatus::Unspecified => None,
        }
    }
}

/// [`Task`] from the wire (as stored).
pub trait TaskFromPb: Sized {
    /// `None` for an unknown status.
    fn from_pb(task: pb::Task) -> Option<Self>;
}

impl TaskFromPb for Task {
    fn from_pb(task: pb::Task) -> Option<Self> {
        Some(Self {
            status: TaskStatus::from_pb(task.status)?,
            task_id: task.task_id,
            subject: task.subject,
            description: task.description,
            owner: task.owner,
            blocked_by: task.blocked_by,
            files: task.files,
            created_at_unix_ms: task.created_at_unix_ms,
            updated_at_unix_ms: task.updated_at_unix_ms,
            summary: task.summary,
            // Tasks stored before reviews existed were reviewed by plan.
            review: review_from_pb("review", task.review)
                .ok()
                .flatten()
                .unwrap_or_default(),
        })
    }
}

/// [`Mode`] from the wire.
pub trait ModeFromPb: Sized {
    /// UNSPECIFIED is `None`; an unknown number is an error naming `field`.
    fn from_pb(field: &str, value: i32) -> Result<Option<Self>, FieldError>;
}

impl ModeFromPb for Mode {
    fn from_pb(field: &str, value: i32) -> Result<Option<Self>, FieldError> {
        match pb::PermissionMode::try_from(value) {
            Ok(pb::PermissionMode::Unspecified) => Ok(None),
            Ok(pb::PermissionMode::Plan) => Ok(Some(Mode::Plan)),
            Ok(pb::PermissionMode::Default) => Ok(Some(Mode::Default)),
            Ok(pb::PermissionMode::AcceptEdits) => Ok(Some(Mode::AcceptEdits)),
            Ok(pb::PermissionMode::Bypass) => Ok(Some(Mode::Bypass)),
            Err(_) => Err(FieldError::new(
                field,
                format!("{value} is not a PermissionMode"),
            )),
        }
    }
}

/// The answer to a plan request, as the teammate and the operator see it.
pub fn plan_response(request: &Request) -> pb::PlanApprovalResponse {
    pb::PlanApprovalResponse {
        request_id: request.id().to_string(),
        approve: request.status == Status::Approved,
        feedback: request.feedback.clone(),
        grant: request
            .decision
            .as_ref()
            .and_then(|d| d.grant.as_ref())
            .map(Grant::to_pb),
    }
}

/// The answer to a permission request, as the teammate and the operator see it.
pub fn permission_response(request: &Request) -> pb::PermissionResponse {
    pb::PermissionResponse {
        request_id: request.id().to_string(),
        approve: request.status == Status::Approved,
        feedback: request.feedback.clone(),
    }
}

impl ToPb for Joined {
    type Pb = pb::JoinResponse;
    fn to_pb(&self) -> pb::JoinResponse {
        pb::JoinResponse {
            member_id: self.member_id.clone(),
            session_token: self.session_token.clone(),
            grant: Some(Grant::plan().to_pb()),
            usage: Some(self.standing.to_pb()),
        }
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

/// [`Grant`] from the wire, validated.
pub trait GrantFromPb: Sized {
    /// `default_mode` stands in for UNSPECIFIED.
    fn from_pb(
        field: &str,
        grant: &pb::PermissionGrant,
        default_mode: Mode,
    ) -> Result<Self, FieldError>;
}

impl GrantFromPb for Grant {
    fn from_pb(
        field: &str,
        grant: &pb::PermissionGrant,
        default_mode: Mode,
    ) -> Result<Self, FieldError> {
        let mode = Mode::from_pb(&format!("{field}.mode"), grant.mode)?.unwrap_or(default_mode);
        let expires = match grant.expires_at_unix_ms {
            0 => None,
            at => Some(at),
        };
        Grant::checked(field, mode, grant.write_paths.clone(), expires)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mesh_core::{
        names::RequestId,
        protocol::{Opening, Tracker},
        tasks::{NewTask, TaskBoard},
    };

    #[test]
    fn a_texts_size_is_its_encoded_size() {
        for n in [0, 1, 5, 126, 127, 128, 16_383, 16_384, 70_000] {
            let text = Message::Text {
                content: "x".repeat(n),
            };
            assert_eq!(
                message_bytes(&text),
                text.to_pb().encoded_len(),
                "{n} bytes"
            );
        }
    }

    #[test]
    fn every_message_comes_back_from_the_wire_as_it_went() {
        let id = RequestId::existing("id", "0b6f3c1e-1d2a-4f5b-8c9d-0e1f2a3b4c5d").expect("id");
        let task = TaskBoard::new(10)
            .create(
                "t1".into(),
                NewTask {
                    subject: "s".into(),
                    ..NewTask::default()
                },
                1,
            )
            .expect("task");
        let messages = [
            Message::Text {
                content: "hi".into(),
            },
            Message::PlanApprovalRequest {
                request_id: id.clone(),
                plan: Plan {
                    summary: "s".into(),
                    files: vec!["a.rs".into()],
                    ..Plan::default()
                },
                supersedes: String::new(),
            },
            Message::PlanDecided {
                request_id: id.clone(),
                approve: true,
                feedback: "ok".into(),
                grant: Some(
                    Grant::checked("grant", Mode::AcceptEdits, vec!["src/**".into()], None)
                        .expect("grant"),
                ),
            },
            Message::PlanDecided {
                request_id: id.clone(),
                approve: false,
                feedback: "no".into(),
                grant: None,
            },
            Message::PermissionRequest {
                request_id: id.clone(),
                tool: "write_file".into(),
                args_json: "{}".into(),
            },
            Message::PermissionDecided {
                request_id: id.clone(),
                approve: true,
                feedback: String::new(),
            },
            Message::ShutdownRequest {
                request_id: id.clone(),
                target: "alice".into(),
                reason: "r".into(),
                deadline_unix_ms: 9,
            },
            Message::ShutdownResponse {
                request_id: id.clone(),
                approve: false,
                reason: "busy".into(),
            },
            Message::Idle {
                reason: "done".into(),
            },
            Message::Terminated(vec![
                Ended {
                    name: "a".into(),
                    reason: "x".into(),
                },
                Ended {
                    name: "b".into(),
                    reason: "y".into(),
                },
            ]),
            Message::TaskClaimable(task),
            Message::BudgetChanged { token_budget: 7 },
        ];
        for message in messages {
            assert_eq!(Message::from_pb(message.to_pb()).as_ref(), Ok(&message));
        }
    }

    #[test]
    fn grants_round_trip_and_default_their_mode() {
        let wire = pb::PermissionGrant {
            mode: 0,
            write_paths: vec!["src/**".into()],
            expires_at_unix_ms: 0,
        };
        let grant = Grant::from_pb("grant", &wire, Mode::AcceptEdits).expect("valid");
        assert_eq!(grant.mode, Mode::AcceptEdits);
        assert_eq!(grant.expires_at_unix_ms, None);
        assert_eq!(grant.to_pb().mode, pb::PermissionMode::AcceptEdits as i32);
        let bad = pb::PermissionGrant { mode: 99, ..wire };
        assert_eq!(
            Grant::from_pb("grant", &bad, Mode::Plan)
                .expect_err("bad")
                .field,
            "grant.mode"
        );
    }

    #[test]
    fn states_and_kinds_round_trip_with_the_contract_names() {
        for state in [
            Status::Pending,
            Status::Approved,
            Status::Rejected,
            Status::Expired,
        ] {
            assert_eq!(Status::from_pb(state.to_pb() as i32), Some(state));
            assert_eq!(state.as_str(), state.to_pb().as_str_name());
        }
        for kind in [Kind::PlanApproval, Kind::Shutdown, Kind::Permission] {
            assert_eq!(Kind::from_pb(kind.to_pb() as i32), Some(kind));
            assert_eq!(kind.as_str(), kind.to_pb().as_str_name());
        }
        assert_eq!(Status::from_pb(0), None);
        assert_eq!(Kind::from_pb(42), None);
        let mut tracker = Tracker::new();
        let id = RequestId::existing("request_id", "r1").expect("id");
        tracker
            .open(
                Opening {
                    id: id.clone(),
                    kind: Kind::PlanApproval,
                    sender: "alice".into(),
                    target: "lead".into(),
                    payload_json: "{}".into(),
                    deadline_unix_ms: None,
                },
                1,
            )
            .expect("opens");
        let wire = tracker.get(&id).expect("present").to_pb();
        assert_eq!(wire.status, pb::RequestStatus::Pending as i32);
        assert_eq!(wire.sender, "alice");
    }

    #[test]
    fn tasks_and_plans_round_trip() {
        let mut board = TaskBoard::new(10);
        let task = board
            .create(
                "a".into(),
                NewTask {
                    subject: "s".into(),
                    ..Default::default()
                },
                5,
            )
            .expect("created");
        assert_eq!(Task::from_pb(task.to_pb()), Some(task));
        let plan = Plan {
            summary: "s".into(),
            files: vec!["a".into()],
            task_id: "t".into(),
            ..Default::default()
        };
        assert_eq!(Plan::from(&plan.to_pb()), plan);
    }
}
