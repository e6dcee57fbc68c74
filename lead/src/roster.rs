//! Members and their inboxes: who is on the team, and what each has yet to read.

use std::collections::{HashMap, HashSet, VecDeque};

use shared::{grant::Mode, names::Name, pb};
use tokio::sync::mpsc;

/// Where a member's inbox stream sends envelopes.
pub(crate) type InboxSink = mpsc::Sender<Result<pb::Envelope, tonic::Status>>;

/// The most `Send` message ids remembered per sender, for deduplicating retries.
const REMEMBERED_MESSAGE_IDS: usize = 4_096;

/// One member of the team.
#[derive(Debug)]
pub(crate) struct Member {
    /// Stable id, new for every `Join`.
    pub(crate) id: String,
    /// The member's name, unique among active members.
    pub(crate) name: Name,
    /// Free-text role, for people.
    pub(crate) role: String,
    /// The session token `Join` returned; cleared when the member terminates.
    pub(crate) token: Option<String>,
    /// The mode of the member's current grant.
    pub(crate) mode: Mode,
    /// Said it has nothing to do (cleared by its next call that shows work).
    pub(crate) idle: bool,
    /// A shutdown request for it is pending.
    pub(crate) shutting_down: bool,
    /// Left the team for good.
    pub(crate) terminated: bool,
    /// The lead started its process.
    pub(crate) spawned: bool,
    /// Envelopes not yet acknowledged, in `seq` order.
    pub(crate) inbox: VecDeque<pb::Envelope>,
    /// The last `seq` handed out.
    pub(crate) last_seq: u64,
    /// The open inbox stream, with an id so that a stale close is ignored.
    pub(crate) stream: Option<(u64, InboxSink)>,
    /// `Send` message ids seen from this member, for idempotent retries.
    pub(crate) seen_ids: HashSet<String>,
    /// The same ids, oldest first, to forget the oldest.
    pub(crate) seen_order: VecDeque<String>,
}

impl Member {
    /// A member that just joined, in plan mode.
    pub(crate) fn new(name: Name, role: String, token: String) -> Self {
        Self {
            id: uuid::Uuid::new_v4().to_string(),
            name,
            role,
            token: Some(token),
            mode: Mode::Plan,
            idle: false,
            shutting_down: false,
            terminated: false,
            spawned: false,
            inbox: VecDeque::new(),
            last_seq: 0,
            stream: None,
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

    /// Puts `envelope` (its `seq` not yet set) in the inbox and pushes it to
    /// the open stream, if any. A stream that cannot take it is dropped: the
    /// member reconnects and resumes from its last processed `seq`.
    pub(crate) fn push(&mut self, mut envelope: pb::Envelope) -> pb::Envelope {
        self.last_seq += 1;
        envelope.seq = self.last_seq;
        self.inbox.push_back(envelope.clone());
        if let Some((_, sink)) = &self.stream {
            if sink.try_send(Ok(envelope.clone())).is_err() {
                tracing::warn!(member = %self.name, "inbox stream is full or gone; dropping it");
                self.stream = None;
            }
        }
        envelope
    }

    /// Forgets every envelope up to `seq`.
    pub(crate) fn ack(&mut self, seq: u64) {
        while self.inbox.front().is_some_and(|e| e.seq <= seq) {
            self.inbox.pop_front();
        }
    }

    /// Opens a new inbox stream, replacing any older one, and replays every
    /// unacknowledged envelope after `after_seq`.
    pub(crate) fn open_stream(&mut self, stream_id: u64, after_seq: u64, sink: InboxSink) {
        self.ack(after_seq);
        for envelope in &self.inbox {
            if sink.try_send(Ok(envelope.clone())).is_err() {
                tracing::warn!(member = %self.name, "inbox stream cannot take the replay");
                return;
            }
        }
        self.stream = Some((stream_id, sink));
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
    /// Session token to member name.
    sessions: HashMap<String, String>,
}

impl Roster {
    /// A member by name.
    pub(crate) fn get(&self, name: &str) -> Option<&Member> {
        self.members.get(name)
    }

    /// A member by name, to change it.
    pub(crate) fn get_mut(&mut self, name: &str) -> Option<&mut Member> {
        self.members.get_mut(name)
    }

    /// The name of the member a session token belongs to.
    pub(crate) fn by_token(&self, token: &str) -> Option<&str> {
        self.sessions.get(token).map(String::as_str)
    }

    /// Adds (or, for a terminated name, replaces) a member.
    pub(crate) fn insert(&mut self, member: Member) {
        let name = member.name.to_string();
        if let Some(token) = &member.token {
            self.sessions.insert(token.clone(), name.clone());
        }
        if self.members.insert(name.clone(), member).is_some() {
            self.order.retain(|n| n != &name);
        }
        self.order.push(name);
    }

    /// Revokes a member's session token.
    pub(crate) fn revoke(&mut self, name: &str) {
        if let Some(token) = self.members.get_mut(name).and_then(|m| m.token.take()) {
            self.sessions.remove(&token);
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

    /// Every member, to change them.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Member> {
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
            format!("t-{name}"),
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

    #[tokio::test]
    async fn a_resumed_stream_gets_every_unacked_envelope_after_its_seq_once() {
        let mut alice = member("alice");
        for i in 1..=5 {
            alice.push(text(&i.to_string()));
        }
        let (tx, mut rx) = mpsc::channel(16);
        alice.open_stream(1, 2, tx);
        let mut seqs = Vec::new();
        while let Ok(Ok(e)) = rx.try_recv() {
            seqs.push(e.seq);
        }
        assert_eq!(seqs, vec![3, 4, 5]);
        alice.push(text("6"));
        assert_eq!(rx.try_recv().map(|r| r.map(|e| e.seq).ok()), Ok(Some(6)));
        alice.ack(6);
        assert!(alice.inbox.is_empty());
        assert_eq!(alice.status(), pb::MemberStatus::Working);
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
    }
}
