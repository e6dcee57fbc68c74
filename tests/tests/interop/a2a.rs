//! The team as an A2A agent (issue 37), driven by the official Python SDK
//! (`a2a-sdk`, its gRPC client, finding the lead through its agent card):
//! a task handed in is claimed by a scripted teammate; its plan is
//! `INPUT_REQUIRED` with the plan in the status message; a rejection with
//! feedback makes the teammate revise; an approval lets it work, and the
//! task ends `COMPLETED` with its summary; `ListTasks` pages; a call
//! without an operator token is refused and changes nothing; an unknown
//! task is the specification's TaskNotFound.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use mesh_tests::{python, within, Lead};
use serde_json::{json, Value};
use shared::pb;

/// The named operator an A2A caller authenticates as.
const ALICE: &str = "alice=alices-a2a-token-0123456789";
const ALICE_TOKEN: &str = "alices-a2a-token-0123456789";

/// `tests/a2a/client.py --card CONSOLE --token TOKEN ARGS`: whether it
/// succeeded, and its JSON.
async fn a2a(lead: &Lead, token: &str, args: &[&str]) -> (bool, Value) {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("a2a/client.py");
    let output = tokio::process::Command::new(python())
        .arg(script)
        .args(["--card", lead.console.as_deref().expect("a console")])
        .args(["--token", token])
        .args(args)
        .output();
    let output = within("the A2A client", output).await.unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let json = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&output.stderr)));
    (output.status.success(), json)
}

