//! The console's layout fits the window (issue 24, "layout that fits"): at
//! 1280x800 and at 390x844, with three teammates on the team and their
//! plans in the queue, nothing on the page scrolls sideways (neither the
//! page nor any box in it), and every member's shut-down control is on
//! screen. Screenshots go to `target/console-shots/`.

#![allow(clippy::unwrap_used)]

use mesh_tests::{
    webdriver::{shots, Browser},
    Lead,
};
use serde_json::Value;

/// What on the page overflows sideways: the page itself, any element of
/// the main area whose content is wider than its box and that scrolls or
/// clips it, and any shut-down button past the window's right edge.
const OVERFLOW: &str = r#"
const width = window.innerWidth;
const found = [];
// Inside a box of one pixel that clips: hidden for the eye only (kept for
// a screen reader), as the team's column headers are where it is cards.
const unseen = (e) => {
  for (let a = e; a; a = a.parentElement) {
    const style = getComputedStyle(a);
    if (["hidden", "clip"].includes(style.overflowX) && a.clientWidth <= 1) return true;
  }
  return false;
};
if (document.documentElement.scrollWidth > width) {
  found.push(`the page is ${document.documentElement.scrollWidth}px wide in a ${width}px window`);
}
for (const e of document.querySelectorAll("main, main *")) {
  if (unseen(e)) continue;
  const style = getComputedStyle(e);
  const clips = ["auto", "scroll", "hidden"].includes(style.overflowX);
  if (clips && e.scrollWidth > e.clientWidth + 1) {
    found.push(`${e.tagName.toLowerCase()}#${e.id} scrolls sideways: ${e.scrollWidth}px in ${e.clientWidth}px`);
  }
  const right = e.getBoundingClientRect().right;
  if (e.offsetParent !== null && right > width + 1) {
    found.push(`${e.tagName.toLowerCase()}#${e.id}.${e.className} ends at ${Math.round(right)}px, past ${width}px`);
  }
}
for (const b of document.querySelectorAll("[data-testid=shut-menu] > summary")) {
  const r = b.getBoundingClientRect();
  if (r.right > width || r.width === 0) found.push(`a shut-down button is off screen at ${Math.round(r.right)}px`);
}
return found.slice(0, 10);
"#;

async fn overflow(browser: &Browser) -> Vec<String> {
    match browser.execute(OVERFLOW, vec![]).await {
        Value::Array(found) => found
            .into_iter()
            .map(|f| f.as_str().unwrap_or_default().to_owned())
            .collect(),
        other => panic!("the script answered {other}"),
    }
}

#[tokio::test]
async fn nothing_scrolls_sideways_at_1280_or_at_390_px() {
    let lead = Lead::start(&[]).await;
    let browser = lead.console_browser().await;
    let mut members = Vec::new();
    for name in ["alice-the-first", "bob", "carol-with-a-longer-name"] {
        let mut member = lead.join(name).await;
        member
            .submit(
                &uuid::Uuid::new_v4().to_string(),
                &format!("a plan of {name} with a summary long enough to wrap across the card"),
                &[
                    "src/some/deeply/nested/module/with/a/long/path/file.rs",
                    "tests/integration/another_long_test_file_name.rs",
                ],
            )
            .await
            .unwrap();
        members.push(member);
    }
    browser
        .wait_for("tr[data-member=carol-with-a-longer-name]", "carol")
        .await;
    browser
        .wait_for("[data-testid=plan]", "a plan of carol-with-a-longer-name")
        .await;
    for (width, height, shot) in [(1280, 800, "queue-1280.png"), (390, 844, "queue-390.png")] {
        browser.resize(width, height).await;
        let found = overflow(&browser).await;
        browser.screenshot(&shots().join(shot)).await;
        assert!(found.is_empty(), "at {width}x{height}: {found:#?}");
    }
    browser.quit().await;
}
