//! The console says where a member stands in an operator's words (issue
//! 24): a member whose plan or permission waits for a decision is
//! "waiting", not "working", and a disconnected one may come back.

#![allow(clippy::unwrap_used)]

use mesh_tests::{approve, Lead};
use shared::pb;

#[tokio::test]
async fn a_member_waiting_for_a_decision_is_shown_waiting_not_working() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let browser = lead.console_browser().await;
    let status = "tr[data-member=ann] [data-testid=status]";
    let mut ann = lead.join("ann").await;
    browser
        .wait_for(status, "disconnected (it may come back)")
        .await;
    ann.open_inbox(0).await;
    browser.wait_for(status, "working").await;
    let plan = ann
        .submit(
            &uuid::Uuid::new_v4().to_string(),
            "plan of ann",
            &["src/a.rs"],
        )
        .await
        .unwrap();
    browser
        .wait_for(status, "waiting for review of its plan")
        .await;
    approve(&mut operator, &plan).await;
    browser.wait_for(status, "working").await;
    ann.api
        .request_permission(pb::PermissionRequest {
            request_id: uuid::Uuid::new_v4().to_string(),
            tool: "run_command".into(),
            args_json: r#"{"command":"make"}"#.into(),
        })
        .await
        .unwrap();
    browser.wait_for(status, "waiting for a permission").await;
    browser.quit().await;
}
