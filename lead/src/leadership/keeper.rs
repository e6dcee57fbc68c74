//! The lease keeper: renews the lease from a thread of its own, on a
//! runtime of its own, over a connection of its own, so that nothing the
//! lead does (a commit that blocks its worker, a burst of calls, a
//! saturated machine's other runtime threads) delays a renewal. It stops
//! when the lease is lost (it says why), or when it is told to: then it
//! resigns the lease first if asked, which wakes the standbys at once.
//! Dropping the keeper without a word resigns too: a lead that stops
//! serving, however it stops, lets the lease go.

use tokio::{
    sync::{oneshot, watch},
    time::Instant,
};

use super::{Plan, Standing};
use crate::store::{Lease, StoreError};

/// How the keeper ended.
#[derive(Debug)]
enum Outcome {
    /// The lease was lost: why.
    Lost(String),
    /// Told to stop: whether it resigned, and how that went.
    Stopped(Option<Result<(), StoreError>>),
}

/// The keeper thread, while it runs.
#[derive(Debug)]
pub(super) struct Keeper {
    /// Tells it to stop; `true`: resign first.
    quit: Option<oneshot::Sender<bool>>,
    /// How it ended.
    done: oneshot::Receiver<Outcome>,
    /// Why the lease was lost, once it was.
    lost: Option<String>,
}

impl Keeper {
    /// Starts keeping the lease held at `epoch`; each renewal's expiry goes
    /// to `standing`.
    pub(super) fn start(
        plan: Plan,
        epoch: i64,
        standing: watch::Sender<Standing>,
    ) -> std::io::Result<Self> {
        let (quit, told) = oneshot::channel();
        let (ended, done) = oneshot::channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("mesh-lease".into())
            .spawn(move || {
                let outcome = runtime.block_on(run(plan, epoch, standing, told));
                let _ = ended.send(outcome);
            })?;
        Ok(Self {
            quit: Some(quit),
            done,
            lost: None,
        })
    }

    /// Completes once the lease is lost: why.
    pub(super) async fn lost(&mut self) -> String {
        if let Some(why) = &self.lost {
            return why.clone();
        }
        let why = match (&mut self.done).await {
            Ok(Outcome::Lost(why)) => why,
            Ok(Outcome::Stopped(_)) | Err(_) => "the lease keeper stopped".to_owned(),
        };
        self.lost = Some(why.clone());
        why
    }

    /// Stops renewing; with `resign`, lets the lease go first. `None`: it
    /// did not resign (not asked, or the lease was lost already).
    pub(super) async fn stop(mut self, resign: bool) -> Option<Result<(), StoreError>> {
        if self.lost.is_some() {
            return None;
        }
        if let Some(quit) = self.quit.take() {
            let _ = quit.send(resign);
        }
        match (&mut self.done).await {
            Ok(Outcome::Stopped(resigned)) => resigned,
            Ok(Outcome::Lost(why)) => {
                self.lost = Some(why);
                None
            }
            Err(_) => None,
        }
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        // Told nothing: it resigns, in its own thread, as it ends.
        if let Some(quit) = self.quit.take() {
            let _ = quit.send(true);
        }
    }
}

/// The keeper's life: renews until the lease is lost or it is told to stop.
async fn run(
    plan: Plan,
    epoch: i64,
    standing: watch::Sender<Standing>,
    told: oneshot::Receiver<bool>,
) -> Outcome {
    let mut lease = None;
    let resign = tokio::select! {
        why = keep(&plan, epoch, &standing, &mut lease) => return Outcome::Lost(why),
        told = told => told.unwrap_or(true),
    };
    if !resign {
        return Outcome::Stopped(None);
    }
    // The connection renewals went on, or a new one; not waited on forever.
    let resigned = tokio::time::timeout(plan.renew_deadline(), async {
        let lease = match lease {
            Some(lease) => lease,
            None => connect(&plan).await?,
        };
        lease.resign(epoch).await
    })
    .await
    .unwrap_or_else(|_| {
        Err(StoreError::Postgres(
            "the database did not answer in time".into(),
        ))
    });
    Outcome::Stopped(Some(resigned))
}

/// A connection for renewals. Their commits need not wait for the disk: a
/// renewal lost in a crash of the database only shortens the lease, and
/// every batch the lead writes is fenced by its epoch anyway.
async fn connect(plan: &Plan) -> Result<Lease, StoreError> {
    let lease = Lease::connect(&plan.target, &plan.holder, &plan.url, plan.ttl)
        .await?
        .with_console(&plan.console);
    lease.relax().await?;
    Ok(lease)
}

/// Renews the lease held at `epoch` until it is lost: why. Each renewal's
/// expiry goes to `standing`; `lease` is the connection renewals go on (a
/// new one after a failure or a renewal that did not answer in time).
async fn keep(
    plan: &Plan,
    epoch: i64,
    standing: &watch::Sender<Standing>,
    lease: &mut Option<Lease>,
) -> String {
    let deadline = plan.renew_deadline();
    let mut renewed = Instant::now();
    loop {
        tokio::time::sleep_until(renewed + plan.renew_every()).await;
        let sent = Instant::now();
        let since = sent.duration_since(renewed);
        if since >= deadline {
            return format!(
                "the lease was last renewed {:.1} s ago, past the renew deadline of {:.1} s",
                since.as_secs_f64(),
                deadline.as_secs_f64()
            );
        }
        // Connecting again counts against the deadline too.
        let attempt = async {
            let current = match lease.take() {
                Some(current) => current,
                None => connect(plan).await?,
            };
            let answer = current.renew(epoch).await;
            if answer.is_ok() {
                *lease = Some(current);
            }
            answer
        };
        match tokio::time::timeout(deadline - since, attempt).await {
            Ok(Ok(Some(expires))) => {
                let late = sent.duration_since(renewed + plan.renew_every());
                if late > plan.renew_every() {
                    tracing::warn!(
                        late_ms = u64::try_from(late.as_millis()).unwrap_or(u64::MAX),
                        "a lease renewal went out late"
                    );
                }
                renewed = sent;
                standing.send_modify(|s| s.lease_expires_unix_ms = expires);
            }
            Ok(Ok(None)) => return "another lead took the lease".into(),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "could not renew the lease; trying again");
                // Not at once: a failed attempt waits a tenth of a renewal.
                tokio::time::sleep(plan.renew_every() / 10).await;
            }
            Err(_) => {}
        }
    }
}
