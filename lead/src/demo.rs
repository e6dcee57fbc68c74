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

mod binaries;
mod playbook;
mod repo;
mod story;

pub use binaries::{beside_lead, teammate_beside_lead};
use playbook::PLAYBOOK;
use repo::{check_branch, check_leftovers, team_repo};
use story::Story;

use crate::{
    callers::Tokens,
    children::Spawner,
    hub::{Approval, HubConfig},
    render, server,
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

/// The longest the demo waits for any one step.
const STEP_TIMEOUT: Duration = Duration::from_secs(30);

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
        oidc: None,
        a2a_open: None,
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
        store: crate::store::Storage::Local(Box::new(store)),
        tokens: tokens.clone(),
        keepalive: server::Keepalive::default(),
        connections: server::ConnLimits::default(),
        standing: tokio::sync::watch::channel(crate::leadership::Standing {
            url: format!("http://{addr}"),
            leader_url: format!("http://{addr}"),
            store: format!("sqlite {}", state.display()),
            ..Default::default()
        })
        .1,
        a2a_card: serde_json::Map::new(),
        a2a_push_allow: Vec::new(),
        console_sign_in: None,
    };
    let server = tokio::spawn(crate::run(
        server::Listeners {
            grpc: std::sync::Arc::new(listener),
            console: None,
            tls: None,
        },
        config,
        async {
            let _ = stop_rx.await;
            crate::hub::Stop::Stop
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
