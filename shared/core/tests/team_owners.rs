//! Owners by path through [`Team::apply`], in memory: an approval of a
//! plan under owners rules is held until every rule has its owners'
//! approvals (distinct people, each counted once per rule; anyone else's
//! approval recorded as not counting); a machine's approval never stands
//! for the owners; any reviewer's rejection ends the plan; a plan no rule
//! covers is decided as before.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use mesh_core::{
    access::{Caller, Person, Role},
    grant::{Grant, Mode},
    lifecycle::Event,
    names::{Name, RequestId},
    op::{GetRequest, PlanVerdict, ReviewPlan, SubmitPlan},
    owners::Owners,
    plan::Plan,
    protocol::{Request, Status},
    team::{Approval, Team},
};

mod common;
use common::admitted;

const OWNERS: &str = "db/**  @dba 2\ndocs/  @writers\n";

fn team(approval: Approval) -> Team {
    let mut team = Team::new(100)
        .with_approval(approval)
        .with_owners(Arc::new(Owners::parse(OWNERS).unwrap()));
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

fn person(name: &str, groups: &[&str]) -> Person {
    Person {
        groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        ..Person::token(name, Role::Reviewer)
    }
}

fn submit(team: &mut Team, n: u8, files: &[&str]) {
    let plan = Plan {
        summary: "the schema".into(),
        files: files.iter().map(|f| (*f).to_owned()).collect(),
        ..Plan::default()
    };
    team.apply(
        10,
        &admitted(Caller::Member("alice".into())),
        SubmitPlan {
            request_id: id(n),
            plan,
            supersedes: None,
        },
    )
    .unwrap();
}

/// `who` reviews plan `n`: what the reply says of it.
fn review(team: &mut Team, n: u8, who: &Person, approve: bool) -> Request {
    let verdict = if approve {
        PlanVerdict::Approve {
            grant: Grant::of_plan(Mode::AcceptEdits),
            feedback: String::new(),
            allow_overlap: false,
        }
    } else {
        PlanVerdict::Reject {
            feedback: "not this way".into(),
        }
    };
    team.apply(
        11,
        &admitted(Caller::Operator(who.clone())),
        ReviewPlan {
            request_id: id(n),
            verdict,
            by: format!("operator {}", who.name),
        },
    )
    .unwrap()
    .reply
}

fn read(team: &mut Team, n: u8) -> Request {
    team.apply(
        12,
        &admitted(Caller::Operator(Person::operator())),
        GetRequest { request_id: id(n) },
    )
    .unwrap()
    .reply
}

#[test]
fn a_plan_under_db_waits_for_two_distinct_dbas_and_no_one_else_counts() {
    let mut team = team(Approval::Manual);
    let (dora, dan, adam) = (
        person("dora", &["dba"]),
        person("dan", &["dba", "writers"]),
        person("adam", &["admins"]),
    );
    submit(&mut team, 1, &["db/schema.sql", "docs/db.md", "src/db.rs"]);
    assert_eq!(
        read(&mut team, 1).waits_for,
        ["@dba: 0 of 2", "@writers: 0 of 1"]
    );

    let reply = review(&mut team, 1, &dora, true);
    assert_eq!(reply.status, Status::Pending);
    assert_eq!(reply.waits_for, ["@dba: 1 of 2", "@writers: 0 of 1"]);
    let step = reply.reviews.last().unwrap();
    assert_eq!(
        (step.verdict.as_str(), step.owner_rules.clone()),
        ("approve", vec!["db/**".to_owned()])
    );
    assert_eq!(step.person.as_ref(), Some(&dora));

    for (who, why) in [(&dora, "once per rule"), (&adam, "no owner")] {
        let reply = review(&mut team, 1, who, true);
        assert_eq!(reply.status, Status::Pending, "{why}");
        let step = reply.reviews.last().unwrap();
        assert_eq!(step.verdict, "pass", "{why}");
        assert!(step.owner_rules.is_empty(), "{why}");
        assert!(
            step.words.contains("does not count"),
            "{why}: {}",
            step.words
        );
    }

    // Dan is the second DBA and a writer: his one approval completes both.
    let reply = review(&mut team, 1, &dan, true);
    assert_eq!(reply.status, Status::Approved, "{reply:?}");
    let step = reply.reviews.last().unwrap();
    assert_eq!(step.owner_rules, ["db/**", "docs/"]);
    assert!(
        read(&mut team, 1).waits_for.is_empty(),
        "decided: owes nothing"
    );
    let counted: Vec<(String, String)> = reply
        .reviews
        .iter()
        .flat_map(|s| {
            let who = s
                .person
                .as_ref()
                .map(|p| p.name.clone())
                .unwrap_or_default();
            s.owner_rules.iter().map(move |r| (r.clone(), who.clone()))
        })
        .collect();
    assert_eq!(
        counted,
        [
            ("db/**".to_owned(), "dora".to_owned()),
            ("db/**".to_owned(), "dan".to_owned()),
            ("docs/".to_owned(), "dan".to_owned()),
        ]
    );
}

#[test]
fn a_rejection_is_never_held_and_a_machine_approval_waits_for_the_owners() {
    let mut team = team(Approval::Auto);
    submit(&mut team, 1, &["db/schema.sql"]);
    let held = read(&mut team, 1);
    assert_eq!(
        held.status,
        Status::Pending,
        "auto does not stand for owners"
    );
    let step = held.reviews.last().unwrap();
    assert_eq!(
        (step.reviewer.as_str(), step.verdict.as_str()),
        ("auto", "waits")
    );
    assert!(step.words.contains("@dba: 0 of 2"), "{}", step.words);
    review(&mut team, 1, &person("dora", &["dba"]), true);
    let rejected = review(&mut team, 1, &person("alice-reviewer", &[]), false);
    assert_eq!(rejected.status, Status::Rejected, "any reviewer rejects");

    submit(&mut team, 2, &["src/lib.rs"]);
    assert_eq!(
        read(&mut team, 2).status,
        Status::Approved,
        "no rule: as before"
    );
    assert!(read(&mut team, 2).waits_for.is_empty());
}
