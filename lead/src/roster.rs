//! Members and their inboxes: who is on the team, and what each has yet to read.

use std::collections::{HashMap, HashSet, VecDeque};

use shared::{grant::Mode, names::Name, pb};
use tokio::sync::mpsc;

use crate::store::{token_hash, MemberRecord, Snapshot};

/// Where a member's inbox stream sends envelopes.
pub(crate) type InboxSink = mpsc::Sender<Result<pb::Envelope, tonic::Status>>;

/// The most `Send` message ids remembered per sender, for deduplicating retries.
const REMEMBERED_MESSAGE_IDS: usize = 4_096;

/// An open inbox stream.
#[derive(Debug)]
pub(crate) struct Stream {
    /// Tells this stream from a later one, so that a stale close is ignored.
    pub(crate) id: u64,
    /// Where envelopes go.
    sink: InboxSink,
    /// The last `seq` handed to this stream.
    sent: u64,
}

/// One member of the team.
#[derive(Debug)]
pub(crate) struct Member {
    /// Stable id, new for every `Join`.
    pub(crate) id: String,
    /// The member's name, unique among active members.
    pub(crate) name: Name,
    /// Free-text role, for people.
    pub(crate) role: String,
    /// SHA-256 of the session token `Join` returned; cleared when the member terminates.
    pub(crate) token_hash: Option<String>,
    /// The mode of the member's current grant.
    pub(crate) mode: Mode,
    /// Said it has nothing to do (cleared by its next call that shows work).
    pub(crate) idle: bool,
    /// A shutdown request for it is pending.
    pub(crate) shutting_down: bool,
    /// Left the team for good.
    pub(crate) terminated: bool,
    /// The lead started its process (in this run of the lead).
    pub(crate) spawned: bool,
    /// Envelopes not yet acknowledged, in `seq` order.
    pub(crate) inbox: VecDeque<pb::Envelope>,
    /// The last `seq` handed out.
    pub(crate) last_seq: u64,
    /// The open inbox stream.
    pub(crate) stream: Option<Stream>,
    /// While disconnected: when the grace period ends (unix ms).
    pub(crate) grace_until: Option<i64>,
    /// Join order, for listing.
    pub(crate) order: u64,
    /// `Send` message ids seen from this member, for idempotent retries.
    seen_ids: HashSet<String>,
    /// The same ids, oldest first, to forget the oldest.
    seen_order: VecDeque<String>,
}

impl Member {
    /// A member that just joined, in plan mode.
    pub(crate) fn new(name: Name, role: String, token: &str, order: u64) -> Self {
        Self {
            id: uuid::Uuid::new_v4().to_string(),
            name,
            role,
            token_hash: Some(token_hash(token)),
            mode: Mode::Plan,
            idle: false,
            shutting_down: false,
            terminated: false,
            spawned: false,
            inbox: VecDeque::new(),
            last_seq: 0,
            stream: None,
            grace_until: None,
            order,
            seen_ids: HashSet::new(),
            seen_order: VecDeque::new(),
        }
    }

    /// The status operators see, derived from the flags.
    pub(crate) fn status(&self) -> pb::MemberStatus {
        if self.terminated {
            pb::MemberStatus::Terminated
        } else if self.shutting_down {
            pb::MemberStatus::ShuttingDown
        } else if self.stream.is_none() {
            pb::MemberStatus::Disconnected
        } else if self.idle {
            pb::MemberStatus::Idle
        } else {
            pb::MemberStatus::Working
        }
    }

    /// To the wire.
    pub(crate) fn to_pb(&self) -> pb::Member {
        pb::Member {
            member_id: self.id.clone(),
            name: self.name.to_string(),
            role: self.role.clone(),
            status: self.status() as i32,
            mode: self.mode.to_pb() as i32,
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
            idle: self.idle,
            terminated: self.terminated,
            last_seq: self.last_seq,
            order: self.order,
        }
    }

    /// Puts `envelope` in the inbox with the next `seq`; the stream gets it at
    /// the next [`Member::flush`].
    pub(crate) fn push(&mut self, mut envelope: pb::Envelope) -> pb::Envelope {
        self.last_seq += 1;
        envelope.seq = self.last_seq;
        self.inbox.push_back(envelope.clone());
        envelope
    }

