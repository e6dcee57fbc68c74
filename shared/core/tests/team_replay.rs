//! Replay, for the core's [`Team`]: arbitrary sequences of ops applied as
//! the lead's hub applies them ([`Team::apply`], for the callers whose door
//! they come in at), of what the runtime tells the team (an inbox stream
//! opening or lost), and of time passing ([`Team::tick`]: deadlines,
//! grace periods) and retention, under a manual or an automatic approval
//! mode. What each apply returns as `changes` (and what `take_changes`
//! gathers at a commit) goes to a log at arbitrary points, as the lead's
//! SQLite store keeps it; after every commit, a team restored from the log
//! is the live team: the same members in join order (each disconnected, as
//! a restored member is, or terminated), the same requests and tasks in the
//! same order, the same holds, the same usage accounts.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

mod common;
use common::admitted;

use mesh_core::{
    access::{Admitted, Caller},
    grant::{Grant, Mode},
    holds::Hold,
    lifecycle::{Event, Status},
    members::{MemberRecord, Members},
    names::{Name, RequestId},
    op::*,
    plan::Plan,
    protocol::Request,
    tasks::{NewTask, Task, TaskBoard},
    team::{Approval, Change, Op, Rules, Team},
    usage::{Account, Usage},
};

use proptest::prelude::*;

const MEMBERS: [&str; 3] = ["alice", "bob", "carol"];
const FILES: [&str; 3] = ["src/a.rs", "src/b.rs", "docs/*.md"];

/// One thing that happens to a lead's team, with values from small pools.
#[derive(Debug, Clone)]
enum Step {
    /// A member joins asking for a budget (0: none of its own).
    Join { member: usize, requested: u64 },
    /// The runtime: a member's inbox stream opened.
    Connect { member: usize },
    /// The runtime: a member's inbox stream was lost.
    Disconnect { member: usize },
    /// A member submits a plan (for its claimed task, if any), maybe
    /// revising an earlier one.
    Plan {
        member: usize,
        file: usize,
        id: u8,
        supersedes: Option<u8>,
    },
    /// The operator approves or rejects plan `id`.
    Review { id: u8, approve: bool },
    /// A member asks to run a command.
    Permission { member: usize, id: u8 },
    /// The operator answers permission `id`.
    Allow { id: u8, approve: bool },
    /// The operator creates a task (blocked by an earlier one, maybe).
    CreateTask { blocked: Option<usize> },
    /// A member claims the oldest claimable task.
    Claim { member: usize },
    /// A member completes its claimed task.
    Complete { member: usize },
    /// A member reports idle.
    Idle { member: usize },
    /// A member leaves.
    Leave { member: usize },
    /// The operator asks a member to shut down, by a deadline or the default.
    AskShutdown { member: usize, id: u8, soon: bool },
    /// A member answers shutdown request `id`.
    AnswerShutdown {
        member: usize,
        id: u8,
        approve: bool,
    },
    /// A member reports what process `epoch` used so far (cumulative).
    Report {
        member: usize,
        epoch: u8,
        tokens: u64,
    },
    /// The operator sets a member's budget.
    SetBudget { member: usize, budget: u64 },
    /// Resolved requests are forgotten.
    Forget { before: i64, max_bytes: usize },
    /// Time passes by this much, and the team does what is due.
    Tick { by: i64 },
    /// The lead commits.
    Commit,
}

