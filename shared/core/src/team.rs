//! The team's shared state that outlives a connection, as one pure value:
//! every protocol request, the task list and who holds which files, and
//! what of them changed since the store last took it ([`Team::take_changes`],
//! plain data). A team restored from what it gave the store is the same
//! team ([`Team::restore`]; the `replay` property tests it), which is what a
//! restarted lead, or a second lead reading a replicated store, relies on.

use crate::{
    error::FieldError,
    holds::{Hold, Holds, Overlap},
    lifecycle::Event,
    members::{MemberRecord, Members},
    names::RequestId,
    protocol::{
        Decision, Kind, Opening, Outcome, Party, Request, Status, Tracker, TransitionError,
    },
    refusal::CoreError,
    tasks::{Completed, Task, TaskBoard, TaskStatus},
    usage::{Account, Ledger},
};

mod amendments;
mod apply;
mod decide;
mod landing;
mod lists;
mod owners;
mod permissions;
mod plans;
mod results;
mod route;
mod shutdown;

pub use amendments::AmendmentPayload;
pub use apply::{Applied, Op, Rules};
pub use lists::{Listed, TeamPage};
pub use owners::{paths_of, tally_of};
pub use plans::{Approval, ReviewChain, StageKind};

/// Who says a reviewer's word: the name the history shows (`operator
/// alice`, `policy`, ...) and the operator behind it, where one is.
pub(crate) type Signer<'a> = (&'a str, Option<&'a crate::access::Person>);

/// What the store must make durable, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A member joined or changed: insert it, or replace it in place.
    Member(Box<MemberRecord>),
    /// A request was forgotten (retention): delete it.
    RequestForgotten(RequestId),
    /// A request was opened or changed: insert it, or replace it in place.
    Request(Box<Request>),
    /// A task was created or changed: insert it, or replace it in place.
    Task(Box<Task>),
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

/// A bound on pending requests, in count and in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingBudget {
    /// The most pending requests.
    pub count: usize,
    /// The most bytes of them (payload and names).
    pub bytes: usize,
}

/// What ended with a member that terminated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terminated {
    /// The pending requests it sent or had to answer, now expired.
    pub expired: Vec<Request>,
    /// The tasks it had claimed, pending again.
    pub released: Vec<Task>,
}

