//! Operators from the tests' OpenID provider, each with the role their
//! groups give them: a reviewer's token decides and the audit names them; a
//! viewer's is denied a decision through gRPC, the console and A2A; tokens
//! that have expired, are for another audience, come from another issuer or
//! are signed by a key the provider does not publish are unauthenticated;
//! a key the provider rotated is taken without restarting the lead.

use crate::common::{lead_of, operator_with};
use mesh_tests::{
    oidc::{Forge, OidcProvider},
    within,
};
use serde_json::Value;
use shared::pb;
use tonic::Code;

fn approve(request_id: &str) -> pb::PlanReview {
    pb::PlanReview {
        request_id: request_id.into(),
        approve: true,
        grant: Some(pb::PermissionGrant {
            mode: pb::PermissionMode::AcceptEdits as i32,
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_reviewer_decides_and_is_named_and_a_viewer_is_denied_everywhere() {
    let provider = OidcProvider::start().await;
    let lead = lead_of(&provider, &[]).await;
    let alice = provider.login("alice", "mesh").await;
    let victor = provider.login("victor", "mesh").await;
    let mut member = lead.join("bob").await;
    let plan = member
        .submit(
            "8e0b1c2a-0000-4000-8000-000000000001",
            "the docs",
            &["docs/a.md"],
        )
        .await
        .expect("SubmitPlan");

    // The viewer reads, and is denied the decision, with the role needed.
    let mut as_victor = operator_with(&lead, &victor.id_token).await;
    within(
        "ListTeam",
        as_victor.list_team(pb::ListTeamRequest::default()),
    )
    .await
    .expect("a viewer reads the team");
    let denied = within("ReviewPlan", as_victor.review_plan(approve(&plan)))
        .await
        .expect_err("a viewer may not decide");
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    assert!(
        denied.message().contains("needs the reviewer role")
            && denied.message().contains("victor@example.com is a viewer"),
        "{}",
        denied.message()
    );
    let spawn = within(
        "SpawnTeammate",
        as_victor.spawn_teammate(pb::SpawnTeammateRequest::default()),
    )
    .await
    .expect_err("a viewer may not spawn");
    assert_eq!(spawn.code(), Code::PermissionDenied, "{spawn:?}");

    // The console's Approve and A2A's SendMessage, with the viewer's token.
    let console = lead.console.clone().expect("a console");
    let http = reqwest::Client::new();
    let answer = http
        .post(format!("{console}api/approve"))
        .bearer_auth(&victor.id_token)
        .json(&serde_json::json!({"request_id": plan}))
        .send()
        .await
        .expect("the console answers");
    let status = answer.status().as_u16();
    let body = answer.text().await.unwrap_or_default();
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("needs the reviewer role"), "{body}");
    let answer = http
        .post(format!("{console}a2a/rest/message:send"))
        .bearer_auth(&victor.id_token)
        .header("A2A-Version", "1.0")
        .header("content-type", "application/json")
        .body(
            serde_json::json!({"message": {"messageId": "m-victor", "role": "ROLE_USER",
                "parts": [{"text": "Write the docs"}]}})
            .to_string(),
        )
        .send()
        .await
        .expect("A2A answers");
    let status = answer.status().as_u16();
    let body = answer.text().await.unwrap_or_default();
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("needs the reviewer role"), "{body}");

    // The reviewer approves; the audit names her, as the provider does.
    let mut as_alice = operator_with(&lead, &alice.id_token).await;
    let decided = within("ReviewPlan", as_alice.review_plan(approve(&plan)))
        .await
        .expect("a reviewer decides")
        .into_inner();
    assert!(decided.approve, "{decided:?}");
    let audit = within(
        "ListAudit",
        as_victor.list_audit(pb::ListAuditRequest::default()),
    )
    .await
    .expect("a viewer reads the audit")
    .into_inner();
    let entry: Value = audit
        .entries
        .iter()
        .map(|e| serde_json::from_str::<Value>(e).expect("JSON"))
        .find(|e| e["subject"] == plan.as_str())
        .expect("the plan's decision in the audit");
    assert_eq!(entry["by"], "operator alice@example.com", "{entry}");
    assert_eq!(entry["person"]["name"], "alice@example.com", "{entry}");
    assert_eq!(entry["person"]["subject"], "alice", "{entry}");
    assert_eq!(entry["person"]["issuer"], provider.issuer(), "{entry}");
    assert_eq!(entry["person"]["role"], "reviewer", "{entry}");
    // `lead audit verify` covers the person: the trail as written checks,
    // and one with the person's name changed does not.
    let path = lead.dir.path().join("audit.jsonl");
    std::fs::write(&path, audit.entries.join("\n") + "\n").expect("write the audit");
    assert_eq!(
        verify(&path),
        (
            true,
            format!("ok: {} entries, the chain holds\n", audit.entries.len())
        )
    );
    let forged = audit
        .entries
        .join("\n")
        .replace("\"alice@example.com\"", "\"mallory@example.com\"");
    std::fs::write(&path, forged + "\n").expect("write the audit");
    let (ok, said) = verify(&path);
    assert!(!ok && said.contains("was changed"), "{said}");
}

/// `lead audit verify PATH`: whether it passed, and what it said.
fn verify(path: &std::path::Path) -> (bool, String) {
    let out = std::process::Command::new(mesh_tests::bin("lead"))
        .args(["audit", "verify"])
        .arg(path)
        .output()
        .expect("lead audit verify");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[tokio::test]
async fn tokens_that_are_not_valid_now_for_this_lead_are_unauthenticated() {
    let provider = OidcProvider::start().await;
    let other_issuer = OidcProvider::start().await;
    let lead = lead_of(&provider, &[]).await;
    let expired = provider
        .forge(&Forge {
            exp_offset: -3600,
            ..Forge::new("alice")
        })
        .await;
    let other_audience = provider.login("alice", "other").await.id_token;
    let foreign = other_issuer.login("alice", "mesh").await.id_token;
    let unknown_key = provider
        .forge(&Forge {
            unknown_key: true,
            ..Forge::new("alice")
        })
        .await;
    let cases = [
        (expired, "has expired"),
        (other_audience, "another audience"),
        (foreign, "another issuer"),
        (unknown_key, "a key the provider does not publish"),
    ];
    for (token, why) in cases {
        let mut client = operator_with(&lead, &token).await;
        let refused = within("ListTeam", client.list_team(pb::ListTeamRequest::default()))
            .await
            .expect_err("refused");
        assert_eq!(refused.code(), Code::Unauthenticated, "{why}: {refused:?}");
        assert!(
            refused.message().contains(why),
            "{why}: {}",
            refused.message()
        );
    }
    // A good one, for contrast: each algorithm the provider signs with.
    for alg in ["RS256", "ES256", "EdDSA"] {
        let token = provider.login_with_alg("adam", "mesh", alg).await.id_token;
        let mut client = operator_with(&lead, &token).await;
        within("ListTeam", client.list_team(pb::ListTeamRequest::default()))
            .await
            .unwrap_or_else(|e| panic!("{alg}: {e:?}"));
    }
}

#[tokio::test]
async fn a_key_rotated_at_the_provider_is_taken_without_a_restart() {
    let provider = OidcProvider::start().await;
    let lead = lead_of(&provider, &[]).await;
    let before = provider.login("alice", "mesh").await.id_token;
    let mut client = operator_with(&lead, &before).await;
    within("ListTeam", client.list_team(pb::ListTeamRequest::default()))
        .await
        .expect("the first key");
    let provider = provider.restart_with_new_keys().await;
    let after = provider.login("alice", "mesh").await.id_token;
    let mut client = operator_with(&lead, &after).await;
    // The lead fetches the keys again on a kid it does not know, at most
    // once every 10 s: the new token is taken within that.
    let taken = within("the rotated key", async {
        loop {
            match client.list_team(pb::ListTeamRequest::default()).await {
                Ok(_) => return,
                Err(e) if e.code() == Code::Unauthenticated => {
                    assert!(
                        e.message().contains("does not publish"),
                        "only the unknown key may refuse it: {e:?}"
                    );
                    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                }
                Err(e) => panic!("{e:?}"),
            }
        }
    })
    .await;
    let () = taken;
}
