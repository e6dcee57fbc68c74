//! The model driver end to end: the real `lead` and `teammate` binaries, and
//! a fake OpenAI-compatible server on loopback that answers with scripted
//! chat completions and records every request (`mesh_tests::fake_model`).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use mesh_tests::{
    fake_model::{prompt_tokens, Answer, FakeModel, Recorded},
    is, Events, Lead,
};
use serde_json::{json, Value};
use shared::pb::{self, MemberStatus, RequestStatus};

const GATED: [&str; 3] = ["write_file", "edit_file", "run_command"];

/// The pending plan of `name` whose summary is `summary`.
async fn pending_plan(events: &mut Events, name: &str, summary: &str) -> pb::ProtocolState {
    events
        .request(&format!("{name}'s pending plan {summary:?}"), |r| {
            r.sender == name
                && is(r.status, RequestStatus::Pending)
                && r.r#type == pb::RequestType::PlanApproval as i32
                && r.payload_json.contains(summary)
        })
        .await
}

/// The tool result the request ends with (the answer to the last call).
fn last_tool_result(request: &Recorded) -> (String, String) {
    let last = request.last_message();
    assert_eq!(
        last["role"], "tool",
        "the last message is a tool result: {last}"
    );
    (
        last["tool_call_id"].as_str().unwrap().to_owned(),
        last["content"].as_str().unwrap().to_owned(),
    )
}

fn plan(summary: &str, tests: &[&str]) -> Value {
    json!({"summary": summary, "steps": ["write a.txt"], "files": ["a.txt"], "tests": tests})
}

#[tokio::test]
async fn a_model_plans_read_only_revises_after_rejection_writes_after_approval_and_shuts_down() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let model = FakeModel::start(vec![
        // It "remembers" write_file in plan mode.
        Answer::call(
            "write_file",
            json!({"path": "a.txt", "content": "too early"}),
        ),
        Answer::call("submit_plan", plan("first", &[])),
        Answer::call("submit_plan", plan("second", &["cargo test"])),
        Answer::call("write_file", json!({"path": "a.txt", "content": "hello"})),
        Answer::text("a.txt is written."),
        Answer::call(
            "respond_shutdown",
            json!({"approve": true, "reason": "all done"}),
        ),
    ])
    .await;
    // A server that holds no reply to a schema: the request names the
    // mode's tools (model_constrain.rs has the constrained requests).
    let mut alice = lead.model_teammate(
        "alice",
        &model.base_url,
        "Write a.txt.",
        &["--constrain", "off"],
    );

    // Plan mode: no gated tool on offer; the task is the first user message.
    let first = &model.wait_for(1).await[0];
    assert_eq!(first.body["model"], "test-model");
    assert_eq!(first.body["stream"], true);
    assert!(first.all_text().contains("Write a.txt."));
    let offered = first.tool_names();
    for tool in [
        "read_file",
        "list_dir",
        "search",
        "send_message",
        "submit_plan",
    ] {
        assert!(
            offered.contains(&tool.to_owned()),
            "{tool} offered: {offered:?}"
        );
    }
    for tool in GATED.iter().chain(&["respond_shutdown"]) {
        assert!(
            !offered.contains(&tool.to_string()),
            "{tool} not offered: {offered:?}"
        );
    }
    assert_eq!(first.authorization, None, "no key, no Authorization header");

    // The write in plan mode: refused by the gate, reported, nothing written,
    // and the refusal is the next request's tool result.
    let refused = events
        .tool_call("alice's write_file", |c| {
            c.member == "alice" && c.tool == "write_file"
        })
        .await;
    assert!(!refused.allowed);
    let second = &model.wait_for(2).await[1];
    let (id, result) = last_tool_result(second);
    assert_eq!(id, "call_0");
    assert!(
        result.contains("refused") && result.contains("plan mode"),
        "{result}"
    );
    assert!(!alice.workspace.join("a.txt").exists());

    // Rejected: the feedback reaches the model, and the revision supersedes.
    let first_plan = pending_plan(&mut events, "alice", "first").await;
    let (ok, out, err) = lead
        .cli(&["reject", &first_plan.request_id, "--feedback", "add a test"])
        .await;
    assert!(ok, "{out}{err}");
    let third = &model.wait_for(3).await[2];
    let last = third.last_message();
    assert_eq!(last["role"], "user");
    assert!(
        last["content"].as_str().unwrap().contains("add a test"),
        "{last}"
    );
    let (_, result) = last_tool_result(&Recorded {
        body: json!({"messages": third.messages()[..third.messages().len() - 1]}),
        authorization: None,
    });
    assert!(result.contains("rejected"), "{result}");
    let revision = pending_plan(&mut events, "alice", "second").await;
    let payload: Value = serde_json::from_str(&revision.payload_json).unwrap();
    assert_eq!(payload["supersedes"], first_plan.request_id.as_str());

    // Approved: write_file appears, and the write lands.
    let (ok, out, err) = lead
        .cli(&["approve", &revision.request_id, "--mode", "accept-edits"])
        .await;
    assert!(ok, "{out}{err}");
    let fourth = &model.wait_for(4).await[3];
    for tool in GATED {
        assert!(
            fourth.tool_names().contains(&tool.to_owned()),
            "{tool} offered after approval"
        );
    }
    assert!(!fourth.tool_names().contains(&"submit_plan".to_owned()));
    assert!(fourth.all_text().contains("approved"));
    let fifth = &model.wait_for(5).await[4];
    let (_, result) = last_tool_result(fifth);
    assert!(result.contains("wrote 5 bytes"), "{result}");
    assert_eq!(
        std::fs::read_to_string(alice.workspace.join("a.txt")).unwrap(),
        "hello"
    );

    // A reply without tool calls: idle, with the reply's text.
    events.member_in("alice", MemberStatus::Idle).await;

    // Shutdown: the model is offered respond_shutdown, agrees, and exits 0.
    let (ok, out, err) = lead
        .cli(&["shutdown", "alice", "--reason", "done for today"])
        .await;
    assert!(ok, "{out}{err}");
    assert!(out.contains("alice agreed to shut down"), "{out}");
    let sixth = &model.wait_for(6).await[5];
    assert!(sixth.tool_names().contains(&"respond_shutdown".to_owned()));
    assert!(sixth.all_text().contains("done for today"));
    assert!(alice.exit().await.success());
}

