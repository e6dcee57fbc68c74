//! What applying an op asks of the runtime ([`Effect`]), once the changes it
//! made are durable: envelopes to put in inboxes ([`Message`], in the core's
//! words), what to tell the watchers ([`Notice`]), inboxes to close, the team
//! to tell of a termination, a process to stop. The runtime carries them out
//! in order; the edges render them (`shared::wire`).

use crate::{
    grant::Grant,
    members::Member,
    names::RequestId,
    plan::Plan,
    protocol::{Request, Status},
    tasks::Task,
    usage::Standing,
};

/// What an envelope carries, in the core's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// A text between members.
    Text {
        /// The text.
        content: String,
    },
    /// A member asks the lead to approve its plan.
    PlanApprovalRequest {
        /// The request's id.
        request_id: RequestId,
        /// The plan.
        plan: Plan,
        /// The plan it revises, if any.
        supersedes: String,
    },
    /// The decision on a plan, told to its teammate.
    PlanDecided {
        /// The plan's request id.
        request_id: RequestId,
        /// Whether it was approved.
        approve: bool,
        /// What the reviewer said.
        feedback: String,
        /// What an approval grants.
        grant: Option<Grant>,
    },
    /// A member asks to run one gated tool call.
    PermissionRequest {
        /// The request's id.
        request_id: RequestId,
        /// The tool.
        tool: String,
        /// Its arguments, as JSON.
        args_json: String,
    },
    /// The decision on a permission, told to its teammate.
    PermissionDecided {
        /// The permission's request id.
        request_id: RequestId,
        /// Whether it was allowed.
        approve: bool,
        /// What the reviewer said.
        feedback: String,
    },
    /// The lead asks the member to shut down by a deadline.
    ShutdownRequest {
        /// The request's id.
        request_id: RequestId,
        /// The member asked.
        target: String,
        /// Why.
        reason: String,
        /// When the request expires (unix ms).
        deadline_unix_ms: i64,
    },
    /// A member's answer to a shutdown request.
    ShutdownResponse {
        /// The request's id.
        request_id: RequestId,
        /// Whether it agrees (and exits).
        approve: bool,
        /// Its reason, if it refuses.
        reason: String,
    },
    /// A member has nothing to do.
    Idle {
        /// Why, in its words.
        reason: String,
    },
    /// Members terminated (one notice for all that ended since the last).
    Terminated(Vec<Ended>),
    /// A task can be claimed now.
    TaskClaimable(Box<Task>),
    /// A teammate's result, for the lead (the diff itself stays in the
    /// request's payload).
    ResultRequest {
        /// The request.
        request_id: RequestId,
        /// Its task.
        task_id: String,
        /// The commit it is against.
        base: String,
        /// What it did.
        summary: String,
        /// The files it changes.
        files: Vec<crate::result::FileChange>,
        /// The rejected result it revises.
        supersedes: String,
    },
    /// An addition to an approved plan, for the lead.
    AmendmentRequest {
        /// The request.
        request_id: RequestId,
        /// The plan it amends.
        plan_id: String,
        /// The files to add.
        files: Vec<String>,
        /// The steps to add.
        steps: Vec<String>,
        /// Why.
        why: String,
    },
    /// The answer to an amendment: on approval, the grant now.
    AmendmentDecided {
        /// The request.
        request_id: RequestId,
        /// Yes or no.
        approve: bool,
        /// Why.
        feedback: String,
        /// The widened grant.
        grant: Option<Grant>,
    },
    /// The answer to a result request.
    ResultDecided {
        /// The request.
        request_id: RequestId,
        /// Landed.
        approve: bool,
        /// Why.
        feedback: String,
        /// The commit it landed as.
        commit: String,
        /// The paths that conflicted.
        conflicts: Vec<String>,
        /// Where the team branch stands.
        branch_head: String,
    },
    /// The operator set the member's token budget.
    BudgetChanged {
        /// The budget (0: none).
        token_budget: u64,
    },
}

