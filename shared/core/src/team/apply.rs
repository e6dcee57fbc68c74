//! [`Team::apply`]: one op, for a caller the runtime admitted, at a time
//! the runtime passes in; what it answers (in the op's own type), what the
//! store must make durable and what the runtime must do then ([`Applied`]). And [`Team::tick`], what time alone does:
//! deadlines pass, grace periods lapse.
//!
//! The ops applied here: the plan and permission handshakes (with the
//! approval mode and the reviewer chain: `plans.rs`), the shutdown
//! handshake (`shutdown.rs`), joining, acknowledging, tool-call reports, tasks (create,
//! claim, complete), usage and budgets, idleness and leaving, and the lists
//! (a page of core entries; the edge may end it sooner, by its size on the
//! wire). Each op is its own type ([`Op`], in `route.rs`), which names its
//! answer. The lead's hub applies `Send` itself (what an inbox holds, its
//! byte budgets and the message ids it remembers are the runtime's): no op
//! of the core's is one.

use super::{Change, PendingBudget, Team};
use crate::{
    access::Admitted,
    effect::{Effect, MemberView, Message, Notice},
    grant::Mode,
    lifecycle::Event,
    members::token_hash,
    names::{Name, LEAD},
    op::{Doors, Joined},
    protocol::Kind,
    refusal::CoreError,
    tasks::{NewTask, Task, TaskStatus},
    usage::{Standing, Usage},
};

/// An op: what it answers, where it may come in, and how the team
/// applies it. Each op's answer is its own type, known where it is asked.
pub trait Op {
    /// What it answers.
    type Reply;
    /// Where it may come in.
    const DOORS: Doors;
    /// Applies it for `caller`, admitted already, at `now` (unix ms): what it
    /// answers; what the runtime must do then goes into `effects`.
    fn apply(
        self,
        team: &mut Team,
        now: i64,
        caller: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<Self::Reply, CoreError>;
}

/// What applying an op did, answering `R`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied<R> {
    /// The answer.
    pub reply: R,
    /// What the store must make durable before anything below happens.
    pub changes: Vec<Change>,
    /// What the runtime must do then, in order.
    pub effects: Vec<Effect>,
}

/// What the team's rules are set to (the lead's flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// What the pending requests one member opened may hold ...
    pub pending_per_member: PendingBudget,
    /// ... and what those of every member together may.
    pub pending_total: PendingBudget,
    /// The deadline of a shutdown request that names none, in ms.
    pub shutdown_deadline_ms: i64,
    /// How long a disconnected member may stay away before it is
    /// TERMINATED, in ms.
    pub grace_ms: i64,
    /// The most members not terminated.
    pub max_members: usize,
    /// The token budget of a member that joins with none of its own and
    /// none the operator set; 0: none.
    pub token_budget: u64,
    /// The team has a repository (`lead serve --repo`): tasks complete when
    /// their results land.
    pub repo: bool,
    /// What a task that names none has reviewed (`--review`).
    pub review: crate::tasks::Review,
    /// No plan of a member whose commands run unconfined (or that did not
    /// say how they run) is approved (`--require-sandbox`).
    pub require_sandbox: bool,
}

impl Default for Rules {
    fn default() -> Self {
        Self {
            pending_per_member: PendingBudget {
                count: 64,
                bytes: 2 * 1024 * 1024,
            },
            pending_total: PendingBudget {
                count: 10_000,
                bytes: 128 * 1024 * 1024,
            },
            shutdown_deadline_ms: 30_000,
            grace_ms: 30_000,
            max_members: 10_000,
            token_budget: 0,
            repo: false,
            review: crate::tasks::Review::Plan,
            require_sandbox: false,
        }
    }
}

impl Team {
    /// Applies `op` for `caller`, admitted already, at `now` (unix ms):
    /// synchronous and deterministic. The op's own [`Op::apply`] does it.
    pub fn apply<O: Op>(
        &mut self,
        now: i64,
        caller: &Admitted,
        op: O,
    ) -> Result<Applied<O::Reply>, CoreError> {
        let mut effects = Vec::new();
        let reply = op.apply(self, now, caller, &mut effects)?;
        crate::effect::coalesce_requests(&mut effects);
        Ok(Applied {
            reply,
            changes: self.take_changes(),
            effects,
        })
    }

