//! What a caller can do to the team, in the core's words. An edge (the
//! lead's gRPC services, its console) checks a call's fields, translates it
//! into an op (one type per thing a caller can do, each a `team::Op` that
//! names its answer's type), and says at which door it came in ([`Call`]);
//! the lead's hub admits who called (`access::Admitted`) and applies it. No
//! protobuf, no tokens: one op per thing a caller can do, not per RPC
//! (`Lead.ListTasks` and `Operator.ListTasks` are one [`ListTasks`]).

use crate::{
    access::{Call, Role},
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

/// Someone with the join token joins the team, in plan mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Join {
    /// Its name, unique among active members.
    pub name: Name,
    /// What it does, in a word or a line.
    pub role: String,
    /// The budget it asks for; 0: none of its own.
    pub token_budget: u64,
    /// Its id, which the edge made (a UUID, new for every join).
    pub member_id: String,
    /// The session token its calls will carry, which the edge made.
    pub session_token: String,
    /// How it confines its commands, if it said.
    pub sandbox: Option<crate::sandbox::Sandbox>,
    /// How its model's replies are held to one call, if it said.
    pub decoding: Option<crate::decoding::Decoding>,
}

/// A member has processed its inbox up to `seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    /// The newest envelope processed.
    pub seq: u64,
}

/// A member says it has nothing to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportIdle {
    /// Why, in its words.
    pub reason: String,
}

/// A member reports a tool call it made or was refused, for the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportToolCall {
    /// The tool.
    pub tool: String,
    /// Its arguments, as JSON.
    pub args_json: String,
    /// Whether the gate let it run.
    pub allowed: bool,
    /// What came of it.
    pub outcome: String,
}

/// A member leaves the team for good, now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leave {
    /// Why.
    pub reason: String,
}

/// The operator asks a member to shut down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestShutdown {
    /// The request's id.
    pub request_id: RequestId,
    /// The member.
    pub target: Name,
    /// Why.
    pub reason: String,
    /// When the request expires unanswered; `None`: the lead's default.
    pub deadline_unix_ms: Option<i64>,
    /// Who asks, as the request's history names them (`operator (console)`,
    /// `operator NAME`, `lead` when it stops); kept in its payload.
    pub asked_by: String,
}

/// A member answers a shutdown request: agrees (and is gone) or refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RespondShutdown {
    /// The request.
    pub request_id: RequestId,
    /// Agrees.
    pub approve: bool,
    /// Why.
    pub reason: String,
}

/// One page of the members, in join order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListTeam {
    /// Which page.
    pub page: PageAsk,
}

/// A member submits a plan for approval; `supersedes` names its own
/// earlier plan that this one revises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmitPlan {
    /// The request's id (the edge made one where the member gave none).
    pub request_id: RequestId,
    /// The plan.
    pub plan: Plan,
    /// The plan it revises.
    pub supersedes: Option<RequestId>,
}

/// A member asks to make one gated tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestPermission {
    /// The request's id.
    pub request_id: RequestId,
    /// The tool.
    pub tool: String,
    /// Its arguments, as JSON (checked to be JSON).
    pub args_json: String,
    /// The `path` argument, where the call names one.
    pub path: Option<String>,
}

/// The operator (or a reviewer for it) decides a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewPlan {
    /// The plan request.
    pub request_id: RequestId,
    /// The decision.
    pub verdict: PlanVerdict,
    /// Who decides, for the request's history (`operator`, `operator
    /// (console)`, `model NAME`).
    pub by: String,
}

/// The operator answers a permission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewPermission {
    /// The request.
    pub request_id: RequestId,
    /// Yes or no.
    pub approve: bool,
    /// Why.
    pub feedback: String,
    /// Who decides, for the request's history.
    pub by: String,
}

/// One page of the requests, of one status and kind or all, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRequests {
    /// Only requests of this status.
    pub status: Option<Status>,
    /// Only requests of this kind.
    pub kind: Option<Kind>,
    /// Which page.
    pub page: PageAsk,
}

/// One request, as it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetRequest {
    /// The request.
    pub request_id: RequestId,
}

/// A stage of the reviewer chain, run off the hub, said `verdict` of
/// plan `request_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageVerdict {
    /// The plan.
    pub request_id: RequestId,
    /// Which stage, counted from 0.
    pub stage: usize,
    /// What it said.
    pub verdict: crate::chain::Verdict,
}

/// A member submits its finished work on its claimed task (`--repo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmitResult {
    /// The request's id.
    pub request_id: RequestId,
    /// The work, made a commit by the edge.
    pub result: Box<crate::result::WorkResult>,
    /// The rejected result it revises.
    pub supersedes: Option<RequestId>,
}

/// The operator approves (to land it) or rejects a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewResult {
    /// The result request.
    pub request_id: RequestId,
    /// Yes or no.
    pub approve: bool,
    /// Why (required to reject).
    pub feedback: String,
    /// Who decides, for the request's history.
    pub by: String,
}

