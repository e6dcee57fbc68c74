//! `lead demo`: the whole mission in one command. A lead on a free port with
//! a review policy and a team repository (`--repo`), a shared task list, and
//! two teammates as separate processes, each in its own git worktree on its
//! own branch, both running the same playbook (`claim = "next"`): each
//! claims the next task, plans for it (unless the task is reviewed by its
//! result alone), works, submits its result, and claims again.
//! - The lead creates three tasks: the auth module, session handling, and
//!   the login docs, which wait for the auth module and are reviewed by
//!   their result alone (`--review result`).
//! - alice claims the auth module; while planning she tries to write (refused,
//!   nothing written); her first plan has no tests (rejected by policy); her
//!   revision is approved. She writes its files, is refused a write outside
//!   her grant, and asks for one more file (`src/lib.rs`, to register her
//!   module) by amendment: the policy grants it. She waits for word from
//!   bob before she lands her work.
//! - bob starts then, in a worktree of his own: alice's files are not there
//!   (her work has not landed). His plan names `src/lib.rs`, which alice
//!   holds by her amendment: the policy approves it and tells him of the
//!   overlap at plan time, before anyone's result conflicts. He writes his
//!   files, `src/lib.rs` among them, and tells alice to land first.
//! - alice completes her task: her result is reviewed (by the policy: every
//!   path inside her grant) and merged into `main` as one commit authored by
//!   her. That unblocks the docs, which she claims: no plan round; she tells
//!   bob that auth has landed, writes the docs, and her result lands.
//! - bob completes his: his result conflicts with alice's on `src/lib.rs`
//!   and is rejected with the path; his teammate process rebases onto the
//!   new `main` (keeping both sides' lines) and submits again; it lands.
//! - bob agrees to shut down when asked; alice hears that he terminated, then
//!   shuts down too; their worktrees and branches go with them.
//!
//! It prints a transcript from the lead's event stream, then the team
//! branch's history and files, and exits 0 only if every step happened and
//! `main` holds what it must, leaving no process, worktree or branch behind
//! but the team's.

