//! `lead`: parses the command line, sets up logging and runs a subcommand.

use std::{net::SocketAddr, path::PathBuf, process::ExitCode, time::Duration};

use clap::{Args, Parser, Subcommand, ValueEnum};
use lead::{
    children::Spawner,
    cli::{self, CliError, Target},
    hub::{Approval, HubConfig, PendingBudget},
    server,
    service::Tokens,
    state::{StateDir, JOIN_TOKEN_FILE, OPERATOR_TOKEN_FILE},
    store::{MemoryStore, SqliteStore, Store, Sync},
};
use mesh_core::policy::Policy;
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
struct ServeArgs {
    /// Address to listen on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:7447")]
    listen: SocketAddr,
    /// Where tokens and the address are kept.
    #[arg(long, env = "MESH_STATE_DIR", default_value = ".mesh")]
    state_dir: PathBuf,
    /// The token `Join` needs (default: generated into <state-dir>/join.token).
    #[arg(long, env = "MESH_JOIN_TOKEN", hide_env_values = true)]
    join_token: Option<String>,
    /// The token operators use (default: generated into
    /// <state-dir>/operator.token). Repeatable as NAME=TOKEN: a named
    /// operator's token, whose decisions the audit trail signs with its name.
    #[arg(long, env = "MESH_OPERATOR_TOKEN", hide_env_values = true, action = clap::ArgAction::Append)]
    operator_token: Vec<String>,
    /// Where the web console listens (HOST:PORT), or `off`. Default: a free
    /// loopback port; the second stdout line says where.
    #[arg(long)]
    http: Option<String>,
    /// Who approves plans: manual, auto, policy:FILE, model:FILE (a
    /// language model with criteria; see docs/models.md), or
    /// chain:FILE (reviewers in order; see docs/operating.md, "Approval modes").
    #[arg(long, default_value = "manual")]
    approval: ApprovalArg,
    /// Seconds a shutdown request waits for its answer when it names no deadline.
    #[arg(long, default_value_t = 30)]
    shutdown_deadline: u64,
    /// Seconds between SIGTERM and SIGKILL for a child that will not stop.
    #[arg(long, default_value_t = 3)]
    kill_grace: u64,
    /// The `teammate` executable for `lead spawn` (default: beside `lead`);
    /// the only one a spawn request may start.
    #[arg(long)]
    teammate_bin: Option<PathBuf>,
    /// Scripts and workspaces a spawn request names must be inside this
    /// directory (default workspaces are under the state dir).
    #[arg(long, default_value = ".")]
    spawn_root: PathBuf,
    /// A variable of the lead's environment that `lead spawn --api-key-env`
    /// may give a model teammate as its API key (repeatable). No other is
    /// passed on, OPENAI_API_KEY (the teammate's default) included.
    #[arg(long = "model-key-env", value_name = "VAR")]
    model_key_env: Vec<String>,
    /// Where state is kept: sqlite (<state-dir>/mesh.db, survives restarts) or memory.
    #[arg(long, value_enum, default_value_t = StoreKind::Sqlite)]
    store: StoreKind,
    /// Whether each commit waits for the disk: full (survives power loss) or
    /// normal (survives a killed lead; a power loss may lose the last commits).
    #[arg(long, value_enum, default_value_t = SyncArg::Full)]
    sync: SyncArg,
    /// Seconds a disconnected teammate may stay away before it is TERMINATED.
    #[arg(long, default_value_t = 30.0)]
    grace: f64,
    /// Seconds between HTTP/2 keepalive pings (a vanished peer is noticed
    /// within this plus the same again for the answer, plus one second).
    #[arg(long, default_value_t = 2.0)]
    keepalive: f64,
    /// When the lead stops: seconds spawned teammates have to agree to shut
    /// down before SIGTERM (then SIGKILL after --kill-grace).
    #[arg(long, default_value_t = 5.0)]
    stop_wait: f64,
    /// The most unacknowledged envelopes one inbox holds; a `Send` to a full
    /// inbox is RESOURCE_EXHAUSTED, a broadcast skips it.
    #[arg(long, default_value_t = 10_000)]
    inbox_max_envelopes: usize,
    /// The most bytes of unacknowledged envelopes one inbox holds.
    #[arg(long, default_value_t = 16 * 1024 * 1024)]
    inbox_max_bytes: usize,
    /// The most bytes of unacknowledged envelopes all inboxes hold together.
    #[arg(long, default_value_t = 1024 * 1024 * 1024)]
    held_max_bytes: usize,
    /// Seconds a teammate with an open inbox stream may leave an envelope
    /// unacknowledged before its stream is ended as stuck.
    #[arg(long, default_value_t = 120.0)]
    ack_timeout: f64,
    /// Seconds resolved requests and terminated members are kept.
    #[arg(long, default_value_t = 86_400.0)]
    retention: f64,
    /// The most members not terminated; a Join past it is RESOURCE_EXHAUSTED.
    #[arg(long, default_value_t = 10_000)]
    max_members: usize,
    /// Join attempts allowed per second, on average (more are
    /// RESOURCE_EXHAUSTED).
    #[arg(long, default_value_t = 200.0)]
    join_rate: f64,
    /// Join attempts allowed at once, above the rate (default: five
    /// seconds' worth of --join-rate, at least 1: 1,000 at 200 a second).
    #[arg(long)]
    join_burst: Option<u32>,
    /// The most connections open at once; more are closed on accept.
    #[arg(long, default_value_t = 16_384)]
    max_connections: usize,
    /// The most connections open at once from one address (IPv6: one /64);
    /// more are closed on accept. Loopback is one address: a team of more
    /// teammates than this on one host raises it.
    #[arg(long, default_value_t = 256)]
    max_connections_per_address: usize,
    /// The most bytes of messages one response stream (an Inbox, a Watch,
    /// the console's events) holds that its client has not read: an inbox
    /// then waits for its reader, a watcher is ended with
    /// RESOURCE_EXHAUSTED.
    #[arg(long, default_value_t = 4 * 1024 * 1024)]
    stream_max_bytes: usize,
    /// The most requests (plans, permissions) one member may have pending;
    /// more are RESOURCE_EXHAUSTED. A plan that supersedes a pending one
    /// counts in its stead.
    #[arg(long, default_value_t = 64)]
    pending_max_per_member: usize,
    /// The most bytes of requests one member may have pending.
    #[arg(long, default_value_t = 2 * 1024 * 1024)]
    pending_max_bytes_per_member: usize,
    /// The most requests pending in all.
    #[arg(long, default_value_t = 10_000)]
    pending_max: usize,
    /// The most bytes of requests pending in all.
    #[arg(long, default_value_t = 128 * 1024 * 1024)]
    pending_max_bytes: usize,
    /// The most bytes of resolved requests kept for the record (for
    /// --retention); past it the oldest are forgotten first.
    #[arg(long, default_value_t = 256 * 1024 * 1024)]
    retained_max_bytes: usize,
    /// The token budget (prompt and completion together) of a member that
    /// joins with none of its own and none set by `lead budget`; 0: none.
    #[arg(long, default_value_t = 0)]
    token_budget: u64,
    /// The team's git repository: each spawned teammate works in its own
    /// worktree of it, and finished work is a result request, reviewed and
    /// merged into --branch as one commit. Without it, teammates share
    /// their workspaces and tasks complete unreviewed.
    #[arg(long)]
    repo: Option<PathBuf>,
    /// The branch the team lands on (default: the one checked out in --repo).
    #[arg(long, requires = "repo")]
    branch: Option<String>,
    /// What a task that names none has reviewed: plan (its result lands if
    /// it stays inside the plan's grant), result (no plan round; nothing
    /// lands unreviewed) or both. Default: both with --repo; without it,
    /// plans alone are reviewed.
    #[arg(long, requires = "repo", value_parser = ["plan", "result", "both"])]
    review: Option<String>,
    /// Export traces and metrics over OTLP/gRPC to this collector (Jaeger,
    /// Grafana Tempo, an OpenTelemetry Collector), e.g.
    /// http://localhost:4317; spawned teammates export there too. Off by
    /// default. OTEL_SERVICE_NAME names the service (default mesh-lead).
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    otlp_endpoint: Option<String>,
    /// Seconds a new connection has to send the HTTP/2 preface.
    #[arg(long, default_value_t = 10.0)]
    handshake_timeout: f64,
    /// Seconds a connection with no call in progress is kept open.
    #[arg(long, default_value_t = 300.0)]
    idle_timeout: f64,
    /// Serve over TLS with this certificate (PEM; the chain, leaf first),
    /// gRPC and the console both. Clients then dial https://.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Refuse, in the TLS handshake, every client without a certificate this
    /// CA (PEM) signed (mutual TLS).
    #[arg(long, requires = "tls_cert")]
    client_ca: Option<PathBuf>,
    /// Listen on a non-loopback address without TLS (tokens then cross the
    /// network in plain text).
    #[arg(long)]
    insecure: bool,
    /// What teammates the lead spawns use to reach it over TLS: --ca
    /// (default: the --tls-cert file), and --cert/--key where --client-ca
    /// asks for a client certificate.
    #[command(flatten)]
    spawn_tls: ClientTls,
}