fn step() -> impl Strategy<Value = Step> {
    let member = || 0..MEMBERS.len();
    prop_oneof![
        2 => (member(), prop_oneof![Just(0u64), Just(500)])
            .prop_map(|(member, requested)| Step::Join { member, requested }),
        2 => member().prop_map(|member| Step::Connect { member }),
        1 => member().prop_map(|member| Step::Disconnect { member }),
        3 => (member(), 0..FILES.len(), 0u8..6, proptest::option::of(0u8..6))
            .prop_map(|(member, file, id, supersedes)| Step::Plan { member, file, id, supersedes }),
        3 => (0u8..6, any::<bool>()).prop_map(|(id, approve)| Step::Review { id, approve }),
        1 => (member(), 6u8..9).prop_map(|(member, id)| Step::Permission { member, id }),
        1 => (6u8..9, any::<bool>()).prop_map(|(id, approve)| Step::Allow { id, approve }),
        2 => proptest::option::of(0usize..4).prop_map(|blocked| Step::CreateTask { blocked }),
        2 => member().prop_map(|member| Step::Claim { member }),
        2 => member().prop_map(|member| Step::Complete { member }),
        1 => member().prop_map(|member| Step::Idle { member }),
        1 => member().prop_map(|member| Step::Leave { member }),
        1 => (member(), 9u8..12, any::<bool>())
            .prop_map(|(member, id, soon)| Step::AskShutdown { member, id, soon }),
        1 => (member(), 9u8..12, any::<bool>())
            .prop_map(|(member, id, approve)| Step::AnswerShutdown { member, id, approve }),
        2 => (member(), 0u8..3, 0u64..1_000)
            .prop_map(|(member, epoch, tokens)| Step::Report { member, epoch, tokens }),
        1 => (member(), prop_oneof![Just(0u64), Just(2_000)])
            .prop_map(|(member, budget)| Step::SetBudget { member, budget }),
        1 => (0i64..40_000, prop_oneof![Just(0usize), Just(200), Just(usize::MAX)])
            .prop_map(|(before, max_bytes)| Step::Forget { before, max_bytes }),
        2 => prop_oneof![Just(1i64), Just(5_000), Just(GRACE)].prop_map(|by| Step::Tick { by }),
        3 => Just(Step::Commit),
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
                Some(row) => *row = *task,
                None => self.tasks.push(*task),
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
const GRACE: i64 = 30_000;

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

/// The caller a member's ops come in as.
fn member(i: usize) -> Caller {
    Caller::Member(MEMBERS[i].into())
}

/// The op a step makes, and who makes it (`None`: the step is not an op).
/// An op made by a step, to be applied for an admitted caller: what the
/// store must keep of it.
type Run = Box<
    dyn FnOnce(&mut Team, i64, &Admitted) -> Result<Vec<Change>, mesh_core::refusal::CoreError>,
>;

/// `op`, to be applied later.
fn run<O: Op + 'static>(op: O) -> Run {
    Box::new(move |team, now, caller| team.apply(now, caller, op).map(|a| a.changes))
}

fn op_of(step: &Step, team: &Team, task_ids: &mut Vec<String>, now: i64) -> Option<(Caller, Run)> {
    let name = |i: usize| Name::parse("name", MEMBERS[i]).unwrap();
    Some(match *step {
        Step::Join { member, requested } => (
            Caller::Joiner,
            run(Join {
                name: name(member),
                role: "coder".into(),
                token_budget: requested,
                member_id: format!("id-{member}-{now}"),
                session_token: format!("token-{member}-{now}"),
                sandbox: None,
                decoding: None,
            }),
        ),
        Step::Plan {
            member: m,
            file,
            id,
            supersedes,
        } => {
            let task_id = team
                .tasks
                .list(Some(mesh_core::tasks::TaskStatus::Claimed))
                .into_iter()
                .find(|t| t.owner == MEMBERS[m])
                .map(|t| t.task_id.clone())
                .unwrap_or_default();
            let plan = Plan {
                summary: "s".into(),
                files: vec![FILES[file].into()],
                task_id,
                ..Plan::default()
            };
            (
                member(m),
                run(SubmitPlan {
                    request_id: request_id(id),
                    plan,
                    supersedes: supersedes.map(request_id),
                }),
            )
        }
        Step::Review { id, approve } => {
            let verdict = if approve {
                PlanVerdict::Approve {
                    grant: Grant::of_plan(Mode::AcceptEdits),
                    feedback: String::new(),
                    allow_overlap: id % 2 == 0,
                }
            } else {
                PlanVerdict::Reject {
                    feedback: "no".into(),
                }
            };
            (
                Caller::Operator(mesh_core::access::Person::operator()),
                run(ReviewPlan {
                    request_id: request_id(id),
                    verdict,
                    by: "operator".into(),
                }),
            )
        }
        Step::Permission { member: m, id } => (
            member(m),
            run(RequestPermission {
                request_id: request_id(id),
                tool: "run_command".into(),
                args_json: "{}".into(),
                path: None,
            }),
        ),
        Step::Allow { id, approve } => (
            Caller::Operator(mesh_core::access::Person::operator()),
            run(ReviewPermission {
                request_id: request_id(id),
                approve,
                feedback: if approve { String::new() } else { "no".into() },
                by: "operator".into(),
            }),
        ),
        Step::CreateTask { blocked } => {
            let task_id = format!("t{}", task_ids.len());
            task_ids.push(task_id.clone());
            let blocked_by = blocked
                .and_then(|i| task_ids.get(i).cloned())
                .into_iter()
                .collect();
            (
                Caller::Operator(mesh_core::access::Person::operator()),
                run(CreateTask {
                    task_id: task_id.clone(),
                    task: NewTask {
                        subject: task_id,
                        blocked_by,
                        ..NewTask::default()
                    },
                }),
            )
        }
        Step::Claim { member: m } => (member(m), run(ClaimTask { task_id: None })),
        Step::Complete { member: m } => {
            let task_id = team
                .tasks
                .list(Some(mesh_core::tasks::TaskStatus::Claimed))
                .into_iter()
                .find(|t| t.owner == MEMBERS[m])
                .map(|t| t.task_id.clone())?;
            (
                member(m),
                run(CompleteTask {
                    task_id,
                    completion: mesh_core::tasks::Completion::summary("done"),
                }),
            )
        }
        Step::Idle { member: m } => (
            member(m),
            run(ReportIdle {
                reason: String::new(),
            }),
        ),
        Step::Leave { member: m } => (
            member(m),
            run(Leave {
                reason: "bye".into(),
            }),
        ),
        Step::AskShutdown {
            member: m,
            id,
            soon,
        } => (
            Caller::Operator(mesh_core::access::Person::operator()),
            run(RequestShutdown {
                request_id: request_id(id),
                target: name(m),
                reason: String::new(),
                deadline_unix_ms: soon.then_some(now + 2),
                asked_by: "operator".into(),
            }),
        ),
        Step::AnswerShutdown {
            member: m,
            id,
            approve,
        } => (
            member(m),
            run(RespondShutdown {
                request_id: request_id(id),
                approve,
                reason: String::new(),
            }),
        ),
        Step::Report {
            member: m,
            epoch,
            tokens,
        } => (
            member(m),
            run(ReportUsage {
                epoch: format!("e{epoch}"),
                totals: Usage {
                    prompt_tokens: tokens,
                    completion_tokens: tokens / 2,
                    calls: tokens / 100,
                    model_ms: tokens * 3,
                },
            }),
        ),
        Step::SetBudget { member: m, budget } => (
            Caller::Operator(mesh_core::access::Person::operator()),
            run(SetBudget {
                name: name(m),
                token_budget: budget,
            }),
        ),
        Step::Connect { .. }
        | Step::Disconnect { .. }
        | Step::Forget { .. }
        | Step::Tick { .. }
        | Step::Commit => return None,
    })
}

/// Runs `steps` on a team as the lead's hub would, logging every change
/// as the store would write it, and checks a team restored from the log at
/// each commit and at the end.
fn replays(steps: &[Step], auto: bool) -> Result<(), TestCaseError> {
    let approval = if auto {
        Approval::Auto
    } else {
        Approval::Manual
    };
    let mut team = Team::new(TaskBoard::DEFAULT_MAX_TASKS)
        .with_rules(Rules {
            grace_ms: GRACE,
            shutdown_deadline_ms: 10_000,
            ..Rules::default()
        })
        .with_approval(approval);
    let mut log = Log::default();
    let mut now = 1;
    let mut task_ids = Vec::new();
    for step in steps {
        if let Some((caller, op)) = op_of(step, &team, &mut task_ids, now) {
            // Refused ops change nothing the store must keep.
            if let Ok(changes) = op(&mut team, now, &admitted(caller)) {
                for change in changes {
                    log.apply(change);
                }
            }
            // A session with no member (it left) is placed by the hub, not
            // here: a caller that is no member any more is refused above.
            continue;
        }
        match *step {
            Step::Connect { member } => {
                team.members.on_life(MEMBERS[member], Event::StreamOpened);
            }
            Step::Disconnect { member } => {
                team.members.on_life(
                    MEMBERS[member],
                    Event::StreamLost {
                        grace_until: now + GRACE,
                    },
                );
            }
            Step::Forget { before, max_bytes } => team.forget_resolved(before, max_bytes),
            Step::Tick { by } => {
                now += by;
                team.tick(now);
            }
            _ => {
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
    fn the_committed_log_rebuilds_the_team(
        steps in prop::collection::vec(step(), 1..100),
        auto in any::<bool>(),
    ) {
        replays(&steps, auto)?;
    }
}

/// Lists answer pages of what the team holds, and say whether more follow.
#[test]
fn a_list_is_paged_by_its_keys() {
    let mut team = Team::new(TaskBoard::DEFAULT_MAX_TASKS);
    for i in 0..5 {
        team.apply(
            i,
            &admitted(Caller::Operator(mesh_core::access::Person::operator())),
            CreateTask {
                task_id: format!("t{i}"),
                task: NewTask {
                    subject: format!("t{i}"),
                    ..NewTask::default()
                },
            },
        )
        .unwrap();
    }
    let page = |after| PageAsk { after, size: 2 };
    let first = team.list_tasks(None, page(None));
    assert!(first.more);
    let ids = |l: &mesh_core::team::Listed<Task>| {
        l.entries
            .iter()
            .map(|(_, t)| t.task_id.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&first), vec!["t0", "t1"]);
    let last_key = first.entries.last().map(|(k, _)| *k);
    let second = team.list_tasks(None, page(last_key));
    assert_eq!(ids(&second), vec!["t2", "t3"]);
    let third = team.list_tasks(None, page(second.entries.last().map(|(k, _)| *k)));
    assert_eq!(ids(&third), vec!["t4"]);
    assert!(!third.more);
}
