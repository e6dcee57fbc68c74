//! Members and their inboxes: who is on the team, and what each has yet to read.

use shared::wire::*;
use std::{
    collections::{BTreeMap, HashMap, HashSet, VecDeque},
    sync::Arc,
};

use crate::{
    outbox::{self, Refused},
    store::{token_hash, EnvelopeRecord, MemberRecord, Snapshot},
};
use shared::{
    grant::Mode,
    lifecycle::{Event, Lifecycle},
    names::Name,
    pb::{self, envelope::Body},
};

/// Where a member's inbox stream sends envelopes; also how the hub ends it
/// early, with a status that says why.
pub(crate) type InboxSink = outbox::Sender<pb::Envelope>;

/// The most `Send` message ids remembered per sender, for deduplicating retries.
const REMEMBERED_MESSAGE_IDS: usize = 4_096;

/// What an envelope costs beyond its body, for byte budgets.
const ENVELOPE_OVERHEAD: usize = 48;

/// What an envelope costs for byte budgets, given the lengths of its sender,
/// its message id and its body.
pub(crate) fn envelope_bytes(from: usize, message_id: usize, body: usize) -> usize {
    ENVELOPE_OVERHEAD + from + message_id + body
}

/// A body every recipient of a fan-out (a broadcast, a termination notice)
/// shares: held and stored once, however many inboxes hold it.
#[derive(Debug)]
pub(crate) struct SharedBody {
    /// Its id in the store.
    pub(crate) id: u64,
    /// The body.
    pub(crate) body: Body,
    /// Its encoded size.
    pub(crate) bytes: usize,
    /// Whether an inbox holds it, so the lead counts it (once).
    held: std::sync::atomic::AtomicBool,
}

impl SharedBody {
    /// A new shared body.
    pub(crate) fn new(id: u64, body: Body) -> Arc<Self> {
        let bytes = body.encoded_len();
        Arc::new(Self {
            id,
            body,
            bytes,
            held: std::sync::atomic::AtomicBool::new(false),
        })
    }
}

/// What an inbox entry carries.
#[derive(Debug, Clone)]
pub(crate) enum Payload {
    /// A body of its own.
    Own(Body),
    /// A body shared with the other recipients of a fan-out.
    Shared(Arc<SharedBody>),
}

impl Payload {
    /// The body.
    pub(crate) fn body(&self) -> &Body {
        match self {
            Payload::Own(body) => body,
            Payload::Shared(shared) => &shared.body,
        }
    }

    /// The body's encoded size.
    fn bytes(&self) -> usize {
        match self {
            Payload::Own(body) => body.encoded_len(),
            Payload::Shared(shared) => shared.bytes,
        }
    }
}

/// One envelope in an inbox, not yet acknowledged.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// Its place in the inbox.
    pub(crate) seq: u64,
    /// The message id.
    pub(crate) message_id: String,
    /// Who sent it.
    pub(crate) from: String,
    /// When the lead accepted it.
    pub(crate) sent_at_unix_ms: i64,
    /// What it carries.
    pub(crate) payload: Payload,
}

impl Entry {
    /// The envelope as it goes to `to`.
    pub(crate) fn envelope(&self, to: &str) -> pb::Envelope {
        pb::Envelope {
            seq: self.seq,
            message_id: self.message_id.clone(),
            from: self.from.clone(),
            to: to.to_owned(),
            sent_at_unix_ms: self.sent_at_unix_ms,
            body: Some(self.payload.body().clone()),
        }
    }

    /// What it costs its recipient: the whole envelope.
    pub(crate) fn bytes(&self) -> usize {
        envelope_bytes(self.from.len(), self.message_id.len(), self.payload.bytes())
    }

    /// What it adds to what the lead holds as it goes into an inbox: its own
    /// bytes, and a shared body's the first time an inbox takes it.
    fn added_bytes(&self) -> usize {
        match &self.payload {
            Payload::Shared(shared)
                if !shared.held.swap(true, std::sync::atomic::Ordering::Relaxed) =>
            {
                self.own_bytes() + shared.bytes
            }
            _ => self.own_bytes(),
        }
    }

    /// What it costs the lead beyond a shared body (counted once).
    fn own_bytes(&self) -> usize {
        match &self.payload {
            Payload::Own(_) => self.bytes(),
            Payload::Shared(_) => envelope_bytes(self.from.len(), self.message_id.len(), 0),
        }
    }

