//! `--approval chain:FILE` over the wire: each stage approves, rejects and
//! passes; `escalate` overrides an approval; a crashing or hanging program
//! never approves; the request's history shows every verdict.

#![allow(clippy::unwrap_used)]

use std::{os::unix::fs::PermissionsExt, path::Path};

use mesh_tests::{
    fake_model::{Answer, FakeModel},
    Events, Lead,
};
use serde_json::json;
use shared::pb;

/// Writes an executable shell script.
fn script(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// A lead whose chain is `chain` (with `{dir}` standing for the scratch
/// directory), and that directory.
async fn lead_with_chain(chain: &str) -> (Lead, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("policy.toml"),
        "deny_write = [\"secret/**\"]\n",
    )
    .unwrap();
    script(dir.path(), "pass.sh", "cat >/dev/null; exit 1");
    // Rejects plans whose summary asks for it; approves the rest.
    script(
        dir.path(),
        "judge.sh",
        "if grep -q 'please reject'; then echo 'needs tests' >&2; exit 2; fi; exit 0",
    );
    script(dir.path(), "crash.sh", "echo 'segfault' >&2; exit 139");
    script(dir.path(), "hang.sh", "exec sleep 30");
    let chain = chain.replace("{dir}", &dir.path().display().to_string());
    let file = dir.path().join("chain.toml");
    std::fs::write(&file, chain).unwrap();
    let lead = Lead::start(&["--approval", &format!("chain:{}", file.display())]).await;
    (lead, dir)
}

/// The request once it is decided, or once the chain left it to a person.
async fn settled(events: &mut Events, id: &str) -> pb::ProtocolState {
    events
        .request(&format!("{id} to be decided or left to a person"), |r| {
            r.request_id == id
                && (r.status != pb::RequestStatus::Pending as i32
                    || r.reviews.last().is_some_and(|s| s.verdict == "waits"))
        })
        .await
}

/// The history as "reviewer verdict" lines.
fn history(r: &pb::ProtocolState) -> Vec<String> {
    r.reviews
        .iter()
        .map(|s| format!("{} {}", s.reviewer, s.verdict))
        .collect()
}

const CHAIN: &str = r#"
escalate = ["db/**"]

[[stages]]
kind = "policy"
file = "policy.toml"

[[stages]]
kind = "program"
command = ["{dir}/pass.sh"]

[[stages]]
kind = "program"
command = ["{dir}/judge.sh"]

[[stages]]
kind = "human"
"#;

#[tokio::test]
async fn each_stage_approves_rejects_or_passes_and_the_history_shows_it() {
    let (lead, _dir) = lead_with_chain(CHAIN).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut alice = lead.join("alice").await;

    // The policy passes it, pass.sh passes it, judge.sh approves it.
    let good = alice
        .submit("", "add the parser", &["src/parser.rs"])
        .await
        .unwrap();
    let good = settled(&mut events, &good).await;
    assert_eq!(good.status, pb::RequestStatus::Approved as i32, "{good:?}");
    assert_eq!(
        history(&good),
        [
            "policy pass",
            "program pass.sh pass",
            "program judge.sh approve"
        ]
    );
    assert_eq!(good.feedback, "approved by program judge.sh");

    // judge.sh rejects, with its stderr as the feedback.
    let bad = alice
        .submit("", "please reject this", &["src/x.rs"])
        .await
        .unwrap();
    let bad = settled(&mut events, &bad).await;
    assert_eq!(bad.status, pb::RequestStatus::Rejected as i32, "{bad:?}");
    assert_eq!(bad.feedback, "rejected by program judge.sh: needs tests");
    assert_eq!(
        history(&bad),
        [
            "policy pass",
            "program pass.sh pass",
            "program judge.sh reject"
        ]
    );

    // The policy rejects first; no program runs.
    let secret = alice
        .submit("", "read the keys", &["secret/keys"])
        .await
        .unwrap();
    let secret = settled(&mut events, &secret).await;
    assert_eq!(secret.status, pb::RequestStatus::Rejected as i32);
    assert!(
        secret
            .feedback
            .starts_with("rejected by policy: deny_write"),
        "{secret:?}"
    );
    assert_eq!(history(&secret), ["policy reject"]);

    // GetRequest and `lead requests` carry the history.
    let got = operator
        .get_request(pb::GetRequestRequest {
            request_id: bad.request_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.reviews, bad.reviews);
    let (ok, out, err) = lead.cli(&["requests"]).await;
    assert!(ok, "{err}");
    assert!(
        out.contains("[policy pass > program pass.sh pass > program judge.sh reject: needs tests]"),
        "{out}"
    );
    let (ok, json, _) = lead.cli(&["requests", "--json"]).await;
    assert!(ok);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json[0]["reviews"][2]["reviewer"], "program judge.sh");
}

