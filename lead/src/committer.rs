//! Pipelined group commit: the batches and the committer (the hub's side,
//! forming batches and letting them out, is `hub/commit.rs`). The changes of
//! a burst of commands go to the store in one transaction, and only then are that burst's replies, events
//! and envelopes let out. A store that waits for the disk commits on a thread
//! of its own (the committer, which owns only the store): while it flushes
//! one batch, the hub keeps handling commands and forms the next, which goes
//! to the committer as soon as the first is durable. At most one batch is in
//! flight; batches are let out in order, each after its own flush. When no
//! command is waiting, there is nothing to overlap: the hub then commits
//! itself, sparing the two thread hand-offs.
//!
//! ```text
//! commands --> hub (state) --changes--> committer --flush--> disk
//!                 ^                          |
//!                 +------- durable ----------+
//!          replies, events, envelopes <= that batch's seqs go out
//! ```

use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
};

use mesh_core::effect::Notice;
use tokio::sync::mpsc;

use crate::store::{Change, Store, StoreError};

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

/// Who writes to the store.
pub(crate) enum Committer {
    /// In the hub's task: a store that does not wait on I/O (memory).
    Inline(Box<dyn Store>),
    /// On a thread of its own, one batch at a time (or by the hub itself
    /// when it has nothing else to do).
    Thread {
        /// The store, shared with the thread.
        store: Arc<Mutex<Box<dyn Store>>>,
        /// Batches to commit.
        batches: std::sync::mpsc::Sender<Vec<Change>>,
        /// Each batch's result, in order, with its buffer back.
        done: mpsc::UnboundedReceiver<Result<Vec<Change>, StoreError>>,
        /// The batch being committed.
        in_flight: Option<Batch>,
        /// The thread, to wait for when the lead stops.
        thread: Option<std::thread::JoinHandle<()>>,
    },
}

impl std::fmt::Debug for Committer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Committer::Inline(store) => f.debug_tuple("Inline").field(store).finish(),
            Committer::Thread { in_flight, .. } => f
                .debug_struct("Thread")
                .field("in_flight", &in_flight.is_some())
                .finish(),
        }
    }
}

impl Committer {
    /// Commits inline if `store` does not block, else on a thread it owns.
    pub(crate) fn new(store: Box<dyn Store>) -> Self {
        if !store.blocks() {
            return Committer::Inline(store);
        }
        let store = Arc::new(Mutex::new(store));
        let (batches, incoming) = std::sync::mpsc::channel::<Vec<Change>>();
        let (results, done) = mpsc::unbounded_channel();
        let shared = store.clone();
        std::thread::Builder::new()
            .name("mesh-committer".into())
            .spawn(move || {
                // Ends when the hub drops its sender.
                for mut changes in incoming {
                    let result = commit_to(&shared, &changes).map(|()| {
                        changes.clear();
                        changes
                    });
                    let failed = result.is_err();
                    if results.send(result).is_err() || failed {
                        return;
                    }
                }
            })
            .map_or_else(
                |e| {
                    tracing::error!(error = %e, "cannot start the committer thread");
                    Committer::Thread {
                        store: store.clone(),
                        batches: std::sync::mpsc::channel().0,
                        done: mpsc::unbounded_channel().1,
                        in_flight: None,
                        thread: None,
                    }
                },
                |thread| Committer::Thread {
                    store: store.clone(),
                    batches,
                    done,
                    in_flight: None,
                    thread: Some(thread),
                },
            )
    }

    /// Stops the committer thread and waits for it, so that the store is
    /// closed (SQLite checkpoints its WAL into the database) when the hub
    /// that holds the last reference to it is dropped, before the process
    /// exits. Call it once nothing is in flight.
    pub(crate) fn close(&mut self) {
        if let Committer::Thread {
            batches, thread, ..
        } = self
        {
            // A closed channel ends the thread's loop.
            *batches = std::sync::mpsc::channel().0;
            if let Some(thread) = thread.take() {
                if tokio::task::block_in_place(|| thread.join()).is_err() {
                    tracing::error!("the committer thread panicked");
                }
            }
        }
    }

    /// Whether a batch is being committed.
    pub(crate) fn busy(&self) -> bool {
        matches!(
            self,
            Committer::Thread {
                in_flight: Some(_),
                ..
            }
        )
    }

    /// The result of the batch in flight, once the committer has it.
    pub(crate) async fn durable(&mut self) -> Result<Vec<Change>, StoreError> {
        match self {
            Committer::Thread { done, .. } => match done.recv().await {
                Some(result) => result,
                None => Err(StoreError::Stopped),
            },
            Committer::Inline(_) => std::future::pending().await,
        }
    }
}

/// Commits `changes` to the shared store (a panic elsewhere while holding it
/// does not stop the lead from committing).
pub(crate) fn commit_to(
    store: &Mutex<Box<dyn Store>>,
    changes: &[Change],
) -> Result<(), StoreError> {
    measured(|| {
        store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .commit(changes)
    })
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