use std::{
    collections::HashSet,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{bail, Context};
use mesh_core::policy::Policy;
use shared::{
    auth::BearerToken,
    pb::{self, envelope::Body, event::Kind, operator_client::OperatorClient},
};
use tokio_stream::StreamExt;

use crate::{
    children::Spawner,
    hub::{Approval, HubConfig},
    render, server,
    service::Tokens,
    store::{SqliteStore, Sync},
};

/// The policy the demo's lead reviews plans, results and amendments with.
const POLICY: &str = r#"require_tests = true
deny_write = ["db/**"]
max_files = 5
max_changed_lines = 200
amend_max_files = 1
"#;

/// The tasks the lead creates: subject, files, the index of the task it is
/// blocked by, and whether it is reviewed by its result alone.
const TASKS: [(&str, &str, Option<usize>, bool); 3] = [
    ("Add the auth module", "src/auth.rs", None, false),
    ("Add session handling", "src/session.rs", None, false),
    ("Document the login flow", "docs/**", Some(0), true),
];

/// The playbook both teammates run.
const PLAYBOOK: &str = r##"# The team's playbook: alice and bob both run it. Each claims the next
# task on the list, does what the section with its subject says, completes
# it (its result is reviewed and merged into main), and claims again until
# none is left.
claim = "next"

[shutdown]
approve = true
reason = "my tasks are done"

[[tasks]]
subject = "Add the auth module"
summary = "Add login() in src/auth.rs, with a test"
await_message = true    # land once bob says so

[[tasks.actions]]
phase = "plan"
tool = "list_dir"
path = "."

[[tasks.actions]]
phase = "plan"
tool = "write_file"     # refused: plan mode has no write tools
path = "src/auth.rs"
content = "pub fn login() {}\n"

[[tasks.plans]]
summary = "Add the auth module"
files = ["src/auth.rs"]
steps = ["write src/auth.rs"]   # no tests: the policy rejects it

[[tasks.plans]]
summary = "Add the auth module, with tests"
files = ["src/auth.rs", "tests/auth_test.rs"]
tests = ["tests/auth_test.rs"]
steps = ["write src/auth.rs", "write tests/auth_test.rs"]

[[tasks.actions]]
phase = "work"
tool = "write_file"
path = "src/auth.rs"
content = "pub fn login(user: &str) -> bool {\n    !user.is_empty()\n}\n"

[[tasks.actions]]
phase = "work"
tool = "write_file"
path = "tests/auth_test.rs"
content = "#[test]\nfn login_needs_a_user() {\n    assert!(!auth::login(\"\"));\n}\n"

[[tasks.actions]]
phase = "work"
tool = "write_file"     # refused: outside the grant's paths
path = "db/schema.sql"
content = "DROP TABLE users;\n"

[[tasks.actions]]
phase = "work"
tool = "request_amendment"   # one more file: the policy grants it
files = ["src/lib.rs"]
text = "the module must be registered in src/lib.rs"

[[tasks.actions]]
phase = "work"
tool = "edit_file"
path = "src/lib.rs"
old = "// modules\n"
new = "// modules\npub mod auth;\n"

[[tasks]]
subject = "Add session handling"
summary = "Add sessions in src/session.rs, on top of login()"
await_message = true    # land once alice's auth has landed

[[tasks.actions]]
phase = "plan"
tool = "read_file"      # not there: alice's work has not landed
path = "src/auth.rs"

[[tasks.plans]]
summary = "Sessions, on top of login()"
files = ["src/session.rs", "tests/session_test.rs", "src/lib.rs"]
tests = ["tests/session_test.rs"]
steps = ["write src/session.rs", "write tests/session_test.rs", "register the module"]

[[tasks.actions]]
phase = "work"
tool = "write_file"
path = "src/session.rs"
content = "pub fn start(user: &str) -> Option<String> {\n    auth::login(user).then(|| format!(\"session-{user}\"))\n}\n"

[[tasks.actions]]
phase = "work"
tool = "write_file"
path = "tests/session_test.rs"
content = "#[test]\nfn no_session_without_a_user() {\n    assert!(session::start(\"\").is_none());\n}\n"

[[tasks.actions]]
phase = "work"
tool = "edit_file"
path = "src/lib.rs"
old = "// modules\n"
new = "// modules\npub mod session;\n"

[[tasks.actions]]
phase = "work"
tool = "send_message"
to = "alice"
text = "sessions are written in my worktree; land auth first"

[[tasks]]
subject = "Document the login flow"
summary = "Document the login flow in docs/login.md"

[[tasks.actions]]
phase = "work"
tool = "send_message"
to = "bob"
text = "auth has landed on main"

[[tasks.actions]]
phase = "work"
tool = "write_file"
path = "docs/login.md"
content = "# Login\n\n`auth::login(user)` checks the user; `session::start(user)` opens a session.\n"
"##;

/// The longest the demo waits for any one step.
const STEP_TIMEOUT: Duration = Duration::from_secs(30);

/// The path of `name` in the directory of this `lead` executable.
pub fn beside_lead(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the lead's own executable")?;
    let dir = exe
        .parent()
        .context("the lead's executable has no directory")?;
    Ok(dir.join(name))
}

/// The `teammate` executable beside this `lead`. Under `cargo run`, where
/// only `lead` was built, it is built first with the same profile.
pub fn teammate_beside_lead() -> anyhow::Result<PathBuf> {
    let bin = beside_lead("teammate")?;
    let exe = std::env::current_exe().context("cannot find the lead's own executable")?;
    let dir = exe
        .parent()
        .context("the lead's executable has no directory")?;
    if bin.is_file() {
        return Ok(bin);
    }
    if let (Ok(cargo), Ok(manifest)) = (std::env::var("CARGO"), std::env::var("CARGO_MANIFEST_DIR"))
    {
        let release = dir.file_name().is_some_and(|n| n == "release");
        eprintln!(
            "lead: building the teammate binary beside {} ...",
            exe.display()
        );
        let mut build = std::process::Command::new(cargo);
        build
            .args(["build", "-p", "teammate", "--manifest-path"])
            .arg(Path::new(&manifest).join("Cargo.toml"));
        if release {
            build.arg("--release");
        }
        let status = build.status().context("running cargo build -p teammate")?;
        if status.success() && bin.is_file() {
            return Ok(bin);
        }
    }
    bail!(
        "no teammate binary at {}: build it with `cargo build --release -p teammate`, or pass --teammate-bin",
        bin.display()
    )
}

/// Runs `git ARGS` in `dir`; its stdout. Fails naming the command.
fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "mesh demo")
        .env("GIT_AUTHOR_EMAIL", "demo@mesh.invalid")
        .env("GIT_COMMITTER_NAME", "mesh demo")
        .env("GIT_COMMITTER_EMAIL", "demo@mesh.invalid")
        .output()
        .context("running git (the demo's team repository needs it)")?;
    if !out.status.success() {
        bail!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The team's repository: `main`, with a README and `src/lib.rs`.
fn team_repo(repo: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(repo.join("src"))?;
    git(repo, &["init", "-q", "-b", "main"])?;
    std::fs::write(repo.join("README.md"), "# the team's crate\n")?;
    std::fs::write(repo.join("src/lib.rs"), "// modules\n")?;
    git(repo, &["add", "-A"])?;
    git(repo, &["commit", "-q", "-m", "Start the crate"])?;
    // The lead moves `main`; nobody edits in this checkout.
    git(repo, &["checkout", "-q", "--detach"])?;
    Ok(())
}

/// Runs the demo in `dir` (or a temporary directory).
pub async fn run(dir: Option<PathBuf>, teammate_bin: PathBuf) -> anyhow::Result<()> {
    let temp = tempfile::tempdir()?;
    let dir = match dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir)?;
            std::path::absolute(dir)?
        }
        None => temp.path().to_path_buf(),
    };
    let state = dir.join("state");
    std::fs::create_dir_all(&state)?;
    std::fs::write(dir.join("playbook.toml"), PLAYBOOK)?;
    let repo_dir = dir.join("repo");
    if repo_dir.exists() {
        bail!(
            "{} exists: the demo makes its team repository there; give it a new --dir",
            repo_dir.display()
        );
    }
    team_repo(&repo_dir)?;
    let repo = std::sync::Arc::new(
        crate::git::Repo::open(&repo_dir, Some("main"))
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?,
    );

    let tokens = Tokens {
        join: shared::auth::new_token(),
        operator: shared::auth::new_token(),
        named: Vec::new(),
    };
    let listener = server::bind("127.0.0.1:0".parse()?)?;
    let addr = listener.local_addr()?;
    let config = HubConfig {
        approval: Approval::Policy(Policy::parse(POLICY)?),
        shutdown_deadline: Duration::from_secs(10),
        spawner: Some(Spawner {
            teammate_bin,
            lead_url: format!("http://{addr}"),
            tls: shared::transport::ClientTls::default(),
            join_token: tokens.join.clone(),
            state_dir: state.clone(),
            kill_grace: Duration::from_secs(2),
            root: dir.clone(),
            model_keys: Vec::new(),
            repo: Some(repo.clone()),
            otlp_endpoint: None,
        }),
        repo: Some(repo),
        review: mesh_core::tasks::Review::Both,
        ..HubConfig::default()
    };
    println!(
        "mesh demo: lead listening on {addr}, team repository {} (branch main), approval policy:",
        repo_dir.display()
    );
    for line in POLICY.lines() {
        println!("    {line}");
    }
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let store = SqliteStore::open(&state, Sync::Full)?;
    let config = crate::Config {
        hub: config,
        store: Box::new(store),
        tokens: tokens.clone(),
        keepalive: server::Keepalive::default(),
        connections: server::ConnLimits::default(),
    };
    let server = tokio::spawn(crate::run(
        server::Listeners {
            grpc: listener,
            console: None,
            tls: None,
        },
        config,
        async {
            let _ = stop_rx.await;
        },
    ));

    let outcome = drive(&format!("http://{addr}"), &tokens.operator, &dir).await;
    let _ = stop_tx.send(());
    server.await.context("the lead's server task")??;
    outcome?;
    check_branch(&repo_dir)?;
    check_leftovers(&repo_dir, &state)?;
    println!("\ndemo complete: every step happened; no teammate process, worktree or branch is left but the team's.");
    Ok(())
}