/// `tests/a2a/client.py ... subscribe ID`, running: its events, a line each.
fn subscribe(
    lead: &Lead,
    id: &str,
) -> (
    tokio::process::Child,
    tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
) {
    use tokio::io::AsyncBufReadExt as _;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("a2a/client.py");
    let mut child = tokio::process::Command::new(python())
        .arg(script)
        .args(["--card", lead.console.as_deref().expect("a console")])
        .args(["--token", ALICE_TOKEN, "subscribe", id])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

/// Every request the lead keeps (one page holds them here).
async fn requests(operator: &mut mesh_tests::Operator) -> Vec<pb::ProtocolState> {
    operator
        .list_requests(pb::ListRequestsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .requests
}

/// The state of an A2A task, as ProtoJSON says it.
fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or("")
}

/// The text of its status message.
fn status_text(task: &Value) -> String {
    task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

/// The lead's agent card, as served now.
async fn card_of(lead: &Lead) -> Value {
    let console = lead.console.as_deref().expect("a console");
    mesh_tests::webdriver::http_client(reqwest::Client::builder())
        .get(format!(
            "{}/.well-known/agent-card.json",
            console.trim_end_matches('/')
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Polls `GetTask` until task `id` is in `wanted`: the task.
async fn until(lead: &Lead, id: &str, wanted: &str) -> Value {
    until_over(lead, &[], id, wanted).await
}

/// The same, over the SDK with `flags` before its command (`--binding
/// JSONRPC`).
async fn until_over(lead: &Lead, flags: &[&str], id: &str, wanted: &str) -> Value {
    within(&format!("task {id} to be {wanted}"), async {
        loop {
            let mut args = flags.to_vec();
            args.extend(["get", id]);
            let (ok, task) = a2a(lead, ALICE_TOKEN, &args).await;
            assert!(ok, "{task}");
            if state(&task) == wanted {
                return task;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
}

const CAROL: &str = r#"
claim = "next"

[[tasks]]
subject = "Add the login page"
summary = "the login page is in src/login.rs"
[[tasks.plans]]
summary = "one big change: login page, sessions and the database"
files = ["src/login.rs", "src/session.rs", "src/db.rs"]
[[tasks.plans]]
summary = "the login page alone"
files = ["src/login.rs"]
steps = ["write the form", "write its handler"]
[[tasks.actions]]
phase = "work"
tool = "write_file"
path = "src/login.rs"
content = "pub fn login() {}\n"
"#;

#[tokio::test]
async fn a_task_handed_in_by_a2a_is_planned_reviewed_by_message_and_completed() {
    let lead = Lead::start(&["--operator-token", ALICE]).await;
    let (ok, task) = a2a(
        &lead,
        ALICE_TOKEN,
        &[
            "--immediately",
            "send",
            "Add the login page\nA form and its handler.",
            "--data",
            r#"{"files": ["src/login.rs"]}"#,
        ],
    )
    .await;
    assert!(ok, "{task}");
    assert_eq!(state(&task), "TASK_STATE_SUBMITTED", "{task}");
    let id = task["id"].as_str().unwrap().to_owned();
    let context = task["contextId"].as_str().unwrap().to_owned();
    // On the team's list, handed in by alice.
    let mut operator = lead.operator().await;
    let listed = operator
        .list_tasks(pb::ListTasksRequest::default())
        .await
        .unwrap()
        .into_inner()
        .tasks;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].subject, "Add the login page");
    assert_eq!(listed[0].description, "A form and its handler.");
    assert_eq!(listed[0].files, ["src/login.rs"]);
    let origin = listed[0].origin.clone().unwrap();
    assert_eq!(
        (origin.by.as_str(), origin.context_id.as_str()),
        ("a2a alice", context.as_str())
    );

    // Followed from here to the end over SubscribeToTask.
    let (mut follower, mut updates) = subscribe(&lead, &id);
    let first = within("the subscription's first event", updates.next_line())
        .await
        .unwrap()
        .expect("an event");
    let first: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(state(&first["task"]), "TASK_STATE_SUBMITTED", "{first}");

    // A scripted teammate claims it; its plan waits for the caller.
    let _carol = lead.teammate("carol", CAROL);
    let waiting = until(&lead, &id, "TASK_STATE_INPUT_REQUIRED").await;
    let asked = status_text(&waiting);
    println!("{asked}");
    assert!(asked.contains("one big change"), "{asked}");
    assert!(asked.contains("src/db.rs"), "{asked}");

    // Rejected with feedback: a blocking send returns once the revised
    // plan waits.
    let (ok, revised) = a2a(
        &lead,
        ALICE_TOKEN,
        &["send", "reject: only the login page, please", "--task", &id],
    )
    .await;
    assert!(ok, "{revised}");
    assert_eq!(state(&revised), "TASK_STATE_INPUT_REQUIRED", "{revised}");
    assert!(
        status_text(&revised).contains("the login page alone"),
        "{revised}"
    );

    // Approved (a data part): a blocking send returns when it is done.
    let (ok, done) = a2a(
        &lead,
        ALICE_TOKEN,
        &[
            "send",
            "--data",
            r#"{"decision": "approve"}"#,
            "--task",
            &id,
            "--context",
            &context,
        ],
    )
    .await;
    assert!(ok, "{done}");
    assert_eq!(state(&done), "TASK_STATE_COMPLETED", "{done}");
    let summary = done["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert_eq!(summary, "the login page is in src/login.rs", "{done}");
    assert!(lead.workspace("carol").join("src/login.rs").exists());

    // The subscriber saw it all, in order, and its stream ended.
    let mut seen: Vec<String> = Vec::new();
    while let Some(line) = within("the subscription", updates.next_line())
        .await
        .unwrap()
    {
        let event: Value = serde_json::from_str(&line).unwrap();
        if let Some(update) = event.get("statusUpdate") {
            let words = update["status"]["message"]["parts"][0]["text"]
                .as_str()
                .unwrap_or("");
            let plan = ["one big change", "the login page alone"]
                .into_iter()
                .find(|p| words.contains(p))
                .map(|p| format!(" ({p})"))
                .unwrap_or_default();
            seen.push(format!(
                "{}{plan}",
                update["status"]["state"].as_str().unwrap_or("")
            ));
        } else if event.get("artifactUpdate").is_some() {
            seen.push("artifact".into());
        }
    }
    println!("followed: {seen:?}");
    let waits: Vec<&String> = seen
        .iter()
        .filter(|s| s.starts_with("TASK_STATE_INPUT_REQUIRED"))
        .collect();
    assert_eq!(
        waits,
        [
            "TASK_STATE_INPUT_REQUIRED (one big change)",
            "TASK_STATE_INPUT_REQUIRED (the login page alone)"
        ],
        "{seen:?}"
    );
    assert_eq!(
        seen[seen.len() - 2..],
        ["artifact".to_owned(), "TASK_STATE_COMPLETED".to_owned()],
        "{seen:?}"
    );
    assert!(within("the subscriber to end", follower.wait())
        .await
        .unwrap()
        .success());

    // Each decision is alice's, in the requests' histories.
    let requests = requests(&mut operator).await;
    let plans: Vec<_> = requests.iter().filter(|r| r.sender == "carol").collect();
    assert_eq!(plans.len(), 2, "{plans:?}");
    for plan in plans {
        assert!(
            plan.reviews.iter().any(|r| r.reviewer == "operator alice"),
            "{plan:?}"
        );
    }
    // A finished task takes no more messages.
    let (ok, refused) = a2a(&lead, ALICE_TOKEN, &["send", "approve", "--task", &id]).await;
    assert!(!ok, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap_or("")
            .contains("COMPLETED"),
        "{refused}"
    );
}

#[tokio::test]
async fn tasks_list_in_pages_and_a_caller_without_an_operator_token_changes_nothing() {
    let lead = Lead::start(&["--operator-token", ALICE]).await;
    let mut ids = Vec::new();
    for n in 1..=5 {
        let (ok, task) = a2a(
            &lead,
            ALICE_TOKEN,
            &[
                "--immediately",
                "send",
                &format!("task {n}"),
                "--context",
                "goal-1",
            ],
        )
        .await;
        assert!(ok, "{task}");
        ids.push(task["id"].as_str().unwrap().to_owned());
    }
    let (ok, other) = a2a(&lead, ALICE_TOKEN, &["--immediately", "send", "elsewhere"]).await;
    assert!(ok, "{other}");

    // Pages of 2 over the 5 of goal-1, newest first, each once.
    let mut seen = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let (ok, page) = a2a(
            &lead,
            ALICE_TOKEN,
            &[
                "list",
                "--context",
                "goal-1",
                "--page-size",
                "2",
                "--page-token",
                &token,
            ],
        )
        .await;
        assert!(ok, "{page}");
        pages += 1;
        assert_eq!(page["totalSize"], 5, "{page}");
        for task in page["tasks"].as_array().unwrap() {
            seen.push(task["id"].as_str().unwrap().to_owned());
        }
        token = page["nextPageToken"].as_str().unwrap_or("").to_owned();
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(pages, 3);
    ids.reverse();
    assert_eq!(seen, ids, "newest first, each once");

    // Without a token, or with the join token: refused, nothing created.
    let (ok, refused) = a2a(&lead, "", &["--immediately", "send", "sneaky"]).await;
    assert!(
        !ok && refused["message"]
            .as_str()
            .unwrap()
            .contains("UNAUTHENTICATED"),
        "{refused}"
    );
    let (ok, refused) = a2a(
        &lead,
        &lead.join_token,
        &["--immediately", "send", "sneaky"],
    )
    .await;
    assert!(
        !ok && refused["message"]
            .as_str()
            .unwrap()
            .contains("PERMISSION_DENIED"),
        "{refused}"
    );
    let (ok, refused) = a2a(&lead, "", &["list"]).await;
    assert!(!ok, "{refused}");
    let mut operator = lead.operator().await;
    let tasks = operator
        .list_tasks(pb::ListTasksRequest::default())
        .await
        .unwrap()
        .into_inner()
        .tasks;
    assert_eq!(tasks.len(), 6, "nothing was created by the refused calls");

    // An unknown task: the specification's TaskNotFound.
    let (ok, missing) = a2a(&lead, ALICE_TOKEN, &["get", "no-such-task"]).await;
    assert!(!ok);
    assert_eq!(missing["error"], "TaskNotFoundError", "{missing}");
}

#[tokio::test]
async fn cancel_task_withdraws_a_claimed_task_and_its_plan_expires() {
    let lead = Lead::start(&["--operator-token", ALICE]).await;
    let (ok, task) = a2a(
        &lead,
        ALICE_TOKEN,
        &["--immediately", "send", "Add the login page"],
    )
    .await;
    assert!(ok, "{task}");
    let id = task["id"].as_str().unwrap().to_owned();
    let _carol = lead.teammate("carol", CAROL);
    until(&lead, &id, "TASK_STATE_INPUT_REQUIRED").await;

    let (ok, cancelled) = a2a(&lead, ALICE_TOKEN, &["cancel", &id]).await;
    assert!(ok, "{cancelled}");
    assert_eq!(state(&cancelled), "TASK_STATE_CANCELED", "{cancelled}");
    assert!(status_text(&cancelled).contains("withdrawn"), "{cancelled}");
    // The team's list says so; carol's plan expired, and she was told.
    let mut operator = lead.operator().await;
    let listed = operator
        .list_tasks(pb::ListTasksRequest::default())
        .await
        .unwrap()
        .into_inner()
        .tasks;
    assert_eq!(
        listed[0].status,
        pb::TaskStatus::Withdrawn as i32,
        "{listed:?}"
    );
    let requests = requests(&mut operator).await;
    let plan = requests
        .iter()
        .find(|r| r.sender == "carol")
        .expect("carol's plan");
    assert_eq!(plan.status, pb::RequestStatus::Expired as i32, "{plan:?}");
    assert!(
        plan.feedback.contains("withdrawn by operator alice"),
        "{plan:?}"
    );

    // Again, or a task never handed in: the specification's errors.
    let (ok, again) = a2a(&lead, ALICE_TOKEN, &["cancel", &id]).await;
    assert!(!ok);
    assert_eq!(again["error"], "TaskNotCancelableError", "{again}");
    let (ok, missing) = a2a(&lead, ALICE_TOKEN, &["cancel", "no-such-task"]).await;
    assert!(!ok);
    assert_eq!(missing["error"], "TaskNotFoundError", "{missing}");
    // A task nobody claimed yet is withdrawn as well.
    let (_, other) = a2a(
        &lead,
        ALICE_TOKEN,
        &["--immediately", "send", "Something else"],
    )
    .await;
    let other_id = other["id"].as_str().unwrap().to_owned();
    let (ok, cancelled) = a2a(&lead, ALICE_TOKEN, &["cancel", &other_id]).await;
    assert!(
        ok && state(&cancelled) == "TASK_STATE_CANCELED",
        "{cancelled}"
    );
}

/// A lead on the team repository `repo` (branch main), alice an operator.
async fn with_repo(repo: &tempfile::TempDir) -> Lead {
    Lead::start(&[
        "--repo",
        repo.path().to_str().unwrap(),
        "--branch",
        "main",
        "--operator-token",
        ALICE,
    ])
    .await
}

/// `lead spawn carol --role writer --script SCRIPT`.
async fn spawn_writer(lead: &Lead, script: &std::path::Path) {
    let script = script.to_str().unwrap();
    let (ok, _, err) = lead
        .cli(&["spawn", "carol", "--role", "writer", "--script", script])
        .await;
    assert!(ok, "{err}");
}

/// With a team repository, a task ends `COMPLETED` once its result has
/// landed, with the landed commit and its diff as artifacts.
#[tokio::test]
async fn with_a_repository_the_landed_commit_and_its_diff_are_artifacts() {
    let repo = mesh_tests::git::team_repo();
    let lead = with_repo(&repo).await;
    let (ok, task) = a2a(
        &lead,
        ALICE_TOKEN,
        &[
            "--immediately",
            "send",
            "docs\nWrite the guide.",
            "--data",
            r#"{"review": "result", "files": ["docs/**"]}"#,
        ],
    )
    .await;
    assert!(ok, "{task}");
    let id = task["id"].as_str().unwrap().to_owned();
    let script = lead.script(
        "carol",
        r##"
claim = "next"

[[tasks]]
subject = "docs"
summary = "Write the guide"
[[tasks.actions]]
phase = "work"
tool = "write_file"
path = "docs/guide.md"
content = "# guide"
"##,
    );
    spawn_writer(&lead, &script).await;
    let waiting = until(&lead, &id, "TASK_STATE_INPUT_REQUIRED").await;
    assert!(
        status_text(&waiting).contains("a result of carol"),
        "{waiting}"
    );

    let (ok, done) = a2a(&lead, ALICE_TOKEN, &["send", "approve", "--task", &id]).await;
    assert!(ok, "{done}");
    assert_eq!(state(&done), "TASK_STATE_COMPLETED", "{done}");
    let artifact = |name: &str| {
        done["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name)
            .and_then(|a| a["parts"][0]["text"].as_str())
            .unwrap_or_else(|| panic!("no {name} artifact in {done}"))
            .to_owned()
    };
    let head = mesh_tests::git::git(repo.path(), &["rev-parse", "main"]);
    assert_eq!(artifact("commit"), head.trim(), "the landed commit");
    assert!(artifact("diff").contains("docs/guide.md"), "{done}");
}

/// The README's example, as written there: a task handed in, its plan and
/// its result approved, the landed commit printed.
#[tokio::test]
async fn the_readme_example_hands_the_team_a_task_and_prints_the_landed_commit() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let example = root.join("examples/a2a/hand_over.py");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let code = std::fs::read_to_string(&example).unwrap();
    assert!(
        readme.contains(&code),
        "the README shows examples/a2a/hand_over.py as it is"
    );

    let repo = mesh_tests::git::team_repo();
    let lead = with_repo(&repo).await;
    let script = lead.script(
        "carol",
        r##"
claim = "next"

[[tasks]]
subject = "Write the guide"
summary = "Write the guide"
[[tasks.plans]]
summary = "a page in docs/"
files = ["docs/guide.md"]
[[tasks.actions]]
phase = "work"
tool = "write_file"
path = "docs/guide.md"
content = "# How to start"
"##,
    );
    spawn_writer(&lead, &script).await;
    let run = tokio::process::Command::new(python())
        .arg(&example)
        .arg(lead.console.as_deref().unwrap())
        .arg(ALICE_TOKEN)
        .output();
    let out = within("the example", run).await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("a plan of carol waits"), "{stdout}");
    assert!(lines[1].starts_with("a result of carol waits"), "{stdout}");
    let head = mesh_tests::git::git(repo.path(), &["rev-parse", "main"]);
    assert_eq!(
        lines.last().copied(),
        Some(head.trim()),
        "the landed commit"
    );
}

/// `tests/a2a/playbook.py` (the teammates the conformance kit's scenarios
/// need) joined to `lead`, once it says it is ready.
async fn playbook(lead: &Lead, stubs: &std::path::Path) -> tokio::process::Child {
    use tokio::io::AsyncBufReadExt as _;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("a2a/playbook.py");
    let mut child = tokio::process::Command::new(python())
        .arg(script)
        .args([
            "--lead",
            &lead.addr,
            "--join-token",
            &lead.join_token,
            "--stubs",
        ])
        .arg(stubs)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = within("the playbook to join", lines.next_line())
        .await
        .unwrap();
    assert_eq!(first.as_deref(), Some("ready"));
    // Its further lines are for a person watching; read them so it never blocks.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    child
}

#[tokio::test]
async fn an_open_lead_serves_the_conformance_scenarios_outputs_as_artifacts_and_input_as_feedback()
{
    let scratch = tempfile::tempdir().unwrap();
    let stubs = scratch.path().join("gen");
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/python");
    let generated = std::process::Command::new(python())
        .arg(example.join("gen_stubs.py"))
        .arg(&stubs)
        .status()
        .unwrap();
    assert!(generated.success(), "generating the stubs failed");
    let lead = Lead::start(&["--a2a-open", "kit"]).await;
    let card_url = format!(
        "{}/.well-known/agent-card.json",
        lead.console
            .as_deref()
            .expect("a console")
            .trim_end_matches('/')
    );
    let card = || async {
        mesh_tests::webdriver::http_client(reqwest::Client::builder())
            .get(&card_url)
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };
    let before = card().await;
    assert_eq!(
        before["securityRequirements"],
        serde_json::json!([]),
        "open: no token asked"
    );
    assert_eq!(
        before["skills"].as_array().map(Vec::len),
        Some(1),
        "{before}"
    );
    let _playbook = playbook(&lead, &stubs).await;
    // Each role among the members is a skill of the team.
    let after = card().await;
    assert_eq!(after["skills"][1]["id"], "role-tck playbook", "{after}");

    // No token: the caller acts as operator kit.
    let send = |id: &'static str, text: &'static str| {
        let lead = &lead;
        async move { a2a(lead, "", &["send", text, "--message-id", id]).await }
    };
    let (ok, task) = send("tck-artifact-data-1", "TCK artifact test").await;
    assert!(ok, "{task}");
    assert_eq!(state(&task), "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(
        task["artifacts"][0]["parts"][0]["data"],
        serde_json::json!({"key": "value", "count": 42.0}),
        "{task}"
    );
    // A question its teammate answers with a reply: a message, not a task.
    let (ok, reply) = send("tck-message-response-1", "Answer me directly").await;
    assert!(ok, "{reply}");
    assert_eq!(reply["role"], "ROLE_AGENT", "{reply}");
    assert_eq!(
        reply["parts"][0]["text"], "Direct message response",
        "{reply}"
    );
    assert!(
        reply["messageId"].is_string() && reply["contextId"].is_string(),
        "{reply}"
    );
    // The team keeps it as a task, completed, the reply its status message.
    let id = reply["taskId"].as_str().expect("the team's task of it");
    let (ok, kept) = a2a(&lead, "", &["get", id]).await;
    assert!(ok, "{kept}");
    assert_eq!(state(&kept), "TASK_STATE_COMPLETED", "{kept}");
    assert_eq!(
        kept["status"]["message"]["parts"][0]["text"], "Direct message response",
        "{kept}"
    );
    let (ok, task) = send("tck-artifact-file-2", "TCK artifact test").await;
    assert!(ok, "{task}");
    let file = &task["artifacts"][0]["parts"][0];
    assert_eq!(file["raw"], "dGNr", "{task}");
    assert_eq!(file["filename"], "output.txt", "{task}");
    assert_eq!(file["mediaType"], "text/plain", "{task}");

    // A task whose teammate waits for the caller: INPUT_REQUIRED; any input
    // (not an approval) goes back to it as feedback, and it completes.
    let (ok, task) = send("tck-input-required-3", "Ask me first").await;
    assert!(ok, "{task}");
    assert_eq!(state(&task), "TASK_STATE_INPUT_REQUIRED", "{task}");
    let id = task["id"].as_str().unwrap();
    // lead requests says whose task the waiting plan is for.
    let (ok, listed, err) = lead.cli(&["requests", "--pending"]).await;
    assert!(ok, "{err}");
    assert!(
        listed.contains(&format!("(task {id}, handed in by a2a kit)")),
        "{listed}"
    );
    let (ok, done) = a2a(&lead, "", &["send", "Complete", "--task", id]).await;
    assert!(ok, "{done}");
    assert_eq!(state(&done), "TASK_STATE_COMPLETED", "{done}");
    assert_eq!(
        done["artifacts"][0]["parts"][0]["text"], "done, as the caller said: Complete",
        "{done}"
    );
    // The decision is the open caller's, by name.
    let mut operator = lead.operator().await;
    let requests = requests(&mut operator).await;
    let plan = requests
        .iter()
        .find(|r| r.payload_json.contains(id))
        .expect("the plan");
    assert!(
        plan.reviews
            .iter()
            .any(|r| r.reviewer == "operator kit" && r.verdict == "reject"),
        "{plan:?}"
    );
    assert_eq!(plan.feedback, "Complete", "{plan:?}");
}

#[tokio::test]
async fn the_card_says_what_a2a_card_file_says_of_the_team_and_the_lead_the_rest() {
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("card.json");
    std::fs::write(
        &file,
        r#"{"name": "docs team", "skills": [{"id": "docs", "name": "Docs",
            "description": "writes the guides", "tags": ["docs"]}]}"#,
    )
    .unwrap();
    let lead = Lead::start(&["--a2a-card", file.to_str().unwrap()]).await;
    let url = format!(
        "{}/.well-known/agent-card.json",
        lead.console
            .as_deref()
            .expect("a console")
            .trim_end_matches('/')
    );
    let http = mesh_tests::webdriver::http_client(reqwest::Client::builder());
    let card: Value = http.get(&url).send().await.unwrap().json().await.unwrap();
    assert_eq!(card["name"], "docs team");
    assert_eq!(card["skills"][0]["id"], "docs");
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        lead.addr.trim_start_matches("http://"),
        "{card}"
    );
    // A field the lead says itself is refused, naming the file and the field.
    std::fs::write(&file, r#"{"capabilities": {"streaming": false}}"#).unwrap();
    let refused = tokio::process::Command::new(mesh_tests::bin("lead"))
        .args(["serve", "--listen", "127.0.0.1:0", "--state-dir"])
        .arg(scratch.path().join("state"))
        .arg("--a2a-card")
        .arg(&file)
        .output()
        .await
        .unwrap();
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("--a2a-card") && said.contains("\"capabilities\""),
        "{said}"
    );
}

/// What a webhook heard in one POST: its `Authorization` and
/// `X-A2A-Notification-Token` headers and its JSON body.
type Heard = (String, String, Value);

/// A webhook on loopback that answers 200 to every POST on `/hook`: its
/// URL, and what it hears, as it comes.
async fn webhook() -> (String, tokio::sync::mpsc::UnboundedReceiver<Heard>) {
    use axum::{extract::State, http::HeaderMap, Json};
    async fn hook(
        State(heard): State<tokio::sync::mpsc::UnboundedSender<Heard>>,
        headers: HeaderMap,
        Json(body): Json<Value>,
    ) -> &'static str {
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned()
        };
        let _ = heard.send((
            header("authorization"),
            header("x-a2a-notification-token"),
            body,
        ));
        "taken"
    }
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(hook))
        .with_state(tx);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, rx)
}

