//! The lead's command line: `serve` with generated tokens, the operator
//! commands, health and reflection on the same port, and `demo`.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;

use mesh_tests::{bin, process_running, within, Lead};
use tokio::process::Command;
use tokio_stream::StreamExt;

/// A `lead serve` that must generate its own tokens.
async fn lead_with_generated_tokens() -> Lead {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(bin("lead"));
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--state-dir"])
        .arg(dir.path().join("state"))
        .env_remove("MESH_JOIN_TOKEN")
        .env_remove("MESH_OPERATOR_TOKEN")
        .env("RUST_LOG", "warn");
    let mut lead = Lead::spawn(command, dir, String::new(), String::new()).await;
    let state = lead.state_dir();
    lead.join_token = std::fs::read_to_string(state.join("join.token")).unwrap();
    lead.operator_token = std::fs::read_to_string(state.join("operator.token")).unwrap();
    lead
}

#[tokio::test]
async fn serve_generates_private_tokens_and_records_its_address() {
    let mut lead = lead_with_generated_tokens().await;
    let state = lead.state_dir();
    for file in ["join.token", "operator.token"] {
        let mode = std::fs::metadata(state.join(file))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{file} is readable by the owner alone");
    }
    assert_ne!(lead.join_token, lead.operator_token);
    assert_eq!(
        std::fs::read_to_string(state.join("lead.addr"))
            .unwrap()
            .trim(),
        lead.addr
    );

    // Operator commands find the lead and the token through --state-dir alone.
    lead.join("alice").await;
    let output = Command::new(bin("lead"))
        .args(["team", "--state-dir"])
        .arg(&state)
        .env_remove("MESH_OPERATOR_TOKEN")
        .output()
        .await
        .unwrap();
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{out}");
    assert!(out.starts_with("NAME"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("alice") && l.contains("tester") && l.contains("plan")),
        "{out}"
    );
    assert_eq!(lead.terminate().await.code(), Some(0));
}

#[tokio::test]
async fn operator_commands_print_tables_json_and_clear_errors() {
    let lead = Lead::start(&[]).await;
    let mut alice = lead.join("alice").await;
    let id = alice
        .submit("", "Add auth", &["src/auth.rs"])
        .await
        .unwrap();

    let (ok, out, _) = lead.cli(&["requests", "--pending"]).await;
    assert!(ok);
    assert!(
        out.contains(&id)
            && out.contains("plan_approval")
            && out.contains("pending")
            && out.contains("Add auth"),
        "{out}"
    );
    let (ok, out, _) = lead.cli(&["team", "--json"]).await;
    assert!(ok);
    assert!(
        out.contains("\"name\":\"alice\"") && out.contains("\"mode\":\"plan\""),
        "{out}"
    );

    let (ok, _, err) = lead.cli(&["approve", "no-such-id"]).await;
    assert!(!ok);
    assert!(
        err.contains("not found") || err.contains("Some requested entity was not found"),
        "{err}"
    );
    assert!(err.contains("no-such-id"), "{err}");
    let (ok, _, err) = lead.cli(&["approve", &id, "--mode", "fast"]).await;
    assert!(!ok);
    assert!(err.contains("--mode"), "{err}");
    let (ok, _, err) = lead.cli(&["approve", &id, "--write", "../x"]).await;
    assert!(!ok);
    assert!(err.contains("--write"), "{err}");

    let script = lead.script("x", "");
    let args = [
        "spawn",
        "x",
        "--role",
        "r",
        "--script",
        script.to_str().unwrap(),
        "--teammate-bin",
        "/no/such/teammate",
    ];
    let (ok, _, err) = lead.cli(&args).await;
    assert!(!ok);
    assert!(
        err.contains("teammate_bin") && err.contains("/no/such/teammate"),
        "{err}"
    );
    let (ok, _, err) = lead
        .cli(&[
            "spawn",
            "x",
            "--role",
            "r",
            "--script",
            "/no/such/script.toml",
        ])
        .await;
    assert!(!ok);
    assert!(err.contains("script_path"), "{err}");

    let missing = tempfile::tempdir().unwrap();
    let output = Command::new(bin("lead"))
        .args(["team", "--state-dir"])
        .arg(missing.path())
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("no running lead found"));
}