#[tokio::test]
async fn escalate_overrides_an_approval_and_a_person_decides() {
    let (lead, _dir) = lead_with_chain(CHAIN).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut alice = lead.join("alice").await;

    let id = alice
        .submit("", "migrate", &["src/db.rs", "db/schema.sql"])
        .await
        .unwrap();
    let waiting = settled(&mut events, &id).await;
    assert_eq!(
        waiting.status,
        pb::RequestStatus::Pending as i32,
        "{waiting:?}"
    );
    assert_eq!(
        history(&waiting),
        [
            "policy pass",
            "program pass.sh pass",
            "program judge.sh approve",
            "human waits"
        ]
    );

    let (ok, out, err) = lead.cli(&["approve", &id]).await;
    assert!(ok, "{out}{err}");
    let decided = events
        .request("the operator's approval", |r| {
            r.request_id == id && r.reviews.last().is_some_and(|s| s.reviewer == "operator")
        })
        .await;
    assert_eq!(decided.status, pb::RequestStatus::Approved as i32);
    assert_eq!(
        history(&decided).last().map(String::as_str),
        Some("operator approve")
    );
}

#[tokio::test]
async fn a_crashing_or_hanging_program_never_approves() {
    let chain = r#"
[[stages]]
kind = "program"
command = ["{dir}/crash.sh"]

[[stages]]
kind = "program"
command = ["{dir}/judge.sh"]
"#;
    let (lead, _dir) = lead_with_chain(chain).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut alice = lead.join("alice").await;
    let id = alice.submit("", "anything", &["src/a.rs"]).await.unwrap();
    let crashed = settled(&mut events, &id).await;
    assert_eq!(crashed.status, pb::RequestStatus::Pending as i32);
    assert_eq!(history(&crashed), ["program crash.sh error", "chain waits"]);
    assert!(
        crashed.reviews[0]
            .words
            .contains("exit status 139: segfault")
            && crashed.reviews[1].words.contains("program crash.sh failed"),
        "{crashed:?}"
    );
    drop(lead);

    let hang = r#"
[[stages]]
kind = "program"
command = ["{dir}/hang.sh"]
timeout_secs = 1
"#;
    let (lead, _dir) = lead_with_chain(hang).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut alice = lead.join("alice").await;
    let id = alice.submit("", "anything", &["src/a.rs"]).await.unwrap();
    let hung = settled(&mut events, &id).await;
    assert_eq!(hung.status, pb::RequestStatus::Pending as i32);
    assert_eq!(history(&hung), ["program hang.sh error", "chain waits"]);
    assert!(
        hung.reviews[0].words.contains("no verdict within 1s"),
        "{hung:?}"
    );
}

#[tokio::test]
async fn a_bad_chain_file_stops_the_lead_at_start_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("chain.toml");
    std::fs::write(&file, "[[stages]]\nkind = \"program\"\ncommand = []\n").unwrap();
    let state = dir.path().join("state");
    let output = mesh_tests::within(
        "lead serve with a bad chain",
        tokio::process::Command::new(mesh_tests::bin("lead"))
            .args(["serve", "--listen", "127.0.0.1:0", "--approval"])
            .arg(format!("chain:{}", file.display()))
            .arg("--state-dir")
            .arg(&state)
            .output(),
    )
    .await
    .unwrap();
    assert!(!output.status.success());
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("stages[0].command: is empty"), "{err}");
}

#[tokio::test]
async fn a_model_stage_approves_rejects_and_its_silence_goes_to_a_person() {
    let model = FakeModel::start(vec![
        Answer::call(
            "review_plan",
            json!({"approve": true, "feedback": "tests present"}),
        ),
        Answer::call(
            "review_plan",
            json!({"approve": false, "feedback": "add tests"}),
        ),
        Answer::text("I would rather not say."),
    ])
    .await;
    let chain = r#"
[[stages]]
kind = "model"
file = "reviewer.toml"

[[stages]]
kind = "human"
"#;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("reviewer.toml"),
        format!(
            "model = \"review-model\"\nbase_url = \"{}\"\ncriteria = \"Plans need tests.\"\ntimeout_secs = 20\n",
            model.base_url
        ),
    )
    .unwrap();
    let file = dir.path().join("chain.toml");
    std::fs::write(&file, chain).unwrap();
    let lead = Lead::start(&["--approval", &format!("chain:{}", file.display())]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut alice = lead.join("alice").await;

    let first = alice.submit("", "one", &["src/a.rs"]).await.unwrap();
    let first = settled(&mut events, &first).await;
    assert_eq!(
        first.status,
        pb::RequestStatus::Approved as i32,
        "{first:?}"
    );
    assert_eq!(history(&first), ["model review-model approve"]);
    assert_eq!(
        first.feedback,
        "approved by model review-model: tests present"
    );

    let second = alice.submit("", "two", &["src/b.rs"]).await.unwrap();
    let second = settled(&mut events, &second).await;
    assert_eq!(second.status, pb::RequestStatus::Rejected as i32);
    assert_eq!(second.feedback, "rejected by model review-model: add tests");

    let third = alice.submit("", "three", &["src/c.rs"]).await.unwrap();
    let third = settled(&mut events, &third).await;
    assert_eq!(third.status, pb::RequestStatus::Pending as i32);
    assert_eq!(history(&third), ["model review-model error", "chain waits"]);
    assert!(
        third.reviews[0]
            .words
            .contains("without calling review_plan"),
        "{third:?}"
    );
}

