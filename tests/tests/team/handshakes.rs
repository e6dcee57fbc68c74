//! The two handshakes end to end: real `lead` and `teammate` processes over
//! loopback, an operator steering through the CLI and gRPC.

#![allow(clippy::unwrap_used)]

use mesh_tests::{is, Events, Lead};
use shared::pb::{self, envelope::Body, RequestStatus};

const PLAN_THEN_WORK: &str = r#"
[[plans]]
summary = "Add the auth module"
files = ["src/auth.rs"]
tests = ["tests/auth.rs"]

[[actions]]
phase = "plan"
tool = "write_file"
path = "src/auth.rs"
content = "too early"

[[actions]]
phase = "work"
tool = "write_file"
path = "src/auth.rs"
content = "pub fn login() {}\n"
"#;

#[tokio::test]
async fn a_plan_phase_write_is_refused_and_an_approved_plan_unlocks_writes() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut alice = lead.teammate("alice", PLAN_THEN_WORK);
    let target = alice.workspace.join("src/auth.rs");

    let refused = events
        .tool_call("the plan-phase write", |t| {
            t.member == "alice" && t.tool == "write_file"
        })
        .await;
    assert!(!refused.allowed, "{refused:?}");
    assert!(refused.outcome.contains("plan mode"), "{}", refused.outcome);
    let plan = events.pending_plan("alice").await;
    assert!(!target.exists(), "nothing is written before approval");

    let (ok, out, err) = lead.cli(&["approve", &plan.request_id]).await;
    assert!(ok, "{out}{err}");
    assert!(out.contains("approved"), "{out}");
    let ran = events
        .tool_call("the work-phase write", |t| {
            t.member == "alice" && t.tool == "write_file"
        })
        .await;
    assert!(ran.allowed, "{ran:?}");
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "pub fn login() {}\n"
    );

    let alice_now = mesh_tests::member_named(&mut operator, "alice").await;
    assert_eq!(alice_now.mode, pb::PermissionMode::AcceptEdits as i32);
    drop(alice.child.kill().await);
}

#[tokio::test]
async fn a_rejected_plan_is_revised_and_resubmitted_with_supersedes() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let script = r#"
[[plans]]
summary = "Rewrite the session store"
files = ["src/session.rs"]

[[plans]]
summary = "Rewrite the session store, with a shim"
files = ["src/session.rs", "src/shim.rs"]
tests = ["tests/session.rs"]