    /// What the lead frees when this entry goes: its own bytes, and a shared
    /// body's when this was the last entry holding it.
    fn freed_bytes(&self) -> usize {
        match &self.payload {
            Payload::Shared(shared) if Arc::strong_count(shared) == 1 => {
                self.own_bytes() + shared.bytes
            }
            _ => self.own_bytes(),
        }
    }

    /// As persisted: the envelope (without a shared body) and the shared body's id.
    pub(crate) fn record(&self, member: &str) -> EnvelopeRecord {
        let (body, shared) = match &self.payload {
            Payload::Own(body) => (Some(body.clone()), None),
            Payload::Shared(shared) => (None, Some(shared.id)),
        };
        EnvelopeRecord {
            member: member.to_owned(),
            envelope: pb::Envelope {
                seq: self.seq,
                message_id: self.message_id.clone(),
                from: self.from.clone(),
                to: member.to_owned(),
                sent_at_unix_ms: self.sent_at_unix_ms,
                body,
            },
            shared,
        }
    }
}

/// An open inbox stream.
#[derive(Debug)]
pub(crate) struct Stream {
    /// Tells this stream from a later one, so that a stale close is ignored.
    pub(crate) id: u64,
    /// Where envelopes go, at most `--stream-max-bytes` of them unread.
    sink: InboxSink,
    /// The last `seq` handed to this stream.
    sent: u64,
    /// When it opened (unix ms).
    pub(crate) opened_at_unix_ms: i64,
}

impl Stream {
    /// Ends the stream with `status` (the client sees it as the stream's end).
    /// What it held unread is freed at once.
    pub(crate) fn end(self, status: tonic::Status) {
        self.sink.end(status);
    }
}

/// What the member told the lead of a `Send` message id: the digest of what
/// it sent under it, so a retry is told from a reuse.
pub(crate) type Digest = String;

/// One member of the team.
#[derive(Debug)]
pub(crate) struct Member {
    /// Stable id, new for every `Join`.
    pub(crate) id: String,
    /// The member's name, unique among active members.
    pub(crate) name: Name,
    /// Free-text role, for people.
    pub(crate) role: String,
    /// SHA-256 of the session token `Join` returned. Kept once the member
    /// terminated, so that a retried answer to its shutdown is recognised.
    pub(crate) token_hash: Option<String>,
    /// The mode of the member's current grant.
    pub(crate) mode: Mode,
    /// Where it is in its life: the one source of its status, its idleness,
    /// its grace period and its end.
    pub(crate) life: Lifecycle,
    /// The lead started its process (in this run of the lead).
    pub(crate) spawned: bool,
    /// Envelopes not yet acknowledged, in `seq` order.
    pub(crate) inbox: VecDeque<Entry>,
    /// Their size, for the member's byte budget.
    pub(crate) inbox_bytes: usize,
    /// The last `seq` handed out.
    pub(crate) last_seq: u64,
    /// The open inbox stream.
    pub(crate) stream: Option<Stream>,
    /// Join order, for listing and paging.
    pub(crate) order: u64,
    /// `Send` message ids seen from this member, with what was sent under each.
    seen_ids: HashMap<String, Digest>,
    /// The same ids, oldest first, to forget the oldest.
    seen_order: VecDeque<String>,
}

/// What a `Send` message id means for a new `Send`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SeenId {
    /// Never seen: deliver.
    New,
    /// Seen with the same message: a retry, deliver nothing.
    Retry,
    /// Seen with another message: the id is reused.
    Reused,
}

impl Member {
    /// A member that just joined, in plan mode; its grace period for opening
    /// its inbox ends at `grace_until`.
    pub(crate) fn new(name: Name, role: String, token: &str, order: u64, grace_until: i64) -> Self {
        Self {
            id: uuid::Uuid::new_v4().to_string(),
            name,
            role,
            token_hash: Some(token_hash(token)),
            mode: Mode::Plan,
            life: Lifecycle::joined(grace_until),
            spawned: false,
            inbox: VecDeque::new(),
            inbox_bytes: 0,
            last_seq: 0,
            stream: None,
            order,
            seen_ids: HashMap::new(),
            seen_order: VecDeque::new(),
        }
    }

    /// The status operators see.
    pub(crate) fn status(&self) -> pb::MemberStatus {
        self.life.status().to_pb()
    }

