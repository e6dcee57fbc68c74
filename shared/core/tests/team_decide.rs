//! `op::Decide` on a [`Team`], in memory: the operator decides a request by
//! its id alone, and the request's kind says which review it is; what a
//! kind does not take (a grant on a permission, a shutdown at all) is
//! refused and changes nothing.
#![allow(clippy::unwrap_used)]

use mesh_core::{
    access::{self, Call, Caller},
    grant::{Grant, Mode},
    lifecycle::Event,
    names::{Name, RequestId},
    op::*,
    plan::Plan,
    protocol::{Kind, Request, Status},
    refusal::CoreError,
    result::WorkResult,
    tasks::NewTask,
    team::{Approval, Op, Rules, Team},
};

mod common;
use common::admitted;

fn id(n: u8) -> RequestId {
    RequestId::existing("request_id", &format!("00000000-0000-4000-8000-{n:012}")).unwrap()
}

fn team() -> Team {
    let mut team = Team::new(100)
        .with_rules(Rules {
            repo: true,
            ..Rules::default()
        })
        .with_approval(Approval::Manual);
    team.members.join(
        Name::parse("name", "bob").unwrap(),
        "coder".into(),
        "id-bob".into(),
        "hash-bob".into(),
        30_000,
    );
    team.members.on_life("bob", Event::StreamOpened);
    team
}

fn bob() -> Caller {
    Caller::Member("bob".into())
}

fn decide(request_id: RequestId, approve: bool, feedback: &str) -> Decide {
    Decide {
        request_id,
        approve,
        feedback: feedback.into(),
        grant: None,
        allow_overlap: false,
        by: "operator (test)".into(),
        kind: None,
    }
}

fn request(team: &Team, n: u8) -> Request {
    team.requests.get(&id(n)).cloned().unwrap()
}

fn submit_plan(team: &mut Team, n: u8) {
    team.apply(
        1,
        &admitted(bob()),
        SubmitPlan {
            request_id: id(n),
            plan: Plan {
                summary: "add a test".into(),
                files: vec!["src/lib.rs".into()],
                ..Plan::default()
            },
            supersedes: None,
        },
    )
    .unwrap();
}

#[test]
fn a_plan_is_approved_with_the_grant_given_or_its_own_files_and_rejected_with_feedback() {
    let mut team = team();
    submit_plan(&mut team, 1);
    let grant = Grant {
        mode: Mode::AcceptEdits,
        write_paths: vec!["src/**".into()],
        ..Grant::of_plan(Mode::AcceptEdits)
    };
    let applied = team
        .apply(
            2,
            &admitted(Caller::Operator(mesh_core::access::Person::operator())),
            Decide {
                grant: Some(grant.clone()),
                ..decide(id(1), true, "")
            },
        )
        .unwrap();
    let decided = applied.reply;
    assert_eq!(decided.status, Status::Approved);
    assert_eq!(decided.decision.and_then(|d| d.grant), Some(grant));
    let steps = &request(&team, 1).reviews;
    assert!(
        steps.iter().any(|s| s.reviewer == "operator (test)"),
        "the decider is on the record: {steps:?}"
    );

    submit_plan(&mut team, 2);
    let refused = team.apply(
        3,
        &admitted(Caller::Operator(mesh_core::access::Person::operator())),
        decide(id(2), false, " "),
    );
    assert!(matches!(refused, Err(CoreError::Invalid(ref e)) if e.field == "feedback"));
    assert_eq!(request(&team, 2).status, Status::Pending);
    team.apply(
        3,
        &admitted(Caller::Operator(mesh_core::access::Person::operator())),
        decide(id(2), false, "smaller"),
    )
    .unwrap();
    let rejected = request(&team, 2);
    assert_eq!(rejected.status, Status::Rejected);
    assert_eq!(
        rejected.decision.map(|d| d.feedback),
        Some("smaller".into())
    );
}