[[actions]]
phase = "work"
tool = "write_file"
path = "src/shim.rs"
content = "// shim\n"
"#;
    let mut bob = lead.teammate("bob", script);
    let first = events.pending_plan("bob").await;
    let (ok, out, err) = lead
        .cli(&[
            "reject",
            &first.request_id,
            "--feedback",
            "add a shim for old callers",
        ])
        .await;
    assert!(ok, "{out}{err}");

    let second = events.pending_plan("bob").await;
    assert_ne!(second.request_id, first.request_id);
    let payload: serde_json::Value = serde_json::from_str(&second.payload_json).unwrap();
    assert_eq!(
        payload["supersedes"],
        first.request_id.as_str(),
        "the revision names the rejected plan"
    );
    assert!(second.payload_json.contains("with a shim"));
    assert!(
        !bob.workspace.join("src/shim.rs").exists(),
        "still read-only after a rejection"
    );

    let review = operator
        .review_plan(pb::PlanReview {
            request_id: second.request_id.clone(),
            approve: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(review.approve);
    events
        .tool_call("the approved write", |t| {
            t.member == "bob" && t.allowed && t.tool == "write_file"
        })
        .await;
    assert!(bob.workspace.join("src/shim.rs").exists());

    let first_now = operator
        .get_request(pb::GetRequestRequest {
            request_id: first.request_id,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(is(first_now.status, RequestStatus::Rejected));
    assert_eq!(first_now.feedback, "add a shim for old callers");
    drop(bob.child.kill().await);
}

#[tokio::test]
async fn accept_edits_refuses_a_write_outside_the_grants_paths() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let script = r#"
[[plans]]
summary = "Touch src and db"
files = ["src/a.rs", "db/schema.sql"]

[[actions]]
phase = "work"
tool = "write_file"
path = "db/schema.sql"
content = "DROP TABLE users;"

[[actions]]
phase = "work"
tool = "write_file"
path = "src/a.rs"
content = "ok"
"#;
    let carol = lead.teammate("carol", script);
    let plan = events.pending_plan("carol").await;
    let (ok, out, err) = lead
        .cli(&[
            "approve",
            &plan.request_id,
            "--mode",
            "accept-edits",
            "--write",
            "src/**",
        ])
        .await;
    assert!(ok, "{out}{err}");

    let refused = events
        .tool_call("the write outside src/", |t| {
            t.member == "carol" && t.args_json.contains("db/schema.sql")
        })
        .await;
    assert!(!refused.allowed);
    assert!(
        refused.outcome.contains("outside the grant"),
        "{}",
        refused.outcome
    );
    let allowed = events
        .tool_call("the write inside src/", |t| {
            t.member == "carol" && t.args_json.contains("src/a.rs")
        })
        .await;
    assert!(allowed.allowed, "{allowed:?}");
    assert!(!carol.workspace.join("db/schema.sql").exists());
    assert!(carol.workspace.join("src/a.rs").exists());
}

#[tokio::test]
async fn default_mode_asks_the_operator_for_each_write() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let script = r#"
[[plans]]
summary = "Two writes"
files = ["a.txt", "b.txt"]

[[actions]]
phase = "work"
tool = "write_file"
path = "a.txt"
content = "a"

[[actions]]
phase = "work"
tool = "write_file"
path = "b.txt"
content = "b"
"#;
    let dave = lead.teammate("dave", script);
    let plan = events.pending_plan("dave").await;
    let (ok, out, err) = lead
        .cli(&["approve", &plan.request_id, "--mode", "default"])
        .await;
    assert!(ok, "{out}{err}");

    let is_permission = |r: &pb::ProtocolState| {
        r.r#type == pb::RequestType::Permission as i32 && is(r.status, RequestStatus::Pending)
    };
    let first = events
        .request("the first permission request", is_permission)
        .await;
    assert!(first.payload_json.contains("a.txt"));
    assert!(
        !dave.workspace.join("a.txt").exists(),
        "nothing runs before permission"
    );
    let (ok, out, err) = lead.cli(&["allow", &first.request_id]).await;
    assert!(ok, "{out}{err}");
    let second = events
        .request("the second permission request", is_permission)
        .await;
    let (ok, out, err) = lead
        .cli(&["deny", &second.request_id, "--feedback", "not b"])
        .await;
    assert!(ok, "{out}{err}");
    let denied = events
        .tool_call("the denied write", |t| {
            t.member == "dave" && t.args_json.contains("b.txt")
        })
        .await;
    assert!(!denied.allowed);
    assert!(denied.outcome.contains("not b"), "{}", denied.outcome);
    assert!(dave.workspace.join("a.txt").exists());
    assert!(!dave.workspace.join("b.txt").exists());
}

#[tokio::test]
async fn an_approved_shutdown_exits_zero_and_everyone_else_hears_it() {
    let lead = Lead::start(&["--approval", "auto"]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut watcher = lead.join("watcher").await;
    watcher.open_inbox(0).await;
    let mut erin = lead.teammate("erin", "[shutdown]\napprove = true\nreason = \"done\"\n");
    events.member_in("erin", pb::MemberStatus::Idle).await;

    let (ok, out, err) = lead.cli(&["shutdown", "erin", "--reason", "wrap up"]).await;
    assert!(ok, "{out}{err}");
    assert!(out.contains("erin agreed to shut down: done"), "{out}");
    assert!(erin.exit().await.success(), "the teammate exits 0");

    let notice = watcher
        .next_matching(|e| matches!(e.body, Some(Body::TeammateTerminated(_))))
        .await;
    assert_eq!(notice.from, "lead");
    match notice.body {
        Some(Body::TeammateTerminated(t)) => assert_eq!(t.name, "erin"),
        other => panic!("unexpected {other:?}"),
    }
    let erin_now = mesh_tests::member_named(&mut operator, "erin").await;
    assert_eq!(erin_now.status, pb::MemberStatus::Terminated as i32);
}

#[tokio::test]
async fn a_refused_shutdown_keeps_the_teammate_and_its_reason_reaches_the_operator() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut frank = lead.teammate(
        "frank",
        "[shutdown]\napprove = false\nreason = \"mid-migration; ask again later\"\n",
    );
    events.member_in("frank", pb::MemberStatus::Idle).await;

    let (ok, out, err) = lead.cli(&["shutdown", "frank"]).await;
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("frank refused to shut down: mid-migration; ask again later"),
        "{out}"
    );
    let (ok, out, _) = lead.cli(&["requests", "--json"]).await;
    assert!(ok);
    assert!(
        out.contains("\"status\":\"rejected\"") && out.contains("mid-migration"),
        "{out}"
    );
    let (ok, out, _) = lead.cli(&["team"]).await;
    assert!(ok);
    assert!(
        out.lines()
            .any(|l| l.starts_with("frank") && !l.contains("terminated")),
        "{out}"
    );
    assert!(
        frank.child.try_wait().unwrap().is_none(),
        "frank keeps running"
    );
    drop(frank.child.kill().await);
}