/// `--approval`: who decides plans, as written on the command line.
#[derive(Debug, Clone)]
enum ApprovalArg {
    Manual,
    Auto,
    Policy(PathBuf),
    Model(PathBuf),
    Chain(PathBuf),
}

impl std::str::FromStr for ApprovalArg {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        let file = |prefix: &str| value.strip_prefix(prefix).map(PathBuf::from);
        if value == "manual" {
            Ok(Self::Manual)
        } else if value == "auto" {
            Ok(Self::Auto)
        } else if let Some(file) = file("policy:") {
            Ok(Self::Policy(file))
        } else if let Some(file) = file("model:") {
            Ok(Self::Model(file))
        } else if let Some(file) = file("chain:") {
            Ok(Self::Chain(file))
        } else {
            Err(format!(
                "{value:?} is not manual, auto, policy:FILE, model:FILE or chain:FILE"
            ))
        }
    }
}

impl ApprovalArg {
    /// Reads and checks the file it names, if any.
    fn load(self) -> anyhow::Result<Approval> {
        let read = |kind: &str, file: &std::path::Path| {
            std::fs::read_to_string(file)
                .map_err(|e| anyhow::anyhow!("--approval {kind}:{}: {e}", file.display()))
        };
        let invalid = |kind: &str, file: &std::path::Path, e: String| {
            anyhow::anyhow!("--approval {kind}:{}: {e}", file.display())
        };
        Ok(match self {
            Self::Manual => Approval::Manual,
            Self::Auto => Approval::Auto,
            Self::Policy(file) => Approval::Policy(
                Policy::parse(&read("policy", &file)?)
                    .map_err(|e| invalid("policy", &file, e.to_string()))?,
            ),
            Self::Model(file) => Approval::Model(std::sync::Arc::new(
                lead::reviewer::Reviewer::parse(&read("model", &file)?)
                    .map_err(|e| invalid("model", &file, e))?,
            )),
            Self::Chain(file) => {
                let dir = file.parent().unwrap_or(std::path::Path::new("."));
                Approval::Chain(std::sync::Arc::new(
                    lead::chain::Chain::parse(&read("chain", &file)?, dir)
                        .map_err(|e| invalid("chain", &file, e.to_string()))?,
                ))
            }
        })
    }
}

