//! The result review on a [`Team`], in memory: a result opens pending, an
//! approval leaves it pending and asks the runtime to land it, the landing
//! decides it (the task completed with it, or the conflicting paths sent
//! back), a landing survives the member leaving and a restart, and the
//! policy checks what would land.
#![allow(clippy::unwrap_used)]

use mesh_core::{
    access::Caller,
    effect::{Effect, Message},
    lifecycle::Event,
    names::{Name, RequestId},
    op::*,
    policy::Policy,
    protocol::Status,
    refusal::CoreError,
    result::{FileChange, Landing, WorkResult},
    tasks::{NewTask, TaskStatus},
    team::{Approval, Rules, Team},
};

mod common;
use common::admitted;

fn team(approval: Approval) -> Team {
    Team::new(100)
        .with_rules(Rules {
            repo: true,
            review: mesh_core::tasks::Review::Both,
            ..Rules::default()
        })
        .with_approval(approval)
}

fn id(n: u8) -> RequestId {
    RequestId::existing("request_id", &format!("00000000-0000-4000-8000-{n:012}")).unwrap()
}

/// `who` joins and claims task `task`.
fn claimed(team: &mut Team, who: &str, task: &str) {
    team.members.join(
        Name::parse("name", who).unwrap(),
        "coder".into(),
        format!("id-{who}"),
        format!("hash-{who}"),
        30_000,
    );
    team.members.on_life(who, Event::StreamOpened);
    team.apply(
        1,
        &admitted(Caller::Operator(mesh_core::access::Person::operator())),
        CreateTask {
            task_id: task.into(),
            task: NewTask {
                subject: task.into(),
                ..Default::default()
            },
        },
    )
    .unwrap();
    team.apply(
        2,
        &admitted(Caller::Member(who.into())),
        ClaimTask {
            task_id: Some(task.into()),
        },
    )
    .unwrap();
}

fn result(task: &str, paths: &[&str]) -> Box<WorkResult> {
    Box::new(WorkResult {
        task_id: task.into(),
        base: "b".repeat(40),
        commit: "c".repeat(40),
        summary: "did it".into(),
        diff: "diff".into(),
        test_output: String::new(),
        files: paths
            .iter()
            .map(|p| FileChange {
                path: (*p).into(),
                added: 3,
                removed: 1,
                binary: false,
            })
            .collect(),
    })
}

fn submit(team: &mut Team, who: &str, n: u8, task: &str, paths: &[&str]) -> Vec<Effect> {
    let applied = team
        .apply(
            10,
            &admitted(Caller::Member(who.into())),
            SubmitResult {
                request_id: id(n),
                result: result(task, paths),
                supersedes: None,
            },
        )
        .unwrap();
    assert_eq!(applied.reply, id(n));
    applied.effects
}

fn landed(team: &mut Team, n: u8, landing: Landing) -> Vec<Effect> {
    team.apply(
        20,
        &admitted(Caller::Lead),
        Landed {
            request_id: id(n),
            landing,
        },
    )
    .unwrap()
    .effects
}

fn decided(effects: &[Effect]) -> Option<&Message> {
    effects.iter().find_map(|e| match e {
        Effect::Deliver { message, .. } if matches!(message, Message::ResultDecided { .. }) => {
            Some(message)
        }
        _ => None,
    })
}

#[test]
fn an_approved_result_is_pending_until_it_lands_then_its_task_is_completed() {
    let mut team = team(Approval::Manual);
    claimed(&mut team, "alice", "t1");
    assert!(!submit(&mut team, "alice", 1, "t1", &["src/a.rs"])
        .iter()
        .any(|e| matches!(e, Effect::Land(_))));
    let approve = ReviewResult {
        request_id: id(1),
        approve: true,
        feedback: String::new(),
        by: "operator".into(),
    };
    let applied = team
        .apply(
            11,
            &admitted(Caller::Operator(mesh_core::access::Person::operator())),
            approve.clone(),
        )
        .unwrap();
    assert!(applied.effects.contains(&Effect::Land(id(1))));
    assert_eq!(team.requests.get(&id(1)).unwrap().status, Status::Pending);
    assert_eq!(team.landings(), vec![id(1)]);
    // A retry lands nothing twice; a rejection now is refused.
    let again = team
        .apply(
            12,
            &admitted(Caller::Operator(mesh_core::access::Person::operator())),
            approve,
        )
        .unwrap();
    assert!(!again.effects.contains(&Effect::Land(id(1))));
    let reject = ReviewResult {
        request_id: id(1),
        approve: false,
        feedback: "no".into(),
        by: "operator".into(),
    };
    assert!(matches!(
        team.apply(13, &admitted(Caller::Operator(mesh_core::access::Person::operator())), reject),
        Err(CoreError::Conflict(m)) if m.contains("being merged")
    ));
    // Alice leaves while it lands: the landing still answers it.
    team.terminate("alice", "left", 14);
    assert_eq!(team.requests.get(&id(1)).unwrap().status, Status::Pending);

    let effects = landed(
        &mut team,
        1,
        Landing::Merged {
            commit: "d".repeat(40),
        },
    );
    assert!(matches!(
        decided(&effects),
        Some(Message::ResultDecided { approve: true, commit, .. }) if commit == &"d".repeat(40)
    ));
    assert_eq!(team.requests.get(&id(1)).unwrap().status, Status::Approved);
    assert!(team.landings().is_empty());
}