/// Creates the tasks, spawns the teammates and steers them, printing every
/// event; fails unless every step of the story happened.
async fn drive(url: &str, operator_token: &str, dir: &Path) -> anyhow::Result<()> {
    let channel = tonic::transport::Channel::from_shared(url.to_owned())?
        .connect()
        .await?;
    let mut client = OperatorClient::with_interceptor(channel, BearerToken::new(operator_token)?);
    let mut events = client.watch(pb::WatchRequest {}).await?.into_inner();
    let start = Instant::now();
    println!("\n--- transcript (t+ms, from the lead's event stream) ---");

    let mut ids: Vec<String> = Vec::new();
    for (subject, files, blocker, result_only) in TASKS {
        let review = if result_only {
            pb::TaskReview::Result
        } else {
            pb::TaskReview::Unspecified
        };
        let task = client
            .create_task(pb::CreateTaskRequest {
                subject: subject.into(),
                description: String::new(),
                blocked_by: blocker.map(|i| ids[i].clone()).into_iter().collect(),
                files: vec![files.into()],
                review: review as i32,
            })
            .await?
            .into_inner();
        ids.push(task.task_id);
    }

    let mut story = Story::default();
    spawn(&mut client, "alice", dir).await?;
    // bob starts once alice's work is written in her worktree (and not
    // landed), so that his worktree does not have it whatever the timing.
    wait_for(
        &mut events,
        start,
        "alice's amendment to be granted",
        |kind| {
            story.see(kind);
            story.amendment_granted
        },
    )
    .await?;
    spawn(&mut client, "bob", dir).await?;
    wait_for(&mut events, start, "every task to be completed", |kind| {
        story.see(kind);
        story.completed.len() == TASKS.len()
    })
    .await?;

    println!(
        "{:>6}  operator asks bob to shut down",
        start.elapsed().as_millis()
    );
    client
        .request_shutdown(pb::ShutdownRequest {
            target: "bob".into(),
            reason: "demo is done with bob".into(),
            ..Default::default()
        })
        .await?;
    wait_for(
        &mut events,
        start,
        "alice to hear that bob terminated",
        |kind| {
            story.see(kind);
            // A termination notice goes to every member at once: one
            // envelope to `*` in the event stream.
            matches!(kind, Kind::Envelope(e) if (e.to == "alice" || e.to == "*")
            && matches!(&e.body, Some(Body::TeammateTerminated(t)) if t.name == "bob"))
        },
    )
    .await?;

    println!(
        "{:>6}  operator asks alice to shut down",
        start.elapsed().as_millis()
    );
    client
        .request_shutdown(pb::ShutdownRequest {
            target: "alice".into(),
            reason: "demo over".into(),
            ..Default::default()
        })
        .await?;
    wait_for(&mut events, start, "alice's process to end", |kind| {
        story.see(kind);
        story.exited.contains("alice") && story.exited.contains("bob")
    })
    .await?;
    println!("--- end of transcript ---");
    story.check()
}

