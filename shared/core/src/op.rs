//! What a caller can do to the team, in the core's words. An edge (the
//! lead's gRPC services, its console) checks a call's fields, translates it
//! into an [`Op`], and says at which door it came in ([`Call`]); the lead's
//! hub resolves who called ([`crate::access::Caller`]) and applies it. No
//! protobuf, no tokens: one variant per thing a caller can do, not per RPC
//! (`Lead.ListTasks` and `Operator.ListTasks` are one [`Op::ListTasks`]).

use crate::{
    access::Call,
    error::FieldError,
    grant::Grant,
    names::{Name, RequestId},
    plan::Plan,
    protocol::{Kind, Status},
    tasks::{NewTask, TaskStatus},
    usage::{Standing, Usage},
};

/// One page of a list asked for: the entries after key `after` (none: from
/// the start), at most `size` of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageAsk {
    /// The key of the last entry of the previous page.
    pub after: Option<u64>,
    /// The most entries.
    pub size: usize,
}

/// What a join answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    /// The member's id, new for every join.
    pub member_id: String,
    /// The session token its calls carry from now on.
    pub session_token: String,
    /// What its model used so far, and its budget.
    pub standing: Standing,
}

/// What a send answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The message's id: the sender's, or one the lead made.
    pub message_id: String,
    /// The members a broadcast skipped, their inboxes full.
    pub skipped: Vec<String>,
}

/// What a reviewer says of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanVerdict {
    /// Approved, with the grant it carries.
    Approve {
        /// What the teammate may now do.
        grant: Grant,
        /// A note for the teammate.
        feedback: String,
        /// Whether to approve although the plan's files fall inside another
        /// member's hold (refused without it, naming the holder).
        allow_overlap: bool,
    },
    /// Rejected, with feedback the teammate revises against.
    Reject {
        /// What to change; never empty.
        feedback: String,
    },
}

