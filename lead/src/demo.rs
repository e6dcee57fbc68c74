//! `lead demo`: the whole mission in one command. A lead on a free port with a
//! review policy, and two teammates as separate processes:
//! - alice tries to write while planning (refused, nothing written), submits a
//!   plan without tests (rejected by policy), revises it (approved), writes her
//!   files, and is refused a write outside her grant;
//! - bob plans, is approved, works, and agrees to shut down when asked; alice
//!   hears that he terminated.
//!
//! It prints a transcript from the lead's event stream and exits 0 only if
//! every step happened, leaving no process behind.

use std::{
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
"#;

const ALICE: &str = r##"# alice: plans read-only, revises after a rejection, then writes.
[[actions]]
phase = "plan"
tool = "list_dir"
path = "."

[[actions]]
phase = "plan"
tool = "write_file"     # refused: plan mode has no write tools
path = "src/auth.rs"
content = "pub fn login() {}\n"

[[plans]]
summary = "Add the auth module"
files = ["src/auth.rs"]
tests = []
steps = ["write src/auth.rs"]

[[plans]]
summary = "Add the auth module, with tests"
files = ["src/auth.rs", "tests/auth_test.rs"]
tests = ["tests/auth_test.rs"]
steps = ["write src/auth.rs", "write tests/auth_test.rs"]

[[actions]]
phase = "work"
tool = "write_file"
path = "src/auth.rs"
content = "pub fn login(user: &str) -> bool {\n    !user.is_empty()\n}\n"

[[actions]]
phase = "work"
tool = "write_file"
path = "tests/auth_test.rs"
content = "#[test]\nfn login_needs_a_user() {\n    assert!(!auth::login(\"\"));\n}\n"

[[actions]]
phase = "work"
tool = "write_file"     # refused: outside the grant's paths
path = "db/schema.sql"
content = "DROP TABLE users;\n"

[[actions]]
phase = "work"
tool = "search"
pattern = "login"
"##;

const BOB: &str = r##"# bob: a small approved plan; agrees to shut down.
[[plans]]
summary = "Write the notes"
files = ["docs/notes.md"]
tests = ["docs check"]
steps = ["write docs/notes.md"]

[[actions]]
phase = "work"
tool = "write_file"
path = "docs/notes.md"
content = "# Notes\n"

[shutdown]
approve = true
reason = "notes are written"
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
    for (name, script) in [("alice", ALICE), ("bob", BOB)] {
        std::fs::write(dir.join(format!("{name}.toml")), script)?;
    }

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
            join_token: tokens.join.clone(),
            state_dir: state.clone(),
            kill_grace: Duration::from_secs(2),
        }),
        ..HubConfig::default()
    };
    println!("mesh demo: lead listening on {addr}, approval policy:");
    for line in POLICY.lines() {
        println!("    {line}");
    }
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let store = SqliteStore::open(&state, Sync::Full)?;
    let server = tokio::spawn(server::run(
        listener,
        config,
        Box::new(store),
        tokens.clone(),
        server::Keepalive::default(),
        server::ConnLimits::default(),
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

/// Spawns the teammates and steers them, printing every event.
async fn drive(url: &str, operator_token: &str, dir: &Path) -> anyhow::Result<()> {
    let channel = tonic::transport::Channel::from_shared(url.to_owned())?
        .connect()
        .await?;
    let mut client = OperatorClient::with_interceptor(channel, BearerToken::new(operator_token)?);
    let mut events = client.watch(pb::WatchRequest {}).await?.into_inner();
    let start = Instant::now();
    println!("\n--- transcript (t+ms, from the lead's event stream) ---");

    for name in ["alice", "bob"] {
        client
            .spawn_teammate(pb::SpawnTeammateRequest {
                name: name.into(),
                role: "coder".into(),
                script_path: dir
                    .join(format!("{name}.toml"))
                    .to_string_lossy()
                    .into_owned(),
                workspace: dir.join(name).to_string_lossy().into_owned(),
                ..Default::default()
            })
            .await?;
    }

    let mut idle = std::collections::HashSet::new();
    wait_for(
        &mut events,
        start,
        "alice and bob to finish their work",
        |kind| {
            if let Kind::Member(m) = kind {
                if m.status == pb::MemberStatus::Idle as i32 {
                    idle.insert(m.name.clone());
                }
            }
            idle.contains("alice") && idle.contains("bob")
        },
    )
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
        matches!(kind, Kind::Member(m) if m.name == "alice" && m.status == pb::MemberStatus::Terminated as i32)
    })
    .await?;
    println!("--- end of transcript ---");
    Ok(())
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
    println!("\nworkspaces:");
    for (path, expected) in [
        ("alice/src/auth.rs", true),
        ("alice/tests/auth_test.rs", true),
        ("alice/db/schema.sql", false),
        ("bob/docs/notes.md", true),
    ] {
        let exists = dir.join(path).is_file();
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