    /// Whether it left for good.
    pub(crate) fn terminated(&self) -> bool {
        self.life.is_terminated()
    }

    /// To the wire.
    pub(crate) fn to_pb(&self) -> pb::Member {
        pb::Member {
            member_id: self.id.clone(),
            name: self.name.to_string(),
            role: self.role.clone(),
            status: self.status() as i32,
            mode: self.mode.to_pb() as i32,
            ..Default::default()
        }
    }

    /// As persisted.
    pub(crate) fn record(&self) -> MemberRecord {
        MemberRecord {
            name: self.name.to_string(),
            member_id: self.id.clone(),
            role: self.role.clone(),
            token_hash: self.token_hash.clone(),
            mode: self.mode.to_pb() as i32,
            idle: self.life.is_idle(),
            terminated: self.life.is_terminated(),
            last_seq: self.last_seq,
            order: self.order,
        }
    }

    /// Puts an entry in the inbox with the next `seq`; the stream gets it at
    /// the next [`Member::flush`]. Returns it as stored, and the bytes it adds
    /// to what the lead holds.
    fn push(&mut self, mut entry: Entry) -> (&Entry, usize) {
        self.last_seq += 1;
        entry.seq = self.last_seq;
        self.inbox_bytes += entry.bytes();
        let added = entry.added_bytes();
        self.inbox.push_back(entry);
        let entry = self.inbox.back().expect("just pushed");
        (entry, added)
    }

    /// Forgets every envelope up to `seq`; returns the bytes the lead frees.
    fn ack(&mut self, seq: u64) -> usize {
        let mut freed = 0;
        while self.inbox.front().is_some_and(|e| e.seq <= seq) {
            if let Some(entry) = self.inbox.pop_front() {
                self.inbox_bytes -= entry.bytes();
                freed += entry.freed_bytes();
            }
        }
        freed
    }

    /// Forgets every envelope; returns the bytes the lead frees.
    fn clear(&mut self) -> usize {
        self.ack(u64::MAX)
    }

    /// Opens a new inbox stream, replacing any older one (which ends with
    /// ABORTED); every envelope after `after_seq` goes to it at the next
    /// flush. Returns the bytes the lead frees by the acknowledgement.
    fn open_stream(&mut self, id: u64, after_seq: u64, sink: InboxSink, now: i64) -> usize {
        let freed = self.ack(after_seq);
        self.life.on(Event::StreamOpened);
        let old = self.stream.replace(Stream {
            id,
            sink,
            sent: after_seq,
            opened_at_unix_ms: now,
        });
        if let Some(old) = old {
            old.end(tonic::Status::aborted(
                "inbox: replaced by a newer Inbox call of this member; this stream ends here",
            ));
        }
        freed
    }

    /// Ends the inbox stream, if open, with `status`: the member is
    /// disconnected, with a grace period to come back until `grace_until`.
    pub(crate) fn end_stream(&mut self, status: tonic::Status, grace_until: i64) {
        if let Some(stream) = self.stream.take() {
            stream.end(status);
        }
        self.life.on(Event::StreamLost { grace_until });
    }

    /// The inbox stream went away on its own (the client left).
    pub(crate) fn lose_stream(&mut self, grace_until: i64) {
        self.stream = None;
        self.life.on(Event::StreamLost { grace_until });
    }

    /// Hands the stream the envelopes up to `upto` (the last one committed)
    /// it has not had, while it has room: a reader that is behind gets the
    /// rest when it asks for more (its sink's `on_room`). A stream whose
    /// reader is gone is dropped (`false`; the grace period to come back
    /// runs until `grace_until`): the member reconnects and resumes from its
    /// last processed `seq`, so nothing is lost.
    pub(crate) fn flush(&mut self, grace_until: i64, upto: u64) -> bool {
        let Some(stream) = &mut self.stream else {
            return true;
        };
        let start = self.inbox.partition_point(|e| e.seq <= stream.sent);
        let end = self.inbox.partition_point(|e| e.seq <= upto);
        for entry in self.inbox.range(start..end.max(start)) {
            match stream
                .sink
                .try_send(entry.envelope(self.name.as_str()), entry.bytes())
            {
                Ok(()) => stream.sent = entry.seq,
                Err(Refused::Full) => return true,
                Err(Refused::Gone) => {
                    tracing::debug!(member = %self.name, "inbox stream is gone");
                    self.end_stream(
                        tonic::Status::unavailable(
                            "inbox: this stream is gone; reconnect with after_seq and resume",
                        ),
                        grace_until,
                    );
                    return false;
                }
            }
        }
        true
    }

