//! `lead serve`: its flags, checked, and the lead they start: the store
//! opened, the hub configured, the gRPC and console listeners bound, served
//! until SIGINT or SIGTERM.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use clap::{Args, ValueEnum};
use shared::transport::ClientTls;

use crate::{
    callers::Tokens,
    hub::{Approval, HubConfig, PendingBudget},
    leadership::{self, Role, Standing},
    server,
    state::{StateDir, JOIN_TOKEN_FILE, OPERATOR_TOKEN_FILE},
    store::Sync,
};

mod a2a;
mod approval;
mod operators;
mod spawner;
mod store;

use approval::ApprovalArg;
use store::{store_arg, StoreArg};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:7447")]
    listen: SocketAddr,
    /// Where tokens and the address are kept.
    #[arg(long, env = "MESH_STATE_DIR", default_value = ".mesh")]
    state_dir: PathBuf,
    /// The token `Join` needs (default: generated into <state-dir>/join.token).
    #[arg(long, env = "MESH_JOIN_TOKEN", hide_env_values = true)]
    join_token: Option<String>,
    /// Who operates: tokens and the identity provider.
    #[command(flatten)]
    operators: operators::OperatorArgs,
    /// A2A callers that send no token act as operator NAME: they hand in
    /// tasks and approve plans unauthenticated. For a conformance kit
    /// (which sends no token) or a trusted network; loopback only unless
    /// --insecure.
    #[arg(long, value_name = "NAME")]
    a2a_open: Option<String>,
    /// The agent card's words for the team (JSON: name, description,
    /// provider, documentationUrl, iconUrl, skills, defaultInputModes,
    /// defaultOutputModes). Default: a skill for handing the team a task
    /// and one for each role its members have.
    #[arg(long, value_name = "FILE")]
    a2a_card: Option<PathBuf>,
    /// A host A2A callers may have the lead post push notifications to
    /// (their webhooks; repeat for more). Without any, push notifications
    /// are not offered (the card says pushNotifications: false).
    #[arg(long, value_name = "HOST", action = clap::ArgAction::Append)]
    a2a_push_allow: Vec<String>,
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
    /// Where state is kept: sqlite (<state-dir>/mesh.db, survives restarts),
    /// memory, or a PostgreSQL URL (postgres://USER@HOST/DB; several leads
    /// may share one database, one leads and the others stand by). Also
    /// from MESH_STORE_URL, so no password is on a command line.
    #[arg(long, env = "MESH_STORE_URL", hide_env_values = true, default_value = "sqlite", value_parser = store_arg)]
    store: StoreArg,
    /// With a PostgreSQL store: seconds a lead's lease lasts without renewal
    /// (renewed every fifth of it; a lead stops leading once two thirds of
    /// it pass without a renewal). A standby takes over within this and a
    /// quarter of it (at most a second) after the active lead dies.
    #[arg(long, default_value_t = 3.0)]
    lease: f64,
    /// With a PostgreSQL store: the URL clients reach this lead at, which a
    /// standby tells them (default: http(s)://the address it listens on).
    #[arg(long, value_name = "URL")]
    advertise: Option<String>,
    /// With a PostgreSQL store: another lead on the database, by its URL
    /// (repeated, or comma-separated). The teammates this lead spawns are
    /// given these besides its own, and follow whichever leads.
    #[arg(long, value_name = "URL", value_delimiter = ',')]
    peer: Vec<String>,
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
    /// Approve no plan of a teammate whose commands run unconfined
    /// (`teammate --sandbox none`) or that did not say how they run: its
    /// plans are rejected with that reason, whoever approves them.
    #[arg(long)]
    require_sandbox: bool,
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

/// The server's TLS, if `--tls-cert` and `--tls-key` ask for it.
fn server_tls(args: &ServeArgs) -> anyhow::Result<Option<crate::tls::ServerTls>> {
    Ok(match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(crate::tls::ServerTls::load(&crate::tls::TlsFiles {
            cert,
            key,
            client_ca: args.client_ca.as_deref(),
        })?),
        _ => None,
    })
}

/// `lead serve`: checks the flags, opens the store, binds, says where it
/// listens, and serves until SIGINT or SIGTERM.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let endpoint = args.otlp_endpoint.clone();
    // The last spans and metrics go out before the lead exits.
    mesh_telemetry::exporting("mesh-lead", endpoint.as_deref(), serve_with(args))
        .await
        .map_err(|e| anyhow::anyhow!(e))?
}

/// What a lead says once it can serve (on PostgreSQL: once it holds the
/// lease, or knows another does): its address in the state dir, then
/// `listening on HOST:PORT` and `console on URL`, each once.
pub(super) struct Announce<'a> {
    state: &'a StateDir,
    addr: SocketAddr,
    lead_url: String,
    console: Option<String>,
    said: bool,
}

impl Announce<'_> {
    /// Says it, unless it was said.
    pub(super) fn now(&mut self) -> anyhow::Result<()> {
        use std::io::Write as _;
        if self.said {
            return Ok(());
        }
        self.said = true;
        self.state
            .write_addr(&self.addr.to_string(), &self.lead_url)?;
        println!("listening on {}", self.addr);
        if let Some(console) = &self.console {
            println!("console on {console}");
        }
        std::io::stdout().flush()?;
        Ok(())
    }
}