/// What the webhook hears until a status update in `state`: all of it.
async fn heard_until(
    hooks: &mut tokio::sync::mpsc::UnboundedReceiver<Heard>,
    state: &str,
) -> Vec<Heard> {
    within(&format!("the webhook to hear {state}"), async {
        let mut heard = Vec::new();
        loop {
            let one = hooks.recv().await.expect("the webhook runs");
            let done = one.2["statusUpdate"]["status"]["state"] == state;
            heard.push(one);
            if done {
                return heard;
            }
        }
    })
    .await
}

#[tokio::test]
async fn a_webhook_hears_the_plan_wait_and_the_task_end_with_the_callers_credentials() {
    let lead = Lead::start(&["--operator-token", ALICE, "--a2a-push-allow", "127.0.0.1"]).await;
    let card = card_of(&lead).await;
    assert_eq!(card["capabilities"]["pushNotifications"], true, "{card}");

    // A webhook on a host the lead was not told of: refused, naming the
    // field and the flag, and nothing is handed in.
    let (ok, refused) = a2a(
        &lead,
        ALICE_TOKEN,
        &[
            "--immediately",
            "send",
            "Add the login page",
            "--push",
            r#"{"url": "http://example.com/hook"}"#,
        ],
    )
    .await;
    assert!(!ok, "{refused}");
    let words = refused["message"].as_str().unwrap_or("");
    assert!(
        words.contains("configuration.task_push_notification_config.url")
            && words.contains("--a2a-push-allow"),
        "{refused}"
    );
    let mut operator = lead.operator().await;
    let listed = operator
        .list_tasks(pb::ListTasksRequest::default())
        .await
        .unwrap()
        .into_inner()
        .tasks;
    assert!(listed.is_empty(), "{listed:?}");

    // A task handed in with a webhook, and a second webhook that is down.
    let (url, mut hooks) = webhook().await;
    let push = serde_json::json!({
        "url": url,
        "token": "tok-1",
        "authentication": {"scheme": "Bearer", "credentials": "hook-secret"},
    })
    .to_string();
    let (ok, task) = a2a(
        &lead,
        ALICE_TOKEN,
        &[
            "--immediately",
            "send",
            "Add the login page",
            "--push",
            &push,
        ],
    )
    .await;
    assert!(ok, "{task}");
    let id = task["id"].as_str().unwrap().to_owned();
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead = serde_json::json!({
        "taskId": id,
        "id": "down",
        "url": format!("http://{}/hook", closed.local_addr().unwrap()),
    })
    .to_string();
    drop(closed);
    let (ok, made) = a2a(&lead, ALICE_TOKEN, &["push-create", &dead]).await;
    assert!(ok, "{made}");
    assert_eq!(made["id"], "down", "{made}");
    let (ok, both) = a2a(&lead, ALICE_TOKEN, &["push-list", &id]).await;
    assert!(ok, "{both}");
    assert_eq!(both["configs"].as_array().map(Vec::len), Some(2), "{both}");

    // The webhook hears the task as it stood, then its plan waiting, each
    // with the caller's credentials and token.
    let _carol = lead.teammate("carol", CAROL);
    let heard = heard_until(&mut hooks, "TASK_STATE_INPUT_REQUIRED").await;
    assert_eq!(
        state(&heard[0].2["task"]),
        "TASK_STATE_SUBMITTED",
        "{heard:?}"
    );
    for (authorization, token, _) in &heard {
        assert_eq!(authorization, "Bearer hook-secret");
        assert_eq!(token, "tok-1");
    }
    let waiting = &heard.last().unwrap().2["statusUpdate"];
    assert!(
        waiting["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("one big change"),
        "{waiting}"
    );

    // Approved: the webhook hears the summary and the end.
    let (ok, done) = a2a(&lead, ALICE_TOKEN, &["send", "approve", "--task", &id]).await;
    assert!(ok, "{done}");
    let heard = heard_until(&mut hooks, "TASK_STATE_COMPLETED").await;
    assert!(
        heard
            .iter()
            .any(|(_, _, body)| body["artifactUpdate"]["artifact"]["name"] == "summary"),
        "{heard:?}"
    );

    // Get, delete (twice: idempotent), and it is gone.
    let (ok, one) = a2a(&lead, ALICE_TOKEN, &["push-get", &id, "down"]).await;
    assert!(ok, "{one}");
    assert_eq!(one["taskId"], id.as_str(), "{one}");
    for _ in 0..2 {
        let (ok, deleted) = a2a(&lead, ALICE_TOKEN, &["push-delete", &id, "down"]).await;
        assert!(ok, "{deleted}");
    }
    let (ok, gone) = a2a(&lead, ALICE_TOKEN, &["push-get", &id, "down"]).await;
    assert!(!ok, "{gone}");
    let (ok, unknown) = a2a(&lead, ALICE_TOKEN, &["push-list", "no-such-task"]).await;
    assert!(!ok, "{unknown}");
    assert_eq!(unknown["error"], "TaskNotFoundError", "{unknown}");
}

#[tokio::test]
async fn the_json_rpc_binding_serves_the_same_story_to_the_sdk_and_names_what_is_wrong() {
    let lead = Lead::start(&["--operator-token", ALICE]).await;
    let console = lead
        .console
        .as_deref()
        .expect("a console")
        .trim_end_matches('/');
    let http = mesh_tests::webdriver::http_client(reqwest::Client::builder());
    let card = card_of(&lead).await;
    let endpoint = format!("{console}/a2a");
    assert_eq!(
        card["supportedInterfaces"][1]["url"],
        endpoint.as_str(),
        "{card}"
    );
    assert_eq!(card["supportedInterfaces"][1]["protocolBinding"], "JSONRPC");

    // The SDK over JSON-RPC: handed in, its plan waits, approved, done.
    let rpc = |args: &'static [&'static str]| {
        let lead = &lead;
        async move {
            let mut all = vec!["--binding", "JSONRPC"];
            all.extend_from_slice(args);
            a2a(lead, ALICE_TOKEN, &all).await
        }
    };
    let (ok, task) = rpc(&["--immediately", "send", "Add the login page"]).await;
    assert!(ok, "{task}");
    assert_eq!(state(&task), "TASK_STATE_SUBMITTED", "{task}");
    let id = task["id"].as_str().unwrap().to_owned();
    let _carol = lead.teammate("carol", CAROL);
    let waiting = until_over(
        &lead,
        &["--binding", "JSONRPC"],
        &id,
        "TASK_STATE_INPUT_REQUIRED",
    )
    .await;
    assert!(
        status_text(&waiting).contains("one big change"),
        "{waiting}"
    );
    let (ok, done) = a2a(
        &lead,
        ALICE_TOKEN,
        &["--binding", "JSONRPC", "send", "approve", "--task", &id],
    )
    .await;
    assert!(ok, "{done}");
    assert_eq!(state(&done), "TASK_STATE_COMPLETED", "{done}");
    let (ok, listed) = rpc(&["list"]).await;
    assert!(ok, "{listed}");
    assert_eq!(listed["tasks"][0]["id"], id.as_str(), "{listed}");
    let (ok, missing) = rpc(&["get", "no-such-task"]).await;
    assert!(!ok, "{missing}");
    assert_eq!(missing["error"], "TaskNotFoundError", "{missing}");

    // Raw: what is not JSON, not a method, or without a token.
    let typed = |media: Option<&'static str>, body: &'static str, token: Option<&'static str>| {
        let mut request = http.post(&endpoint).header("A2A-Version", "1.0").body(body);
        if let Some(media) = media {
            request = request.header("content-type", media);
        }
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        async move {
            let answer = request.send().await.unwrap();
            let status = answer.status().as_u16();
            (status, answer.json::<Value>().await.unwrap())
        }
    };
    let post = |body, token| typed(Some("application/json"), body, token);
    let (_, garbled) = post("{not json", Some(ALICE_TOKEN)).await;
    assert_eq!(garbled["error"]["code"], -32700, "{garbled}");
    let list = r#"{"jsonrpc": "2.0", "id": 6, "method": "ListTasks"}"#;
    let (_, as_text) = typed(Some("text/plain"), list, Some(ALICE_TOKEN)).await;
    assert_eq!(as_text["error"]["code"], -32005, "{as_text}");
    // Without a type (what a web page may send anywhere): refused too.
    let (_, untyped) = typed(None, list, Some(ALICE_TOKEN)).await;
    assert_eq!(untyped["error"]["code"], -32005, "{untyped}");
    let (_, unknown) = post(
        r#"{"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": {}}"#,
        Some(ALICE_TOKEN),
    )
    .await;
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    assert_eq!(unknown["id"], 7, "{unknown}");
    // An unknown field is ignored (as ProtoJSON readers do), so the task's
    // id is missing: the error names it.
    let (_, wrong) = post(
        r#"{"jsonrpc": "2.0", "id": 8, "method": "GetTask", "params": {"idd": "x"}}"#,
        Some(ALICE_TOKEN),
    )
    .await;
    assert_eq!(wrong["error"]["code"], -32602, "{wrong}");
    assert!(
        wrong["error"]["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("id:"),
        "{wrong}"
    );
    let (status, refused) = post(
        r#"{"jsonrpc": "2.0", "id": 9, "method": "ListTasks", "params": {}}"#,
        None,
    )
    .await;
    assert_eq!(status, 401, "{refused}");
    let (status, found) = post(
        r#"{"jsonrpc": "2.0", "id": "a", "method": "GetTask", "params": {"id": "no-such-task"}}"#,
        Some(ALICE_TOKEN),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(found["error"]["code"], -32001, "{found}");
    assert_eq!(
        found["error"]["data"][0]["reason"], "TASK_NOT_FOUND",
        "{found}"
    );

    // A stream is server-sent events, one JSON-RPC response each: a new
    // task as it stands, then (canceled meanwhile) its end, and the stream
    // ends.
    let (ok, second) = rpc(&["--immediately", "send", "Write the docs"]).await;
    assert!(ok, "{second}");
    let second = second["id"].as_str().unwrap().to_owned();
    let call = |method: &str, n: u64| {
        http.post(&endpoint)
            .header("A2A-Version", "1.0")
            .bearer_auth(ALICE_TOKEN)
            .json(
                &serde_json::json!({"jsonrpc": "2.0", "id": n, "method": method,
                "params": {"id": second}}),
            )
            .send()
    };
    let events = call("SubscribeToTask", 3).await.unwrap();
    assert!(
        events.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream"),
        "{:?}",
        events.headers()
    );
    let canceled: Value = call("CancelTask", 4).await.unwrap().json().await.unwrap();
    assert_eq!(
        state(&canceled["result"]),
        "TASK_STATE_CANCELED",
        "{canceled}"
    );
    let text = within("the stream to end", events.text()).await.unwrap();
    let data: Vec<Value> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|data| serde_json::from_str(data.trim()).unwrap())
        .collect();
    assert!(data.iter().all(|d| d["id"] == 3), "{text}");
    assert!(data[0]["result"]["task"].is_object(), "{text}");
    assert_eq!(
        data.last().unwrap()["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_CANCELED",
        "{text}"
    );
}

/// The HTTP+JSON binding (A2A's REST): the SDK over it hands in a task,
/// sees the plan wait, approves it and lists it; raw calls get AIP-193
/// errors with the specification's HTTP statuses, a field no one knows is
/// ignored, a stream is server-sent events of bare `StreamResponse`s; the
/// card names the binding and comes with validators (304 for a copy that
/// is current).
#[tokio::test]
async fn the_http_json_binding_serves_the_same_story_to_the_sdk_and_answers_errors_as_aip_193() {
    let lead = Lead::start(&["--operator-token", ALICE]).await;
    let console = lead
        .console
        .as_deref()
        .expect("a console")
        .trim_end_matches('/')
        .to_owned();
    let http = mesh_tests::webdriver::http_client(reqwest::Client::builder());
    let card = card_of(&lead).await;
    let base = format!("{console}/a2a/rest");
    assert_eq!(
        card["supportedInterfaces"][2]["url"],
        base.as_str(),
        "{card}"
    );
    assert_eq!(
        card["supportedInterfaces"][2]["protocolBinding"],
        "HTTP+JSON"
    );

    // The SDK over HTTP+JSON: handed in, its plan waits, approved, done.
    let flags = ["--binding", "HTTP+JSON"];
    let over = |args: &[&str]| {
        let mut all = flags.to_vec();
        all.extend_from_slice(args);
        all.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let run = |args: Vec<String>| {
        let lead = &lead;
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            a2a(lead, ALICE_TOKEN, &args).await
        }
    };
    let (ok, task) = run(over(&["--immediately", "send", "Add the login page"])).await;
    assert!(ok, "{task}");
    assert_eq!(state(&task), "TASK_STATE_SUBMITTED", "{task}");
    let id = task["id"].as_str().unwrap().to_owned();
    let _carol = lead.teammate("carol", CAROL);
    let waiting = until_over(&lead, &flags, &id, "TASK_STATE_INPUT_REQUIRED").await;
    assert!(
        status_text(&waiting).contains("one big change"),
        "{waiting}"
    );
    let (ok, done) = run(over(&["send", "approve", "--task", &id])).await;
    assert!(ok, "{done}");
    assert_eq!(state(&done), "TASK_STATE_COMPLETED", "{done}");
    let (ok, listed) = run(over(&["list"])).await;
    assert!(ok, "{listed}");
    assert_eq!(listed["tasks"][0]["id"], id.as_str(), "{listed}");
    let (ok, missing) = run(over(&["get", "no-such-task"])).await;
    assert!(!ok, "{missing}");
    assert_eq!(missing["error"], "TaskNotFoundError", "{missing}");

    // Raw calls, as the kit makes them.
    let send = |request: reqwest::RequestBuilder| async move {
        let answer = request
            .header("A2A-Version", "1.0")
            .bearer_auth(ALICE_TOKEN)
            .send()
            .await
            .unwrap();
        let status = answer.status().as_u16();
        let media = answer
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        (status, media, answer.text().await.unwrap())
    };
    let json = |text: &str| serde_json::from_str::<Value>(text).unwrap();
    let (status, media, body) = send(http.get(format!("{base}/tasks/no-such-task"))).await;
    assert_eq!(status, 404, "{body}");
    assert!(media.starts_with("application/json"), "{media}");
    let error = json(&body);
    assert_eq!(error["error"]["code"], 404, "{body}");
    assert_eq!(error["error"]["status"], "NOT_FOUND", "{body}");
    assert_eq!(
        error["error"]["details"][0]["reason"], "TASK_NOT_FOUND",
        "{body}"
    );
    let (status, _, body) = send(
        http.post(format!("{base}/message:send"))
            .header("content-type", "text/plain")
            .body("{}"),
    )
    .await;
    assert_eq!(status, 415, "{body}");
    let (status, _, body) = send(
        http.post(format!("{base}/tasks/{id}:cancel"))
            .header("content-type", "application/json"),
    )
    .await;
    assert_eq!(status, 409, "a completed task: {body}");
    assert_eq!(
        json(&body)["error"]["details"][0]["reason"],
        "TASK_NOT_CANCELABLE"
    );
    let (status, _, body) =
        send(http.get(format!("{base}/tasks/{id}?historyLength=1&tckUnknown=1"))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["id"], id.as_str(), "{body}");
    let (status, _, body) =
        send(http.get(format!("{base}/tasks?pageSize=1&includeArtifacts=false"))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        json(&body)["tasks"].as_array().map(Vec::len),
        Some(1),
        "{body}"
    );

    // A stream: a new task as it stands, a field no one knows ignored;
    // canceled meanwhile, its end; and the stream ends.
    let (status, _, body) = send(
        http.post(format!("{base}/message:send"))
            .header("content-type", "application/json")
            .body(
                json!({
                    "message": {"messageId": "m-rest-1", "role": "ROLE_USER",
                        "parts": [{"text": "Write the docs"}], "tckUnknownField": 1},
                    "configuration": {"returnImmediately": true},
                    "tckExtraParam": true,
                })
                .to_string(),
            ),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let second = json(&body)["task"]["id"].as_str().unwrap().to_owned();
    let subscribed = http
        .post(format!("{base}/tasks/{second}:subscribe"))
        .header("A2A-Version", "1.0")
        .bearer_auth(ALICE_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(subscribed.status().as_u16(), 200);
    let events_type = subscribed
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    assert!(
        events_type.starts_with("text/event-stream"),
        "{events_type}"
    );
    let (status, _, body) = send(
        http.post(format!("{base}/tasks/{second}:cancel"))
            .header("content-type", "application/json")
            .body("{}"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(state(&json(&body)), "TASK_STATE_CANCELED", "{body}");
    let text = within("the stream to end", subscribed.text())
        .await
        .unwrap();
    let events: Vec<Value> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|data| json(data.trim()))
        .collect();
    assert!(events.len() >= 2, "{text}");
    assert_eq!(events[0]["task"]["id"], second.as_str(), "{text}");
    assert_eq!(
        events.last().unwrap()["statusUpdate"]["status"]["state"],
        "TASK_STATE_CANCELED",
        "{text}"
    );

    // The card's validators: the same card again is 304, with no body.
    let card_url = format!("{console}/.well-known/agent-card.json");
    let first = http.get(&card_url).send().await.unwrap();
    let etag = first.headers()["etag"].to_str().unwrap().to_owned();
    assert!(first.headers().contains_key("last-modified"));
    let again = http
        .get(&card_url)
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status().as_u16(), 304);
    assert_eq!(again.headers()["etag"].to_str().unwrap(), etag);
    assert!(again.text().await.unwrap().is_empty());
    let other = http
        .get(&card_url)
        .header("if-none-match", "\"another\"")
        .send()
        .await
        .unwrap();
    assert_eq!(other.status().as_u16(), 200);
}
