//! Replay, for the core's [`Team`]: arbitrary sequences of what a lead does
//! to its requests, tasks and holds (plans opened and answered, holds taken
//! on approval and ended on completion or leaving, tasks created, claimed,
//! completed and given back, resolved requests forgotten, members joining
//! with budgets and leaving, idleness and grant modes, usage reported and
//! budgets set), committed to a log at arbitrary points as the lead's SQLite
//! store keeps it; after every commit, a team restored from the log is the
//! live team: the same members in join order (each disconnected, as a
//! restored member is, or terminated), the same requests and tasks in the
//! same order, the same holds, the same usage accounts.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use mesh_core::{
    grant::{Grant, Mode},
    holds::Hold,
    lifecycle::{Event, Status},
    members::{MemberRecord, Members},
    names::Name,
    names::RequestId,
    protocol::{Decision, Kind, Opening, Request},
    tasks::{NewTask, Task, TaskBoard},
    team::{Change, Team},
    usage::{Account, Usage},
};
use proptest::prelude::*;

const MEMBERS: [&str; 3] = ["alice", "bob", "carol"];
const FILES: [&str; 3] = ["src/a.rs", "src/b.rs", "docs/*.md"];

/// One thing a lead does, with its values drawn from small pools.
#[derive(Debug, Clone)]
enum Op {
    /// A member sends a plan (for its claimed task, if any).
    Plan { member: usize, file: usize, id: u8 },
    /// The operator answers plan `id`; an approval gives the sender a hold.
    Answer { id: u8, approve: bool },
    /// A task is created (blocked by an earlier one, maybe).
    CreateTask { blocked: Option<usize> },
    /// A member claims the oldest claimable task.
    Claim { member: usize },
    /// A member completes its claimed task; the hold for it ends.
    Complete { member: usize },
    /// A member leaves: it terminates, its tasks go back, its hold ends,
    /// its requests expire.
    Leave { member: usize },
    /// A member opens its inbox, reports idle, or shows work.
    Live { member: usize, event: u8 },
    /// Resolved requests are forgotten.
    Forget { before: i64, max_bytes: usize },
    /// A member joins asking for a budget (0: none of its own).
    Join { member: usize, requested: u64 },
    /// A member reports what process `epoch` used so far (cumulative).
    Report {
        member: usize,
        epoch: u8,
        tokens: u64,
    },
    /// The operator sets a member's budget.
    SetBudget { member: usize, budget: u64 },
    /// Time passes.
    Tick,
    /// The lead commits.
    Commit,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..MEMBERS.len(), 0..FILES.len(), 0u8..6).prop_map(|(member, file, id)| Op::Plan { member, file, id }),
        3 => (0u8..6, any::<bool>()).prop_map(|(id, approve)| Op::Answer { id, approve }),
        2 => proptest::option::of(0usize..4).prop_map(|blocked| Op::CreateTask { blocked }),
        2 => (0..MEMBERS.len()).prop_map(|member| Op::Claim { member }),
        2 => (0..MEMBERS.len()).prop_map(|member| Op::Complete { member }),
        1 => (0..MEMBERS.len()).prop_map(|member| Op::Leave { member }),
        2 => (0..MEMBERS.len(), 0u8..3).prop_map(|(member, event)| Op::Live { member, event }),
        1 => (0i64..40, prop_oneof![Just(0usize), Just(200), Just(usize::MAX)])
            .prop_map(|(before, max_bytes)| Op::Forget { before, max_bytes }),
        1 => (0..MEMBERS.len(), prop_oneof![Just(0u64), Just(500)])
            .prop_map(|(member, requested)| Op::Join { member, requested }),
        2 => (0..MEMBERS.len(), 0u8..3, 0u64..1_000)
            .prop_map(|(member, epoch, tokens)| Op::Report { member, epoch, tokens }),
        1 => (0..MEMBERS.len(), prop_oneof![Just(0u64), Just(2_000)])
            .prop_map(|(member, budget)| Op::SetBudget { member, budget }),
        2 => Just(Op::Tick),
        3 => Just(Op::Commit),
    ]
}

