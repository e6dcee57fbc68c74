//! A model teammate within bounds, as a small real model tests them: every
//! reply bounded by `--max-tokens` (and one cut at it handled), every call of
//! a reply run, prose while a plan is owed answered with reminders, a
//! server's error mid-stream recovered, a long task kept inside the context
//! window. The real `lead` and `teammate` binaries, and the fake server on
//! loopback (`mesh_tests::fake_model`), scripted or replaying replies
//! recorded from llama.cpp's server (`tests/fixtures/real-model/`).

#![allow(clippy::unwrap_used)]

use mesh_tests::{
    fake_model::{prompt_tokens, Answer, FakeModel, Recorded},
    Events, Lead,
};
use serde_json::{json, Value};
use shared::pb;

/// The tool-call reports of `name`, in order, until `n` arrived.
async fn reports(events: &mut Events, name: &str, n: usize) -> Vec<pb::ToolCallReport> {
    let mut seen = Vec::new();
    while seen.len() < n {
        seen.push(events.tool_call("a tool call", |t| t.member == name).await);
    }
    seen
}

/// The user messages of a request, in order.
fn user_texts(request: &Recorded) -> Vec<String> {
    request
        .messages()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn a_runaway_reply_is_cut_at_max_tokens_its_repeats_and_half_call_dropped() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let listing = json!({"path": "."}).to_string();
    let model = FakeModel::start(vec![
        Answer::Cut {
            content: String::new(),
            calls: vec![
                ("list_dir".into(), listing.clone()),
                ("list_dir".into(), listing.clone()),
                ("list_dir".into(), listing.clone()),
                ("read_file".into(), json!({"path": "notes.md"}).to_string()),
            ],
        },
        Answer::call(
            "submit_plan",
            json!({"summary": "after the cut", "files": ["notes.md"]}),
        ),
    ])
    .await;
    let _ann = lead.model_teammate("ann", &model.base_url, "List.", &["--max-tokens", "300"]);
    let first = &model.wait_for(1).await[0];
    assert_eq!(first.body["max_tokens"], 300, "every call is bounded");
    let ran = reports(&mut events, "ann", 1).await;
    assert_eq!(ran[0].tool, "list_dir");
    let second = &model.wait_for(2).await[1];
    assert_eq!(second.body["max_tokens"], 300);
    let calls: Vec<_> = second
        .messages()
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .collect();
    assert_eq!(
        calls.len(),
        1,
        "one list_dir kept, no half read_file: {calls:?}"
    );
    let told = user_texts(second).last().cloned().unwrap();
    assert!(
        told.contains("cut at the limit of 300 tokens") && told.contains("2 repeated calls"),
        "{told}"
    );
    let plan = plan_of(&mut events, "ann").await;
    assert!(plan.payload_json.contains("after the cut"), "{plan:?}");
}

#[tokio::test]
async fn prose_while_a_plan_is_owed_gets_reminders_then_the_plan_arrives() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let model = FakeModel::start(vec![
        Answer::text("I will create hello.txt with hello world in it."),
        Answer::call(
            "submit_plan",
            json!({"summary": "write hello.txt", "files": ["hello.txt"]}),
        ),
    ])
    .await;
    let _bo = lead.model_teammate("bo", &model.base_url, "Create hello.txt.", &[]);
    let plan = plan_of(&mut events, "bo").await;
    assert!(plan.payload_json.contains("write hello.txt"), "{plan:?}");
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "one reminder, then the plan");
    let reminder = user_texts(&requests[1]).last().cloned().unwrap();
    assert!(reminder.contains("submit_plan"), "{reminder}");
    assert_eq!(
        requests[1].messages()[2]["content"],
        "I will create hello.txt with hello world in it.",
        "the prose stays the model's words"
    );
}

