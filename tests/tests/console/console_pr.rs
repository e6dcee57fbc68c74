//! A result reads like a pull request (issue 59, item 2), in headless
//! Chromium at 1280x800 and 390x844: a line that says whether the result
//! stays inside its sender's grant; how much changed; a file list with
//! +/- whose entries lead to each file; no git header lines; hunks with
//! old and new line numbers, the mark of a line in a column of its own; the
//! changed words of a changed line marked; an unchanged run folded and
//! opened in place; the decision in view while the diff is read (at 1280
//! px). Screenshots go to `target/console-shots/pr-*.png`.

#![allow(clippy::unwrap_used)]

use mesh_tests::{git::git, webdriver::Browser, Lead};
use serde_json::json;
use shared::pb;

/// `src/lib.rs` of the test's repository: thirty numbered functions and a
/// name.
fn library(name: &str, last: &str) -> String {
    let mut text = String::new();
    for n in 1..=30 {
        match n {
            10 => text.push_str(&format!("pub const NAME: &str = \"{name}\";\n")),
            25 => text.push_str(&format!("pub fn f25() -> u32 {{ {last} }}\n")),
            _ => text.push_str(&format!("pub fn f{n}() -> u32 {{ {n} }}\n")),
        }
    }
    text
}

/// A repository whose `main` holds `src/lib.rs`, `src/other.rs` and a
/// README, and two diffs against it as a teammate's `git diff` writes them:
/// alice's (a word changed on line 10 and a value on line 25 of
/// `src/lib.rs`, whole-file context, and a new `docs/guide.md`) and bob's
/// (`src/other.rs` only).
fn repo_and_diffs() -> (tempfile::TempDir, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    git(repo, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(repo.join("src")).unwrap();
    std::fs::write(repo.join("README.md"), "# team\n").unwrap();
    std::fs::write(repo.join("src/lib.rs"), library("alpha", "25")).unwrap();
    std::fs::write(repo.join("src/other.rs"), "pub fn other() {}\n").unwrap();
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-q", "-m", "start"]);
    std::fs::write(repo.join("src/lib.rs"), library("beta", "250")).unwrap();
    std::fs::create_dir_all(repo.join("docs")).unwrap();
    std::fs::write(
        repo.join("docs/guide.md"),
        "# Guide\n\nCall f25 for the answer.\n",
    )
    .unwrap();
    git(repo, &["add", "-N", "docs/guide.md"]);
    let alice = git(repo, &["diff", "-U30", "--", "src/lib.rs", "docs/guide.md"]);
    git(repo, &["reset", "-q", "--hard"]);
    git(repo, &["clean", "-qfd"]);
    std::fs::write(repo.join("src/other.rs"), "pub fn other() -> u8 { 0 }\n").unwrap();
    let bob = git(repo, &["diff", "--", "src/other.rs"]);
    git(repo, &["reset", "-q", "--hard"]);
    // The lead moves `main`; nobody edits in this checkout.
    git(repo, &["checkout", "-q", "--detach"]);
    // `git` gives its output trimmed; a patch ends with a newline.
    (dir, alice + "\n", bob + "\n")
}

/// `name` joins, claims a result-reviewed task, has a plan for `files`
/// approved (its grant: the plan's files) and submits `diff` against the
/// team branch's head; the result's id.
async fn granted_result(
    lead: &Lead,
    operator: &mut mesh_tests::Operator,
    name: &str,
    files: &[&str],
    diff: &str,
) -> String {
    let mut member = lead.join(name).await;
    let review = pb::TaskReview::Result;
    let (task, plan) = member
        .claim_and_plan(
            operator,
            &format!("{name}'s change"),
            review,
            &format!("{name}'s plan"),
            files,
        )
        .await;
    operator
        .review_plan(pb::PlanReview {
            request_id: plan,
            approve: true,
            ..Default::default()
        })
        .await
        .unwrap();
    member
        .submit_result_at_head(&task, diff, &format!("{name}'s result"))
        .await
}

/// What the diff of the page shows, as the test reads it.
const READ: &str = r#"
const diff = document.querySelector('#page [data-testid=diff]');
const rows = (sel) => [...diff.querySelectorAll(sel)].map((tr) =>
  [...tr.querySelectorAll('td')].map((td) => td.textContent));
return {
  stat: diff.querySelector('[data-testid=diff-stat]').textContent,
  index: [...diff.querySelectorAll('[data-testid=diff-files] li')].map((li) => li.textContent),
  files: [...diff.querySelectorAll('[data-testid=diff-file]')].map((f) => f.dataset.path),
  text: diff.textContent,
  removed: rows('tr.removed'),
  added: rows('tr.added'),
  gone: [...diff.querySelectorAll('mark.word-gone')].map((m) => m.textContent),
  fresh: [...diff.querySelectorAll('mark.word-new')].map((m) => m.textContent),
  folds: [...diff.querySelectorAll('[data-testid=unfold]')].map((b) => b.textContent),
  same: diff.querySelectorAll('tr.same').length,
};
"#;

#[tokio::test]
async fn a_result_reads_like_a_pull_request() {
    let (repo, alice_diff, bob_diff) = repo_and_diffs();
    let repo_path = repo.path().display().to_string();
    let lead = Lead::start(&["--repo", &repo_path, "--branch", "main"]).await;
    let mut operator = lead.operator().await;
    let alice = granted_result(&lead, &mut operator, "alice", &["src/lib.rs"], &alice_diff).await;
    let bob = granted_result(&lead, &mut operator, "bob", &["src/other.rs"], &bob_diff).await;
    let base = lead.console.clone().unwrap();
    let browser = lead.console_browser().await;

    for (width, height) in [(1280, 800), (390, 844)] {
        browser.resize(width, height).await;
        // From the queue: the page is drawn anew, its folds closed.
        browser.open(&format!("{base}#/")).await;
        browser.wait_for("#queue-title", "Waiting for you").await;
        browser.open(&format!("{base}#/requests/{alice}")).await;
        browser
            .wait_for(
                "#page [data-testid=grant-line]",
                "outside alice's grant: 1 of 2 files (docs/guide.md)",
            )
            .await;
        browser
            .wait_for("#page [data-testid=diff-stat]", "2 files changed")
            .await;
        let read = browser.execute(READ, vec![]).await;
        assert_eq!(read["stat"], json!("2 files changed, +5 −2"), "{read}");
        assert_eq!(
            read["index"],
            json!(["docs/guide.md +3 −0 new", "src/lib.rs +2 −2"]),
            "{read}"
        );
        // In git's order.
        assert_eq!(read["files"], json!(["docs/guide.md", "src/lib.rs"]));
        // None of git's header lines.
        let text = read["text"].as_str().unwrap();
        for raw in ["index ", "--- a/", "+++ b/", "/dev/null", "new file mode"] {
            assert!(!text.contains(raw), "{raw:?} shown: {text}");
        }
        // Old and new line numbers; the mark in a column of its own.
        assert_eq!(
            read["removed"],
            json!([
                ["10", "", "-", "pub const NAME: &str = \"alpha\";"],
                ["25", "", "-", "pub fn f25() -> u32 { 25 }"]
            ]),
            "{read}"
        );
        assert_eq!(read["added"][0], json!(["", "1", "+", "# Guide"]));
        assert_eq!(
            read["added"][3],
            json!(["", "10", "+", "pub const NAME: &str = \"beta\";"]),
            "{read}"
        );
        // The changed words of a changed line, and nothing else, marked.
        assert_eq!(read["gone"], json!(["alpha", "25"]), "{read}");
        assert_eq!(read["fresh"], json!(["beta", "250"]), "{read}");
        // Unchanged runs folded: lines 1-6 (3 kept before line 10), 14-21
        // (3 kept after line 10 and before line 25), 29-30 are kept whole
        // (a fold hides four lines or more).
        assert_eq!(
            read["folds"],
            json!(["⋯ 6 unchanged lines", "⋯ 8 unchanged lines"]),
            "{read}"
        );
        let folded = read["same"].as_u64().unwrap();
        let unfold = browser
            .wait_for("#page [data-testid=unfold]", "8 unchanged lines")
            .await;
        // In the middle of the window, clear of the decision bar.
        browser
            .execute(
                "arguments[0].scrollIntoView({ block: 'center' }); return null;",
                vec![Browser::arg(&unfold)],
            )
            .await;
        browser.click(&unfold).await;
        let read = browser.execute(READ, vec![]).await;
        assert_eq!(read["same"].as_u64().unwrap(), folded + 8, "{read}");
        assert_eq!(read["folds"], json!(["⋯ 6 unchanged lines"]));
        assert!(read["text"].as_str().unwrap().contains("pub fn f17()"));
        browser.clean_shot("pr-result", width).await;

        // A file of the list leads to the file.
        let link = browser
            .wait_for("#page [data-testid=diff-files] button", "docs/guide.md")
            .await;
        browser.click(&link).await;
        let shown = browser
            .execute(
                "const f = document.querySelector('#page [data-testid=diff-file][data-path=\"docs/guide.md\"]');\
                 const r = f.getBoundingClientRect();\
                 return [f.open, r.top >= -1 && r.top < window.innerHeight / 2];",
                vec![],
            )
            .await;
        assert_eq!(shown, json!([true, true]), "at {width} px");

        // The decision stays in view while the diff is read (where there is
        // room beside it: at 1280 px).
        browser
            .execute("window.scrollTo(0, 0); return null;", vec![])
            .await;
        let bar = browser
            .execute(
                "const d = document.querySelector('#page [data-testid=decide]');\
                 const r = d.getBoundingClientRect();\
                 return [getComputedStyle(d).position, r.top < window.innerHeight && r.bottom <= window.innerHeight + 1,\
                         !!d.querySelector('[data-testid=approve]')];",
                vec![],
            )
            .await;
        let sticky = width >= 800;
        assert_eq!(
            bar,
            json!([if sticky { "sticky" } else { "static" }, sticky, true]),
            "at {width} px"
        );
    }

    // bob's result stays inside his grant.
    browser.resize(1280, 800).await;
    browser.open(&format!("{base}#/requests/{bob}")).await;
    browser
        .wait_for(
            "#page [data-testid=grant-line]",
            "inside bob's grant: 1 of 1 file",
        )
        .await;
    let read = browser.execute(READ, vec![]).await;
    assert_eq!(read["gone"], json!(["{"]), "{read}");
    assert_eq!(read["fresh"], json!(["-> u8 { 0 "]), "{read}");
    browser.clean_shot("pr-inside", 1280).await;
}