    /// Whether the member holds an envelope it has had on its open stream
    /// since before `since` without acknowledging it: it is stuck.
    pub(crate) fn stuck_since(&self, since: i64) -> Option<u64> {
        let stream = self.stream.as_ref()?;
        let oldest = self.inbox.front()?;
        (stream.opened_at_unix_ms <= since && oldest.sent_at_unix_ms <= since).then_some(oldest.seq)
    }

    /// What a `Send` message id means, given the digest of the new message.
    pub(crate) fn check_message_id(&self, id: &str, digest: &str) -> SeenId {
        match self.seen_ids.get(id) {
            None => SeenId::New,
            // Ids remembered before digests were kept match any message.
            Some(seen) if seen.is_empty() || seen == digest => SeenId::Retry,
            Some(_) => SeenId::Reused,
        }
    }

    /// Remembers a `Send` message id with its digest.
    pub(crate) fn remember_message_id(&mut self, id: &str, digest: &str) {
        if self
            .seen_ids
            .insert(id.to_owned(), digest.to_owned())
            .is_some()
        {
            return;
        }
        self.seen_order.push_back(id.to_owned());
        if self.seen_order.len() > REMEMBERED_MESSAGE_IDS {
            if let Some(old) = self.seen_order.pop_front() {
                self.seen_ids.remove(&old);
            }
        }
    }
}

/// Every member, by name, in the order they joined.
#[derive(Debug, Default)]
pub(crate) struct Roster {
    /// Members by name (a terminated member stays until its name is reused,
    /// or the retention window passes).
    members: HashMap<String, Member>,
    /// Names by join order, for listing and paging.
    order: BTreeMap<u64, String>,
    /// Session token hash to member name, for active members.
    sessions: HashMap<String, String>,
    /// Session token hash to member name, for terminated members: only a
    /// retried answer to their shutdown is accepted from these.
    retired: HashMap<String, String>,
    /// Names changed since the last [`Roster::take_touched`], for persistence.
    touched: HashSet<String>,
    /// Members not terminated.
    active: usize,
    /// The next join order number.
    next_order: u64,
    /// What every inbox holds, in bytes, shared bodies counted once.
    held_bytes: usize,
}

impl Roster {
    /// The roster as persisted; every member starts disconnected, with a
    /// grace period to come back that ends at `grace_until`.
    pub(crate) fn restore(
        snapshot: &mut Snapshot,
        now: i64,
        grace_until: i64,
    ) -> Result<Self, String> {
        let mut roster = Roster::default();
        for record in std::mem::take(&mut snapshot.members) {
            let name = Name::parse("name", &record.name).map_err(|e| e.to_string())?;
            let mode = Mode::from_pb("mode", record.mode)
                .map_err(|e| e.to_string())?
                .unwrap_or(Mode::Plan);
            let mut member = Member::new(name, record.role, "", record.order, grace_until);
            member.id = record.member_id;
            member.token_hash = record.token_hash;
            member.mode = mode;
            member.life = Lifecycle::restored(record.idle, record.terminated, now, grace_until);
            member.last_seq = record.last_seq;
            roster.next_order = roster.next_order.max(record.order + 1);
            roster.insert(member);
        }
        let mut shared: HashMap<u64, Arc<SharedBody>> = HashMap::new();
        for (id, body) in std::mem::take(&mut snapshot.bodies) {
            shared.insert(id, SharedBody::new(id, body));
        }
        for record in std::mem::take(&mut snapshot.envelopes) {
            let envelope = record.envelope;
            let payload = match (record.shared, envelope.body) {
                (Some(id), _) => match shared.get(&id) {
                    Some(body) => Payload::Shared(body.clone()),
                    None => return Err(format!("envelope refers to a missing shared body {id}")),
                },
                (None, Some(body)) => Payload::Own(body),
                (None, None) => return Err("envelope without a body".into()),
            };
            let entry = Entry {
                seq: envelope.seq,
                message_id: envelope.message_id,
                from: envelope.from,
                sent_at_unix_ms: envelope.sent_at_unix_ms,
                payload,
            };
            if let Some(member) = roster.members.get_mut(&record.member) {
                // Envelopes are stored without rewriting the member's record.
                member.last_seq = member.last_seq.max(entry.seq);
                member.inbox_bytes += entry.bytes();
                roster.held_bytes += entry.added_bytes();
                member.inbox.push_back(entry);
            }
        }
        for (name, id, digest) in std::mem::take(&mut snapshot.message_ids) {
            if let Some(member) = roster.members.get_mut(&name) {
                member.remember_message_id(&id, &digest);
            }
        }
        roster.touched.clear();
        Ok(roster)
    }