/// The store as the lead's SQLite store keeps it: requests and tasks in the
/// order they were first written (an update keeps a row's place), holds by
/// member.
#[derive(Debug, Default)]
struct Log {
    requests: Vec<Request>,
    tasks: Vec<Task>,
    holds: BTreeMap<String, Hold>,
    accounts: BTreeMap<String, Account>,
    members: BTreeMap<String, MemberRecord>,
}

impl Log {
    fn apply(&mut self, change: Change) {
        match change {
            Change::Member(record) => {
                self.members.insert(record.name.clone(), *record);
            }
            Change::RequestForgotten(id) => self.requests.retain(|r| r.id() != &id),
            Change::Request(request) => {
                match self.requests.iter_mut().find(|r| r.id() == request.id()) {
                    Some(row) => *row = *request,
                    None => self.requests.push(*request),
                }
            }
            Change::Task(task) => match self.tasks.iter_mut().find(|t| t.task_id == task.task_id) {
                Some(row) => *row = task,
                None => self.tasks.push(task),
            },
            Change::Hold { member, hold } => match hold {
                Some(hold) => {
                    self.holds.insert(member, hold);
                }
                None => {
                    self.holds.remove(&member);
                }
            },
            Change::Usage(account) => {
                self.accounts.insert(account.name.clone(), *account);
            }
        }
    }

    fn restore(&self, now: i64) -> Team {
        let mut records: Vec<MemberRecord> = self.members.values().cloned().collect();
        records.sort_by_key(|r| r.order);
        let members = Members::restore(records, now, now + GRACE).unwrap();
        Team::restore(
            self.requests.clone(),
            self.tasks.clone(),
            TaskBoard::DEFAULT_MAX_TASKS,
            Some(self.holds.clone().into_iter().collect()),
            |_| true,
        )
        .with_usage(self.accounts.values().cloned().collect())
        .with_members(members)
    }
}

fn request_id(id: u8) -> RequestId {
    RequestId::existing("request_id", &format!("00000000-0000-4000-8000-{id:012}")).unwrap()
}

/// The grace period of a member that joined, or of every member of a
/// restored team.
const GRACE: i64 = 30;

/// A team's members as a restarted lead sees them: every active one
/// disconnected (remembering whether it was idle), a terminated one
/// terminated as of the restart.
fn members(team: &Team) -> Vec<(MemberRecord, Status)> {
    team.members
        .iter()
        .map(|m| {
            let status = if m.terminated() {
                Status::Terminated
            } else {
                Status::Disconnected
            };
            (m.record(), status)
        })
        .collect()
}

/// Whether two teams are the same, as a lead would tell.
fn same(live: &Team, restored: &Team) -> Result<(), TestCaseError> {
    prop_assert_eq!(members(live), members(restored));
    prop_assert_eq!(live.members.active(), restored.members.active());
    for m in live.members.iter() {
        if let Some(hash) = &m.token_hash {
            let placed = |t: &Team| {
                (
                    t.members.by_token_hash(hash).map(str::to_owned),
                    t.members.by_retired_hash(hash).map(str::to_owned),
                )
            };
            prop_assert_eq!(placed(live), placed(restored));
        }
    }
    let requests = |t: &Team| t.requests.iter().cloned().collect::<Vec<_>>();
    prop_assert_eq!(requests(live), requests(restored));
    let tasks = |t: &Team| t.tasks.list(None).into_iter().cloned().collect::<Vec<_>>();
    prop_assert_eq!(tasks(live), tasks(restored));
    let holds = |t: &Team| {
        t.holds
            .iter()
            .map(|(m, h)| (m.clone(), h.clone()))
            .collect::<Vec<_>>()
    };
    prop_assert_eq!(holds(live), holds(restored));
    let accounts = |t: &Team| t.usage.iter().cloned().collect::<Vec<_>>();
    prop_assert_eq!(accounts(live), accounts(restored));
    prop_assert_eq!(live.usage.team_total(), restored.usage.team_total());
    prop_assert_eq!(
        live.requests.pending_total(),
        restored.requests.pending_total()
    );
    prop_assert_eq!(
        live.requests.next_deadline(),
        restored.requests.next_deadline()
    );
    Ok(())
}