#[tokio::test]
async fn prose_after_every_reminder_reports_idle_saying_what_is_owed() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let model = FakeModel::start(vec![
        Answer::text("Thinking about it."),
        Answer::text("Still thinking."),
        Answer::text("Almost there."),
        Answer::call("list_dir", json!({"path": "."})),
    ])
    .await;
    let _cy = lead.model_teammate("cy", &model.base_url, "Create hello.txt.", &[]);
    let reason = events.idle_reason("cy").await;
    assert!(
        reason.contains("still owes a plan") && reason.contains("Almost there."),
        "{reason}"
    );
    assert_eq!(model.requests().len(), 3, "two reminders, then idle");
    // A message wakes it; the reminders start again.
    let mut bob = lead.join("bob").await;
    bob.send("cy", "go on", "").await.unwrap();
    let ran = events
        .tool_call("cy's next call", |t| t.member == "cy")
        .await;
    assert_eq!(ran.tool, "list_dir");
}

#[tokio::test]
async fn an_error_mid_stream_is_asked_again_twice_then_put_to_the_model() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let partial = json!({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "x", "type": "function", "function": {"name": "submit_plan", "arguments": "{\"sum"}}
    ]}}]});
    let model = FakeModel::start(vec![
        Answer::replay("error-mid-stream"),
        Answer::replay("error-after-partial-tool-call"),
        Answer::ErrorMidStream {
            chunks: vec![partial],
            message: "the output does not match the expected format".into(),
        },
        Answer::call("list_dir", json!({"path": "."})),
    ])
    .await;
    let _di = lead.model_teammate("di", &model.base_url, "Create hello.txt.", &[]);
    let ran = events.tool_call("di's call", |t| t.member == "di").await;
    assert_eq!(ran.tool, "list_dir", "no half call ran");
    // The fourth request made the call (a fifth may follow it already).
    let requests = model.wait_for(4).await;
    assert_eq!(requests[0].body, requests[1].body, "asked again as it was");
    assert_eq!(requests[1].body, requests[2].body, "asked again as it was");
    let told = user_texts(&requests[3]).last().cloned().unwrap();
    assert!(
        told.contains("could not read your last reply")
            && told.contains("the output does not match the expected format"),
        "{told}"
    );
}

/// The tool results a request carries.
fn results(request: &Recorded) -> Vec<Value> {
    request
        .messages()
        .into_iter()
        .filter(|m| m["role"] == "tool")
        .collect()
}

/// The plan approval request of `name` that the lead announces.
async fn plan_of(events: &mut Events, name: &str) -> pb::ProtocolState {
    events
        .request(&format!("{name}'s plan"), |r| {
            r.sender == name && r.r#type == pb::RequestType::PlanApproval as i32
        })
        .await
}