#[tokio::test]
async fn a_429_and_a_503_are_retried_with_the_same_request() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let model = FakeModel::start(vec![
        Answer::Status {
            code: 429,
            retry_after: Some(0),
            body: r#"{"error": {"message": "slow down"}}"#.into(),
        },
        Answer::Status {
            code: 503,
            retry_after: None,
            body: "overloaded".into(),
        },
        Answer::text("nothing to do"),
    ])
    .await;
    let _bob = lead.model_teammate("bob", &model.base_url, "Say hello.", &[]);
    events.member_in("bob", MemberStatus::Idle).await;
    let requests = model.requests();
    // Two failures, the reply, and (its prose owing a plan) two reminders.
    assert_eq!(requests.len(), 5, "{requests:?}");
    assert_eq!(
        requests[0].body, requests[2].body,
        "the same request, again"
    );
    assert!(requests[3].all_text().contains("submit_plan"));
}

#[tokio::test]
async fn the_api_key_goes_in_the_authorization_header() {
    let lead = Lead::start(&[]).await;
    let model = FakeModel::start(vec![Answer::text("ok")]).await;
    let mut command = lead.model_command(
        "kim",
        &model.base_url,
        "Say ok.",
        &["--api-key-env", "MESH_TEST_MODEL_KEY"],
    );
    let mut teammate = command
        .env("MESH_TEST_MODEL_KEY", "sk-test-123")
        .spawn()
        .unwrap();
    let first = &model.wait_for(1).await[0];
    assert_eq!(first.authorization.as_deref(), Some("Bearer sk-test-123"));
    let (ok, out, err) = lead.cli(&["shutdown", "kim"]).await;
    assert!(ok, "{out}{err}");
    let status = mesh_tests::within("kim to exit", teammate.wait()).await;
    assert!(status.unwrap().success());
}

