//! Pipelined group commit: the batches and the committer (the hub's side,
//! forming batches and letting them out, is `hub/commit.rs`). The changes of
//! a burst of commands go to the store in one transaction, and only then are
//! that burst's replies, events and envelopes let out. A store that waits on
//! I/O is owned by a committer of its own: a thread for SQLite, whose calls
//! block; a task on the lead's runtime for PostgreSQL, whose client is
//! async. The hub sends it a batch and goes on handling commands, forming
//! the next, which goes as soon as the first is durable. At most one batch
//! is in flight; batches are let out in order, each after its own flush. A
//! store that keeps nothing (memory) commits in the hub's task.
//!
//! ```text
//! commands --> hub (state) --changes--> committer --flush--> disk
//!                 ^                          |
//!                 +------- durable ----------+
//!          replies, events, envelopes <= that batch's seqs go out
//! ```

use std::collections::HashSet;

use mesh_core::effect::Notice;
use tokio::sync::{mpsc, oneshot};

use crate::store::{Change, PostgresStore, Snapshot, Storage, Store, StoreError};

/// What the commands since the last batch closed will let out.
#[derive(Default)]
pub(crate) struct Forming {
    /// Replies, in order.
    pub(crate) replies: Vec<Box<dyn FnOnce() + Send>>,
    /// Events, in order.
    pub(crate) events: Vec<(i64, Notice)>,
    /// Members whose streams have envelopes to hand out.
    pub(crate) streams: HashSet<String>,
}

impl Forming {
    /// Whether it lets nothing out.
    pub(crate) fn is_empty(&self) -> bool {
        self.replies.is_empty() && self.events.is_empty() && self.streams.is_empty()
    }
}

/// A closed batch: what it lets out once its changes are durable.
pub(crate) struct Batch {
    /// Replies, in order.
    pub(crate) replies: Vec<Box<dyn FnOnce() + Send>>,
    /// Events, in order.
    pub(crate) events: Vec<(i64, Notice)>,
    /// Each member's stream gets the envelopes up to this seq.
    pub(crate) streams: Vec<(String, u64)>,
}

/// A batch's result, with its buffer back for the next.
type Committed = Result<Vec<Change>, StoreError>;

/// Who writes to the store.
pub(crate) enum Committer {
    /// In the hub's task: a store that does not wait on I/O (memory).
    Inline(Box<dyn Store>),
    /// A thread or a task that owns the store, one batch at a time.
    Owner {
        /// Batches to commit.
        batches: mpsc::UnboundedSender<Vec<Change>>,
        /// Each batch's result, in order.
        done: mpsc::UnboundedReceiver<Committed>,
        /// The batch being committed.
        in_flight: Option<Batch>,
        /// Told once the owner has closed the store and ended.
        ended: Option<oneshot::Receiver<()>>,
    },
}

impl std::fmt::Debug for Committer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Committer::Inline(store) => f.debug_tuple("Inline").field(store).finish(),
            Committer::Owner { in_flight, .. } => f
                .debug_struct("Owner")
                .field("in_flight", &in_flight.is_some())
                .finish(),
        }
    }
}

/// The owner's ends of the channels.
struct Owned {
    batches: mpsc::UnboundedReceiver<Vec<Change>>,
    results: mpsc::UnboundedSender<Committed>,
    ended: oneshot::Sender<()>,
}

impl Owned {
    /// Tells the hub how the batch `changes` went, with its buffer back:
    /// whether to go on (not after a failure, nor once the hub is gone).
    fn answer(&self, result: Result<(), StoreError>, mut changes: Vec<Change>) -> bool {
        let failed = result.is_err();
        let result = result.map(|()| {
            changes.clear();
            changes
        });
        self.results.send(result).is_ok() && !failed
    }
}

