//! `lead serve --store`: where state is kept, and a lead's name in a
//! shared PostgreSQL store's lease.

use tokio::sync::watch;

use super::{seconds, ServeArgs};
use crate::{
    leadership::{self, Answering, Leading, Role, Standing},
    state::StateDir,
    store::{MemoryStore, PgTarget, SqliteStore, Storage},
};

/// `--store`: where state is kept.
#[derive(Debug, Clone)]
pub(super) enum StoreArg {
    /// `<state-dir>/mesh.db`: survives restarts.
    Sqlite,
    /// Memory: gone when the lead stops.
    Memory,
    /// A PostgreSQL database several leads may share.
    Postgres(Box<PgTarget>),
}

pub(super) fn store_arg(value: &str) -> Result<StoreArg, String> {
    match value {
        "sqlite" => Ok(StoreArg::Sqlite),
        "memory" => Ok(StoreArg::Memory),
        url if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            PgTarget::parse("--store", url)
                .map(|target| StoreArg::Postgres(Box::new(target)))
                .map_err(|e| e.to_string())
        }
        other => Err(format!(
            "{other:?} is not sqlite, memory or a postgres:// URL"
        )),
    }
}

/// This lead's name in a PostgreSQL store's lease: the host's name and an
/// id kept in the state dir, so a restarted lead takes its lease back at once.
fn holder(state: &StateDir) -> anyhow::Result<String> {
    let id = state.token(None, "lead.id")?;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let short: String = id.chars().take(8).collect();
    Ok(format!("{}/{short}", host.trim()))
}

/// Opens the store `--store` names. On PostgreSQL this lead takes the lease
/// if it is free before it says it listens (`announce`), so that a client
/// that calls at once is served as on SQLite; if another lead holds it,
/// this one says it listens, then `standby; active: URL`, and stands by,
/// answering where `at` says, until it holds the lease, or until a stop
/// signal (`stop`), which ends the process with status 0. With the store:
/// the lease held (on PostgreSQL), and what this lead says of itself
/// (`standing`, as a sole lead, made true for the store).
pub(super) async fn open(
    args: &ServeArgs,
    state: &StateDir,
    at: Answering<'_>,
    mut standing: Standing,
    announce: &mut super::Announce<'_>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<(Storage, Option<Leading>, watch::Receiver<Standing>)> {
    let target = match &args.store {
        StoreArg::Memory => {
            standing.store = "memory (nothing is kept)".into();
            return Ok((
                Storage::Local(Box::new(MemoryStore)),
                None,
                watch::channel(standing).1,
            ));
        }
        StoreArg::Sqlite => {
            standing.store = format!("sqlite {}", state.root.display());
            let store = SqliteStore::open(&state.root, args.sync.into())?;
            return Ok((
                Storage::Local(Box::new(store)),
                None,
                watch::channel(standing).1,
            ));
        }
        StoreArg::Postgres(target) => target,
    };
    let plan = leadership::Plan {
        target: PgTarget::clone(target),
        holder: holder(state)?,
        url: standing.url.clone(),
        console: standing.leader_console.clone(),
        ttl: seconds("--lease", args.lease)?,
    };
    standing.role = Role::Standby;
    standing.store = target.to_string();
    standing.leader_url.clear();
    standing.leader_console.clear();
    let standing = watch::channel(standing).0;
    let leading = match leadership::first_look(&plan, &standing).await {
        Some(leading) => {
            announce.now()?;
            leading
        }
        None => {
            announce.now()?;
            let active = standing.borrow().leader_url.clone();
            if !active.is_empty() {
                println!("standby; active: {active}");
            }
            match leadership::acquire(plan, at, standing, stop.clone()).await {
                Some(leading) => leading,
                None => stopped_standing_by(),
            }
        }
    };
    let (store, leading) = fenced(leading, args, &stop).await?;
    let standing = leading.standing();
    Ok((store, Some(leading), standing))
}

/// On PostgreSQL: leads with `store` until the lease is lost, stands by on
/// the same sockets, and leads again when the lease is this lead's once
/// more, each time with the config `config` makes; a stop signal ends the
/// process with status 0 (an error here is one opening the store).
pub(super) async fn take_turns(
    mut store: Storage,
    mut leading: Leading,
    args: &ServeArgs,
    at: Answering<'_>,
    stop: watch::Receiver<bool>,
    listeners: crate::Listeners,
    config: impl Fn(Storage, watch::Receiver<Standing>) -> crate::Config,
) -> anyhow::Result<()> {
    loop {
        let config = config(store, leading.standing());
        let served = leading
            .serve(
                |shutdown| crate::run(listeners.clone(), config, shutdown),
                shared::signal::stopped(stop.clone()),
            )
            .await;
        let standby = match served {
            leadership::Served::Resigned => exit_now(),
            leadership::Served::SteppedDown(standby) => standby,
        };
        (store, leading) = lead_again(*standby, args, at, stop.clone()).await?;
    }
}

/// A lead that stepped down waits for the lease again, answering on `at`,
/// and opens the store fenced by its new epoch. A stop signal while it
/// waits ends the process with status 0.
async fn lead_again(
    standby: leadership::Standby,
    args: &ServeArgs,
    at: Answering<'_>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<(Storage, Leading)> {
    match standby.acquire(at, stop.clone()).await {
        Some(leading) => fenced(leading, args, &stop).await,
        None => stopped_standing_by(),
    }
}

/// The store, fenced by the epoch `leading` holds the lease at; a stop
/// signal that came as it took the lease lets the lease go at once and
/// ends the process with status 0.
async fn fenced(
    leading: Leading,
    args: &ServeArgs,
    stop: &watch::Receiver<bool>,
) -> anyhow::Result<(Storage, Leading)> {
    if *stop.borrow() {
        leading.resign().await;
        println!("stopped before serving");
        exit_now();
    }
    leading.say();
    let store = leading.store(args.sync.into()).await?;
    Ok((Storage::Postgres(Box::new(store)), leading))
}

/// A stop signal came while this lead stood by: it holds nothing.
fn stopped_standing_by() -> ! {
    println!("stopped while standing by");
    exit_now()
}

/// Ends the process with status 0 at once: the teammates a lead spawned
/// keep running for the next lead, which dropping the runtime (and their
/// sessions with it) would not let them.
fn exit_now() -> ! {
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    std::process::exit(0)
}
