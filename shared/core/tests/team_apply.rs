//! [`Team::apply`] and [`Team::tick`] stepped with a scripted clock, in
//! memory: the shutdown handshake and its deadline, grace periods, tasks and
//! the holds their plans took, budgets, and who may apply what.
#![allow(clippy::unwrap_used)]

use mesh_core::{
    access::{self, Call, Caller, Person, Refused, Role},
    effect::{Effect, Message, Notice},
    grant::{Grant, Mode},
    lifecycle::{Event, Status},
    names::{Name, RequestId},
    op::*,
    protocol::{Decision, Kind, Opening, Status as RequestStatus},
    refusal::CoreError,
    tasks::{NewTask, TaskStatus},
    team::{Op, Rules, Team},
    usage::Usage,
};

mod common;
use common::admitted;

const GRACE: i64 = 30_000;
const DEADLINE: i64 = 10_000;

fn team() -> Team {
    Team::new(100).with_rules(Rules {
        shutdown_deadline_ms: DEADLINE,
        grace_ms: GRACE,
        ..Rules::default()
    })
}

fn name(name: &str) -> Name {
    Name::parse("name", name).unwrap()
}

fn member(name: &str) -> Caller {
    Caller::Member(name.into())
}

/// `who` joins at `now` and opens its inbox.
fn join(team: &mut Team, who: &str, now: i64) {
    team.members.join(
        name(who),
        "coder".into(),
        format!("id-{who}"),
        format!("hash-{who}"),
        now + GRACE,
    );
    team.members.on_life(who, Event::StreamOpened);
}

fn status(team: &Team, who: &str) -> Status {
    team.members.get(who).unwrap().life.status()
}

fn id(n: u8) -> RequestId {
    RequestId::existing("request_id", &format!("00000000-0000-4000-8000-{n:012}")).unwrap()
}

fn ask_shutdown(team: &mut Team, who: &str, n: u8, now: i64) -> Vec<Effect> {
    let applied = team
        .apply(
            now,
            &admitted(Caller::Operator(Person::operator())),
            RequestShutdown {
                request_id: id(n),
                target: name(who),
                reason: "done".into(),
                deadline_unix_ms: None,
                asked_by: "operator".into(),
            },
        )
        .unwrap();
    assert_eq!(applied.reply, id(n));
    applied.effects
}

fn answer_shutdown(team: &mut Team, who: &str, n: u8, approve: bool, now: i64) -> Vec<Effect> {
    let applied = team
        .apply(
            now,
            &admitted(member(who)),
            RespondShutdown {
                request_id: id(n),
                approve,
                reason: if approve {
                    String::new()
                } else {
                    "busy".into()
                },
            },
        )
        .unwrap();
    assert_eq!(applied.reply, ());
    applied.effects
}

/// The member statuses the watchers are told, in order.
fn member_notices(effects: &[Effect]) -> Vec<(String, Status)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Notify(Notice::Member(view)) => {
                Some((view.member.name.to_string(), view.member.life.status()))
            }
            _ => None,
        })
        .collect()
}

/// The request statuses the watchers are told, in order.
fn request_notices(effects: &[Effect]) -> Vec<RequestStatus> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Notify(Notice::Request(r)) => Some(r.status),
            _ => None,
        })
        .collect()
}

#[test]
fn a_shutdown_request_unanswered_by_its_deadline_expires_and_stops_the_process() {
    let mut team = team();
    join(&mut team, "alice", 0);
    let effects = ask_shutdown(&mut team, "alice", 1, 1_000);
    assert!(matches!(
        &effects[0],
        Effect::Deliver { from, to, message: Message::ShutdownRequest { deadline_unix_ms, .. } }
            if from == "lead" && to == &["alice"] && *deadline_unix_ms == 1_000 + DEADLINE
    ));
    assert_eq!(request_notices(&effects), vec![RequestStatus::Pending]);
    assert_eq!(
        member_notices(&effects),
        vec![("alice".into(), Status::ShuttingDown)]
    );
    assert_eq!(team.next_tick(), Some(1_000 + DEADLINE));
    assert!(team.tick(1_000 + DEADLINE - 1).is_empty(), "not yet");
    let effects = team.tick(1_000 + DEADLINE);
    assert_eq!(request_notices(&effects), vec![RequestStatus::Expired]);
    assert_eq!(
        member_notices(&effects),
        vec![("alice".into(), Status::Working)],
        "no longer shutting down"
    );
    assert_eq!(effects.last(), Some(&Effect::StopChild("alice".into())));
    assert!(team.tick(1_000 + DEADLINE + 1).is_empty(), "expired once");
    assert_eq!(team.next_tick(), None);
}