#[tokio::test]
async fn watch_prints_one_line_per_event() {
    let lead = Lead::start(&[]).await;
    let (_watch, mut lines) = lead.watch().await;
    let mut alice = lead.join("alice").await;
    let joined = within("the join on lead watch", lines.next_line())
        .await
        .unwrap()
        .unwrap();
    assert!(joined.starts_with("member   alice"), "{joined}");
    alice.submit("", "Add auth", &["a.rs"]).await.unwrap();
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|l: &String| l.starts_with("request  plan_approval"))
    {
        seen.push(
            within("the plan on lead watch", lines.next_line())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    assert!(
        seen.iter()
            .any(|l| l.contains("alice -> lead: plan_approval_request")),
        "{seen:?}"
    );
}

#[tokio::test]
async fn health_and_reflection_are_served_on_the_same_port() {
    use tonic_health::pb::{
        health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest,
    };
    use tonic_reflection::pb::v1::{
        server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
        ServerReflectionRequest,
    };

    let lead = Lead::start(&[]).await;
    let channel = lead.channel().await;
    let mut health = HealthClient::new(channel.clone());
    for service in ["mesh.v1.Lead", "mesh.v1.Operator"] {
        let response = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(response.status, ServingStatus::Serving as i32, "{service}");
    }

    let mut reflection = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = reflection
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let response = within("reflection", responses.next())
        .await
        .unwrap()
        .unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else {
        panic!("{response:?}")
    };
    let names: Vec<_> = list.service.iter().map(|s| s.name.as_str()).collect();
    for expected in ["mesh.v1.Lead", "mesh.v1.Operator", "grpc.health.v1.Health"] {
        assert!(names.contains(&expected), "{names:?}");
    }
}

#[tokio::test]
async fn the_demo_runs_the_whole_mission_and_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let output = within(
        "lead demo",
        Command::new(bin("lead"))
            .arg("demo")
            .arg("--dir")
            .arg(dir.path())
            .env("RUST_LOG", "warn")
            .output(),
    )
    .await
    .unwrap();
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for expected in [
        "alice REFUSED write_file",
        "not available in plan mode",
        "rejected by policy: require_tests",
        "supersedes=",
        "alice ran write_file",
        "outside the grant's write paths",
        "bob -> lead: shutdown_response",
        "lead -> alice: teammate_terminated bob",
        "\"Add the auth module\" CLAIMED by alice",
        "\"Add session handling\" CLAIMED by bob",
        "alice -> lead: amendment_request",
        "approved by policy: a small amendment",
        "bob ran read_file {\"path\":\"src/auth.rs\"}: src/auth.rs: No such file",
        "overlap: alice holds src/lib.rs under an approved plan",
        "member   alice (coder) joined, mode plan",
        "result_response",
        "rejected conflicts=[\"src/lib.rs\"]",
        "This task is reviewed by its result alone",
        "bob -> alice: text",
        "alice: Add login() in src/auth.rs, with a test",
        "bob: Add sessions in src/session.rs, on top of login()",
        "ok  src/lib.rs: landed",
        "worktrees and branches left: only main's checkout",
        "\"Add the auth module\" COMPLETED by alice",
        "\"Add session handling\" COMPLETED by bob",
        "\"Document the login flow\" COMPLETED by",
        "demo complete",
    ] {
        assert!(
            out.contains(expected),
            "{expected:?} missing from the transcript:\n{out}"
        );
    }
    // The docs task waits for the auth module: it is claimed only after
    // the auth module's result landed. bob's first result conflicts with
    // alice's, which landed first.
    let at = |needle: &str| {
        out.find(needle)
            .unwrap_or_else(|| panic!("{needle:?} missing"))
    };
    assert!(
        at("\"Add the auth module\" COMPLETED") < at("\"Document the login flow\" CLAIMED"),
        "{out}"
    );
    // bob hears of alice's hold when his plan is approved, before his
    // result conflicts with hers.
    assert!(
        at("overlap: alice holds src/lib.rs") < at("rejected conflicts=[\"src/lib.rs\"]"),
        "{out}"
    );
    // Each request change is told once (a decision and the review that
    // recorded it were two identical lines); a joining member is not
    // "disconnected"; a claim with nothing pending does not say "blocked".
    let mut told = std::collections::HashSet::new();
    for line in out.lines().filter(|l| l.contains("  request  ")) {
        let event = line.trim_start().split_once("  ").map_or(line, |(_, e)| e);
        assert!(told.insert(event), "told twice: {event}\n{out}");
    }
    assert!(!out.contains("is disconnected"), "{out}");
    assert!(!out.contains("all blocked"), "{out}");
    // Both teammates ran the playbook; neither process is left.
    let playbook = dir.path().join("playbook.toml");
    assert!(playbook.is_file());
    assert!(
        !process_running(playbook.to_str().unwrap()),
        "a teammate's process is left"
    );
}

#[tokio::test]
async fn shutdown_says_how_long_it_waits_and_no_wait_returns_at_once() {
    let lead = Lead::start(&["--store", "memory"]).await;
    let (ok, help, err) = lead.cli(&["shutdown", "--help"]).await;
    assert!(ok, "{help}{err}");
    for words in [
        "wait for its answer",
        "--shutdown-deadline, 30 s",
        "--no-wait",
    ] {
        assert!(help.contains(words), "{words:?} missing from:\n{help}");
    }
    // bob joined over the wire and never answers a shutdown.
    let _bob = lead.join("bob").await;
    let (ok, out, err) = lead.cli(&["shutdown", "bob", "--no-wait"]).await;
    assert!(ok, "{out}{err}");
    let id = out
        .trim()
        .strip_prefix("asked bob to shut down: request ")
        .unwrap_or_else(|| panic!("no request id in {out:?}"));
    let (ok, requests, err) = lead.cli(&["requests"]).await;
    assert!(ok, "{requests}{err}");
    assert!(
        requests
            .lines()
            .any(|l| l.contains(id) && l.contains("pending")),
        "{requests}"
    );
    // Waiting, it returns once the deadline passes, saying so.
    let (ok, out, err) = lead.cli(&["shutdown", "bob", "--deadline", "1"]).await;
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("bob did not answer in time (expired)"),
        "{out}"
    );
}
