//! The hub's side of the group commit ([`crate::committer`]): replies held
//! until their batch is durable, the changes a batch takes, and letting a
//! batch out.

use super::{Hub, Reply};
use crate::{
    committer::{measured, Batch, Committer},
    error::HubError,
    inboxes::Flushed,
    store::{Change, StoreError},
};

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
    /// changed nothing.
    pub(super) fn advance(&mut self) -> Result<(), StoreError> {
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
                    measured(|| store.commit(&changes))?;
                    changes.clear();
                    self.changes = changes;
                    self.release(batch);
                }
                Committer::Owner {
                    batches, in_flight, ..
                } => {
                    batches.send(changes).map_err(|_| StoreError::Stopped)?;
                    *in_flight = Some(batch);
                }
            }
        }
        Ok(())
    }

    /// The batch in flight is durable (or failed): lets it out. The next
    /// goes with [`Hub::advance`], once the caller has taken the commands
    /// waiting, so that they go in it.
    pub(super) fn committed(
        &mut self,
        result: Result<Vec<Change>, StoreError>,
    ) -> Result<(), StoreError> {
        let buffer = result?;
        if self.changes.is_empty() && self.changes.capacity() < buffer.capacity() {
            // Keep the larger buffer's room for the next batch.
            self.changes = buffer;
        }
        if let Committer::Owner { in_flight, .. } = &mut self.committer {
            if let Some(batch) = in_flight.take() {
                self.release(batch);
            }
        }
        Ok(())
    }

    /// Waits for the batch in flight and commits what is left: for stopping.
    pub(super) async fn settle(&mut self) -> Result<(), StoreError> {
        loop {
            if self.committer.busy() {
                let result = self.committer.durable().await;
                self.committed(result)?;
                self.advance()?;
            } else {
                self.advance()?;
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
