//! The members' inboxes: what each has yet to read, and the stream that
//! carries it.

use std::{
    collections::{HashMap, VecDeque},
    sync::Arc,
};

use crate::{
    outbox::{self, Refused, StreamEnd},
    store::{EnvelopeRecord, Snapshot},
};
use mesh_core::{
    effect::{Envelope, Message},
    members::Members,
};
use shared::wire::message_bytes;

/// Where a member's inbox stream sends its entries (each edge encodes them
/// for its wire: gRPC's `Envelope` in `service.rs`); also how the hub ends
/// it early, with the reason why.
pub(crate) type InboxSink = outbox::Sender<Entry>;

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
    pub(crate) body: Message,
    /// Its encoded size.
    pub(crate) bytes: usize,
    /// Whether an inbox holds it, so the lead counts it (once).
    held: std::sync::atomic::AtomicBool,
}

impl SharedBody {
    /// A new shared body.
    pub(crate) fn new(id: u64, body: Message) -> Arc<Self> {
        let bytes = message_bytes(&body);
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
    /// A body of its own, and its encoded size.
    Own(Message, usize),
    /// A body shared with the other recipients of a fan-out.
    Shared(Arc<SharedBody>),
}

impl Payload {
    /// A body of its own.
    pub(crate) fn own(body: Message) -> Self {
        let bytes = message_bytes(&body);
        Payload::Own(body, bytes)
    }

    /// The body.
    pub(crate) fn body(&self) -> &Message {
        match self {
            Payload::Own(body, _) => body,
            Payload::Shared(shared) => &shared.body,
        }
    }

