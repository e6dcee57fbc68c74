//! The shared task list over the wire: claims are atomic, blockers hold,
//! only owners complete, a terminated owner's tasks come back, tasks survive
//! `kill -9`, idle members hear of claimable work, plans name their task.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use mesh_tests::{approve, within, Events, Lead, Operator};
use shared::pb::{self, envelope::Body};
use tonic::Code;

async fn create(operator: &mut Operator, subject: &str, blocked_by: &[&str]) -> pb::Task {
    operator
        .create_task(pb::CreateTaskRequest {
            subject: subject.into(),
            description: String::new(),
            blocked_by: blocked_by.iter().map(|s| s.to_string()).collect(),
            files: vec![],
            review: 0,
        })
        .await
        .unwrap()
        .into_inner()
}

async fn tasks(operator: &mut Operator) -> Vec<pb::Task> {
    operator
        .list_tasks(pb::ListTasksRequest::default())
        .await
        .unwrap()
        .into_inner()
        .tasks
}

fn claim(id: &str) -> pb::ClaimTaskRequest {
    pb::ClaimTaskRequest { task_id: id.into() }
}

#[tokio::test]
async fn twenty_members_claiming_a_hundred_tasks_claim_each_once() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    for i in 0..100 {
        create(&mut operator, &format!("task {i}"), &[]).await;
    }
    let mut members = Vec::new();
    for i in 0..20 {
        members.push(lead.join(&format!("m{i}")).await);
    }
    let claims = members.into_iter().map(|mut member| {
        tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                match member.api.claim_task(claim("")).await {
                    Ok(task) => {
                        let task = task.into_inner();
                        assert_eq!(task.owner, member.name);
                        assert_eq!(task.status, pb::TaskStatus::Claimed as i32);
                        mine.push(task.task_id);
                    }
                    Err(status) => {
                        assert_eq!(status.code(), Code::NotFound, "{status:?}");
                        return (member.name, mine);
                    }
                }
            }
        })
    });
    let mut owner_of: HashMap<String, String> = HashMap::new();
    for claim in claims {
        let (name, mine) = within("the claims", claim).await.unwrap();
        for id in mine {
            assert!(
                owner_of.insert(id.clone(), name.clone()).is_none(),
                "{id} claimed twice"
            );
        }
    }
    assert_eq!(owner_of.len(), 100);
    for task in tasks(&mut operator).await {
        assert_eq!(owner_of.get(&task.task_id), Some(&task.owner), "{task:?}");
    }
}

