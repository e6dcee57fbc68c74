//! The console's queue as an operator works through it, in real headless
//! Chromium: permission requests (a teammate is blocked on each) come before
//! plans; a denial says why in the operator's words; after a decision the
//! page says so and the focus goes to the next item; and while the lead
//! cannot be reached every control is disabled and the page says so.

#![allow(clippy::unwrap_used)]

use mesh_tests::{
    is,
    webdriver::{shots, Browser},
    Events, Lead, Member,
};
use shared::pb::{self, RequestStatus};

/// `member` with an approved plan in DEFAULT mode: each write asks.
async fn granted(lead: &Lead, operator: &mut mesh_tests::Operator, name: &str) -> Member {
    lead.granted(operator, name, &["src/*.rs"]).await
}

/// `member` asks to write `path`; the request's id.
async fn ask(member: &mut Member, path: &str) -> String {
    member
        .api
        .request_permission(pb::PermissionRequest {
            request_id: String::new(),
            tool: "write_file".into(),
            args_json: format!(r#"{{"path":"{path}","content":"x"}}"#),
        })
        .await
        .unwrap()
        .into_inner()
        .request_id
}

#[tokio::test]
async fn permissions_come_first_a_denial_says_why_and_the_focus_moves_on() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let browser = lead.console_browser().await;
    // An older plan, then two permission requests.
    let mut cleo = lead.join("cleo").await;
    cleo.submit(
        &uuid::Uuid::new_v4().to_string(),
        "old plan",
        &["docs/x.md"],
    )
    .await
    .unwrap();
    let mut ann = granted(&lead, &mut operator, "ann").await;
    let first = ask(&mut ann, "src/a.rs").await;
    let second = ask(&mut ann, "src/b.rs").await;
    browser
        .wait_for("[data-testid=permission]", "src/b.rs")
        .await;
    let order: Vec<String> = {
        let mut testids = Vec::new();
        for card in browser.all("#queue .card").await {
            let kind = browser
                .execute(
                    "return arguments[0].dataset.testid;",
                    vec![Browser::arg(&card)],
                )
                .await;
            testids.push(kind.as_str().unwrap_or_default().to_owned());
        }
        testids
    };
    assert_eq!(order, ["permission", "permission", "plan"]);

    // Denied with the operator's reason, which the request keeps.
    let card = browser
        .wait_for("[data-testid=permission]", "src/a.rs")
        .await;
    let reason = browser.within(&card, "[data-testid=deny-reason]").await;
    browser
        .type_into(&reason, "a.rs is frozen until the release")
        .await;
    browser
        .click(&browser.within(&card, "[data-testid=deny]").await)
        .await;
    let denied = events
        .request("the first request denied", |r| {
            r.request_id == first && is(r.status, RequestStatus::Rejected)
        })
        .await;
    assert_eq!(denied.feedback, "a.rs is frozen until the release");
    browser.wait_for("#queue-status", "denied.").await;
    // The focus is on what now comes first: the second request's card.
    let next = browser
        .wait_for("[data-testid=permission]", "src/b.rs")
        .await;
    let heading = browser.within(&next, "h3").await;
    mesh_tests::within("the focus on the next card", async {
        loop {
            let focused = browser
                .execute(
                    "return document.activeElement === arguments[0];",
                    vec![Browser::arg(&heading)],
                )
                .await;
            if focused == serde_json::json!(true) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    })
    .await;
    // And allowed from there.
    browser
        .click(&browser.within(&next, "[data-testid=allow]").await)
        .await;
    events
        .request("the second request allowed", |r| {
            r.request_id == second && is(r.status, RequestStatus::Approved)
        })
        .await;
    browser.wait_for("#queue-status", "allowed.").await;

    // How long reviews take: ann's plan and her two permissions were a
    // person's decisions, and the old plan still waits for one.
    browser
        .wait_for("[data-testid=waiting-now]", "1 plan (1 with a person")
        .await;
    // The person's row counts the three (its first cell is the count).
    browser
        .wait_for("[data-testid=wait-human] td:first-of-type", "3")
        .await;
    // As an operator sees it, at a desk and on a phone.
    browser.scroll_to("#waits-section").await;
    browser.screenshot(&shots().join("waits-1280.png")).await;
    browser.resize(390, 844).await;
    assert!(
        browser.sideways().await <= 0,
        "the wait times scroll sideways at 390 px"
    );
    browser.scroll_to("#waits-section").await;
    browser.screenshot(&shots().join("waits-390.png")).await;
    browser.quit().await;
}

#[tokio::test]
async fn a_lost_lead_disables_every_control_and_says_so() {
    let mut lead = Lead::start(&[]).await;
    let browser = lead.console_browser().await;
    let mut ann = lead.join("ann").await;
    ann.submit(&uuid::Uuid::new_v4().to_string(), "plan of ann", &["a"])
        .await
        .unwrap();
    let card = browser.wait_for("[data-testid=plan]", "plan of ann").await;
    let approve = browser.within(&card, "[data-testid=approve]").await;
    let disabled = browser
        .execute(
            "return arguments[0].disabled;",
            vec![Browser::arg(&approve)],
        )
        .await;
    assert_eq!(
        disabled,
        serde_json::json!(false),
        "enabled while the lead is there"
    );
    // The tab has been open an hour (its clock moved on an hour), and the
    // lead was heard from since: bob joined.
    let opened = browser
        .execute(
            "const real = Date.now.bind(Date); Date.now = () => real() + 3600000; return real();",
            vec![],
        )
        .await
        .as_f64()
        .unwrap();
    let _bob = lead.join("bob").await;
    browser.wait_for("tr[data-member=bob]", "bob").await;
    lead.terminate().await;
    browser.wait_for("#live", "offline").await;
    // Said at the top of the page too, and in the tab's title.
    browser
        .wait_for("[data-testid=lead-gone]", "The lead cannot be reached")
        .await;
    // Last heard from when bob joined, not when the tab connected; said
    // once; what the page shows greyed.
    let gone = browser
        .execute(
            "const b = document.querySelector('[data-testid=lead-gone]');\
             return [Number(b.dataset.at), document.body.innerText.split('cannot be reached').length - 1,\
                     getComputedStyle(document.querySelector('main')).opacity];",
            vec![],
        )
        .await;
    let at = gone[0].as_f64().unwrap();
    assert!(
        at >= opened + 3_600_000.0 - 60_000.0,
        "since {at}, the tab opened at {opened}: {gone}"
    );
    assert_eq!(gone[1], serde_json::json!(1), "said once: {gone}");
    assert_eq!(gone[2], serde_json::json!("0.55"), "{gone}");
    let title = browser.execute("return document.title", vec![]).await;
    assert!(
        title.as_str().unwrap().starts_with("(lead gone) (1)"),
        "{title}"
    );
    browser
        .screenshot(&shots().join("lead-gone-1280.png"))
        .await;
    let controls = browser
        .all("main button, main textarea, main input[type=text]")
        .await;
    assert!(controls.len() >= 3, "the plan's and the team's controls");
    for control in controls {
        let disabled = browser
            .execute(
                "return arguments[0].disabled;",
                vec![Browser::arg(&control)],
            )
            .await;
        assert_eq!(disabled, serde_json::json!(true));
    }
    browser.quit().await;
}
