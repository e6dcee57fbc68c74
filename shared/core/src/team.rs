//! The team's shared state that outlives a connection, as one pure value:
//! every protocol request, the task list and who holds which files, and
//! what of them changed since the store last took it ([`Team::take_changes`],
//! plain data). A team restored from what it gave the store is the same
//! team ([`Team::restore`]; the `replay` property tests it), which is what a
//! restarted lead, or a second lead reading a replicated store, relies on.

use crate::{
    holds::{Hold, Holds, Overlap},
    names::RequestId,
    protocol::{Decision, Kind, Outcome, Party, Request, Status, Tracker, TransitionError},
    tasks::{Completed, Task, TaskBoard, TaskError, TaskStatus},
    usage::{Account, Ledger},
};

/// What the store must make durable, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A request was forgotten (retention): delete it.
    RequestForgotten(RequestId),
    /// A request was opened or changed: insert it, or replace it in place.
    Request(Box<Request>),
    /// A task was created or changed: insert it, or replace it in place.
    Task(Task),
    /// What `member` holds now (`None`: nothing).
    Hold {
        /// The member.
        member: String,
        /// Its hold.
        hold: Option<Hold>,
    },
    /// A model user's account (usage and budget): insert or replace it.
    Usage(Box<Account>),
}

/// The requests, the tasks and the holds.
#[derive(Debug, Default)]
pub struct Team {
    /// Every protocol request.
    pub requests: Tracker,
    /// The shared task list.
    pub tasks: TaskBoard,
    /// Who holds which files.
    pub holds: Holds,
    /// What each model user used, and the members' budgets.
    pub usage: Ledger,
    /// Requests forgotten since the last [`Team::take_changes`].
    forgotten: Vec<RequestId>,
}

impl Team {
    /// An empty team whose board holds at most `max_tasks`.
    pub fn new(max_tasks: usize) -> Self {
        Self {
            tasks: TaskBoard::new(max_tasks),
            ..Self::default()
        }
    }

    /// The team as stored: requests and tasks in the order they were first
    /// written, and the holds, where the store kept them. Where it did not
    /// (a store from before it kept them), each active member's last
    /// approved plan is its hold, unless it completed that plan's task; those
    /// holds are changes, for the store to keep from now on.
    pub fn restore(
        requests: Vec<Request>,
        tasks: Vec<Task>,
        max_tasks: usize,
        holds: Option<Vec<(String, Hold)>>,
        active: impl Fn(&str) -> bool,
    ) -> Self {
        let requests = Tracker::restore(requests);
        let tasks = TaskBoard::restore(max_tasks, tasks);
        let holds = match holds {
            Some(kept) => Holds::restore(kept),
            None => worked_out_holds(&requests, &tasks, active),
        };
        Self {
            requests,
            tasks,
            holds,
            usage: Ledger::default(),
            forgotten: Vec::new(),
        }
    }

    /// The team with the usage accounts the store kept.
    pub fn with_usage(mut self, accounts: Vec<Account>) -> Self {
        self.usage = Ledger::restore(accounts);
        self
    }

    /// The operator's answer to plan `id`: a fresh approval makes its files
    /// (or the grant's paths) the sender's hold, in place of what it held.
    pub fn answer_plan(
        &mut self,
        id: &RequestId,
        decision: Decision,
        now: i64,
    ) -> Result<Outcome, TransitionError> {
        let outcome =
            self.requests
                .answer(id, Kind::PlanApproval, &Party::Operator, decision, now)?;
        if outcome.fresh {
            if let Some((paths, task_id)) = outcome.request.hold() {
                self.holds
                    .hold(&outcome.request.opening.sender, paths, task_id);
            }
        }
        Ok(outcome)
    }

    /// Where the files of plan `id` fall inside other members' holds now.
    pub fn overlaps_of(&self, id: &RequestId) -> Vec<Overlap> {
        self.requests
            .get(id)
            .map(|request| {
                self.holds
                    .overlaps(&request.opening.sender, &request.plan().files)
            })
            .unwrap_or_default()
    }

