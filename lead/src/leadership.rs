//! A lead on PostgreSQL (`lead serve --store postgres://...`): several may
//! start on one database, one leads. A lead is a *standby* until it holds
//! the lease: it answers every call UNAVAILABLE with the active lead's URL
//! in the `mesh-leader` metadata, polls the lease and wakes at once when
//! the active lead resigns (NOTIFY). Then it is *active*: it opens the
//! store fenced by its epoch, restores the team and serves, while a keeper
//! renews the lease. It *steps down* when it loses the lease (another lead
//! took it, or no renewal succeeded within the renew deadline on the
//! monotonic clock) or when a commit fails (fenced, or the database gone):
//! it says so and stands by again, in the same process, on the same
//! listening sockets (nothing is started again). On SIGTERM or SIGINT it
//! resigns, so a standby takes over at once, and exits; the teammates it
//! spawned keep running and rejoin the new lead.

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::{net::TcpListener, sync::watch};

use keeper::Keeper;

use crate::{
    hub::Stop,
    store::{Fence, PgTarget, PostgresStore, StoreError, Sync},
};

/// Why an active lead stops leading.
#[derive(Debug)]
enum Ending {
    /// It lost the lease: why.
    Lost(String),
    /// A stop signal: it resigns.
    Signal,
}

mod keeper;
mod standby;
mod standing;

pub use shared::leads::LEADER_KEY;
pub use standing::{Role, Standing, EPOCH_KEY, EXPIRES_KEY, ROLE_KEY};

/// What a lead on PostgreSQL is asked to be.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The database.
    pub target: PgTarget,
    /// This lead's name in the lease row (stable across its restarts).
    pub holder: String,
    /// Where clients reach this lead (what a standby tells them).
    pub url: String,
    /// Where its console is (empty when it has none): a standby's console
    /// links to the active lead's.
    pub console: String,
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

/// The lease, held, and kept by its keeper until it is lost or let go.
#[derive(Debug)]
pub struct Leading {
    plan: Plan,
    epoch: i64,
    keeper: Keeper,
    /// What this lead says of itself; the keeper keeps the expiry current.
    standing: watch::Sender<Standing>,
}

/// Where a standby answers: gRPC calls on `grpc`, page loads on `console`
/// (if the lead has one), with TLS if it is on.
#[derive(Debug, Clone, Copy)]
pub struct Answering<'a> {
    /// gRPC.
    pub grpc: &'a TcpListener,
    /// The console.
    pub console: Option<&'a TcpListener>,
    /// TLS for both.
    pub tls: Option<&'a crate::tls::ServerTls>,
}

/// One look at the lease before this lead says it listens: `Some` when it
/// was free and this lead holds it now; `None` when another lead holds it
/// (`standing` names it) or the database cannot be reached yet.
pub async fn first_look(plan: &Plan, standing: &watch::Sender<Standing>) -> Option<Leading> {
    standby::first_look(plan, standing).await
}