/// What a caller does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Someone with the join token joins the team, in plan mode.
    Join {
        /// Its name, unique among active members.
        name: Name,
        /// What it does, in a word or a line.
        role: String,
        /// The budget it asks for; 0: none of its own.
        token_budget: u64,
        /// Its id, which the edge made (a UUID, new for every join).
        member_id: String,
        /// The session token its calls will carry, which the edge made.
        session_token: String,
        /// How it confines its commands, if it said.
        sandbox: Option<crate::sandbox::Sandbox>,
        /// How its model's replies are held to one call, if it said.
        decoding: Option<crate::decoding::Decoding>,
    },
    /// A member has processed its inbox up to `seq`.
    Ack {
        /// The newest envelope processed.
        seq: u64,
    },
    /// A member sends a text to one member, to `lead`, or to everyone (`*`).
    Send {
        /// The recipient.
        to: String,
        /// The id the sender chose, which makes a retry harmless.
        message_id: Option<String>,
        /// The text.
        content: String,
    },
    /// A member says it has nothing to do.
    ReportIdle {
        /// Why, in its words.
        reason: String,
    },
    /// A member reports a tool call it made or was refused, for the record.
    ReportToolCall {
        /// The tool.
        tool: String,
        /// Its arguments, as JSON.
        args_json: String,
        /// Whether the gate let it run.
        allowed: bool,
        /// What came of it.
        outcome: String,
    },
    /// A member leaves the team for good, now.
    Leave {
        /// Why.
        reason: String,
    },
    /// The operator asks a member to shut down.
    RequestShutdown {
        /// The request's id.
        request_id: RequestId,
        /// The member.
        target: Name,
        /// Why.
        reason: String,
        /// When the request expires unanswered; `None`: the lead's default.
        deadline_unix_ms: Option<i64>,
    },
    /// A member answers a shutdown request: agrees (and is gone) or refuses.
    RespondShutdown {
        /// The request.
        request_id: RequestId,
        /// Agrees.
        approve: bool,
        /// Why.
        reason: String,
    },
    /// One page of the members, in join order.
    ListTeam {
        /// Which page.
        page: PageAsk,
    },
    /// A member submits a plan for approval; `supersedes` names its own
    /// earlier plan that this one revises.
    SubmitPlan {
        /// The request's id (the edge made one where the member gave none).
        request_id: RequestId,
        /// The plan.
        plan: Plan,
        /// The plan it revises.
        supersedes: Option<RequestId>,
    },
    /// A member asks to make one gated tool call.
    RequestPermission {
        /// The request's id.
        request_id: RequestId,
        /// The tool.
        tool: String,
        /// Its arguments, as JSON (checked to be JSON).
        args_json: String,
        /// The `path` argument, where the call names one.
        path: Option<String>,
    },
    /// The operator (or a reviewer for it) decides a plan.
    ReviewPlan {
        /// The plan request.
        request_id: RequestId,
        /// The decision.
        verdict: PlanVerdict,
        /// Who decides, for the request's history (`operator`, `operator
        /// (console)`, `model NAME`).
        by: String,
    },
    /// The operator answers a permission request.
    ReviewPermission {
        /// The request.
        request_id: RequestId,
        /// Yes or no.
        approve: bool,
        /// Why.
        feedback: String,
        /// Who decides, for the request's history.
        by: String,
    },
    /// One page of the requests, of one status and kind or all, oldest first.
    ListRequests {
        /// Only requests of this status.
        status: Option<Status>,
        /// Only requests of this kind.
        kind: Option<Kind>,
        /// Which page.
        page: PageAsk,
    },
    /// One request, as it stands.
    GetRequest {
        /// The request.
        request_id: RequestId,
    },
    /// A stage of the reviewer chain, run off the hub, said `verdict` of
    /// plan `request_id`.
    StageVerdict {
        /// The plan.
        request_id: RequestId,
        /// Which stage, counted from 0.
        stage: usize,
        /// What it said.
        verdict: crate::chain::Verdict,
    },
    /// A member submits its finished work on its claimed task (`--repo`).
    SubmitResult {
        /// The request's id.
        request_id: RequestId,
        /// The work, made a commit by the edge.
        result: Box<crate::result::WorkResult>,
        /// The rejected result it revises.
        supersedes: Option<RequestId>,
    },
    /// The operator approves (to land it) or rejects a result.
    ReviewResult {
        /// The result request.
        request_id: RequestId,
        /// Yes or no.
        approve: bool,
        /// Why (required to reject).
        feedback: String,
        /// Who decides, for the request's history.
        by: String,
    },
    /// A member with an approved plan asks to add to it.
    RequestAmendment {
        /// The request's id.
        request_id: RequestId,
        /// The files to add.
        files: Vec<String>,
        /// The steps to add.
        steps: Vec<String>,
        /// Why.
        why: String,
    },
    /// The operator approves or rejects an amendment.
    ReviewAmendment {
        /// The amendment.
        request_id: RequestId,
        /// Yes or no.
        approve: bool,
        /// Why (required to reject).
        feedback: String,
        /// Who decides.
        by: String,
    },
    /// The runtime landed (or could not land) approved result `request_id`.
    Landed {
        /// The result request.
        request_id: RequestId,
        /// How it came out.
        landing: crate::result::Landing,
    },
    /// The operator adds a task to the shared list.
    CreateTask {
        /// Its id, which the edge made (a UUID).
        task_id: String,
        /// What it says.
        task: NewTask,
    },
    /// One page of the task list, of one status or all, oldest first.
    ListTasks {
        /// Only tasks of this status; `None`: every task.
        status: Option<TaskStatus>,
        /// Which page.
        page: PageAsk,
    },
    /// A member claims a task, or (`None`) the oldest claimable one.
    ClaimTask {
        /// The task.
        task_id: Option<String>,
    },
    /// The operator withdraws a task still open: it ends; its owner (if
    /// any) is told, its requests of it expire and its grant for it ends.
    WithdrawTask {
        /// The task.
        task_id: String,
        /// Why, as the owner and the task's summary say.
        reason: String,
        /// Who withdrew it (`operator NAME`).
        by: String,
    },
    /// A member completes the task it claimed.
    CompleteTask {
        /// The task.
        task_id: String,
        /// What it did and produced.
        completion: crate::tasks::Completion,
    },
    /// A member says what its process (`epoch`) used so far, in all.
    ReportUsage {
        /// Names the process.
        epoch: String,
        /// Its cumulative totals.
        totals: Usage,
    },
    /// The operator sets a member's token budget.
    SetBudget {
        /// The member.
        name: Name,
        /// Tokens; 0: none.
        token_budget: u64,
    },
    /// The operator decides a request by its id: the request's kind says
    /// which review it is (a plan's, a permission's, a result's or an
    /// amendment's).
    Decide(Decide),
}

/// What the operator decided of one request ([`Op::Decide`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decide {
    /// The request.
    pub request_id: RequestId,
    /// Yes or no.
    pub approve: bool,
    /// Why; required to reject a plan, a result or an amendment.
    pub feedback: String,
    /// A plan's approval only: what the teammate may do (`None`: the plan's
    /// own files, in `acceptEdits`).
    pub grant: Option<Grant>,
    /// A plan's approval only: approve although its files fall inside
    /// another member's hold.
    pub allow_overlap: bool,
    /// Who decides, for the request's history.
    pub by: String,
    /// The kind the decider takes the request for, if it says: a request
    /// of another kind is refused, so that a decision meant for one kind
    /// never lands on another.
    pub kind: Option<crate::protocol::Kind>,
}

