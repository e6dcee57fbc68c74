//! The audit trail over the wire (issue 25, part): every decision, with
//! who decided (a named operator token says its name), appended to a
//! hash chain in the store; `lead audit export --json` writes it and `lead
//! audit verify` checks it, naming the line where an edited entry breaks
//! it. The chain goes on across a `kill -9` and a restart.

#![allow(clippy::unwrap_used)]

use mesh_tests::{bin, Lead};
use shared::{
    auth::BearerToken,
    pb::{self, operator_client::OperatorClient},
};

const NAMED: &str = "0123456789abcdef0123456789abcdef";

fn verify(path: &std::path::Path) -> (bool, String) {
    let out = std::process::Command::new(bin("lead"))
        .args(["audit", "verify"])
        .arg(path)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

async fn export(lead: &Lead) -> Vec<serde_json::Value> {
    let (ok, out, err) = lead.cli(&["audit", "export", "--json"]).await;
    assert!(ok, "{err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn every_decision_is_chained_with_who_decided_and_an_edit_is_found_on_sqlite() {
    every_decision_is_chained_with_who_decided_and_an_edit_is_found(&[]).await;
}

#[tokio::test]
async fn every_decision_is_chained_with_who_decided_and_an_edit_is_found_on_postgres() {
    mesh_tests::on_postgres(every_decision_is_chained_with_who_decided_and_an_edit_is_found(&[]))
        .await;
}

/// A lead whose store keeps no trail seals its entries only when the
/// trail is read: the chain it exports is whole all the same.
#[tokio::test]
async fn every_decision_is_chained_with_who_decided_and_an_edit_is_found_in_memory() {
    every_decision_is_chained_with_who_decided_and_an_edit_is_found(&["--store", "memory"]).await;
}

/// `store`: the flags that choose the store (none: the default); the
/// chain's going on after a restart is checked where the store keeps it.
async fn every_decision_is_chained_with_who_decided_and_an_edit_is_found(store: &[&str]) {
    let named = format!("carol={NAMED}");
    let flags = [&["--operator-token", named.as_str()][..], store].concat();
    let lead = Lead::start(&flags).await;
    let mut operator = lead.operator().await;
    let mut carol =
        OperatorClient::with_interceptor(lead.channel().await, BearerToken::new(NAMED).unwrap());
    let mut ann = lead.join("ann").await;
    let mut bob = lead.join("bob").await;
    let plan = ann.submit("", "the plan", &["src/a.rs"]).await.unwrap();
    carol
        .review_plan(pb::PlanReview {
            request_id: plan.clone(),
            approve: true,
            grant: Some(pb::PermissionGrant {
                mode: pb::PermissionMode::Default as i32,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    let permission = ann
        .api
        .request_permission(pb::PermissionRequest {
            tool: "run_command".into(),
            args_json: r#"{"command":"rm -rf /"}"#.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .request_id;
    carol
        .review_permission(pb::PermissionReview {
            request_id: permission.clone(),
            approve: false,
            feedback: "no".into(),
        })
        .await
        .unwrap();
    let shutdown = operator
        .request_shutdown(pb::ShutdownRequest {
            target: "bob".into(),
            reason: "done".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .request_id;
    bob.api
        .respond_shutdown(pb::ShutdownResponse {
            request_id: shutdown.clone(),
            approve: true,
            reason: "ok".into(),
        })
        .await
        .unwrap();
    operator
        .set_budget(pb::SetBudgetRequest {
            name: "ann".into(),
            token_budget: 1_000,
        })
        .await
        .unwrap();

    let entries = export(&lead).await;
    let find = |subject: &str| {
        entries
            .iter()
            .find(|e| e["subject"] == subject)
            .unwrap_or_else(|| panic!("no entry for {subject}: {entries:?}"))
            .clone()
    };
    let p = find(&plan);
    assert_eq!(
        (p["what"].as_str(), p["decision"].as_str(), p["by"].as_str()),
        (
            Some("plan_approval"),
            Some("approved"),
            Some("operator carol")
        )
    );
    assert_eq!(p["content_sha256"].as_str().unwrap().len(), 64);
    let q = find(&permission);
    assert_eq!(
        (q["decision"].as_str(), q["by"].as_str()),
        (Some("rejected"), Some("operator carol"))
    );
    let s = find(&shutdown);
    assert_eq!(
        (s["decision"].as_str(), s["by"].as_str()),
        (Some("approved"), Some("member bob"))
    );
    let b = find("ann");
    assert_eq!(b["decision"], "budget 1000");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trail.jsonl");
    let (ok, out, _) = lead.cli(&["audit", "export", "--json"]).await;
    assert!(ok);
    std::fs::write(&file, &out).unwrap();
    let (ok, said) = verify(&file);
    assert!(ok, "{said}");
    assert!(
        said.contains(&format!("ok: {} entries", entries.len())),
        "{said}"
    );

    // An edit of one entry is found, and named by its line.
    let mut lines: Vec<String> = out.lines().map(str::to_owned).collect();
    lines[1] = lines[1].replace("operator carol", "operator mallory");
    let edited = dir.path().join("edited.jsonl");
    std::fs::write(&edited, lines.join("\n")).unwrap();
    let (ok, said) = verify(&edited);
    assert!(!ok);
    assert!(
        said.contains("line 2") && said.contains("was changed"),
        "{said}"
    );
    // So is a removed one.
    let mut dropped: Vec<String> = out.lines().map(str::to_owned).collect();
    dropped.remove(1);
    let dropped_file = dir.path().join("dropped.jsonl");
    std::fs::write(&dropped_file, dropped.join("\n")).unwrap();
    let (ok, said) = verify(&dropped_file);
    assert!(
        !ok && said.contains("line 2") && said.contains("broken"),
        "{said}"
    );

    if !store.is_empty() {
        return;
    }
    // After kill -9 and a restart, the chain goes on from where it was.
    let lead = lead.crash_and_restart(&flags).await;
    let mut operator = lead.operator().await;
    operator
        .set_budget(pb::SetBudgetRequest {
            name: "ann".into(),
            token_budget: 2_000,
        })
        .await
        .unwrap();
    let (ok, out, err) = lead.cli(&["audit", "export", "--json"]).await;
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), entries.len() + 1);
    std::fs::write(&file, &out).unwrap();
    let (ok, said) = verify(&file);
    assert!(ok, "{said}");
    let (ok, table, _) = lead.cli(&["audit", "export"]).await;
    assert!(
        ok && table.contains("budget 2000") && table.contains("operator carol"),
        "{table}"
    );
    // --since takes a UTC time too: all of it since 1970, none from 2999.
    let (ok, all, err) = lead
        .cli(&[
            "audit",
            "export",
            "--json",
            "--since",
            "1970-01-01T00:00:00Z",
        ])
        .await;
    assert!(ok && all == out, "{err}");
    let (ok, none, err) = lead
        .cli(&[
            "audit",
            "export",
            "--json",
            "--since",
            "2999-01-01T00:00:00Z",
        ])
        .await;
    assert!(ok && none.trim().is_empty(), "{none}{err}");
}
