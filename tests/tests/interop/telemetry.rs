//! OpenTelemetry over the wire: a real OTLP/gRPC receiver (the Python
//! `opentelemetry-proto` definitions, `tests/otlp/receiver.py`) gets the
//! spans and metrics of real `lead` and `teammate` processes, and one trace
//! follows a plan from the teammate's `submit_plan` through every reviewer
//! stage to the decision and the first write under the grant; a shutdown
//! is a trace of its own; a result's review and its landing join the plan's
//! trace.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{os::unix::fs::PermissionsExt, path::Path};

use mesh_tests::{
    fake_model::{prompt_tokens, Answer, FakeModel},
    git::{git, team_repo},
    is,
    otlp::{tree, Receiver, Span},
    Events, Lead,
};
use serde_json::json;
use shared::pb;

/// The plan escalates (`db/**`), so that after the machine stages a person
/// decides.
const ALICE: &str = r#"
[[plans]]
summary = "Add the auth module and its table"
files = ["src/auth.rs", "db/schema.sql"]
tests = ["tests/auth.rs"]

[[actions]]
phase = "work"
tool = "write_file"
path = "src/auth.rs"
content = "pub fn login() {}\n"
"#;

const CHAIN: &str = r#"
escalate = ["db/**"]

[[stages]]
kind = "policy"
file = "policy.toml"

[[stages]]
kind = "program"
command = ["{dir}/pass.sh"]

[[stages]]
kind = "model"
file = "reviewer.toml"

[[stages]]
kind = "human"
"#;

fn write_script(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The one span named `name` (of `service`) among `spans`.
fn one<'a>(spans: &'a [Span], service: &str, name: &str) -> &'a Span {
    let found: Vec<&Span> = spans
        .iter()
        .filter(|s| s.service == service && s.name == name)
        .collect();
    assert_eq!(found.len(), 1, "one {name} of {service}: {found:#?}");
    found[0]
}

/// Asserts `child`'s parent is `parent`, in the same trace.
fn parent_of(child: &Span, parent: &Span) {
    assert_eq!(
        child.trace_id, parent.trace_id,
        "{} in {}'s trace",
        child.name, parent.name
    );
    assert_eq!(
        child.parent_span_id, parent.span_id,
        "{}'s parent is {}",
        child.name, parent.name
    );
}

/// The points of metric `name` from `service`, every export together.
fn points(receiver: &Receiver, service: &str, name: &str) -> Vec<serde_json::Value> {
    receiver
        .metrics()
        .into_iter()
        .filter(|(s, n, _)| s == service && n == name)
        .flat_map(|(_, _, p)| p)
        .collect()
}