async fn serve_with(args: ServeArgs) -> anyhow::Result<()> {
    // First: a signal from here on stops the lead, status 0, whatever it
    // is doing (standing by, opening the store, restoring the team).
    let stop = shared::signal::stop_watch()?;
    let approval = args.approval.clone().load()?;
    let state = StateDir::create(&args.state_dir)?;
    let a2a = a2a::checked(&args)?;
    let tokens = Tokens {
        join: state.token(args.join_token.clone(), JOIN_TOKEN_FILE)?,
        operator: state.token(args.operators.unnamed()?, OPERATOR_TOKEN_FILE)?,
        named: args.operators.named()?,
        oidc: args.operators.oidc().await?,
        a2a_open: a2a.open,
    };
    let tls = server_tls(&args)?;
    exposed("--listen", args.listen, tls.is_some(), args.insecure)?;
    let console_addr = console_addr(&args, tls.is_some())?;
    let listener = std::sync::Arc::new(server::bind(args.listen)?);
    let addr = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let lead_url = format!("{scheme}://{}", connect_addr(addr)?);
    let console = match console_addr {
        None => None,
        Some(http) => Some(std::sync::Arc::new(
            tokio::net::TcpListener::bind(http)
                .await
                .map_err(|e| anyhow::anyhow!("--http {http}: {e}"))?,
        )),
    };
    let console_url = match &console {
        Some(listener) => console_url(scheme, listener.local_addr()?, args.advertise.as_deref())?,
        None => String::new(),
    };
    let console_sign_in = match &console {
        Some(_) => args.operators.sign_in(&console_url)?,
        None => None,
    };
    let standing = Standing {
        role: Role::Sole,
        url: args.advertise.clone().unwrap_or_else(|| lead_url.clone()),
        leader_url: args.advertise.clone().unwrap_or_else(|| lead_url.clone()),
        leader_console: console_url.clone(),
        ..Standing::default()
    };
    let at = leadership::Answering {
        grpc: &listener,
        console: console.as_deref(),
        tls: tls.as_ref(),
    };
    let mut announce = Announce {
        state: &state,
        addr,
        lead_url: lead_url.clone(),
        console: console.as_ref().map(|_| console_url.clone()),
        said: false,
    };
    let (store, leading, standing) =
        store::open(&args, &state, at, standing, &mut announce, stop.clone()).await?;
    let repo = match &args.repo {
        Some(path) => Some(std::sync::Arc::new(
            crate::git::Repo::open(path, args.branch.as_deref()).await?,
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
    hub.notify = args
        .operators
        .notify(console.as_ref().map(|_| console_url.as_str()))?;
    let keepalive = server::Keepalive {
        interval: seconds("--keepalive", args.keepalive)?,
        timeout: seconds("--keepalive", args.keepalive)? + Duration::from_secs(1),
    };
    let connections = server::ConnLimits {
        max: server::connection_cap("--max-connections", args.max_connections)?,
        handshake: seconds("--handshake-timeout", args.handshake_timeout)?,
        idle: seconds("--idle-timeout", args.idle_timeout)?,
        per_address: args.max_connections_per_address.max(1),
    };
    // What the lead serves with, each time it leads.
    let config = |store, standing| crate::Config {
        hub: hub.clone(),
        store,
        tokens: tokens.clone(),
        keepalive,
        connections,
        standing,
        a2a_card: a2a.card.clone(),
        a2a_push_allow: a2a.push_allow.clone(),
        console_sign_in: console_sign_in.clone(),
    };
    // A lead on PostgreSQL said so before it waited for the lease.
    announce.now()?;
    let listeners = crate::Listeners {
        grpc: listener.clone(),
        console: console.clone(),
        tls: tls.clone(),
    };
    let Some(leading) = leading else {
        let stop = async {
            shared::signal::stopped(stop).await;
            crate::hub::Stop::Stop
        };
        crate::run(listeners, config(store, standing), stop).await?;
        return Ok(());
    };
    store::take_turns(store, leading, &args, at, stop, listeners, config).await
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

/// Where the console listening on `addr` is reached: at the host of
/// `--advertise` when it is given (what other machines dial), else as the
/// gRPC address is.
fn console_url(scheme: &str, addr: SocketAddr, advertise: Option<&str>) -> anyhow::Result<String> {
    let advertised = advertise
        .and_then(|url| url.parse::<http::Uri>().ok())
        .and_then(|uri| uri.host().map(str::to_owned));
    Ok(match advertised {
        Some(host) => format!("{scheme}://{host}:{}/", addr.port()),
        None => format!("{scheme}://{}/", connect_addr(addr)?),
    })
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

/// How the hub behaves, from the flags.
fn hub_config(
    args: &ServeArgs,
    approval: Approval,
    state: &StateDir,
    tokens: &Tokens,
    lead_url: &str,
    tls: bool,
) -> anyhow::Result<HubConfig> {
    if !(args.join_rate.is_finite() && args.join_rate >= 0.0) {
        anyhow::bail!(
            "--join-rate: {} is not a rate (joins a second, 0 or more)",
            args.join_rate
        )
    }
    Ok(HubConfig {
        approval,
        owners: args.operators.owners()?,
        notify: None,
        shutdown_deadline: Duration::from_secs(args.shutdown_deadline),
        spawner: Some(spawner::spawner(args, state, tokens, lead_url, tls)?),
        grace: seconds("--grace", args.grace)?,
        stop_wait: seconds("--stop-wait", args.stop_wait)?,
        shared_store: matches!(args.store, StoreArg::Postgres(_)),
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
        require_sandbox: args.require_sandbox,
    })
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