#[tokio::test]
async fn malformed_arguments_and_unknown_tools_get_error_results_and_the_teammate_goes_on() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let model = FakeModel::start(vec![
        Answer::call_raw("write_file", "{not json"),
        Answer::call("read_file", json!({"path": 5})),
        Answer::call("delete_everything", json!({})),
        Answer::call("respond_shutdown", json!({"approve": true, "reason": "x"})),
        // Two calls in one reply: run in order, each answered by its id.
        Answer::Reply {
            content: String::new(),
            calls: vec![
                ("list_dir".into(), json!({"path": "."}).to_string()),
                ("search".into(), json!({"pattern": "zzz"}).to_string()),
            ],
        },
        Answer::text("giving up"),
    ])
    .await;
    let _carol = lead.model_teammate("carol", &model.base_url, "Do something.", &[]);
    let requests = model.wait_for(6).await;
    let (_, r) = last_tool_result(&requests[1]);
    assert!(
        r.starts_with("error: ") && r.contains("not valid JSON"),
        "{r}"
    );
    let (_, r) = last_tool_result(&requests[2]);
    assert!(r.contains("do not fit") && r.contains("path"), "{r}");
    let (_, r) = last_tool_result(&requests[3]);
    assert!(r.contains("no tool \"delete_everything\""), "{r}");
    // Plan mode's tools are named, not the gated ones.
    assert!(r.contains("submit_plan"), "{r}");
    for gated in GATED {
        assert!(!r.contains(gated), "{r}");
    }
    let (_, r) = last_tool_result(&requests[4]);
    assert!(r.contains("no shutdown request is waiting"), "{r}");
    let messages = requests[5].messages();
    let results: Vec<_> = messages[messages.len() - 2..]
        .iter()
        .map(|m| (m["role"].clone(), m["tool_call_id"].clone()))
        .collect();
    assert_eq!(
        results,
        [
            (json!("tool"), json!("call_0")),
            (json!("tool"), json!("call_1"))
        ]
    );
    // Every one was reported to the lead as refused.
    for tool in ["write_file", "read_file", "delete_everything"] {
        let report = events
            .tool_call(tool, |c| c.member == "carol" && c.tool == tool)
            .await;
        assert!(!report.allowed, "{tool}: {report:?}");
    }
    events.member_in("carol", MemberStatus::Idle).await;
}

/// A streamed reply from raw deltas, as some local servers send them.
fn chunks(deltas: &[Value]) -> Answer {
    Answer::Chunks(
        deltas
            .iter()
            .map(|d| json!({"choices": [{"index": 0, "delta": {"tool_calls": d}}]}))
            .collect(),
    )
}

#[tokio::test]
async fn local_server_quirks_still_make_tool_calls() {
    let lead = Lead::start(&[]).await;
    let model = FakeModel::start(vec![
        // No index, no id.
        chunks(&[
            json!([{"function": {"name": "read_file", "arguments": "{\"path\":"}}]),
            json!([{"function": {"arguments": "\"notes.txt\"}"}}]),
        ]),
        // Every call at index 0, with ids.
        chunks(&[
            json!([{"index": 0, "id": "x1", "function": {"name": "read_file", "arguments": "{\"path\": \"notes.txt\"}"}}]),
            json!([{"index": 0, "id": "x2", "function": {"name": "list_dir", "arguments": "{\"path\": \".\"}"}}]),
        ]),
        // The id comes after the first delta.
        chunks(&[
            json!([{"index": 0, "function": {"name": "read_file", "arguments": ""}}]),
            json!([{"index": 0, "id": "late", "function": {"arguments": "{\"path\": \"notes.txt\"}"}}]),
        ]),
        // The tool call as text in the content.
        Answer::text("```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.txt\"}}\n```"),
        // A server that does not stream.
        Answer::Whole(json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "w1", "type": "function",
                "function": {"name": "read_file", "arguments": "{\"path\": \"notes.txt\"}"}}]}}]})),
        Answer::text("read it five times"),
    ])
    .await;
    let workspace = lead.dir.path().join("ws").join("dan");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("notes.txt"), "the secret is 42").unwrap();
    let _dan = lead.model_teammate("dan", &model.base_url, "Read notes.txt.", &[]);
    let requests = model.wait_for(6).await;
    // A file read comes back set apart from the task, as the file's text.
    let read = "[the file notes.txt]\nthe secret is 42\n[end of notes.txt]";
    // No index, no id: one call, with a made-up id.
    let (id, r) = last_tool_result(&requests[1]);
    assert!(!id.is_empty());
    assert_eq!(r, read);
    // Index 0 twice: two calls, answered in order.
    let m = requests[2].messages();
    let n = m.len();
    assert_eq!(m[n - 2]["tool_call_id"], "x1");
    assert_eq!(m[n - 2]["content"], read);
    assert_eq!(m[n - 1]["tool_call_id"], "x2");
    assert_eq!(m[n - 1]["content"], "notes.txt");
    let (id, r) = last_tool_result(&requests[3]);
    assert_eq!((id.as_str(), r.as_str()), ("late", read));
    let (id, r) = last_tool_result(&requests[4]);
    assert!(!id.is_empty());
    assert_eq!(r, read);
    // The assistant message carried the call it made up, with the same id.
    let asked = &requests[4].messages()[requests[4].messages().len() - 2];
    assert_eq!(asked["tool_calls"][0]["id"], id.as_str());
    let (id, r) = last_tool_result(&requests[5]);
    assert_eq!((id.as_str(), r.as_str()), ("w1", read));
}