    /// Whether `member` has claimed task `task_id`, as a plan for it must.
    pub fn check_plan_task(&self, member: &str, task_id: &str) -> Result<(), TaskError> {
        match self.tasks.get(task_id) {
            None => Err(TaskError::FailedPrecondition(format!(
                "plan.task_id: no task {task_id:?}"
            ))),
            Some(t) if t.owner == member && t.status == TaskStatus::Claimed => Ok(()),
            Some(t) if t.status == TaskStatus::Completed => Err(TaskError::FailedPrecondition(
                format!("plan.task_id: task {task_id} is completed"),
            )),
            Some(_) => Err(TaskError::FailedPrecondition(format!(
                "plan.task_id: task {task_id} is not claimed by {member}; claim it first"
            ))),
        }
    }

    /// `member` completes its task `task_id`; the hold its plan for that
    /// task made ends with it (`true`: it held one, and its next task needs a
    /// plan of its own).
    pub fn complete_task(
        &mut self,
        member: &str,
        task_id: &str,
        summary: String,
        now: i64,
    ) -> Result<(Completed, bool), TaskError> {
        let done = self.tasks.complete(member, task_id, summary, now)?;
        let hold_ended = done.fresh && self.holds.complete(member, task_id);
        Ok((done, hold_ended))
    }

    /// `member` is gone: it holds nothing, and its claimed tasks are pending
    /// again (returned).
    pub fn release(&mut self, member: &str, now: i64) -> Vec<Task> {
        self.holds.release(member);
        self.tasks.release(member, now)
    }

    /// Forgets requests resolved at or before `before`, then the oldest
    /// resolved ones past `max_bytes`; the store hears of each.
    pub fn forget_resolved(&mut self, before: i64, max_bytes: usize) {
        let mut forgotten = self.requests.prune_resolved(before);
        forgotten.extend(self.requests.prune_resolved_over(max_bytes));
        self.forgotten.extend(forgotten);
    }

    /// What changed since the last call, as the store must write it:
    /// forgotten requests first (an id may come back as a new request),
    /// then requests and tasks oldest first, then holds, then usage.
    pub fn take_changes(&mut self) -> Vec<Change> {
        let mut changes: Vec<Change> = std::mem::take(&mut self.forgotten)
            .into_iter()
            .map(Change::RequestForgotten)
            .collect();
        changes.extend(
            self.requests
                .take_changed()
                .into_iter()
                .map(|r| Change::Request(Box::new(r))),
        );
        changes.extend(self.tasks.take_changed().into_iter().map(Change::Task));
        changes.extend(
            self.holds
                .take_changed()
                .into_iter()
                .map(|(member, hold)| Change::Hold { member, hold }),
        );
        changes.extend(
            self.usage
                .take_changed()
                .into_iter()
                .map(|account| Change::Usage(Box::new(account))),
        );
        changes
    }
}