#[tokio::test]
async fn recorded_replies_of_a_real_model_have_each_call_answered() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let model = FakeModel::start(vec![
        // Four calls as JSON lines: two tools that do not exist, two not
        // offered in plan mode; each is answered, none runs.
        Answer::replay("several-calls-as-json-lines"),
        // write_file with `text` for `content`, in plan mode.
        Answer::replay("wrong-argument-name"),
        // Calls as JSON lines, looping until the server's cap of 3,072
        // tokens: a write_file, a submit_plan, then the same again, the
        // last cut in half. Each runs once; the plan is submitted.
        Answer::replay("runaway-reply"),
        // Once approved, hello.txt asked for as text, aside.
        Answer::text("```\nhello\n```"),
    ])
    .await;
    let _ed = lead.model_teammate("ed", &model.base_url, "Create hello.txt.", &[]);
    let plan = plan_of(&mut events, "ed").await;
    assert!(plan.payload_json.contains("hello.txt"), "{plan:?}");
    let requests = model.wait_for(3).await;
    let after_lines = results(&requests[1]);
    assert_eq!(after_lines.len(), 4, "each of the four calls answered");
    assert!(
        after_lines[0]["content"]
            .as_str()
            .unwrap()
            .contains("no tool \"add\""),
        "{after_lines:?}"
    );
    assert_eq!(
        results(&requests[2]).len(),
        5,
        "the wrong argument answered"
    );
    // Once the plan is decided, the model hears of it and of the cut.
    operator
        .review_plan(pb::PlanReview {
            request_id: plan.request_id.clone(),
            approve: true,
            ..Default::default()
        })
        .await
        .unwrap();
    // The fourth request asks for hello.txt aside; the fifth goes on with
    // the conversation.
    let fourth = &model.wait_for(5).await[4];
    let runaway = fourth
        .messages()
        .into_iter()
        .rev()
        .find(|m| {
            m["role"] == "assistant"
                && m["tool_calls"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["function"]["name"] == "submit_plan"))
        })
        .unwrap();
    let names: Vec<_> = runaway["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        ["write_file", "submit_plan"],
        "each call once, no half one"
    );
    let told = user_texts(fourth)
        .into_iter()
        .rfind(|t| t.contains("approved"))
        .unwrap_or_default();
    assert!(
        told.contains("was cut at the limit") && told.contains("approved"),
        "{told}"
    );
    // The plan of the one fenced call a real model wrote.
    let fenced = FakeModel::start(vec![Answer::replay("fenced-call-in-content")]).await;
    let _fay = lead.model_teammate("fay", &fenced.base_url, "Create hello.txt.", &[]);
    let plan = plan_of(&mut events, "fay").await;
    assert!(
        plan.payload_json.contains("Create hello.txt containing"),
        "{plan:?}"
    );
}

#[tokio::test]
async fn a_hundred_turns_on_an_8k_window_never_send_an_over_long_request() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let workspace = lead.workspace("fo");
    std::fs::create_dir_all(&workspace).unwrap();
    for n in 0..100 {
        std::fs::write(
            workspace.join(format!("f{n}.txt")),
            format!("file {n}: {}\n", "lorem ipsum dolor sit amet ".repeat(60)),
        )
        .unwrap();
    }
    let mut script: Vec<Answer> = (0..100)
        .map(|n| Answer::call("read_file", json!({"path": format!("f{n}.txt")})))
        .collect();
    script.push(Answer::call(
        "submit_plan",
        json!({"summary": "read all hundred files", "files": ["out.txt"]}),
    ));
    let model = FakeModel::start(script).await;
    model.limit_context(8_192);
    model.answer_summaries("Read the files f0.txt onwards; each holds lorem ipsum.");
    let task = "Read every file f0.txt to f99.txt, then plan out.txt.";
    let _fo = lead.model_teammate("fo", &model.base_url, task, &["--max-turns", "200"]);
    plan_of(&mut events, "fo").await;
    assert_eq!(
        model.overlong(),
        Vec::<u64>::new(),
        "no request passed the window"
    );
    let requests = model.requests();
    // A turn's reply is held to a schema; a summary's is not.
    let turn = |r: &&mesh_tests::fake_model::Recorded| r.body.get("response_format").is_some();
    let summaries = requests.iter().filter(|r| !turn(r)).count();
    assert!(summaries >= 1, "older turns were summarized");
    for request in &requests {
        let asked = request.body["max_tokens"].as_u64().unwrap();
        if turn(&request) {
            assert_eq!(asked, 2_048, "a quarter of the window from /props");
        } else {
            assert!(asked <= 1_024, "a summary is short: {asked}");
        }
        assert!(prompt_tokens(&request.body) + asked <= 8_192);
    }
    let last = requests.last().unwrap();
    let texts = user_texts(last);
    assert!(
        texts[0].starts_with(&format!("Your task:\n{task}\n\n")),
        "the task word for word (and the tools told with it): {}",
        texts[0]
    );
    assert!(
        texts
            .iter()
            .any(|t| t.contains("Read the files f0.txt onwards")),
        "the summary stands in for older turns"
    );
    let read: usize = requests.iter().filter(turn).count();
    assert_eq!(read, 101, "every turn asked once");
}