#[tokio::test]
async fn a_shutdown_is_answered_while_the_model_is_still_thinking() {
    let lead = Lead::start(&[]).await;
    let model = FakeModel::start(vec![
        Answer::Stall(Duration::from_secs(120)),
        Answer::call(
            "respond_shutdown",
            json!({"approve": true, "reason": "stopping"}),
        ),
    ])
    .await;
    let mut eve = lead.model_teammate("eve", &model.base_url, "Think hard.", &[]);
    model.wait_for(1).await;
    let (ok, out, err) = lead.cli(&["shutdown", "eve", "--deadline", "10"]).await;
    assert!(ok, "{out}{err}");
    assert!(out.contains("eve agreed to shut down"), "{out}");
    assert!(eve.exit().await.success());
    let asked = &model.requests()[1];
    assert!(asked.tool_names().contains(&"respond_shutdown".to_owned()));
}

#[tokio::test]
async fn a_refusal_keeps_the_teammate_working_and_a_silent_answer_agrees() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let model = FakeModel::start(vec![
        // Prose, and prose again after each reminder of the plan it owes.
        Answer::text("waiting"),
        Answer::text("waiting"),
        Answer::text("waiting"),
        Answer::call(
            "respond_shutdown",
            json!({"approve": false, "reason": "halfway through"}),
        ),
        // The second request: the model says something but calls nothing.
        Answer::text("sure"),
    ])
    .await;
    let mut fay = lead.model_teammate("fay", &model.base_url, "Wait.", &[]);
    events.member_in("fay", MemberStatus::Idle).await;
    let (ok, out, err) = lead.cli(&["shutdown", "fay"]).await;
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("fay refused to shut down: halfway through"),
        "{out}"
    );
    let (ok, out, err) = lead.cli(&["shutdown", "fay"]).await;
    assert!(ok, "{out}{err}");
    assert!(out.contains("fay agreed to shut down"), "{out}");
    assert!(fay.exit().await.success());
}

#[tokio::test]
async fn a_message_wakes_an_idle_model_teammate_and_max_turns_bounds_a_runaway() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let model = FakeModel::start(vec![
        Answer::call("list_dir", json!({"path": "."})),
        Answer::call("list_dir", json!({"path": "."})),
        // Not asked for: --max-turns 2 stops it before.
        Answer::call("list_dir", json!({"path": "."})),
    ])
    .await;
    let _gus = lead.model_teammate("gus", &model.base_url, "Loop.", &["--max-turns", "2"]);
    let idle = events.member_in("gus", MemberStatus::Idle).await;
    assert_eq!(idle.name, "gus");
    assert_eq!(model.requests().len(), 2, "two replies, then it stops");
    let mut bob = lead.join("bob").await;
    bob.send("gus", "please carry on", "").await.unwrap();
    let third = &model.wait_for(3).await[2];
    let last = third.last_message();
    assert_eq!(last["role"], "user");
    let text = last["content"].as_str().unwrap();
    assert!(
        text.contains("bob") && text.contains("please carry on"),
        "{text}"
    );
}

