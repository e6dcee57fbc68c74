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
    // A command is shown before it runs: the card and the page name it,
    // the page in a code block with where it runs and under what.
    browser
        .wait_for("[data-testid=permission] h3", "ann asks to run `make`")
        .await;
    browser
        .execute(
            "document.querySelector('[data-testid=permission] h3 a').click()",
            vec![],
        )
        .await;
    browser.wait_for("#page h2", "ann asks to run `make`").await;
    browser
        .wait_for("#page [data-testid=command]", "make")
        .await;
    browser
        .wait_for("#page [data-testid=command-where]", "in ann's workspace")
        .await;
    browser
        .wait_for("#page [data-testid=command-sandbox]", "It runs under")
        .await;
    browser.quit().await;
}

#[tokio::test]
async fn the_event_log_says_what_happened_once_in_sentences() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let browser = lead.console_browser().await;
    let mut ann = lead.join("ann").await;
    ann.open_inbox(0).await;
    let plan = ann
        .submit(
            &uuid::Uuid::new_v4().to_string(),
            "plan of ann",
            &["src/a.rs"],
        )
        .await
        .unwrap();
    browser.execute("location.hash = '#/events'", vec![]).await;
    browser
        .wait_for("#events", "ann sent a plan for review")
        .await;
    approve(&mut operator, &plan).await;
    browser.wait_for("#events", "ann's plan was approved").await;
    browser
        .wait_for("#events", "ann may now work in accept-edits mode")
        .await;
    let lines: Vec<String> = match browser
        .execute(
            "return [...document.querySelectorAll('#events [data-testid=said]')].map((s) => s.textContent);",
            vec![],
        )
        .await
    {
        serde_json::Value::Array(lines) => lines
            .into_iter()
            .map(|l| l.as_str().unwrap_or_default().to_owned())
            .collect(),
        other => panic!("the script answered {other}"),
    };
    let said: Vec<&str> = lines.iter().map(String::as_str).collect();
    assert!(said.contains(&"ann joined as tester"), "{said:#?}");
    assert!(
        !said.iter().any(|s| s.contains("ann is disconnected")),
        "a member that joins is not 'disconnected': {said:#?}"
    );
    for line in said.iter().filter(|s| !s.contains('→')) {
        assert_eq!(
            said.iter().filter(|s| *s == line).count(),
            1,
            "{line:?} is said once: {said:#?}"
        );
    }
    browser.quit().await;
}
