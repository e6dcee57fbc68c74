//! Model token usage and budgets, over the wire: `ReportUsage` counts a
//! process's cumulative totals once per epoch and adds epochs; the totals
//! survive a restarted lead; `SetBudget` reaches the member's inbox and the
//! roster; `Join` answers what earlier sessions used; `lead team` and
//! `lead budget` show it.

#![allow(clippy::unwrap_used)]

use mesh_tests::{member_named, within, Events, Lead, Member};
use shared::pb::{self, envelope::Body};
use tonic::Code;

fn used(prompt: u64, completion: u64, calls: u64) -> pb::Usage {
    pb::Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        calls,
        model_ms: calls * 250,
    }
}

async fn report(member: &mut Member, epoch: &str, totals: pb::Usage) -> pb::UsageStatus {
    let call = member.api.report_usage(pb::UsageReport {
        epoch: epoch.into(),
        totals: Some(totals),
    });
    within("ReportUsage", call).await.unwrap().into_inner()
}

#[tokio::test]
async fn a_report_counts_once_per_epoch_a_new_epoch_adds_and_watchers_hear_it() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut alice = lead.join("alice").await;

    let first = report(&mut alice, "e1", used(100, 20, 2)).await;
    assert_eq!(first.total, Some(used(100, 20, 2)));
    assert_eq!(first.token_budget, 0);
    let heard = events
        .find("alice's usage", |kind| match kind {
            pb::event::Kind::Usage(u) if u.name == "alice" => Some(u.clone()),
            _ => None,
        })
        .await;
    assert_eq!(heard.total, Some(used(100, 20, 2)));

    // A retry, and a stale report, count nothing twice.
    assert_eq!(report(&mut alice, "e1", used(100, 20, 2)).await, first);
    assert_eq!(report(&mut alice, "e1", used(50, 10, 1)).await, first);
    // A new process under the same name adds.
    let later = report(&mut alice, "e2", used(10, 5, 1)).await;
    assert_eq!(later.total, Some(used(110, 25, 3)));

    let listed = operator
        .list_team(pb::ListTeamRequest::default())
        .await
        .unwrap()
        .into_inner();
    let member = listed.members.iter().find(|m| m.name == "alice").unwrap();
    assert_eq!(member.usage, Some(used(110, 25, 3)));
    assert_eq!(listed.team_usage, Some(used(110, 25, 3)));
    assert!(listed.other_usage.is_empty());

    // What `lead team` shows: the member's tokens and calls, and the total.
    let (ok, out, err) = lead.cli(&["team"]).await;
    assert!(ok, "{err}");
    assert!(out.contains("TOKENS") && out.contains("BUDGET"), "{out}");
    let row = out.lines().find(|l| l.starts_with("alice")).unwrap();
    assert!(row.contains(" 135 ") && row.contains(" 3 "), "{out}");
    assert!(
        out.contains("team total: 135 tokens (110 prompt, 25 completion) in 3 calls"),
        "{out}"
    );
    let (ok, out, err) = lead.cli(&["team", "--json"]).await;
    assert!(ok, "{err}");
    let team: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(team[0]["usage"]["prompt_tokens"], 110);
}

#[tokio::test]
async fn bad_reports_are_invalid_argument_naming_the_field() {
    let lead = Lead::start(&[]).await;
    let mut alice = lead.join("alice").await;
    for (epoch, totals, field) in [
        (String::new(), Some(used(1, 1, 1)), "epoch"),
        ("e".repeat(129), Some(used(1, 1, 1)), "epoch"),
        ("e1".to_owned(), None, "totals"),
    ] {
        let status = alice
            .api
            .report_usage(pb::UsageReport { epoch, totals })
            .await
            .expect_err("refused");
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(status.message().starts_with(field), "{status:?}");
    }
    // 128 bytes is the limit, not past it.
    report(&mut alice, &"e".repeat(128), used(1, 1, 1)).await;
}

#[tokio::test]
async fn totals_and_budgets_survive_a_restarted_lead_and_a_rejoin_hears_them_on_sqlite() {
    totals_and_budgets_survive_a_restarted_lead_and_a_rejoin_hears_them().await;
}

#[tokio::test]
async fn totals_and_budgets_survive_a_restarted_lead_and_a_rejoin_hears_them_on_postgres() {
    mesh_tests::on_postgres(totals_and_budgets_survive_a_restarted_lead_and_a_rejoin_hears_them())
        .await;
}