#[tokio::test]
async fn an_unanswered_shutdown_expires_and_a_spawned_child_is_stopped_by_signal() {
    let lead = Lead::start(&["--approval", "auto", "--kill-grace", "1"]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    // Busy in one long command: it cannot answer before the deadline.
    let script = lead.script(
        "gina",
        r#"
[[plans]]
summary = "Run the long migration"
files = ["out.txt"]

[[actions]]
phase = "work"
tool = "run_command"
command = "sleep 117.25"
"#,
    );
    let (ok, out, err) = lead
        .cli(&[
            "spawn",
            "gina",
            "--role",
            "migrator",
            "--script",
            script.to_str().unwrap(),
        ])
        .await;
    assert!(ok, "{out}{err}");
    let pid: i32 = out
        .split("pid ")
        .nth(1)
        .and_then(|s| s.trim().trim_end_matches(')').parse().ok())
        .unwrap();
    events
        .request("gina's permission to run the command", |r| {
            r.sender == "gina"
                && is(r.status, RequestStatus::Approved)
                && r.r#type == pb::RequestType::Permission as i32
        })
        .await;

    let (ok, out, err) = lead.cli(&["shutdown", "gina", "--deadline", "1"]).await;
    assert!(ok, "{out}{err}");
    assert!(out.contains("did not answer in time (expired)"), "{out}");
    let gone = events.member_in("gina", pb::MemberStatus::Terminated).await;
    assert_eq!(gone.name, "gina");
    // The lead reaped it: the pid no longer exists.
    let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None);
    assert_eq!(
        alive,
        Err(nix::errno::Errno::ESRCH),
        "the child process is gone"
    );
    assert!(
        !mesh_tests::process_running("117.25"),
        "the command it ran is gone too: no orphan"
    );
    let requests = operator
        .list_requests(pb::ListRequestsRequest {
            status: RequestStatus::Expired as i32,
            r#type: pb::RequestType::Shutdown as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .requests;
    assert_eq!(requests.len(), 1);
}

#[tokio::test]
async fn the_lead_stops_cleanly_on_sigterm_with_streams_open() {
    let mut lead = Lead::start(&[]).await;
    let mut member = lead.join("henry").await;
    member.open_inbox(0).await;
    let mut operator = lead.operator().await;
    let _events = Events::open(&mut operator).await;
    let status = lead.terminate().await;
    assert!(status.success(), "{status:?}");
}

/// `lead shutdown` prints the request id as soon as it asked, while it still
/// waits for the answer; then how it ended.
#[tokio::test]
async fn lead_shutdown_prints_the_request_id_before_the_answer() {
    use tokio::io::{AsyncBufReadExt, BufReader};

    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut quiet = lead.join("quiet").await;
    quiet.open_inbox(0).await;
    let mut shutdown = lead
        .cli_command(&["shutdown", "quiet", "--reason", "wrap up"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(shutdown.stdout.take().unwrap()).lines();
    let first = mesh_tests::within("the first line", lines.next_line())
        .await
        .unwrap()
        .unwrap();
    let request_id = first
        .strip_prefix("asked quiet to shut down: request ")
        .unwrap_or_else(|| panic!("{first:?}"))
        .to_owned();
    // Still waiting: the request is pending, and quiet has it.
    let pending = operator
        .get_request(pb::GetRequestRequest {
            request_id: request_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(is(pending.status, RequestStatus::Pending), "{pending:?}");
    let asked = quiet
        .next_matching(|e| matches!(e.body, Some(Body::ShutdownRequest(_))))
        .await;
    assert!(matches!(&asked.body, Some(Body::ShutdownRequest(r)) if r.request_id == request_id));

    quiet
        .api
        .respond_shutdown(pb::ShutdownResponse {
            request_id: request_id.clone(),
            approve: true,
            reason: "done here".into(),
        })
        .await
        .unwrap();
    let outcome = mesh_tests::within("the outcome line", lines.next_line())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        outcome,
        format!("quiet agreed to shut down: done here [request {request_id}]")
    );
    assert!(mesh_tests::within("lead shutdown to exit", shutdown.wait())
        .await
        .unwrap()
        .success());
}
