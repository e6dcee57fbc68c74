//! Group commit: the changes of a burst of commands go to the store in one
//! transaction, and only then are their replies, envelopes and events let out.

use super::{Hub, Reply};
use crate::{
    error::HubError,
    store::{Change, StoreError},
};

impl Hub {
    /// Holds a reply until the changes of this burst are committed.
    pub(super) fn reply<T: Send + 'static>(
        &mut self,
        reply: Reply<T>,
        result: Result<T, HubError>,
    ) {
        self.replies.push(Box::new(move || {
            let _ = reply.send(result);
        }));
    }

    /// Commits every change since the last commit, in one transaction.
    pub(super) fn commit(&mut self) -> Result<(), StoreError> {
        let mut changes = std::mem::take(&mut self.changes);
        for name in self.roster.take_touched() {
            if let Some(member) = self.roster.get(&name) {
                changes.push(Change::Member(member.record()));
            }
        }
        let mut ids = self.tracker.take_touched();
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            if let Some(request) = self.tracker.get(&id) {
                changes.push(Change::Request(Box::new(request.clone())));
            }
        }
        if changes.is_empty() {
            self.changes = changes;
            return Ok(());
        }
        let store = &mut self.store;
        let committed = if store.blocks() {
            tokio::task::block_in_place(|| store.commit(&changes))
        } else {
            store.commit(&changes)
        };
        // Keep the buffer's room for the next burst.
        changes.clear();
        self.changes = changes;
        committed
    }

    /// After a commit: hands out envelopes, events and replies.
    pub(super) fn flush(&mut self) {
        let grace_until = self.grace_until();
        for name in std::mem::take(&mut self.dirty_streams) {
            let dropped = self
                .roster
                .live_mut(&name)
                .is_some_and(|m| !m.flush(grace_until));
            if dropped {
                self.track_grace(&name, None);
                self.emit_member(&name);
            }
        }
        if self.watchers.is_empty() {
            self.events.clear();
        } else {
            for event in self.events.drain(..) {
                self.watchers
                    .retain(|w| w.try_send(Ok(event.clone())).is_ok());
            }
        }
        for reply in self.replies.drain(..) {
            reply();
        }
    }
}
