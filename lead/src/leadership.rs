//! A lead on PostgreSQL (`lead serve --store postgres://...`): several may
//! start on one database, one leads. A lead is a *standby* until it holds
//! the lease: it answers every call UNAVAILABLE with the active lead's URL
//! in the `mesh-leader` metadata, polls the lease and wakes at once when
//! the active lead resigns (NOTIFY). Then it is *active*: it opens the
//! store fenced by its epoch, restores the team and serves, while a keeper
//! renews the lease. It *steps down* when it loses the lease (another lead
//! took it, or no renewal succeeded within the renew deadline on the
//! monotonic clock) or when a commit fails (fenced, or the database gone):
//! it says so and starts again, in the same process, as a standby. On
//! SIGTERM or SIGINT it resigns, so a standby takes over at once, and exits;
//! the teammates it spawned keep running and rejoin the new lead.

use std::{future::Future, time::Duration};

use tokio::{net::TcpListener, sync::watch, time::Instant};

use crate::store::{Fence, Lease, PgTarget, PostgresStore, StoreError, Sync};

mod standby;

/// The metadata key a standby names the active lead's URL under.
pub const LEADER_KEY: &str = "mesh-leader";

/// What a lead on PostgreSQL is asked to be.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The database.
    pub target: PgTarget,
    /// This lead's name in the lease row (stable across its restarts).
    pub holder: String,
    /// Where clients reach this lead (what a standby tells them).
    pub url: String,
    /// How long a lease lasts without renewal.
    pub ttl: Duration,
}

impl Plan {
    /// Renewals, this often.
    fn renew_every(&self) -> Duration {
        self.ttl / 5
    }

    /// The lead stops leading once its last successful renewal was sent
    /// this long ago (before the lease expires on the database's clock).
    fn renew_deadline(&self) -> Duration {
        self.ttl * 2 / 3
    }

    /// A standby looks at the lease this often (and when notified).
    fn poll_every(&self) -> Duration {
        (self.ttl / 4).min(Duration::from_secs(1))
    }
}

/// The lease, held.
#[derive(Debug)]
pub struct Leading {
    plan: Plan,
    lease: Lease,
    epoch: i64,
}

/// Waits, as a standby answering on `listener`, until this lead holds the
/// lease.
pub async fn acquire(
    plan: Plan,
    listener: &TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
) -> Leading {
    let (leader_tx, leader_rx) = watch::channel(String::new());
    let (stop_tx, stop_rx) = watch::channel(false);
    let answering = standby::answer(listener, tls, leader_rx, stop_rx);
    let waiting = async {
        let mut said = String::new();
        loop {
            match standby::wait_for_lease(&plan, &leader_tx, &mut said).await {
                Ok(leading) => {
                    let _ = stop_tx.send(true);
                    return leading;
                }
                Err(e) => {
                    if said != e.to_string() {
                        tracing::warn!(error = %e, "standby: cannot reach the database; trying again");
                        said = e.to_string();
                    }
                    tokio::time::sleep(plan.poll_every()).await;
                }
            }
        }
    };
    let (_, leading) = tokio::join!(answering, waiting);
    leading
}

impl Leading {
    /// The store, fenced by this lead's epoch.
    pub fn store(&self, sync: Sync) -> Result<PostgresStore, StoreError> {
        PostgresStore::open(
            &self.plan.target,
            sync,
            Fence {
                holder: self.plan.holder.clone(),
                epoch: self.epoch,
            },
        )
    }

    /// Serves with `run` (the lead, serving) until it stops, the lease is
    /// lost, or a stop signal: then steps down, or resigns and returns.
    pub async fn serve<E: std::fmt::Display>(
        self,
        run: impl Future<Output = Result<(), E>>,
        stop: impl Future<Output = ()>,
    ) -> anyhow::Result<()> {
        tokio::select! {
            result = run => match result {
                Ok(()) => step_down("the lead stopped serving"),
                Err(e) => step_down(&e.to_string()),
            },
            why = self.keep() => step_down(&why),
            () = stop => {
                match self.lease.resign(self.epoch).await {
                    Ok(()) => println!("resigned the lease (epoch {}); a standby takes over", self.epoch),
                    Err(e) => eprintln!("could not resign the lease ({e}); a standby takes over once it expires"),
                }
                // At once, before anything of the lead is dropped: the
                // teammates it spawned keep running for the next lead.
                use std::io::Write as _;
                let _ = std::io::stdout().flush();
                std::process::exit(0)
            }
        }
    }

    /// Renews the lease until it is lost: why.
    async fn keep(&self) -> String {
        let deadline = self.plan.renew_deadline();
        let mut renewed = Instant::now();
        let mut lease: Option<Lease> = None;
        loop {
            tokio::time::sleep(self.plan.renew_every()).await;
            let sent = Instant::now();
            if sent.duration_since(renewed) >= deadline {
                return format!(
                    "the lease was last renewed {:.1} s ago, past the renew deadline of {:.1} s",
                    sent.duration_since(renewed).as_secs_f64(),
                    deadline.as_secs_f64()
                );
            }
            let left = deadline.saturating_sub(sent.duration_since(renewed));
            let attempt = async {
                // The first connection, or a new one after a failure.
                let lease = match &lease {
                    Some(lease) => lease,
                    None => &self.lease,
                };
                lease.renew(self.epoch).await
            };
            let result = tokio::time::timeout(left, attempt).await;
            match result {
                Ok(Ok(true)) => renewed = sent,
                Ok(Ok(false)) => return "another lead took the lease".into(),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "could not renew the lease; trying again");
                    lease = Lease::connect(
                        &self.plan.target,
                        &self.plan.holder,
                        &self.plan.url,
                        self.plan.ttl,
                    )
                    .await
                    .ok();
                }
                Err(_) => {}
            }
        }
    }
}

/// Stops leading and starts again as a standby, in this process: nothing of
/// the active lead (its hub, its streams, its connections) goes on. The
/// teammates it spawned keep running and rejoin whoever leads.
fn step_down(why: &str) -> ! {
    use std::{io::Write as _, os::unix::process::CommandExt as _};
    println!("stepped down: {why}; starting again as a standby");
    let _ = std::io::stdout().flush();
    let err = std::process::Command::new("/proc/self/exe")
        .args(std::env::args_os().skip(1))
        .exec();
    eprintln!("could not start again as a standby: {err}");
    std::process::exit(1);
}
