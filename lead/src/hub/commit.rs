//! Pipelined group commit. The changes of a burst of commands go to the
//! store in one transaction, and only then are that burst's replies, events
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

use prost::Message as _;
use shared::pb;
use tokio::sync::mpsc;

use super::{Hub, Reply};
use crate::{
    error::HubError,
    outbox::Refused,
    store::{Change, Store, StoreError},
};

/// What the commands since the last batch closed will let out.
#[derive(Default)]
pub(super) struct Forming {
    /// Replies, in order.
    replies: Vec<Box<dyn FnOnce() + Send>>,
    /// Events, in order.
    pub(super) events: Vec<pb::Event>,
    /// Members whose streams have envelopes to hand out.
    pub(super) streams: HashSet<String>,
}

impl Forming {
    fn is_empty(&self) -> bool {
        self.replies.is_empty() && self.events.is_empty() && self.streams.is_empty()
    }
}

/// A closed batch: what it lets out once its changes are durable.
pub(super) struct Batch {
    replies: Vec<Box<dyn FnOnce() + Send>>,
    events: Vec<pb::Event>,
    /// Each member's stream gets the envelopes up to this seq.
    streams: Vec<(String, u64)>,
}

/// Who writes to the store.
pub(super) enum Committer {
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
    pub(super) fn new(store: Box<dyn Store>) -> Self {
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
    pub(super) fn close(&mut self) {
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
    pub(super) fn busy(&self) -> bool {
        matches!(
            self,
            Committer::Thread {
                in_flight: Some(_),
                ..
            }
        )
    }

    /// The result of the batch in flight, once the committer has it.
    pub(super) async fn durable(&mut self) -> Result<Vec<Change>, StoreError> {
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
fn commit_to(store: &Mutex<Box<dyn Store>>, changes: &[Change]) -> Result<(), StoreError> {
    store
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .commit(changes)
}

impl Hub {
    /// Holds a reply until the changes of this batch are committed.
    pub(super) fn reply<T: Send + 'static>(
        &mut self,
        reply: Reply<T>,
        result: Result<T, HubError>,
    ) {
        self.forming.replies.push(Box::new(move || {
            let _ = reply.send(result);
        }));
    }

    /// Every change since the last batch closed: the recorded ones, and each
    /// member and request touched, once.
    fn take_changes(&mut self) -> Vec<Change> {
        let mut changes = std::mem::take(&mut self.changes);
        for name in self.roster.take_touched() {
            if let Some(member) = self.roster.get(&name) {
                changes.push(Change::Member(member.record()));
            }
        }
        changes.extend(self.team.take_changes().into_iter().map(Change::Team));
        changes
    }

    /// Closes the forming batch: what it lets out, each stream up to the
    /// envelopes it holds now.
    fn close(&mut self) -> Batch {
        let forming = std::mem::take(&mut self.forming);
        let streams = forming
            .streams
            .into_iter()
            .filter_map(|name| {
                let last = self.roster.get(&name)?.last_seq;
                Some((name, last))
            })
            .collect();
        Batch {
            replies: forming.replies,
            events: forming.events,
            streams,
        }
    }

    /// Unless a batch is in flight: closes the forming one and commits it
    /// (inline, or hands it to the committer), or lets it out at once if it
    /// changed nothing. `quiet`: no command is waiting, so the hub commits
    /// itself rather than hand the batch to the committer and back.
    pub(super) fn advance(&mut self, quiet: bool) -> Result<(), StoreError> {
        while !self.committer.busy() {
            let mut changes = self.take_changes();
            if changes.is_empty() {
                // Nothing to wait for: what it read is durable already.
                self.changes = changes;
                if self.forming.is_empty() {
                    return Ok(());
                }
                let batch = self.close();
                self.release(batch);
                continue;
            }
            let batch = self.close();
            match &mut self.committer {
                Committer::Inline(store) => {
                    store.commit(&changes)?;
                    changes.clear();
                    self.changes = changes;
                    self.release(batch);
                }
                Committer::Thread { store, .. } if quiet => {
                    tokio::task::block_in_place(|| commit_to(store, &changes))?;
                    changes.clear();
                    self.changes = changes;
                    self.release(batch);
                }
                Committer::Thread {
                    batches, in_flight, ..
                } => {
                    batches.send(changes).map_err(|_| StoreError::Stopped)?;
                    *in_flight = Some(batch);
                }
            }
        }
        Ok(())
    }

    /// The batch in flight is durable (or failed): lets it out, then sends
    /// the next.
    pub(super) fn committed(
        &mut self,
        result: Result<Vec<Change>, StoreError>,
        quiet: bool,
    ) -> Result<(), StoreError> {
        let buffer = result?;
        if self.changes.is_empty() && self.changes.capacity() < buffer.capacity() {
            // Keep the larger buffer's room for the next batch.
            self.changes = buffer;
        }
        if let Committer::Thread { in_flight, .. } = &mut self.committer {
            if let Some(batch) = in_flight.take() {
                self.release(batch);
            }
        }
        self.advance(quiet)
    }

    /// Waits for the batch in flight and commits what is left: for stopping.
    pub(super) async fn settle(&mut self) -> Result<(), StoreError> {
        loop {
            if self.committer.busy() {
                let result = self.committer.durable().await;
                self.committed(result, false)?;
            } else {
                self.advance(false)?;
                if !self.committer.busy() {
                    return Ok(());
                }
            }
        }
    }

    /// After its commit: hands out a batch's envelopes, events and replies.
    fn release(&mut self, batch: Batch) {
        let grace_until = self.grace_until();
        for (name, upto) in batch.streams {
            let dropped = self
                .roster
                .live_mut(&name)
                .is_some_and(|m| !m.flush(grace_until, upto));
            if dropped {
                self.track_grace(&name, None);
                self.emit_member(&name);
            }
        }
        if self.watchers.is_empty() {
            drop(batch.events);
        } else {
            for event in batch.events {
                let bytes = event.encoded_len();
                self.watchers
                    .retain(|w| match w.try_send(event.clone(), bytes) {
                        Ok(()) => true,
                        Err(Refused::Full) => {
                            tracing::warn!(
                                "a watcher fell --stream-max-bytes behind; its stream is ended"
                            );
                            w.end(tonic::Status::resource_exhausted(format!(
                                "watch: this watcher did not read {} bytes of events \
                                 (--stream-max-bytes); its stream ends here and what \
                                 follows is not sent (ListTeam and ListRequests tell the state)",
                                self.config.stream_max_bytes
                            )));
                            false
                        }
                        Err(Refused::Gone) => false,
                    });
            }
        }
        for reply in batch.replies {
            reply();
        }
    }
}