/// Starts `name` on the playbook; the lead makes its worktree.
async fn spawn(
    client: &mut OperatorClient<
        tonic::service::interceptor::InterceptedService<tonic::transport::Channel, BearerToken>,
    >,
    name: &str,
    dir: &Path,
) -> anyhow::Result<()> {
    client
        .spawn_teammate(pb::SpawnTeammateRequest {
            name: name.into(),
            role: "coder".into(),
            script_path: dir.join("playbook.toml").to_string_lossy().into_owned(),
            ..Default::default()
        })
        .await?;
    Ok(())
}

/// What the event stream showed of the story.
#[derive(Debug, Default)]
struct Story {
    /// A write tried in plan mode was refused.
    plan_mode_refused: bool,
    /// A write outside the grant was refused.
    outside_grant_refused: bool,
    /// A plan was rejected by the policy for having no tests.
    rejected_for_tests: bool,
    /// alice's amendment was granted by the policy.
    amendment_granted: bool,
    /// bob did not find alice's unlanded file in his worktree.
    isolated: bool,
    /// bob's plan was approved with word that alice holds src/lib.rs.
    overlap_told: bool,
    /// alice's auth result was merged.
    alice_landed: bool,
    /// bob's result was rejected for its conflict on src/lib.rs.
    conflict_rejected: bool,
    /// bob's result landed after the conflict.
    bob_landed_after_rebase: bool,
    /// The docs landed without any plan of their task.
    docs_without_plan: bool,
    /// Tasks with a plan submitted, by id.
    planned_tasks: HashSet<String>,
    /// Completed tasks.
    completed: HashSet<String>,
    /// The docs task's id, once seen.
    docs_task: Option<String>,
    /// Spawned processes that ended.
    exited: HashSet<String>,
}

