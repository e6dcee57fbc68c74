//! No token leaves the lead or the teammate in text: not in a log line (at
//! debug level), an event, the operator commands' output, or an error
//! message, through a whole session with refusals along the way.

#![allow(clippy::unwrap_used)]

use std::process::Stdio;

use mesh_tests::{bin, is, within, Events, Lead};
use shared::pb::{self, RequestStatus};
use tokio::process::Command;
use tokio_stream::StreamExt;

const PLAN: &str = r#"
[[plans]]
summary = "Add the auth module"
files = ["src/auth.rs"]

[[actions]]
phase = "work"
tool = "write_file"
path = "src/auth.rs"
content = "pub fn login() {}\n"

[[actions]]
phase = "work"
tool = "run_command"
command = "env"
"#;

#[tokio::test]
async fn no_token_appears_in_logs_events_output_or_errors() {
    let dir = tempfile::tempdir().unwrap();
    let join_token = shared::auth::new_token();
    let operator_token = shared::auth::new_token();
    let lead_log = dir.path().join("lead.log");
    let mut command = Command::new(bin("lead"));
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--state-dir"])
        .arg(dir.path().join("state"))
        .arg("--spawn-root")
        .arg(dir.path())
        .env("MESH_JOIN_TOKEN", &join_token)
        .env("MESH_OPERATOR_TOKEN", &operator_token)
        .env("RUST_LOG", "debug")
        .stderr(std::fs::File::create(&lead_log).unwrap());
    let mut lead = Lead::spawn(command, dir, join_token.clone(), operator_token.clone()).await;
    let mut operator = lead.operator().await;
    let mut watch = operator
        .watch(pb::WatchRequest {})
        .await
        .unwrap()
        .into_inner();
    let mut events = Events::open(&mut operator).await;

    // A raw member, whose session token we know, and a teammate process
    // logging at debug level.
    let mut bob = lead.join("bob").await;
    bob.send("lead", "hello", "11111111-1111-4111-8111-111111111111")
        .await
        .unwrap();
    let teammate_log = lead.dir.path().join("alice.log");
    let script = lead.script("alice", PLAN);
    let mut alice = Command::new(bin("teammate"))
        .args(["--lead", &lead.url, "--name", "alice", "--script"])
        .arg(&script)
        .arg("--workspace")
        .arg(lead.workspace("alice"))
        .env("MESH_JOIN_TOKEN", &join_token)
        .env("RUST_LOG", "debug")
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(&teammate_log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let plan = events
        .request("alice's plan", |r| {
            r.sender == "alice" && is(r.status, RequestStatus::Pending)
        })
        .await;

    // What an operator sees, and what refusals say.
    let mut seen = String::new();
    for args in [
        vec!["team"],
        vec!["team", "--json"],
        vec!["requests"],
        vec!["requests", "--json"],
        vec!["tasks", "--json"],
        vec!["approve", &plan.request_id, "--mode", "bypass"],
    ] {
        let (ok, out, err) = lead.cli(&args).await;
        assert!(ok, "{args:?}: {out}{err}");
        seen.push_str(&out);
        seen.push_str(&err);
    }
    events
        .tool_call("alice's command", |t| {
            t.member == "alice" && t.tool == "run_command"
        })
        .await;
    let wrong = shared::auth::new_token();
    for token in [&join_token, &bob.token, &wrong] {
        let mut as_operator = pb::operator_client::OperatorClient::with_interceptor(
            lead.channel().await,
            shared::auth::BearerToken::new(token).unwrap(),
        );
        let refused = as_operator
            .list_team(pb::ListTeamRequest::default())
            .await
            .unwrap_err();
        seen.push_str(&format!("{refused:?}\n"));
        let mut as_member = lead.lead_api(token).await;
        let refused = as_member
            .claim_task(pb::ClaimTaskRequest::default())
            .await
            .map(|_| ());
        seen.push_str(&format!("{refused:?}\n"));
    }
    let mut with_operator = lead.lead_api(&operator_token).await;
    let refused = with_operator
        .report_idle(pb::IdleNotification::default())
        .await
        .unwrap_err();
    seen.push_str(&format!("{refused:?}\n"));
    let (ok, out, err) = lead.cli(&["shutdown", "alice", "--reason", "done"]).await;
    assert!(ok, "{out}{err}");
    seen.push_str(&out);
    within("alice to exit", alice.wait()).await.unwrap();

    // Every event so far, as text.
    let (ok, out, err) = lead.cli(&["shutdown", "bob", "--no-wait"]).await;
    assert!(ok, "{out}{err}");
    within("the events up to bob's shutdown request", async {
        while let Some(event) = watch.next().await {
            let event = event.unwrap();
            seen.push_str(&format!("{event:?}\n"));
            if matches!(&event.kind, Some(pb::event::Kind::Request(r))
                if r.target == "bob" && r.r#type == pb::RequestType::Shutdown as i32)
            {
                return;
            }
        }
    })
    .await;
    lead.terminate().await;

    let logs = std::fs::read_to_string(&lead_log).unwrap()
        + &std::fs::read_to_string(&teammate_log).unwrap();
    assert!(logs.contains("DEBUG"), "the logs are at debug level");
    assert!(seen.contains("alice"), "the output is real: {seen}");
    for (which, token) in [
        ("the join token", &join_token),
        ("the operator token", &operator_token),
        ("bob's session token", &bob.token),
    ] {
        assert!(!logs.contains(token.as_str()), "{which} is in a log");
        assert!(
            !seen.contains(token.as_str()),
            "{which} is in an event, output or error"
        );
    }
}