#[test]
fn a_permission_is_allowed_or_denied_and_takes_no_grant() {
    let mut team = team();
    // Out of plan mode: each command asks.
    submit_plan(&mut team, 3);
    let default = Decide {
        grant: Some(Grant::of_plan(Mode::Default)),
        ..decide(id(3), true, "")
    };
    team.apply(
        1,
        &admitted(Caller::Operator(mesh_core::access::Person::operator())),
        default,
    )
    .unwrap();
    for n in [1, 2] {
        team.apply(
            1,
            &admitted(bob()),
            RequestPermission {
                request_id: id(n),
                tool: "run_command".into(),
                args_json: r#"{"command":"ls"}"#.into(),
                path: None,
            },
        )
        .unwrap();
    }
    let with_grant = Decide {
        grant: Some(Grant::of_plan(Mode::AcceptEdits)),
        ..decide(id(1), true, "")
    };
    let refused = team.apply(
        2,
        &admitted(Caller::Operator(mesh_core::access::Person::operator())),
        with_grant,
    );
    assert!(matches!(refused, Err(CoreError::Invalid(ref e)) if e.field == "grant"));
    assert_eq!(request(&team, 1).status, Status::Pending);
    team.apply(
        2,
        &admitted(Caller::Operator(mesh_core::access::Person::operator())),
        decide(id(1), true, ""),
    )
    .unwrap();
    team.apply(
        2,
        &admitted(Caller::Operator(mesh_core::access::Person::operator())),
        decide(id(2), false, ""),
    )
    .unwrap();
    assert_eq!(request(&team, 1).status, Status::Approved);
    assert_eq!(request(&team, 2).status, Status::Rejected);
    assert_eq!(request(&team, 2).opening.kind, Kind::Permission);
}

#[test]
fn a_result_is_reviewed_as_its_kind_says() {
    let mut team = team();
    team.apply(
        1,
        &admitted(Caller::Operator(mesh_core::access::Person::operator())),
        CreateTask {
            task_id: "t".into(),
            task: NewTask {
                subject: "t".into(),
                review: Some(mesh_core::tasks::Review::Result),
                ..Default::default()
            },
        },
    )
    .unwrap();
    team.apply(
        2,
        &admitted(bob()),
        ClaimTask {
            task_id: Some("t".into()),
        },
    )
    .unwrap();
    team.apply(
        3,
        &admitted(bob()),
        SubmitResult {
            request_id: id(1),
            result: Box::new(WorkResult {
                task_id: "t".into(),
                base: "b".repeat(40),
                commit: "c".repeat(40),
                summary: "did it".into(),
                ..WorkResult::default()
            }),
            supersedes: None,
        },
    )
    .unwrap();
    let refused = team.apply(
        4,
        &admitted(Caller::Operator(mesh_core::access::Person::operator())),
        decide(id(1), false, ""),
    );
    assert!(matches!(refused, Err(CoreError::Invalid(ref e)) if e.field == "feedback"));
    team.apply(
        4,
        &admitted(Caller::Operator(mesh_core::access::Person::operator())),
        decide(id(1), false, "no tests"),
    )
    .unwrap();
    let rejected = request(&team, 1);
    assert_eq!(rejected.opening.kind, Kind::Result);
    assert_eq!(rejected.status, Status::Rejected);
}

#[test]
fn a_shutdown_an_unknown_id_and_a_member_are_refused() {
    let mut team = team();
    team.apply(
        1,
        &admitted(Caller::Operator(mesh_core::access::Person::operator())),
        RequestShutdown {
            request_id: id(1),
            target: Name::parse("target", "bob").unwrap(),
            reason: "done".into(),
            deadline_unix_ms: None,
            asked_by: "operator".into(),
        },
    )
    .unwrap();
    let shutdown = team.apply(
        2,
        &admitted(Caller::Operator(mesh_core::access::Person::operator())),
        decide(id(1), true, ""),
    );
    assert!(matches!(shutdown, Err(CoreError::Conflict(ref m)) if m.contains("RespondShutdown")));
    assert_eq!(request(&team, 1).status, Status::Pending);
    let unknown = team.apply(
        2,
        &admitted(Caller::Operator(mesh_core::access::Person::operator())),
        decide(id(9), true, ""),
    );
    assert!(matches!(unknown, Err(CoreError::NotFound(_))));
    // A member is not let in where a decision comes in.
    assert_eq!(
        <Decide as Op>::DOORS,
        Doors::Operator(mesh_core::access::Role::Reviewer)
    );
    assert!(access::admit(bob(), Call::Operator(mesh_core::access::Role::Viewer)).is_err());
    submit_plan(&mut team, 2);
    let as_result = Decide {
        kind: Some(Kind::Result),
        ..decide(id(2), true, "")
    };
    let refused = team.apply(
        3,
        &admitted(Caller::Operator(mesh_core::access::Person::operator())),
        as_result,
    );
    assert!(matches!(refused, Err(CoreError::Conflict(ref m)) if m.contains("not a result")));
    assert_eq!(request(&team, 2).status, Status::Pending);
    let as_plan = Decide {
        kind: Some(Kind::PlanApproval),
        ..decide(id(2), true, "")
    };
    team.apply(
        3,
        &admitted(Caller::Operator(mesh_core::access::Person::operator())),
        as_plan,
    )
    .unwrap();
    assert_eq!(request(&team, 2).status, Status::Approved);
}