impl Committer {
    /// Loads what `storage` holds and starts its committer: inline for a
    /// store that does not block, else the owner its kind needs.
    pub(crate) async fn start(storage: Storage) -> Result<(Snapshot, Self), StoreError> {
        match storage {
            Storage::Local(mut store) if !store.blocks() => {
                let snapshot = store.load()?;
                Ok((snapshot, Committer::Inline(store)))
            }
            Storage::Local(store) => {
                let (committer, owned) = Self::owner();
                let (loaded_tx, loaded) = oneshot::channel();
                std::thread::Builder::new()
                    .name("mesh-committer".into())
                    .spawn(move || on_thread(store, loaded_tx, owned))?;
                let snapshot = loaded.await.map_err(|_| StoreError::Stopped)??;
                Ok((snapshot, committer))
            }
            Storage::Postgres(mut store) => {
                let snapshot = store.load().await?;
                let (committer, owned) = Self::owner();
                tokio::spawn(on_task(store, owned));
                Ok((snapshot, committer))
            }
        }
    }

    /// A committer whose store an owner holds, and the owner's ends.
    fn owner() -> (Self, Owned) {
        let (batches, batches_rx) = mpsc::unbounded_channel();
        let (results, done) = mpsc::unbounded_channel();
        let (ended_tx, ended) = oneshot::channel();
        let committer = Committer::Owner {
            batches,
            done,
            in_flight: None,
            ended: Some(ended),
        };
        let owned = Owned {
            batches: batches_rx,
            results,
            ended: ended_tx,
        };
        (committer, owned)
    }

    /// Stops the owner and waits until it has closed the store (SQLite
    /// checkpoints its WAL into the database), so that nothing of it is
    /// left when the hub is gone. Call it once nothing is in flight.
    pub(crate) async fn close(&mut self) {
        if let Committer::Owner { batches, ended, .. } = self {
            // A closed channel ends the owner's loop.
            *batches = mpsc::unbounded_channel().0;
            if let Some(ended) = ended.take() {
                let _ = ended.await;
            }
        }
    }

    /// Whether a batch is being committed.
    pub(crate) fn busy(&self) -> bool {
        matches!(
            self,
            Committer::Owner {
                in_flight: Some(_),
                ..
            }
        )
    }

    /// The result of the batch in flight, once the owner has it.
    pub(crate) async fn durable(&mut self) -> Committed {
        match self {
            Committer::Owner { done, .. } => match done.recv().await {
                Some(result) => result,
                None => Err(StoreError::Stopped),
            },
            Committer::Inline(_) => std::future::pending().await,
        }
    }
}

/// The committer thread of a store whose calls block: loads it, then
/// commits each batch until the hub closes the channel or a commit fails.
fn on_thread(
    mut store: Box<dyn Store>,
    loaded: oneshot::Sender<Result<Snapshot, StoreError>>,
    mut owned: Owned,
) {
    if loaded.send(store.load()).is_err() {
        return;
    }
    while let Some(changes) = owned.batches.blocking_recv() {
        let result = measured(|| store.commit(&changes));
        if !owned.answer(result, changes) {
            break;
        }
    }
    drop(store);
    let _ = owned.ended.send(());
}

/// The committer task of the PostgreSQL store, on the lead's runtime.
async fn on_task(mut store: Box<PostgresStore>, mut owned: Owned) {
    while let Some(changes) = owned.batches.recv().await {
        let started = mesh_telemetry::enabled().then(std::time::Instant::now);
        let result = store.commit(&changes).await;
        if let Some(started) = started {
            crate::telemetry::committed(started.elapsed().as_secs_f64());
        }
        if !owned.answer(result, changes) {
            break;
        }
    }
    drop(store);
    let _ = owned.ended.send(());
}

/// Runs one commit, timed for the metrics when exporting telemetry.
pub(crate) fn measured<T>(commit: impl FnOnce() -> T) -> T {
    if !mesh_telemetry::enabled() {
        return commit();
    }
    let started = std::time::Instant::now();
    let out = commit();
    crate::telemetry::committed(started.elapsed().as_secs_f64());
    out
}
