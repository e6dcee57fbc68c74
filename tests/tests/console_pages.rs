//! The console's pages with their own addresses (issue 24): a request's
//! page with its whole timeline (submitted, each reviewer's words, the
//! revision it makes and what changed, the decision), reached by a link or
//! opened directly, and again after a reload; the task list with status
//! tabs; a member's page; the queue's keyboard shortcuts, listed on the
//! page; the grant modes explained where they are chosen. Screenshots go to
//! `target/console-shots/`.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use mesh_tests::{webdriver::Browser, Events, Lead};
use serde_json::Value;
use shared::pb;

fn shots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/console-shots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// How far the page is wider than its window (0: it does not scroll sideways).
async fn sideways(browser: &Browser) -> i64 {
    match browser
        .execute(
            "return document.documentElement.scrollWidth - window.innerWidth;",
            vec![],
        )
        .await
    {
        Value::Number(n) => n.as_i64().unwrap_or(i64::MAX),
        other => panic!("the script answered {other}"),
    }
}

fn plan(summary: &str, files: &[&str], tests: &[&str]) -> pb::Plan {
    pb::Plan {
        summary: summary.into(),
        files: files.iter().map(|f| f.to_string()).collect(),
        tests: tests.iter().map(|t| t.to_string()).collect(),
        steps: vec!["write it".into()],
        ..Default::default()
    }
}

#[tokio::test]
async fn a_request_has_its_own_page_with_its_timeline_by_link_directly_and_after_a_reload() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let browser = lead.console_browser().await;
    let mut ann = lead.join("ann").await;
    let first = ann
        .api
        .submit_plan(pb::PlanApprovalRequest {
            plan: Some(plan("the first plan", &["src/a.rs"], &[])),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .request_id;
    operator
        .review_plan(pb::PlanReview {
            request_id: first.clone(),
            approve: false,
            feedback: "add a test".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let second = ann
        .api
        .submit_plan(pb::PlanApprovalRequest {
            plan: Some(plan(
                "the second plan",
                &["src/a.rs", "tests/a.rs"],
                &["tests/a.rs"],
            )),
            supersedes: first.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .request_id;

    // From the queue, by its link.
    let link = browser
        .wait_for("#queue [data-testid=plan] h3 a", "the second plan")
        .await;
    browser.click(&link).await;
    browser.wait_for("#page h2", "Plan: the second plan").await;
    browser
        .wait_for("[data-testid=timeline]", &format!("revises {first}"))
        .await;
    browser.wait_for("#page", "tests/a.rs").await;
    browser
        .wait_for("[data-testid=modes]", "bypass: every tool runs")
        .await;
    browser.screenshot(&shots().join("request-1280.png")).await;
    browser.resize(390, 844).await;
    assert!(
        sideways(&browser).await <= 0,
        "the request page scrolls sideways at 390 px"
    );
    browser.screenshot(&shots().join("request-390.png")).await;
    browser.resize(1280, 800).await;

    // The revision links to the plan it revises, whose page says how it ended.
    let revises = browser.wait_for("[data-testid=timeline] a", &first).await;
    browser.click(&revises).await;
    browser.wait_for("#page h2", "Plan: the first plan").await;
    browser
        .wait_for("[data-testid=decision]", "rejected: add a test")
        .await;
    browser
        .wait_for("[data-testid=step]", "operator: reject — add a test")
        .await;

    // Opened directly, as a bookmark or after a reload.
    let url = format!("{}#/requests/{second}", lead.console.as_deref().unwrap());
    browser.open(&url).await;
    browser.wait_for("#page h2", "Plan: the second plan").await;
    browser
        .wait_for("#page [data-testid=timeline]", "submitted")
        .await;

    // The keys, listed on the queue: j to the first card, a to approve it.
    browser
        .open(&format!("{}#/", lead.console.as_deref().unwrap()))
        .await;
    browser.wait_for("[data-testid=shortcuts]", "j next").await;
    browser
        .wait_for("#queue [data-testid=plan] h3", "the second plan")
        .await;
    browser.press("j").await;
    browser.press("a").await;
    events
        .request("the second plan to be approved by a key", |r| {
            r.request_id == second && mesh_tests::is(r.status, pb::RequestStatus::Approved)
        })
        .await;
    let approved = operator
        .get_request(pb::GetRequestRequest {
            request_id: second.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        approved
            .reviews
            .iter()
            .any(|s| s.reviewer == "operator (console)"),
        "{:?}",
        approved.reviews
    );
    browser.quit().await;
}

#[tokio::test]
async fn the_task_list_has_status_tabs_and_members_have_pages() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let browser = lead.console_browser().await;
    let mut ids = Vec::new();
    for subject in ["write the parser", "write the printer", "write the docs"] {
        let task = operator
            .create_task(pb::CreateTaskRequest {
                subject: subject.into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        ids.push(task.task_id);
    }
    let mut ann = lead.join("ann").await;
    ann.api
        .claim_task(pb::ClaimTaskRequest {
            task_id: ids[1].clone(),
        })
        .await
        .unwrap();

    let nav = browser.wait_for("[data-testid=nav-tasks]", "Tasks").await;
    browser.click(&nav).await;
    browser.wait_for("[data-testid=tab-all]", "all (3)").await;
    browser
        .wait_for("[data-testid=tab-pending]", "pending (2)")
        .await;
    let claimed = browser
        .wait_for("[data-testid=tab-claimed]", "claimed (1)")
        .await;
    browser.click(&claimed).await;
    let row = browser
        .wait_for("[data-testid=task]", "write the printer")
        .await;
    assert_eq!(browser.all("[data-testid=task]").await.len(), 1);
    assert!(browser.text(&row).await.contains("ann"));
    browser.screenshot(&shots().join("tasks-1280.png")).await;
    browser.resize(390, 844).await;
    assert!(
        sideways(&browser).await <= 0,
        "the task list scrolls sideways at 390 px"
    );
    browser.screenshot(&shots().join("tasks-390.png")).await;
    browser.resize(1280, 800).await;

    // The owner's page, from the row.
    let owner = browser.within(&row, "a").await;
    browser.click(&owner).await;
    browser.wait_for("#page h2", "ann").await;
    browser
        .wait_for("#page", "write the printer (claimed)")
        .await;
    browser.quit().await;
}