/// Waits, as a standby answering on `at`, until this lead holds the
/// lease; `standing` says what it is meanwhile, and then. `None`: a stop
/// signal came first (`stop`), and this lead holds nothing.
pub async fn acquire(
    plan: Plan,
    at: Answering<'_>,
    standing: watch::Sender<Standing>,
    stop: watch::Receiver<bool>,
) -> Option<Leading> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let answering = standby::answer(&at, standing.subscribe(), stop_rx);
    let waiting = async {
        let mut said = String::new();
        loop {
            // A stop ends the wait (a lease taken in that very instant
            // is left to expire).
            let looked = tokio::select! {
                looked = standby::wait_for_lease(&plan, &standing, &mut said) => looked,
                () = shared::signal::stopped(stop.clone()) => {
                    let _ = stop_tx.send(true);
                    return None;
                }
            };
            match looked {
                Ok(leading) => {
                    let _ = stop_tx.send(true);
                    return Some(leading);
                }
                Err(e) => {
                    standing.send_modify(|s| s.leader_url.clear());
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
    /// Says that this lead leads now.
    pub fn say(&self) {
        use std::io::Write as _;
        println!(
            "leading (epoch {}); restoring the team from {}",
            self.epoch, self.plan.target
        );
        let _ = std::io::stdout().flush();
    }

    /// Lets the lease go (a stop signal before this lead served): a
    /// standby takes over at once.
    pub async fn resign(self) {
        said_resigned(self.epoch, self.keeper.stop(true).await);
    }

    /// What this lead says of itself, kept current.
    pub fn standing(&self) -> watch::Receiver<Standing> {
        self.standing.subscribe()
    }

    /// The store, fenced by this lead's epoch.
    pub async fn store(&self, sync: Sync) -> Result<PostgresStore, StoreError> {
        PostgresStore::open(
            &self.plan.target,
            sync,
            Fence {
                holder: self.plan.holder.clone(),
                epoch: self.epoch,
            },
        )
        .await
    }

    /// Serves with `run` (the lead, given the future that says how it is
    /// to stop) until the lease is lost, a commit fails, or `stop` (a
    /// signal): then the lead steps down (every stream ends UNAVAILABLE,
    /// the children keep running) and says how it ended: on a signal the
    /// lease is let go ([`Served::Resigned`]); otherwise this lead stands
    /// by again, in this process, on the same sockets ([`Served::SteppedDown`]).
    pub async fn serve<E, R>(
        self,
        run: impl FnOnce(Pin<Box<dyn Future<Output = Stop> + Send>>) -> R,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> Served
    where
        E: std::fmt::Display,
        R: Future<Output = Result<(), E>>,
    {
        let Leading {
            plan,
            epoch,
            mut keeper,
            standing,
        } = self;
        let ending: Arc<Mutex<Option<Ending>>> = Arc::default();
        let asked = Arc::new(tokio::sync::Notify::new());
        let (lost_tx, lost_rx) = tokio::sync::oneshot::channel::<String>();
        let shutdown = {
            let ending = ending.clone();
            let asked = asked.clone();
            async move {
                let end = tokio::select! {
                    why = lost_rx => Ending::Lost(
                        why.unwrap_or_else(|_| "the lease keeper stopped".into()),
                    ),
                    () = stop => Ending::Signal,
                };
                let why = match &end {
                    Ending::Lost(why) => why.clone(),
                    Ending::Signal => "it was asked to stop; a standby takes over".into(),
                };
                if let Ok(mut ending) = ending.lock() {
                    *ending = Some(end);
                }
                asked.notify_one();
                Stop::StepDown(why)
            }
        };
        // Once asked, the streams and calls in flight get a moment to end.
        let bounded = async {
            asked.notified().await;
            tokio::time::sleep(Duration::from_secs(3)).await;
        };
        let serving = async {
            tokio::select! {
                result = run(Box::pin(shutdown)) => result.map_err(|e| e.to_string()),
                () = bounded => Ok(()),
            }
        };
        // The keeper says when the lease is lost; the lead goes on holding
        // the keeper, to stop it (and resign) however serving ends.
        let result = {
            tokio::pin!(serving);
            tokio::select! {
                result = &mut serving => result,
                why = keeper.lost() => {
                    let _ = lost_tx.send(why);
                    serving.await
                }
            }
        };
        let end = ending.lock().ok().and_then(|mut e| e.take());
        let why = match (end, result) {
            (Some(Ending::Signal), _) => {
                said_resigned(epoch, keeper.stop(true).await);
                return Served::Resigned;
            }
            (Some(Ending::Lost(why)), _) => {
                let _ = keeper.stop(false).await;
                why
            }
            (None, ended) => {
                // It stopped serving of itself (a commit failed, or the
                // server ended): the lease goes at once, not in a lapse.
                let why = ended
                    .err()
                    .unwrap_or_else(|| "the lead stopped serving".into());
                said_resigned(epoch, keeper.stop(true).await);
                why
            }
        };
        println!("stepped down: {why}; standing by again");
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        standing.send_modify(|s| {
            s.role = Role::Standby;
            s.leader_url.clear();
            s.leader_console.clear();
        });
        Served::SteppedDown(Box::new(Standby { plan, standing }))
    }
}

/// How serving as the active lead ended.
#[derive(Debug)]
pub enum Served {
    /// A stop signal: the lease was let go, a standby takes over, and this
    /// lead is to exit (the teammates it spawned keep running).
    Resigned,
    /// The lease was lost, or a commit failed: nothing of the active lead
    /// (its hub, its streams, its connections) goes on, and this lead
    /// stands by again. The teammates it spawned keep running and rejoin
    /// whoever leads.
    SteppedDown(Box<Standby>),
}

/// A lead that stepped down: what it needs to wait for the lease again.
#[derive(Debug)]
pub struct Standby {
    plan: Plan,
    standing: watch::Sender<Standing>,
}

impl Standby {
    /// Waits, answering on `at`, until this lead holds the lease again
    /// (`None`: a stop signal came first).
    pub async fn acquire(self, at: Answering<'_>, stop: watch::Receiver<bool>) -> Option<Leading> {
        acquire(self.plan, at, self.standing, stop).await
    }
}

/// Says how resigning went (`None`: the lease was lost already).
fn said_resigned(epoch: i64, resigned: Option<Result<(), StoreError>>) {
    match resigned {
        Some(Ok(())) => println!("resigned the lease (epoch {epoch}); a standby takes over"),
        Some(Err(e)) => {
            eprintln!("could not resign the lease ({e}); a standby takes over once it expires");
        }
        None => {}
    }
}