/// Runs `ops` on a team as the lead's hub would, committing at each
/// `Commit` and at the end.
fn replays(ops: &[Op]) -> Result<(), TestCaseError> {
    let mut team = Team::new(TaskBoard::DEFAULT_MAX_TASKS);
    let mut log = Log::default();
    let mut now = 1;
    let mut task_ids = Vec::new();
    for op in ops {
        match *op {
            Op::Plan { member, file, id } => {
                let sender = MEMBERS[member];
                let task_id = team
                    .tasks
                    .list(None)
                    .into_iter()
                    .find(|t| {
                        t.owner == sender && t.status == mesh_core::tasks::TaskStatus::Claimed
                    })
                    .map(|t| t.task_id.clone())
                    .unwrap_or_default();
                let payload = serde_json::json!({
                    "plan": {"summary": "s", "files": [FILES[file]], "task_id": task_id}
                });
                let _ = team.requests.open(
                    Opening {
                        id: request_id(id),
                        kind: Kind::PlanApproval,
                        sender: sender.into(),
                        target: "lead".into(),
                        payload_json: payload.to_string(),
                        deadline_unix_ms: None,
                    },
                    now,
                );
            }
            Op::Answer { id, approve } => {
                let decision = Decision {
                    approve,
                    feedback: if approve { String::new() } else { "no".into() },
                    grant: approve.then(|| Grant::of_plan(mesh_core::grant::Mode::AcceptEdits)),
                };
                if let Ok(outcome) = team.answer_plan(&request_id(id), decision, now) {
                    if outcome.fresh && approve {
                        let sender = outcome.request.opening.sender.clone();
                        team.members.set_mode(&sender, Mode::AcceptEdits);
                    }
                }
            }
            Op::CreateTask { blocked } => {
                let blocked_by = blocked
                    .and_then(|i| task_ids.get(i).cloned())
                    .into_iter()
                    .collect();
                let id = format!("t{}", task_ids.len());
                if team
                    .tasks
                    .create(
                        id.clone(),
                        NewTask {
                            subject: id.clone(),
                            blocked_by,
                            ..NewTask::default()
                        },
                        now,
                    )
                    .is_ok()
                {
                    task_ids.push(id);
                }
            }
            Op::Claim { member } => {
                let _ = team.tasks.claim(MEMBERS[member], None, now);
            }
            Op::Complete { member } => {
                let owned = team
                    .tasks
                    .list(Some(mesh_core::tasks::TaskStatus::Claimed))
                    .into_iter()
                    .find(|t| t.owner == MEMBERS[member])
                    .map(|t| t.task_id.clone());
                if let Some(task_id) = owned {
                    let _ = team.complete_task(MEMBERS[member], &task_id, "done".into(), now);
                }
            }
            Op::Leave { member } => {
                team.terminate(MEMBERS[member], "left", now);
            }
            Op::Live { member, event } => {
                let event = match event {
                    0 => Event::StreamOpened,
                    1 => Event::ReportedIdle,
                    _ => Event::ShowedWork,
                };
                team.members.on_life(MEMBERS[member], event);
            }
            Op::Forget { before, max_bytes } => team.forget_resolved(before, max_bytes),
            Op::Join { member, requested } => {
                let name = MEMBERS[member];
                if !team.members.is_active(name) {
                    team.members.join(
                        Name::parse("name", name).unwrap(),
                        "coder".into(),
                        format!("id-{name}-{now}"),
                        format!("token-{name}-{now}"),
                        now + GRACE,
                    );
                }
                team.usage.join(name, requested, 1_000);
            }
            Op::Report {
                member,
                epoch,
                tokens,
            } => {
                let totals = Usage {
                    prompt_tokens: tokens,
                    completion_tokens: tokens / 2,
                    calls: tokens / 100,
                    model_ms: tokens * 3,
                };
                team.usage
                    .report(MEMBERS[member], true, &format!("e{epoch}"), totals);
            }
            Op::SetBudget { member, budget } => {
                team.usage.set_budget(MEMBERS[member], budget);
            }
            Op::Tick => now += 1,
            Op::Commit => {
                for change in team.take_changes() {
                    log.apply(change);
                }
                same(&team, &log.restore(now))?;
            }
        }
    }
    for change in team.take_changes() {
        log.apply(change);
    }
    same(&team, &log.restore(now))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// A team restored from what it committed is the team that committed it.
    #[test]
    fn the_committed_log_rebuilds_the_team(ops in prop::collection::vec(op(), 1..80)) {
        replays(&ops)?;
    }
}