/// A needle no other test (or run) uses: `sleep {base}.{pid}{n}`.
fn unique_seconds(base: u32) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{base}.{}{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Waits until no process has `needle` as an argument (a killed process
/// leaves `/proc` once its parent, or init, reaps it).
async fn gone(needle: &str) {
    mesh_tests::within(&format!("every `sleep {needle}` to end"), async {
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(50));
        while mesh_tests::process_running(needle) {
            tick.tick().await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_program_that_forks_leaves_nothing_behind_at_its_timeout_its_end_or_the_leads_stop() {
    // The program reads the plan, then by its summary leaves a process in
    // the background and hangs, or leaves one and passes, or says it
    // started (through a FIFO) and hangs.
    let (timeout_bg, timeout_fg, end_bg, stop_bg, stop_fg) = (
        unique_seconds(417),
        unique_seconds(600),
        unique_seconds(418),
        unique_seconds(419),
        unique_seconds(601),
    );
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("started");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let body = format!(
        r#"input=$(cat)
case "$input" in
  *hang-case*) ( sleep {timeout_bg} & ); sleep {timeout_fg} ;;
  *end-case*) ( sleep {end_bg} >/dev/null 2>&1 & ); exit 1 ;;
  *stop-case*) ( sleep {stop_bg} >/dev/null 2>&1 & ); echo started > {fifo}; sleep {stop_fg} ;;
esac"#,
        fifo = fifo.display()
    );
    let forker = script(dir.path(), "forker.sh", &body);
    let chain = |timeout: u64| {
        let file = dir.path().join(format!("chain-{timeout}.toml"));
        std::fs::write(
            &file,
            format!(
                "[[stages]]\nkind = \"program\"\ncommand = [\"{forker}\"]\ntimeout_secs = {timeout}\n"
            ),
        )
        .unwrap();
        format!("chain:{}", file.display())
    };

    // At the timeout, the program and what it left behind are killed.
    let lead = Lead::start(&["--approval", &chain(1)]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut alice = lead.join("alice").await;
    let id = alice.submit("", "hang-case", &["a"]).await.unwrap();
    let hung = settled(&mut events, &id).await;
    assert_eq!(history(&hung), ["program forker.sh error", "chain waits"]);
    gone(&timeout_fg).await;
    gone(&timeout_bg).await;

    // A program that ends (here: passes) takes its background with it.
    let id = alice.submit("", "end-case", &["b"]).await.unwrap();
    let ended = settled(&mut events, &id).await;
    assert_eq!(history(&ended), ["program forker.sh pass", "chain waits"]);
    gone(&end_bg).await;
    drop(lead);

    // When the lead stops, a stage still running goes with it.
    let mut lead = Lead::start(&["--approval", &chain(300)]).await;
    let mut alice = lead.join("alice").await;
    let mut started = tokio::net::unix::pipe::OpenOptions::new()
        .read_write(true)
        .open_receiver(&fifo)
        .unwrap();
    alice.submit("", "stop-case", &["c"]).await.unwrap();
    let mut said = [0u8; 8];
    let n = mesh_tests::within(
        "the stage to start",
        tokio::io::AsyncReadExt::read(&mut started, &mut said),
    )
    .await
    .unwrap();
    assert_eq!(&said[..n], b"started\n");
    // The script said so just before it starts its last `sleep`.
    mesh_tests::within(&format!("`sleep {stop_fg}` to run"), async {
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(10));
        while !mesh_tests::process_running(&stop_fg) {
            tick.tick().await;
        }
    })
    .await;
    assert!(lead.terminate().await.success());
    gone(&stop_fg).await;
    gone(&stop_bg).await;
}