#[test]
fn a_teammate_that_agrees_terminates_and_the_team_hears_of_it_once() {
    let mut team = team();
    join(&mut team, "alice", 0);
    join(&mut team, "bob", 0);
    ask_shutdown(&mut team, "alice", 1, 1);
    let effects = answer_shutdown(&mut team, "alice", 1, true, 2);
    assert!(matches!(
        &effects[0],
        Effect::Deliver { from, to, message: Message::ShutdownResponse { approve: true, .. } }
            if from == "alice" && to == &["lead"]
    ));
    assert_eq!(request_notices(&effects), vec![RequestStatus::Approved]);
    assert!(effects.contains(&Effect::CloseInbox("alice".into())));
    assert_eq!(
        member_notices(&effects),
        vec![("alice".into(), Status::Terminated)]
    );
    assert_eq!(
        effects.last(),
        Some(&Effect::Announce {
            name: "alice".into(),
            reason: "shut down on request".into()
        })
    );
    assert_eq!(team.members.by_token_hash("hash-alice"), None);
    assert_eq!(team.members.by_retired_hash("hash-alice"), Some("alice"));
    assert_eq!(team.members.active(), 1);
    // A retry of the answer (its reply was lost) changes nothing.
    assert!(answer_shutdown(&mut team, "alice", 1, true, 3).is_empty());
}

#[test]
fn a_teammate_that_refuses_is_working_again_and_a_second_answer_is_refused() {
    let mut team = team();
    join(&mut team, "alice", 0);
    ask_shutdown(&mut team, "alice", 1, 1);
    assert_eq!(status(&team, "alice"), Status::ShuttingDown);
    let effects = answer_shutdown(&mut team, "alice", 1, false, 2);
    assert_eq!(request_notices(&effects), vec![RequestStatus::Rejected]);
    assert_eq!(status(&team, "alice"), Status::Working);
    let flipped = team.apply(
        3,
        &admitted(member("alice")),
        RespondShutdown {
            request_id: id(1),
            approve: true,
            reason: String::new(),
        },
    );
    assert!(
        matches!(flipped, Err(CoreError::Transition(_))),
        "{flipped:?}"
    );
    assert_eq!(team.next_tick(), None, "no deadline left");
}

#[test]
fn a_shutdown_is_asked_of_an_active_member_by_a_deadline_still_ahead() {
    let mut team = team();
    join(&mut team, "alice", 0);
    let ask = |team: &mut Team, target: &str, deadline| {
        team.apply(
            100,
            &admitted(Caller::Operator(Person::operator())),
            RequestShutdown {
                request_id: RequestId::generate(),
                target: name(target),
                reason: String::new(),
                deadline_unix_ms: deadline,
                asked_by: "operator".into(),
            },
        )
    };
    assert!(
        matches!(ask(&mut team, "alice", Some(100)), Err(CoreError::Invalid(e)) if e.to_string().contains("deadline_unix_ms")),
    );
    assert!(
        matches!(ask(&mut team, "zoe", None), Err(CoreError::Invalid(e)) if e.to_string().contains("target")),
    );
    team.apply(
        101,
        &admitted(member("alice")),
        Leave {
            reason: "bye".into(),
        },
    )
    .unwrap();
    assert!(matches!(
        ask(&mut team, "alice", None),
        Err(CoreError::Conflict(m)) if m.contains("already terminated")
    ));
}