    /// Forgets every envelope up to `seq`.
    pub(crate) fn ack(&mut self, seq: u64) {
        while self.inbox.front().is_some_and(|e| e.seq <= seq) {
            self.inbox.pop_front();
        }
    }

    /// Opens a new inbox stream, replacing any older one; every envelope after
    /// `after_seq` goes to it at the next flush.
    pub(crate) fn open_stream(&mut self, id: u64, after_seq: u64, sink: InboxSink) {
        self.ack(after_seq);
        self.stream = Some(Stream {
            id,
            sink,
            sent: after_seq,
        });
    }

    /// Hands the stream every envelope it has not had. A stream that cannot
    /// take them is dropped (`false`): the member reconnects and resumes from
    /// its last processed `seq`, so nothing is lost.
    pub(crate) fn flush(&mut self) -> bool {
        let Some(stream) = &mut self.stream else {
            return true;
        };
        let start = self.inbox.partition_point(|e| e.seq <= stream.sent);
        for envelope in self.inbox.range(start..) {
            if stream.sink.try_send(Ok(envelope.clone())).is_err() {
                tracing::warn!(member = %self.name, "inbox stream is full or gone; dropping it");
                self.stream = None;
                return false;
            }
            stream.sent = envelope.seq;
        }
        true
    }

    /// Remembers a `Send` message id; `false` if it was seen before.
    pub(crate) fn remember_message_id(&mut self, id: &str) -> bool {
        if !self.seen_ids.insert(id.to_owned()) {
            return false;
        }
        self.seen_order.push_back(id.to_owned());
        if self.seen_order.len() > REMEMBERED_MESSAGE_IDS {
            if let Some(old) = self.seen_order.pop_front() {
                self.seen_ids.remove(&old);
            }
        }
        true
    }
}

/// Every member, by name, in the order they joined.
#[derive(Debug, Default)]
pub(crate) struct Roster {
    /// Members by name (a terminated member stays until its name is reused).
    members: HashMap<String, Member>,
    /// Names in join order, for listing.
    order: Vec<String>,
    /// Session token hash to member name.
    sessions: HashMap<String, String>,
    /// Names changed since the last [`Roster::take_touched`], for persistence.
    touched: HashSet<String>,
    /// The next join order number.
    next_order: u64,
}

