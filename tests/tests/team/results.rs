//! The result review over the wire (`lead serve --repo`): a teammate's work,
//! submitted as a diff against its base, reviewed as plans are, and merged
//! into the team branch as one commit; rejected by policy for a path outside
//! its grant, whatever wrote it; rejected with the conflicting paths, then
//! landed after a rebase; and a lead killed with -9 in the middle of a merge
//! leaves the branch before or after it, the request agreeing. The teammates
//! here are raw gRPC clients that work in their own git worktrees, as a
//! teammate in another language on another machine would.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use mesh_tests::{
    git::{git, team_repo},
    is, within, Events, Lead, Member, Operator,
};
use shared::pb;

/// `name`'s own worktree of the team repository, from `main`, as a teammate
/// that manages its own checkout makes one; with its base.
fn worktree(repo: &Path, name: &str) -> (PathBuf, String) {
    let dir = repo
        .parent()
        .expect("parent")
        .join(format!("wt-{name}-{}", uuid::Uuid::new_v4()));
    let dir_s = dir.to_string_lossy().into_owned();
    git(
        repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            &format!("own/{name}"),
            &dir_s,
            "main",
        ],
    );
    let base = git(&dir, &["rev-parse", "HEAD"]);
    (dir, base)
}

/// The worktree's change against `base`, new files too, binary-safe.
fn diff_of(worktree: &Path, base: &str) -> String {
    git(worktree, &["add", "-A"]);
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(worktree)
        .args(["diff", "--cached", "--binary", base])
        .output()
        .expect("git diff");
    String::from_utf8(out.stdout).expect("utf-8 diff")
}

fn serve_args(repo: &Path, more: &[&str]) -> Vec<String> {
    let mut args = vec![
        "--repo".to_owned(),
        repo.to_string_lossy().into_owned(),
        "--branch".to_owned(),
        "main".to_owned(),
    ];
    args.extend(more.iter().map(|s| s.to_string()));
    args
}

async fn start(repo: &Path, more: &[&str]) -> Lead {
    let args = serve_args(repo, more);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Lead::start(&args).await
}

/// A task, claimed by `member`; its id.
async fn claimed_task(operator: &mut Operator, member: &mut Member, subject: &str) -> String {
    let task = operator
        .create_task(pb::CreateTaskRequest {
            subject: subject.into(),
            ..Default::default()
        })
        .await
        .expect("create task")
        .into_inner();
    member
        .api
        .claim_task(pb::ClaimTaskRequest {
            task_id: task.task_id.clone(),
        })
        .await
        .expect("claim");
    task.task_id
}

async fn submit(
    member: &mut Member,
    task_id: &str,
    base: &str,
    diff: String,
    summary: &str,
    supersedes: &str,
) -> Result<String, tonic::Status> {
    member
        .api
        .submit_result(pb::ResultRequest {
            task_id: task_id.into(),
            base: base.into(),
            diff,
            summary: summary.into(),
            supersedes: supersedes.into(),
            ..Default::default()
        })
        .await
        .map(|r| r.into_inner().request_id)
}

/// The answer to result `id` in `member`'s inbox.
async fn answer(member: &mut Member, id: &str) -> pb::ResultResponse {
    let envelope = member
        .next_matching(|e| {
            matches!(&e.body, Some(pb::envelope::Body::ResultResponse(r)) if r.request_id == id)
        })
        .await;
    match envelope.body {
        Some(pb::envelope::Body::ResultResponse(r)) => r,
        _ => unreachable!(),
    }
}

