//! Constrained decoding end to end: the real `lead` and `teammate` binaries
//! and the fake chat-completions server on loopback. Each request holds the
//! reply to one call of what may be called now, in the shape the server
//! takes; the tools change with the mode; a server that refuses the
//! constraint is asked without it from then on; `done` ends the turn; the
//! gate still refuses what arrives by another way; and `--constrain auto`
//! asks the server what it is: a schema for llama.cpp, native tools with
//! `tool_choice` for a server that is none of the local ones.

#![allow(clippy::unwrap_used)]

use mesh_tests::{
    fake_model::{Answer, FakeModel, Recorded},
    is, team, within, Events, Lead,
};
use serde_json::{json, Value};
use shared::pb::{self, MemberStatus, RequestStatus};

/// The choices of a request's `response_format` schema, by tool name.
fn choices(request: &Recorded) -> Vec<(String, Value)> {
    let format = &request.body["response_format"];
    assert_eq!(format["type"], "json_schema", "{}", request.body);
    let schema = &format["json_schema"]["schema"];
    let all = match schema.get("anyOf").and_then(Value::as_array) {
        Some(choices) => choices.clone(),
        None => vec![schema.clone()],
    };
    all.iter()
        .map(|c| {
            (
                c["properties"]["name"]["const"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                c["properties"]["arguments"].clone(),
            )
        })
        .collect()
}

/// The tools the conversation told the model of, in order (the lines
/// `- name(...)` of its user messages).
fn told(request: &Recorded) -> Vec<String> {
    request
        .messages()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .flat_map(|text| text.lines())
        .filter_map(|line| {
            line.strip_prefix("- ")?
                .split_once('(')
                .map(|(n, _)| n.to_owned())
        })
        .collect()
}

fn names(choices: &[(String, Value)]) -> Vec<&str> {
    choices.iter().map(|(n, _)| n.as_str()).collect()
}

fn arguments<'a>(choices: &'a [(String, Value)], tool: &str) -> &'a Value {
    &choices.iter().find(|(n, _)| n == tool).unwrap().1
}

fn plan(summary: &str) -> Value {
    json!({"summary": summary, "steps": ["write a.txt"], "files": ["a.txt"], "tests": []})
}

async fn pending_plan(events: &mut Events, summary: &str) -> pb::ProtocolState {
    events
        .request(&format!("the pending plan {summary:?}"), |r| {
            is(r.status, RequestStatus::Pending)
                && r.r#type == pb::RequestType::PlanApproval as i32
                && r.payload_json.contains(summary)
        })
        .await
}