#[tokio::test]
async fn one_trace_follows_a_plan_across_the_teammate_and_the_lead() {
    let receiver = Receiver::start().await;
    let model = FakeModel::start(vec![Answer::call(
        "review_plan",
        json!({"approve": true, "feedback": "tests present"}),
    )])
    .await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("policy.toml"),
        "deny_write = [\"secret/**\"]\n",
    )
    .unwrap();
    write_script(dir.path(), "pass.sh", "cat >/dev/null; exit 1");
    std::fs::write(
        dir.path().join("reviewer.toml"),
        format!(
            "model = \"review-model\"\nbase_url = \"{}\"\ncriteria = \"Plans need tests.\"\ntimeout_secs = 20\n",
            model.base_url
        ),
    )
    .unwrap();
    let chain = dir.path().join("chain.toml");
    std::fs::write(
        &chain,
        CHAIN.replace("{dir}", &dir.path().display().to_string()),
    )
    .unwrap();
    let mut lead = Lead::start(&[
        "--approval",
        &format!("chain:{}", chain.display()),
        "--otlp-endpoint",
        &receiver.endpoint,
    ])
    .await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut alice = lead.teammate_with("alice", ALICE, &["--otlp-endpoint", &receiver.endpoint]);

    let plan = events
        .request("alice's plan, left to a person", |r| {
            r.sender == "alice" && r.reviews.last().is_some_and(|s| s.verdict == "waits")
        })
        .await;
    let (ok, out, err) = lead.cli(&["approve", &plan.request_id]).await;
    assert!(ok, "{out}{err}");
    let wrote = events
        .tool_call("alice's write under the grant", |t| {
            t.member == "alice" && t.tool == "write_file"
        })
        .await;
    assert!(wrote.allowed, "{wrote:?}");
    // `lead stats` shows the person as the long wait among the stages.
    let (ok, out, err) = lead.cli(&["stats", "--json"]).await;
    assert!(ok, "{out}{err}");
    let stats: serde_json::Value = serde_json::from_str(&out).unwrap();
    let kinds: Vec<&str> = stats["reviewers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["of"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["human", "model", "policy", "program"], "{out}");
    assert_eq!(stats["decided"][0]["of"], "plan_approval", "{out}");
    let (ok, out, err) = lead.cli(&["stats"]).await;
    assert!(ok, "{out}{err}");
    assert!(out.contains("each reviewer's time on a request"), "{out}");
    println!("lead stats:\n{out}");

    let (ok, out, err) = lead.cli(&["shutdown", "alice", "--reason", "done"]).await;
    assert!(ok, "{out}{err}");
    assert!(alice.exit().await.success());
    // A lead that stops sends what it has not sent yet.
    assert!(lead.terminate().await.success());

    let spans = receiver.spans();
    let submit = one(&spans, "mesh-teammate", "submit_plan");
    assert_eq!(
        submit.parent_span_id, "",
        "the teammate's submit_plan is the trace's root"
    );
    assert_eq!(submit.text("mesh.request.id"), plan.request_id);
    assert_eq!(submit.text("mesh.decision"), "approved");
    let trace = submit.trace_id.clone();
    println!(
        "the plan's trace, as the receiver got it:\n{}",
        tree(&spans, &trace)
    );

    // The lead's side continues the teammate's trace (traceparent).
    let rpc = one(&spans, "mesh-lead", "mesh.v1.Lead/SubmitPlan");
    parent_of(rpc, submit);
    let review = one(&spans, "mesh-lead", "plan_approval review");
    parent_of(review, submit);
    assert_eq!(review.text("mesh.request.id"), plan.request_id);
    assert_eq!(review.text("mesh.member"), "alice");
    assert_eq!(review.text("mesh.decision"), "approved");
    assert_eq!(review.text("mesh.decided_by"), "operator");
    assert!(
        review.events.iter().any(|e| e == "handed to a person"),
        "{review:?}"
    );

    // Each reviewer's step, in the chain's order, one after the other.
    let steps: Vec<&Span> = {
        let mut steps: Vec<&Span> = spans
            .iter()
            .filter(|s| s.parent_span_id == review.span_id && s.name.starts_with("review "))
            .collect();
        // Steps in the same millisecond start together: their number orders them.
        steps.sort_by_key(|s| s.attr("mesh.review.step").and_then(|v| v.as_i64()));
        steps
    };
    let names: Vec<&str> = steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "review policy",
            "review program pass.sh",
            "review model review-model",
            "review operator"
        ]
    );
    let kinds: Vec<String> = steps.iter().map(|s| s.text("mesh.reviewer.kind")).collect();
    assert_eq!(kinds, ["policy", "program", "model", "human"]);
    for pair in steps.windows(2) {
        assert!(
            pair[0].end_ns <= pair[1].start_ns,
            "one after the other: {pair:#?}"
        );
    }
    assert_eq!(steps[2].text("mesh.review.verdict"), "approve");
    // The review spans the whole wait, its last step ends with it.
    assert!(review.start_ns <= steps[0].start_ns && steps[3].end_ns <= review.end_ns + 1_000_000);

    // The model stage's call: a GenAI span, its tokens the server's count.
    let chat = one(&spans, "mesh-lead", "chat review-model");
    parent_of(chat, review);
    let asked = model.requests();
    assert_eq!(asked.len(), 1);
    assert_eq!(chat.text("gen_ai.operation.name"), "chat");
    assert_eq!(chat.text("gen_ai.request.model"), "review-model");
    assert_eq!(
        chat.attr("gen_ai.usage.input_tokens")
            .and_then(|v| v.as_i64()),
        Some(prompt_tokens(&asked[0].body) as i64)
    );
    assert!(
        chat.attr("gen_ai.usage.output_tokens")
            .and_then(|v| v.as_i64())
            .unwrap()
            > 0
    );

    // The operator's decision (`lead approve`: one Operator.Decide) joins
    // the request's trace.
    parent_of(one(&spans, "mesh-lead", "mesh.v1.Operator/Decide"), review);

    // The first write under the grant, in the teammate, after the decision.
    let write = one(&spans, "mesh-teammate", "execute_tool write_file");
    parent_of(write, submit);
    assert!(write.start_ns >= review.end_ns, "{write:?} {review:?}");
    assert_eq!(write.text("gen_ai.tool.name"), "write_file");

    // The shutdown handshake is a trace of its own, answered by alice.
    let shutdown = one(&spans, "mesh-lead", "shutdown");
    assert_ne!(shutdown.trace_id, trace);
    assert_eq!(shutdown.parent_span_id, "");
    assert_eq!(shutdown.text("mesh.target"), "alice");
    assert_eq!(shutdown.text("mesh.decision"), "approved");
    assert_eq!(shutdown.text("mesh.decided_by"), "member alice");
    parent_of(
        one(&spans, "mesh-lead", "mesh.v1.Operator/RequestShutdown"),
        shutdown,
    );
    parent_of(
        one(&spans, "mesh-lead", "mesh.v1.Lead/RespondShutdown"),
        shutdown,
    );
    // alice's answer joins it: the envelope carried the trace. Its span
    // runs from the request's arrival (the call in progress finishing
    // first) to the answer the lead took.
    let answer = one(&spans, "mesh-teammate", "answer_shutdown");
    parent_of(answer, shutdown);
    assert_eq!(answer.text("mesh.member"), "alice");
    assert_eq!(answer.text("mesh.decision"), "agreed");
    assert!(
        answer.start_ns >= shutdown.start_ns,
        "{answer:?} {shutdown:?}"
    );
    parent_of(one(&spans, "mesh-teammate", "finish_current_call"), answer);

    // Metrics arrived over the same exporter.
    let waits = points(&receiver, "mesh-lead", "mesh.review.wait");
    for kind in ["policy", "program", "model", "human"] {
        assert!(
            waits
                .iter()
                .any(|p| p["attributes"]["mesh.reviewer.kind"] == kind
                    && p["value"]["count"].as_u64() >= Some(1)),
            "a wait for {kind}: {waits:#?}"
        );
    }
    let decisions = points(&receiver, "mesh-lead", "mesh.decisions");
    assert!(
        decisions
            .iter()
            .any(|p| p["attributes"]["mesh.request.kind"] == "plan_approval"
                && p["attributes"]["mesh.reviewer.kind"] == "human"
                && p["attributes"]["mesh.decision"] == "approved"),
        "{decisions:#?}"
    );
    assert!(!points(&receiver, "mesh-lead", "mesh.store.commits").is_empty());
    assert!(!points(&receiver, "mesh-lead", "mesh.members").is_empty());
    assert!(!points(&receiver, "mesh-lead", "mesh.requests.pending").is_empty());
    let tokens = points(&receiver, "mesh-lead", "gen_ai.client.token.usage");
    assert!(
        tokens
            .iter()
            .any(|p| p["attributes"]["gen_ai.token.type"] == "input"),
        "{tokens:#?}"
    );
    receiver.stop().await;
}