#[tokio::test]
async fn a_4xx_stops_the_teammate_with_the_servers_message() {
    let lead = Lead::start(&[]).await;
    let model = FakeModel::start(vec![Answer::Status {
        code: 404,
        retry_after: None,
        body: r#"{"error": {"message": "model 'test-model' not found"}}"#.into(),
    }])
    .await;
    let teammate = lead
        .model_command("hal", &model.base_url, "Go.", &[])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let output = mesh_tests::within("hal to exit", teammate.wait_with_output())
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("HTTP 404") && stderr.contains("model 'test-model' not found"),
        "{stderr}"
    );
    assert_eq!(model.requests().len(), 1, "a 404 is not retried");
}

/// A lead whose plans a model reviews (`--approval model:FILE`), at `model`.
async fn reviewed_lead(model: &FakeModel, keep: &tempfile::TempDir) -> Lead {
    let file = keep.path().join("reviewer.toml");
    std::fs::write(
        &file,
        format!(
            "model = \"review-model\"\nbase_url = \"{}\"\ncriteria = \"Only approve plans that include test coverage.\"\ntimeout_secs = 20\n",
            model.base_url
        ),
    )
    .unwrap();
    let approval = format!("model:{}", file.display());
    Lead::start(&["--approval", &approval]).await
}

/// The review note on `request_id`.
async fn review_note(events: &mut Events, request_id: &str) -> pb::ReviewNote {
    events
        .find(&format!("a review note on {request_id}"), |k| match k {
            pb::event::Kind::ReviewNote(n) if n.request_id == request_id => Some(n.clone()),
            _ => None,
        })
        .await
}

#[tokio::test]
async fn the_model_reviewer_approves_and_rejects_seeing_the_other_teammates_files() {
    let model = FakeModel::start(vec![
        Answer::call(
            "review_plan",
            json!({"approve": true, "feedback": "tests included", "write_paths": ["src/a.rs"]}),
        ),
        Answer::call(
            "review_plan",
            json!({"approve": false, "feedback": "collides with bob on src/a.rs"}),
        ),
    ])
    .await;
    let keep = tempfile::tempdir().unwrap();
    let lead = reviewed_lead(&model, &keep).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;

    let mut bob = lead.join("bob").await;
    let bob_plan = bob
        .submit(
            &uuid::Uuid::new_v4().to_string(),
            "auth module",
            &["src/a.rs"],
        )
        .await
        .unwrap();
    let approved = events
        .request("bob's plan approved", |r| {
            r.request_id == bob_plan && is(r.status, RequestStatus::Approved)
        })
        .await;
    assert!(approved.feedback.contains("tests included"), "{approved:?}");
    let response = bob
        .next_matching(|e| matches!(e.body, Some(pb::envelope::Body::PlanApprovalResponse(_))))
        .await;
    let Some(pb::envelope::Body::PlanApprovalResponse(response)) = response.body else {
        unreachable!()
    };
    assert!(response.approve);
    assert_eq!(response.grant.unwrap().write_paths, ["src/a.rs"]);
    let note = review_note(&mut events, &bob_plan).await;
    assert_eq!(note.reviewer, "model review-model");
    assert!(note.note.starts_with("approved"), "{note:?}");

    let asked = &model.requests()[0];
    assert_eq!(asked.body["model"], "review-model");
    assert_eq!(asked.tool_names(), ["review_plan"]);
    let text = asked.all_text();
    assert!(text.contains("Only approve plans that include test coverage."));
    assert!(
        text.contains("auth module") && text.contains("from bob"),
        "{text}"
    );

    let mut alice = lead.join("alice").await;
    let alice_plan = alice
        .submit(
            &uuid::Uuid::new_v4().to_string(),
            "login page",
            &["src/a.rs"],
        )
        .await
        .unwrap();
    let rejected = events
        .request("alice's plan rejected", |r| {
            r.request_id == alice_plan && is(r.status, RequestStatus::Rejected)
        })
        .await;
    assert!(
        rejected.feedback.contains("collides with bob"),
        "{rejected:?}"
    );
    let asked = model.wait_for(2).await;
    let text = asked[1].all_text();
    assert!(
        text.contains("- bob (approved): auth module; files: src/a.rs"),
        "the reviewer sees the other plans: {text}"
    );
    // The reviewer's model use counts, under its own name: what the server
    // counted for both calls.
    let team = operator
        .list_team(pb::ListTeamRequest::default())
        .await
        .unwrap()
        .into_inner();
    let reviewer = team
        .other_usage
        .iter()
        .find(|u| u.name == "reviewer (model review-model)")
        .unwrap_or_else(|| panic!("the reviewer's usage: {team:?}"));
    let usage = reviewer.usage.unwrap();
    assert_eq!(usage.calls, 2);
    let counted: u64 = asked.iter().map(|r| prompt_tokens(&r.body)).sum();
    assert_eq!(usage.prompt_tokens, counted);
    assert!(team.team_usage.unwrap().prompt_tokens >= counted);
}