/// The holds of a store that did not keep them: each active member's last
/// approved plan, unless it completed that plan's task. (A member that left
/// and joined again under its name gets its earlier self's hold back, and
/// of two plans approved out of the order they were sent in, the later sent
/// wins: why the store keeps holds now.) Each is a change.
fn worked_out_holds(requests: &Tracker, tasks: &TaskBoard, active: impl Fn(&str) -> bool) -> Holds {
    let mut holds = Holds::default();
    for request in requests
        .iter()
        .filter(|r| r.opening.kind == Kind::PlanApproval && r.status == Status::Approved)
        .filter(|r| active(&r.opening.sender))
    {
        if let Some((paths, task_id)) = request.hold() {
            holds.hold(&request.opening.sender, paths, task_id);
        }
    }
    for task in tasks.list(Some(TaskStatus::Completed)) {
        holds.complete(&task.owner, &task.task_id);
    }
    holds
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        grant::{Grant, Mode},
        protocol::{Decision, Opening, Party},
    };

    fn approved(tracker: &mut Tracker, id: &str, sender: &str, file: &str) {
        let id = RequestId::existing("request_id", id).expect("id");
        tracker
            .open(
                Opening {
                    id: id.clone(),
                    kind: Kind::PlanApproval,
                    sender: sender.into(),
                    target: "lead".into(),
                    payload_json: format!(r#"{{"plan":{{"summary":"s","files":["{file}"]}}}}"#),
                    deadline_unix_ms: None,
                },
                1,
            )
            .expect("opens");
        tracker
            .answer(
                &id,
                Kind::PlanApproval,
                &Party::Operator,
                Decision {
                    approve: true,
                    feedback: String::new(),
                    grant: Some(Grant::of_plan(Mode::AcceptEdits)),
                },
                2,
            )
            .expect("answers");
    }

    #[test]
    fn holds_a_store_did_not_keep_are_worked_out_and_kept_from_then_on() {
        let mut tracker = Tracker::new();
        approved(&mut tracker, "r1", "alice", "src/a.rs");
        approved(&mut tracker, "r2", "bob", "src/b.rs");
        let requests: Vec<Request> = tracker.iter().cloned().collect();
        let mut team = Team::restore(requests, Vec::new(), 10, None, |name| name == "alice");
        assert_eq!(
            team.holds.get("alice").map(|h| h.paths.clone()),
            Some(vec!["src/a.rs".to_owned()])
        );
        assert_eq!(team.holds.get("bob"), None, "bob is not on the team");
        let changes = team.take_changes();
        assert!(changes.contains(&Change::Hold {
            member: "alice".into(),
            hold: team.holds.get("alice").cloned(),
        }));
        assert!(team.take_changes().is_empty());
    }

    #[test]
    fn an_approval_holds_the_plans_files_until_its_task_is_completed() {
        let mut team = Team::new(10);
        team.tasks
            .create(
                "t1".into(),
                crate::tasks::NewTask {
                    subject: "login".into(),
                    ..Default::default()
                },
                1,
            )
            .expect("created");
        team.tasks.claim("alice", Some("t1"), 1).expect("claimed");
        assert_eq!(team.check_plan_task("alice", "t1"), Ok(()));
        assert!(matches!(
            team.check_plan_task("bob", "t1"),
            Err(TaskError::FailedPrecondition(m)) if m.contains("not claimed by bob")
        ));
        let id = RequestId::existing("request_id", "r1").expect("id");
        team.requests
            .open(
                Opening {
                    id: id.clone(),
                    kind: Kind::PlanApproval,
                    sender: "alice".into(),
                    target: "lead".into(),
                    payload_json: r#"{"plan":{"summary":"s","files":["src/a.rs"],"task_id":"t1"}}"#
                        .into(),
                    deadline_unix_ms: None,
                },
                2,
            )
            .expect("opens");
        let approve = Decision {
            approve: true,
            feedback: String::new(),
            grant: Some(Grant::of_plan(Mode::AcceptEdits)),
        };
        team.answer_plan(&id, approve.clone(), 3).expect("approved");
        assert_eq!(
            team.holds.get("alice").map(|h| h.task_id.as_str()),
            Some("t1")
        );
        // A retried answer changes nothing.
        assert!(!team.answer_plan(&id, approve, 4).expect("retry").fresh);
        let (done, ended) = team
            .complete_task("alice", "t1", "done".into(), 5)
            .expect("completed");
        assert!(done.fresh && ended);
        assert_eq!(team.holds.get("alice"), None);
        assert!(matches!(
            team.check_plan_task("alice", "t1"),
            Err(TaskError::FailedPrecondition(m)) if m.contains("completed")
        ));
    }

    #[test]
    fn forgotten_requests_come_first_so_an_id_may_come_back() {
        let mut tracker = Tracker::new();
        approved(&mut tracker, "r1", "alice", "src/a.rs");
        let mut team = Team::restore(
            tracker.iter().cloned().collect(),
            Vec::new(),
            10,
            Some(Vec::new()),
            |_| true,
        );
        team.forget_resolved(5, usize::MAX);
        approved(&mut team.requests, "r1", "alice", "src/b.rs");
        let changes = team.take_changes();
        assert!(
            matches!(changes.first(), Some(Change::RequestForgotten(id)) if id.as_str() == "r1")
        );
        assert!(matches!(changes.get(1), Some(Change::Request(r)) if r.id().as_str() == "r1"));
    }
}