impl Message {
    /// The decision on plan `request`, as its teammate hears it.
    pub fn plan_decided(request: &Request) -> Self {
        Message::PlanDecided {
            request_id: request.id().clone(),
            approve: request.status == Status::Approved,
            feedback: request.feedback.clone(),
            grant: request.decision.as_ref().and_then(|d| d.grant.clone()),
        }
    }

    /// The decision on permission `request`, as its teammate hears it.
    pub fn permission_decided(request: &Request) -> Self {
        Message::PermissionDecided {
            request_id: request.id().clone(),
            approve: request.status == Status::Approved,
            feedback: request.feedback.clone(),
        }
    }
}

/// A member that terminated, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    /// Who.
    pub name: String,
    /// Why.
    pub reason: String,
}

/// A member as the watchers see it: who it is, how it stands, what its
/// model used and what it holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberView {
    /// The member.
    pub member: Member,
    /// What its model used, and its budget.
    pub standing: Standing,
    /// The paths it holds now.
    pub holds: Vec<String>,
}

/// An envelope as the watchers see it (to `lead` and to `*` it has no
/// `seq`: the lead's own are not kept, and a broadcast is shown once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// Its place in the recipient's inbox.
    pub seq: u64,
    /// Its message id.
    pub message_id: String,
    /// Who sent it.
    pub from: String,
    /// To whom.
    pub to: String,
    /// When the lead accepted it (unix ms).
    pub sent_at_unix_ms: i64,
    /// What it carries.
    pub message: Message,
}

/// What the watchers are told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// An envelope was sent.
    Envelope(Box<Envelope>),
    /// A process the lead started has ended.
    ChildExited {
        /// Whose.
        name: String,
        /// Its pid.
        pid: u32,
        /// How it ended ("exited with status 1").
        how: String,
        /// Whether it had joined.
        joined: bool,
        /// Its log file.
        log_path: String,
        /// The end of its log.
        log_tail: String,
    },
    /// How a member stands now.
    Member(Box<MemberView>),
    /// How a request stands now.
    Request(Box<Request>),
    /// How a task stands now.
    Task(Task),
    /// What a reviewer made of a plan (a note, beside its history).
    ReviewNote {
        /// The plan.
        request_id: RequestId,
        /// Who.
        reviewer: String,
        /// What.
        note: String,
    },
    /// A member's tool call, made or refused, for the record.
    ToolCall {
        /// The member.
        member: String,
        /// The tool.
        tool: String,
        /// Its arguments, as JSON.
        args_json: String,
        /// Whether its gate let it run.
        allowed: bool,
        /// What came of it.
        outcome: String,
    },
    /// How a model user's usage stands now.
    Usage {
        /// The member, or another user of a model.
        name: String,
        /// Its usage and budget.
        standing: Standing,
    },
}

/// What the runtime must do once an op's changes are durable, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// One envelope from `from` in the inbox of each of `to` (its body held
    /// once for them all when there are several), or, to `lead`, only in
    /// what the watchers see.
    Deliver {
        /// The sender (`lead` for the lead's own).
        from: String,
        /// The recipients.
        to: Vec<String>,
        /// What it carries.
        message: Message,
    },
    /// The watchers hear this.
    Notify(Notice),
    /// The member joined: it gets an empty inbox (a terminated member's
    /// of that name, `reused`, is dropped).
    OpenInbox {
        /// The member.
        name: String,
        /// Whether a terminated member of that name had one.
        reused: bool,
    },
    /// The member processed its inbox up to `seq`: those envelopes go.
    Ack {
        /// The member.
        name: String,
        /// The newest envelope processed.
        seq: u64,
    },
    /// The member terminated: its inbox stream ends and what it held is
    /// dropped.
    CloseInbox(String),
    /// The team hears that `name` terminated (the runtime gathers such
    /// notices into one envelope per recipient).
    Announce {
        /// Who terminated.
        name: String,
        /// Why.
        reason: String,
    },
    /// The process the lead started for this member, if any, is stopped
    /// (its shutdown request expired).
    StopChild(String),
    /// The model reviewer reviews this plan (`--approval model:FILE`); its
    /// verdict comes back as the operator's `ReviewPlan`.
    ReviewPlan(RequestId),
    /// Stage `stage` of the reviewer chain, a worker's, runs on this plan;
    /// its verdict comes back as `op::StageVerdict`.
    RunStage {
        /// The plan.
        request_id: RequestId,
        /// Which stage.
        stage: usize,
    },
    /// Merge approved result `request_id` into the team branch, off the
    /// team (git), and report how it came out as `op::Landed`.
    Land(RequestId),
}