#[tokio::test]
async fn a_failing_reviewer_leaves_the_plan_pending_and_says_why() {
    let model = FakeModel::start(vec![
        // No review_plan call.
        Answer::text("Looks good to me!"),
        // A server that refuses.
        Answer::Status {
            code: 401,
            retry_after: None,
            body: r#"{"error": {"message": "invalid api key"}}"#.into(),
        },
        // A rejection without feedback.
        Answer::call("review_plan", json!({"approve": false, "feedback": ""})),
    ])
    .await;
    let keep = tempfile::tempdir().unwrap();
    let lead = reviewed_lead(&model, &keep).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut bob = lead.join("bob").await;
    for why in [
        "without calling review_plan",
        "invalid api key",
        "without feedback",
    ] {
        let id = bob
            .submit(&uuid::Uuid::new_v4().to_string(), why, &["x"])
            .await
            .unwrap();
        let note = review_note(&mut events, &id).await;
        assert!(
            note.note.starts_with("no decision, left for an operator") && note.note.contains(why),
            "{note:?}"
        );
        let (ok, out, err) = lead.cli(&["requests", "--pending"]).await;
        assert!(ok && out.contains(&id), "{out}{err}");
        // A person decides instead.
        let (ok, out, err) = lead.cli(&["reject", &id, "--feedback", "by hand"]).await;
        assert!(ok, "{out}{err}");
    }
    assert_eq!(model.requests().len(), 3, "a 401 is not retried");
}

