//! `lead demo`: the whole mission in one command. A lead on a free port with a
//! review policy, a shared task list, and two teammates as separate
//! processes on one codebase, both running the same playbook (`claim =
//! "next"`): each claims the next task, plans for it, works, completes it,
//! and claims again.
//! - The lead creates three tasks: the auth module, session handling, and
//!   the login docs, which wait for the auth module.
//! - alice claims the auth module; while planning she tries to write (refused,
//!   nothing written); her first plan has no tests (rejected by policy); her
//!   revision is approved, and its files are hers until she completes the task.
//!   She writes them, is refused a write outside her grant, and waits for word
//!   from whoever builds on her work.
//! - bob claims session handling; his first plan also edits `src/auth.rs`,
//!   which alice holds: rejected, the feedback naming alice. His revision
//!   leaves it alone and is approved; he writes his files, tells the team, and
//!   completes his task.
//! - alice hears, completes hers; that unblocks the docs, which the next idle
//!   teammate claims and completes. Every task ends completed.
//! - bob agrees to shut down when asked; alice hears that he terminated, then
//!   shuts down too.
//!
//! It prints a transcript from the lead's event stream and exits 0 only if
//! every step happened, leaving no process behind.

use std::{
    collections::HashSet,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{bail, Context};
use shared::{
    auth::BearerToken,
    pb::{self, envelope::Body, event::Kind, operator_client::OperatorClient},
    policy::Policy,
};
use tokio_stream::StreamExt;

use crate::{
    children::Spawner,
    hub::{Approval, HubConfig},
    render, server,
    service::Tokens,
    store::{SqliteStore, Sync},
};

/// The policy the demo's lead reviews plans with.
const POLICY: &str = r#"require_tests = true
deny_write = ["db/**"]
max_files = 5
deny_overlap = true
"#;

/// The tasks the lead creates: subject, files, and the index of the task it
/// is blocked by.
const TASKS: [(&str, &str, Option<usize>); 3] = [
    ("Add the auth module", "src/auth.rs", None),
    ("Add session handling", "src/session.rs", None),
    ("Document the login flow", "docs/login.md", Some(0)),
];

/// The playbook both teammates run.
const PLAYBOOK: &str = r##"# The team's playbook: alice and bob both run it. Each claims the next
# task on the list, does what the section with its subject says, completes
# it, and claims again until none is left.
claim = "next"

[shutdown]
approve = true
reason = "my tasks are done"

[[tasks]]
subject = "Add the auth module"
summary = "login() in src/auth.rs, with a test"
await_message = true    # complete once whoever builds on login() has said so

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

[[tasks]]
subject = "Add session handling"
summary = "sessions in src/session.rs, on top of login()"

[[tasks.plans]]
summary = "Sessions, changing login() to return a user"
files = ["src/session.rs", "src/auth.rs"]   # src/auth.rs is held: rejected
tests = ["tests/session_test.rs"]
steps = ["change login() in src/auth.rs", "write src/session.rs"]

[[tasks.plans]]
summary = "Sessions, using login() as it is"
files = ["src/session.rs", "tests/session_test.rs"]
tests = ["tests/session_test.rs"]
steps = ["write src/session.rs", "write tests/session_test.rs"]

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
tool = "send_message"
to = "*"
text = "session handling is in; it calls login() as it is"

[[tasks]]
subject = "Document the login flow"
summary = "docs/login.md"

[[tasks.plans]]
summary = "Document the login flow"
files = ["docs/login.md"]
tests = ["docs check"]
steps = ["write docs/login.md"]

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
    std::fs::create_dir_all(dir.join("repo"))?;

    let tokens = Tokens {
        join: shared::auth::new_token(),
        operator: shared::auth::new_token(),
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
            repo: None,
        }),
        ..HubConfig::default()
    };
    println!("mesh demo: lead listening on {addr}, approval policy:");
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
    check_files(&dir)?;
    println!("\ndemo complete: every step happened; no teammate process is left running.");
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
    for (subject, file, blocker) in TASKS {
        let task = client
            .create_task(pb::CreateTaskRequest {
                review: 0,
                subject: subject.into(),
                description: String::new(),
                blocked_by: blocker.map(|i| ids[i].clone()).into_iter().collect(),
                files: vec![file.into()],
            })
            .await?
            .into_inner();
        ids.push(task.task_id);
    }

    let mut story = Story::default();
    spawn(&mut client, "alice", dir).await?;
    // bob starts once alice holds her files, so that his first plan meets
    // her hold whatever the timing.
    wait_for(&mut events, start, "alice's plan to be approved", |kind| {
        story.see(kind);
        story.approved.contains("alice")
    })
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
    wait_for(&mut events, start, "alice to terminate", |kind| {
        story.see(kind);
        matches!(kind, Kind::Member(m) if m.name == "alice" && m.status == pb::MemberStatus::Terminated as i32)
    })
    .await?;
    println!("--- end of transcript ---");
    story.check()
}

/// Starts `name` on the playbook, in the shared workspace.
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
            workspace: dir.join("repo").to_string_lossy().into_owned(),
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
    /// bob's plan was rejected for overlapping alice's hold.
    rejected_for_overlap: bool,
    /// Members with an approved plan.
    approved: HashSet<String>,
    /// Tasks completed.
    completed: HashSet<String>,
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
            Kind::Request(r) if r.r#type == pb::RequestType::PlanApproval as i32 => {
                if r.status == pb::RequestStatus::Approved as i32 {
                    self.approved.insert(r.sender.clone());
                } else if r.status == pb::RequestStatus::Rejected as i32 {
                    if r.feedback.contains("test") {
                        self.rejected_for_tests = true;
                    }
                    if r.sender == "bob"
                        && r.feedback.contains("alice")
                        && r.feedback.contains("src/auth.rs")
                    {
                        self.rejected_for_overlap = true;
                    }
                }
            }
            Kind::Task(t) if t.status == pb::TaskStatus::Completed as i32 => {
                self.completed.insert(t.task_id.clone());
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
                self.rejected_for_overlap,
                "bob's plan rejected for alice's files",
            ),
            (
                self.outside_grant_refused,
                "a write outside the grant refused",
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

/// What must be on disk after the demo, and what must not.
fn check_files(dir: &Path) -> anyhow::Result<()> {
    println!("\nthe shared workspace (repo/):");
    for (path, expected) in [
        ("src/auth.rs", true),
        ("tests/auth_test.rs", true),
        ("src/session.rs", true),
        ("tests/session_test.rs", true),
        ("docs/login.md", true),
        ("db/schema.sql", false),
    ] {
        let exists = dir.join("repo").join(path).is_file();
        let mark = if exists == expected { "ok " } else { "BAD" };
        println!(
            "  {mark} {path}: {}",
            if exists { "written" } else { "absent" }
        );
        if exists != expected {
            bail!(
                "{path} should be {}",
                if expected { "written" } else { "absent" }
            );
        }
    }
    Ok(())
}