/// A member with an approved plan asks to add to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestAmendment {
    /// The request's id.
    pub request_id: RequestId,
    /// The files to add.
    pub files: Vec<String>,
    /// The steps to add.
    pub steps: Vec<String>,
    /// Why.
    pub why: String,
}

/// The operator approves or rejects an amendment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewAmendment {
    /// The amendment.
    pub request_id: RequestId,
    /// Yes or no.
    pub approve: bool,
    /// Why (required to reject).
    pub feedback: String,
    /// Who decides.
    pub by: String,
}

/// The runtime landed (or could not land) approved result `request_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Landed {
    /// The result request.
    pub request_id: RequestId,
    /// How it came out.
    pub landing: crate::result::Landing,
}

/// The operator adds a task to the shared list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTask {
    /// Its id, which the edge made (a UUID).
    pub task_id: String,
    /// What it says.
    pub task: NewTask,
}

/// One page of the task list, of one status or all, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListTasks {
    /// Only tasks of this status; `None`: every task.
    pub status: Option<TaskStatus>,
    /// Which page.
    pub page: PageAsk,
}

/// A member claims a task, or (`None`) the oldest claimable one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimTask {
    /// The task.
    pub task_id: Option<String>,
}

/// The operator withdraws a task still open: it ends; its owner (if
/// any) is told, its requests of it expire and its grant for it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WithdrawTask {
    /// The task.
    pub task_id: String,
    /// Why, as the owner and the task's summary say.
    pub reason: String,
    /// Who withdrew it (`operator NAME`).
    pub by: String,
}

/// A member completes the task it claimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompleteTask {
    /// The task.
    pub task_id: String,
    /// What it did and produced.
    pub completion: crate::tasks::Completion,
}

/// A member says what its process (`epoch`) used so far, in all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportUsage {
    /// Names the process.
    pub epoch: String,
    /// Its cumulative totals.
    pub totals: Usage,
}

/// The operator sets a member's token budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetBudget {
    /// The member.
    pub name: Name,
    /// Tokens; 0: none.
    pub token_budget: u64,
}

/// The operator decides a request by its id: the request's kind says
/// which review it is (a plan's, a permission's, a result's or an
/// amendment's).
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

/// Where an op may come in (each op's `DOORS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Doors {
    /// `Lead.Join` alone.
    Join,
    /// A member's `Lead.<rpc>` alone.
    Member(&'static str),
    /// The `Operator` service alone, for an operator of this role.
    Operator(Role),
    /// A member's `Lead.<rpc>`, and the `Operator` service for an operator
    /// of this role.
    Both(&'static str, Role),
    /// The lead itself, no service's.
    Lead,
}

impl Doors {
    /// Whether an op with these doors may come in at `door`.
    pub fn open(&self, door: Call<'_>) -> bool {
        match (self, door) {
            (Doors::Join, Call::Join) | (Doors::Lead, Call::Lead) => true,
            (Doors::Operator(role) | Doors::Both(_, role), Call::Operator(needed)) => {
                *role == needed
            }
            (Doors::Member(rpc) | Doors::Both(rpc, _), Call::Teammate(called)) => *rpc == called,
            _ => false,
        }
    }

    /// The door an operator comes in at for an op with these doors: the
    /// Operator service, needing the op's role (admin for an op no
    /// operator may call, which its doors then refuse).
    pub const fn operator(&self) -> Call<'static> {
        match self {
            Doors::Operator(role) | Doors::Both(_, role) => Call::Operator(*role),
            _ => Call::Operator(Role::Admin),
        }
    }
}

/// The operator's decisions as every adapter makes them (gRPC, the console,
/// later A2A): the same checks, one place.
impl ReviewResult {
    /// `ReviewResult` by `by`: feedback within its bound, and required to
    /// reject.
    pub fn new(
        request_id: RequestId,
        approve: bool,
        feedback: String,
        by: &str,
    ) -> Result<ReviewResult, FieldError> {
        review_feedback(approve, &feedback, "say what to change")?;
        Ok(ReviewResult {
            request_id,
            approve,
            feedback,
            by: by.to_owned(),
        })
    }
}

impl ReviewAmendment {
    /// `ReviewAmendment` by `by`: feedback within its bound, and required
    /// to reject.
    pub fn new(
        request_id: RequestId,
        approve: bool,
        feedback: String,
        by: &str,
    ) -> Result<ReviewAmendment, FieldError> {
        review_feedback(approve, &feedback, "say why")?;
        Ok(ReviewAmendment {
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
        let doors = <ListTasks as crate::team::Op>::DOORS;
        assert!(doors.open(Call::Teammate("ListTasks")));
        assert!(doors.open(Call::Operator(Role::Viewer)));
        assert!(!doors.open(Call::Operator(Role::Admin)));
        assert_eq!(doors.operator(), Call::Operator(Role::Viewer));
        assert!(!doors.open(Call::Teammate("ClaimTask")));
        assert!(!doors.open(Call::Join));
        let claim = <ClaimTask as crate::team::Op>::DOORS;
        assert!(claim.open(Call::Teammate("ClaimTask")));
        assert!(!claim.open(Call::Operator(Role::Viewer)));
    }
}
