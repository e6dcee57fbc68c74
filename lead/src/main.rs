//! `lead`: parses the command line, sets up logging and runs a subcommand.

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use lead::cli::{
    self, connect,
    serve::{serve, ServeArgs},
    tasks::NewTask,
    CliError, Target,
};
use lead::store::PgTarget;

/// The mesh lead: serves the team, and the operator commands that steer it.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum TaskAction {
    /// Add a task; prints its id.
    Add(NewTask),
}

#[derive(Debug, Subcommand)]
enum AuditAction {
    /// Write the trail, oldest first: a table, or (--json) one JSON entry a
    /// line, which `lead audit verify` checks.
    Export {
        /// Only entries recorded at or after this time: unix seconds, or a
        /// UTC time such as 2026-11-26T14:00:00Z.
        #[arg(long)]
        since: Option<String>,
        /// One JSON entry a line.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        target: Target,
    },
    /// Check an exported trail: each entry's hash, each link to the one
    /// before. Says where it breaks (exit status 1).
    Verify {
        /// The file `lead audit export --json` wrote.
        file: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum StoreAction {
    /// Copy a stopped lead's state dir into an empty PostgreSQL database:
    /// every record (the whole audit trail and event history), checked
    /// record by record; then start the leads with --store URL.
    Copy {
        /// The state dir of a lead that is not running (the one holding
        /// mesh.db; an older schema is upgraded first).
        #[arg(long)]
        from: PathBuf,
        /// The PostgreSQL database (postgres://USER@HOST/DB), empty or
        /// with empty mesh tables. Also from MESH_STORE_URL.
        #[arg(long, env = "MESH_STORE_URL", hide_env_values = true, value_parser = cli::store::target)]
        to: PgTarget,
    },
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the lead's gRPC server.
    Serve(Box<ServeArgs>),
    /// List every member: name, role, status, permission mode, what its
    /// model used and its token budget; then the team's total.
    Team {
        #[command(flatten)]
        target: Target,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Each lead (every --lead given, or the state dir's): its role (sole,
    /// active or standby), the lease's epoch and expiry, and its store;
    /// then which one is active. Fails when none is.
    Status {
        #[command(flatten)]
        target: Target,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The shared task list: id, status, owner, subject, blockers.
    Tasks {
        #[command(flatten)]
        target: Target,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Work on the shared task list (`lead task add SUBJECT ...`).
    Task {
        #[command(subcommand)]
        action: TaskAction,
    },
    /// The review queue measured: what waits now and how long, each kind
    /// of reviewer's time on a request (p50, p90, max), the time to a
    /// decision.
    Stats {
        #[command(flatten)]
        target: Target,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List protocol requests.
    Requests {
        #[command(flatten)]
        target: Target,
        /// Only pending ones.
        #[arg(long)]
        pending: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approve a request by its id: a plan (with a permission grant), a
    /// result, an amendment or a permission.
    Approve {
        request_id: String,
        /// A plan's grant's mode: accept-edits (the default), default or bypass.
        #[arg(long)]
        mode: Option<String>,
        /// A glob the teammate may write (repeatable); none means the plan's files.
        #[arg(long = "write")]
        write: Vec<String>,
        /// A note for the teammate.
        #[arg(long, default_value = "")]
        feedback: String,
        /// Approve although the plan's files fall inside another teammate's
        /// hold (the lead refuses such an approval without it, naming the holder).
        #[arg(long)]
        allow_overlap: bool,
        #[command(flatten)]
        target: Target,
    },
    /// Reject a plan, a result, an amendment or a permission, with feedback
    /// the teammate revises against.
    Reject {
        request_id: String,
        #[arg(long)]
        feedback: String,
        #[command(flatten)]
        target: Target,
    },
    /// The audit trail: every decision, hash-chained.
    Audit {
        #[command(subcommand)]
        action: AuditAction,
    },
    /// Move a team between stores (`lead store copy --from DIR --to URL`).
    Store {
        #[command(subcommand)]
        action: StoreAction,
    },
    /// Print a result request's diff, as the teammate submitted it.
    Diff {
        request_id: String,
        #[command(flatten)]
        target: Target,
    },
    /// Remove the team's leftover worktrees (`mesh/NAME/work`) in --repo:
    /// those not in use whose work landed; with --force, every one not in
    /// use, whatever it holds. Worktrees in use (locked by a running lead)
    /// stay.
    Gc {
        /// The team's repository.
        #[arg(long)]
        repo: PathBuf,
        /// The team branch (default: the one checked out in --repo).
        #[arg(long)]
        branch: Option<String>,
        /// Remove worktrees that hold work that has not landed, too.
        #[arg(long)]
        force: bool,
        /// Remove worktrees in use (locked) too; only when no lead runs.
        #[arg(long)]
        unlock: bool,
    },
    /// Allow one gated tool call (a permission request).
    Allow {
        request_id: String,
        #[arg(long, default_value = "")]
        feedback: String,
        #[command(flatten)]
        target: Target,
    },
    /// Deny one gated tool call (a permission request).
    Deny {
        request_id: String,
        #[arg(long, default_value = "")]
        feedback: String,
        #[command(flatten)]
        target: Target,
    },
    /// Ask a teammate to shut down, and wait for its answer: until it agrees
    /// or refuses, or its deadline passes and the request expires (at most
    /// --deadline seconds; without it, the lead's --shutdown-deadline, 30 s
    /// unless set). With --no-wait, print the request id and return at once.
    Shutdown {
        name: String,
        #[arg(long, default_value = "")]
        reason: String,
        /// Seconds it has to answer (default: the lead's, 30).
        #[arg(long)]
        deadline: Option<u64>,
        /// Print the request id and return at once, without waiting for the
        /// answer (follow it with `lead requests` or `lead watch`).
        #[arg(long)]
        no_wait: bool,
        #[command(flatten)]
        target: Target,
    },
    /// Set a member's token budget (prompt and completion tokens together;
    /// 0 removes it); prints what it used and its budget now.
    Budget {
        /// The member's name.
        name: String,
        /// The budget in tokens; 0: none.
        tokens: u64,
        #[command(flatten)]
        target: Target,
    },
    /// Print every message, request change, member change and tool call, live.
    Watch {
        #[command(flatten)]
        target: Target,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Start a teammate as a child process of the running lead.
    Spawn {
        #[command(flatten)]
        spawn: cli::SpawnArgs,
        #[command(flatten)]
        target: Target,
    },
    /// Sign in at the OpenID provider (--oidc: the device authorization
    /// grant): prints where to enter a code, waits for the sign-in, and
    /// keeps the ID token for the other commands (in a file only you can
    /// read); says who signed in and when the token expires.
    Login(cli::login::LoginArgs),
    /// Run the whole mission once: a lead and two teammates, with a transcript.
    Demo {
        /// Where the demo keeps its state and workspaces (default: a temporary directory).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The `teammate` executable (default: beside `lead`).
        #[arg(long)]
        teammate_bin: Option<PathBuf>,
    },
}

/// The lead allocates and frees several small buffers per message. Under
/// routing load glibc's malloc and free took about a fifth of the lead's CPU
/// (perf). jemalloc took durable routing from about 45k to 50-55k msg/s and
/// kept the memory of 10,000 connected teammates where glibc had it (about
/// 370 MiB); mimalloc was as fast but needed 630 MiB.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // The server logs what it does; the other commands print their own output.
    let default_filter = if matches!(cli.command, Command::Serve(_)) {
        "info"
    } else {
        "warn"
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| default_filter.into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lead: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let output = match cli.command {
        Command::Serve(args) => return serve(*args).await,
        Command::Demo { dir, teammate_bin } => {
            let bin = teammate_bin.map_or_else(lead::demo::teammate_beside_lead, Ok)?;
            return lead::demo::run(dir, bin).await;
        }
        Command::Watch { target, json } => {
            return Ok(cli::watch(&mut connect(&target).await?, json).await?);
        }
        Command::Team { target, json } => cli::team(&mut connect(&target).await?, json).await,
        Command::Status { target, json } => cli::status::status(&target, json).await,
        Command::Tasks { target, json } => {
            cli::tasks::tasks(&mut connect(&target).await?, json).await
        }
        Command::Task {
            action: TaskAction::Add(task),
        } => cli::tasks::add_task(&mut connect(&task.target).await?, task).await,
        Command::Stats { target, json } => cli::stats(&mut connect(&target).await?, json).await,
        Command::Requests {
            target,
            pending,
            json,
        } => cli::requests(&mut connect(&target).await?, pending, json).await,
        Command::Approve {
            request_id,
            mode,
            write,
            feedback,
            allow_overlap,
            target,
        } => {
            let client = &mut connect(&target).await?;
            cli::decide::approve(client, request_id, mode, write, feedback, allow_overlap).await
        }
        Command::Reject {
            request_id,
            feedback,
            target,
        } => cli::decide::reject(&mut connect(&target).await?, request_id, feedback).await,
        Command::Audit { action } => audit(action).await,
        Command::Store {
            action: StoreAction::Copy { from, to },
        } => cli::store::copy(&from, &to).await,
        Command::Diff { request_id, target } => {
            cli::diff(&mut connect(&target).await?, request_id).await
        }
        Command::Gc {
            repo,
            branch,
            force,
            unlock,
        } => cli::gc::gc(&repo, branch.as_deref(), force, unlock).await,
        Command::Allow {
            request_id,
            feedback,
            target,
        } => cli::decide::permit(&mut connect(&target).await?, request_id, true, feedback).await,
        Command::Deny {
            request_id,
            feedback,
            target,
        } => cli::decide::permit(&mut connect(&target).await?, request_id, false, feedback).await,
        Command::Shutdown {
            name,
            reason,
            deadline,
            no_wait,
            target,
        } => {
            let client = &mut connect(&target).await?;
            cli::shutdown(client, name, reason, deadline, !no_wait).await
        }
        Command::Budget {
            name,
            tokens,
            target,
        } => cli::budget(&mut connect(&target).await?, name, tokens).await,
        Command::Login(args) => cli::login::login(args).await,
        Command::Spawn { spawn, target } => {
            let ca = target.tls.ca.clone();
            cli::spawn(&mut connect(&target).await?, spawn, ca.as_deref()).await
        }
    };
    print!("{}", output.map_err(|e: CliError| anyhow::anyhow!(e))?);
    Ok(())
}

/// `lead audit export` and `lead audit verify`.
async fn audit(action: AuditAction) -> Result<String, CliError> {
    match action {
        AuditAction::Export {
            since,
            json,
            target,
        } => cli::audit::audit_export(&mut connect(&target).await?, since.as_deref(), json).await,
        AuditAction::Verify { file } => cli::audit::verify(&file),
    }
}