#[tokio::test]
async fn each_reply_is_held_to_the_modes_tools_narrowed_by_the_state_and_done_ends_the_turn() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let (_watch, mut lines) = lead.watch().await;
    let model = FakeModel::start(vec![
        // A server that ignored the constraint: write_file in plan mode.
        Answer::call("write_file", json!({"path": "a.txt", "content": "early"})),
        Answer::call("submit_plan", plan("first")),
        Answer::call("submit_plan", plan("second")),
        // The file, asked for as text in a conversation of its own.
        Answer::text("Here it is:\n```\nhello\n```"),
        Answer::call("done", json!({"summary": "a.txt says hello"})),
    ])
    .await;
    std::fs::create_dir_all(lead.workspace("alice")).unwrap();
    std::fs::write(lead.workspace("alice").join("notes.txt"), "n").unwrap();
    std::fs::write(lead.workspace("alice").join("other.txt"), "o").unwrap();
    let task = "Write a.txt from notes.txt.";
    let alice = lead.model_teammate("alice", &model.base_url, task, &[]);

    // Plan mode: what can be read (the files the task names that exist:
    // the workspace is shown with the task, so there is nothing to list or
    // search), and submit_plan; no write tool, no message (nobody wrote),
    // no task list (none was heard of), and no end while a plan is owed.
    // The request carries no tools: they are told in the conversation, and
    // the schema holds the reply to them.
    let first = &model.wait_for(1).await[0];
    let offer = choices(first);
    assert_eq!(names(&offer), ["read_file", "submit_plan"]);
    assert_eq!(
        arguments(&offer, "read_file")["properties"]["path"]["enum"],
        json!(["notes.txt"]),
        "only the files the task names that exist"
    );
    assert_eq!(
        arguments(&offer, "submit_plan")["properties"]["files"]["minItems"],
        1
    );
    assert!(first.body.get("tools").is_none(), "{}", first.body);
    assert_eq!(told(first), ["read_file", "submit_plan"]);
    assert!(first
        .all_text()
        .contains("Files in your workspace: notes.txt, other.txt."));

    // The crafted write meets the gate: refused, nothing written.
    let refused = events
        .tool_call("alice's write_file", |c| {
            c.member == "alice" && c.tool == "write_file"
        })
        .await;
    assert!(!refused.allowed);
    assert!(!alice.workspace.join("a.txt").exists());

    // Rejected: still plan mode, submit_plan offered again.
    let first_plan = pending_plan(&mut events, "first").await;
    let (ok, out, err) = lead
        .cli(&["reject", &first_plan.request_id, "--feedback", "say why"])
        .await;
    assert!(ok, "{out}{err}");
    let third = &model.wait_for(3).await[2];
    assert!(names(&choices(third)).contains(&"submit_plan"));

    // Approved: the work, on the grant's files; no submit_plan.
    let second_plan = pending_plan(&mut events, "second").await;
    let (ok, out, err) = lead
        .cli(&["approve", &second_plan.request_id, "--mode", "accept-edits"])
        .await;
    assert!(ok, "{out}{err}");
    // The file is asked for aside: the model as a plain assistant, with
    // the task and the file it names, held to no schema.
    let fourth = &model.wait_for(4).await[3];
    assert!(
        fourth.body.get("response_format").is_none(),
        "{}",
        fourth.body
    );
    assert!(fourth.body.get("tools").is_none(), "{}", fourth.body);
    let aside = fourth.messages();
    assert_eq!(aside.len(), 2, "{aside:?}");
    assert_eq!(aside[0]["content"], "You are a helpful coding assistant.");
    let ask = aside[1]["content"].as_str().unwrap();
    assert!(
        ask.contains("notes.txt:\n```\nn\n```") && ask.contains(task),
        "{ask}"
    );
    assert!(
        ask.ends_with("Reply with the whole a.txt in one ``` block."),
        "{ask}"
    );

    // Written: a check, or the end (a fix comes after a failed check). The
    // conversation's prefix is the third request's, whole: what is new
    // (the approval, the tools that came with it, the write) is at its end.
    let fifth = &model.wait_for(5).await[4];
    let offer = choices(fifth);
    assert_eq!(names(&offer), ["run_command", "done"]);
    let before = third.messages();
    assert_eq!(fifth.messages()[..before.len()], before[..]);
    // Told once approved: the approval, and the tools that may be called
    // now (the write was asked for aside; a check or the end are left).
    let told: String = fifth.messages()[before.len()..]
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(
        told.contains("Your plan was approved with mode accept-edits. You may write: a.txt.")
            && told.contains("- run_command(command: string)")
            && !told.contains("- submit_plan("),
        "{told}"
    );
    let written = fifth.messages()[before.len()..]
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .find(|c| c["function"]["name"] == "write_file")
        .expect("the write told as the model's call");
    assert_eq!(
        written["function"]["arguments"],
        json!({"path": "a.txt", "content": "hello\n"}).to_string()
    );
    assert!(fifth
        .all_text()
        .contains("Every file of your plan is written now"));
    assert_eq!(
        std::fs::read_to_string(alice.workspace.join("a.txt")).unwrap(),
        "hello\n"
    );

    // done: idle with its summary, as the lead and `lead watch` tell it.
    assert_eq!(events.idle_reason("alice").await, "done: a.txt says hello");
    events.member_in("alice", MemberStatus::Idle).await;
    let said = within("the idle line on lead watch", async {
        loop {
            let line = lines.next_line().await.unwrap().unwrap();
            if line.contains("done: a.txt says hello") {
                return line;
            }
        }
    })
    .await;
    assert!(said.contains("alice"), "{said}");
    let (ok, out, err) = lead.cli(&["team"]).await;
    assert!(ok, "{out}{err}");
    let row = out.lines().find(|l| l.starts_with("alice")).unwrap();
    assert!(row.contains("idle"), "{out}");
    assert!(
        out.lines()
            .any(|l| l == "alice is idle: \"done: a.txt says hello\""),
        "lead team tells why alice is idle: {out}"
    );
    let (ok, json, err) = lead.cli(&["team", "--json"]).await;
    assert!(ok, "{json}{err}");
    let team: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(team[0]["idle_reason"], "done: a.txt says hello", "{json}");
    assert_eq!(model.requests().len(), 5, "done asked for nothing more");
}