async fn totals_and_budgets_survive_a_restarted_lead_and_a_rejoin_hears_them() {
    let lead = Lead::start(&["--token-budget", "5000"]).await;
    let mut alice = lead.join("alice").await;
    let status = report(&mut alice, "e1", used(300, 100, 4)).await;
    assert_eq!(status.token_budget, 5000, "the lead's default");

    let lead = lead.crash_and_restart(&["--token-budget", "5000"]).await;
    let mut alice = Member {
        api: lead.lead_api(&alice.token).await,
        inbox: None,
        ..alice
    };
    // The same process goes on: its cumulative totals count once.
    let status = report(&mut alice, "e1", used(350, 120, 5)).await;
    assert_eq!(status.total, Some(used(350, 120, 5)));
    alice.api.leave(pb::LeaveRequest::default()).await.unwrap();

    // A new session under the name hears what the earlier ones used, and
    // asks for a budget of its own.
    let mut joiner = lead.lead_api(&lead.join_token).await;
    let joined = joiner
        .join(pb::JoinRequest {
            name: "alice".into(),
            role: "tester".into(),
            token_budget: 800,
            sandbox: None,
            decoding: None,
        })
        .await
        .unwrap()
        .into_inner();
    let usage = joined.usage.unwrap();
    assert_eq!(usage.total, Some(used(350, 120, 5)));
    assert_eq!(usage.token_budget, 800, "its own budget over the default");
}

#[tokio::test]
async fn set_budget_reaches_the_inbox_the_roster_and_the_cli() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut alice = lead.join("alice").await;
    alice.open_inbox(0).await;

    let status = operator
        .set_budget(pb::SetBudgetRequest {
            name: "alice".into(),
            token_budget: 2_000,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.token_budget, 2_000);
    let envelope = alice
        .next_matching(|e| matches!(e.body, Some(Body::BudgetChanged(_))))
        .await;
    assert_eq!(envelope.from, "lead");
    assert!(matches!(
        envelope.body,
        Some(Body::BudgetChanged(pb::BudgetChanged {
            token_budget: 2_000
        }))
    ));
    assert_eq!(
        member_named(&mut operator, "alice").await.token_budget,
        2_000
    );
    // The operator's budget wins over what the member reports it has.
    assert_eq!(
        report(&mut alice, "e1", used(10, 10, 1)).await.token_budget,
        2_000
    );

    let (ok, out, err) = lead.cli(&["budget", "alice", "9000"]).await;
    assert!(ok, "{err}");
    assert!(
        out.contains("alice: 20 tokens") && out.contains("budget 9000"),
        "{out}"
    );
    let (ok, out, err) = lead.cli(&["team"]).await;
    assert!(ok, "{err}");
    let row = out.lines().find(|l| l.starts_with("alice")).unwrap();
    assert!(row.contains(" 9000 "), "{out}");

    let unknown = operator
        .set_budget(pb::SetBudgetRequest {
            name: "nobody".into(),
            token_budget: 1,
        })
        .await
        .expect_err("never joined");
    assert_eq!(unknown.code(), Code::NotFound, "{unknown:?}");
    let bad = operator
        .set_budget(pb::SetBudgetRequest {
            name: "Not A Name".into(),
            token_budget: 1,
        })
        .await
        .expect_err("malformed");
    assert_eq!(bad.code(), Code::InvalidArgument, "{bad:?}");
    assert!(bad.message().starts_with("name"), "{bad:?}");
    let (ok, _, err) = lead.cli(&["budget", "nobody", "5"]).await;
    assert!(!ok && err.contains("nobody"), "{err}");
}

#[tokio::test]
async fn a_terminated_member_gets_its_budget_set_without_an_envelope() {
    let lead = Lead::start(&["--store", "memory"]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut carol = lead.join("carol").await;
    report(&mut carol, "e1", used(7, 3, 1)).await;
    carol.api.leave(pb::LeaveRequest::default()).await.unwrap();
    let status = operator
        .set_budget(pb::SetBudgetRequest {
            name: "carol".into(),
            token_budget: 50,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.token_budget, 50);
    assert_eq!(status.total, Some(used(7, 3, 1)));
    let heard = events
        .find("carol's budget", |kind| match kind {
            pb::event::Kind::Usage(u) if u.name == "carol" && u.token_budget == 50 => {
                Some(u.clone())
            }
            _ => None,
        })
        .await;
    assert_eq!(heard.total, Some(used(7, 3, 1)));
    // Gone members still count in the team's total.
    let listed = operator
        .list_team(pb::ListTeamRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.team_usage, Some(used(7, 3, 1)));
}