#[tokio::test]
async fn a_budget_stops_a_model_teammate_and_lead_budget_resumes_it() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let model = FakeModel::start(
        (0..20)
            .map(|_| Answer::call("list_dir", json!({"path": "."})))
            .collect(),
    )
    .await;
    let _dan = lead.model_teammate(
        "dan",
        &model.base_url,
        "Look around.",
        &["--token-budget", "3000"],
    );
    let reason = events.idle_reason("dan").await;
    assert!(reason.contains("token budget spent"), "{reason}");
    assert!(reason.contains("lead budget dan"), "{reason}");
    let spent = model.requests();
    // What the lead counts is what the server counted, call for call.
    let counted: u64 = spent.iter().map(|r| prompt_tokens(&r.body)).sum();
    let member = mesh_tests::member_named(&mut operator, "dan").await;
    let usage = member.usage.unwrap();
    assert_eq!(usage.prompt_tokens, counted);
    assert_eq!(usage.calls, spent.len() as u64);
    assert_eq!(member.token_budget, 3_000);
    assert!(usage.prompt_tokens + usage.completion_tokens >= 3_000);
    let (ok, out, err) = lead.cli(&["team"]).await;
    assert!(ok && out.contains("dan"), "{out}{err}");
    assert!(
        out.contains(&(usage.prompt_tokens + usage.completion_tokens).to_string()),
        "lead team shows dan's tokens: {out}"
    );
    // Raised: it goes on where it stopped.
    let (ok, out, err) = lead.cli(&["budget", "dan", "100000"]).await;
    assert!(ok, "{out}{err}");
    let more = model.wait_for(spent.len() + 1).await;
    let resumed = &more[spent.len()];
    assert_eq!(
        resumed.messages().len(),
        spent.last().unwrap().messages().len() + 2,
        "the same conversation, with the last call's result"
    );
}

#[tokio::test]
async fn a_shutdown_request_answered_in_prose_is_put_again() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let model = FakeModel::start(vec![
        // Prose, and after each reminder of the plan it owes: idle.
        Answer::text("hm"),
        Answer::text("hm"),
        Answer::text("hm"),
        // The shutdown request, answered in prose, then put again.
        Answer::text("I will stop soon."),
        Answer::call(
            "respond_shutdown",
            json!({"approve": false, "reason": "busy reading"}),
        ),
    ])
    .await;
    let _gil = lead.model_teammate("gil", &model.base_url, "Read.", &[]);
    events.idle_reason("gil").await;
    let (ok, out, err) = lead.cli(&["shutdown", "gil"]).await;
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("gil refused to shut down: busy reading"),
        "{out}"
    );
    let asked = model.wait_for(5).await;
    let again = user_texts(&asked[4]).last().cloned().unwrap();
    assert!(
        again.contains("You did not call respond_shutdown"),
        "{again}"
    );
    assert_eq!(asked[4].last_message()["role"], "user");
}

#[tokio::test]
async fn ollamas_num_ctx_is_the_window_and_a_flag_wins_over_the_server() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let ollama = FakeModel::start(vec![Answer::call(
        "submit_plan",
        json!({"summary": "s", "files": ["a.txt"]}),
    )])
    .await;
    ollama.limit_context(2_048);
    ollama.speak_ollama();
    let _hal = lead.model_teammate("hal", &ollama.base_url, "Plan.", &[]);
    plan_of(&mut events, "hal").await;
    let asked = &ollama.requests()[0];
    assert_eq!(asked.body["max_tokens"], 512, "a quarter of num_ctx 2048");
    // --context-window wins over what the server says.
    let told = FakeModel::start(vec![Answer::call(
        "submit_plan",
        json!({"summary": "s", "files": ["a.txt"]}),
    )])
    .await;
    told.limit_context(2_048);
    let _ida = lead.model_teammate(
        "ida",
        &told.base_url,
        "Plan.",
        &["--context-window", "4096"],
    );
    plan_of(&mut events, "ida").await;
    assert_eq!(told.requests()[0].body["max_tokens"], 1_024);
}
