//! The plan and permission handshakes through [`Team::apply`], in memory:
//! a revision supersedes the pending plan, each approval mode answers as it
//! should (auto, a policy, a model asked for, a chain stage by stage), and
//! a permission waits for a person unless a policy decides it.
#![allow(clippy::unwrap_used)]

use mesh_core::{
    access::{self, Call, Caller},
    chain::{OnPass, Rule, Verdict},
    effect::{Effect, Message, Notice},
    grant::Mode,
    lifecycle::Event,
    names::{Name, RequestId},
    op::*,
    plan::Plan,
    policy::Policy,
    protocol::Status,
    refusal::CoreError,
    team::{Approval, Op, ReviewChain, StageKind, Team},
};

mod common;
use common::admitted;

fn team(approval: Approval) -> Team {
    let mut team = Team::new(100).with_approval(approval);
    team.members.join(
        Name::parse("name", "alice").unwrap(),
        "coder".into(),
        "id-alice".into(),
        "hash-alice".into(),
        1_000,
    );
    team.members.on_life("alice", Event::StreamOpened);
    team
}

fn id(n: u8) -> RequestId {
    RequestId::existing("request_id", &format!("00000000-0000-4000-8000-{n:012}")).unwrap()
}

fn plan(files: &[&str], tests: &[&str]) -> Plan {
    Plan {
        summary: "add login".into(),
        files: files.iter().map(|f| (*f).to_owned()).collect(),
        tests: tests.iter().map(|t| (*t).to_owned()).collect(),
        ..Plan::default()
    }
}

fn submit(team: &mut Team, n: u8, plan: Plan, supersedes: Option<u8>) -> Vec<Effect> {
    let applied = team
        .apply(
            10,
            &admitted(Caller::Member("alice".into())),
            SubmitPlan {
                request_id: id(n),
                plan,
                supersedes: supersedes.map(id),
            },
        )
        .unwrap();
    assert_eq!(applied.reply, id(n));
    applied.effects
}

fn status(team: &Team, n: u8) -> Status {
    team.requests.get(&id(n)).unwrap().status
}

/// What the teammate was told of its plans, in order: (approved, feedback).
fn decisions(effects: &[Effect]) -> Vec<(bool, String)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Deliver {
                to,
                message:
                    Message::PlanDecided {
                        approve, feedback, ..
                    },
                ..
            } if to == &["alice"] => Some((*approve, feedback.clone())),
            _ => None,
        })
        .collect()
}

/// The request's history: (reviewer, verdict).
fn history(team: &Team, n: u8) -> Vec<(String, String)> {
    team.requests
        .get(&id(n))
        .unwrap()
        .reviews
        .iter()
        .map(|r| (r.reviewer.clone(), r.verdict.clone()))
        .collect()
}

#[test]
fn a_plan_waits_for_the_operator_and_a_revision_supersedes_it() {
    let mut team = team(Approval::Manual);
    let effects = submit(&mut team, 1, plan(&["src/a.rs"], &[]), None);
    assert!(matches!(
        &effects[0],
        Effect::Deliver { from, to, message: Message::PlanApprovalRequest { .. } }
            if from == "alice" && to == &["lead"]
    ));
    assert!(
        decisions(&effects).is_empty(),
        "no decision without a person"
    );
    let effects = submit(&mut team, 2, plan(&["src/a.rs"], &["t"]), Some(1));
    assert_eq!(status(&team, 1), Status::Expired, "superseded");
    assert!(effects
        .iter()
        .any(|e| matches!(e, Effect::Notify(Notice::Request(r)) if r.id() == &id(1))));
    let reviewed = team
        .apply(
            11,
            &admitted(Caller::Operator(mesh_core::access::Person::operator())),
            ReviewPlan {
                request_id: id(2),
                verdict: PlanVerdict::Reject {
                    feedback: "smaller".into(),
                },
                by: "operator".into(),
            },
        )
        .unwrap();
    assert_eq!(
        decisions(&reviewed.effects),
        vec![(false, "smaller".into())]
    );
    assert_eq!(
        history(&team, 2),
        vec![("operator".into(), "reject".into())]
    );
    // A revision of an approved plan is refused: there is nothing to revise.
    submit(&mut team, 3, plan(&["src/a.rs"], &["t"]), Some(2));
    team.apply(
        12,
        &admitted(Caller::Operator(mesh_core::access::Person::operator())),
        ReviewPlan {
            request_id: id(3),
            verdict: PlanVerdict::Approve {
                grant: mesh_core::grant::Grant::of_plan(Mode::AcceptEdits),
                feedback: String::new(),
                allow_overlap: false,
            },
            by: "operator".into(),
        },
    )
    .unwrap();
    assert_eq!(team.members.get("alice").unwrap().mode, Mode::AcceptEdits);
    let refused = team.apply(
        13,
        &admitted(Caller::Member("alice".into())),
        SubmitPlan {
            request_id: id(4),
            plan: plan(&["src/a.rs"], &[]),
            supersedes: Some(id(3)),
        },
    );
    assert!(matches!(refused, Err(CoreError::Conflict(m)) if m.contains("already APPROVED")));
}

