//! `lead`: parses the command line, sets up logging and runs a subcommand.

use std::{path::PathBuf, process::ExitCode};

use clap::{Args, Parser, Subcommand};
use lead::cli::{
    self,
    serve::{serve, ServeArgs},
    CliError, Target,
};
use shared::{pb, transport::ClientTls};

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
    Add {
        /// What the task is, in a line.
        subject: String,
        /// More detail.
        #[arg(long, default_value = "")]
        description: String,
        /// A task that must be completed first (repeatable).
        #[arg(long = "blocked-by")]
        blocked_by: Vec<String>,
        /// A glob the task is expected to touch (repeatable).
        #[arg(long)]
        files: Vec<String>,
        /// What is reviewed (with lead serve --repo): plan, result or both
        /// (default: the lead's --review).
        #[arg(long, value_parser = ["plan", "result", "both"])]
        review: Option<String>,
        #[command(flatten)]
        target: TargetArgs,
    },
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
        target: TargetArgs,
    },
    /// Check an exported trail: each entry's hash, each link to the one
    /// before. Says where it breaks (exit status 1).
    Verify {
        /// The file `lead audit export --json` wrote.
        file: PathBuf,
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
        target: TargetArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The shared task list: id, status, owner, subject, blockers.
    Tasks {
        #[command(flatten)]
        target: TargetArgs,
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
        target: TargetArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List protocol requests.
    Requests {
        #[command(flatten)]
        target: TargetArgs,
        /// Only pending ones.
        #[arg(long)]
        pending: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approve a plan, with a permission grant.
    Approve {
        request_id: String,
        /// The grant's mode: accept-edits, default or bypass.
        #[arg(long, default_value = "accept-edits")]
        mode: String,
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
        target: TargetArgs,
    },
    /// Reject a plan, with feedback the teammate revises against.
    Reject {
        request_id: String,
        #[arg(long)]
        feedback: String,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// The audit trail: every decision, hash-chained.
    Audit {
        #[command(subcommand)]
        action: AuditAction,
    },
    /// Print a result request's diff, as the teammate submitted it.
    Diff {
        request_id: String,
        #[command(flatten)]
        target: TargetArgs,
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
        target: TargetArgs,
    },
    /// Deny one gated tool call (a permission request).
    Deny {
        request_id: String,
        #[arg(long, default_value = "")]
        feedback: String,
        #[command(flatten)]
        target: TargetArgs,
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
        target: TargetArgs,
    },
    /// Set a member's token budget (prompt and completion tokens together;
    /// 0 removes it); prints what it used and its budget now.
    Budget {
        /// The member's name.
        name: String,
        /// The budget in tokens; 0: none.
        tokens: u64,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Print every message, request change, member change and tool call, live.
    Watch {
        #[command(flatten)]
        target: TargetArgs,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Start a teammate as a child process of the running lead.
    Spawn {
        #[command(flatten)]
        spawn: cli::SpawnArgs,
        #[command(flatten)]
        target: TargetArgs,
    },
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

#[derive(Debug, Args)]
struct TargetArgs {
    /// The lead's state dir, where its address and operator token are.
    #[arg(long, env = "MESH_STATE_DIR", default_value = ".mesh")]
    state_dir: PathBuf,
    /// The lead's URL (instead of <state-dir>/lead.addr).
    #[arg(long)]
    lead: Option<String>,
    /// The operator token (instead of <state-dir>/operator.token).
    #[arg(long, env = "MESH_OPERATOR_TOKEN", hide_env_values = true)]
    operator_token: Option<String>,
    #[command(flatten)]
    tls: ClientTls,
}

impl From<TargetArgs> for Target {
    fn from(args: TargetArgs) -> Self {
        Target {
            lead: args.lead,
            operator_token: args.operator_token,
            state_dir: args.state_dir,
            tls: args.tls,
        }
    }
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
            let mut client = cli::connect(&target.into()).await?;
            return Ok(cli::watch(&mut client, json).await?);
        }
        Command::Team { target, json } => {
            cli::team(&mut cli::connect(&target.into()).await?, json).await
        }
        Command::Tasks { target, json } => {
            cli::tasks(&mut cli::connect(&target.into()).await?, json).await
        }
        Command::Task {
            action:
                TaskAction::Add {
                    subject,
                    description,
                    blocked_by,
                    files,
                    review,
                    target,
                },
        } => {
            let request = new_task(subject, description, blocked_by, files, review.as_deref());
            cli::add_task(&mut cli::connect(&target.into()).await?, request).await
        }
        Command::Stats { target, json } => {
            cli::stats(&mut cli::connect(&target.into()).await?, json).await
        }
        Command::Requests {
            target,
            pending,
            json,
        } => cli::requests(&mut cli::connect(&target.into()).await?, pending, json).await,
        Command::Approve {
            request_id,
            mode,
            write,
            feedback,
            allow_overlap,
            target,
        } => {
            cli::decide::approve(
                &mut cli::connect(&target.into()).await?,
                request_id,
                &mode,
                write,
                feedback,
                allow_overlap,
            )
            .await
        }
        Command::Reject {
            request_id,
            feedback,
            target,
        } => {
            cli::decide::reject(
                &mut cli::connect(&target.into()).await?,
                request_id,
                feedback,
            )
            .await
        }
        Command::Audit {
            action:
                AuditAction::Export {
                    since,
                    json,
                    target,
                },
        } => {
            let since = match since.as_deref() {
                None => 0,
                Some(s) => parse_since(s).map_err(cli::CliError::Usage)?,
            };
            cli::audit_export(&mut cli::connect(&target.into()).await?, since, json).await
        }
        Command::Audit {
            action: AuditAction::Verify { file },
        } => verify_audit(&file),
        Command::Diff { request_id, target } => {
            cli::diff(&mut cli::connect(&target.into()).await?, request_id).await
        }
        Command::Gc {
            repo,
            branch,
            force,
            unlock,
        } => gc(&repo, branch.as_deref(), force, unlock).await,
        Command::Allow {
            request_id,
            feedback,
            target,
        } => {
            cli::decide::permit(
                &mut cli::connect(&target.into()).await?,
                request_id,
                true,
                feedback,
            )
            .await
        }
        Command::Deny {
            request_id,
            feedback,
            target,
        } => {
            cli::decide::permit(
                &mut cli::connect(&target.into()).await?,
                request_id,
                false,
                feedback,
            )
            .await
        }
        Command::Shutdown {
            name,
            reason,
            deadline,
            no_wait,
            target,
        } => {
            cli::shutdown(
                &mut cli::connect(&target.into()).await?,
                name,
                reason,
                deadline,
                !no_wait,
            )
            .await
        }
        Command::Budget {
            name,
            tokens,
            target,
        } => cli::budget(&mut cli::connect(&target.into()).await?, name, tokens).await,
        Command::Spawn { spawn, target } => {
            let ca = target.tls.ca.clone();
            cli::spawn(
                &mut cli::connect(&target.into()).await?,
                spawn,
                ca.as_deref(),
            )
            .await
        }
    };
    print!("{}", output.map_err(|e: CliError| anyhow::anyhow!(e))?);
    Ok(())
}

/// `lead task add`'s request, from its flags.
fn new_task(
    subject: String,
    description: String,
    blocked_by: Vec<String>,
    files: Vec<String>,
    review: Option<&str>,
) -> pb::CreateTaskRequest {
    let review = match review {
        None => pb::TaskReview::Unspecified,
        Some("plan") => pb::TaskReview::Plan,
        Some("result") => pb::TaskReview::Result,
        Some(_) => pb::TaskReview::Both,
    };
    pb::CreateTaskRequest {
        subject,
        description,
        blocked_by,
        files,
        review: review as i32,
    }
}

/// `lead audit verify FILE`: whether the exported chain holds.
fn verify_audit(file: &std::path::Path) -> Result<String, CliError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| CliError::Usage(format!("{}: {e}", file.display())))?;
    match lead::audit::verify(&text) {
        Ok(n) => Ok(format!("ok: {n} entries, the chain holds\n")),
        Err((line, why)) => Err(CliError::Usage(format!(
            "{}: line {line}: {why}",
            file.display()
        ))),
    }
}

/// `--since`: unix seconds, or an RFC 3339 time in UTC
/// (`2026-11-26T14:00:00Z`); unix ms.
fn parse_since(value: &str) -> Result<i64, String> {
    if let Ok(seconds) = value.trim().parse::<i64>() {
        return Ok(seconds.saturating_mul(1000));
    }
    humantime::parse_rfc3339(value.trim())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .ok_or_else(|| {
            format!(
                "--since {value:?}: give unix seconds (date +%s) or a UTC time \
                 such as 2026-11-26T14:00:00Z"
            )
        })
}

/// `lead gc`: removes the team's leftover worktrees and their branches.
async fn gc(
    repo: &std::path::Path,
    branch: Option<&str>,
    force: bool,
    unlock: bool,
) -> Result<String, cli::CliError> {
    let internal = |e: lead::git::GitError| cli::CliError::Usage(e.to_string());
    let repo = lead::git::Repo::open(repo, branch)
        .await
        .map_err(internal)?;
    let mut out = String::new();
    for worktree in repo.worktrees().await.map_err(internal)? {
        let path = worktree.path.display();
        if worktree.locked && !unlock {
            out.push_str(&format!(
                "kept {path}: in use by a running lead (--unlock to remove it anyway)\n"
            ));
            continue;
        }
        if repo
            .remove_worktree(&worktree.path, &worktree.member, force)
            .await
            .map_err(internal)?
        {
            out.push_str(&format!("removed {path} (mesh/{}/work)\n", worktree.member));
        } else {
            out.push_str(&format!(
                "kept {path}: it holds work that has not landed (--force to remove it)\n"
            ));
        }
    }
    if out.is_empty() {
        out.push_str("no worktrees of the team's\n");
    }
    Ok(out)
}

#[cfg(test)]
mod since_tests {
    use super::parse_since;

    #[test]
    fn since_takes_unix_seconds_or_a_utc_time() {
        assert_eq!(parse_since("1764165600"), Ok(1_764_165_600_000));
        assert_eq!(parse_since("2025-11-26T14:00:00Z"), Ok(1_764_165_600_000));
        assert_eq!(
            parse_since("2025-11-26T14:00:00.250Z"),
            Ok(1_764_165_600_250)
        );
        let wrong = parse_since("yesterday");
        assert!(
            wrong
                .as_ref()
                .is_err_and(|e| e.contains("2026-11-26T14:00:00Z")),
            "{wrong:?}"
        );
        assert!(parse_since("2025-11-26T14:00:00+01:00").is_err());
    }
}
