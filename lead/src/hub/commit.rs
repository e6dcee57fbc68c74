//! The hub's side of the group commit ([`crate::committer`]): replies held
//! until their batch is durable, the changes a batch takes, and letting a
//! batch out.

use super::{Hub, Reply};
use crate::{
    committer::{commit_to, measured, Batch, Committer},
    error::HubError,
    inboxes::Flushed,
    store::{Change, StoreError},
};

/// Whether another worker of the runtime runs the other tasks while the
/// hub's waits on the disk: then the hub commits on its own worker, blocking
/// it for the flush. Handing the worker off for the flush
/// (`block_in_place`) wakes a thread to take it over and sends every reply
/// after across threads: that cost the sequential plan handshake on SQLite
/// 15% of the lead's CPU and 9% of its rate (`bench --against`). With one
/// worker, or with tasks the hub has just woken waiting on its worker, the
/// hand-off keeps them moving while the disk flushes.
fn spare_worker() -> bool {
    tokio::runtime::Handle::try_current().is_ok_and(|rt| rt.metrics().num_workers() > 1)
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

    /// Every change since the last batch closed: the recorded ones (the
    /// inboxes'), then the team's (each member and request touched, once).
    fn take_changes(&mut self) -> Vec<Change> {
        let mut changes = std::mem::take(&mut self.changes);
        changes.extend(self.team.take_changes().into_iter().map(Change::Team));
        self.record.seal(&mut changes, self.now());
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
                let last = self.team.members.get(&name)?.last_seq;
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
        self.advance_from(quiet, false)
    }

    /// [`Hub::advance`], `woke`: a batch was let out just before, so tasks
    /// it woke wait on the hub's worker (one in a slot no other worker
    /// takes from) until the hub yields.
    fn advance_from(&mut self, quiet: bool, mut woke: bool) -> Result<(), StoreError> {
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
                woke = true;
                continue;
            }
            let batch = self.close();
            match &mut self.committer {
                Committer::Inline(store) => {
                    measured(|| store.commit(&changes))?;
                    changes.clear();
                    self.changes = changes;
                    self.release(batch);
                }
                Committer::Thread { store, .. } if quiet => {
                    if !woke && spare_worker() {
                        commit_to(store, &changes)?;
                    } else {
                        tokio::task::block_in_place(|| commit_to(store, &changes))?;
                    }
                    changes.clear();
                    self.changes = changes;
                    self.release(batch);
                    woke = true;
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
        let mut woke = false;
        if let Committer::Thread { in_flight, .. } = &mut self.committer {
            if let Some(batch) = in_flight.take() {
                self.release(batch);
                woke = true;
            }
        }
        self.advance_from(quiet, woke)
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
        for (name, upto) in batch.streams {
            let flushed = self.inboxes.get_mut(&name).map(|i| i.flush(&name, upto));
            if flushed == Some(Flushed::Gone) {
                self.stream_lost(&name);
            }
        }
        self.watchers.send(batch.events);
        for reply in batch.replies {
            reply();
        }
    }
}