impl Op {
    /// The doors this op may come in by.
    pub fn doors(&self) -> Doors {
        match self {
            Op::Join { .. } => Doors::Join,
            Op::CreateTask { .. }
            | Op::WithdrawTask { .. }
            | Op::SetBudget { .. }
            | Op::ReviewPlan { .. }
            | Op::ReviewPermission { .. }
            | Op::ReviewResult { .. }
            | Op::ReviewAmendment { .. }
            | Op::Decide(_)
            | Op::ListRequests { .. }
            | Op::GetRequest { .. }
            | Op::RequestShutdown { .. }
            | Op::ListTeam { .. } => Doors::Operator,
            Op::ListTasks { .. } => Doors::Both("ListTasks"),
            Op::Ack { .. } => Doors::Member("Ack"),
            Op::Send { .. } => Doors::Member("Send"),
            Op::ReportIdle { .. } => Doors::Member("ReportIdle"),
            Op::ReportToolCall { .. } => Doors::Member("ReportToolCall"),
            Op::Leave { .. } => Doors::Member("Leave"),
            Op::RespondShutdown { .. } => Doors::Member("RespondShutdown"),
            Op::SubmitPlan { .. } => Doors::Member("SubmitPlan"),
            Op::RequestPermission { .. } => Doors::Member("RequestPermission"),
            Op::ClaimTask { .. } => Doors::Member("ClaimTask"),
            Op::CompleteTask { .. } => Doors::Member("CompleteTask"),
            Op::ReportUsage { .. } => Doors::Member("ReportUsage"),
            Op::SubmitResult { .. } => Doors::Member("SubmitResult"),
            Op::RequestAmendment { .. } => Doors::Member("RequestAmendment"),
            Op::StageVerdict { .. } | Op::Landed { .. } => Doors::Lead,
        }
    }
}

/// Where an op may come in (see [`Op::doors`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Doors {
    /// `Lead.Join` alone.
    Join,
    /// A member's `Lead.<rpc>` alone.
    Member(&'static str),
    /// The `Operator` service alone.
    Operator,
    /// A member's `Lead.<rpc>`, and the `Operator` service.
    Both(&'static str),
    /// The lead itself, no service's.
    Lead,
}

impl Doors {
    /// Whether an op with these doors may come in at `door`.
    pub fn open(&self, door: Call<'_>) -> bool {
        match (self, door) {
            (Doors::Join, Call::Join)
            | (Doors::Operator | Doors::Both(_), Call::Operator)
            | (Doors::Lead, Call::Lead) => true,
            (Doors::Member(rpc) | Doors::Both(rpc), Call::Teammate(called)) => *rpc == called,
            _ => false,
        }
    }
}

/// The operator's decisions as every adapter makes them (gRPC, the console,
/// later A2A): the same checks, one place.
impl Op {
    /// `ReviewResult` by `by`: feedback within its bound, and required to
    /// reject.
    pub fn review_result(
        request_id: RequestId,
        approve: bool,
        feedback: String,
        by: &str,
    ) -> Result<Op, FieldError> {
        review_feedback(approve, &feedback, "say what to change")?;
        Ok(Op::ReviewResult {
            request_id,
            approve,
            feedback,
            by: by.to_owned(),
        })
    }

    /// `ReviewAmendment` by `by`: feedback within its bound, and required
    /// to reject.
    pub fn review_amendment(
        request_id: RequestId,
        approve: bool,
        feedback: String,
        by: &str,
    ) -> Result<Op, FieldError> {
        review_feedback(approve, &feedback, "say why")?;
        Ok(Op::ReviewAmendment {
            request_id,
            approve,
            feedback,
            by: by.to_owned(),
        })
    }
}

/// A review's feedback: within its bound, and required to reject (`ask`
/// says what it should say).
fn review_feedback(approve: bool, feedback: &str, ask: &str) -> Result<(), FieldError> {
    crate::limits::check("feedback", feedback, crate::limits::REASON)?;
    if !approve && feedback.trim().is_empty() {
        return Err(FieldError::new(
            "feedback",
            format!("is required to reject: {ask}"),
        ));
    }
    Ok(())
}

impl PlanVerdict {
    /// A plan's rejection: its feedback is required, so the teammate can
    /// revise.
    pub fn reject(feedback: String) -> Result<PlanVerdict, FieldError> {
        if feedback.trim().is_empty() {
            return Err(FieldError::new(
                "feedback",
                "is required when rejecting, so the teammate can revise",
            ));
        }
        Ok(PlanVerdict::Reject { feedback })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_tasks_is_one_op_behind_two_doors() {
        let op = Op::ListTasks {
            status: None,
            page: PageAsk {
                after: None,
                size: 10,
            },
        };
        assert!(op.doors().open(Call::Teammate("ListTasks")));
        assert!(op.doors().open(Call::Operator));
        assert!(!op.doors().open(Call::Teammate("ClaimTask")));
        assert!(!op.doors().open(Call::Join));
        let claim = Op::ClaimTask { task_id: None };
        assert!(claim.doors().open(Call::Teammate("ClaimTask")));
        assert!(!claim.doors().open(Call::Operator));
    }
}