/// One op that changes a request twice at one status (a decision, then the
/// review that made it recorded in its history) is one change to a watcher:
/// the first notice keeps its place and takes the last one's content; the
/// later ones go. A change of status (pending, then approved) stays two.
pub fn coalesce_requests(effects: &mut Vec<Effect>) {
    fn key(effect: &Effect) -> Option<(&RequestId, &'static str)> {
        match effect {
            Effect::Notify(Notice::Request(request)) => {
                Some((request.id(), request.status.as_str()))
            }
            _ => None,
        }
    }
    let mut told: Vec<usize> = (0..effects.len())
        .filter(|&at| key(&effects[at]).is_some())
        .collect();
    if told.len() < 2 {
        return;
    }
    // Each request and status together, in their order (a stable sort):
    // an op tells of a few requests, and sorting their places costs no
    // copy of an id (a map of them did, on every decision).
    told.sort_by(|&a, &b| key(&effects[a]).cmp(&key(&effects[b])));
    let mut gone = vec![false; effects.len()];
    let mut start = 0;
    while start < told.len() {
        let mut end = start + 1;
        while end < told.len() && key(&effects[told[end]]) == key(&effects[told[start]]) {
            end += 1;
        }
        if end - start > 1 {
            effects.swap(told[start], told[end - 1]);
            for &at in &told[start + 1..end] {
                gone[at] = true;
            }
        }
        start = end;
    }
    let mut at = 0;
    effects.retain(|_| {
        at += 1;
        !gone[at - 1]
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Kind, Opening};

    fn notice(id: &RequestId, status: Status, feedback: &str) -> Effect {
        let request = Request {
            opening: Opening {
                id: id.clone(),
                kind: Kind::Amendment,
                sender: "alice".into(),
                target: "lead".into(),
                payload_json: "{}".into(),
                deadline_unix_ms: None,
            },
            status,
            decision: None,
            feedback: feedback.into(),
            created_at_unix_ms: 1,
            resolved_at_unix_ms: None,
            reviews: Vec::new(),
            waits_for: Vec::new(),
        };
        Effect::Notify(Notice::Request(Box::new(request)))
    }

    #[test]
    fn one_status_is_told_once_with_the_last_content_in_the_first_place() {
        let id = RequestId::existing("request_id", "r1").expect("an id");
        let other = RequestId::existing("request_id", "r2").expect("an id");
        let mut effects = vec![
            notice(&id, Status::Pending, "opened"),
            Effect::StopChild("x".into()),
            notice(&id, Status::Approved, "decided"),
            notice(&other, Status::Approved, "other"),
            Effect::StopChild("y".into()),
            notice(&id, Status::Approved, "decided, with its review"),
            notice(&id, Status::Approved, "and landed"),
        ];
        coalesce_requests(&mut effects);
        assert_eq!(
            effects,
            vec![
                notice(&id, Status::Pending, "opened"),
                Effect::StopChild("x".into()),
                notice(&id, Status::Approved, "and landed"),
                notice(&other, Status::Approved, "other"),
                Effect::StopChild("y".into()),
            ]
        );
    }
}