    /// The body's encoded size.
    fn bytes(&self) -> usize {
        match self {
            Payload::Own(_, bytes) => *bytes,
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
    /// The envelope to `to` as the watchers see it.
    pub(crate) fn notice(&self, to: &str) -> Envelope {
        Envelope {
            seq: self.seq,
            message_id: self.message_id.clone(),
            from: self.from.clone(),
            to: to.to_owned(),
            sent_at_unix_ms: self.sent_at_unix_ms,
            message: self.payload.body().clone(),
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
            Payload::Own(..) => self.bytes(),
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
            Payload::Own(body, _) => (Some(body.clone()), None),
            Payload::Shared(shared) => (None, Some(shared.id)),
        };
        EnvelopeRecord {
            member: member.to_owned(),
            seq: self.seq,
            message_id: self.message_id.clone(),
            from: self.from.clone(),
            sent_at_unix_ms: self.sent_at_unix_ms,
            body,
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
    /// Ends the stream for `why` (the client sees it as the stream's end).
    /// What it held unread is freed at once.
    pub(crate) fn end(self, why: StreamEnd) {
        self.sink.end(why);
    }
}

/// What the member told the lead of a `Send` message id: the digest of what
/// it sent under it, so a retry is told from a reuse.
pub(crate) type Digest = String;

/// One member's inbox: the envelopes it has not acknowledged, the stream
/// that carries them, and the `Send` message ids it used. Who the member
/// is, and the `seq` each envelope gets, are the core's
/// ([`mesh_core::members::Members`]).
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    /// Envelopes not yet acknowledged, in `seq` order.
    pub(crate) entries: VecDeque<Entry>,
    /// Their size, for the member's byte budget.
    pub(crate) bytes: usize,
    /// The open inbox stream.
    pub(crate) stream: Option<Stream>,
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

/// How a flush left the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flushed {
    /// Open (or there was none).
    Open,
    /// Its reader is gone: the stream was dropped, and the member is
    /// disconnected.
    Gone,
}

impl Inbox {
    /// Puts an entry in the inbox; the stream gets it at the next
    /// [`Inbox::flush`]. Returns it as stored, and the bytes it adds to
    /// what the lead holds.
    fn push(&mut self, entry: Entry) -> (&Entry, usize) {
        self.bytes += entry.bytes();
        let added = entry.added_bytes();
        self.entries.push_back(entry);
        let entry = self.entries.back().expect("just pushed");
        (entry, added)
    }

    /// Forgets every envelope up to `seq`; returns the bytes the lead frees.
    fn ack(&mut self, seq: u64) -> usize {
        let mut freed = 0;
        while self.entries.front().is_some_and(|e| e.seq <= seq) {
            if let Some(entry) = self.entries.pop_front() {
                self.bytes -= entry.bytes();
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
        let old = self.stream.replace(Stream {
            id,
            sink,
            sent: after_seq,
            opened_at_unix_ms: now,
        });
        if let Some(old) = old {
            old.end(StreamEnd::Replaced(
                "inbox: replaced by a newer Inbox call of this member; this stream ends here"
                    .into(),
            ));
        }
        freed
    }

    /// Ends the inbox stream, if open, for `why`.
    pub(crate) fn end_stream(&mut self, why: StreamEnd) {
        if let Some(stream) = self.stream.take() {
            stream.end(why);
        }
    }

    /// Hands the stream of `name`'s inbox the envelopes up to `upto` (the
    /// last one committed) it has not had, while it has room: a reader
    /// that is behind gets the rest when it asks for more (its sink's
    /// `on_room`). A stream whose reader is gone is dropped: the member
    /// reconnects and resumes from its last processed `seq`, so nothing is
    /// lost.
    pub(crate) fn flush(&mut self, name: &str, upto: u64) -> Flushed {
        let Some(stream) = &mut self.stream else {
            return Flushed::Open;
        };
        let start = self.entries.partition_point(|e| e.seq <= stream.sent);
        let end = self.entries.partition_point(|e| e.seq <= upto);
        for entry in self.entries.range(start..end.max(start)) {
            match stream.sink.try_send(entry.clone(), entry.bytes()) {
                Ok(()) => stream.sent = entry.seq,
                Err(Refused::Full) => return Flushed::Open,
                Err(Refused::Gone) => {
                    tracing::debug!(member = %name, "inbox stream is gone");
                    self.end_stream(StreamEnd::Gone(
                        "inbox: this stream is gone; reconnect with after_seq and resume".into(),
                    ));
                    return Flushed::Gone;
                }
            }
        }
        Flushed::Open
    }

    /// Whether the member holds an envelope it has had on its open stream
    /// since before `since` without acknowledging it: it is stuck.
    pub(crate) fn stuck_since(&self, since: i64) -> Option<u64> {
        let stream = self.stream.as_ref()?;
        let oldest = self.entries.front()?;
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

/// Every member's inbox, by name.
#[derive(Debug, Default)]
pub(crate) struct Inboxes {
    /// Inboxes by member name.
    inboxes: HashMap<String, Inbox>,
    /// What every inbox holds, in bytes, shared bodies counted once.
    held_bytes: usize,
}

impl Inboxes {
    /// The inboxes as stored, one for each of `members`; each envelope's
    /// `seq` counts as handed out.
    pub(crate) fn restore(snapshot: &mut Snapshot, members: &mut Members) -> Result<Self, String> {
        let mut inboxes = Inboxes::default();
        for member in members.iter() {
            inboxes
                .inboxes
                .insert(member.name.to_string(), Inbox::default());
        }
        let mut shared: HashMap<u64, Arc<SharedBody>> = HashMap::new();
        for (id, body) in std::mem::take(&mut snapshot.bodies) {
            shared.insert(id, SharedBody::new(id, body));
        }
        for record in std::mem::take(&mut snapshot.envelopes) {
            let payload = match (record.shared, record.body) {
                (Some(id), _) => match shared.get(&id) {
                    Some(body) => Payload::Shared(body.clone()),
                    None => return Err(format!("envelope refers to a missing shared body {id}")),
                },
                (None, Some(body)) => Payload::own(body),
                (None, None) => return Err("envelope without a body".into()),
            };
            let entry = Entry {
                seq: record.seq,
                message_id: record.message_id,
                from: record.from,
                sent_at_unix_ms: record.sent_at_unix_ms,
                payload,
            };
            if let Some(inbox) = inboxes.inboxes.get_mut(&record.member) {
                // Envelopes are stored without rewriting the member's record.
                members.saw_seq(&record.member, entry.seq);
                inbox.bytes += entry.bytes();
                inboxes.held_bytes += entry.added_bytes();
                inbox.entries.push_back(entry);
            }
        }
        for (name, id, digest) in std::mem::take(&mut snapshot.message_ids) {
            if let Some(inbox) = inboxes.inboxes.get_mut(&name) {
                inbox.remember_message_id(&id, &digest);
            }
        }
        Ok(inboxes)
    }

    /// `name`'s inbox.
    pub(crate) fn get(&self, name: &str) -> Option<&Inbox> {
        self.inboxes.get(name)
    }

    /// `name`'s inbox, to change.
    pub(crate) fn get_mut(&mut self, name: &str) -> Option<&mut Inbox> {
        self.inboxes.get_mut(name)
    }

    /// A new, empty inbox for `name` (who just joined), in place of any
    /// it had.
    pub(crate) fn open(&mut self, name: &str) {
        self.remove(name);
        self.inboxes.insert(name.to_owned(), Inbox::default());
    }

    /// Forgets `name`'s inbox for good.
    pub(crate) fn remove(&mut self, name: &str) {
        if let Some(mut inbox) = self.inboxes.remove(name) {
            self.held_bytes -= inbox.clear();
        }
    }

    /// Puts `entry` in `name`'s inbox; returns it as stored.
    pub(crate) fn push(&mut self, name: &str, entry: Entry) -> Option<&Entry> {
        let inbox = self.inboxes.get_mut(name)?;
        let (entry, added) = inbox.push(entry);
        self.held_bytes += added;
        Some(entry)
    }

    /// Forgets `name`'s envelopes up to `seq`.
    pub(crate) fn ack(&mut self, name: &str, seq: u64) {
        if let Some(inbox) = self.inboxes.get_mut(name) {
            self.held_bytes -= inbox.ack(seq);
        }
    }

    /// Forgets all of `name`'s envelopes, and ends its stream.
    pub(crate) fn clear(&mut self, name: &str) {
        if let Some(inbox) = self.inboxes.get_mut(name) {
            inbox.stream = None;
            self.held_bytes -= inbox.clear();
        }
    }

    /// Opens `name`'s inbox stream (see [`Inbox::open_stream`]).
    pub(crate) fn open_stream(
        &mut self,
        name: &str,
        id: u64,
        after_seq: u64,
        sink: InboxSink,
        now: i64,
    ) {
        if let Some(inbox) = self.inboxes.get_mut(name) {
            self.held_bytes -= inbox.open_stream(id, after_seq, sink, now);
        }
    }

    /// What every inbox holds, in bytes, shared bodies counted once.
    pub(crate) fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Every inbox, by name.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&String, &Inbox)> {
        self.inboxes.iter()
    }

    /// Every inbox, to end their streams.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Inbox> {
        self.inboxes.values_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mesh_core::{lifecycle::Event, names::Name};

    /// An inbox and the seq its next entry gets.
    #[derive(Default)]
    struct Numbered {
        inbox: Inbox,
        last: u64,
    }

    impl Numbered {
        fn push(&mut self, mut entry: Entry) {
            self.last += 1;
            entry.seq = self.last;
            self.inbox.push(entry);
        }
    }

    fn text(content: &str) -> Entry {
        Entry {
            seq: 0,
            message_id: "m".into(),
            from: "bob".into(),
            sent_at_unix_ms: 0,
            payload: Payload::own(Message::Text {
                content: content.into(),
            }),
        }
    }

    fn received(rx: &mut outbox::Receiver<Entry>) -> Vec<u64> {
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

    fn open(inbox: &mut Inbox, after: u64, max_bytes: usize) -> outbox::Receiver<Entry> {
        let (tx, rx) = outbox::channel(max_bytes);
        inbox.open_stream(1, after, tx, 0);
        rx
    }

    #[tokio::test]
    async fn a_resumed_stream_gets_every_unacked_envelope_after_its_seq_once() {
        let mut alice = Numbered::default();
        for i in 1..=5 {
            alice.push(text(&i.to_string()));
        }
        let mut rx = open(&mut alice.inbox, 2, 1 << 20);
        assert_eq!(alice.inbox.flush("alice", u64::MAX), Flushed::Open);
        assert_eq!(received(&mut rx), vec![3, 4, 5]);
        alice.push(text("6"));
        assert_eq!(alice.inbox.flush("alice", u64::MAX), Flushed::Open);
        assert_eq!(
            alice.inbox.flush("alice", u64::MAX),
            Flushed::Open,
            "a second flush sends nothing again"
        );
        assert_eq!(received(&mut rx), vec![6]);
        alice.inbox.ack(6);
        assert!(alice.inbox.entries.is_empty());
        assert_eq!(alice.inbox.bytes, 0);
    }

    #[tokio::test]
    async fn a_stream_that_is_behind_gets_the_rest_once_it_reads() {
        let mut alice = Numbered::default();
        let per_entry = text("1").bytes();
        let mut rx = open(&mut alice.inbox, 0, 2 * per_entry);
        for i in 1..=5 {
            alice.push(text(&i.to_string()));
        }
        assert_eq!(
            alice.inbox.flush("alice", u64::MAX),
            Flushed::Open,
            "kept, not dropped"
        );
        assert_eq!(received(&mut rx), vec![1, 2]);
        alice.inbox.flush("alice", u64::MAX);
        assert_eq!(received(&mut rx), vec![3, 4]);
        alice.inbox.flush("alice", u64::MAX);
        assert_eq!(received(&mut rx), vec![5]);
        assert!(alice.inbox.stream.is_some());
        assert_eq!(
            alice.inbox.entries.len(),
            5,
            "everything stays until acknowledged"
        );
    }

    #[tokio::test]
    async fn a_stream_whose_reader_is_gone_is_dropped_and_loses_nothing() {
        let mut alice = Numbered::default();
        drop(open(&mut alice.inbox, 0, 1 << 20));
        alice.push(text("1"));
        assert_eq!(alice.inbox.flush("alice", u64::MAX), Flushed::Gone);
        assert!(alice.inbox.stream.is_none());
        assert_eq!(
            alice.inbox.entries.len(),
            1,
            "everything stays until acknowledged"
        );
    }

    #[tokio::test]
    async fn a_replaced_stream_ends_with_aborted_and_frees_what_it_held() {
        use tokio_stream::StreamExt as _;
        let mut alice = Numbered::default();
        alice.push(text("1"));
        let mut first = open(&mut alice.inbox, 0, 1 << 20);
        alice.inbox.flush("alice", u64::MAX);
        let _second = open(&mut alice.inbox, 0, 1 << 20);
        let status = first
            .next()
            .await
            .expect("an item")
            .expect_err("ended before its unread envelope");
        assert!(matches!(status, StreamEnd::Replaced(_)), "{status:?}");
        assert!(status.message().contains("replaced"), "{status:?}");
        assert!(first.next().await.is_none());
    }

    #[tokio::test]
    async fn a_member_is_stuck_once_its_oldest_envelope_waits_past_the_timeout() {
        let mut alice = Numbered::default();
        assert_eq!(alice.inbox.stuck_since(100), None, "no stream, not stuck");
        let _rx = open(&mut alice.inbox, 0, 1 << 20);
        assert_eq!(alice.inbox.stuck_since(100), None, "nothing unread");
        let mut late = text("x");
        late.sent_at_unix_ms = 50;
        alice.push(late);
        assert_eq!(alice.inbox.stuck_since(49), None);
        assert_eq!(alice.inbox.stuck_since(50), Some(1));
        alice.inbox.ack(1);
        assert_eq!(alice.inbox.stuck_since(100), None);
    }

    #[test]
    fn a_shared_body_is_held_once_and_freed_with_its_last_entry() {
        let mut inboxes = Inboxes::default();
        for name in ["a", "b", "c"] {
            inboxes.open(name);
        }
        let body = SharedBody::new(
            1,
            Message::Text {
                content: "x".repeat(10_000),
            },
        );
        let entry = Entry {
            seq: 1,
            payload: Payload::Shared(body.clone()),
            ..text("")
        };
        drop(body);
        for name in ["a", "b", "c"] {
            inboxes.push(name, entry.clone());
        }
        drop(entry);
        let held = inboxes.held_bytes();
        assert!(
            held > 10_000 && held < 11_000,
            "{held}: the body counted once"
        );
        assert!(
            inboxes.get("a").expect("a").bytes > 10_000,
            "each recipient pays for it"
        );
        inboxes.ack("a", 1);
        inboxes.clear("b");
        assert!(inboxes.held_bytes() > 10_000, "c still holds it");
        inboxes.remove("c");
        assert_eq!(inboxes.held_bytes(), 0);
    }

    #[test]
    fn message_ids_tell_a_retry_from_a_reuse_and_are_remembered_up_to_a_bound() {
        let mut alice = Inbox::default();
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
    fn restored_inboxes_keep_envelopes_shared_bodies_message_ids_and_seq() {
        let mut members = Members::default();
        for name in ["alice", "bob"] {
            members.join(
                Name::parse("name", name).expect("valid"),
                "coder".into(),
                format!("id-{name}"),
                format!("h-{name}"),
                10,
            );
        }
        members.on_life("bob", Event::Terminate { at: 1 });
        let envelope = |seq, body, shared| EnvelopeRecord {
            member: "alice".into(),
            seq,
            message_id: format!("m{seq}"),
            from: "lead".into(),
            sent_at_unix_ms: 1,
            body,
            shared,
        };
        let notice = Message::Terminated(vec![mesh_core::effect::Ended {
            name: "carol".into(),
            reason: String::new(),
        }]);
        let text = Message::Text {
            content: String::new(),
        };
        let mut snapshot = Snapshot {
            envelopes: vec![envelope(7, Some(text), None), envelope(8, None, Some(3))],
            bodies: vec![(3, notice)],
            message_ids: vec![("alice".into(), "m1".into(), "d".into())],
            ..Snapshot::default()
        };
        let inboxes = Inboxes::restore(&mut snapshot, &mut members).expect("restores");
        let alice = inboxes.get("alice").expect("alice");
        assert_eq!(alice.entries.len(), 2);
        assert!(matches!(alice.entries[1].payload, Payload::Shared(_)));
        assert_eq!(alice.check_message_id("m1", "d"), SeenId::Retry);
        assert!(inboxes.get("bob").is_some(), "a terminated member's too");
        assert_eq!(members.next_seq("alice"), Some(9), "seq goes on");
    }
}