#[tokio::test]
async fn a_server_that_refuses_the_schema_is_asked_without_it_from_then_on() {
    let lead = Lead::start(&["--approval", "auto"]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let model = FakeModel::start(vec![
        Answer::Status {
            code: 400,
            retry_after: None,
            body: r#"{"error": {"message": "Unrecognized request argument supplied: response_format"}}"#
                .into(),
        },
        Answer::call("submit_plan", plan("only")),
        Answer::call("write_file", json!({"path": "a.txt", "content": "hi"})),
        Answer::text("a.txt is written"),
    ])
    .await;
    let _bo = lead.model_teammate("bo", &model.base_url, "Write a.txt.", &[]);
    let reason = events.idle_reason("bo").await;
    assert_eq!(reason, "a.txt is written");
    let requests = model.requests();
    assert_eq!(requests.len(), 4, "{requests:?}");
    assert!(requests[0].body.get("response_format").is_some());
    for later in &requests[1..] {
        assert!(
            later.body.get("response_format").is_none(),
            "{}",
            later.body
        );
        assert!(later.body.get("tool_choice").is_none());
    }
    // The same request otherwise: the same conversation, and now the
    // mode's tools, which the schema's request left to the conversation.
    assert_eq!(requests[0].body["messages"], requests[1].body["messages"]);
    assert!(requests[0].body.get("tools").is_none());
    let tools = requests[1].tool_names();
    assert!(tools.contains(&"submit_plan".to_owned()), "{tools:?}");
    assert!(!tools.contains(&"write_file".to_owned()), "{tools:?}");
}

#[tokio::test]
async fn tool_choice_sends_strict_tools_and_off_sends_no_constraint() {
    let lead = Lead::start(&[]).await;
    let openai_like = FakeModel::start(vec![Answer::text("no plan today")]).await;
    let _cy = lead.model_teammate(
        "cy",
        &openai_like.base_url,
        "Write a.txt.",
        &["--constrain", "tool-choice"],
    );
    let first = &openai_like.wait_for(1).await[0];
    assert_eq!(first.body["tool_choice"], "required");
    assert_eq!(first.body["parallel_tool_calls"], false);
    assert!(first.body.get("response_format").is_none());
    let tools = first.body["tools"].as_array().unwrap();
    let plan = tools
        .iter()
        .find(|t| t["function"]["name"] == "submit_plan")
        .unwrap();
    assert_eq!(plan["function"]["strict"], true);
    let parameters = &plan["function"]["parameters"];
    assert_eq!(parameters["additionalProperties"], false);
    assert!(tools
        .iter()
        .all(|t| t["function"]["name"] != "done" && t["function"]["name"] != "write_file"));

    let plain = FakeModel::start(vec![Answer::text("no plan today")]).await;
    let _di = lead.model_teammate(
        "di",
        &plain.base_url,
        "Write a.txt.",
        &["--constrain", "off"],
    );
    let first = &plain.wait_for(1).await[0];
    assert!(first.body.get("response_format").is_none());
    assert!(first.body.get("tool_choice").is_none());
    assert!(first.tool_names().contains(&"done".to_owned()));
}

#[tokio::test]
async fn done_while_a_plan_is_owed_is_refused_and_the_plan_still_asked_for() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let model = FakeModel::start(vec![
        Answer::call("done", json!({"summary": "nothing to do"})),
        Answer::call("submit_plan", plan("after all")),
    ])
    .await;
    let _ed = lead.model_teammate("ed", &model.base_url, "Write a.txt.", &[]);
    let refused = events
        .tool_call("ed's done", |c| c.member == "ed" && c.tool == "done")
        .await;
    assert!(!refused.allowed);
    assert!(refused.outcome.contains("still owe"), "{}", refused.outcome);
    pending_plan(&mut events, "after all").await;
}

#[tokio::test]
async fn auto_against_a_plain_openai_compatible_server_sends_tools_and_finishes_the_work() {
    let lead = Lead::start(&["--approval", "auto"]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let model = FakeModel::start(vec![
        Answer::call("submit_plan", plan("a.txt")),
        Answer::call("write_file", json!({"path": "a.txt", "content": "hi"})),
        Answer::call("done", json!({"summary": "a.txt is written"})),
    ])
    .await;
    model.speak_plain();
    let fy = lead.model_teammate("fy", &model.base_url, "Write a.txt.", &[]);
    let reason = events.idle_reason("fy").await;
    assert_eq!(reason, "done: a.txt is written");
    assert_eq!(
        std::fs::read_to_string(fy.workspace.join("a.txt")).unwrap(),
        "hi"
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 3, "{requests:?}");
    for request in &requests {
        assert!(
            request.body.get("response_format").is_none(),
            "{}",
            request.body
        );
        assert_eq!(request.body["tool_choice"], "required", "{}", request.body);
        assert!(!request.tool_names().is_empty(), "{}", request.body);
    }
    assert!(requests[1].tool_names().contains(&"write_file".to_owned()));
    // What it chose and why: in the lead's team and in `lead team`.
    let member = team(&mut operator)
        .await
        .into_iter()
        .find(|m| m.name == "fy")
        .unwrap();
    let decoding = member.decoding.expect("fy said how its replies are held");
    assert_eq!(
        (
            decoding.model.as_str(),
            decoding.server.as_str(),
            decoding.constrain.as_str()
        ),
        ("test-model", "unknown", "tool-choice")
    );
    assert!(decoding.why.contains("native tools"), "{}", decoding.why);
    let (ok, out, err) = lead.cli(&["team"]).await;
    assert!(ok, "{err}");
    assert!(out.contains("tool-choice"), "{out}");
}

#[tokio::test]
async fn auto_against_llama_cpp_sends_the_schema_and_says_so() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let model = FakeModel::start(vec![Answer::text("no plan today")]).await;
    // The kit's own llama.cpp server's answers at /props and /v1/models.
    model.speak_recorded_llama_cpp();
    let _gu = lead.model_teammate("gu", &model.base_url, "Write a.txt.", &[]);
    let first = &model.wait_for(1).await[0];
    assert_eq!(
        first.body["response_format"]["type"], "json_schema",
        "{}",
        first.body
    );
    assert!(first.body.get("tools").is_none(), "{}", first.body);
    assert!(first.body.get("tool_choice").is_none(), "{}", first.body);
    let member = team(&mut operator)
        .await
        .into_iter()
        .find(|m| m.name == "gu")
        .unwrap();
    let decoding = member.decoding.expect("gu said how its replies are held");
    assert_eq!(
        (decoding.server.as_str(), decoding.constrain.as_str()),
        ("llama.cpp", "schema")
    );
    assert!(decoding.why.contains("GET /props"), "{}", decoding.why);
}

