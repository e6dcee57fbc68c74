//! Owners by path (`--owners`): with `db/** @dba 2`, a plan touching
//! `db/schema.sql` stays pending after one DBA's approval and an admin's
//! (who is no owner), and is approved by the second DBA; the audit says
//! whom each approval counted for. A rejection by any reviewer ends such a
//! plan. `lead requests`, GetRequest and a machine's approval all hold to it.

use crate::common;
use mesh_tests::{oidc::OidcProvider, within, Lead, Operator};
use shared::pb;

const OWNERS: &str = "# who owns what\ndb/**   @dba 2\ndocs/   alice@example.com\n";

/// A lead taking the provider's tokens, with the owners file above.
async fn lead_of(provider: &OidcProvider, extra: &[&str]) -> Lead {
    let dir = tempfile::tempdir().expect("a tempdir");
    let owners = dir.path().join("OWNERS");
    std::fs::write(&owners, OWNERS).expect("the owners file");
    let owners = owners.display().to_string();
    let mut args = vec!["--owners", &owners];
    args.extend_from_slice(extra);
    // The lead reads the file at start; the directory may go after.
    common::lead_of(provider, &args).await
}

async fn as_person(lead: &Lead, provider: &OidcProvider, account: &str) -> Operator {
    let token = provider.login(account, "mesh").await.id_token;
    common::operator_with(lead, &token).await
}

async fn review(operator: &mut Operator, id: &str, approve: bool) {
    within(
        "ReviewPlan",
        operator.review_plan(pb::PlanReview {
            request_id: id.into(),
            approve,
            feedback: if approve {
                String::new()
            } else {
                "not this way".into()
            },
            grant: approve.then(|| pb::PermissionGrant {
                mode: pb::PermissionMode::AcceptEdits as i32,
                ..Default::default()
            }),
            ..Default::default()
        }),
    )
    .await
    .expect("ReviewPlan");
}

async fn state(operator: &mut Operator, id: &str) -> pb::ProtocolState {
    within(
        "GetRequest",
        operator.get_request(pb::GetRequestRequest {
            request_id: id.into(),
        }),
    )
    .await
    .expect("GetRequest")
    .into_inner()
}

#[tokio::test]
async fn a_plan_under_db_waits_for_two_dbas_and_not_for_anyone_else() {
    let provider = OidcProvider::start().await;
    let lead = lead_of(&provider, &[]).await;
    let mut operator = lead.operator().await;
    let mut dora = as_person(&lead, &provider, "dora").await;
    let mut dan = as_person(&lead, &provider, "dan").await;
    let mut adam = as_person(&lead, &provider, "adam").await;
    let mut bob = lead.join("bob").await;
    let id = "0b0e5a11-0000-4000-8000-000000000001";
    bob.submit(id, "the schema", &["db/schema.sql", "src/db.rs"])
        .await
        .expect("SubmitPlan");
    let pending = pb::RequestStatus::Pending as i32;
    let waiting = state(&mut operator, id).await;
    assert_eq!(waiting.waits_for, ["@dba: 0 of 2"], "{waiting:?}");

    review(&mut dora, id, true).await;
    let after_dora = state(&mut operator, id).await;
    assert_eq!(after_dora.status, pending, "one DBA of two: {after_dora:?}");
    assert_eq!(after_dora.waits_for, ["@dba: 1 of 2"]);
    review(&mut dora, id, true).await;
    assert_eq!(
        state(&mut operator, id).await.waits_for,
        ["@dba: 1 of 2"],
        "the same DBA twice counts once"
    );
    review(&mut adam, id, true).await;
    let after_adam = state(&mut operator, id).await;
    assert_eq!(
        after_adam.status, pending,
        "an admin is no owner: {after_adam:?}"
    );
    let last = after_adam.reviews.last().expect("a step");
    assert!(
        last.words.contains("does not count") && last.words.contains("@dba: 1 of 2"),
        "{last:?}"
    );
    let (ok, listed, err) = lead.cli(&["requests"]).await;
    assert!(ok, "{err}");
    assert!(listed.contains("(waits for @dba: 1 of 2)"), "{listed}");

    review(&mut dan, id, true).await;
    let decided = state(&mut operator, id).await;
    assert_eq!(
        decided.status,
        pb::RequestStatus::Approved as i32,
        "{decided:?}"
    );
    assert!(decided.waits_for.is_empty());
    let entry = common::audit_of(&lead, id).await;
    assert_eq!(entry["person"]["name"], "dan@example.com", "{entry}");
    assert_eq!(
        entry["owners"],
        serde_json::json!(["db/**: dora@example.com", "db/**: dan@example.com"]),
        "{entry}"
    );
}

#[tokio::test]
async fn any_reviewer_rejects_and_a_machine_approval_waits_for_the_owners() {
    let provider = OidcProvider::start().await;
    // Every plan approved at once, but for the owners'.
    let lead = lead_of(&provider, &["--approval", "auto"]).await;
    let mut operator = lead.operator().await;
    let mut dora = as_person(&lead, &provider, "dora").await;
    let mut alice = as_person(&lead, &provider, "alice").await;
    let mut bob = lead.join("bob").await;
    let owned = "0b0e5a11-0000-4000-8000-000000000002";
    bob.submit(owned, "the schema", &["db/schema.sql"])
        .await
        .expect("SubmitPlan");
    let held = state(&mut operator, owned).await;
    assert_eq!(held.status, pb::RequestStatus::Pending as i32, "{held:?}");
    assert!(
        held.reviews
            .iter()
            .any(|s| s.verdict == "waits" && s.words.contains("the owners decide")),
        "{held:?}"
    );
    review(&mut dora, owned, true).await;
    review(&mut alice, owned, false).await;
    let rejected = state(&mut operator, owned).await;
    assert_eq!(
        rejected.status,
        pb::RequestStatus::Rejected as i32,
        "a reviewer who owns nothing still rejects: {rejected:?}"
    );

    // A plan no rule covers is approved by the mode, as before.
    let mut carol = lead.join("carol").await;
    let free = "0b0e5a11-0000-4000-8000-000000000003";
    carol
        .submit(free, "the code", &["src/lib.rs"])
        .await
        .expect("SubmitPlan");
    let approved = state(&mut operator, free).await;
    assert_eq!(
        approved.status,
        pb::RequestStatus::Approved as i32,
        "{approved:?}"
    );
}
