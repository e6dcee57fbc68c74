//! The console's pages with their own addresses (issue 24): a request's
//! page with its whole timeline (submitted, each reviewer's words, the
//! revision it makes and what changed, the decision), reached by a link or
//! opened directly, and again after a reload; the task list with status
//! tabs; a member's page; the queue's keyboard shortcuts, listed on the
//! page; the grant modes explained where they are chosen. Screenshots go to
//! `target/console-shots/`.

#![allow(clippy::unwrap_used)]

use mesh_tests::{
    webdriver::{shots, Browser},
    Events, Lead,
};
use serde_json::Value;
use shared::pb;

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
        .wait_for("[data-testid=timeline]", "revises the first plan")
        .await;
    browser.wait_for("#page", "tests/a.rs").await;
    // What the revision changed, in order: the summary reworded in place.
    browser
        .wait_for("#page [data-testid=diff] .removed .code", "the first plan")
        .await;
    browser
        .wait_for("#page [data-testid=diff] .added .code", "the second plan")
        .await;
    browser
        .wait_for("[data-testid=modes]", "bypass: every tool runs")
        .await;
    browser.screenshot(&shots().join("request-1280.png")).await;
    browser.resize(390, 844).await;
    assert!(
        browser.sideways().await <= 0,
        "the request page scrolls sideways at 390 px"
    );
    browser.screenshot(&shots().join("request-390.png")).await;
    browser.resize(1280, 800).await;

    // The revision links to the plan it revises, whose page says how it ended.
    let revises = browser
        .wait_for("[data-testid=timeline] a", "the first plan")
        .await;
    assert_eq!(
        browser
            .execute(
                "return document.querySelector('[data-testid=timeline] a').title",
                vec![]
            )
            .await,
        serde_json::json!(first),
        "the whole id on hover"
    );
    browser.click(&revises).await;
    browser.wait_for("#page h2", "Plan: the first plan").await;
    // The operator's rejection is its decision, said once, with who took it.
    let decision = browser
        .wait_for("[data-testid=decision]", "rejected by operator: add a test")
        .await;
    // Its time today is a time, not a date that reads on from the words
    // ("add a test, 11/29/2026"); the whole of it on hover.
    let said = browser.text(&decision).await;
    assert!(
        !said.split_whitespace().any(|w| w.matches('/').count() == 2),
        "a date where the time says it: {said}"
    );
    assert!(
        !browser
            .execute(
                "return document.querySelector('[data-testid=decision] time').title",
                vec![]
            )
            .await
            .as_str()
            .unwrap_or_default()
            .is_empty(),
        "the whole time on hover"
    );
    assert!(
        browser.all("#page [data-testid=step]").await.is_empty(),
        "the deciding step is the decision, not a line of its own: {}",
        browser.page_text().await
    );

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
        browser.sideways().await <= 0,
        "the task list scrolls sideways at 390 px"
    );
    browser.screenshot(&shots().join("tasks-390.png")).await;
    browser.resize(1280, 800).await;

    // The team's page, at both widths.
    browser
        .open(&format!("{}#/team", lead.console.as_deref().unwrap()))
        .await;
    browser.wait_for("#page h2", "Team").await;
    browser.wait_for("#page", "ann").await;
    // ann holds nothing: "none" sits on the row's first line, beside
    // "tester" (a paragraph's margin put it a line low).
    let none_below_role = "const row = [...document.querySelectorAll('[data-testid=team-table] tr')] \
        .find((r) => r.textContent.includes('tester')); \
        const top = (el) => el.getBoundingClientRect().top; \
        const none = [...row.querySelectorAll('p')].find((p) => p.textContent === 'none'); \
        const role = [...row.querySelectorAll('td')].find((td) => td.textContent.endsWith('tester')); \
        return Math.round(top(none) - top(role));";
    let at_1280 = browser.execute(none_below_role, vec![]).await;
    assert!(at_1280.as_i64().is_some_and(|d| d.abs() <= 4), "{at_1280}");
    browser.screenshot(&shots().join("team-1280.png")).await;
    browser.resize(390, 844).await;
    assert!(
        browser.sideways().await <= 0,
        "the team page scrolls sideways at 390 px"
    );
    // On a phone, "holds: none" is one line, as "role: tester" is.
    let holds_lines = browser
        .execute(
            "const cell = [...document.querySelectorAll('[data-testid=team-table] td')] \
                .find((td) => td.textContent === 'none'); \
             const role = [...document.querySelectorAll('[data-testid=team-table] td')] \
                .find((td) => td.textContent === 'tester'); \
             return Math.round(cell.getBoundingClientRect().height - role.getBoundingClientRect().height);",
            vec![],
        )
        .await;
    assert!(
        holds_lines.as_i64().is_some_and(|d| d.abs() <= 2),
        "{holds_lines}"
    );
    browser.screenshot(&shots().join("team-390.png")).await;
    browser.resize(1280, 800).await;
    browser
        .open(&format!(
            "{}#/tasks/claimed",
            lead.console.as_deref().unwrap()
        ))
        .await;
    let row = browser
        .wait_for("[data-testid=task]", "write the printer")
        .await;

    // The owner's page, from the row.
    let owner = browser.within(&row, "[data-testid=task-owner]").await;
    browser.click(&owner).await;
    browser.wait_for("#page h2", "ann").await;
    browser
        .wait_for("#page", "write the printer (claimed)")
        .await;
    browser.quit().await;
}