    /// The join order number for the next member.
    pub(crate) fn next_order(&mut self) -> u64 {
        let order = self.next_order;
        self.next_order += 1;
        order
    }

    /// A member by name.
    pub(crate) fn get(&self, name: &str) -> Option<&Member> {
        self.members.get(name)
    }

    /// A member by name, to change what is persisted of it.
    pub(crate) fn get_mut(&mut self, name: &str) -> Option<&mut Member> {
        let member = self.members.get_mut(name)?;
        self.touched.insert(name.to_owned());
        Some(member)
    }

    /// A member by name, to change only what is not persisted (its stream).
    pub(crate) fn live_mut(&mut self, name: &str) -> Option<&mut Member> {
        self.members.get_mut(name)
    }

    /// The name of the active member a session token belongs to.
    pub(crate) fn by_token(&self, token: &str) -> Option<&str> {
        self.sessions.get(&token_hash(token)).map(String::as_str)
    }

    /// The name of the terminated member a session token belonged to.
    pub(crate) fn by_retired_token(&self, token: &str) -> Option<&str> {
        self.retired.get(&token_hash(token)).map(String::as_str)
    }

    /// Adds (or, for a terminated name, replaces) a member.
    pub(crate) fn insert(&mut self, member: Member) {
        let name = member.name.to_string();
        if !member.terminated() {
            self.active += 1;
        }
        if let Some(hash) = &member.token_hash {
            if member.terminated() {
                self.retired.insert(hash.clone(), name.clone());
            } else {
                self.sessions.insert(hash.clone(), name.clone());
            }
        }
        if let Some(mut old) = self.members.remove(&name) {
            if !old.terminated() {
                self.active -= 1;
            }
            self.held_bytes -= old.clear();
            self.order.remove(&old.order);
            if let Some(hash) = &old.token_hash {
                self.retired.remove(hash);
            }
        }
        self.order.insert(member.order, name.clone());
        self.members.insert(name.clone(), member);
        self.touched.insert(name);
    }

    /// Retires a member's session token: it no longer authenticates, but a
    /// retried answer to its shutdown is still recognised.
    pub(crate) fn revoke(&mut self, name: &str) {
        if let Some(hash) = self.get(name).and_then(|m| m.token_hash.clone()) {
            self.sessions.remove(&hash);
            self.retired.insert(hash, name.to_owned());
        }
    }

    /// Forgets a terminated member for good (its retention passed).
    pub(crate) fn remove(&mut self, name: &str) {
        if let Some(mut member) = self.members.remove(name) {
            if !member.terminated() {
                self.active -= 1;
            }
            self.held_bytes -= member.clear();
            self.order.remove(&member.order);
            if let Some(hash) = &member.token_hash {
                self.retired.remove(hash);
                self.sessions.remove(hash);
            }
        }
        self.touched.remove(name);
    }

    /// Puts `entry` in `name`'s inbox; returns it as stored.
    pub(crate) fn push(&mut self, name: &str, entry: Entry) -> Option<&Entry> {
        let member = self.members.get_mut(name)?;
        let (entry, added) = member.push(entry);
        self.held_bytes += added;
        Some(entry)
    }

    /// Forgets `name`'s envelopes up to `seq`.
    pub(crate) fn ack(&mut self, name: &str, seq: u64) {
        if let Some(member) = self.members.get_mut(name) {
            self.held_bytes -= member.ack(seq);
        }
    }

    /// Forgets all of `name`'s envelopes.
    pub(crate) fn clear_inbox(&mut self, name: &str) {
        if let Some(member) = self.members.get_mut(name) {
            self.held_bytes -= member.clear();
        }
    }