/// `--store`: where state is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StoreKind {
    /// `<state-dir>/mesh.db`: survives restarts.
    Sqlite,
    /// Memory: gone when the lead stops.
    Memory,
}

/// `--sync`: whether each commit waits for the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SyncArg {
    /// Survives a power loss.
    Full,
    /// Survives a killed lead; a power loss may lose the last commits.
    Normal,
}

impl From<SyncArg> for Sync {
    fn from(sync: SyncArg) -> Self {
        match sync {
            SyncArg::Full => Sync::Full,
            SyncArg::Normal => Sync::Normal,
        }
    }
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
            let review = match review.as_deref() {
                None => pb::TaskReview::Unspecified,
                Some("plan") => pb::TaskReview::Plan,
                Some("result") => pb::TaskReview::Result,
                Some(_) => pb::TaskReview::Both,
            };
            let request = pb::CreateTaskRequest {
                subject,
                description,
                blocked_by,
                files,
                review: review as i32,
            };
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
            cli::approve(
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
            cli::reject(
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
        } => {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| cli::CliError::Usage(format!("{}: {e}", file.display())))?;
            match lead::audit::verify(&text) {
                Ok(n) => Ok(format!("ok: {n} entries, the chain holds\n")),
                Err((line, why)) => Err(cli::CliError::Usage(format!(
                    "{}: line {line}: {why}",
                    file.display()
                ))),
            }
        }
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
            cli::permit(
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
            cli::permit(
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

/// `lead serve`: checks the flags, opens the store, binds, says where it
/// listens, and serves until SIGINT or SIGTERM.
async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let endpoint = args.otlp_endpoint.clone();
    // The last spans and metrics go out before the lead exits.
    mesh_telemetry::exporting("mesh-lead", endpoint.as_deref(), serve_with(args))
        .await
        .map_err(|e| anyhow::anyhow!(e))?
}

async fn serve_with(args: ServeArgs) -> anyhow::Result<()> {
    let approval = args.approval.clone().load()?;
    let state = StateDir::create(&args.state_dir)?;
    let store: Box<dyn Store> = match args.store {
        StoreKind::Memory => Box::new(MemoryStore),
        StoreKind::Sqlite => Box::new(SqliteStore::open(&state.root, args.sync.into())?),
    };
    let tokens = Tokens {
        join: state.token(args.join_token.clone(), JOIN_TOKEN_FILE)?,
        operator: state.token(unnamed_operator(&args.operator_token)?, OPERATOR_TOKEN_FILE)?,
        named: named_operators(&args.operator_token)?,
    };
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(lead::tls::ServerTls::load(&lead::tls::TlsFiles {
            cert,
            key,
            client_ca: args.client_ca.as_deref(),
        })?),
        _ => None,
    };
    exposed("--listen", args.listen, tls.is_some(), args.insecure)?;
    let console_addr = console_addr(&args, tls.is_some())?;
    let listener = server::bind(args.listen)?;
    let addr = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let lead_url = format!("{scheme}://{}", connect_addr(addr)?);
    let repo = match &args.repo {
        Some(path) => Some(std::sync::Arc::new(
            lead::git::Repo::open(path, args.branch.as_deref()).await?,
        )),
        None => None,
    };
    let mut hub = hub_config(&args, approval, &state, &tokens, &lead_url, tls.is_some())?;
    if let Some(spawner) = hub.spawner.as_mut() {
        spawner.repo = repo.clone();
    }
    hub.review = match args.review.as_deref() {
        Some(review) => mesh_core::tasks::Review::parse("--review", review)?,
        None if repo.is_some() => mesh_core::tasks::Review::Both,
        None => mesh_core::tasks::Review::Plan,
    };
    hub.repo = repo;
    let config = lead::Config {
        hub,
        store,
        tokens,
        keepalive: server::Keepalive {
            interval: seconds("--keepalive", args.keepalive)?,
            timeout: seconds("--keepalive", args.keepalive)? + Duration::from_secs(1),
        },
        connections: server::ConnLimits {
            max: server::connection_cap("--max-connections", args.max_connections)?,
            handshake: seconds("--handshake-timeout", args.handshake_timeout)?,
            idle: seconds("--idle-timeout", args.idle_timeout)?,
            per_address: args.max_connections_per_address.max(1),
        },
    };
    state.write_addr(&addr.to_string(), &lead_url)?;
    println!("listening on {addr}");
    let console = match console_addr {
        None => None,
        Some(http) => {
            let listener = tokio::net::TcpListener::bind(http)
                .await
                .map_err(|e| anyhow::anyhow!("--http {http}: {e}"))?;
            println!("console on {scheme}://{}/", listener.local_addr()?);
            Some(listener)
        }
    };
    {
        use std::io::Write as _;
        std::io::stdout().flush()?;
    }
    let listeners = lead::Listeners {
        grpc: listener,
        console,
        tls,
    };
    lead::run(listeners, config, shared::signal::stop_signal()).await?;
    Ok(())
}

/// Where the console listens (`--http`), if it is on.
fn console_addr(args: &ServeArgs, tls: bool) -> anyhow::Result<Option<SocketAddr>> {
    match args.http.as_deref() {
        Some("off") => Ok(None),
        spec => {
            let spec = spec.unwrap_or("127.0.0.1:0");
            let http: SocketAddr = spec
                .parse()
                .map_err(|e| anyhow::anyhow!("--http: {spec:?} is not HOST:PORT or off ({e})"))?;
            exposed("--http", http, tls, args.insecure)?;
            Ok(Some(http))
        }
    }
}

/// The address to dial for a lead listening on `addr` (loopback for an
/// unspecified address).
fn connect_addr(addr: SocketAddr) -> anyhow::Result<SocketAddr> {
    let ip = if addr.ip().is_unspecified() {
        "127.0.0.1".to_owned()
    } else {
        addr.ip().to_string()
    };
    Ok(SocketAddr::new(ip.parse()?, addr.port()))
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

/// A `--operator-token` value: `NAME=TOKEN` names its operator (a name as a
/// member's); anything else is the token alone.
fn operator_value(value: &str) -> Option<(&str, &str)> {
    let (name, token) = value.split_once('=')?;
    mesh_core::names::Name::parse("--operator-token", name).ok()?;
    Some((name, token))
}

/// The unnamed `--operator-token`, if one is given (at most one).
fn unnamed_operator(values: &[String]) -> anyhow::Result<Option<String>> {
    let unnamed: Vec<&String> = values
        .iter()
        .filter(|v| operator_value(v).is_none())
        .collect();
    if unnamed.len() > 1 {
        anyhow::bail!(
            "--operator-token: give one unnamed token at most; name the others (NAME=TOKEN)"
        );
    }
    Ok(unnamed.first().map(|t| (*t).clone()))
}

/// The named `--operator-token NAME=TOKEN`s: names unique, tokens not empty.
fn named_operators(values: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    let mut named: Vec<(String, String)> = Vec::new();
    for (name, token) in values.iter().filter_map(|v| operator_value(v)) {
        if token.len() < 16 {
            anyhow::bail!(
                "--operator-token {name}=...: the token is too short (16 characters at least)"
            );
        }
        if named.iter().any(|(n, _)| n == name) {
            anyhow::bail!("--operator-token: {name} is named twice");
        }
        named.push((name.to_owned(), token.to_owned()));
    }
    Ok(named)
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

/// How the hub behaves, from the flags.
fn hub_config(
    args: &ServeArgs,
    approval: Approval,
    state: &StateDir,
    tokens: &Tokens,
    lead_url: &str,
    tls: bool,
) -> anyhow::Result<HubConfig> {
    let mut spawn_tls = args.spawn_tls.clone();
    if tls && spawn_tls.ca.is_none() {
        spawn_tls.ca = args
            .tls_cert
            .as_deref()
            .map(std::path::absolute)
            .transpose()?;
    }
    let teammate_bin = match &args.teammate_bin {
        Some(bin) => bin.clone(),
        None => lead::demo::beside_lead("teammate")?,
    };
    if !(args.join_rate.is_finite() && args.join_rate >= 0.0) {
        anyhow::bail!(
            "--join-rate: {} is not a rate (joins a second, 0 or more)",
            args.join_rate
        )
    }
    Ok(HubConfig {
        approval,
        shutdown_deadline: Duration::from_secs(args.shutdown_deadline),
        spawner: Some(Spawner {
            teammate_bin,
            lead_url: lead_url.to_owned(),
            tls: if tls { spawn_tls } else { ClientTls::default() },
            join_token: tokens.join.clone(),
            state_dir: std::path::absolute(&state.root)?,
            kill_grace: Duration::from_secs(args.kill_grace),
            root: args
                .spawn_root
                .canonicalize()
                .map_err(|e| anyhow::anyhow!("--spawn-root {}: {e}", args.spawn_root.display()))?,
            model_keys: model_keys(args.model_key_env.clone())?,
            repo: None,
            otlp_endpoint: args.otlp_endpoint.clone(),
        }),
        grace: seconds("--grace", args.grace)?,
        stop_wait: seconds("--stop-wait", args.stop_wait)?,
        max_inbox: args.inbox_max_envelopes,
        max_inbox_bytes: args.inbox_max_bytes,
        max_held_bytes: args.held_max_bytes,
        ack_timeout: seconds("--ack-timeout", args.ack_timeout)?,
        retention: seconds("--retention", args.retention)?,
        max_members: args.max_members,
        join_rate: args.join_rate,
        join_burst: args
            .join_burst
            .unwrap_or_else(|| mesh_core::rate::default_burst(args.join_rate)),
        stream_max_bytes: args.stream_max_bytes,
        pending_per_member: PendingBudget {
            count: args.pending_max_per_member,
            bytes: args.pending_max_bytes_per_member,
        },
        pending_total: PendingBudget {
            count: args.pending_max,
            bytes: args.pending_max_bytes,
        },
        retained_max_bytes: args.retained_max_bytes,
        token_budget: args.token_budget,
        repo: None,
        review: mesh_core::tasks::Review::Plan,
    })
}

/// The `--model-key-env` names: variables' names, none of the lead's own
/// `MESH_` ones.
fn model_keys(names: Vec<String>) -> anyhow::Result<Vec<String>> {
    for name in &names {
        let valid = !name.is_empty()
            && name
                .chars()
                .enumerate()
                .all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()));
        if !valid {
            anyhow::bail!("--model-key-env: {name:?} is not an environment variable's name");
        }
        if name.starts_with("MESH_") {
            anyhow::bail!(
                "--model-key-env: {name}: the lead's own MESH_ variables are not passed on"
            );
        }
    }
    Ok(names)
}

/// Refuses to listen on `addr` beyond this host in plain text, unless
/// `--insecure` says to.
fn exposed(flag: &str, addr: SocketAddr, tls: bool, insecure: bool) -> anyhow::Result<()> {
    if tls || insecure || addr.ip().is_loopback() {
        return Ok(());
    }
    anyhow::bail!(
        "{flag} {addr}: refusing to listen beyond this host without TLS, where every token \
         would cross the network in plain text; give --tls-cert and --tls-key, or --insecure"
    )
}

/// A duration from a flag's seconds.
fn seconds(flag: &str, value: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| anyhow::anyhow!("{flag}: {value} is not a number of seconds"))
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
