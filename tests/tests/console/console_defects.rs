//! Four defects an operator hit in the console, each shown in real headless
//! Chromium: a waiting time that never moved; a plan that an overlap made
//! after it was sent could not be approved from the page; a shutdown reason
//! wiped (and its focus lost) on every redraw; "approved files" that were the
//! last approved plan's rather than what the member holds now.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use mesh_tests::{approve, is, webdriver::Browser, within, Events, Lead, Member};
use shared::pb::{self, RequestStatus};

/// `member`'s plan of `files`; its request id.
async fn plan(member: &mut Member, summary: &str, files: &[&str]) -> String {
    member
        .submit(&uuid::Uuid::new_v4().to_string(), summary, files)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_waiting_time_moves_on() {
    let lead = Lead::start(&[]).await;
    let browser = lead.console_browser().await;
    let mut ann = lead.join("ann").await;
    plan(&mut ann, "plan of ann", &["src/a.rs"]).await;
    let card = browser.wait_for("[data-testid=plan]", "plan of ann").await;
    let waiting = browser.within(&card, "[data-testid=waiting]").await;
    let first = browser.text(&waiting).await;
    within("the waiting time to move on", async {
        loop {
            let now = browser.text(&waiting).await;
            if now != first {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    browser.quit().await;
}

#[tokio::test]
async fn a_plan_overlapped_after_it_was_sent_is_approved_from_the_page() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let browser = lead.console_browser().await;
    let mut ann = lead.join("ann").await;
    let mut bob = lead.join("bob").await;
    let anns = plan(&mut ann, "plan of ann", &["src/a.rs"]).await;
    let bobs = plan(&mut bob, "plan of bob", &["src/a.rs"]).await;
    let card = browser.wait_for("[data-testid=plan]", "plan of bob").await;
    // Ann's plan approved after bob's was sent: now bob's overlaps her hold.
    approve(&mut operator, &anns).await;
    browser.wait_for("tr[data-member=ann]", "src/a.rs").await;
    browser
        .click(&browser.within(&card, "[data-testid=approve]").await)
        .await;
    let refused = browser
        .wait_for("[data-testid=plan] .error", "allow the overlap")
        .await;
    let said = browser.text(&refused).await;
    assert!(
        !said.contains("--allow-overlap"),
        "the page's words: {said}"
    );
    browser
        .click(&browser.within(&card, "[data-testid=allow-overlap]").await)
        .await;
    browser
        .click(&browser.within(&card, "[data-testid=approve]").await)
        .await;
    events
        .request("bob's plan approved", |r| {
            r.request_id == bobs && is(r.status, RequestStatus::Approved)
        })
        .await;
    browser.quit().await;
}

#[tokio::test]
async fn a_shutdown_reason_keeps_its_text_and_focus_through_redraws() {
    let lead = Lead::start(&[]).await;
    let browser = lead.console_browser().await;
    let _carl = lead.join("carl").await;
    let row = browser.wait_for("tr[data-member=carl]", "carl").await;
    browser
        .click(
            &browser
                .within(&row, "[data-testid=shut-menu] summary")
                .await,
        )
        .await;
    let reason = browser.within(&row, "input").await;
    browser.type_into(&reason, "going home").await;
    // The team table is redrawn: a member joins, another's usage changes.
    let mut dee = lead.join("dee").await;
    browser.wait_for("tr[data-member=dee]", "dee").await;
    dee.api
        .report_usage(pb::UsageReport {
            epoch: "e1".into(),
            totals: Some(pb::Usage {
                prompt_tokens: 70,
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    browser.wait_for("tr[data-member=dee]", "70").await;
    assert_eq!(browser.property(&reason, "value").await, "going home");
    let focused = browser
        .execute(
            "return document.activeElement === arguments[0];",
            vec![Browser::arg(&reason)],
        )
        .await;
    assert_eq!(
        focused,
        serde_json::json!(true),
        "the reason keeps its focus"
    );
    browser.quit().await;
}

/// Waits until the team table shows `name` holding nothing (read afresh
/// each time: a redrawn row is a new element).
async fn holds_empty(browser: &Browser, name: &str) {
    within(&format!("{name}'s holds to empty"), async {
        loop {
            let cells = browser
                .all(&format!("tr[data-member={name}] [data-testid=holds]"))
                .await;
            if let Some(cell) = cells.first() {
                // Its text whether shown or not (an ended member's card is
                // not shown beside the queue).
                if browser.property(cell, "textContent").await.is_empty() {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn the_team_shows_what_a_member_holds_now() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let browser = lead.console_browser().await;
    let mut ann = lead.join("ann").await;
    let task = operator
        .create_task(pb::CreateTaskRequest {
            subject: "write a".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    ann.api
        .claim_task(pb::ClaimTaskRequest {
            task_id: task.task_id.clone(),
        })
        .await
        .unwrap();
    let anns = ann
        .api
        .submit_plan(pb::PlanApprovalRequest {
            request_id: uuid::Uuid::new_v4().to_string(),
            plan: Some(pb::Plan {
                summary: "plan of ann".into(),
                files: vec!["src/a.rs".into()],
                task_id: task.task_id.clone(),
                ..Default::default()
            }),
            supersedes: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .request_id;
    approve(&mut operator, &anns).await;
    browser.wait_for("tr[data-member=ann]", "src/a.rs").await;
    // Her task completed: the hold for it ends, though her plan stays approved.
    ann.api
        .complete_task(pb::CompleteTaskRequest {
            task_id: task.task_id,
            summary: "done".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    holds_empty(&browser, "ann").await;
    // Another leaves the team: its hold ends with it.
    let mut bo = lead.join("bo").await;
    let bos = plan(&mut bo, "plan of bo", &["src/b.rs"]).await;
    approve(&mut operator, &bos).await;
    browser.wait_for("tr[data-member=bo]", "src/b.rs").await;
    bo.api
        .leave(pb::LeaveRequest {
            reason: "done".into(),
        })
        .await
        .unwrap();
    // Beside the queue an ended member is a line that links the team page.
    browser.wait_for("#team-ended-note", "1 ended (bo)").await;
    holds_empty(&browser, "bo").await;
    // The column says what it shows: its header (kept for screen readers
    // where the team is a card per member, as beside the queue at 1280 px)
    // and each cell's label.
    let header = browser.wait_for("#team th:nth-child(7)", "").await;
    assert_eq!(browser.property(&header, "textContent").await, "Holds");
    let row = browser.wait_for("tr[data-member=ann]", "ann").await;
    let cell = browser.within(&row, "[data-testid=holds]").await;
    let label = browser
        .execute(
            "return arguments[0].dataset.label;",
            vec![Browser::arg(&cell)],
        )
        .await;
    assert_eq!(label.as_str(), Some("Holds"));
    browser.quit().await;
}