impl Roster {
    /// The roster as persisted; every member starts disconnected.
    pub(crate) fn restore(snapshot: &mut Snapshot) -> Result<Self, String> {
        let mut roster = Roster::default();
        for record in std::mem::take(&mut snapshot.members) {
            let name = Name::parse("name", &record.name).map_err(|e| e.to_string())?;
            let mode = Mode::from_pb("mode", record.mode)
                .map_err(|e| e.to_string())?
                .unwrap_or(Mode::Plan);
            let mut member = Member::new(name, record.role, "", record.order);
            member.id = record.member_id;
            member.token_hash = record.token_hash;
            member.mode = mode;
            member.idle = record.idle;
            member.terminated = record.terminated;
            member.last_seq = record.last_seq;
            roster.next_order = roster.next_order.max(record.order + 1);
            roster.insert(member);
        }
        for (name, envelope) in std::mem::take(&mut snapshot.envelopes) {
            if let Some(member) = roster.members.get_mut(&name) {
                member.inbox.push_back(envelope);
            }
        }
        for (name, id) in std::mem::take(&mut snapshot.message_ids) {
            if let Some(member) = roster.members.get_mut(&name) {
                member.remember_message_id(&id);
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

    /// The name of the member a session token belongs to.
    pub(crate) fn by_token(&self, token: &str) -> Option<&str> {
        self.sessions.get(&token_hash(token)).map(String::as_str)
    }

    /// Adds (or, for a terminated name, replaces) a member.
    pub(crate) fn insert(&mut self, member: Member) {
        let name = member.name.to_string();
        if let Some(hash) = &member.token_hash {
            self.sessions.insert(hash.clone(), name.clone());
        }
        if self.members.insert(name.clone(), member).is_some() {
            self.order.retain(|n| n != &name);
        }
        self.order.push(name.clone());
        self.touched.insert(name);
    }

    /// Revokes a member's session token.
    pub(crate) fn revoke(&mut self, name: &str) {
        if let Some(hash) = self.get_mut(name).and_then(|m| m.token_hash.take()) {
            self.sessions.remove(&hash);
        }
    }

    /// Every member, in join order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Member> {
        self.order.iter().filter_map(|n| self.members.get(n))
    }

    /// Names of active members other than `except`.
    pub(crate) fn active_names_except(&self, except: &str) -> Vec<String> {
        self.iter()
            .filter(|m| !m.terminated && m.name.as_str() != except)
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
        )
    }

    fn text(content: &str) -> pb::Envelope {
        pb::Envelope {
            body: Some(pb::envelope::Body::Text(pb::Text {
                content: content.into(),
            })),
            ..Default::default()
        }
    }

    fn received(rx: &mut mpsc::Receiver<Result<pb::Envelope, tonic::Status>>) -> Vec<u64> {
        let mut seqs = Vec::new();
        while let Ok(Ok(e)) = rx.try_recv() {
            seqs.push(e.seq);
        }
        seqs
    }

    #[tokio::test]
    async fn a_resumed_stream_gets_every_unacked_envelope_after_its_seq_once() {
        let mut alice = member("alice");
        for i in 1..=5 {
            alice.push(text(&i.to_string()));
        }
        let (tx, mut rx) = mpsc::channel(16);
        alice.open_stream(1, 2, tx);
        assert!(alice.flush());
        assert_eq!(received(&mut rx), vec![3, 4, 5]);
        alice.push(text("6"));
        assert!(alice.flush());
        assert!(alice.flush(), "a second flush sends nothing again");
        assert_eq!(received(&mut rx), vec![6]);
        alice.ack(6);
        assert!(alice.inbox.is_empty());
        assert_eq!(alice.status(), pb::MemberStatus::Working);
    }

    #[tokio::test]
    async fn a_stream_that_cannot_keep_up_is_dropped_and_loses_nothing() {
        let mut alice = member("alice");
        let (tx, _rx) = mpsc::channel(2);
        alice.open_stream(1, 0, tx);
        for i in 1..=3 {
            alice.push(text(&i.to_string()));
        }
        assert!(!alice.flush());
        assert!(alice.stream.is_none());
        assert_eq!(alice.status(), pb::MemberStatus::Disconnected);
        assert_eq!(alice.inbox.len(), 3, "everything stays until acknowledged");
    }

    #[test]
    fn message_ids_are_remembered_up_to_a_bound() {
        let mut alice = member("alice");
        assert!(alice.remember_message_id("a"));
        assert!(!alice.remember_message_id("a"));
        for i in 0..REMEMBERED_MESSAGE_IDS {
            alice.remember_message_id(&i.to_string());
        }
        assert!(alice.remember_message_id("a"), "the oldest id is forgotten");
    }

    #[test]
    fn a_terminated_name_can_be_reused_and_tokens_follow_the_member() {
        let mut roster = Roster::default();
        roster.insert(member("alice"));
        roster.insert(member("bob"));
        assert_eq!(roster.by_token("t-alice"), Some("alice"));
        roster.revoke("alice");
        assert_eq!(roster.by_token("t-alice"), None);
        roster.insert(member("alice"));
        let names: Vec<_> = roster.iter().map(|m| m.name.to_string()).collect();
        assert_eq!(names, vec!["bob", "alice"]);
        assert_eq!(roster.active_names_except("bob"), vec!["alice"]);
        assert_eq!(roster.take_touched().len(), 2);
    }

    #[test]
    fn a_restored_roster_keeps_tokens_inboxes_and_seq() {
        let mut alice = member("alice");
        alice.last_seq = 7;
        let mut snapshot = Snapshot {
            members: vec![alice.record()],
            envelopes: vec![(
                "alice".into(),
                pb::Envelope {
                    seq: 7,
                    ..Default::default()
                },
            )],
            requests: vec![],
            message_ids: vec![("alice".into(), "m1".into())],
        };
        let mut roster = Roster::restore(&mut snapshot).expect("restores");
        assert_eq!(roster.by_token("t-alice"), Some("alice"));
        let restored = roster.get_mut("alice").expect("alice");
        assert_eq!(restored.last_seq, 7);
        assert_eq!(restored.inbox.len(), 1);
        assert!(!restored.remember_message_id("m1"));
        assert_eq!(restored.push(text("next")).seq, 8, "seq goes on");
        assert_eq!(roster.next_order(), 2);
    }
}