/// The members, the requests, the tasks, the holds and the usage.
#[derive(Debug, Default)]
pub struct Team {
    /// Who is on the team.
    pub members: Members,
    /// What the rules are set to.
    pub rules: Rules,
    /// Who answers plans and permissions without a person.
    pub approval: Approval,
    /// Who owns which paths (`--owners`): their requests wait for them.
    pub owners: std::sync::Arc<crate::owners::Owners>,
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
            members: Members::default(),
            rules: Rules::default(),
            approval: Approval::default(),
            owners: Default::default(),
            requests,
            tasks,
            holds,
            usage: Ledger::default(),
            forgotten: Vec::new(),
        }
    }

    /// The team with the members the store kept: a member a pending
    /// shutdown request targets is shutting down again.
    pub fn with_members(mut self, members: Members) -> Self {
        self.members = members;
        let names: Vec<String> = self
            .members
            .iter()
            .filter(|m| !m.terminated())
            .map(|m| m.name.to_string())
            .collect();
        for name in names {
            if self.shutdown_pending_for(&name) {
                self.members.on_life(&name, Event::ShutdownRequested);
            }
        }
        self
    }

    /// The team under `rules`.
    pub fn with_rules(mut self, rules: Rules) -> Self {
        self.rules = rules;
        self
    }

    /// The team whose plans and permissions `approval` may answer.
    pub fn with_approval(mut self, approval: Approval) -> Self {
        self.approval = approval;
        self
    }

    /// The team with its owners by path.
    pub fn with_owners(mut self, owners: std::sync::Arc<crate::owners::Owners>) -> Self {
        self.owners = owners;
        self
    }

    /// Whether a shutdown request for `name` is pending.
    pub fn shutdown_pending_for(&self, name: &str) -> bool {
        self.requests
            .pending_involving(name)
            .iter()
            .filter_map(|id| self.requests.get(id))
            .any(|r| r.opening.kind == Kind::Shutdown && r.opening.target == name)
    }

    /// SHUTTING_DOWN holds while a shutdown request for `name` is pending:
    /// its life follows what the requests say now.
    pub fn refresh_shutting_down(&mut self, name: &str) {
        let event = if self.shutdown_pending_for(name) {
            Event::ShutdownRequested
        } else {
            Event::ShutdownSettled
        };
        self.members.on_life(name, event);
    }

    /// Expires every pending request `name` sends or must answer; returns
    /// them as they end.
    /// A result being landed is not among them: the merge answers it.
    pub fn expire_involving(&mut self, name: &str, reason: &str, now: i64) -> Vec<Request> {
        let ids: Vec<RequestId> = self
            .requests
            .pending_involving(name)
            .into_iter()
            .filter(|id| !self.requests.get(id).is_some_and(landing::is_landing))
            .collect();
        ids.into_iter()
            .filter_map(|id| self.requests.expire(&id, reason, now))
            .collect()
    }

    /// Active member `name` leaves for good at `now` (`reason`, as the
    /// team will hear it): TERMINATED, its session token retired, the
    /// pending requests it sent or must answer expired, its hold ended and
    /// its claimed tasks pending again. `None` if it was not active.
    pub fn terminate(&mut self, name: &str, reason: &str, now: i64) -> Option<Terminated> {
        if !self.members.is_active(name) {
            return None;
        }
        self.members.on_life(name, Event::Terminate { at: now });
        let expired = self.expire_involving(name, &format!("{name} terminated: {reason}"), now);
        let released = self.release(name, now);
        Some(Terminated { expired, released })
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

    /// Whether `opening` may be opened within the pending budgets, one
    /// member's (`per_member`) and everyone's (`total`): a retry of a
    /// request already open may, and a plan that supersedes `superseded`
    /// (still pending; it expires as this one opens) counts in its stead.
    pub fn check_pending_room(
        &self,
        opening: &Opening,
        superseded: Option<&RequestId>,
        per_member: PendingBudget,
        total: PendingBudget,
    ) -> Result<(), CoreError> {
        if self.requests.get(&opening.id).is_some() {
            return Ok(());
        }
        let freed = superseded
            .and_then(|old| self.requests.get(old))
            .filter(|old| old.status == Status::Pending)
            .map_or(0, |old| old.opening.bytes());
        let replaces = usize::from(freed > 0);
        let bytes = opening.bytes();
        let mine = self.requests.pending_load(&opening.sender);
        let all = self.requests.pending_total();
        let refusal = if mine.count.saturating_sub(replaces) >= per_member.count {
            format!(
                "{:?} has {} requests pending, the most one member may \
                 (--pending-max-per-member {}); wait for answers",
                opening.sender, mine.count, per_member.count
            )
        } else if mine.bytes.saturating_sub(freed) + bytes > per_member.bytes {
            format!(
                "{:?} has {} bytes of requests pending; this one's {} would pass \
                 --pending-max-bytes-per-member {}",
                opening.sender, mine.bytes, bytes, per_member.bytes
            )
        } else if all.count.saturating_sub(replaces) >= total.count {
            format!(
                "the lead holds {} pending requests, the most it may (--pending-max {})",
                all.count, total.count
            )
        } else if all.bytes.saturating_sub(freed) + bytes > total.bytes {
            format!(
                "the lead holds {} bytes of pending requests; this one's {} would pass \
                 --pending-max-bytes {}",
                all.bytes, bytes, total.bytes
            )
        } else {
            return Ok(());
        };
        Err(CoreError::LimitReached(refusal))
    }

    /// What a plan of `sender`'s that `supersedes` an earlier one revises:
    /// one of its own plans, not approved. The earlier plan if it is still
    /// pending (it expires once the new one is open).
    pub fn check_supersedes(
        &self,
        sender: &str,
        supersedes: Option<&RequestId>,
    ) -> Result<Option<RequestId>, CoreError> {
        let Some(old) = supersedes else {
            return Ok(None);
        };
        let request = self
            .requests
            .get(old)
            .ok_or_else(|| FieldError::new("supersedes", format!("no request {old}")))?;
        if request.opening.kind != Kind::PlanApproval || request.opening.sender != sender {
            return Err(FieldError::new(
                "supersedes",
                format!("{old} is not a plan of {sender:?}"),
            )
            .into());
        }
        match request.status {
            Status::Approved => Err(CoreError::Conflict(format!(
                "supersedes: {old} is already APPROVED; there is nothing to revise"
            ))),
            Status::Pending => Ok(Some(old.clone())),
            Status::Rejected | Status::Expired => Ok(None),
        }
    }

    /// Whether plan `id` may be approved: a pending plan whose files fall
    /// inside another member's hold is not, unless `allow_overlap` says so.
    pub fn check_overlap(&self, id: &RequestId, allow_overlap: bool) -> Result<(), CoreError> {
        let pending = self
            .requests
            .get(id)
            .is_some_and(|r| r.status == Status::Pending);
        if !pending || allow_overlap {
            return Ok(());
        }
        let overlaps = self.overlaps_of(id);
        if overlaps.is_empty() {
            return Ok(());
        }
        let what: Vec<String> = overlaps.iter().map(ToString::to_string).collect();
        Err(CoreError::Conflict(format!(
            "the plan {}; approve with --allow-overlap (refuse_overlap false) to grant it anyway",
            what.join("; ")
        )))
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
    pub fn check_plan_task(&self, member: &str, task_id: &str) -> Result<(), CoreError> {
        match self.tasks.get(task_id) {
            None => Err(CoreError::Conflict(format!(
                "plan.task_id: no task {task_id:?}"
            ))),
            Some(t) if t.owner == member && t.status == TaskStatus::Claimed => Ok(()),
            Some(t) if t.status == TaskStatus::Completed => Err(CoreError::Conflict(format!(
                "plan.task_id: task {task_id} is completed"
            ))),
            Some(_) => Err(CoreError::Conflict(format!(
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
        completion: crate::tasks::Completion,
        now: i64,
    ) -> Result<(Completed, bool), CoreError> {
        let done = self.tasks.complete(member, task_id, completion, now)?;
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
    /// members first, then forgotten requests (an id may come back as a new request),
    /// then requests and tasks oldest first, then holds, then usage.
    pub fn take_changes(&mut self) -> Vec<Change> {
        let mut changes: Vec<Change> = self
            .members
            .take_changed()
            .into_iter()
            .map(|m| Change::Member(Box::new(m)))
            .collect();
        changes.extend(
            std::mem::take(&mut self.forgotten)
                .into_iter()
                .map(Change::RequestForgotten),
        );
        changes.extend(
            self.requests
                .take_changed()
                .into_iter()
                .map(|r| Change::Request(Box::new(r))),
        );
        changes.extend(
            self.tasks
                .take_changed()
                .into_iter()
                .map(|t| Change::Task(Box::new(t))),
        );
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
            .open(plan_opening(&id, sender, file), 1)
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
            Err(CoreError::Conflict(m)) if m.contains("not claimed by bob")
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
            .complete_task("alice", "t1", crate::tasks::Completion::summary("done"), 5)
            .expect("completed");
        assert!(done.fresh && ended);
        assert_eq!(team.holds.get("alice"), None);
        assert!(matches!(
            team.check_plan_task("alice", "t1"),
            Err(CoreError::Conflict(m)) if m.contains("completed")
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

    /// Opens plan `id` of `sender`'s for `file`, pending.
    fn plan(team: &mut Team, id: &str, sender: &str, file: &str) -> RequestId {
        let id = RequestId::existing("request_id", id).expect("id");
        team.requests
            .open(plan_opening(&id, sender, file), 1)
            .expect("opens");
        id
    }

    fn plan_opening(id: &RequestId, sender: &str, file: &str) -> Opening {
        Opening {
            id: id.clone(),
            kind: Kind::PlanApproval,
            sender: sender.into(),
            target: "lead".into(),
            payload_json: format!(r#"{{"plan":{{"summary":"s","files":["{file}"]}}}}"#),
            deadline_unix_ms: None,
        }
    }

    fn decide(team: &mut Team, id: &RequestId, approve: bool) {
        team.answer_plan(
            id,
            Decision {
                approve,
                feedback: "f".into(),
                grant: approve.then(|| Grant::of_plan(Mode::AcceptEdits)),
            },
            2,
        )
        .expect("answers");
    }

    #[test]
    fn a_revision_supersedes_only_its_senders_own_plan_that_is_not_approved() {
        let mut team = Team::new(10);
        let pending = plan(&mut team, "p1", "alice", "a.rs");
        let rejected = plan(&mut team, "p2", "alice", "a.rs");
        decide(&mut team, &rejected, false);
        let approved = plan(&mut team, "p3", "alice", "a.rs");
        decide(&mut team, &approved, true);
        let bobs = plan(&mut team, "p4", "bob", "b.rs");
        let unknown = RequestId::existing("supersedes", "p9").expect("id");

        assert_eq!(team.check_supersedes("alice", None), Ok(None));
        assert_eq!(
            team.check_supersedes("alice", Some(&pending)),
            Ok(Some(pending.clone())),
            "a pending plan expires once its revision opens"
        );
        assert_eq!(team.check_supersedes("alice", Some(&rejected)), Ok(None));
        assert!(matches!(
            team.check_supersedes("alice", Some(&approved)),
            Err(CoreError::Conflict(m)) if m.contains("already APPROVED")
        ));
        assert!(matches!(
            team.check_supersedes("alice", Some(&bobs)),
            Err(CoreError::Invalid(e)) if e.field == "supersedes" && e.problem.contains("not a plan of \"alice\"")
        ));
        assert!(matches!(
            team.check_supersedes("alice", Some(&unknown)),
            Err(CoreError::Invalid(e)) if e.field == "supersedes" && e.problem.contains("no request p9")
        ));
    }

    #[test]
    fn pending_budgets_bound_one_member_and_everyone_and_a_revision_counts_in_its_stead() {
        let mut team = Team::new(10);
        let first = plan(&mut team, "p1", "alice", "a.rs");
        let one = PendingBudget {
            count: 1,
            bytes: 1 << 20,
        };
        let roomy = PendingBudget {
            count: 100,
            bytes: 1 << 20,
        };
        let next = RequestId::existing("request_id", "p2").expect("id");
        let opening = plan_opening(&next, "alice", "a.rs");
        assert!(matches!(
            team.check_pending_room(&opening, None, one, roomy),
            Err(CoreError::LimitReached(m)) if m.contains("--pending-max-per-member 1")
        ));
        assert!(matches!(
            team.check_pending_room(&opening, None, roomy, one),
            Err(CoreError::LimitReached(m)) if m.contains("--pending-max 1")
        ));
        assert_eq!(
            team.check_pending_room(&opening, Some(&first), one, one),
            Ok(()),
            "a revision replaces the plan it supersedes"
        );
        let retry = plan_opening(&first, "alice", "a.rs");
        assert_eq!(
            team.check_pending_room(&retry, None, one, one),
            Ok(()),
            "a retry of an open request is not a new one"
        );
        let small = PendingBudget {
            count: 100,
            bytes: opening.bytes(),
        };
        assert!(matches!(
            team.check_pending_room(&opening, None, small, roomy),
            Err(CoreError::LimitReached(m)) if m.contains("--pending-max-bytes-per-member")
        ));
        assert!(matches!(
            team.check_pending_room(&opening, None, roomy, small),
            Err(CoreError::LimitReached(m)) if m.contains("--pending-max-bytes ")
        ));
        let bobs = plan_opening(&next, "bob", "b.rs");
        assert_eq!(team.check_pending_room(&bobs, None, one, roomy), Ok(()));
    }

    #[test]
    fn a_plan_inside_anothers_hold_is_approved_only_when_the_overlap_is_allowed() {
        let mut team = Team::new(10);
        let alices = plan(&mut team, "p1", "alice", "src/*.rs");
        decide(&mut team, &alices, true);
        let bobs = plan(&mut team, "p2", "bob", "src/b.rs");
        let carols = plan(&mut team, "p3", "carol", "docs/x.md");
        assert!(matches!(
            team.check_overlap(&bobs, false),
            Err(CoreError::Conflict(m)) if m.contains("alice") && m.contains("--allow-overlap")
        ));
        assert_eq!(team.check_overlap(&bobs, true), Ok(()));
        assert_eq!(team.check_overlap(&carols, false), Ok(()));
        decide(&mut team, &bobs, false);
        assert_eq!(
            team.check_overlap(&bobs, false),
            Ok(()),
            "a decided plan's answer is the tracker's to give"
        );
    }
}