    /// Opens `name`'s inbox stream (see [`Member::open_stream`]).
    pub(crate) fn open_stream(
        &mut self,
        name: &str,
        id: u64,
        after_seq: u64,
        sink: InboxSink,
        now: i64,
    ) {
        if let Some(member) = self.members.get_mut(name) {
            self.held_bytes -= member.open_stream(id, after_seq, sink, now);
        }
    }

    /// What every inbox holds, in bytes, shared bodies counted once.
    pub(crate) fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Every member, in join order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Member> {
        self.order.values().filter_map(|n| self.members.get(n))
    }

    /// Every member that joined after join order `after` (all for `None`), in join order.
    pub(crate) fn iter_after(&self, after: Option<u64>) -> impl Iterator<Item = &Member> {
        let start = after.map_or(0, |after| after.saturating_add(1));
        self.order
            .range(start..)
            .filter_map(|(_, n)| self.members.get(n))
    }

    /// Applies `event` to `name`'s life; `None` for no such member, else
    /// whether its state changed. The member's record is rewritten only
    /// when what it holds (idle, terminated) changed.
    pub(crate) fn on_life(&mut self, name: &str, event: Event) -> Option<bool> {
        let member = self.members.get_mut(name)?;
        let before = member.life;
        let changed = member.life.on(event);
        if !before.is_terminated() && member.life.is_terminated() {
            self.active -= 1;
        }
        if before.is_idle() != member.life.is_idle()
            || before.is_terminated() != member.life.is_terminated()
        {
            self.touched.insert(name.to_owned());
        }
        Some(changed)
    }

    /// How many members are not terminated.
    pub(crate) fn active(&self) -> usize {
        self.active
    }

    /// Names of active members other than `except`.
    pub(crate) fn active_names_except(&self, except: &str) -> Vec<String> {
        self.iter()
            .filter(|m| !m.terminated() && m.name.as_str() != except)
            .map(|m| m.name.to_string())
            .collect()
    }

    /// The names changed since the last call.
    pub(crate) fn take_touched(&mut self) -> HashSet<String> {
        std::mem::take(&mut self.touched)
    }