#[tokio::test]
async fn lead_spawn_starts_a_model_teammate_with_the_flags_passed_on() {
    let model = FakeModel::start(vec![Answer::text("ready")]).await;
    let lead = Lead::start(&["--model-key-env", "NO_SUCH_MODEL_KEY"]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let (ok, out, err) = lead
        .cli(&[
            "spawn",
            "ivy",
            "--role",
            "tester",
            "--model",
            "test-model",
            "--task",
            "Check the tests.",
            "--base-url",
            &model.base_url,
            "--api-key-env",
            "NO_SUCH_MODEL_KEY",
            "--max-tokens",
            "500",
            "--context-window",
            "4096",
            "--token-budget",
            "50000",
        ])
        .await;
    assert!(ok, "{out}{err}");
    events.member_in("ivy", MemberStatus::Idle).await;
    let asked = &model.requests()[0];
    assert_eq!(asked.body["model"], "test-model");
    assert_eq!(asked.body["max_tokens"], 500, "--max-tokens passed on");
    let ivy = mesh_tests::member_named(&mut operator, "ivy").await;
    assert_eq!(ivy.token_budget, 50_000, "--token-budget passed on");
    assert!(asked.all_text().contains("Check the tests."));
    assert!(
        asked.all_text().contains("\"tester\""),
        "the role is in the system prompt"
    );
    assert_eq!(asked.authorization, None);
    // Exactly one of a script and a model.
    let (ok, _, err) = lead
        .cli(&[
            "spawn", "joe", "--role", "r", "--script", "x.toml", "--model", "m", "--task", "t",
        ])
        .await;
    assert!(!ok && err.contains("cannot be used with"), "{err}");
    let (ok, _, err) = lead
        .cli(&["spawn", "joe", "--role", "r", "--model", "m"])
        .await;
    assert!(!ok && err.contains("--task"), "{err}");
    let (ok, out, err) = lead.cli(&["shutdown", "ivy"]).await;
    assert!(ok && out.contains("ivy agreed"), "{out}{err}");
}

/// `lead serve --model-key-env MODEL_KEY` with secrets in its environment:
/// `MODEL_KEY`, `DEPLOY_SECRET` and `OPENAI_API_KEY`.
async fn lead_with_secrets() -> Lead {
    Lead::start_with_env(
        &["--model-key-env", "MODEL_KEY"],
        &[
            ("MODEL_KEY", "sk-allowed"),
            ("DEPLOY_SECRET", "s3cret-deploy"),
            ("OPENAI_API_KEY", "sk-default-not-named"),
        ],
    )
    .await
}

#[tokio::test]
async fn spawn_reads_only_the_keys_the_leads_command_line_names() {
    let model = FakeModel::start(vec![Answer::text("ready"), Answer::text("ready")]).await;
    let lead = lead_with_secrets().await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let spawn = |name: &'static str, key: Option<&'static str>| {
        let mut args = vec![
            "spawn".to_owned(),
            name.to_owned(),
            "--role".into(),
            "tester".into(),
            "--model".into(),
            "test-model".into(),
            "--task".into(),
            "Check.".into(),
            "--base-url".into(),
            model.base_url.clone(),
        ];
        if let Some(key) = key {
            args.extend(["--api-key-env".to_owned(), key.to_owned()]);
        }
        args
    };
    let lead = &lead;
    let cli = |args: Vec<String>| async move {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        lead.cli(&args).await
    };

    // A variable the command line does not name: refused, naming the field.
    let (ok, out, err) = cli(spawn("eve", Some("DEPLOY_SECRET"))).await;
    assert!(!ok, "{out}{err}");
    assert!(
        err.contains("api_key_env: ") && err.contains("--model-key-env"),
        "{err}"
    );
    assert!(!err.contains("s3cret-deploy"), "{err}");
    for (what, refused) in [
        ("a MESH_ variable", "MESH_OPERATOR_TOKEN"),
        ("PATH", "PATH"),
    ] {
        let status = operator
            .spawn_teammate(pb::SpawnTeammateRequest {
                name: "eve".into(),
                role: "r".into(),
                model: "m".into(),
                task: "t".into(),
                base_url: model.base_url.clone(),
                api_key_env: refused.into(),
                ..Default::default()
            })
            .await
            .expect_err(what);
        assert_eq!(
            status.code(),
            tonic::Code::PermissionDenied,
            "{what}: {status:?}"
        );
        assert!(
            status.message().starts_with("api_key_env: "),
            "{what}: {status:?}"
        );
    }
    assert!(model.requests().is_empty(), "nothing reached the model");

    // The named one is passed on.
    let (ok, out, err) = cli(spawn("ivy", Some("MODEL_KEY"))).await;
    assert!(ok, "{out}{err}");
    events.member_in("ivy", MemberStatus::Idle).await;
    let asked = model.wait_for(1).await;
    assert_eq!(asked[0].authorization.as_deref(), Some("Bearer sk-allowed"));
    // And nothing else of the lead's environment: not in the child's
    // environment, where a command it runs could read it.
    let pid = out
        .split("(pid ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_else(|| panic!("a pid in {out:?}"));
    let environ = std::fs::read(format!("/proc/{pid}/environ")).expect("the child's environ");
    let environ = String::from_utf8_lossy(&environ);
    for secret in ["s3cret-deploy", "sk-default-not-named", "DEPLOY_SECRET"] {
        assert!(!environ.contains(secret), "{secret} reached the child");
    }
    assert!(
        environ.contains("PATH="),
        "what it needs to run is passed on"
    );

    // No variable named: the default (OPENAI_API_KEY) is not named on the
    // command line, so the teammate does not get it.
    let (ok, out, err) = cli(spawn("joe", None)).await;
    assert!(ok, "{out}{err}");
    events.member_in("joe", MemberStatus::Idle).await;
    let asked = model.wait_for(2).await;
    let joes = asked
        .iter()
        .find(|r| r.all_text().contains("You are joe"))
        .expect("joe's request");
    assert_eq!(joes.authorization, None, "{joes:?}");
}