#[test]
fn grace_periods_lapse_together_and_a_connected_member_stays() {
    let mut team = team();
    // carol joins and never opens her inbox; dan lost his stream.
    team.members.join(
        name("carol"),
        "coder".into(),
        "id-carol".into(),
        "hash-carol".into(),
        GRACE,
    );
    join(&mut team, "dan", 0);
    join(&mut team, "erin", 0);
    team.members.on_life(
        "dan",
        Event::StreamLost {
            grace_until: GRACE + 50,
        },
    );
    assert_eq!(team.next_tick(), Some(GRACE));
    assert!(team.tick(GRACE - 101).is_empty(), "none ends within 100 ms");
    let effects = team.tick(GRACE);
    let announced: Vec<_> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Announce { name, reason } => Some((name.as_str(), reason.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        announced,
        vec![
            ("carol", "disconnected for longer than the 30s grace period"),
            ("dan", "disconnected for longer than the 30s grace period"),
        ],
        "dan's period, 50 ms after carol's, ends with hers"
    );
    assert_eq!(status(&team, "erin"), Status::Working);
    assert_eq!(team.next_tick(), None);
}

#[test]
fn a_member_that_comes_back_within_its_grace_is_not_terminated() {
    let mut team = team();
    join(&mut team, "alice", 0);
    team.members
        .on_life("alice", Event::StreamLost { grace_until: 5_000 });
    assert_eq!(status(&team, "alice"), Status::Disconnected);
    team.members.on_life("alice", Event::StreamOpened);
    assert!(team.tick(10_000).is_empty());
    assert_eq!(status(&team, "alice"), Status::Working);
}

fn create(team: &mut Team, task_id: &str, blocked_by: &[&str], now: i64) -> Vec<Effect> {
    team.apply(
        now,
        &admitted(Caller::Operator(Person::operator())),
        CreateTask {
            task_id: task_id.into(),
            task: NewTask {
                subject: task_id.into(),
                blocked_by: blocked_by.iter().map(|s| (*s).to_owned()).collect(),
                ..NewTask::default()
            },
        },
    )
    .unwrap()
    .effects
}

fn claimable_to(effects: &[Effect]) -> Vec<(Vec<String>, String)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Deliver {
                to,
                message: Message::TaskClaimable(task),
                ..
            } => Some((to.clone(), task.task_id.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn idle_members_without_a_task_hear_of_claimable_work_once_each() {
    let mut team = team();
    for who in ["alice", "bob", "carol"] {
        join(&mut team, who, 0);
    }
    let t1 = create(&mut team, "t1", &[], 1);
    assert!(claimable_to(&t1).is_empty(), "nobody is idle");
    // bob claims t1; alice and bob report idle.
    let claimed = team
        .apply(2, &admitted(member("bob")), ClaimTask { task_id: None })
        .unwrap();
    assert!(claimed.reply.task_id == "t1" && claimed.reply.owner == "bob");
    let idle = team
        .apply(
            3,
            &admitted(member("alice")),
            ReportIdle {
                reason: "nothing to do".into(),
            },
        )
        .unwrap();
    assert!(matches!(
        &idle.effects[0],
        Effect::Deliver { from, to, message: Message::Idle { reason } }
            if from == "alice" && to == &["lead"] && reason == "nothing to do"
    ));
    assert!(claimable_to(&idle.effects).is_empty(), "no task to claim");
    team.apply(
        4,
        &admitted(member("bob")),
        ReportIdle {
            reason: String::new(),
        },
    )
    .unwrap();
    // t3 waits on t2: only t2 is announced, to alice (bob owns t1).
    let t2 = create(&mut team, "t2", &[], 5);
    assert_eq!(
        claimable_to(&t2),
        vec![(vec!["alice".to_owned()], "t2".to_owned())]
    );
    assert!(claimable_to(&create(&mut team, "t3", &["t2"], 6)).is_empty());
    // alice claims t2 (working again), completes it: t3 is claimable, and
    // no one but bob (who owns t1)... so no one idle hears it but alice.
    let claimed = team
        .apply(7, &admitted(member("alice")), ClaimTask { task_id: None })
        .unwrap();
    assert_eq!(
        member_notices(&claimed.effects),
        vec![("alice".into(), Status::Working)]
    );
    team.apply(
        8,
        &admitted(member("alice")),
        ReportIdle {
            reason: String::new(),
        },
    )
    .unwrap();
    let done = team
        .apply(
            9,
            &admitted(member("alice")),
            CompleteTask {
                task_id: "t2".into(),
                completion: mesh_core::tasks::Completion::summary("done"),
            },
        )
        .unwrap();
    assert_eq!(
        claimable_to(&done.effects),
        vec![(vec!["alice".to_owned()], "t3".to_owned())]
    );
    // bob leaves: t1 goes back and alice (idle, no task) hears of it.
    let left = team
        .apply(
            10,
            &admitted(member("bob")),
            Leave {
                reason: String::new(),
            },
        )
        .unwrap();
    assert_eq!(
        team.tasks.get("t1").map(|t| t.status),
        Some(TaskStatus::Pending)
    );
    assert_eq!(
        claimable_to(&left.effects),
        vec![(vec!["alice".to_owned()], "t1".to_owned())]
    );
}

#[test]
fn completing_the_task_a_plan_was_approved_for_ends_its_hold_and_its_grant() {
    let mut team = team();
    join(&mut team, "alice", 0);
    create(&mut team, "t1", &[], 1);
    team.apply(2, &admitted(member("alice")), ClaimTask { task_id: None })
        .unwrap();
    team.requests
        .open(
            Opening {
                id: id(1),
                kind: Kind::PlanApproval,
                sender: "alice".into(),
                target: "lead".into(),
                payload_json: r#"{"plan":{"summary":"s","files":["src/a.rs"],"task_id":"t1"}}"#
                    .into(),
                deadline_unix_ms: None,
            },
            3,
        )
        .unwrap();
    team.answer_plan(
        &id(1),
        Decision {
            approve: true,
            feedback: String::new(),
            grant: Some(Grant::of_plan(Mode::AcceptEdits)),
        },
        4,
    )
    .unwrap();
    team.members.set_mode("alice", Mode::AcceptEdits);
    let done = team
        .apply(
            5,
            &admitted(member("alice")),
            CompleteTask {
                task_id: "t1".into(),
                completion: mesh_core::tasks::Completion::summary("done"),
            },
        )
        .unwrap();
    let view = done
        .effects
        .iter()
        .find_map(|e| match e {
            Effect::Notify(Notice::Member(view)) => Some(view.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(view.member.mode, Mode::Plan);
    assert!(view.holds.is_empty());
    assert!(team.holds.get("alice").is_none());
    // A retried completion changes nothing and says nothing.
    let again = team
        .apply(
            6,
            &admitted(member("alice")),
            CompleteTask {
                task_id: "t1".into(),
                completion: mesh_core::tasks::Completion::summary("done"),
            },
        )
        .unwrap();
    assert!(again.effects.is_empty());
    assert!(again.changes.is_empty());
}

#[test]
fn withdrawing_a_task_expires_its_plans_ends_its_grant_and_tells_its_owner() {
    let mut team = team();
    join(&mut team, "alice", 0);
    join(&mut team, "bob", 0);
    create(&mut team, "t1", &[], 1);
    create(&mut team, "t2", &[], 1);
    team.apply(
        2,
        &admitted(member("alice")),
        ClaimTask {
            task_id: Some("t1".into()),
        },
    )
    .unwrap();
    team.apply(
        2,
        &admitted(member("bob")),
        ClaimTask {
            task_id: Some("t2".into()),
        },
    )
    .unwrap();
    let plan = |n: u8, sender: &str, task: &str| Opening {
        id: id(n),
        kind: Kind::PlanApproval,
        sender: sender.into(),
        target: "lead".into(),
        payload_json: format!(
            r#"{{"plan":{{"summary":"s","files":["src/a.rs"],"task_id":"{task}"}}}}"#
        ),
        deadline_unix_ms: None,
    };
    // Alice's plan for t1 approved, a second one pending; bob's for t2 pending.
    team.requests.open(plan(1, "alice", "t1"), 3).unwrap();
    team.answer_plan(
        &id(1),
        Decision {
            approve: true,
            feedback: String::new(),
            grant: Some(Grant::of_plan(Mode::AcceptEdits)),
        },
        4,
    )
    .unwrap();
    team.members.set_mode("alice", Mode::AcceptEdits);
    team.requests.open(plan(2, "alice", "t1"), 5).unwrap();
    team.requests.open(plan(3, "bob", "t2"), 5).unwrap();

    let withdraw = |team: &mut Team, task: &str, now| {
        team.apply(
            now,
            &admitted(Caller::Operator(Person::operator())),
            WithdrawTask {
                task_id: task.into(),
                reason: "not needed".into(),
                by: "operator carol".into(),
            },
        )
    };
    let done = withdraw(&mut team, "t1", 6).unwrap();
    assert_eq!(team.tasks.get("t1").unwrap().status, TaskStatus::Withdrawn);
    // Alice's pending plan of t1 expired, saying why; bob's is untouched.
    assert_eq!(request_notices(&done.effects), [RequestStatus::Expired]);
    let expired = team.requests.get(&id(2)).unwrap();
    assert_eq!(expired.status, RequestStatus::Expired);
    assert!(expired
        .feedback
        .contains("withdrawn by operator carol: not needed"));
    assert_eq!(
        team.requests.get(&id(3)).unwrap().status,
        RequestStatus::Pending
    );
    // Her grant for it ended, and she heard why.
    assert!(team.holds.get("alice").is_none());
    assert_eq!(team.members.get("alice").unwrap().mode, Mode::Plan);
    let told = done.effects.iter().any(|e| {
        matches!(e,
        Effect::Deliver { to, message: Message::Text { content }, .. }
            if to == &["alice".to_owned()] && content.contains("task t1 was withdrawn"))
    });
    assert!(told, "{:?}", done.effects);
    // Ended: not again, and not completed by its owner.
    assert!(withdraw(&mut team, "t1", 7).is_err());
    let complete = team.apply(
        8,
        &admitted(member("alice")),
        CompleteTask {
            task_id: "t1".into(),
            completion: mesh_core::tasks::Completion::summary("done"),
        },
    );
    assert!(complete.is_err());
    // Only the operator withdraws: a member is not let in at its door.
    assert_eq!(<WithdrawTask as Op>::DOORS, Doors::Operator(Role::Reviewer));
    assert!(access::admit(member("bob"), Call::Operator(Role::Viewer)).is_err());
}

#[test]
fn a_budget_is_set_for_a_member_that_joined_and_it_hears_of_it() {
    let mut team = team();
    join(&mut team, "alice", 0);
    let set = |team: &mut Team, who: &str| {
        team.apply(
            1,
            &admitted(Caller::Operator(Person::operator())),
            SetBudget {
                name: name(who),
                token_budget: 500,
            },
        )
    };
    assert!(matches!(set(&mut team, "zoe"), Err(CoreError::NotFound(_))));
    let applied = set(&mut team, "alice").unwrap();
    assert!(matches!(
        &applied.effects[0],
        Effect::Deliver { to, message: Message::BudgetChanged { token_budget: 500 }, .. }
            if to == &["alice"]
    ));
    assert!(!applied.changes.is_empty(), "the budget is kept");
    let report = team
        .apply(
            2,
            &admitted(member("alice")),
            ReportUsage {
                epoch: "e1".into(),
                totals: Usage {
                    prompt_tokens: 10,
                    ..Usage::default()
                },
            },
        )
        .unwrap();
    assert!(report.reply.total.prompt_tokens == 10 && report.reply.token_budget == 500);
    let retried = team
        .apply(
            3,
            &admitted(member("alice")),
            ReportUsage {
                epoch: "e1".into(),
                totals: Usage {
                    prompt_tokens: 10,
                    ..Usage::default()
                },
            },
        )
        .unwrap();
    assert!(retried.effects.is_empty(), "a retried report says nothing");
}

#[test]
fn each_op_is_let_in_only_for_the_callers_its_door_admits() {
    let mut team = team();
    join(&mut team, "alice", 0);
    create(&mut team, "t1", &[], 1);
    // Where each op comes in, and who the one admission lets in there.
    let claim = <ClaimTask as Op>::DOORS;
    let new_task = <CreateTask as Op>::DOORS;
    assert!(claim.open(Call::Teammate("ClaimTask")) && !claim.open(Call::Operator(Role::Viewer)));
    assert!(
        new_task.open(Call::Operator(Role::Reviewer))
            && !new_task.open(Call::Teammate("CreateTask"))
    );
    for caller in [Caller::Anonymous, Caller::Stranger] {
        assert!(matches!(
            access::admit(caller.clone(), Call::Teammate("ClaimTask")),
            Err(Refused::Unauthenticated(_))
        ));
        assert!(matches!(
            access::admit(caller, Call::Operator(Role::Viewer)),
            Err(Refused::Unauthenticated(_))
        ));
    }
    for caller in [Caller::Operator(Person::operator()), Caller::Joiner] {
        assert!(matches!(
            access::admit(caller, Call::Teammate("ClaimTask")),
            Err(Refused::PermissionDenied(_))
        ));
    }
    for caller in [member("alice"), Caller::Joiner] {
        assert!(matches!(
            access::admit(caller, Call::Operator(Role::Viewer)),
            Err(Refused::PermissionDenied(_))
        ));
    }
    let alice = access::admit(member("alice"), Call::Teammate("ClaimTask")).unwrap();
    team.apply(2, &alice, ClaimTask { task_id: None }).unwrap();
    let operator = access::admit(
        Caller::Operator(Person::operator()),
        Call::Operator(Role::Admin),
    )
    .unwrap();
    team.apply(
        2,
        &operator,
        CreateTask {
            task_id: "t9".into(),
            task: NewTask {
                subject: "s".into(),
                ..NewTask::default()
            },
        },
    )
    .unwrap();
    assert_eq!(
        team.tasks.get("t1").map(|t| t.status),
        Some(TaskStatus::Claimed)
    );
}
