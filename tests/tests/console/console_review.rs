//! The console as an operator keeps it open all day (issue 39), in
//! headless Chromium at 1280x800 and 390x844: queue cards of a line or two,
//! opened one at a time by click or key; long file lists grouped by folder;
//! overlaps shown the moment they become true and gone when they end;
//! grants readable in full; a request's page that says each thing once (a
//! permission as a diff that keeps its indentation, its arguments behind a
//! disclosure; a revision's changes with the rest folded; plans and results
//! linked to their task and to each other); the decided requests and the
//! event log on pages of their own, paged, searched in what they show, each
//! event linked; new items marked since the last look; opt-in
//! notifications. Screenshots go to `target/console-shots/review-*.png`.

#![allow(clippy::unwrap_used)]

use mesh_tests::{webdriver::Browser, Lead};
use serde_json::{json, Value};
use shared::pb;

fn plan(summary: &str, files: &[&str]) -> pb::Plan {
    pb::Plan {
        summary: summary.into(),
        files: files.iter().map(|f| f.to_string()).collect(),
        steps: vec!["write it".into(), "test it".into()],
        ..Default::default()
    }
}

/// Runs `script` until it returns something other than null or false;
/// that.
async fn until(browser: &Browser, what: &str, script: &str, args: Vec<Value>) -> Value {
    mesh_tests::within(what, async {
        loop {
            let got = browser.execute(script, args.clone()).await;
            if !got.is_null() && got != json!(false) {
                return got;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await
}

/// Which queue cards show their body, in order.
async fn open_bodies(browser: &Browser) -> Value {
    browser
        .execute(
            "return [...document.querySelectorAll('#queue .card')].map((c) => !c.querySelector('.body').hidden);",
            vec![],
        )
        .await
}

async fn submit(member: &mut mesh_tests::Member, plan: pb::Plan) -> String {
    member
        .api
        .submit_plan(pb::PlanApprovalRequest {
            plan: Some(plan),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .request_id
}

/// `member`'s result for `task_id`: `diff` against the team branch's head.
#[tokio::test]
async fn queue_cards_are_a_line_each_opened_one_at_a_time_with_live_overlaps_and_readable_grants() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let browser = lead.console_browser().await;
    let base = lead.console.clone().unwrap();

    // ann's plan names 12 files; cleo's one that nobody holds yet.
    let mut ann = lead.join("ann").await;
    let mut files: Vec<String> = (0..10).map(|n| format!("src/parser/part{n}.rs")).collect();
    files.push("tests/parser.rs".into());
    files.push("README.md".into());
    let ann_files: Vec<&str> = files.iter().map(String::as_str).collect();
    let first = submit(&mut ann, plan("the parser in parts", &ann_files)).await;
    let mut cleo = lead.join("cleo").await;
    let second = submit(&mut cleo, plan("the shared helpers", &["src/shared.rs"])).await;
    browser
        .wait_for("#queue [data-testid=plan]", "the shared helpers")
        .await;

    // A line each, the first open: what, who, kind, age, file count.
    assert_eq!(open_bodies(&browser).await, json!([true, false]));
    let line = |id: &str| format!("#queue [data-request-id='{id}'] [data-testid=card-line]");
    browser.wait_for(&line(&first), "plan from ann").await;
    browser.wait_for(&line(&first), "12 files").await;
    browser.wait_for(&line(&second), "plan from cleo").await;
    let closed = browser
        .execute(
            "return document.querySelector(`#queue [data-request-id='${arguments[0]}']`).getBoundingClientRect().height;",
            vec![json!(second)],
        )
        .await;
    assert!(
        closed.as_f64().unwrap() < 90.0,
        "a closed card is a line or two: {closed} px"
    );
    // The long list grouped by folder, with counts.
    browser
        .wait_for("#queue [data-testid=file-groups]", "src/parser/ (10 files)")
        .await;
    // Every glob the approval would grant, a line each, none clipped.
    let globs = browser
        .execute(
            "const g = document.querySelector(`#queue [data-request-id='${arguments[0]}'] [data-testid=globs]`);\
             return [g.value.split('\\n').length, g.scrollWidth <= g.clientWidth, Number(g.rows)];",
            vec![json!(first)],
        )
        .await;
    assert_eq!(globs, json!([12, true, 12]));
    browser.clean_shot("review-queue", 1280).await;

    // By click: the second opens, the first closes.
    let card = browser
        .wait_for(&format!("#queue [data-request-id='{second}']"), "")
        .await;
    browser
        .click(&browser.within(&card, "[data-testid=toggle]").await)
        .await;
    until(
        &browser,
        "the second card open",
        "return [...document.querySelectorAll('#queue .card')].map((c) => !c.querySelector('.body').hidden).join() === 'false,true';",
        vec![],
    )
    .await;
    // By key: k to the one before, which opens.
    browser.press("k").await;
    until(
        &browser,
        "the first card open by the key",
        "return [...document.querySelectorAll('#queue .card')].map((c) => !c.querySelector('.body').hidden).join() === 'true,false';",
        vec![],
    )
    .await;

    // dee is granted src/shared.rs: cleo's waiting plan overlaps it now,
    // said on its card's line at once, and in its body.
    let mut dee = lead.join("dee").await;
    let dee_plan = submit(&mut dee, plan("shared, by dee", &["src/shared.rs"])).await;
    let long_globs: Vec<String> = (0..14)
        .map(|n| format!("src/a/rather/long/folder/name/number/{n:02}/with/more/**/*.rs"))
        .chain(["src/shared.rs".to_owned()])
        .collect();
    operator
        .review_plan(pb::PlanReview {
            request_id: dee_plan.clone(),
            approve: true,
            grant: Some(pb::PermissionGrant {
                mode: pb::PermissionMode::Default as i32,
                write_paths: long_globs.clone(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    browser.wait_for(&line(&second), "overlaps dee").await;
    browser.press("j").await;
    browser
        .wait_for(
            &format!("#queue [data-request-id='{second}'] [data-testid=overlap]"),
            "overlaps dee: src/shared.rs",
        )
        .await;
    browser.clean_shot("review-queue-overlap", 1280).await;
    browser.resize(390, 844).await;
    browser.wait_for(&line(&second), "overlaps dee").await;
    browser.clean_shot("review-queue-overlap", 390).await;
    browser.resize(1280, 800).await;
    // And on the plan's own page.
    browser.open(&format!("{base}#/requests/{second}")).await;
    browser
        .wait_for("#page [data-testid=overlap]", "overlaps dee: src/shared.rs")
        .await;
    // dee leaves: the overlap has ended, on the page as it is.
    dee.api
        .leave(pb::LeaveRequest {
            reason: "done".into(),
        })
        .await
        .unwrap();
    until(
        &browser,
        "the overlap gone from the page",
        "return document.querySelectorAll('#page [data-testid=overlap]').length === 0;",
        vec![],
    )
    .await;

    // What dee was granted, in full: its mode and every glob, wrapped.
    for (width, height) in [(1280, 800), (390, 844)] {
        browser.resize(width, height).await;
        browser.open(&format!("{base}#/requests/{dee_plan}")).await;
        browser
            .wait_for("#page [data-testid=grant]", "Granted: default mode")
            .await;
        let shown = browser
            .text(&browser.wait_for("#page [data-testid=grant]", "").await)
            .await;
        for glob in &long_globs {
            assert!(shown.contains(glob.as_str()), "{glob} in {shown}");
        }
        browser.clean_shot("review-grant", width).await;
        browser.open(&format!("{base}#/")).await;
        browser.wait_for(&line(&first), "12 files").await;
        browser.clean_shot("review-queue", width).await;
    }
    browser.quit().await;
}

#[tokio::test]
async fn a_request_page_says_each_thing_once_a_permission_as_a_diff_and_links_plans_results_and_tasks(
) {
    let repo = mesh_tests::git::team_repo();
    let repo_path = repo.path().display().to_string();
    let lead = Lead::start(&["--repo", &repo_path, "--branch", "main"]).await;
    let mut operator = lead.operator().await;
    let browser = lead.console_browser().await;
    let base = lead.console.clone().unwrap();

    // bob claims a task, its plan is approved in default mode, and it asks
    // to edit an indented line.
    let task = operator
        .create_task(pb::CreateTaskRequest {
            subject: "tidy the library".into(),
            review: pb::TaskReview::Result as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut bob = lead.join("bob").await;
    bob.open_inbox(0).await;
    bob.api
        .claim_task(pb::ClaimTaskRequest {
            task_id: task.task_id.clone(),
        })
        .await
        .unwrap();
    let bob_plan = submit(
        &mut bob,
        pb::Plan {
            task_id: task.task_id.clone(),
            ..plan("tidy src/lib.rs", &["src/lib.rs"])
        },
    )
    .await;
    operator
        .review_plan(pb::PlanReview {
            request_id: bob_plan.clone(),
            approve: true,
            grant: Some(pb::PermissionGrant {
                mode: pb::PermissionMode::Default as i32,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    let permission = bob
        .api
        .request_permission(pb::PermissionRequest {
            request_id: String::new(),
            tool: "edit_file".into(),
            args_json: json!({
                "path": "src/lib.rs",
                "old": "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}",
                "new": "pub fn add(a: u32, b: u32) -> u32 {\n    a.saturating_add(b)\n}",
            })
            .to_string(),
        })
        .await
        .unwrap()
        .into_inner()
        .request_id;

    for (width, height) in [(1280, 800), (390, 844)] {
        browser.resize(width, height).await;
        // The permission: the tool and the path, the change as a diff that
        // keeps its indentation, marked, not struck through; the call's
        // arguments behind a disclosure; one decision form.
        browser
            .open(&format!("{base}#/requests/{permission}"))
            .await;
        browser
            .wait_for("#page h2", "bob asks to edit src/lib.rs")
            .await;
        let removed = until(
            &browser,
            "the removed line",
            "const s = document.querySelector('#page .code-diff .removed');\
             return s && [s.querySelector('.mark').textContent, s.querySelector('.code').textContent,\
                          getComputedStyle(s.querySelector('.code')).textDecorationLine];",
            vec![],
        )
        .await;
        // The mark in a column of its own; the changed words marked.
        assert_eq!(removed, json!(["-", "    a + b", "none"]));
        let added = browser
            .execute(
                "const s = document.querySelector('#page .code-diff .added');\
                 return [s.querySelector('.code').textContent, s.querySelector('mark.word-new').textContent];",
                vec![],
            )
            .await;
        assert_eq!(
            added,
            json!(["    a.saturating_add(b)", ".saturating_add(b)"])
        );
        let once = browser
            .execute(
                "const d = document.querySelector('#page [data-testid=arguments]');\
                 return [document.querySelectorAll('#page .code-diff').length,\
                         document.querySelectorAll('#page [data-testid=allow]').length,\
                         d.open, d.querySelector('summary').textContent];",
                vec![],
            )
            .await;
        assert_eq!(once, json!([1, 1, false, "edit_file's full arguments"]));
        browser.clean_shot("review-permission", width).await;
    }
    browser.resize(1280, 800).await;
    operator
        .review_permission(pb::PermissionReview {
            request_id: permission.clone(),
            approve: true,
            ..Default::default()
        })
        .await
        .unwrap();

    // bob's result: under its plan, for its task; each page links the
    // others, and the result's page shows its diff once.
    let result = bob
        .submit_result_at_head(
            &task.task_id,
            "diff --git a/src/lib.rs b/src/lib.rs\n--- a/src/lib.rs\n+++ b/src/lib.rs\n\
         @@ -1 +1,2 @@\n pub fn one() -> u32 { 1 }\n+// tidy\n",
            "the library, tidied",
        )
        .await;
    for (width, height) in [(1280, 800), (390, 844)] {
        browser.resize(width, height).await;
        browser.open(&format!("{base}#/requests/{result}")).await;
        browser
            .wait_for("#page [data-testid=plan-link]", "tidy src/lib.rs")
            .await;
        browser
            .wait_for("#page [data-testid=task-link]", "tidy the library")
            .await;
        browser
            .wait_for("#page [data-testid=diff]", "// tidy")
            .await;
        let once = browser
            .execute(
                "return [document.querySelectorAll('#page [data-testid=diff]').length,\
                         document.querySelectorAll('#page [data-testid=approve]').length];",
                vec![],
            )
            .await;
        assert_eq!(once, json!([1, 1]));
        browser.clean_shot("review-result", width).await;
    }
    browser.resize(1280, 800).await;
    // The plan's page: its grant, its result, its task; its steps once.
    let link = browser
        .wait_for("#page [data-testid=plan-link]", "tidy src/lib.rs")
        .await;
    browser.click(&link).await;
    browser.wait_for("#page h2", "Plan: tidy src/lib.rs").await;
    browser
        .wait_for(
            "#page [data-testid=grant]",
            "Granted: default mode; it may write the plan's files",
        )
        .await;
    browser
        .wait_for("#page [data-testid=followed-by]", "the library, tidied")
        .await;
    let steps = browser
        .execute(
            "return [...document.querySelectorAll('#page div')].filter((d) => d.textContent === 'Steps:').length;",
            vec![],
        )
        .await;
    assert_eq!(steps, json!(1));

    // A revision: what changed, and the whole plan folded under it.
    let mut cy = lead.join("cy").await;
    let rejected = submit(&mut cy, plan("the printer", &["src/print.rs"])).await;
    operator
        .review_plan(pb::PlanReview {
            request_id: rejected.clone(),
            approve: false,
            feedback: "name its test".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let revision = cy
        .api
        .submit_plan(pb::PlanApprovalRequest {
            plan: Some(pb::Plan {
                tests: vec!["tests/print.rs".into()],
                ..plan("the printer, tested", &["src/print.rs"])
            }),
            supersedes: rejected,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .request_id;
    for (width, height) in [(1280, 800), (390, 844)] {
        browser.resize(width, height).await;
        browser.open(&format!("{base}#/requests/{revision}")).await;
        browser
            .wait_for("#page [data-testid=diff] .added .code", "tests/print.rs")
            .await;
        let folded = until(
            &browser,
            "the whole plan folded",
            "const w = document.querySelector('#page [data-testid=whole-plan]');\
             return w && [w.open, document.querySelectorAll('#page [data-testid=approve]').length];",
            vec![],
        )
        .await;
        assert_eq!(folded, json!([false, 1]));
        browser.clean_shot("review-revision", width).await;
    }
    browser.quit().await;
}

#[tokio::test]
async fn decided_requests_and_events_are_pages_of_their_own_paged_searched_linked_and_marked_new() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let base = lead.console.clone().unwrap();

    // 55 plans of ann's rejected, one naming a file the log never shows.
    let mut ann = lead.join("ann").await;
    for n in 0..55 {
        let files: &[&str] = if n == 0 {
            &["src/hidden_name.rs"]
        } else {
            &["src/a.rs"]
        };
        let id = submit(&mut ann, plan(&format!("plan {n}"), files)).await;
        operator
            .review_plan(pb::PlanReview {
                request_id: id,
                approve: false,
                feedback: format!("not yet {n}"),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    // bob refuses to shut down.
    let mut bob = lead.join("bob").await;
    bob.open_inbox(0).await;
    let ticket = operator
        .request_shutdown(pb::ShutdownRequest {
            target: "bob".into(),
            reason: "the day is over".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    bob.api
        .respond_shutdown(pb::ShutdownResponse {
            request_id: ticket.request_id.clone(),
            approve: false,
            reason: "busy with the parser".into(),
        })
        .await
        .unwrap();

    let browser = lead.console_browser().await;
    for (width, height) in [(1280, 800), (390, 844)] {
        browser.resize(width, height).await;
        // The decided requests: their own page, 50 at a time, in words.
        browser.open(&format!("{base}#/decided")).await;
        browser
            .wait_for("[data-testid=decided-count]", "1–50 of 56")
            .await;
        browser
            .wait_for(
                "[data-testid=decided]",
                "bob refused to shut down: busy with the parser",
            )
            .await;
        let lead_links = browser.all("a[href='#/members/lead']").await;
        assert!(lead_links.is_empty(), "the lead is not a member");
        browser.clean_shot("review-decided", width).await;
        let older = browser
            .wait_for("[data-testid=decided-older]", "older")
            .await;
        browser.click(&older).await;
        browser
            .wait_for("[data-testid=decided-count]", "51–56 of 56")
            .await;
        browser
            .wait_for(
                "[data-testid=decided]",
                "ann's plan was rejected: not yet 0",
            )
            .await;

        // The event log: its own page; each line linked to its request and
        // member.
        browser.open(&format!("{base}#/events")).await;
        let refused = browser
            .wait_for("#events li", "bob refused to shut down")
            .await;
        browser.within(&refused, "[data-testid=event-member]").await;
        let request = browser
            .within(&refused, "[data-testid=event-request]")
            .await;
        browser.clean_shot("review-events", width).await;
        browser.click(&request).await;
        browser
            .wait_for("#page h2", "Shutdown: shut down bob")
            .await;
        browser.clean_shot("review-shutdown", width).await;
    }
    browser.resize(1280, 800).await;

    // Search looks in what the log says: it finds the refusal, and not a
    // file name that only the stored plan holds.
    browser.open(&format!("{base}#/events")).await;
    let search = browser.wait_for("#event-search", "").await;
    browser.type_into(&search, "refused to shut").await;
    until(
        &browser,
        "one line: the refusal",
        "const l = [...document.querySelectorAll('#events [data-testid=said]')].map((s) => s.textContent);\
         return l.length === 1 && l[0].includes('bob refused to shut down');",
        vec![],
    )
    .await;
    browser
        .execute(
            "const s = document.getElementById('event-search'); s.value = 'hidden_name'; s.dispatchEvent(new Event('input'));",
            vec![],
        )
        .await;
    until(
        &browser,
        "no line names a file the log does not show",
        "return document.querySelectorAll('#events [data-testid=said]').length === 0 && document.getElementById('events-older').hidden;",
        vec![],
    )
    .await;

    // New since the last look: the look is cleo's first plan's time; her
    // second plan came after it.
    let mut cleo = lead.join("cleo").await;
    let earlier = submit(&mut cleo, plan("cleo's first", &["docs/a.md"])).await;
    browser.open(&format!("{base}#/")).await;
    let card = browser
        .wait_for(
            &format!("#queue [data-request-id='{earlier}']"),
            "cleo's first",
        )
        .await;
    let at = browser
        .execute(
            "return arguments[0].querySelector('[data-since]').dataset.since;",
            vec![Browser::arg(&card)],
        )
        .await;
    let later = submit(&mut cleo, plan("cleo's second", &["docs/b.md"])).await;
    browser
        .execute(
            // As if the operator had left the page at that time (leaving
            // is a look: the page keeps its time then).
            "const at = arguments[0];\
             const look = () => localStorage.setItem('mesh-console-looked-at', at);\
             window.addEventListener('pagehide', look);\
             document.addEventListener('visibilitychange', look);\
             location.reload();",
            vec![at],
        )
        .await;
    browser
        .wait_for(
            &format!("#queue [data-request-id='{later}'] [data-testid=new]"),
            "new",
        )
        .await;
    let marks = browser
        .execute(
            "return document.querySelector(`#queue [data-request-id='${arguments[0]}'] [data-testid=new]`).hidden;",
            vec![json!(earlier)],
        )
        .await;
    assert_eq!(marks, json!(true), "the earlier plan is not new");
    // The title and the queue agree on what waits.
    let figures = browser
        .execute(
            "return [document.title, document.getElementById('queue-count').textContent];",
            vec![],
        )
        .await;
    assert_eq!(figures, json!(["(2) mesh console", "(2)"]));
    browser.resize(390, 844).await;
    browser
        .wait_for(
            &format!("#queue [data-request-id='{later}'] [data-testid=card-line]"),
            "new",
        )
        .await;
    browser.clean_shot("review-queue-new", 390).await;
    browser.resize(1280, 800).await;

    // Notifications, opted in: one when a request comes to wait.
    browser.allow_notifications().await;
    browser.open(&format!("{base}#/")).await;
    let notify = browser
        .wait_for("[data-testid=notify]", "Notify me when something waits")
        .await;
    browser.click(&notify).await;
    browser
        .wait_for("[data-testid=notify]", "Notifications on")
        .await;
    browser
        .execute(
            "window.shown = []; const Real = window.Notification;\
             window.Notification = class extends Real { constructor(t, o) { super(t, o); window.shown.push(t); } };",
            vec![],
        )
        .await;
    submit(&mut cleo, plan("cleo's third", &["docs/c.md"])).await;
    until(
        &browser,
        "a notification of cleo's plan",
        "return window.shown.includes(\"cleo's plan waits for you\");",
        vec![],
    )
    .await;
    browser.clean_shot("review-queue-new", 1280).await;
    browser.quit().await;
}

#[tokio::test]
async fn tasks_say_what_they_wait_for_and_the_team_page_shuts_a_member_down() {
    let repo = mesh_tests::git::team_repo();
    let repo_path = repo.path().display().to_string();
    let lead = Lead::start(&["--repo", &repo_path, "--branch", "main"]).await;
    let mut operator = lead.operator().await;
    let base = lead.console.clone().unwrap();
    let task =
        |subject: &str, blocked_by: Vec<String>, review: pb::TaskReview| pb::CreateTaskRequest {
            subject: subject.into(),
            blocked_by,
            review: review as i32,
            ..Default::default()
        };
    let parser = operator
        .create_task(task("write the parser", vec![], pb::TaskReview::Plan))
        .await
        .unwrap()
        .into_inner();
    let printer = operator
        .create_task(task(
            "write the printer",
            vec![parser.task_id.clone()],
            pb::TaskReview::Plan,
        ))
        .await
        .unwrap()
        .into_inner();
    let lexer = operator
        .create_task(task("land the lexer", vec![], pb::TaskReview::Result))
        .await
        .unwrap()
        .into_inner();
    let unclaimed = operator
        .create_task(task("write the docs", vec![], pb::TaskReview::Plan))
        .await
        .unwrap()
        .into_inner();
    // ann's plan for the parser waits; bob's result for the lexer waits.
    let mut ann = lead.join("ann").await;
    ann.open_inbox(0).await;
    ann.api
        .claim_task(pb::ClaimTaskRequest {
            task_id: parser.task_id.clone(),
        })
        .await
        .unwrap();
    submit(
        &mut ann,
        pb::Plan {
            task_id: parser.task_id.clone(),
            ..plan("the parser", &["src/parser.rs"])
        },
    )
    .await;
    let mut bob = lead.join("bob").await;
    bob.api
        .claim_task(pb::ClaimTaskRequest {
            task_id: lexer.task_id.clone(),
        })
        .await
        .unwrap();
    let result = bob
        .submit_result_at_head(
            &lexer.task_id,
            "diff --git a/src/lexer.rs b/src/lexer.rs\nnew file mode 100644\n--- /dev/null\n\
         +++ b/src/lexer.rs\n@@ -0,0 +1 @@\n+pub fn lex() {}\n",
            "the lexer",
        )
        .await;

    let browser = lead.console_browser().await;
    let waits = |id: &str| format!("[data-task='{id}'] [data-testid=task-waits]");
    let state = |id: &str| format!("[data-task='{id}'] [data-testid=task-state]");
    for (width, height) in [(1280, 800), (390, 844)] {
        browser.resize(width, height).await;
        browser.open(&format!("{base}#/tasks/all")).await;
        browser
            .wait_for(&waits(&parser.task_id), "review of its plan")
            .await;
        browser
            .wait_for(&waits(&lexer.task_id), "review of its result")
            .await;
        browser.wait_for(&state(&printer.task_id), "blocked").await;
        browser
            .wait_for(&waits(&printer.task_id), "blocked by write the parser")
            .await;
        browser
            .wait_for(&waits(&unclaimed.task_id), "someone to claim it")
            .await;
        browser
            .wait_for("[data-testid=tab-blocked]", "blocked (1)")
            .await;
        browser.clean_shot("review-tasks", width).await;
    }
    browser.resize(1280, 800).await;

    // The lexer lands: its page links the landed result.
    operator
        .review_result(pb::ResultReview {
            request_id: result.clone(),
            approve: true,
            feedback: String::new(),
        })
        .await
        .unwrap();
    browser
        .open(&format!("{base}#/task/{}", lexer.task_id))
        .await;
    browser
        .wait_for("[data-testid=task-status]", "completed by bob")
        .await;
    browser
        .wait_for("[data-testid=task-landed]", "landed on the team branch as ")
        .await;
    browser.clean_shot("review-task", 1280).await;
    // The commit id short in the words, whole on hover; at 390 px nothing
    // scrolls sideways.
    let said = browser
        .execute(
            "const a = document.querySelector('[data-testid=task-landed] a'); return [a.textContent, a.title];",
            vec![],
        )
        .await;
    let whole_id = |s: &str| {
        s.split(|c: char| !c.is_ascii_hexdigit())
            .any(|w| w.len() == 40)
    };
    let (text, title) = (
        said[0].as_str().unwrap_or(""),
        said[1].as_str().unwrap_or(""),
    );
    assert!(!whole_id(text) && whole_id(title), "{said}");
    let landed = browser
        .text(
            &browser
                .wait_for("[data-testid=task-landed]", "landed")
                .await,
        )
        .await;
    assert!(
        landed.starts_with("landed on the team branch as"),
        "the word said once: {landed}"
    );
    browser.resize(390, 844).await;
    assert!(
        browser.sideways().await <= 0,
        "the completed task's page scrolls sideways at 390 px"
    );
    browser.resize(1280, 800).await;

    // The event log links a task's events to the task, and says the
    // landing once, its commit short.
    browser.open(&format!("{base}#/events")).await;
    let line = browser.wait_for("#events li", "task land the lexer").await;
    browser.within(&line, "[data-testid=event-task]").await;
    let landed = browser
        .text(
            &browser
                .wait_for("#events li", "bob's result landed on the team branch as ")
                .await,
        )
        .await;
    assert!(!whole_id(&landed), "{landed}");
    assert!(!landed.contains("landed: landed"), "{landed}");

    // The team page asks ann to shut down, with a reason.
    for (width, height) in [(390, 844), (1280, 800)] {
        browser.resize(width, height).await;
        browser.open(&format!("{base}#/team")).await;
        browser
            .wait_for(
                "[data-member=ann] [data-testid=team-status]",
                "waiting for review of its plan",
            )
            .await;
        browser.clean_shot("review-team", width).await;
    }
    let row = browser.wait_for("[data-member=ann]", "ann").await;
    browser
        .click(
            &browser
                .within(&row, "[data-testid=team-shut-menu] summary")
                .await,
        )
        .await;
    let reason = browser.within(&row, "[data-testid=team-reason]").await;
    browser.type_into(&reason, "the day is over").await;
    browser
        .click(&browser.within(&row, "[data-testid=team-shutdown]").await)
        .await;
    let asked = ann
        .next_matching(|e| matches!(e.body, Some(pb::envelope::Body::ShutdownRequest(_))))
        .await;
    match asked.body {
        Some(pb::envelope::Body::ShutdownRequest(r)) => assert_eq!(r.reason, "the day is over"),
        other => panic!("{other:?}"),
    }
    browser
        .wait_for(
            "[data-member=ann] [data-testid=team-shutdown-outcome]",
            "asked; waiting",
        )
        .await;
    // The events and the request's page name who asked, as they are.
    browser.open(&format!("{base}#/events")).await;
    browser
        .wait_for("#events li", "operator (console) asked ann to shut down")
        .await;
    let link = browser
        .within(
            &browser
                .wait_for("#events li", "operator (console) asked ann")
                .await,
            "[data-testid=event-request]",
        )
        .await;
    browser.click(&link).await;
    browser
        .wait_for("#page [data-testid=opened]", "asked by operator (console)")
        .await;
    browser.quit().await;
}
