//! The lead sees, and can require, the sandbox a teammate's commands run
//! in: each teammate reports it at join; `lead team`, `ListTeam`, the
//! console's team page, a member's page and a `run_command` permission's
//! page show it (and it outlives a restart of the lead); a lead started
//! with `--require-sandbox`, or a policy with `require_sandbox = true`,
//! rejects the plan of a teammate whose commands run unconfined, naming why.

#![allow(clippy::unwrap_used)]

use mesh_tests::{is, member_named, Events, Lead};
use shared::pb::{self, RequestStatus};

/// A plan of one file, then one command in the work phase.
fn script(name: &str) -> String {
    format!(
        r#"
[[plans]]
summary = "Write {name}.txt"
files = ["{name}.txt"]

[[actions]]
phase = "work"
tool = "run_command"
command = "echo hi > {name}.txt"
"#
    )
}

#[tokio::test]
async fn the_lead_shows_each_members_sandbox_and_keeps_it_across_a_restart_on_sqlite() {
    the_lead_shows_each_members_sandbox_and_keeps_it_across_a_restart().await;
}

#[tokio::test]
async fn the_lead_shows_each_members_sandbox_and_keeps_it_across_a_restart_on_postgres() {
    mesh_tests::on_postgres(the_lead_shows_each_members_sandbox_and_keeps_it_across_a_restart())
        .await;
}

async fn the_lead_shows_each_members_sandbox_and_keeps_it_across_a_restart() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let _ann = lead.teammate("ann", &script("ann"));
    let _bo = lead.teammate_with("bo", &script("bo"), &["--sandbox", "none"]);
    // Both plans, in whichever order they come.
    let mut plans = std::collections::BTreeMap::new();
    while plans.len() < 2 {
        let plan = events
            .request("ann's and bo's plans", |r| {
                is(r.status, RequestStatus::Pending)
                    && r.r#type == pb::RequestType::PlanApproval as i32
            })
            .await;
        plans.insert(plan.sender.clone(), plan);
    }
    let ann_plan = plans.remove("ann").expect("ann's plan");

    let ann = member_named(&mut operator, "ann").await;
    let sandbox = ann.sandbox.expect("ann said how her commands run");
    assert_eq!(sandbox.kind, "landlock", "{sandbox:?}");
    for word in ["reads", "writes", "network", "processes"] {
        assert!(sandbox.confines.iter().any(|c| c == word), "{sandbox:?}");
    }
    let bo = member_named(&mut operator, "bo").await;
    assert_eq!(bo.sandbox.expect("bo said").kind, "none");
    let (ok, table, err) = lead.cli(&["team"]).await;
    assert!(ok, "{err}");
    assert!(table.contains("SANDBOX"), "{table}");
    let row = |name: &str| {
        table
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(row("ann").contains("landlock"), "{table}");
    assert!(row("bo ").contains("none"), "{table}");
    assert!(
        table.contains("bo runs its commands unconfined (--sandbox none)"),
        "{table}"
    );

    // ann in DEFAULT mode: her command waits for a permission, whose page
    // says what it will run under; so do the team page and hers.
    let (ok, out, err) = lead
        .cli(&["approve", &ann_plan.request_id, "--mode", "default"])
        .await;
    assert!(ok, "{out}{err}");
    let permission = events
        .request("ann's permission to run her command", |r| {
            r.sender == "ann" && r.r#type == pb::RequestType::Permission as i32
        })
        .await;
    let browser = lead.console_browser().await;
    let base = lead.console.clone().unwrap();
    browser
        .open(&format!("{base}#/requests/{}", permission.request_id))
        .await;
    browser
        .wait_for(
            "[data-testid=command-sandbox]",
            "It runs under: landlock (reads, writes, network, signals, processes)",
        )
        .await;
    browser.open(&format!("{base}#/team")).await;
    browser
        .wait_for("[data-member=ann] [data-testid=team-sandbox]", "landlock")
        .await;
    browser
        .wait_for("[data-member=bo] [data-testid=team-sandbox]", "none")
        .await;
    browser.open(&format!("{base}#/members/bo")).await;
    browser
        .wait_for(
            "[data-testid=member-sandbox]",
            "Commands run under: UNCONFINED (--sandbox none)",
        )
        .await;
    drop(browser);

    let lead = lead.restart(&[]).await;
    let mut operator = lead.operator().await;
    let ann = member_named(&mut operator, "ann").await;
    assert_eq!(ann.sandbox.expect("kept").kind, "landlock");
}

#[tokio::test]
async fn a_lead_that_requires_a_sandbox_rejects_the_plans_of_unconfined_members() {
    let lead = Lead::start(&["--approval", "auto", "--require-sandbox"]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let _ann = lead.teammate("ann", &script("ann"));
    let _bo = lead.teammate_with("bo", &script("bo"), &["--sandbox", "none"]);
    // Both decisions, in whichever order they come.
    let mut decided = std::collections::BTreeMap::new();
    while decided.len() < 2 {
        let plan = events
            .request("ann's and bo's decided plans", |r| {
                !is(r.status, RequestStatus::Pending)
                    && r.r#type == pb::RequestType::PlanApproval as i32
            })
            .await;
        decided.insert(plan.sender.clone(), plan);
    }
    let ann = &decided["ann"];
    assert!(is(ann.status, RequestStatus::Approved), "{ann:?}");
    let bo = &decided["bo"];
    assert!(is(bo.status, RequestStatus::Rejected), "{bo:?}");
    assert!(
        bo.feedback
            .contains("require_sandbox: bo runs its commands unconfined"),
        "{bo:?}"
    );
}

#[tokio::test]
async fn a_policy_that_requires_a_sandbox_rejects_the_plans_of_unconfined_members() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "require_sandbox = true\n").unwrap();
    let lead = Lead::start(&["--approval", &format!("policy:{}", policy.display())]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let _ann = lead.teammate("ann", &script("ann"));
    let ann = events.decided_plan("ann").await;
    assert!(is(ann.status, RequestStatus::Approved), "{ann:?}");
    let _bo = lead.teammate_with("bo", &script("bo"), &["--sandbox", "none"]);
    let bo = events.decided_plan("bo").await;
    assert!(is(bo.status, RequestStatus::Rejected), "{bo:?}");
    assert!(bo.feedback.contains("require_sandbox"), "{bo:?}");
}

/// With `--require-sandbox`, an operator's own approval of an unconfined
/// member's plan is turned into a rejection, with the reason.
#[tokio::test]
async fn under_require_sandbox_an_operators_approval_of_an_unconfined_plan_is_a_rejection() {
    let lead = Lead::start(&["--require-sandbox"]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let _bo = lead.teammate_with("bo", &script("bo"), &["--sandbox", "none"]);
    let plan = events.pending_plan("bo").await;
    let _ = lead.cli(&["approve", &plan.request_id]).await;
    let bo = events.decided_plan("bo").await;
    assert!(is(bo.status, RequestStatus::Rejected), "{bo:?}");
    assert!(bo.feedback.contains("unconfined"), "{bo:?}");
}