/// The greeter workspace of `bench --model-suite`, whose notes ask for
/// another change than the task.
const GREETER: &[(&str, &str)] = &[
    (
        "README.md",
        "# greeter\n\nA tiny Rust program that greets people.\n\n## Build\n\n    cargo build\n\n\
         ## Usage\n\n    greeter NAME\n\nPrints a greeting for NAME (\"world\" without one).\n",
    ),
    (
        "NOTES.md",
        "# Notes\n\n- TODO: make main print hi instead of the greeting. Print hi.\n\
         - Ask Sam about the release date.\n- The CHANGELOG is missing.\n",
    ),
    (
        "Cargo.toml",
        "[package]\nname = \"greeter\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    ),
    (
        "src/main.rs",
        "use greeter::greet;\n\nfn main() {\n    let name = std::env::args().nth(1)\
         .unwrap_or_else(|| \"world\".into());\n    println!(\"{}\", greet(&name));\n}\n",
    ),
    (
        "src/lib.rs",
        "/// The greeting for `name`.\npub fn greet(name: &str) -> String {\n    \
         format!(\"Hello, {name}!\")\n}\n\n/// The farewell for `name`.\npub fn \
         farewell(name: &str) -> String {\n    format!(\"Goodbye, {name}.\")\n}\n",
    ),
];

#[tokio::test]
async fn a_task_whose_workspace_notes_say_otherwise_is_done_as_the_task_says() {
    // The real 0.5B model's replies on this task, recorded through
    // `tests/fixtures/real-model/record.py`: it plans the files the notes
    // point at, is told its task names hello.txt, plans that, and writes
    // its text when asked for it aside.
    let dir = format!(
        "{}/fixtures/real-model/notes-say-otherwise",
        env!("CARGO_MANIFEST_DIR")
    );
    let replies = std::fs::read_dir(&dir).unwrap().count();
    let model = FakeModel::start(
        (1..=replies)
            .map(|n| Answer::replay(&format!("notes-say-otherwise/{n}")))
            .collect(),
    )
    .await;
    model.speak_recorded_llama_cpp();
    let lead = Lead::start(&["--approval", "auto"]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let workspace = lead.workspace("hy");
    for (path, text) in GREETER {
        let path = workspace.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let _hy = lead.model_teammate(
        "hy",
        &model.base_url,
        "Create hello.txt containing hello world.",
        &["--temperature", "0"],
    );
    // The plan that reached the lead names the task's file alone.
    let plan = events
        .request("hy's plan", |r| {
            r.r#type == pb::RequestType::PlanApproval as i32 && r.payload_json.contains("files")
        })
        .await;
    let plan: Value = serde_json::from_str(&plan.payload_json).unwrap();
    assert_eq!(plan["plan"]["files"], json!(["hello.txt"]), "{plan}");
    let reason = events.idle_reason("hy").await;
    assert!(reason.starts_with("done"), "{reason}");
    assert_eq!(
        std::fs::read_to_string(workspace.join("hello.txt"))
            .unwrap()
            .trim(),
        "hello world"
    );
    for (path, text) in GREETER {
        assert_eq!(
            &std::fs::read_to_string(workspace.join(path)).unwrap(),
            text,
            "{path} is as it was"
        );
    }
    // The model was told its task was not answered, as a call's result.
    let requests = model.requests();
    assert_eq!(requests.len(), replies);
    assert!(
        requests
            .iter()
            .any(|r| r.all_text().contains("your task names hello.txt")),
        "the plan was put back"
    );
}