#[tokio::test]
async fn a_results_review_and_its_landing_join_the_plans_trace() {
    let receiver = Receiver::start().await;
    let repo = team_repo();
    let mut lead = Lead::start(&[
        "--repo",
        repo.path().to_str().unwrap(),
        "--branch",
        "main",
        "--approval",
        "auto",
        "--otlp-endpoint",
        &receiver.endpoint,
    ])
    .await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let script = lead.script(
        "alice",
        r#"
claim = "next"

[[tasks]]
subject = "one"
summary = "Write one.txt"
[[tasks.plans]]
summary = "write one.txt"
files = ["one.txt"]
[[tasks.actions]]
phase = "work"
tool = "write_file"
path = "one.txt"
content = "1"
"#,
    );
    operator
        .create_task(pb::CreateTaskRequest {
            subject: "one".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    // A spawned teammate exports where its lead does.
    let (ok, _, err) = lead
        .cli(&[
            "spawn",
            "alice",
            "--role",
            "writer",
            "--script",
            script.to_str().unwrap(),
        ])
        .await;
    assert!(ok, "{err}");
    let landed = events
        .request("alice's result to land", |r| {
            r.r#type == pb::RequestType::Result as i32 && !is(r.status, pb::RequestStatus::Pending)
        })
        .await;
    assert!(is(landed.status, pb::RequestStatus::Approved), "{landed:?}");
    let (ok, out, _) = lead.cli(&["shutdown", "alice", "--reason", "done"]).await;
    assert!(ok, "{out}");
    events
        .find("alice's process to end", |kind| match kind {
            pb::event::Kind::ChildExited(c) if c.name == "alice" => Some(()),
            _ => None,
        })
        .await;
    assert!(lead.terminate().await.success());

    let spans = receiver.spans();
    let submit = one(&spans, "mesh-teammate", "submit_plan");
    println!(
        "the plan's trace, with its result:\n{}",
        tree(&spans, &submit.trace_id)
    );
    let result = one(&spans, "mesh-teammate", "submit_result");
    parent_of(result, submit);
    assert_eq!(result.text("mesh.request.id"), landed.request_id);
    assert_eq!(result.text("mesh.outcome"), "landed");
    let review = one(&spans, "mesh-lead", "result review");
    parent_of(review, result);
    assert_eq!(review.text("mesh.decision"), "approved");
    let land = one(&spans, "mesh-lead", "land");
    parent_of(land, review);
    assert_eq!(land.text("mesh.landing"), "merged");
    assert_eq!(
        land.text("vcs.ref.head.revision"),
        git(repo.path(), &["rev-parse", "main"])
    );
    parent_of(
        one(&spans, "mesh-teammate", "execute_tool write_file"),
        submit,
    );
    receiver.stop().await;
}