#[test]
fn auto_approves_every_plan_and_permission_at_once() {
    let mut team = team(Approval::Auto);
    let effects = submit(&mut team, 1, plan(&["src/a.rs"], &[]), None);
    assert_eq!(
        decisions(&effects),
        vec![(true, "approved automatically (--approval auto)".into())]
    );
    assert_eq!(team.members.get("alice").unwrap().mode, Mode::AcceptEdits);
    assert_eq!(
        team.holds.get("alice").map(|h| h.paths.clone()),
        Some(vec!["src/a.rs".to_owned()])
    );
    let asked = team
        .apply(
            11,
            &admitted(Caller::Member("alice".into())),
            RequestPermission {
                request_id: id(2),
                tool: "run_command".into(),
                args_json: "{}".into(),
                path: None,
            },
        )
        .unwrap();
    assert!(asked.effects.iter().any(|e| matches!(
        e,
        Effect::Deliver {
            message: Message::PermissionDecided { approve: true, .. },
            ..
        }
    )));
}

#[test]
fn a_policy_decides_plans_and_the_writes_it_denies() {
    let policy = Policy::parse("require_tests = true\ndeny_write = [\"db/**\"]\n").unwrap();
    let mut team = team(Approval::Policy(policy));
    let effects = submit(&mut team, 1, plan(&["src/a.rs"], &[]), None);
    let told = decisions(&effects);
    assert_eq!(told.len(), 1);
    assert!(
        !told[0].0 && told[0].1.starts_with("rejected by policy: "),
        "{told:?}"
    );
    let effects = submit(&mut team, 2, plan(&["src/a.rs"], &["t"]), Some(1));
    assert_eq!(
        decisions(&effects),
        vec![(true, "approved by policy: every criterion holds".into())]
    );
    team.members.set_mode("alice", Mode::Default);
    let ask = |team: &mut Team, n: u8, path: &str| {
        team.apply(
            12,
            &admitted(Caller::Member("alice".into())),
            RequestPermission {
                request_id: id(n),
                tool: "write_file".into(),
                args_json: "{}".into(),
                path: Some(path.into()),
            },
        )
        .unwrap();
        team.requests.get(&id(n)).unwrap().status
    };
    assert_eq!(ask(&mut team, 3, "db/schema.sql"), Status::Rejected);
    assert_eq!(ask(&mut team, 4, "src/b.rs"), Status::Approved);
}

#[test]
fn a_model_is_asked_and_answers_as_the_operator() {
    let mut team = team(Approval::Model);
    let effects = submit(&mut team, 1, plan(&["src/a.rs"], &[]), None);
    assert_eq!(effects.last(), Some(&Effect::ReviewPlan(id(1))));
    assert_eq!(status(&team, 1), Status::Pending);
    team.members.set_mode("alice", Mode::Default);
    let asked = team
        .apply(
            11,
            &admitted(Caller::Member("alice".into())),
            RequestPermission {
                request_id: id(2),
                tool: "run_command".into(),
                args_json: "{}".into(),
                path: None,
            },
        )
        .unwrap();
    assert_eq!(
        status(&team, 2),
        Status::Pending,
        "permissions wait for a person"
    );
    assert!(!asked
        .effects
        .iter()
        .any(|e| matches!(e, Effect::ReviewPlan(_))));
}