async fn plan_approved(
    operator: &mut Operator,
    member: &mut Member,
    task_id: &str,
    files: &[&str],
) -> String {
    let id = member
        .api
        .submit_plan(pb::PlanApprovalRequest {
            plan: Some(pb::Plan {
                summary: "the plan".into(),
                files: files.iter().map(|f| f.to_string()).collect(),
                task_id: task_id.into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("submit plan")
        .into_inner()
        .request_id;
    mesh_tests::approve(operator, &id).await;
    id
}

#[tokio::test]
async fn a_result_is_reviewed_then_merged_as_one_commit_with_its_author_and_trailers() {
    let repo = team_repo();
    let lead = start(repo.path(), &[]).await;
    let mut operator = lead.operator().await;
    let mut alice = lead.join("alice").await;
    let task = claimed_task(&mut operator, &mut alice, "add two").await;
    let plan = plan_approved(&mut operator, &mut alice, &task, &["src/**"]).await;
    let (wt, base) = worktree(repo.path(), "alice");

    // With a team repository, a task completes when its result lands.
    let err = alice
        .api
        .complete_task(pb::CompleteTaskRequest {
            task_id: task.clone(),
            summary: "done".into(),
            ..Default::default()
        })
        .await
        .expect_err("no CompleteTask with --repo");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert!(err.message().contains("SubmitResult"), "{}", err.message());

    // Bad input names its field and changes nothing.
    let err = submit(&mut alice, &task, "not-hex", "x".into(), "s", "")
        .await
        .expect_err("bad base");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().starts_with("base"), "{}", err.message());
    let err = submit(
        &mut alice,
        &task,
        &base,
        "diff --git a/x b/x\nnonsense\n".into(),
        "s",
        "",
    )
    .await
    .expect_err("a diff that does not apply");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().starts_with("diff"), "{}", err.message());

    std::fs::write(
        wt.join("src/lib.rs"),
        "pub fn one() -> u32 { 1 }\npub fn two() -> u32 { 2 }\n",
    )
    .expect("write");
    std::fs::write(wt.join("src/logo.bin"), [0u8, 159, 146, 150, 255]).expect("write binary");
    let diff = diff_of(&wt, &base);
    let id = submit(&mut alice, &task, &base, diff.clone(), "Add two()", "")
        .await
        .expect("submit result");
    // A retry with the same id is the same request, not a new one.
    let retried = alice
        .api
        .submit_result(pb::ResultRequest {
            request_id: id.clone(),
            task_id: task.clone(),
            base: base.clone(),
            diff: diff.clone(),
            summary: "Add two()".into(),
            ..Default::default()
        })
        .await
        .expect("a retry")
        .into_inner();
    assert_eq!(retried.request_id, id);
    let reused = alice
        .api
        .submit_result(pb::ResultRequest {
            request_id: id.clone(),
            task_id: task.clone(),
            base: base.clone(),
            diff,
            summary: "something else".into(),
            ..Default::default()
        })
        .await
        .expect_err("the id reused for another result");
    assert_eq!(reused.code(), tonic::Code::AlreadyExists);

    // It waits for a person, with what it changes in the list.
    let pending = operator
        .get_request(pb::GetRequestRequest {
            request_id: id.clone(),
        })
        .await
        .expect("get")
        .into_inner();
    assert_eq!(pending.r#type, pb::RequestType::Result as i32);
    assert!(is(pending.status, pb::RequestStatus::Pending));
    let payload: serde_json::Value = serde_json::from_str(&pending.payload_json).expect("json");
    let files: Vec<&str> = payload["result"]["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f["path"].as_str().expect("path"))
        .collect();
    assert_eq!(files, ["src/lib.rs", "src/logo.bin"]);
    assert_eq!(payload["plan_id"], plan.as_str());
    assert_eq!(
        git(repo.path(), &["rev-parse", "main"]),
        base,
        "nothing lands unreviewed"
    );

    let (ok, out, err) = lead.cli(&["diff", &id]).await;
    assert!(ok, "{err}");
    assert!(
        out.contains("+pub fn two()") && out.contains("GIT binary patch"),
        "{out}"
    );

    operator
        .review_result(pb::ResultReview {
            request_id: id.clone(),
            approve: true,
            feedback: String::new(),
        })
        .await
        .expect("approve");
    let answer = answer(&mut alice, &id).await;
    assert!(answer.approve, "{answer:?}");
    let head = git(repo.path(), &["rev-parse", "main"]);
    assert_eq!(answer.commit, head);
    assert_eq!(
        git(repo.path(), &["rev-parse", "main~1"]),
        base,
        "one commit on the base"
    );
    assert_eq!(
        git(repo.path(), &["log", "-1", "--format=%an", "main"]),
        "alice"
    );
    let message = git(repo.path(), &["log", "-1", "--format=%B", "main"]);
    assert!(message.starts_with("Add two()"), "{message}");
    for trailer in [
        format!("Mesh-Task: {task}"),
        format!("Mesh-Plan: {plan}"),
        format!("Mesh-Result: {id}"),
    ] {
        assert!(message.contains(&trailer), "{trailer} in {message}");
    }
    assert!(git(repo.path(), &["show", "main:src/lib.rs"]).contains("two()"));
    assert_eq!(
        git(repo.path(), &["cat-file", "-s", "main:src/logo.bin"]),
        "5",
        "the binary file landed byte for byte"
    );
    let state = operator
        .get_request(pb::GetRequestRequest {
            request_id: id.clone(),
        })
        .await
        .expect("get")
        .into_inner();
    assert!(is(state.status, pb::RequestStatus::Approved));
    let tasks = operator
        .list_tasks(pb::ListTasksRequest::default())
        .await
        .expect("tasks")
        .into_inner()
        .tasks;
    assert_eq!(tasks[0].status, pb::TaskStatus::Completed as i32);
    assert_eq!(tasks[0].summary, "Add two()");
}

const POLICY: &str = "max_changed_lines = 50\n";

#[tokio::test]
async fn a_result_outside_the_grant_is_rejected_by_policy_whatever_wrote_it() {
    let repo = team_repo();
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, POLICY).expect("write policy");
    let approval = format!("policy:{}", policy.display());
    let lead = start(repo.path(), &["--approval", &approval]).await;
    let mut operator = lead.operator().await;
    let mut alice = lead.join("alice").await;
    let task = claimed_task(&mut operator, &mut alice, "docs").await;
    // The policy grants the plan's files: docs/ only.
    let plan = alice
        .api
        .submit_plan(pb::PlanApprovalRequest {
            plan: Some(pb::Plan {
                summary: "write the docs".into(),
                files: vec!["docs/**".into()],
                task_id: task.clone(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("plan")
        .into_inner()
        .request_id;
    let decided = alice
        .next_matching(|e| matches!(&e.body, Some(pb::envelope::Body::PlanApprovalResponse(r)) if r.request_id == plan))
        .await;
    assert!(matches!(decided.body, Some(pb::envelope::Body::PlanApprovalResponse(r)) if r.approve));

    // Whatever tool wrote it (an MCP seat's own editor, a shell), a change
    // to src/ does not land.
    let (wt, base) = worktree(repo.path(), "alice");
    std::fs::create_dir_all(wt.join("docs")).expect("mkdir");
    std::fs::write(wt.join("docs/guide.md"), "# guide\n").expect("write");
    std::fs::write(wt.join("src/lib.rs"), "pub fn one() -> u32 { 111 }\n").expect("write");
    let id = submit(
        &mut alice,
        &task,
        &base,
        diff_of(&wt, &base),
        "docs, and a sneaky edit",
        "",
    )
    .await
    .expect("submit");
    let rejected = answer(&mut alice, &id).await;
    assert!(!rejected.approve);
    assert!(
        rejected.feedback.contains("grant") && rejected.feedback.contains("src/lib.rs"),
        "{}",
        rejected.feedback
    );
    assert_eq!(
        git(repo.path(), &["rev-parse", "main"]),
        base,
        "nothing landed"
    );

    // The revision inside the grant lands on the policy's word.
    git(&wt, &["checkout", "-q", "HEAD", "--", "src/lib.rs"]);
    let revised = submit(
        &mut alice,
        &task,
        &base,
        diff_of(&wt, &base),
        "Write the guide",
        &id,
    )
    .await
    .expect("resubmit");
    let landed = answer(&mut alice, &revised).await;
    assert!(landed.approve, "{landed:?}");
    assert_eq!(git(repo.path(), &["show", "main:docs/guide.md"]), "# guide");
    assert_eq!(
        git(repo.path(), &["show", "main:src/lib.rs"]),
        "pub fn one() -> u32 { 1 }"
    );
}

#[tokio::test]
async fn a_conflicting_result_is_rejected_with_its_paths_then_lands_after_a_rebase() {
    let repo = team_repo();
    let lead = start(repo.path(), &["--approval", "auto"]).await;
    let mut operator = lead.operator().await;
    let mut alice = lead.join("alice").await;
    let mut bob = lead.join("bob").await;
    let alices = claimed_task(&mut operator, &mut alice, "title").await;
    let bobs = claimed_task(&mut operator, &mut bob, "title too").await;
    let (wt_a, base) = worktree(repo.path(), "alice");
    let (wt_b, _) = worktree(repo.path(), "bob");
    std::fs::write(wt_a.join("README.md"), "# alice's team\n\nline two\n").expect("write");
    std::fs::write(wt_b.join("README.md"), "# bob's team\n\nline two\n").expect("write");
    std::fs::write(wt_b.join("NOTES.md"), "bob\n").expect("write");

    let a = submit(
        &mut alice,
        &alices,
        &base,
        diff_of(&wt_a, &base),
        "Alice's title",
        "",
    )
    .await
    .expect("alice submits");
    let landed = answer(&mut alice, &a).await;
    assert!(landed.approve);

    let b = submit(
        &mut bob,
        &bobs,
        &base,
        diff_of(&wt_b, &base),
        "Bob's title",
        "",
    )
    .await
    .expect("bob submits");
    let conflict = answer(&mut bob, &b).await;
    assert!(!conflict.approve);
    assert_eq!(conflict.conflicts, ["README.md"]);
    assert_eq!(conflict.branch_head, landed.commit);
    assert!(conflict.feedback.contains("README.md") && conflict.feedback.contains("rebase"));
    assert_eq!(
        git(repo.path(), &["rev-parse", "main"]),
        landed.commit,
        "nothing of bob's landed"
    );

    // Bob rebases his worktree onto the new head, keeps both titles, and
    // submits again.
    git(&wt_b, &["stash", "-q", "-u"]);
    git(&wt_b, &["reset", "-q", "--hard", &conflict.branch_head]);
    git(&wt_b, &["stash", "drop", "-q"]);
    std::fs::write(
        wt_b.join("README.md"),
        "# alice's and bob's team\n\nline two\n",
    )
    .expect("write");
    std::fs::write(wt_b.join("NOTES.md"), "bob\n").expect("write");
    let new_base = conflict.branch_head.clone();
    let b2 = submit(
        &mut bob,
        &bobs,
        &new_base,
        diff_of(&wt_b, &new_base),
        "Bob's title",
        &b,
    )
    .await
    .expect("bob resubmits");
    let landed_b = answer(&mut bob, &b2).await;
    assert!(landed_b.approve, "{landed_b:?}");
    assert_eq!(
        git(repo.path(), &["log", "--format=%an", "main"])
            .lines()
            .collect::<Vec<_>>(),
        ["bob", "alice", "test"]
    );
    assert_eq!(
        git(repo.path(), &["show", "main:README.md"]),
        "# alice's and bob's team\n\nline two"
    );
}

/// Kills the lead with -9 while a landing stands at `point`, restarts it,
/// and checks that the branch and the request agree throughout.
async fn killed_during_a_merge(point: &str) {
    let repo = team_repo();
    let marker_dir = tempfile::tempdir().expect("tempdir");
    let marker = marker_dir.path().join("reached");
    let fault = format!("{point}:{}", marker.display());
    let args = serve_args(repo.path(), &["--approval", "auto"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let lead = Lead::start_with_env(&args, &[("MESH_FAULT_LAND", &fault)]).await;
    let mut operator = lead.operator().await;
    let mut alice = lead.join("alice").await;
    let task = claimed_task(&mut operator, &mut alice, "feature").await;
    let (wt, base) = worktree(repo.path(), "alice");
    std::fs::write(wt.join("src/feature.rs"), "pub fn feature() {}\n").expect("write");
    // The answer comes once the approval is durable.
    let id = submit(&mut alice, &task, &base, diff_of(&wt, &base), "Feature", "")
        .await
        .expect("submit");
    within("the landing to reach the fault point", async {
        while !marker.exists() {
            tokio::task::yield_now().await;
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    let merge = std::fs::read_to_string(&marker).expect("marker");
    let state = operator
        .get_request(pb::GetRequestRequest {
            request_id: id.clone(),
        })
        .await
        .expect("get")
        .into_inner();
    assert!(
        is(state.status, pb::RequestStatus::Pending),
        "undecided while it lands"
    );
    let head = git(repo.path(), &["rev-parse", "main"]);
    match point {
        "before-ref" => assert_eq!(head, base, "the branch is still before"),
        _ => assert_eq!(head, merge, "the branch is after"),
    }
    drop(operator);
    drop(alice);

    let lead = lead.crash_and_restart(&args).await;
    let head = git(repo.path(), &["rev-parse", "main"]);
    assert!(
        head == base || head == merge,
        "the branch is before or after, never between"
    );
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let state = operator
        .get_request(pb::GetRequestRequest {
            request_id: id.clone(),
        })
        .await
        .expect("get")
        .into_inner();
    let state = if is(state.status, pb::RequestStatus::Pending) {
        events
            .request("the restarted lead to finish the landing", |r| {
                r.request_id == id && !is(r.status, pb::RequestStatus::Pending)
            })
            .await
    } else {
        state
    };
    assert!(is(state.status, pb::RequestStatus::Approved), "{state:?}");
    let head = git(repo.path(), &["rev-parse", "main"]);
    assert_eq!(git(repo.path(), &["rev-parse", "main~1"]), base);
    let landed = git(
        repo.path(),
        &[
            "log",
            "--format=%H",
            &format!("--grep=Mesh-Result: {id}"),
            "main",
        ],
    );
    assert_eq!(landed, head, "landed once: {landed}");
    assert!(state.feedback.contains(&head), "{}", state.feedback);
}

#[tokio::test]
async fn a_lead_killed_before_the_branch_moves_lands_the_result_when_it_restarts() {
    killed_during_a_merge("before-ref").await;
}

#[tokio::test]
async fn a_lead_killed_after_the_branch_moved_finds_the_merge_when_it_restarts() {
    killed_during_a_merge("after-ref").await;
}

#[tokio::test]
async fn on_postgres_a_lead_killed_during_a_merge_lands_the_result_or_finds_it_landed() {
    mesh_tests::on_postgres(killed_during_a_merge("before-ref")).await;
    mesh_tests::on_postgres(killed_during_a_merge("after-ref")).await;
}

/// A teammate the lead spawns works in its own worktree of the team's
/// repository, on its own branch: its finished task is a result, which
/// lands; its worktree follows the team branch; when it has gone, the
/// worktree and its branches go too, and `lead gc` finds nothing left.
#[tokio::test]
async fn a_spawned_teammate_works_in_its_own_worktree_and_its_result_lands() {
    let repo = team_repo();
    let lead = start(repo.path(), &["--approval", "auto"]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let script = r#"
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
"#;
    let script = lead.script("alice", script);
    let task = operator
        .create_task(pb::CreateTaskRequest {
            subject: "one".into(),
            ..Default::default()
        })
        .await
        .expect("task")
        .into_inner();
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
    assert_eq!(git(repo.path(), &["show", "main:one.txt"]), "1");
    assert_eq!(
        git(repo.path(), &["log", "-1", "--format=%an", "main"]),
        "alice"
    );
    let worktree = lead.state_dir().join("worktrees/alice");
    assert_eq!(
        git(&worktree, &["rev-parse", "--abbrev-ref", "HEAD"]),
        format!("mesh/alice/{}", task.task_id),
        "its own branch for the task"
    );
    // The shared checkout never saw the file: nothing but the landing wrote
    // outside alice's worktree.
    assert!(!repo.path().join("one.txt").exists());
    let (ok, out, _) = lead.cli(&["shutdown", "alice", "--reason", "done"]).await;
    assert!(ok, "{out}");
    events
        .find("alice's process to end", |kind| match kind {
            pb::event::Kind::ChildExited(c) if c.name == "alice" => Some(()),
            _ => None,
        })
        .await;
    // The lead removes the worktree, then its branches, off its hub.
    within("the worktree and its branches to be removed", async {
        while worktree.exists() || !git(repo.path(), &["branch", "--list", "mesh/*"]).is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    let gc = std::process::Command::new(mesh_tests::bin("lead"))
        .args([
            "gc",
            "--repo",
            repo.path().to_str().unwrap(),
            "--branch",
            "main",
        ])
        .output()
        .expect("lead gc");
    assert!(
        gc.status.success(),
        "{}",
        String::from_utf8_lossy(&gc.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&gc.stdout).trim(),
        "no worktrees of the team's"
    );
}

/// A task reviewed by its result alone (`--review result`): the teammate
/// writes at once in its own worktree, no plan round, and its result waits
/// for a person (`lead approve`, which answers results too), then lands.
#[tokio::test]
async fn a_result_only_task_lands_without_a_plan_round() {
    let repo = team_repo();
    let lead = start(repo.path(), &[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let script = r##"
claim = "next"

[[tasks]]
subject = "docs"
summary = "Write the guide"
[[tasks.plans]]
summary = "never submitted: the task is reviewed by its result"
files = ["docs/guide.md"]
[[tasks.actions]]
phase = "work"
tool = "write_file"
path = "docs/guide.md"
content = "# guide"
"##;
    let script = lead.script("carol", script);
    let (ok, out, err) = lead
        .cli(&[
            "task", "add", "docs", "--review", "result", "--files", "docs/**",
        ])
        .await;
    assert!(ok, "{err}");
    assert!(!out.trim().is_empty());
    let (ok, _, err) = lead
        .cli(&[
            "spawn",
            "carol",
            "--role",
            "writer",
            "--script",
            script.to_str().unwrap(),
        ])
        .await;
    assert!(ok, "{err}");
    let pending = events
        .request("carol's result", |r| {
            r.r#type == pb::RequestType::Result as i32 && is(r.status, pb::RequestStatus::Pending)
        })
        .await;
    let member = mesh_tests::member_named(&mut operator, "carol").await;
    assert_eq!(
        member.mode,
        pb::PermissionMode::AcceptEdits as i32,
        "writing without a plan"
    );
    let (ok, out, _) = lead.cli(&["requests", "--pending"]).await;
    assert!(ok);
    assert!(
        out.contains("result") && out.contains("Write the guide: 1 file +1 -0"),
        "lead requests shows the result with its diff stat: {out}"
    );
    let (ok, out, err) = lead.cli(&["approve", &pending.request_id]).await;
    assert!(ok, "{err}");
    assert!(out.contains("approved result"), "{out}");
    let landed = events
        .request("carol's result to land", |r| {
            r.request_id == pending.request_id && !is(r.status, pb::RequestStatus::Pending)
        })
        .await;
    assert!(is(landed.status, pb::RequestStatus::Approved), "{landed:?}");
    assert_eq!(git(repo.path(), &["show", "main:docs/guide.md"]), "# guide");
    let plans = operator
        .list_requests(pb::ListRequestsRequest {
            r#type: pb::RequestType::PlanApproval as i32,
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .requests;
    assert!(plans.is_empty(), "no plan round: {plans:?}");
}

/// A task reviewed by its plan alone (`--review plan`): once the plan is
/// approved, its result lands without a reviewer if it stays inside the
/// plan's grant, and is rejected if it does not; without `--repo`, a task
/// cannot ask for a result review.
#[tokio::test]
async fn a_plan_reviewed_task_lands_its_result_inside_the_grant_without_a_reviewer() {
    let repo = team_repo();
    let lead = start(repo.path(), &["--review", "plan"]).await;
    let mut operator = lead.operator().await;
    let mut alice = lead.join("alice").await;
    let task = claimed_task(&mut operator, &mut alice, "docs").await;
    plan_approved(&mut operator, &mut alice, &task, &["docs/**"]).await;
    let (wt, base) = worktree(repo.path(), "alice");
    std::fs::create_dir_all(wt.join("docs")).expect("mkdir");
    std::fs::write(wt.join("docs/a.md"), "a\n").expect("write");
    std::fs::write(wt.join("src/lib.rs"), "// outside\n").expect("write");
    let outside = submit(&mut alice, &task, &base, diff_of(&wt, &base), "docs", "")
        .await
        .expect("submit");
    let rejected = answer(&mut alice, &outside).await;
    assert!(
        !rejected.approve && rejected.feedback.contains("src/lib.rs"),
        "{rejected:?}"
    );
    git(&wt, &["checkout", "-q", "HEAD", "--", "src/lib.rs"]);
    let inside = submit(
        &mut alice,
        &task,
        &base,
        diff_of(&wt, &base),
        "docs",
        &outside,
    )
    .await
    .expect("resubmit");
    let landed = answer(&mut alice, &inside).await;
    assert!(landed.approve, "no person needed: {landed:?}");

    let plain = Lead::start(&[]).await;
    let mut operator = plain.operator().await;
    let err = operator
        .create_task(pb::CreateTaskRequest {
            subject: "x".into(),
            review: pb::TaskReview::Result as i32,
            ..Default::default()
        })
        .await
        .expect_err("no result review without --repo");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert!(err.message().contains("--repo"), "{}", err.message());
}

/// A chain with `result_stages`: a program stage runs the repository's own
/// check in a scratch worktree of the result's commit; passing lands the
/// result, failing rejects it with the program's output; no scratch
/// worktree is left.
#[tokio::test]
async fn a_program_stage_runs_the_tests_on_the_result_in_a_scratch_worktree() {
    let repo = team_repo();
    std::fs::write(
        repo.path().join("check.sh"),
        "grep -q 'fn two' src/lib.rs && echo 'checked: two() is there' || { echo 'src/lib.rs has no two()'; exit 1; }\n",
    )
    .expect("write");
    git(repo.path(), &["checkout", "-q", "main"]);
    git(repo.path(), &["add", "check.sh"]);
    git(repo.path(), &["commit", "-q", "-m", "the check"]);
    git(repo.path(), &["checkout", "-q", "--detach"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let chain = dir.path().join("chain.toml");
    std::fs::write(
        &chain,
        "[[stages]]\nkind = \"human\"\n\n[[result_stages]]\nkind = \"program\"\ncommand = [\"sh\", \"check.sh\"]\n",
    )
    .expect("write chain");
    let approval = format!("chain:{}", chain.display());
    let lead = start(
        repo.path(),
        &["--approval", &approval, "--review", "result"],
    )
    .await;
    let mut operator = lead.operator().await;
    let mut alice = lead.join("alice").await;
    let task = claimed_task(&mut operator, &mut alice, "add two").await;
    let (wt, base) = worktree(repo.path(), "alice");

    std::fs::write(
        wt.join("src/lib.rs"),
        "pub fn one() -> u32 { 1 }\npub fn too() {}\n",
    )
    .expect("write");
    let failing = submit(
        &mut alice,
        &task,
        &base,
        diff_of(&wt, &base),
        "Add two()",
        "",
    )
    .await
    .expect("submit");
    let rejected = answer(&mut alice, &failing).await;
    assert!(!rejected.approve);
    assert!(
        rejected.feedback.contains("src/lib.rs has no two()")
            && rejected.feedback.contains("program sh"),
        "{}",
        rejected.feedback
    );
    assert_eq!(git(repo.path(), &["rev-parse", "main"]), base);

    std::fs::write(
        wt.join("src/lib.rs"),
        "pub fn one() -> u32 { 1 }\npub fn two() -> u32 { 2 }\n",
    )
    .expect("write");
    let passing = submit(
        &mut alice,
        &task,
        &base,
        diff_of(&wt, &base),
        "Add two()",
        &failing,
    )
    .await
    .expect("resubmit");
    let landed = answer(&mut alice, &passing).await;
    assert!(landed.approve, "{landed:?}");
    let state = operator
        .get_request(pb::GetRequestRequest {
            request_id: passing.clone(),
        })
        .await
        .expect("get")
        .into_inner();
    assert!(
        state
            .reviews
            .iter()
            .any(|r| r.reviewer == "program sh" && r.words.contains("checked: two() is there")),
        "{:?}",
        state.reviews
    );
    let worktrees = git(repo.path(), &["worktree", "list", "--porcelain"]);
    assert!(!worktrees.contains("mesh-scratch-"), "{worktrees}");
}

/// Amendments: a teammate whose plan is approved asks to add files; the
/// policy approves a small one on its own (the grant and the hold widen),
/// and leaves a larger one, or one touching another teammate's files, to a
/// person, who approves it with `lead approve`.
#[tokio::test]
async fn an_amendment_is_approved_by_policy_or_left_for_a_person() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "amend_max_files = 1\ndeny_write = [\"secrets/**\"]\n",
    )
    .expect("write");
    let approval = format!("policy:{}", policy.display());
    let lead = Lead::start(&["--approval", &approval]).await;
    let mut operator = lead.operator().await;
    let mut alice = lead.join("alice").await;
    let mut bob = lead.join("bob").await;
    for (member, file) in [(&mut alice, "src/a.rs"), (&mut bob, "src/bob.rs")] {
        let id = member.submit("", "the plan", &[file]).await.expect("plan");
        let decided = member
            .next_matching(|e| matches!(&e.body, Some(pb::envelope::Body::PlanApprovalResponse(r)) if r.request_id == id))
            .await;
        assert!(
            matches!(decided.body, Some(pb::envelope::Body::PlanApprovalResponse(r)) if r.approve)
        );
    }
    let amend = |files: &[&str]| pb::AmendmentRequest {
        files: files.iter().map(|f| f.to_string()).collect(),
        why: "the fix needs its helper too".into(),
        ..Default::default()
    };
    let amendment_answer = |id: String| move |e: &pb::Envelope| matches!(&e.body, Some(pb::envelope::Body::AmendmentResponse(r)) if r.request_id == id);

    // Small: the policy approves, the grant and the hold widen.
    let small = alice
        .api
        .request_amendment(amend(&["src/b.rs"]))
        .await
        .expect("amend")
        .into_inner()
        .request_id;
    let answer = alice.next_matching(amendment_answer(small.clone())).await;
    let Some(pb::envelope::Body::AmendmentResponse(answer)) = answer.body else {
        unreachable!()
    };
    assert!(answer.approve, "{answer:?}");
    assert_eq!(
        answer.grant.expect("grant").write_paths,
        ["src/a.rs", "src/b.rs"]
    );
    let member = mesh_tests::member_named(&mut operator, "alice").await;
    assert_eq!(member.holds, ["src/a.rs", "src/b.rs"]);

    // Too large, or touching bob's file, or denied: a person decides.
    let large = alice
        .api
        .request_amendment(amend(&["src/c.rs", "src/d.rs"]))
        .await
        .expect("amend")
        .into_inner()
        .request_id;
    let held = alice
        .api
        .request_amendment(amend(&["src/bob.rs"]))
        .await
        .expect("amend")
        .into_inner()
        .request_id;
    for (id, why) in [(&large, "amend_max_files"), (&held, "bob holds src/bob.rs")] {
        let state = operator
            .get_request(pb::GetRequestRequest {
                request_id: id.clone(),
            })
            .await
            .expect("get")
            .into_inner();
        assert!(is(state.status, pb::RequestStatus::Pending));
        assert_eq!(state.r#type, pb::RequestType::Amendment as i32);
        let waits = state.reviews.last().expect("a review step");
        assert!(
            waits.verdict == "waits" && waits.words.contains(why),
            "{waits:?}"
        );
    }
    let (ok, out, _) = lead.cli(&["requests", "--pending"]).await;
    assert!(ok && out.contains("[held by bob: src/bob.rs]"), "{out}");
    let (ok, out, err) = lead.cli(&["approve", &large]).await;
    assert!(ok, "{err}");
    assert!(out.contains("approved amendment"), "{out}");
    let answer = alice.next_matching(amendment_answer(large.clone())).await;
    assert!(matches!(answer.body, Some(pb::envelope::Body::AmendmentResponse(r)) if r.approve));
    let (ok, _, err) = lead
        .cli(&[
            "reject",
            &held,
            "--feedback",
            "src/bob.rs is bob's; ask him",
        ])
        .await;
    assert!(ok, "{err}");
    let member = mesh_tests::member_named(&mut operator, "alice").await;
    assert_eq!(
        member.holds,
        ["src/a.rs", "src/b.rs", "src/c.rs", "src/d.rs"]
    );

    // No approved plan, nothing to amend.
    let mut carol = lead.join("carol").await;
    let err = carol
        .api
        .request_amendment(amend(&["x.rs"]))
        .await
        .expect_err("no plan");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    let err = alice
        .api
        .request_amendment(pb::AmendmentRequest {
            files: vec!["y.rs".into()],
            ..Default::default()
        })
        .await
        .expect_err("no why");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().starts_with("why"), "{}", err.message());
}

/// The console shows a result as a diff, file by file (added and removed
/// lines marked), beside its task and plan, and an amendment as a delta;
/// approving them there merges the result and widens the grant. Writes
/// `target/console-shots/result-1280.png` and `amendment-1280.png`.
#[tokio::test]
async fn the_console_shows_a_results_diff_and_an_amendments_delta_and_decides_them() {
    let repo = team_repo();
    let lead = start(repo.path(), &[]).await;
    let mut operator = lead.operator().await;
    let browser = lead.console_browser().await;
    let mut alice = lead.join("alice").await;
    let task = claimed_task(&mut operator, &mut alice, "add two").await;
    let plan = plan_approved(&mut operator, &mut alice, &task, &["src/lib.rs"]).await;
    let shots = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/console-shots");
    std::fs::create_dir_all(&shots).expect("shots dir");

    let amendment = alice
        .api
        .request_amendment(pb::AmendmentRequest {
            files: vec!["src/two.rs".into()],
            steps: vec!["put two() in its own file".into()],
            why: "two() deserves its own module".into(),
            ..Default::default()
        })
        .await
        .expect("amend")
        .into_inner()
        .request_id;
    browser
        .wait_for("[data-testid=amendment] h3", "alice asks to add src/two.rs")
        .await;
    browser
        .wait_for(
            "[data-testid=amendment]",
            "+ step: put two() in its own file",
        )
        .await;
    browser.screenshot(&shots.join("amendment-1280.png")).await;
    let approve = browser
        .wait_for("[data-testid=amendment] [data-testid=approve]", "Approve")
        .await;
    browser.click(&approve).await;
    let granted = alice
        .next_matching(|e| matches!(&e.body, Some(pb::envelope::Body::AmendmentResponse(r)) if r.request_id == amendment))
        .await;
    assert!(matches!(granted.body, Some(pb::envelope::Body::AmendmentResponse(r)) if r.approve));

    let (wt, base) = worktree(repo.path(), "alice");
    std::fs::write(wt.join("src/lib.rs"), "pub fn one() -> u32 { 2 }\n").expect("write");
    std::fs::write(wt.join("src/two.rs"), "pub fn two() -> u32 { 2 }\n").expect("write");
    let id = submit(
        &mut alice,
        &task,
        &base,
        diff_of(&wt, &base),
        "Add two()",
        "",
    )
    .await
    .expect("submit");
    browser
        .wait_for("[data-testid=result] h3", "Add two()")
        .await;
    browser
        .wait_for(
            "[data-testid=result] .diff tr.added .code",
            "pub fn two() -> u32 { 2 }",
        )
        .await;
    browser
        .wait_for(
            "[data-testid=result] .diff tr.removed .code",
            "pub fn one() -> u32 { 1 }",
        )
        .await;
    browser
        .wait_for("[data-testid=result] .diff summary", "src/two.rs")
        .await;
    // The card names its plan by a link to the plan's page.
    let plan_link = browser
        .wait_for("[data-testid=result] [data-testid=plan-link]", "")
        .await;
    assert!(
        browser
            .property(&plan_link, "href")
            .await
            .ends_with(&format!("#/requests/{plan}")),
        "the result links its plan {plan}"
    );
    browser.screenshot(&shots.join("result-1280.png")).await;
    let approve = browser
        .wait_for(
            "[data-testid=result] [data-testid=approve]",
            "Approve and merge",
        )
        .await;
    browser.click(&approve).await;
    let landed = answer(&mut alice, &id).await;
    assert!(landed.approve, "{landed:?}");
    assert_eq!(git(repo.path(), &["rev-parse", "main"]), landed.commit);
    let state = operator
        .get_request(pb::GetRequestRequest { request_id: id })
        .await
        .expect("get")
        .into_inner();
    assert!(
        state
            .reviews
            .iter()
            .any(|r| r.reviewer == "operator (console)" && r.verdict == "approve"),
        "{:?}",
        state.reviews
    );
    browser.quit().await;
}