impl Story {
    /// Takes in one event.
    fn see(&mut self, kind: &Kind) {
        match kind {
            Kind::ToolCall(call) if call.tool == "write_file" && !call.allowed => {
                if call.outcome.contains("plan mode") {
                    self.plan_mode_refused = true;
                } else if call.args_json.contains("db/schema.sql") {
                    self.outside_grant_refused = true;
                }
            }
            Kind::ToolCall(call)
                if call.member == "bob"
                    && call.tool == "read_file"
                    && call.args_json.contains("src/auth.rs")
                    && call.outcome.contains("No such file") =>
            {
                self.isolated = true;
            }
            Kind::Request(r) if r.r#type == pb::RequestType::PlanApproval as i32 => {
                if r.sender == "bob"
                    && r.status == pb::RequestStatus::Approved as i32
                    && r.feedback.contains("overlap: alice holds src/lib.rs")
                {
                    self.overlap_told = true;
                }
                if let Ok(payload) = serde_json::from_str::<serde_json::Value>(&r.payload_json) {
                    if let Some(task) = payload.pointer("/plan/task_id").and_then(|t| t.as_str()) {
                        self.planned_tasks.insert(task.to_owned());
                    }
                }
                if r.status == pb::RequestStatus::Rejected as i32 && r.feedback.contains("test") {
                    self.rejected_for_tests = true;
                }
            }
            Kind::Request(r)
                if r.r#type == pb::RequestType::Amendment as i32
                    && r.status == pb::RequestStatus::Approved as i32
                    && r.sender == "alice"
                    && r.feedback.contains("policy") =>
            {
                self.amendment_granted = true;
            }
            Kind::Request(r) if r.r#type == pb::RequestType::Result as i32 => {
                let approved = r.status == pb::RequestStatus::Approved as i32;
                let rejected = r.status == pb::RequestStatus::Rejected as i32;
                if r.sender == "alice" && approved && r.payload_json.contains("src/auth.rs") {
                    self.alice_landed = true;
                }
                if r.sender == "bob"
                    && rejected
                    && r.feedback.contains("conflicts")
                    && r.feedback.contains("src/lib.rs")
                {
                    self.conflict_rejected = true;
                }
                if r.sender == "bob" && approved && self.conflict_rejected {
                    self.bob_landed_after_rebase = true;
                }
            }
            Kind::Task(t) => {
                if t.review == pb::TaskReview::Result as i32 {
                    self.docs_task = Some(t.task_id.clone());
                }
                if t.status == pb::TaskStatus::Completed as i32 {
                    self.completed.insert(t.task_id.clone());
                    if self.docs_task.as_deref() == Some(t.task_id.as_str())
                        && !self.planned_tasks.contains(&t.task_id)
                    {
                        self.docs_without_plan = true;
                    }
                }
            }
            Kind::ChildExited(c) => {
                self.exited.insert(c.name.clone());
            }
            _ => {}
        }
    }

    /// Fails naming each step that did not happen.
    fn check(&self) -> anyhow::Result<()> {
        let missing: Vec<&str> = [
            (self.plan_mode_refused, "a write in plan mode refused"),
            (self.rejected_for_tests, "a plan without tests rejected"),
            (
                self.outside_grant_refused,
                "a write outside the grant refused",
            ),
            (
                self.amendment_granted,
                "alice's amendment granted by the policy",
            ),
            (
                self.isolated,
                "bob's worktree without alice's unlanded file",
            ),
            (
                self.overlap_told,
                "bob told at plan time that alice holds src/lib.rs",
            ),
            (self.alice_landed, "alice's result merged"),
            (
                self.conflict_rejected,
                "bob's result rejected for its conflict on src/lib.rs",
            ),
            (self.bob_landed_after_rebase, "bob's rebased result merged"),
            (
                self.docs_without_plan,
                "the docs landed without a plan round",
            ),
        ]
        .into_iter()
        .filter(|(seen, _)| !seen)
        .map(|(_, what)| what)
        .collect();
        if !missing.is_empty() {
            bail!("the demo did not show: {}", missing.join("; "));
        }
        Ok(())
    }
}

