//! The web console in real headless Chromium (Debian's `chromium` and
//! `chromium-driver`, through WebDriver), and every console endpoint without
//! the operator token.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use mesh_tests::{
    webdriver::{http_client, Browser},
    Events, Lead,
};
use shared::pb;

const ALICE: &str = r#"
[[plans]]
summary = "Add a"
files = ["src/a.rs"]
steps = ["write src/a.rs"]

[[plans]]
summary = "Add a, with a test"
files = ["src/a.rs", "tests/a_test.rs"]
tests = ["tests/a_test.rs"]
steps = ["write src/a.rs", "write tests/a_test.rs"]

[[actions]]
phase = "work"
tool = "write_file"
path = "src/a.rs"
content = "pub fn a() {}\n"

[shutdown]
approve = true
reason = "a is written"
"#;

/// Where the screenshots go: `target/console/`.
fn shots() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/console")
}

#[tokio::test]
async fn an_operator_reviews_and_shuts_down_from_the_console() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let url = lead.console.clone().expect("the console is on");
    let browser = Browser::start(1280, 800).await;

    // A wrong token gets the login form again, and nothing else.
    browser.open(&url).await;
    let token = browser.wait_for("#token", "").await;
    browser.type_into(&token, "not-the-token").await;
    browser
        .click(&browser.wait_for("#login", "Log in").await)
        .await;
    browser.wait_for(".error", "not the operator token").await;
    assert!(browser.all("#queue").await.is_empty());

    browser.log_in(&lead.operator_token).await;

    // What a member's model used and its budget show without a reload, and
    // so does the team's total.
    let mut dora = lead.join("dora").await;
    let totals = pb::Usage {
        prompt_tokens: 1_000,
        completion_tokens: 234,
        calls: 3,
        model_ms: 2_100,
    };
    dora.api
        .report_usage(pb::UsageReport {
            epoch: "e1".into(),
            totals: Some(totals),
        })
        .await
        .unwrap();
    operator
        .set_budget(pb::SetBudgetRequest {
            name: "dora".into(),
            token_budget: 5_000,
        })
        .await
        .unwrap();
    let row = browser.wait_for("tr[data-member=dora]", "5,000").await;
    let tokens = browser
        .text(&browser.within(&row, "[data-testid=tokens]").await)
        .await;
    assert_eq!(tokens, "1,234");
    browser
        .wait_for("#team-usage", "Team total: 1,234 tokens")
        .await;

    // A teammate's plan appears without a reload.
    let mut alice = lead.teammate("alice", ALICE);
    let plan = browser.wait_for("[data-testid=plan]", "Add a").await;
    browser.scroll_to("header").await;
    browser.screenshot(&shots().join("queue.png")).await;
    let feedback = browser.within(&plan, "[data-testid=feedback]").await;
    browser.type_into(&feedback, "add a test for a").await;
    browser
        .click(&browser.within(&plan, "[data-testid=reject]").await)
        .await;

    // The revision shows what changed and which feedback it answers.
    let revision = browser
        .wait_for("[data-testid=plan]", "Add a, with a test")
        .await;
    let diff = browser
        .text(&browser.within(&revision, "[data-testid=diff]").await)
        .await;
    assert!(diff.contains("It answers: add a test for a"), "{diff}");
    assert!(diff.contains("tests/a_test.rs"), "{diff}");
    browser
        .wait_for(
            "[data-testid=plan] [data-testid=diff] .added .code",
            "tests/a_test.rs",
        )
        .await;
    browser.screenshot(&shots().join("revision.png")).await;
    browser
        .click(&browser.within(&revision, "[data-testid=approve]").await)
        .await;

    // The teammate writes its file.
    events
        .tool_call("alice's write", |t| t.tool == "write_file" && t.allowed)
        .await;
    assert_eq!(
        std::fs::read_to_string(lead.workspace("alice").join("src/a.rs")).unwrap(),
        "pub fn a() {}\n"
    );
    browser.wait_for("#queue", "Nothing waits for you").await;
    browser
        .wait_for("tr[data-member=alice]", "tests/a_test.rs")
        .await;
    browser.scroll_to("header").await;
    browser.screenshot(&shots().join("team.png")).await;

    // Shut alice down from the page and see it end.
    let row = browser.wait_for("tr[data-member=alice]", "alice").await;
    browser
        .click(
            &browser
                .within(&row, "[data-testid=shut-menu] summary")
                .await,
        )
        .await;
    browser
        .type_into(&browser.within(&row, "input").await, "done for today")
        .await;
    browser
        .click(&browser.within(&row, "[data-testid=shutdown]").await)
        .await;
    // Beside the queue she is a line that links the team page, where she
    // is folded under "ended" with how her shutdown ended.
    let note = browser
        .wait_for("#team-ended-note", "1 ended (alice)")
        .await;
    browser.click(&browser.within(&note, "a").await).await;
    browser
        .click(
            &browser
                .wait_for("[data-testid=team-ended] summary", "ended (1)")
                .await,
        )
        .await;
    browser
        .wait_for(
            "[data-testid=team-ended] [data-member=alice]",
            "agreed: a is written",
        )
        .await;
    assert!(alice.exit().await.success());
    let request = events
        .request("the shutdown", |r| {
            r.r#type == pb::RequestType::Shutdown as i32
                && r.status == pb::RequestStatus::Approved as i32
        })
        .await;
    assert_eq!(request.target, "alice");

    // The event log (a page of its own), filtered by member, and a
    // phone-width window.
    browser.execute("location.hash = '#/events'", vec![]).await;
    browser.wait_for("#events", "alice").await;
    browser.resize(390, 844).await;
    browser.scroll_to("header").await;
    browser.screenshot(&shots().join("phone.png")).await;
    browser.quit().await;
}