fn chain(stages: Vec<StageKind>, names: &[&str], escalate: &[&str]) -> Approval {
    Approval::Chain(std::sync::Arc::new(ReviewChain {
        stages,
        rule: Rule::new(
            names.iter().map(|n| (*n).to_owned()).collect(),
            &escalate.iter().map(|e| (*e).to_owned()).collect::<Vec<_>>(),
        )
        .unwrap(),
        results: None,
    }))
}

fn verdict(team: &mut Team, n: u8, stage: usize, verdict: Verdict) -> Vec<Effect> {
    team.apply(
        20,
        &admitted(Caller::Lead),
        StageVerdict {
            request_id: id(n),
            stage,
            verdict,
        },
    )
    .unwrap()
    .effects
}

#[test]
fn a_chain_runs_its_stages_in_order_and_a_worker_verdict_decides() {
    let policy = Policy::parse("require_tests = true\n").unwrap();
    let mut team = team(chain(
        vec![
            StageKind::Policy {
                policy,
                on_pass: OnPass::Next,
            },
            StageKind::Worker,
            StageKind::Human,
        ],
        &["policy", "program check", "human"],
        &[],
    ));
    // Without tests the policy stage rejects at once.
    let effects = submit(&mut team, 1, plan(&["src/a.rs"], &[]), None);
    assert_eq!(status(&team, 1), Status::Rejected);
    assert_eq!(decisions(&effects).len(), 1);
    // With tests it passes the plan on to the worker stage.
    let effects = submit(&mut team, 2, plan(&["src/a.rs"], &["t"]), Some(1));
    assert_eq!(
        effects.last(),
        Some(&Effect::RunStage {
            request_id: id(2),
            stage: 1
        })
    );
    assert_eq!(history(&team, 2), vec![("policy".into(), "pass".into())]);
    let effects = verdict(
        &mut team,
        2,
        1,
        Verdict::Approve {
            grant: None,
            words: "tests pass".into(),
        },
    );
    assert_eq!(status(&team, 2), Status::Approved);
    assert_eq!(decisions(&effects).len(), 1);
    assert_eq!(
        history(&team, 2),
        vec![
            ("policy".into(), "pass".into()),
            ("program check".into(), "approve".into())
        ]
    );
    // A verdict on a plan decided meanwhile changes nothing.
    assert!(verdict(
        &mut team,
        2,
        1,
        Verdict::Reject {
            words: "late".into()
        }
    )
    .is_empty());
}

#[test]
fn a_chain_leaves_to_a_person_what_its_stages_pass_or_the_escalation_names() {
    let mut team = team(chain(
        vec![StageKind::Worker, StageKind::Human],
        &["model m", "human"],
        &["src/auth/**"],
    ));
    submit(&mut team, 1, plan(&["src/a.rs"], &[]), None);
    verdict(&mut team, 1, 0, Verdict::Pass { words: "ok".into() });
    assert_eq!(status(&team, 1), Status::Pending);
    assert_eq!(
        history(&team, 1),
        vec![
            ("model m".into(), "pass".into()),
            ("human".into(), "waits".into())
        ]
    );
    submit(&mut team, 2, plan(&["src/auth/key.rs"], &[]), None);
    verdict(
        &mut team,
        2,
        0,
        Verdict::Approve {
            grant: None,
            words: "fine".into(),
        },
    );
    assert_eq!(status(&team, 2), Status::Pending, "escalated to a person");
    assert_eq!(
        history(&team, 2),
        vec![
            ("model m".into(), "approve".into()),
            ("human".into(), "waits".into())
        ]
    );
    // A stage that fails leaves the plan to a person, saying so.
    submit(&mut team, 3, plan(&["src/b.rs"], &[]), None);
    verdict(
        &mut team,
        3,
        0,
        Verdict::Error {
            words: "timed out".into(),
        },
    );
    assert_eq!(status(&team, 3), Status::Pending);
    assert_eq!(
        history(&team, 3).last(),
        Some(&("chain".to_owned(), "waits".to_owned()))
    );
    // Only the lead itself reports a stage's verdict: no token lets a
    // caller in at its door.
    assert_eq!(<StageVerdict as Op>::DOORS, Doors::Lead);
    assert!(access::admit(
        Caller::Operator(mesh_core::access::Person::operator()),
        Call::Lead
    )
    .is_err());
}