/// Prints events until `done` says so, or fails after [`STEP_TIMEOUT`].
async fn wait_for(
    events: &mut tonic::Streaming<pb::Event>,
    start: Instant,
    what: &str,
    mut done: impl FnMut(&Kind) -> bool,
) -> anyhow::Result<()> {
    loop {
        let event = tokio::time::timeout(STEP_TIMEOUT, events.next())
            .await
            .with_context(|| format!("waited {STEP_TIMEOUT:?} for {what}"))?
            .with_context(|| format!("the event stream ended while waiting for {what}"))??;
        println!(
            "{:>6}  {}",
            start.elapsed().as_millis(),
            render::event_line(&event)
        );
        if event.kind.as_ref().is_some_and(&mut done) {
            return Ok(());
        }
    }
}

/// What the team branch must hold after the demo: its history (who landed
/// what, on top of the start) and its files.
fn check_branch(repo: &Path) -> anyhow::Result<()> {
    println!("\nthe team branch (main), newest first:");
    let log = git(repo, &["log", "--format=%h %an: %s", "main"])?;
    for line in log.lines() {
        println!("  {line}");
    }
    let authors: Vec<String> = git(repo, &["log", "--format=%an", "main"])?
        .lines()
        .map(str::to_owned)
        .collect();
    let mut landed = authors.clone();
    landed.pop(); // the start
    landed.sort();
    if landed != ["alice", "alice", "bob"] {
        bail!("main should have two commits of alice's and one of bob's on the start; it has {authors:?}");
    }
    let trailers = git(repo, &["log", "--format=%B", "-1", "main"])?;
    if !trailers.contains("Mesh-Task: ") || !trailers.contains("Mesh-Result: ") {
        bail!("the newest commit on main has no Mesh-Task/Mesh-Result trailers: {trailers}");
    }
    println!("\nthe files on main:");
    for (path, expected) in [
        ("src/auth.rs", Some("pub fn login")),
        ("tests/auth_test.rs", Some("login_needs_a_user")),
        ("src/session.rs", Some("pub fn start")),
        ("tests/session_test.rs", Some("no_session_without_a_user")),
        ("src/lib.rs", Some("pub mod auth;\npub mod session;")),
        ("docs/login.md", Some("# Login")),
        ("db/schema.sql", None),
    ] {
        let content = git(repo, &["show", &format!("main:{path}")]).ok();
        let ok = match (&content, expected) {
            (Some(content), Some(expected)) => content.contains(expected),
            (None, None) => true,
            _ => false,
        };
        let mark = if ok { "ok " } else { "BAD" };
        println!(
            "  {mark} {path}: {}",
            if content.is_some() {
                "landed"
            } else {
                "absent"
            }
        );
        if !ok {
            bail!(
                "main:{path} should be {}",
                match expected {
                    Some(text) => format!("landed, holding {text:?}"),
                    None => "absent".into(),
                }
            );
        }
    }
    Ok(())
}

/// No teammate worktree or branch is left: only the team's.
fn check_leftovers(repo: &Path, state: &Path) -> anyhow::Result<()> {
    let worktrees = git(repo, &["worktree", "list", "--porcelain"])?;
    let count = worktrees
        .lines()
        .filter(|l| l.starts_with("worktree "))
        .count();
    let branches = git(repo, &["branch", "--list", "mesh/*"])?;
    if count != 1 || !branches.is_empty() || state.join("worktrees/alice").exists() {
        bail!("teammates' worktrees or branches are left: {worktrees}\n{branches}");
    }
    println!("\nworktrees and branches left: only main's checkout");
    Ok(())
}
