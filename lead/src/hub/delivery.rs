//! Putting envelopes in inboxes and events before the watchers: one
//! recipient, or a fan-out whose body is stored and held once for all.

use mesh_core::{
    effect::{Envelope, Message, Notice},
    names::{EVERYONE, LEAD},
};

use super::Hub;
use crate::{
    inboxes::{Entry, Payload, SharedBody},
    store::Change,
};

impl Hub {
    /// Tells every watcher `notice` once the batch is durable (see
    /// [`Hub::release`]); a watcher that cannot keep up is dropped.
    pub(super) fn emit(&mut self, notice: Notice) {
        if self.watchers.is_empty() {
            return;
        }
        self.forming.events.push((self.now(), notice));
    }

    /// Puts an envelope from `from` to `to` in `to`'s inbox (or, for `lead`,
    /// only in the event stream) and tells the watchers.
    pub(super) fn deliver(
        &mut self,
        from: &str,
        to: &str,
        message_id: Option<String>,
        body: Message,
    ) {
        let message_id = message_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        if to == LEAD {
            if !self.watchers.is_empty() {
                self.emit(Notice::Envelope(Box::new(Envelope {
                    seq: 0,
                    message_id,
                    from: from.to_owned(),
                    to: LEAD.to_owned(),
                    sent_at_unix_ms: self.now(),
                    message: body,
                })));
            }
            return;
        }
        let entry = Entry {
            seq: 0,
            message_id,
            from: from.to_owned(),
            sent_at_unix_ms: self.now(),
            payload: Payload::own(body),
        };
        let Some(seq) = self.team.members.next_seq(to) else {
            return;
        };
        let Some(stored) = self.inboxes.push(to, Entry { seq, ..entry }) else {
            return;
        };
        let record = stored.record(to);
        let event = (!self.watchers.is_empty()).then(|| stored.notice(to));
        self.changes.push(Change::Envelope(record));
        self.forming.streams.insert(to.to_owned());
        if let Some(envelope) = event {
            self.emit(Notice::Envelope(Box::new(envelope)));
        }
    }

    /// Tells the watchers, if any, of an envelope to `to`.
    pub(super) fn emit_envelope(&mut self, entry: &Entry, to: &str) {
        if !self.watchers.is_empty() {
            self.emit(Notice::Envelope(Box::new(entry.notice(to))));
        }
    }

    /// Puts one envelope from `from` in the inbox of each of `recipients`,
    /// its body stored and held once for them all, and tells the watchers once
    /// (an envelope to `*`, with no `seq`).
    pub(super) fn fan_out(
        &mut self,
        from: &str,
        recipients: &[String],
        message_id: String,
        body: Message,
    ) {
        let id = self.next_body_id;
        self.next_body_id += 1;
        let shared = SharedBody::new(id, body);
        self.changes.push(Change::SharedBody {
            id,
            body: shared.body.clone(),
        });
        let entry = Entry {
            seq: 0,
            message_id,
            from: from.to_owned(),
            sent_at_unix_ms: self.now(),
            payload: Payload::Shared(shared),
        };
        for to in recipients {
            let Some(seq) = self.team.members.next_seq(to) else {
                continue;
            };
            if let Some(stored) = self.inboxes.push(
                to,
                Entry {
                    seq,
                    ..entry.clone()
                },
            ) {
                self.changes.push(Change::Envelope(stored.record(to)));
                self.forming.streams.insert(to.clone());
            }
        }
        self.emit_envelope(&entry, EVERYONE);
    }

    /// Tells the watchers how `name` stands now.
    pub(super) fn emit_member(&mut self, name: &str) {
        if self.watchers.is_empty() {
            return;
        }
        if let Some(view) = self.team.member_view(name) {
            self.emit(Notice::Member(Box::new(view)));
        }
    }
}