#[tokio::test]
async fn every_console_endpoint_refuses_a_missing_or_wrong_token() {
    let lead = Lead::start(&[]).await;
    let url = lead.console.clone().expect("the console is on");
    let _alice = lead.join("alice").await;
    let http = http_client(reqwest::Client::builder());
    let gets = ["api/state", "api/stats", "api/events", "app.js"];
    let posts = [
        ("api/approve", r#"{"request_id":"x"}"#),
        ("api/reject", r#"{"request_id":"x","feedback":"no"}"#),
        ("api/permission", r#"{"request_id":"x","approve":true}"#),
        ("api/shutdown", r#"{"name":"alice","reason":"r"}"#),
    ];
    let ways: [(&str, Option<(&str, String)>); 4] = [
        ("no credentials", None),
        (
            "a wrong bearer token",
            Some(("authorization", "Bearer wrong".into())),
        ),
        (
            "the join token",
            Some(("authorization", format!("Bearer {}", lead.join_token))),
        ),
        (
            "a made-up session",
            Some(("cookie", "mesh_console=forged".into())),
        ),
    ];
    for (how, header) in &ways {
        for path in gets {
            let mut request = http.get(format!("{url}{path}"));
            if let Some((name, value)) = header {
                request = request.header(*name, value);
            }
            let status = request.send().await.unwrap().status();
            assert_eq!(status, 401, "GET /{path} with {how}");
        }
        for (path, body) in posts {
            let mut request = http
                .post(format!("{url}{path}"))
                .header("content-type", "application/json")
                .body(body);
            if let Some((name, value)) = header {
                request = request.header(*name, value);
            }
            let status = request.send().await.unwrap().status();
            assert_eq!(status, 401, "POST /{path} with {how}");
        }
        let mut request = http.get(&url);
        if let Some((name, value)) = header {
            request = request.header(*name, value);
        }
        let page = request.send().await.unwrap().text().await.unwrap();
        assert!(
            page.contains("Operator token") && !page.contains("app.js"),
            "/ with {how}"
        );
    }
    // Nothing changed: alice was not asked to shut down.
    let mut operator = lead.operator().await;
    let requests = operator
        .list_requests(pb::ListRequestsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .requests;
    assert!(requests.is_empty(), "{requests:?}");

    // The operator token works, as a bearer and through the login form.
    let state = http
        .get(format!("{url}api/state"))
        .header("authorization", format!("Bearer {}", lead.operator_token))
        .send()
        .await
        .unwrap();
    assert_eq!(state.status(), 200);
    let wrong = http
        .post(format!("{url}login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("token=wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let no_redirects =
        http_client(reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()));
    let right = no_redirects
        .post(format!("{url}login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={}", lead.operator_token))
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), 303);
    let cookie = right
        .headers()
        .get("set-cookie")
        .unwrap()
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let state = http
        .get(format!("{url}api/state"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(state.status(), 200);
}

/// The console's actions answer as the operator service does: bad input is
/// refused naming the field, with the HTTP status of its gRPC code, and good
/// input decides.
#[tokio::test]
async fn console_actions_validate_and_decide_like_the_operator_service() {
    let lead = Lead::start(&[]).await;
    let url = lead.console.clone().expect("the console is on");
    let http = http_client(reqwest::Client::builder());
    let bearer = format!("Bearer {}", lead.operator_token);
    let post = |path: &str, body: serde_json::Value| {
        http.post(format!("{url}{path}"))
            .header("authorization", &bearer)
            .json(&body)
            .send()
    };
    let mut bob = lead.join("bob").await;
    let plan = bob.submit("", "edit b", &["src/b.rs"]).await.unwrap();

    // Rejecting needs feedback; an unknown request is not found; a bad mode is named.
    let answer = post(
        "api/reject",
        serde_json::json!({"request_id": plan, "feedback": " "}),
    )
    .await
    .unwrap();
    assert_eq!(answer.status(), 400);
    let text = answer.text().await.unwrap();
    assert!(text.contains("feedback"), "{text}");
    let answer = post(
        "api/approve",
        serde_json::json!({"request_id": "00000000-0000-4000-8000-000000000000"}),
    )
    .await
    .unwrap();
    assert_eq!(answer.status(), 404);
    let answer = post(
        "api/approve",
        serde_json::json!({"request_id": plan, "mode": "yolo"}),
    )
    .await
    .unwrap();
    assert_eq!(answer.status(), 400);
    assert!(answer.text().await.unwrap().contains("mode"));
    // An unknown member is INVALID_ARGUMENT in the contract: 400, naming the field.
    let answer = post("api/shutdown", serde_json::json!({"name": "nobody"}))
        .await
        .unwrap();
    assert_eq!(answer.status(), 400);
    assert!(answer.text().await.unwrap().contains("target"));

    // Approve in DEFAULT mode; then a permission request is allowed from the console.
    let answer = post(
        "api/approve",
        serde_json::json!({"request_id": plan, "mode": "default"}),
    )
    .await
    .unwrap();
    assert_eq!(answer.status(), 200);
    let asked = bob
        .api
        .request_permission(pb::PermissionRequest {
            request_id: String::new(),
            tool: "write_file".into(),
            args_json: r#"{"path":"src/b.rs","content":"x"}"#.into(),
        })
        .await
        .unwrap()
        .into_inner();
    let answer = post(
        "api/permission",
        serde_json::json!({"request_id": asked.request_id, "approve": true}),
    )
    .await
    .unwrap();
    assert_eq!(answer.status(), 200);
    let mut operator = lead.operator().await;
    let state = operator
        .get_request(pb::GetRequestRequest {
            request_id: asked.request_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(state.status, pb::RequestStatus::Approved as i32);
    let decided = operator
        .get_request(pb::GetRequestRequest { request_id: plan })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        decided.reviews.last().unwrap().reviewer,
        "operator (console)"
    );
}