#[tokio::test]
async fn blockers_hold_and_only_the_owner_completes() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let first = create(&mut operator, "parser", &[]).await;
    let second = create(&mut operator, "docs", &[&first.task_id]).await;
    let mut alice = lead.join("alice").await;
    let mut bob = lead.join("bob").await;

    let blocked = bob
        .api
        .claim_task(claim(&second.task_id))
        .await
        .unwrap_err();
    assert_eq!(blocked.code(), Code::FailedPrecondition);
    assert!(
        blocked.message().contains("blocked by") && blocked.message().contains(&first.task_id),
        "{blocked:?}"
    );
    let next = bob.api.claim_task(claim("")).await.unwrap().into_inner();
    assert_eq!(next.task_id, first.task_id);
    let none = alice.api.claim_task(claim("")).await.unwrap_err();
    assert_eq!(none.code(), Code::NotFound, "{none:?}");
    let taken = alice
        .api
        .claim_task(claim(&first.task_id))
        .await
        .unwrap_err();
    assert_eq!(taken.code(), Code::FailedPrecondition);
    assert!(taken.message().contains("claimed by bob"), "{taken:?}");

    // Only the owner completes; the idle member hears the unblocked task.
    alice
        .api
        .report_idle(pb::IdleNotification {
            reason: "nothing".into(),
        })
        .await
        .unwrap();
    alice.open_inbox(0).await;
    let stranger = alice
        .api
        .complete_task(pb::CompleteTaskRequest {
            task_id: first.task_id.clone(),
            summary: "mine now".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(stranger.code(), Code::PermissionDenied, "{stranger:?}");
    let done = bob
        .api
        .complete_task(pb::CompleteTaskRequest {
            task_id: first.task_id.clone(),
            summary: "parser added".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (done.status, done.summary.as_str()),
        (pb::TaskStatus::Completed as i32, "parser added")
    );
    let heard = alice
        .next_matching(|e| matches!(e.body, Some(Body::TaskClaimable(_))))
        .await;
    assert!(matches!(&heard.body, Some(Body::TaskClaimable(t)) if t.task_id == second.task_id));
    let claimed = alice
        .api
        .claim_task(claim(&second.task_id))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(claimed.owner, "alice");
    let done_again = bob.api.claim_task(claim(&first.task_id)).await.unwrap_err();
    assert!(done_again.message().contains("completed"), "{done_again:?}");
    // The watchers saw the task's life.
    events
        .find("the completion in Watch", |kind| match kind {
            pb::event::Kind::Task(t)
                if t.task_id == first.task_id && t.status == pb::TaskStatus::Completed as i32 =>
            {
                Some(())
            }
            _ => None,
        })
        .await;
}

#[tokio::test]
async fn a_terminated_owner_gives_its_task_back_and_plans_name_their_own_task() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let task = create(&mut operator, "refactor", &[]).await;
    let mut alice = lead.join("alice").await;
    let mut bob = lead.join("bob").await;
    alice.api.claim_task(claim(&task.task_id)).await.unwrap();

    let plan = |task_id: &str| pb::PlanApprovalRequest {
        request_id: uuid::Uuid::new_v4().to_string(),
        supersedes: String::new(),
        plan: Some(pb::Plan {
            summary: "do it".into(),
            task_id: task_id.into(),
            ..Default::default()
        }),
    };
    let not_bobs = bob.api.submit_plan(plan(&task.task_id)).await.unwrap_err();
    assert_eq!(not_bobs.code(), Code::FailedPrecondition);
    assert!(
        not_bobs.message().contains("not claimed by bob"),
        "{not_bobs:?}"
    );
    alice.api.submit_plan(plan(&task.task_id)).await.unwrap();

    alice
        .api
        .leave(pb::LeaveRequest {
            reason: "done for the day".into(),
        })
        .await
        .unwrap();
    let back = events
        .find("the task given back", |kind| match kind {
            pb::event::Kind::Task(t)
                if t.task_id == task.task_id && t.status == pb::TaskStatus::Pending as i32 =>
            {
                Some(t.clone())
            }
            _ => None,
        })
        .await;
    assert!(back.owner.is_empty(), "{back:?}");
    let again = alice
        .api
        .leave(pb::LeaveRequest::default())
        .await
        .unwrap_err();
    assert_eq!(again.code(), Code::Unauthenticated);
    let claimed = bob.api.claim_task(claim("")).await.unwrap().into_inner();
    assert_eq!(
        (claimed.task_id, claimed.owner.as_str()),
        (task.task_id, "bob")
    );
}

#[tokio::test]
async fn tasks_survive_kill_9_on_sqlite() {
    tasks_survive_kill_9().await;
}

#[tokio::test]
async fn tasks_survive_kill_9_on_postgres() {
    mesh_tests::on_postgres(tasks_survive_kill_9()).await;
}

async fn tasks_survive_kill_9() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let first = create(&mut operator, "one", &[]).await;
    let second = create(&mut operator, "two", &[&first.task_id]).await;
    let mut alice = lead.join("alice").await;
    alice.api.claim_task(claim(&first.task_id)).await.unwrap();
    alice
        .api
        .complete_task(pb::CompleteTaskRequest {
            task_id: first.task_id.clone(),
            summary: "done".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let before = tasks(&mut operator).await;

    let lead = lead.crash_and_restart(&[]).await;
    let mut operator = lead.operator().await;
    let after = tasks(&mut operator).await;
    assert_eq!(before, after);
    assert_eq!(after[1].task_id, second.task_id);
    assert_eq!(after[0].summary, "done");
}

#[tokio::test]
async fn the_cli_adds_and_lists_tasks() {
    let lead = Lead::start(&[]).await;
    let (ok, first, err) = lead
        .cli(&["task", "add", "write the parser", "--files", "src/**"])
        .await;
    assert!(ok, "{err}");
    let first = first.trim().to_owned();
    let (ok, _, err) = lead
        .cli(&[
            "task",
            "add",
            "document it",
            "--blocked-by",
            &first,
            "--description",
            "after the parser",
        ])
        .await;
    assert!(ok, "{err}");
    let (ok, _, err) = lead
        .cli(&["task", "add", "x", "--blocked-by", "no-such-task"])
        .await;
    assert!(!ok && err.contains("blocked_by[0]"), "{err}");
    let (ok, table, err) = lead.cli(&["tasks"]).await;
    assert!(ok, "{err}");
    assert!(
        table.contains("write the parser") && table.contains("PENDING"),
        "{table}"
    );
    let (ok, json, err) = lead.cli(&["tasks", "--json"]).await;
    assert!(ok, "{err}");
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json[1]["blocked_by"][0], first.as_str());
    assert_eq!(json[0]["files"][0], "src/**");
}

fn plan_for(task_id: &str, files: &[&str], supersedes: &str) -> pb::PlanApprovalRequest {
    pb::PlanApprovalRequest {
        request_id: uuid::Uuid::new_v4().to_string(),
        supersedes: supersedes.into(),
        plan: Some(pb::Plan {
            summary: format!("work on {}", files.join(" ")),
            files: files.iter().map(|s| s.to_string()).collect(),
            tests: vec!["cargo test".into()],
            task_id: task_id.into(),
            ..Default::default()
        }),
    }
}

#[tokio::test]
async fn approving_an_overlap_by_hand_needs_allow_overlap() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut alice = lead.join("alice").await;
    let mut bob = lead.join("bob").await;
    let first = alice
        .api
        .submit_plan(plan_for("", &["src/auth.rs"], ""))
        .await
        .unwrap()
        .into_inner();
    let (ok, _, err) = lead.cli(&["approve", &first.request_id]).await;
    assert!(ok, "{err}");
    let second = bob
        .api
        .submit_plan(plan_for("", &["src/auth.rs", "src/db.rs"], ""))
        .await
        .unwrap()
        .into_inner();
    let state = operator
        .get_request(pb::GetRequestRequest {
            request_id: second.request_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    let payload: serde_json::Value = serde_json::from_str(&state.payload_json).unwrap();
    assert_eq!(payload["overlaps"][0]["member"], "alice", "{payload}");
    assert_eq!(
        payload["overlaps"][0]["files"],
        serde_json::json!(["src/auth.rs"])
    );
    let (ok, listed, _) = lead.cli(&["requests", "--pending"]).await;
    assert!(
        ok && listed.contains("[overlaps alice: src/auth.rs]"),
        "{listed}"
    );

    let (ok, _, err) = lead.cli(&["approve", &second.request_id]).await;
    assert!(
        !ok && err.contains("overlaps alice: src/auth.rs") && err.contains("--allow-overlap"),
        "{err}"
    );
    let (ok, _, err) = lead
        .cli(&["approve", &second.request_id, "--allow-overlap"])
        .await;
    assert!(ok, "{err}");
    // A program that knows nothing of holds approves as it always did.
    let mut carol = lead.join("carol").await;
    let third = carol
        .api
        .submit_plan(plan_for("", &["src/auth.rs"], ""))
        .await
        .unwrap()
        .into_inner();
    let review = operator
        .review_plan(pb::PlanReview {
            request_id: third.request_id,
            approve: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(review.approve);
}

#[tokio::test]
async fn deny_overlap_rejects_naming_the_holder_until_it_completes() {
    let scratch = tempfile::tempdir().unwrap();
    let policy = scratch.path().join("policy.toml");
    std::fs::write(&policy, "deny_overlap = true\n").unwrap();
    let lead = Lead::start(&["--approval", &format!("policy:{}", policy.display())]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let auth = create(&mut operator, "auth", &[]).await;
    let db = create(&mut operator, "db", &[]).await;
    let mut alice = lead.join("alice").await;
    let mut bob = lead.join("bob").await;
    alice.api.claim_task(claim(&auth.task_id)).await.unwrap();
    bob.api.claim_task(claim(&db.task_id)).await.unwrap();

    let decided = |sender: &'static str| {
        move |r: &pb::ProtocolState| {
            r.sender == sender && r.status != pb::RequestStatus::Pending as i32
        }
    };
    alice
        .api
        .submit_plan(plan_for(&auth.task_id, &["src/auth/**"], ""))
        .await
        .unwrap();
    let alices = events
        .request("alice's plan decided", decided("alice"))
        .await;
    assert_eq!(
        alices.status,
        pb::RequestStatus::Approved as i32,
        "{alices:?}"
    );

    let first = bob
        .api
        .submit_plan(plan_for(
            &db.task_id,
            &["src/db.rs", "src/auth/session.rs"],
            "",
        ))
        .await
        .unwrap()
        .into_inner();
    let rejected = events.request("bob's plan decided", decided("bob")).await;
    assert_eq!(rejected.status, pb::RequestStatus::Rejected as i32);
    assert!(
        rejected.feedback.contains("deny_overlap")
            && rejected.feedback.contains("alice")
            && rejected.feedback.contains("src/auth/session.rs"),
        "{}",
        rejected.feedback
    );

    // Once alice completes her task, her hold ends and the same plan passes.
    alice
        .api
        .complete_task(pb::CompleteTaskRequest {
            task_id: auth.task_id.clone(),
            summary: "auth done".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    bob.api
        .submit_plan(plan_for(
            &db.task_id,
            &["src/db.rs", "src/auth/session.rs"],
            &first.request_id,
        ))
        .await
        .unwrap();
    let approved = events
        .request("bob's revision decided", decided("bob"))
        .await;
    assert_eq!(
        approved.status,
        pb::RequestStatus::Approved as i32,
        "{approved:?}"
    );
}

/// A script with `claim = "next"` works through the list on its own, its
/// plans carry their task and get approved, each grant ends with its task
/// (the member is in plan mode again), it idles when nothing is claimable,
/// and a task created later wakes it without any polling.
#[tokio::test]
async fn a_claim_next_script_works_the_list_and_wakes_for_new_work() {
    let lead = Lead::start(&["--approval", "auto"]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let first = create(&mut operator, "first", &[]).await;
    let second = create(&mut operator, "second", &[&first.task_id]).await;
    let script = r#"
claim = "next"

[[tasks]]
subject = "first"
summary = "wrote one.txt"
[[tasks.plans]]
summary = "write one.txt"
files = ["one.txt"]
[[tasks.actions]]
phase = "work"
tool = "write_file"
path = "one.txt"
content = "1"

[[tasks]]
subject = "*"
[[tasks.actions]]
phase = "work"
tool = "list_dir"
"#;
    let _alice = lead.teammate("alice", script);

    // Both tasks get done in order; the plans name their tasks.
    let mut plans: HashMap<String, String> = HashMap::new();
    let mut completed: Vec<String> = Vec::new();
    events
        .find("both tasks to be completed", |kind| {
            match kind {
                pb::event::Kind::Request(r) if r.r#type == pb::RequestType::PlanApproval as i32 => {
                    let payload: serde_json::Value = serde_json::from_str(&r.payload_json).unwrap();
                    plans.insert(
                        payload["plan"]["task_id"].as_str().unwrap().to_owned(),
                        payload["plan"]["summary"].as_str().unwrap().to_owned(),
                    );
                }
                pb::event::Kind::Task(t) if t.status == pb::TaskStatus::Completed as i32 => {
                    assert_eq!(t.owner, "alice");
                    completed.push(t.task_id.clone());
                }
                _ => {}
            }
            (completed.len() == 2).then_some(())
        })
        .await;
    assert_eq!(
        completed,
        vec![first.task_id.clone(), second.task_id.clone()]
    );
    assert_eq!(plans[&first.task_id], "write one.txt");
    assert_eq!(
        plans[&second.task_id], "second",
        "a plan made from the task"
    );
    assert_eq!(
        std::fs::read_to_string(lead.workspace("alice").join("one.txt")).unwrap(),
        "1"
    );
    let listed = tasks(&mut operator).await;
    assert_eq!(listed[0].summary, "wrote one.txt");
    assert_eq!(listed[1].summary, "done: second");

    // Nothing left: alice idles in plan mode (the last grant ended with its task).
    let idle = events.member_in("alice", pb::MemberStatus::Idle).await;
    assert_eq!(idle.mode, pb::PermissionMode::Plan as i32, "{idle:?}");

    // New work wakes her.
    let third = create(&mut operator, "third", &[]).await;
    events
        .find("the new task to be completed", |kind| match kind {
            pb::event::Kind::Task(t)
                if t.task_id == third.task_id && t.status == pb::TaskStatus::Completed as i32 =>
            {
                Some(())
            }
            _ => None,
        })
        .await;
}

/// With `claim = "next"`, top-level `[[plans]]` and `[[actions]]` are the
/// section for every task without one of its own (as `subject = "*"`).
#[tokio::test]
async fn a_claim_next_script_with_top_level_plans_works_every_task_with_them() {
    let lead = Lead::start(&["--approval", "auto"]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let task = create(&mut operator, "anything", &[]).await;
    let script = r#"
claim = "next"

[[plans]]
summary = "the top-level plan"
files = ["top.txt"]

[[actions]]
phase = "work"
tool = "write_file"
path = "top.txt"
content = "top"
"#;
    let _dan = lead.teammate("dan", script);
    let mut summary = None;
    events
        .find("the task to be completed", |kind| match kind {
            pb::event::Kind::Request(r) if r.r#type == pb::RequestType::PlanApproval as i32 => {
                let payload: serde_json::Value = serde_json::from_str(&r.payload_json).unwrap();
                assert_eq!(payload["plan"]["task_id"], task.task_id.as_str());
                summary = payload["plan"]["summary"].as_str().map(str::to_owned);
                None
            }
            pb::event::Kind::Task(t)
                if t.task_id == task.task_id && t.status == pb::TaskStatus::Completed as i32 =>
            {
                Some(())
            }
            _ => None,
        })
        .await;
    assert_eq!(summary.as_deref(), Some("the top-level plan"));
    assert_eq!(
        std::fs::read_to_string(lead.workspace("dan").join("top.txt")).unwrap(),
        "top"
    );
}

/// A completion that unblocks many tasks costs one envelope per idle member
/// (naming the oldest), not one per task per member; a member holding a task
/// of its own hears nothing.
#[tokio::test]
async fn unblocking_many_tasks_tells_each_idle_member_once() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let blocker = create(&mut operator, "blocker", &[]).await;
    let mut waiting = Vec::new();
    for i in 0..50 {
        waiting.push(create(&mut operator, &format!("waiting {i}"), &[&blocker.task_id]).await);
    }
    let busy_task = create(&mut operator, "busy", &[]).await;
    let mut owner = lead.join("owner").await;
    owner.api.claim_task(claim(&blocker.task_id)).await.unwrap();
    let mut idle = Vec::new();
    // dan first: he claims the one claimable task before the others report
    // idle, so nothing is claimable when they do.
    for name in ["dan", "ann", "ben", "cat"] {
        let mut member = lead.join(name).await;
        if name == "dan" {
            member
                .api
                .claim_task(claim(&busy_task.task_id))
                .await
                .unwrap();
        }
        member
            .api
            .report_idle(pb::IdleNotification::default())
            .await
            .unwrap();
        member.open_inbox(0).await;
        idle.push(member);
    }
    owner
        .api
        .complete_task(pb::CompleteTaskRequest {
            task_id: blocker.task_id.clone(),
            summary: "unblocks fifty".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    // A text sent after the completion marks the end of what it caused.
    for member in &idle {
        owner.send(&member.name, "after", "").await.unwrap();
    }
    for member in &mut idle {
        let mut heard = Vec::new();
        loop {
            match member.next().await.body {
                Some(Body::TaskClaimable(t)) => heard.push(t.task_id),
                Some(Body::Text(t)) if t.content == "after" => break,
                _ => {}
            }
        }
        let expected = if member.name == "dan" {
            vec![]
        } else {
            vec![waiting[0].task_id.clone()]
        };
        assert_eq!(heard, expected, "{}", member.name);
    }
}

/// `ListTasks` pages (oldest first, 1,000 at most by default, a token that
/// only this list accepts); `lead tasks` reads every page; a status filter
/// pages too.
#[tokio::test]
async fn task_lists_page_and_the_cli_reads_every_page() {
    let lead = Lead::start(&["--store", "memory"]).await;
    let mut operator = lead.operator().await;
    let mut ids = Vec::new();
    for i in 0..1_205 {
        ids.push(
            create(&mut operator, &format!("task {i}"), &[])
                .await
                .task_id,
        );
    }
    let mut alice = lead.join("alice").await;
    alice.api.claim_task(claim(&ids[1_100])).await.unwrap();

    let first = operator
        .list_tasks(pb::ListTasksRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.tasks.len(), 1_000);
    assert_eq!(first.tasks[0].task_id, ids[0]);
    assert!(!first.next_page_token.is_empty());
    let rest = operator
        .list_tasks(pb::ListTasksRequest {
            page_token: first.next_page_token.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(rest.tasks.len(), 205);
    assert_eq!(rest.tasks[0].task_id, ids[1_000]);
    assert!(rest.next_page_token.is_empty());

    let claimed = alice
        .api
        .list_tasks(pb::ListTasksRequest {
            status: pb::TaskStatus::Claimed as i32,
            page_size: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(claimed.tasks.len(), 1);
    assert_eq!(claimed.tasks[0].task_id, ids[1_100]);
    assert!(claimed.next_page_token.is_empty(), "{claimed:?}");

    let bad = operator
        .list_tasks(pb::ListTasksRequest {
            page_token: "m3".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().contains("page_token"), "{bad:?}");

    let (ok, json, err) = lead.cli(&["tasks", "--json"]).await;
    assert!(ok, "{err}");
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json.as_array().map(Vec::len), Some(1_205));
}

/// Submits a plan of `files` for no task; its request id.
async fn submit(member: &mut mesh_tests::Member, files: &[&str]) -> String {
    member
        .api
        .submit_plan(plan_for("", files, ""))
        .await
        .unwrap()
        .into_inner()
        .request_id
}

/// The members a new plan of `files` overlaps, with the files, as the lead
/// records them in the plan's payload.
async fn overlaps_of(
    operator: &mut Operator,
    member: &mut mesh_tests::Member,
    files: &[&str],
) -> serde_json::Value {
    let request_id = submit(member, files).await;
    let state = operator
        .get_request(pb::GetRequestRequest { request_id })
        .await
        .unwrap()
        .into_inner();
    let payload: serde_json::Value = serde_json::from_str(&state.payload_json).unwrap();
    payload["overlaps"].clone()
}

/// A restarted lead holds what it held: a member that left and joined again
/// does not get back what its earlier self held, and of two plans approved
/// out of the order they were sent in, the one approved last is the hold.
/// (Holds used to be worked out from the approved plans at start, which got
/// both wrong.)
#[tokio::test]
async fn a_restarted_lead_holds_what_it_held_on_sqlite() {
    a_restarted_lead_holds_what_it_held().await;
}

#[tokio::test]
async fn a_restarted_lead_holds_what_it_held_on_postgres() {
    mesh_tests::on_postgres(a_restarted_lead_holds_what_it_held()).await;
}

async fn a_restarted_lead_holds_what_it_held() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut alice = lead.join("alice").await;
    let first = submit(&mut alice, &["src/auth.rs"]).await;
    approve(&mut operator, &first).await;
    alice
        .api
        .leave(pb::LeaveRequest {
            reason: "done".into(),
        })
        .await
        .unwrap();
    let _alice = lead.join("alice").await;

    let mut bob = lead.join("bob").await;
    let older = submit(&mut bob, &["src/x.rs"]).await;
    let newer = submit(&mut bob, &["src/y.rs"]).await;
    approve(&mut operator, &newer).await;
    approve(&mut operator, &older).await;

    let mut carol = lead.join("carol").await;
    let files = ["src/auth.rs", "src/x.rs", "src/y.rs"];
    let expected = serde_json::json!([{"member": "bob", "files": ["src/x.rs"]}]);
    assert_eq!(
        overlaps_of(&mut operator, &mut carol, &files).await,
        expected,
        "before the restart"
    );

    let lead = lead.crash_and_restart(&[]).await;
    let mut operator = lead.operator().await;
    let mut dave = lead.join("dave").await;
    assert_eq!(
        overlaps_of(&mut operator, &mut dave, &files).await,
        expected,
        "after the restart"
    );
}