    /// What time alone does by `now`: requests whose deadline passed expire
    /// (a member a shutdown request was for is no longer shutting down, and
    /// its process, if the lead started it, is stopped), and members whose
    /// grace period is over (taking in those that end within
    /// [`crate::members::GRACE_BATCH_MS`]) are TERMINATED.
    pub fn tick(&mut self, now: i64) -> Vec<Effect> {
        let mut effects = Vec::new();
        for id in self.requests.due(now) {
            let Some(request) = self
                .requests
                .expire(&id, "deadline passed with no answer", now)
            else {
                continue;
            };
            let shutdown =
                (request.opening.kind == Kind::Shutdown).then(|| request.opening.target.clone());
            effects.push(Effect::Notify(Notice::Request(Box::new(request))));
            if let Some(target) = shutdown {
                self.refresh_shutting_down(&target);
                self.notify_member(&target, &mut effects);
                effects.push(Effect::StopChild(target));
            }
        }
        for name in self.members.take_lapsed(now) {
            let seconds = self.rules.grace_ms as f64 / 1000.0;
            let why = format!("disconnected for longer than the {seconds}s grace period");
            effects.extend(self.end_member(&name, &why, now));
        }
        effects
    }

    /// When [`Team::tick`] next has something to do.
    pub fn next_tick(&self) -> Option<i64> {
        [self.requests.next_deadline(), self.members.next_grace()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Active member `name` leaves for good (see [`Team::terminate`]): its
    /// inbox closes, the watchers hear of its expired requests, of it (then
    /// holding nothing) and of its tasks going back, idle members of those
    /// tasks, and the team of its end.
    pub fn end_member(&mut self, name: &str, reason: &str, now: i64) -> Vec<Effect> {
        let Some(ended) = self.terminate(name, reason, now) else {
            return Vec::new();
        };
        let mut effects = vec![Effect::CloseInbox(name.to_owned())];
        effects.extend(
            ended
                .expired
                .into_iter()
                .map(|r| Effect::Notify(Notice::Request(Box::new(r)))),
        );
        self.notify_member(name, &mut effects);
        for task in &ended.released {
            effects.push(Effect::Notify(Notice::Task(task.clone())));
        }
        let claimable: Vec<Task> = ended
            .released
            .into_iter()
            .filter(|t| self.tasks.is_claimable(t))
            .collect();
        self.announce_claimable(&claimable, &mut effects);
        effects.push(Effect::Announce {
            name: name.to_owned(),
            reason: reason.to_owned(),
        });
        effects
    }

    /// `name` made a call that shows work: an idle member is working again.
    pub fn show_work(&mut self, name: &str) -> Vec<Effect> {
        let mut effects = Vec::new();
        if self.members.get(name).is_some_and(|m| m.life.is_idle()) {
            self.members.on_life(name, Event::ShowedWork);
            self.notify_member(name, &mut effects);
        }
        effects
    }

    /// Member `name` as the watchers see it.
    pub fn member_view(&self, name: &str) -> Option<MemberView> {
        let member = self.members.get(name)?;
        Some(MemberView {
            member: member.clone(),
            standing: self.usage.standing(name),
            holds: self
                .holds
                .get(name)
                .map(|h| h.paths.clone())
                .unwrap_or_default(),
        })
    }

    /// Tells the watchers how `name` stands now.
    pub(super) fn notify_member(&self, name: &str, effects: &mut Vec<Effect>) {
        if let Some(view) = self.member_view(name) {
            effects.push(Effect::Notify(Notice::Member(Box::new(view))));
        }
    }

    /// Tells every idle active member without a task of its own that work
    /// can be claimed: one envelope each, naming the oldest of `tasks` (a
    /// claim with no id takes the oldest claimable task anyway). However
    /// many tasks one change unblocks, it costs one envelope per idle member.
    fn announce_claimable(&self, tasks: &[Task], effects: &mut Vec<Effect>) {
        let Some(oldest) = tasks.iter().min_by_key(|t| t.created_at_unix_ms) else {
            return;
        };
        let owners: std::collections::HashSet<&str> = self
            .tasks
            .list(Some(TaskStatus::Claimed))
            .into_iter()
            .map(|t| t.owner.as_str())
            .collect();
        let idle: Vec<String> = self
            .members
            .iter()
            .filter(|m| !m.terminated() && m.life.is_idle())
            .filter(|m| !owners.contains(m.name.as_str()))
            .map(|m| m.name.to_string())
            .collect();
        if !idle.is_empty() {
            effects.push(Effect::Deliver {
                from: LEAD.to_owned(),
                to: idle,
                message: Message::TaskClaimable(Box::new(oldest.clone())),
            });
        }
    }

    /// `Join`: a new member in plan mode, under a name no active member
    /// holds, while the team has room; it has the grace period to open its
    /// inbox.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn join_op(
        &mut self,
        name: Name,
        role: String,
        token_budget: u64,
        member_id: String,
        session_token: String,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Joined, CoreError> {
        if self.members.is_active(name.as_str()) {
            return Err(CoreError::Taken(format!(
                "name: {name:?} is held by an active member; pick another name"
            )));
        }
        if self.members.active() >= self.rules.max_members {
            return Err(CoreError::LimitReached(format!(
                "the team has {} members, the most --max-members allows; \
                 wait for one to leave",
                self.members.active()
            )));
        }
        let reused = self.members.join(
            name.clone(),
            role,
            member_id.clone(),
            token_hash(&session_token),
            now.saturating_add(self.rules.grace_ms),
        );
        effects.push(Effect::OpenInbox {
            name: name.to_string(),
            reused,
        });
        let standing = self
            .usage
            .join(name.as_str(), token_budget, self.rules.token_budget);
        self.notify_member(name.as_str(), effects);
        Ok(Joined {
            member_id,
            session_token,
            standing,
        })
    }

    /// `CreateTask`: a new pending task; idle members hear of it if it can
    /// be claimed now.
    pub(super) fn create_task_op(
        &mut self,
        task_id: String,
        new: NewTask,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Task, CoreError> {
        let mut new = new;
        let review = new.review.unwrap_or(self.rules.review);
        if review != crate::tasks::Review::Plan && !self.rules.repo {
            return Err(CoreError::Conflict(format!(
                "review: a task reviewed by {} needs a team repository (lead serve --repo)",
                review.as_str()
            )));
        }
        new.review = Some(review);
        let task = self.tasks.create(task_id, new, now)?;
        effects.push(Effect::Notify(Notice::Task(task.clone())));
        if self.tasks.is_claimable(&task) {
            self.announce_claimable(std::slice::from_ref(&task), effects);
        }
        Ok(task)
    }

    /// `ClaimTask`: `name` claims a task (or the oldest claimable one).
    pub(super) fn claim_task_op(
        &mut self,
        name: &str,
        id: Option<&str>,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Task, CoreError> {
        let before = id
            .and_then(|id| self.tasks.get(id))
            .map(|t| t.updated_at_unix_ms);
        let task = self.tasks.claim(name, id, now)?;
        if before != Some(task.updated_at_unix_ms) {
            effects.push(Effect::Notify(Notice::Task(task.clone())));
            effects.extend(self.show_work(name));
            // Reviewed by its result alone: no plan round; the teammate
            // writes in its own worktree at once, and nothing lands
            // unreviewed.
            if !task.review.needs_plan() {
                self.members.set_mode(name, Mode::AcceptEdits);
                self.notify_member(name, effects);
            }
        }
        Ok(task)
    }

    /// `CompleteTask`: the owner completes its task; the grant its plan
    /// for the task had ends with it (back to plan mode), and the tasks that
    /// waited on it become claimable, which idle members hear.
    pub(super) fn complete_task_op(
        &mut self,
        name: &str,
        task_id: &str,
        completion: crate::tasks::Completion,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Task, CoreError> {
        let (done, hold_ended) = self.complete_task(name, task_id, completion, now)?;
        if done.fresh {
            if hold_ended || !done.task.review.needs_plan() {
                self.members.set_mode(name, Mode::Plan);
                self.notify_member(name, effects);
            }
            effects.push(Effect::Notify(Notice::Task(done.task.clone())));
            self.announce_claimable(&done.unblocked, effects);
        }
        Ok(done.task)
    }

    /// `WithdrawTask`: the task ends, whoever works on it; its owner's
    /// pending requests of it (a plan or result naming it, an amendment)
    /// expire, its grant for it ends (back to plan mode), and it hears
    /// why. A result being landed is left to the merge.
    pub(super) fn withdraw_task_op(
        &mut self,
        task_id: &str,
        reason: &str,
        by: &str,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Task, CoreError> {
        let task = self.tasks.withdraw(task_id, reason, now)?;
        effects.push(Effect::Notify(Notice::Task(task.clone())));
        let owner = task.owner.clone();
        if owner.is_empty() {
            return Ok(task);
        }
        let why = format!("task {task_id} was withdrawn by {by}: {reason}");
        let ids: Vec<crate::names::RequestId> = self
            .requests
            .pending_involving(&owner)
            .into_iter()
            .filter(|id| {
                self.requests.get(id).is_some_and(|r| {
                    r.opening.sender == owner
                        && !super::landing::is_landing(r)
                        && match r.opening.kind {
                            Kind::PlanApproval | Kind::Result => r.names_task(task_id),
                            Kind::Amendment => true,
                            Kind::Shutdown | Kind::Permission => false,
                        }
                })
            })
            .collect();
        for id in ids {
            if let Some(expired) = self.requests.expire(&id, &why, now) {
                effects.push(Effect::Notify(Notice::Request(Box::new(expired))));
            }
        }
        if self.holds.complete(&owner, task_id) {
            self.members.set_mode(&owner, Mode::Plan);
            self.notify_member(&owner, effects);
        }
        effects.push(Effect::Deliver {
            from: "lead".into(),
            to: vec![owner],
            message: Message::Text {
                content: format!("{why}. Stop working on it; your grant for it has ended."),
            },
        });
        Ok(task)
    }

    /// `ReportUsage`: `name`'s process `epoch` has used `totals` so far.
    pub(super) fn report_usage_op(
        &mut self,
        name: &str,
        epoch: &str,
        totals: Usage,
        effects: &mut Vec<Effect>,
    ) -> Standing {
        let before = self.usage.standing(name);
        let standing = self.usage.report(name, true, epoch, totals);
        if standing != before {
            effects.push(Effect::Notify(Notice::Usage {
                name: name.to_owned(),
                standing,
            }));
        }
        standing
    }

    /// `SetBudget`: the operator sets `name`'s budget (0: none). The member,
    /// unless terminated, hears it in its inbox.
    pub(super) fn set_budget_op(
        &mut self,
        name: &Name,
        token_budget: u64,
        effects: &mut Vec<Effect>,
    ) -> Result<Standing, CoreError> {
        let name = name.as_str();
        let member = self.members.get(name);
        let known = member.is_some() || self.usage.get(name).is_some_and(|a| a.member);
        if !known {
            return Err(CoreError::NotFound(format!(
                "name: no member {name:?} has joined"
            )));
        }
        let active = member.is_some_and(|m| !m.terminated());
        let standing = self.usage.set_budget(name, token_budget);
        if active {
            effects.push(Effect::Deliver {
                from: LEAD.to_owned(),
                to: vec![name.to_owned()],
                message: Message::BudgetChanged { token_budget },
            });
        }
        effects.push(Effect::Notify(Notice::Usage {
            name: name.to_owned(),
            standing,
        }));
        Ok(standing)
    }

    /// `ReportIdle`: `name` has nothing to do. The lead hears why; a member
    /// that was busy and has no task of its own hears of the oldest task it
    /// can claim (one that became claimable while it was busy, after its
    /// last claim found none, would otherwise go unheard).
    pub(super) fn report_idle_op(&mut self, name: &str, reason: String, effects: &mut Vec<Effect>) {
        let changed = self.members.get(name).is_some_and(|m| !m.life.is_idle());
        let told = self.members.report_idle(name, reason.clone());
        effects.push(Effect::Deliver {
            from: name.to_owned(),
            to: vec![LEAD.to_owned()],
            message: Message::Idle { reason },
        });
        if told {
            self.notify_member(name, effects);
        }
        if changed {
            let next = (!self.tasks.has_claimed(name))
                .then(|| self.tasks.next_claimable().cloned())
                .flatten();
            if let Some(task) = next {
                effects.push(Effect::Deliver {
                    from: LEAD.to_owned(),
                    to: vec![name.to_owned()],
                    message: Message::TaskClaimable(Box::new(task)),
                });
            }
        }
    }
}