#[test]
fn a_conflict_rejects_with_the_paths_and_the_new_head() {
    let mut team = team(Approval::Auto);
    claimed(&mut team, "bob", "t1");
    let effects = submit(&mut team, "bob", 1, "t1", &["README.md"]);
    assert!(effects.contains(&Effect::Land(id(1))), "auto approves");
    let effects = landed(
        &mut team,
        1,
        Landing::Conflict {
            paths: vec!["README.md".into()],
            head: "e".repeat(40),
        },
    );
    match decided(&effects) {
        Some(Message::ResultDecided {
            approve,
            conflicts,
            branch_head,
            feedback,
            ..
        }) => {
            assert!(!approve);
            assert_eq!(conflicts, &["README.md".to_owned()]);
            assert_eq!(branch_head, &"e".repeat(40));
            assert!(feedback.contains("rebase"));
        }
        other => panic!("expected a decision, got {other:?}"),
    }
    assert_eq!(team.requests.get(&id(1)).unwrap().status, Status::Rejected);
    assert_eq!(
        team.tasks.get("t1").unwrap().status,
        TaskStatus::Claimed,
        "the task stays bob's"
    );
    // The revision supersedes it and lands.
    let applied = team
        .apply(
            30,
            &admitted(Caller::Member("bob".into())),
            SubmitResult {
                request_id: id(2),
                result: result("t1", &["README.md"]),
                supersedes: Some(id(1)),
            },
        )
        .unwrap();
    assert!(applied.effects.contains(&Effect::Land(id(2))));
    landed(
        &mut team,
        2,
        Landing::Merged {
            commit: "f".repeat(40),
        },
    );
    assert_eq!(team.tasks.get("t1").unwrap().status, TaskStatus::Completed);
}

#[test]
fn a_merge_found_after_a_restart_answers_a_result_whose_approval_was_lost() {
    let mut team = team(Approval::Manual);
    claimed(&mut team, "alice", "t1");
    submit(&mut team, "alice", 1, "t1", &["a"]);
    assert!(team.landings().is_empty());
    // A failure answers only a result being landed ...
    landed(&mut team, 1, Landing::Failed("x".into()));
    assert_eq!(team.requests.get(&id(1)).unwrap().status, Status::Pending);
    // ... a merge the branch has answers it whatever its history says.
    landed(
        &mut team,
        1,
        Landing::Merged {
            commit: "d".repeat(40),
        },
    );
    assert_eq!(team.requests.get(&id(1)).unwrap().status, Status::Approved);
}

#[test]
fn the_policy_rejects_a_result_outside_the_grant_and_without_a_repo_there_are_none() {
    let policy = Policy::parse("max_changed_lines = 100").unwrap();
    let mut team = team(Approval::Policy(policy));
    claimed(&mut team, "alice", "t1");
    team.holds
        .hold("alice", vec!["docs/**".into()], "t1".into());
    submit(&mut team, "alice", 1, "t1", &["docs/a.md", "src/lib.rs"]);
    let request = team.requests.get(&id(1)).unwrap();
    assert_eq!(request.status, Status::Rejected);
    assert!(
        request.feedback.contains("src/lib.rs"),
        "{}",
        request.feedback
    );
    assert_eq!(request.result_payload().outside_grant, vec!["src/lib.rs"]);

    let mut plain = Team::new(10);
    claimed(&mut plain, "bob", "t2");
    let refused = plain.apply(
        10,
        &admitted(Caller::Member("bob".into())),
        SubmitResult {
            request_id: id(3),
            result: result("t2", &["a"]),
            supersedes: None,
        },
    );
    assert!(matches!(refused, Err(CoreError::Conflict(m)) if m.contains("--repo")));
    let refused = team.apply(
        11,
        &admitted(Caller::Member("alice".into())),
        CompleteTask {
            task_id: "t1".into(),
            completion: mesh_core::tasks::Completion::summary("done"),
        },
    );
    assert!(matches!(refused, Err(CoreError::Conflict(m)) if m.contains("SubmitResult")));
}