/// The texts of the event log's lines, newest first.
async fn said(browser: &Browser) -> Vec<String> {
    match browser
        .execute(
            "return [...document.querySelectorAll('#events [data-testid=said]')].map((s) => s.textContent);",
            vec![],
        )
        .await
    {
        Value::Array(lines) => lines
            .into_iter()
            .map(|l| l.as_str().unwrap_or_default().to_owned())
            .collect(),
        other => panic!("the script answered {other}"),
    }
}

/// Waits until the event log's lines meet `pred` (the lead answers a
/// filter's page asynchronously).
async fn lines_until(
    browser: &Browser,
    what: &str,
    pred: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    mesh_tests::within(what, async {
        loop {
            let lines = said(browser).await;
            if pred(&lines) {
                return lines;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await
}

/// Chooses `value` in the select `css`, as a person would (a click on it).
async fn choose(browser: &Browser, css: &str, value: &str) {
    let option = browser
        .all(&format!("{css} option[value=\"{value}\"]"))
        .await
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no option {value} in {css}"));
    browser.click(&option).await;
}

#[tokio::test]
async fn the_event_history_survives_a_reload_and_a_restart_and_is_filtered_and_searched_on_sqlite()
{
    the_event_history_survives_a_reload_and_a_restart_and_is_filtered_and_searched().await;
}

#[tokio::test]
async fn the_event_history_survives_a_reload_and_a_restart_and_is_filtered_and_searched_on_postgres(
) {
    mesh_tests::on_postgres(
        the_event_history_survives_a_reload_and_a_restart_and_is_filtered_and_searched(),
    )
    .await;
}

async fn the_event_history_survives_a_reload_and_a_restart_and_is_filtered_and_searched() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut ann = lead.join("ann").await;
    let mut bob = lead.join("bob").await;
    ann.open_inbox(0).await;
    bob.open_inbox(0).await;
    let plan = ann
        .api
        .submit_plan(pb::PlanApprovalRequest {
            plan: Some(plan("ann's plan", &["src/a.rs"], &["t"])),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .request_id;
    mesh_tests::approve(&mut operator, &plan).await;
    bob.api
        .report_tool_call(pb::ToolCallReport {
            tool: "run_command".into(),
            args_json: r#"{"command":"make parser"}"#.into(),
            allowed: true,
            outcome: "compiled the parser".into(),
            ..Default::default()
        })
        .await
        .unwrap();

    // Opened after it happened, and again after a reload: the history.
    let browser = lead.console_browser().await;
    browser.execute("location.hash = '#/events'", vec![]).await;
    browser.wait_for("#events", "ann's plan was approved").await;
    browser.wait_for("#events", "compiled the parser").await;
    browser
        .open(&format!("{}#/events", lead.console.as_deref().unwrap()))
        .await;
    browser.wait_for("#events", "ann's plan was approved").await;
    let lines = said(&browser).await;
    let mut unique = lines.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), lines.len(), "said once: {lines:?}");

    // Filters, applied by the lead.
    browser.wait_for("#event-filter", "bob").await;
    choose(&browser, "#event-filter", "bob").await;
    lines_until(&browser, "bob's events only", |lines| {
        lines.iter().any(|l| l.contains("compiled the parser"))
            && lines.iter().all(|l| !l.contains("ann's plan"))
    })
    .await;
    choose(&browser, "#event-filter", "").await;
    choose(&browser, "#event-kind", "request").await;
    lines_until(&browser, "requests only", |lines| {
        lines.iter().any(|l| l.contains("ann's plan was approved"))
            && lines
                .iter()
                .all(|l| !l.contains("compiled") && !l.contains("joined"))
    })
    .await;
    choose(&browser, "#event-kind", "").await;
    let search = browser.wait_for("#event-search", "").await;
    browser.type_into(&search, "parser").await;
    lines_until(&browser, "the one line about the parser", |lines| {
        lines.len() == 1 && lines[0].contains("compiled the parser")
    })
    .await;
    browser.screenshot(&shots().join("events-1280.png")).await;
    browser.resize(390, 844).await;
    assert!(
        browser.sideways().await <= 0,
        "the event log scrolls sideways at 390 px"
    );
    browser.scroll_to("#events-section").await;
    browser.screenshot(&shots().join("events-390.png")).await;
    browser.quit().await;

    // After the lead was stopped and started again on its store. (Killed
    // with -9, it may lose the last second of its event log: history.rs.)
    let lead = lead.restart(&[]).await;
    let browser = lead.console_browser().await;
    browser.execute("location.hash = '#/events'", vec![]).await;
    browser.wait_for("#events", "ann's plan was approved").await;
    browser.wait_for("#events", "compiled the parser").await;
    browser.quit().await;
}

/// A permission card shows what the write would change: `write_file`'s
/// content against the file as it is now in the teammate's workspace (a
/// teammate this lead spawned), line by line. Writes
/// `target/console-shots/permission-1280.png`.
#[tokio::test]
async fn a_permission_card_shows_the_change_against_the_file_as_it_is() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let workspace = lead.dir.path().join("ws-ann");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("notes.txt"), "the old line\nkept\n").unwrap();
    let script = lead.script(
        "ann",
        r#"
[[plans]]
summary = "reword the notes"
files = ["notes.txt"]
tests = ["read them"]

[[actions]]
phase = "work"
tool = "write_file"
path = "notes.txt"
content = "the new line\nkept\n"
"#,
    );
    let (ok, _, err) = lead
        .cli(&[
            "spawn",
            "ann",
            "--role",
            "writer",
            "--script",
            script.to_str().unwrap(),
            "--workspace",
            workspace.to_str().unwrap(),
        ])
        .await;
    assert!(ok, "{err}");
    let plan = events
        .request("ann's plan", |r| {
            r.r#type == pb::RequestType::PlanApproval as i32
                && mesh_tests::is(r.status, pb::RequestStatus::Pending)
        })
        .await;
    // DEFAULT: each write asks.
    let (ok, _, err) = lead
        .cli(&["approve", &plan.request_id, "--mode", "default"])
        .await;
    assert!(ok, "{err}");
    let browser = lead.console_browser().await;
    browser
        .wait_for("[data-testid=permission] h3", "ann asks to write notes.txt")
        .await;
    browser
        .wait_for("[data-testid=write-diff] .removed .code", "the old line")
        .await;
    browser
        .wait_for("[data-testid=write-diff] .added .code", "the new line")
        .await;
    browser
        .wait_for("[data-testid=write-diff] .same", "kept")
        .await;
    browser
        .screenshot(&shots().join("permission-1280.png"))
        .await;
    browser.quit().await;
}

/// A new file of `lines` lines as `git diff` writes it.
fn new_file_diff(path: &str, lines: usize) -> String {
    let mut diff = format!(
        "diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n\
         @@ -0,0 +1,{lines} @@\n"
    );
    for n in 0..lines {
        diff.push_str(&format!("+line {n:05} of {path}: {}\n", "x".repeat(40)));
    }
    diff
}

/// `alice` claims a new result-reviewed task and submits a new file of
/// about 512 KiB against main's head; the result's id.
async fn big_result(
    operator: &mut mesh_tests::Operator,
    alice: &mut mesh_tests::Member,
    n: usize,
) -> String {
    let task = operator
        .create_task(pb::CreateTaskRequest {
            subject: format!("file {n}"),
            review: pb::TaskReview::Result as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    alice
        .api
        .claim_task(pb::ClaimTaskRequest {
            task_id: task.task_id.clone(),
        })
        .await
        .unwrap();
    let head = alice
        .api
        .get_repo(pb::GetRepoRequest::default())
        .await
        .unwrap()
        .into_inner()
        .head;
    alice
        .api
        .submit_result(pb::ResultRequest {
            task_id: task.task_id,
            base: head,
            diff: new_file_diff(&format!("f{n:02}.txt"), 8192),
            summary: format!("Add file {n}"),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .request_id
}

#[tokio::test]
async fn the_first_load_holds_no_diff_and_a_result_fetches_its_own() {
    let repo = mesh_tests::git::team_repo();
    let repo_path = repo.path().display().to_string();
    let lead = Lead::start(&["--repo", &repo_path, "--branch", "main"]).await;
    let mut operator = lead.operator().await;
    let mut alice = lead.join("alice").await;
    // 50 results of 512 KiB each, landed: a day of work the lead keeps.
    let mut landed = Vec::new();
    for n in 0..50 {
        let id = big_result(&mut operator, &mut alice, n).await;
        operator
            .review_result(pb::ResultReview {
                request_id: id.clone(),
                approve: true,
                feedback: String::new(),
            })
            .await
            .unwrap();
        alice
            .next_matching(|e| {
                matches!(&e.body, Some(pb::envelope::Body::ResultResponse(r))
                    if r.request_id == id && r.approve)
            })
            .await;
        landed.push(id);
    }
    // And one waiting in the queue.
    let waiting = big_result(&mut operator, &mut alice, 50).await;

    let console = lead.console.clone().unwrap();
    let http = mesh_tests::webdriver::http_client(reqwest::Client::builder());
    let started = std::time::Instant::now();
    let state = http
        .get(format!("{console}api/state"))
        .bearer_auth(&lead.operator_token)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    println!(
        "the console's first load: {} bytes in {:?} with 51 results of 512 KiB kept",
        state.len(),
        started.elapsed()
    );
    // On the landed main it was every diff: about 26 MiB.
    assert!(state.len() < 200 * 1024, "{} bytes", state.len());
    let state: Value = serde_json::from_slice(&state).unwrap();
    let requests = state["requests"].as_array().unwrap();
    assert_eq!(
        requests.iter().filter(|r| r["type"] == "result").count(),
        51
    );
    let brief = requests
        .iter()
        .find(|r| r["request_id"] == landed[7].as_str())
        .unwrap();
    assert_eq!(brief["payload"]["result"]["summary"], "Add file 7");
    assert_eq!(brief["payload"]["result"]["files"][0]["path"], "f07.txt");
    assert!(brief["payload_bytes"].as_u64().unwrap() > 512 * 1024);

    // A request whole, by its id; an id it does not know, said.
    let whole: Value = http
        .get(format!("{console}api/request?request_id={}", landed[7]))
        .bearer_auth(&lead.operator_token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let diff = whole["payload"]["result"]["diff"].as_str().unwrap();
    assert!(diff.len() > 512 * 1024 && diff.contains("+line 08191 of f07.txt"));
    let unknown = http
        .get(format!(
            "{console}api/request?request_id={}",
            uuid::Uuid::new_v4()
        ))
        .bearer_auth(&lead.operator_token)
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), reqwest::StatusCode::NOT_FOUND);

    // The waiting result's card fetches its diff; a landed one's page too.
    let browser = lead.console_browser().await;
    let card = format!("#queue [data-request-id='{waiting}']");
    browser
        .wait_for(&format!("{card} [data-testid=diff]"), "f50.txt")
        .await;
    // The first 400 lines drawn; the rest on a click.
    browser.wait_for(&card, "line 00399 of f50.txt").await;
    let more = browser
        .wait_for(
            &format!("{card} [data-testid=more-lines]"),
            "show 7792 more lines",
        )
        .await;
    browser.click(&more).await;
    browser.wait_for(&card, "line 08191 of f50.txt").await;
    browser
        .open(&format!("{console}#/requests/{}", landed[7]))
        .await;
    browser.wait_for("#page h2", "Result: Add file 7").await;
    browser
        .wait_for("#page [data-testid=diff]", "line 00399 of f07.txt")
        .await;
    browser.quit().await;
}

/// Every kind of page, opened directly at both widths, with no script error
/// in the page: the queue, a plan's page and a permission's, the tasks, the
/// team, a live member (whose plan waits: its status says so) and one that
/// left. A live member's page threw `waiting.get is not a function` before.
#[tokio::test]
async fn every_page_opens_without_a_script_error_at_both_widths() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let browser = lead.console_browser().await;
    let task = operator
        .create_task(pb::CreateTaskRequest {
            subject: "write the parser".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    // ann: connected, its task claimed, its plan waiting.
    let mut ann = lead.join("ann").await;
    ann.open_inbox(0).await;
    ann.api
        .claim_task(pb::ClaimTaskRequest {
            task_id: task.task_id.clone(),
        })
        .await
        .unwrap();
    let plan_id = ann
        .api
        .submit_plan(pb::PlanApprovalRequest {
            plan: Some(pb::Plan {
                task_id: task.task_id.clone(),
                ..plan("the parser", &["src/parser.rs"], &[])
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .request_id;
    // cy: approved in default mode, asking to write.
    let mut cy = lead.granted(&mut operator, "cy", &["docs/*.md"]).await;
    cy.open_inbox(0).await;
    let permission = cy
        .api
        .request_permission(pb::PermissionRequest {
            request_id: String::new(),
            tool: "write_file".into(),
            args_json: r#"{"path":"docs/a.md","content":"fn main() {\n    println!(\"x\");\n}\n"}"#
                .into(),
        })
        .await
        .unwrap()
        .into_inner()
        .request_id;
    // cy asks to add a file to its plan.
    let amendment = cy
        .api
        .request_amendment(pb::AmendmentRequest {
            files: vec!["docs/b.md".into()],
            why: "the index links it".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .request_id;
    // ann's process starts and has used nothing yet: no news for the log.
    ann.api
        .report_usage(pb::UsageReport {
            epoch: "e1".into(),
            totals: Some(pb::Usage::default()),
        })
        .await
        .unwrap();
    // bo: left the team.
    let mut bo = lead.join("bo").await;
    bo.api
        .leave(pb::LeaveRequest {
            reason: "done".into(),
        })
        .await
        .unwrap();

    let base = lead.console.as_deref().unwrap().to_owned();
    let pages = [
        ("queue", String::new(), "#queue", "the parser"),
        (
            "plan",
            format!("#/requests/{plan_id}"),
            "#page h2",
            "Plan: the parser",
        ),
        (
            "permission",
            format!("#/requests/{permission}"),
            "#page",
            "docs/a.md",
        ),
        (
            "amendment",
            format!("#/requests/{amendment}"),
            "#page h2",
            "Amendment: cy asks to add docs/b.md",
        ),
        (
            "decided",
            "#/decided".to_owned(),
            "[data-testid=decided]",
            "cy's plan was approved",
        ),
        ("events", "#/events".to_owned(), "#events", "cy asks to add"),
        (
            "tasks",
            "#/tasks".to_owned(),
            "[data-testid=task]",
            "write the parser",
        ),
        (
            "task",
            format!("#/task/{}", task.task_id),
            "[data-testid=task-requests]",
            "Plan: the parser",
        ),
        (
            "team",
            "#/team".to_owned(),
            "[data-testid=team-table]",
            "ann",
        ),
        (
            "member-live",
            "#/members/ann".to_owned(),
            "[data-testid=member-status]",
            "waiting for review of its plan",
        ),
        (
            "member-ended",
            "#/members/bo".to_owned(),
            "[data-testid=member-status]",
            "terminated",
        ),
    ];
    // The queue: what waits is counted in the tab's title; the log has no
    // line for a process that used nothing, and says the day of an event
    // that is not today's.
    browser.open(&format!("{base}#/events")).await;
    browser.wait_for("#events", "bo").await;
    assert_eq!(
        browser.execute("return document.title", vec![]).await,
        "(3) mesh console"
    );
    let log = browser.text(&browser.wait_for("#events", "").await).await;
    assert!(!log.contains("used 0 tokens"), "{log}");
    let year = chrono_year();
    let today = browser.execute("return whenText(Date.now())", vec![]).await;
    let earlier = browser
        .execute("return whenText(Date.now() - 3 * 86400000)", vec![])
        .await;
    assert!(!today.as_str().unwrap().contains(&year), "{today}");
    assert!(earlier.as_str().unwrap().contains(&year), "{earlier}");
    // The team page: each member's status in words, its task, its holds.
    browser.open(&format!("{base}#/team")).await;
    let status = |name: &str| format!("[data-member={name}] [data-testid=team-status]");
    browser
        .wait_for(&status("ann"), "waiting for review of its plan")
        .await;
    browser
        .wait_for(&status("cy"), "waiting for a permission")
        .await;
    // bo has ended: folded under "ended (1)".
    browser
        .click(
            &browser
                .wait_for("[data-testid=team-ended] summary", "ended (1)")
                .await,
        )
        .await;
    browser.wait_for(&status("bo"), "terminated").await;
    browser
        .wait_for("[data-member=ann]", "write the parser")
        .await;
    browser.wait_for("[data-member=cy]", "docs/*.md").await;
    // A held path keeps its name whole where the table has room for it
    // (it broke as "docs/*.m" over "d", the column squeezed to a letter).
    browser.resize(1280, 800).await;
    let held_lines = browser
        .execute(
            "const li = [...document.querySelectorAll('[data-member=cy] li')] \
                .find((li) => li.textContent === 'docs/*.md'); \
             const range = document.createRange(); \
             range.selectNodeContents(li); \
             return range.getClientRects().length;",
            vec![],
        )
        .await;
    assert_eq!(held_lines.as_i64(), Some(1), "{held_lines}");
    // A plan's page links its task's page, which lists the plan and says
    // who has the task.
    browser.open(&format!("{base}#/requests/{plan_id}")).await;
    let link = browser.wait_for("#page a", "write the parser").await;
    browser.click(&link).await;
    browser.wait_for("#page h2", "Task: write the parser").await;
    browser
        .wait_for("[data-testid=task-status]", "claimed by ann")
        .await;
    browser
        .wait_for("[data-testid=task-requests]", "Plan: the parser")
        .await;

    for (width, height) in [(1280, 800), (390, 844)] {
        browser.resize(width, height).await;
        for (name, hash, css, text) in &pages {
            browser.open(&format!("{base}{hash}")).await;
            browser.wait_for(css, text).await;
            let errors = browser.script_errors().await;
            assert!(
                errors.is_empty(),
                "the {name} page at {width} px: {errors:?}"
            );
            assert!(
                browser.sideways().await <= 0,
                "the {name} page scrolls sideways at {width} px"
            );
            browser
                .screenshot(&shots().join(format!("tour-{name}-{width}.png")))
                .await;
        }
    }
    browser.quit().await;
}

/// This year, as the page's dates write it (UTC; the tests do not run at
/// midnight on New Year's Eve).
fn chrono_year() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 86_400;
    // Days to a civil year (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2)).to_string()
}
