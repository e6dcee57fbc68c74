//! What decides a teammate's next step: a [`Driver`]. The script driver
//! ([`crate::script`]) reads a TOML file; the model driver ([`crate::model`])
//! asks a language model; the MCP driver ([`crate::mcp`]) relays an agent's calls.
//! Each sees only the tools of the current mode, and none holds the
//! gate's capability: every step it asks for runs through the session.

use std::future::Future;

use mesh_core::{
    grant::Mode,
    plan::Plan,
    usage::{Standing, Usage},
};

use crate::tools::ToolCall;

/// The teammate's next move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Run one tool (through the gate).
    Call(ToolCall),
    /// Submit a plan for approval (after a rejection, it supersedes the last one).
    Submit(Plan),
    /// Send a text message to a member, the lead, or `*`.
    Send { to: String, text: String },
    /// A call that cannot be made as asked (an unknown tool, malformed
    /// arguments): reported to the lead as refused, and answered with `problem`.
    Invalid {
        tool: String,
        args_json: String,
        problem: String,
    },
    /// A call the driver takes back before it is made (a plan that does not
    /// answer the task, [`crate::model`]): nothing runs and nothing is
    /// reported to the lead; the driver hears `note` as the call's result.
    PutBack { tool: String, note: String },
    /// Nothing to do: report idle with this reason and wait for a message.
    Idle(String),
    /// A call on the shared task list.
    Task(TaskCall),
}

/// A call on the shared task list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskCall {
    /// `list_tasks()`.
    List,
    /// `claim_task(task_id?)`: that task, or the oldest claimable one.
    Claim(Option<String>),
    /// `complete_task(task_id, summary)`.
    Complete { task_id: String, summary: String },
    /// `request_amendment(files, steps?, why)`: add to the approved plan.
    Amend {
        files: Vec<String>,
        steps: Vec<String>,
        why: String,
    },
}

/// What happened since the last step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    /// The teammate just joined.
    Started,
    /// The last step that was a call (tool, message, invalid call) ended:
    /// its output, or why it failed or was refused.
    ToolResult(Result<String, String>),
    /// The plan was rejected; revise against the feedback.
    PlanRejected {
        /// Why.
        feedback: String,
    },
    /// The plan was approved; the gated tools of the grant's mode are available.
    PlanApproved {
        /// The grant's mode.
        mode: Mode,
        /// Where writes may go (the plan's files if the grant named none).
        write_paths: Vec<String>,
    },
    /// A message from another member or the lead.
    Message {
        /// Who sent it.
        from: String,
        /// What it says.
        text: String,
    },
    /// The plan is still under review after [`Driver::review_wait`]; the
    /// decision arrives later as `PlanApproved` or `PlanRejected`.
    PlanPending {
        /// The plan's request id.
        request_id: String,
    },
    /// The teammate agreed to a shutdown request and the lead knows: it has
    /// left the team.
    ShutdownAgreed,
    /// The last step claimed a task: its plans are for it now. `text` is the
    /// call's output, as a tool result would carry it.
    TaskClaimed {
        /// The task.
        task: ClaimedTask,
        /// The call's output.
        text: String,
    },
    /// A task of the shared list can be claimed now.
    TaskClaimable {
        /// Its id.
        task_id: String,
        /// What it is.
        subject: String,
    },
    /// The teammate refused a shutdown request and goes on.
    ShutdownRefused {
        /// What it told the lead.
        reason: String,
    },
    /// What the lead counts of the member's model use, and its budget (at
    /// the join, and answering each usage report).
    Usage(Standing),
    /// The operator set the member's token budget (0: none).
    BudgetChanged {
        /// The new budget.
        token_budget: u64,
    },
}

/// A task the teammate claimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedTask {
    /// Its id (the plans for it carry it).
    pub task_id: String,
    /// What it is.
    pub subject: String,
    /// More about it.
    pub description: String,
    /// The globs it is expected to touch (a hint).
    pub files: Vec<String>,
    /// Whether its work waits for an approved plan; `false`: it is reviewed
    /// by its result alone (`lead serve --repo`), and writes may start now.
    pub needs_plan: bool,
}

/// The lead's request that the teammate shut down, as a driver answers it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShutdownRequest {
    /// Its request id.
    pub request_id: String,
    /// Why (may be empty).
    pub reason: String,
    /// When it expires unanswered (unix ms); 0: no deadline.
    pub deadline_unix_ms: i64,
}

/// How the teammate answers a shutdown request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShutdownAnswer {
    /// Agree (and exit) or refuse (and keep working).
    pub approve: bool,
    /// Said to the lead.
    pub reason: String,
}

/// Why a driver cannot go on (a model server that refuses every request).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct DriverError(pub String);

/// Decides the teammate's steps.
pub trait Driver: Send {
    /// Takes in what happened.
    fn observe(&mut self, seen: Observation);

    /// The next step, given the tools of the current mode. Cancel-safe: a
    /// step dropped before it ends leaves the driver as it was, so the
    /// session can stop waiting for it (a shutdown request arrived).
    fn step(
        &mut self,
        tools: &[&'static str],
    ) -> impl Future<Output = Result<Step, DriverError>> + Send;

    /// How long a submitted plan's review is waited for before the step
    /// ends with [`Observation::PlanPending`]; `None` waits for the decision.
    fn review_wait(&self) -> Option<std::time::Duration> {
        None
    }

    /// Whether news (a message, a late decision) should cancel the step in
    /// progress so that the driver observes it at once. A model call is too
    /// dear to cancel for news; an agent waiting for its next call is not.
    fn hears_while_thinking(&self) -> bool {
        false
    }

    /// What the driver's model used in this process so far, if it changed
    /// since the last call (reported to the lead, which answers with
    /// [`Observation::Usage`]).
    fn take_usage(&mut self) -> Option<Usage> {
        None
    }

    /// The answer to a shutdown request, given before `deadline_unix_ms`;
    /// `tools` are those of the current mode plus `respond_shutdown`.
    fn answer_shutdown(
        &mut self,
        request: &ShutdownRequest,
        tools: &[&'static str],
    ) -> impl Future<Output = ShutdownAnswer> + Send;
}
