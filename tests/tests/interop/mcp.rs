//! `teammate mcp` driven by a real MCP client (the official Python SDK,
//! tests/mcp/client.py) against a real lead; this test plays the operator.

#![allow(clippy::unwrap_used)]

use std::{path::Path, process::Stdio, time::Instant};

use mesh_tests::{bin, is, python, within, Events, Lead};
use shared::pb::{self, envelope::Body, RequestStatus};
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    process::{Child, Command},
};

/// Starts the Python MCP client (`python`, from [`mesh_tests::python`]) on
/// `scenario`; it starts `teammate mcp` as member `name` with the workspace
/// `ws/<name>`, made here with a README.
fn client(python: &Path, lead: &Lead, name: &str, scenario: &str) -> Child {
    client_with(python, lead, name, scenario, &[])
}

/// [`client`] with `env` in the client's environment (it passes
/// `OTEL_EXPORTER_OTLP_ENDPOINT` on to `teammate mcp`).
fn client_with(
    python: &Path,
    lead: &Lead,
    name: &str,
    scenario: &str,
    env: &[(&str, &str)],
) -> Child {
    let workspace = lead.workspace(name);
    std::fs::create_dir_all(workspace.join("src")).unwrap();
    std::fs::write(workspace.join("README.md"), "the workspace of the test\n").unwrap();
    Command::new(python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/client.py"))
        .arg("--teammate")
        .arg(bin("teammate"))
        .args(["--lead", &lead.url, "--name", name, "--workspace"])
        .arg(&workspace)
        .arg(scenario)
        .env("MESH_JOIN_TOKEN", &lead.join_token)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Waits for the client to exit; asserts it succeeded, showing what it said.
async fn finished(mut child: Child) -> String {
    let (status, out, err) = within("the MCP client to finish", async {
        let mut out = String::new();
        let mut err = String::new();
        let (mut stdout, mut stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
        let (a, b) = tokio::join!(
            stdout.read_to_string(&mut out),
            stderr.read_to_string(&mut err)
        );
        a.unwrap();
        b.unwrap();
        (child.wait().await.unwrap(), out, err)
    })
    .await;
    assert!(
        status.success(),
        "client failed ({status}):\n{out}\n--- stderr\n{err}"
    );
    out
}

#[tokio::test]
async fn an_mcp_agent_is_gated_reviewed_granted_and_shut_down() {
    // First, before any connection: installing the venv blocks this
    // thread, and a connection whose pings go unanswered is closed.
    let py = python();
    // Both export their traces: the plan an MCP agent submits is a trace too.
    let receiver = mesh_tests::otlp::Receiver::start().await;
    let mut lead = Lead::start(&["--otlp-endpoint", &receiver.endpoint]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut witness = lead.join("witness").await;
    witness.open_inbox(0).await;
    let otlp = [("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint.as_str())];
    let agent = client_with(&py, &lead, "agent", "gate", &otlp);

    // The write in plan mode was refused, and the lead heard of it.
    let refused = events
        .tool_call("the refused write in plan mode", |t| {
            t.member == "agent" && t.tool == "write_file"
        })
        .await;
    assert!(!refused.allowed, "{refused:?}");
    assert!(refused.outcome.contains("plan mode"), "{refused:?}");
    // So were the calls of a tool that does not exist.
    events
        .tool_call("the unknown tool's refusal", |t| {
            t.member == "agent" && t.tool == "delete_everything" && !t.allowed
        })
        .await;

    let pending = |r: &pb::ProtocolState| {
        r.sender == "agent"
            && r.r#type == pb::RequestType::PlanApproval as i32
            && is(r.status, RequestStatus::Pending)
    };
    let first = events.request("the first plan", pending).await;
    operator
        .review_plan(pb::PlanReview {
            request_id: first.request_id.clone(),
            approve: false,
            feedback: "add a test for the parser".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let second = events.request("the revised plan", pending).await;
    let payload: serde_json::Value = serde_json::from_str(&second.payload_json).unwrap();
    assert_eq!(
        payload["supersedes"],
        first.request_id.as_str(),
        "{payload}"
    );
    operator
        .review_plan(pb::PlanReview {
            request_id: second.request_id.clone(),
            approve: true,
            feedback: String::new(),
            grant: Some(pb::PermissionGrant {
                mode: pb::PermissionMode::AcceptEdits as i32,
                write_paths: vec!["src/**".into()],
                expires_at_unix_ms: 0,
            }),
            ..Default::default()
        })
        .await
        .unwrap();

    events
        .tool_call("the granted write", |t| {
            t.member == "agent" && t.tool == "write_file" && t.allowed
        })
        .await;
    let outside = events
        .tool_call("the write outside the grant", |t| {
            t.member == "agent" && t.tool == "write_file" && !t.allowed
        })
        .await;
    assert!(outside.args_json.contains("notes.txt"), "{outside:?}");

    let ticket = operator
        .request_shutdown(pb::ShutdownRequest {
            target: "agent".into(),
            reason: "test over".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    events
        .member_in("agent", pb::MemberStatus::Terminated)
        .await;
    let notice = witness
        .next_matching(|e| matches!(e.body, Some(Body::TeammateTerminated(_))))
        .await;
    assert!(
        matches!(&notice.body, Some(Body::TeammateTerminated(t)) if t.name == "agent" && t.reason.contains("done")),
        "{notice:?}"
    );
    let out = finished(agent).await;
    for line in [
        "list_changed #1",
        "list_changed #2",
        "respond_shutdown -> ok: agreed",
        "DONE",
        "CLOSED",
    ] {
        assert!(out.contains(line), "{line:?} missing from:\n{out}");
    }
    let state = operator
        .get_request(pb::GetRequestRequest {
            request_id: ticket.request_id,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(is(state.status, RequestStatus::Approved), "{state:?}");

    // The two plans, each a trace from `teammate mcp` into the lead.
    assert!(lead.terminate().await.success());
    let spans = receiver.spans();
    let mut plans: Vec<_> = spans
        .iter()
        .filter(|s| s.service == "mesh-teammate" && s.name == "submit_plan")
        .collect();
    plans.sort_by_key(|s| s.start_ns);
    let decisions: Vec<String> = plans.iter().map(|s| s.text("mesh.decision")).collect();
    assert_eq!(decisions, ["rejected", "approved"], "{plans:#?}");
    for plan in plans {
        assert!(
            spans.iter().any(|s| s.service == "mesh-lead"
                && s.name == "plan_approval review"
                && s.parent_span_id == plan.span_id),
            "the lead's review continues {plan:?}"
        );
    }
    receiver.stop().await;
}

#[tokio::test]
async fn a_decision_after_the_review_wait_arrives_in_check_inbox() {
    // First, before any connection: installing the venv blocks this
    // thread, and a connection whose pings go unanswered is closed.
    let py = python();
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut witness = lead.join("witness").await;
    witness.open_inbox(0).await;
    let mut agent = client(&py, &lead, "agent", "pending");
    let mut stderr = agent.stderr.take().unwrap();
    let err = tokio::spawn(async move {
        let mut err = String::new();
        stderr.read_to_string(&mut err).await.unwrap();
        err
    });
    let hello = witness
        .next_matching(|e| matches!(e.body, Some(Body::Text(_))))
        .await;
    assert_eq!(hello.from, "agent");
    assert!(matches!(&hello.body, Some(Body::Text(t)) if t.content == "hello from the agent"));

    let plan = events
        .request("the plan", |r| {
            r.sender == "agent" && is(r.status, RequestStatus::Pending)
        })
        .await;
    let mut lines = BufReader::new(agent.stdout.take().unwrap()).lines();
    within("the client to see its plan pending", async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line == "PENDING" {
                return;
            }
        }
        panic!("the client ended before its plan was pending");
    })
    .await;
    witness.send("agent", "hello back", "").await.unwrap();
    operator
        .review_plan(pb::PlanReview {
            request_id: plan.request_id,
            approve: true,
            ..Default::default()
        })
        .await
        .unwrap();
    events
        .tool_call("the write after the late grant", |t| {
            t.member == "agent" && t.tool == "write_file" && t.allowed
        })
        .await;
    let mut rest = String::new();
    while let Some(line) = within("the client's output", lines.next_line())
        .await
        .unwrap()
    {
        rest.push_str(&line);
        rest.push('\n');
    }
    agent.stdout = None;
    let status = within("the client to exit", agent.wait()).await.unwrap();
    let err = err.await.unwrap();
    assert!(status.success(), "{rest}\n--- stderr\n{err}");
    assert!(rest.contains("DONE"), "{rest}");
}

#[tokio::test]
async fn an_mcp_agent_claims_plans_for_and_completes_a_task() {
    // First, before any connection: installing the venv blocks this
    // thread, and a connection whose pings go unanswered is closed.
    let py = python();
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let task = operator
        .create_task(pb::CreateTaskRequest {
            subject: "write the parser".into(),
            files: vec!["src/**".into()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let agent = client(&py, &lead, "agent", "tasks");
    let plan = events
        .request("the plan for the task", |r| {
            r.sender == "agent" && is(r.status, RequestStatus::Pending)
        })
        .await;
    let payload: serde_json::Value = serde_json::from_str(&plan.payload_json).unwrap();
    assert_eq!(
        payload["plan"]["task_id"],
        task.task_id.as_str(),
        "{payload}"
    );
    operator
        .review_plan(pb::PlanReview {
            request_id: plan.request_id,
            approve: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let out = finished(agent).await;
    assert!(out.contains("DONE"), "{out}");
    let done = operator
        .list_tasks(pb::ListTasksRequest::default())
        .await
        .unwrap()
        .into_inner()
        .tasks;
    assert_eq!(done[0].status, pb::TaskStatus::Completed as i32, "{done:?}");
    assert_eq!(
        (done[0].owner.as_str(), done[0].summary.as_str()),
        ("agent", "parser written")
    );
}

#[tokio::test]
async fn closing_stdin_makes_the_member_leave_at_once() {
    // First, before any connection: installing the venv blocks this
    // thread, and a connection whose pings go unanswered is closed.
    let py = python();
    // A grace period far longer than the test: only `Leave` can end the member.
    let lead = Lead::start(&["--grace", "600"]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut witness = lead.join("witness").await;
    witness.open_inbox(0).await;
    let agent = client(&py, &lead, "closer", "close");
    let out = finished(agent).await;
    assert!(out.contains("CLOSING"), "{out}");
    events
        .member_in("closer", pb::MemberStatus::Terminated)
        .await;
    let notice = witness
        .next_matching(|e| matches!(e.body, Some(Body::TeammateTerminated(_))))
        .await;
    assert!(
        matches!(&notice.body, Some(Body::TeammateTerminated(t)) if t.name == "closer" && t.reason.contains("left the team")),
        "{notice:?}"
    );
}

/// The same by hand, to see the exit code: initialize, then close stdin.
#[tokio::test]
async fn the_process_exits_zero_when_stdin_closes() {
    let lead = Lead::start(&["--grace", "600"]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let workspace = lead.workspace("raw");
    std::fs::create_dir_all(&workspace).unwrap();
    let mut child = Command::new(bin("teammate"))
        .args(["mcp", "--lead", &lead.url, "--name", "raw", "--workspace"])
        .arg(&workspace)
        .env("MESH_JOIN_TOKEN", &lead.join_token)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    events.member("raw to join", |m| m.name == "raw").await;
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "by-hand", "version": "0"}}
    });
    stdin
        .write_all(format!("{initialize}\n").as_bytes())
        .await
        .unwrap();
    let line = within("the initialize result", stdout.next_line())
        .await
        .unwrap()
        .unwrap();
    let reply: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        reply["result"]["capabilities"]["tools"]["listChanged"], true,
        "{reply}"
    );
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .unwrap();
    let list = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    stdin
        .write_all(format!("{list}\n").as_bytes())
        .await
        .unwrap();
    let line = within("the tool list", stdout.next_line())
        .await
        .unwrap()
        .unwrap();
    let reply: serde_json::Value = serde_json::from_str(&line).unwrap();
    let names: Vec<&str> = reply["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "read_file",
            "list_dir",
            "search",
            "send_message",
            "check_inbox",
            "list_tasks",
            "claim_task",
            "complete_task",
            "submit_plan"
        ]
    );

    let closed = Instant::now();
    drop(stdin);
    let status = within("teammate mcp to exit", child.wait()).await.unwrap();
    events.member_in("raw", pb::MemberStatus::Terminated).await;
    eprintln!(
        "closed stdin -> member TERMINATED in {:?}",
        closed.elapsed()
    );
    assert!(status.success(), "{status}");
}

/// An MCP client's `run_command` meets the same sandbox as a script's:
/// under the default flags, the granted file is written, and another file
/// of the workspace, a private file in the user's home and a port on
/// loopback stay out of reach, judged from outside.
#[tokio::test]
async fn an_mcp_agents_commands_run_in_the_grants_sandbox() {
    let py = python();
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let home = std::env::var("HOME").unwrap();
    let private = tempfile::tempdir_in(home).unwrap();
    let secret = format!("mcp-secret-{}", uuid::Uuid::new_v4().simple());
    let secret_file = private.path().join("notes.txt");
    std::fs::write(&secret_file, &secret).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port().to_string();

    let workspace = lead.workspace("agent");
    std::fs::create_dir_all(&workspace).unwrap();
    let agent = Command::new(&py)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/client.py"))
        .arg("--teammate")
        .arg(bin("teammate"))
        .args(["--lead", &lead.url, "--name", "agent", "--workspace"])
        .arg(&workspace)
        .arg("--secret-file")
        .arg(&secret_file)
        .args(["--port", &port, "sandbox"])
        .env("MESH_JOIN_TOKEN", &lead.join_token)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let plan = events.pending_plan("agent").await;
    // BYPASS: its commands run unasked, within the plan's files.
    operator
        .review_plan(pb::PlanReview {
            request_id: plan.request_id.clone(),
            approve: true,
            grant: Some(pb::PermissionGrant {
                mode: pb::PermissionMode::Bypass as i32,
                write_paths: Vec::new(),
                expires_at_unix_ms: 0,
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    let out = finished(agent).await;
    assert!(out.contains("DONE"), "{out}");
    assert!(
        !out.contains(&secret),
        "the secret reached the agent: {out}"
    );
    assert!(listener.accept().is_err(), "a command reached the listener");
    assert_eq!(
        std::fs::read_to_string(workspace.join("granted.txt")).unwrap(),
        "hi\n"
    );
    assert!(!workspace.join("other.txt").exists());
    let team = mesh_tests::member_named(&mut operator, "agent").await;
    assert_eq!(team.sandbox.unwrap().kind, "landlock");
}