    /// Every member, to end their streams.
    pub(crate) fn iter_live_mut(&mut self) -> impl Iterator<Item = &mut Member> {
        self.members.values_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(name: &str) -> Member {
        Member::new(
            Name::parse("name", name).expect("valid"),
            "coder".into(),
            &format!("t-{name}"),
            1,
            0,
        )
    }

    fn text(content: &str) -> Entry {
        Entry {
            seq: 0,
            message_id: "m".into(),
            from: "bob".into(),
            sent_at_unix_ms: 0,
            payload: Payload::Own(Body::Text(pb::Text {
                content: content.into(),
            })),
        }
    }

    fn received(rx: &mut outbox::Receiver<pb::Envelope>) -> Vec<u64> {
        use tokio_stream::StreamExt as _;
        let mut seqs = Vec::new();
        while let Some(Some(Ok(e))) = rx.next().now_or_never() {
            seqs.push(e.seq);
        }
        seqs
    }

    /// Polls a future once.
    trait NowOrNever: std::future::Future + Sized {
        fn now_or_never(self) -> Option<Self::Output> {
            let mut future = std::pin::pin!(self);
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            match future.as_mut().poll(&mut cx) {
                std::task::Poll::Ready(out) => Some(out),
                std::task::Poll::Pending => None,
            }
        }
    }
    impl<F: std::future::Future> NowOrNever for F {}

    fn open(member: &mut Member, after: u64, max_bytes: usize) -> outbox::Receiver<pb::Envelope> {
        let (tx, rx) = outbox::channel(max_bytes);
        member.open_stream(1, after, tx, 0);
        rx
    }

    #[tokio::test]
    async fn a_resumed_stream_gets_every_unacked_envelope_after_its_seq_once() {
        let mut alice = member("alice");
        for i in 1..=5 {
            alice.push(text(&i.to_string()));
        }
        let mut rx = open(&mut alice, 2, 1 << 20);
        assert!(alice.flush(0, u64::MAX));
        assert_eq!(received(&mut rx), vec![3, 4, 5]);
        alice.push(text("6"));
        assert!(alice.flush(0, u64::MAX));
        assert!(
            alice.flush(0, u64::MAX),
            "a second flush sends nothing again"
        );
        assert_eq!(received(&mut rx), vec![6]);
        alice.ack(6);
        assert!(alice.inbox.is_empty());
        assert_eq!(alice.inbox_bytes, 0);
        assert_eq!(alice.status(), pb::MemberStatus::Working);
    }

    #[tokio::test]
    async fn a_stream_that_is_behind_gets_the_rest_once_it_reads() {
        let mut alice = member("alice");
        let per_entry = text("1").bytes();
        let mut rx = open(&mut alice, 0, 2 * per_entry);
        for i in 1..=5 {
            alice.push(text(&i.to_string()));
        }
        assert!(alice.flush(0, u64::MAX), "kept, not dropped");
        assert_eq!(received(&mut rx), vec![1, 2]);
        assert!(alice.flush(0, u64::MAX));
        assert_eq!(received(&mut rx), vec![3, 4]);
        assert!(alice.flush(0, u64::MAX));
        assert_eq!(received(&mut rx), vec![5]);
        assert_eq!(alice.status(), pb::MemberStatus::Working);
        assert_eq!(alice.inbox.len(), 5, "everything stays until acknowledged");
    }

    #[tokio::test]
    async fn a_stream_whose_reader_is_gone_is_dropped_and_loses_nothing() {
        let mut alice = member("alice");
        drop(open(&mut alice, 0, 1 << 20));
        alice.push(text("1"));
        assert!(!alice.flush(0, u64::MAX));
        assert!(alice.stream.is_none());
        assert_eq!(alice.status(), pb::MemberStatus::Disconnected);
        assert_eq!(alice.inbox.len(), 1, "everything stays until acknowledged");
    }

    #[tokio::test]
    async fn a_replaced_stream_ends_with_aborted_and_frees_what_it_held() {
        use tokio_stream::StreamExt as _;
        let mut alice = member("alice");
        alice.push(text("1"));
        let mut first = open(&mut alice, 0, 1 << 20);
        assert!(alice.flush(0, u64::MAX));
        let _second = open(&mut alice, 0, 1 << 20);
        let status = first
            .next()
            .await
            .expect("an item")
            .expect_err("ended before its unread envelope");
        assert_eq!(status.code(), tonic::Code::Aborted);
        assert!(status.message().contains("replaced"), "{status:?}");
        assert!(first.next().await.is_none());
    }

    #[tokio::test]
    async fn a_member_is_stuck_once_its_oldest_envelope_waits_past_the_timeout() {
        let mut alice = member("alice");
        assert_eq!(alice.stuck_since(100), None, "no stream, not stuck");
        let _rx = open(&mut alice, 0, 1 << 20);
        assert_eq!(alice.stuck_since(100), None, "nothing unread");
        let mut late = text("x");
        late.sent_at_unix_ms = 50;
        alice.push(late);
        assert_eq!(alice.stuck_since(49), None);
        assert_eq!(alice.stuck_since(50), Some(1));
        alice.ack(1);
        assert_eq!(alice.stuck_since(100), None);
    }

    #[test]
    fn a_shared_body_is_held_once_and_freed_with_its_last_entry() {
        let mut roster = Roster::default();
        for name in ["a", "b", "c"] {
            let mut m = member(name);
            m.order = u64::from(name.as_bytes()[0]);
            roster.insert(m);
        }
        let body = SharedBody::new(
            1,
            Body::Text(pb::Text {
                content: "x".repeat(10_000),
            }),
        );
        let entry = Entry {
            payload: Payload::Shared(body.clone()),
            ..text("")
        };
        drop(body);
        for name in ["a", "b", "c"] {
            roster.push(name, entry.clone());
        }
        drop(entry);
        let held = roster.held_bytes();
        assert!(
            held > 10_000 && held < 11_000,
            "{held}: the body counted once"
        );
        assert!(
            roster.get("a").expect("a").inbox_bytes > 10_000,
            "each recipient pays for it"
        );
        roster.ack("a", 1);
        roster.clear_inbox("b");
        assert!(roster.held_bytes() > 10_000, "c still holds it");
        roster.ack("c", 1);
        assert_eq!(roster.held_bytes(), 0);
    }

    #[test]
    fn message_ids_tell_a_retry_from_a_reuse_and_are_remembered_up_to_a_bound() {
        let mut alice = member("alice");
        assert_eq!(alice.check_message_id("a", "d1"), SeenId::New);
        alice.remember_message_id("a", "d1");
        assert_eq!(alice.check_message_id("a", "d1"), SeenId::Retry);
        assert_eq!(alice.check_message_id("a", "d2"), SeenId::Reused);
        for i in 0..REMEMBERED_MESSAGE_IDS {
            alice.remember_message_id(&i.to_string(), "d");
        }
        assert_eq!(
            alice.check_message_id("a", "d2"),
            SeenId::New,
            "the oldest id is forgotten"
        );
    }

    #[test]
    fn a_terminated_name_can_be_reused_and_tokens_follow_the_member() {
        let mut roster = Roster::default();
        let mut bob = member("bob");
        bob.order = 0;
        roster.insert(member("alice"));
        roster.insert(bob);
        assert_eq!(roster.by_token("t-alice"), Some("alice"));
        roster.revoke("alice");
        assert_eq!(roster.by_token("t-alice"), None);
        assert_eq!(roster.by_retired_token("t-alice"), Some("alice"));
        let mut again = member("alice");
        again.order = 2;
        roster.insert(again);
        let names: Vec<_> = roster.iter().map(|m| m.name.to_string()).collect();
        assert_eq!(names, vec!["bob", "alice"]);
        assert_eq!(roster.active_names_except("bob"), vec!["alice"]);
        let after: Vec<_> = roster
            .iter_after(Some(0))
            .map(|m| m.name.to_string())
            .collect();
        assert_eq!(after, vec!["alice"]);
        assert_eq!(roster.take_touched().len(), 2);
        roster.remove("bob");
        assert!(roster.get("bob").is_none());
        assert_eq!(roster.by_token("t-bob"), None);
    }

    #[test]
    fn active_members_are_counted_through_every_change() {
        let mut roster = Roster::default();
        roster.insert(member("alice"));
        roster.insert(member("bob"));
        assert_eq!(roster.active(), 2);
        roster.on_life("bob", Event::Terminate { at: 1 });
        roster.on_life("bob", Event::Terminate { at: 2 });
        assert_eq!(roster.active(), 1);
        roster.insert(member("bob"));
        assert_eq!(roster.active(), 2, "a terminated name reused");
        roster.insert(member("bob"));
        assert_eq!(roster.active(), 2, "an active entry replaced");
        roster.on_life("alice", Event::Terminate { at: 3 });
        roster.remove("alice");
        assert_eq!(roster.active(), 1);
    }

    #[test]
    fn a_restored_roster_keeps_tokens_inboxes_shared_bodies_and_seq() {
        let mut alice = member("alice");
        alice.last_seq = 8;
        let mut bob = member("bob");
        bob.order = 2;
        bob.life.on(Event::Terminate { at: 1 });
        let envelope = |seq, body| pb::Envelope {
            seq,
            body,
            ..Default::default()
        };
        let notice = Body::TeammateTerminated(pb::TeammateTerminated {
            name: "carol".into(),
            ..Default::default()
        });
        let mut snapshot = Snapshot {
            members: vec![alice.record(), bob.record()],
            envelopes: vec![
                EnvelopeRecord {
                    member: "alice".into(),
                    envelope: envelope(7, Some(Body::Text(pb::Text::default()))),
                    shared: None,
                },
                EnvelopeRecord {
                    member: "alice".into(),
                    envelope: envelope(8, None),
                    shared: Some(3),
                },
            ],
            bodies: vec![(3, notice)],
            requests: vec![],
            message_ids: vec![("alice".into(), "m1".into(), "d".into())],
            tasks: vec![],
            holds: None,
            usage: vec![],
        };
        let mut roster = Roster::restore(&mut snapshot, 5, 10).expect("restores");
        assert_eq!(roster.by_token("t-alice"), Some("alice"));
        assert_eq!(roster.by_token("t-bob"), None);
        assert_eq!(roster.by_retired_token("t-bob"), Some("bob"));
        assert_eq!(
            roster.get("bob").and_then(|b| b.life.terminated_at()),
            Some(5)
        );
        let restored = roster.get_mut("alice").expect("alice");
        assert_eq!(restored.last_seq, 8);
        assert_eq!(restored.inbox.len(), 2);
        assert!(matches!(restored.inbox[1].payload, Payload::Shared(_)));
        assert_eq!(restored.check_message_id("m1", "d"), SeenId::Retry);
        assert_eq!(restored.push(text("next")).0.seq, 9, "seq goes on");
        assert_eq!(roster.next_order(), 3);
    }
}
