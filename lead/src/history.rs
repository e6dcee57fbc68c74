//! The event history: what happened to the team (requests, members, tasks,
//! tool calls, processes, usage), kept in the store so that the console's
//! event log survives a reload and a restart, and asked for a page at a
//! time, by member, kind, time and text. Messages in inboxes are not in it
//! (the requests they carry are); a request's payload is left out (the
//! request itself is kept while it is retained). The newest `max` entries
//! are kept; older ones are trimmed, in the store too.
//!
//! The store gets them a second at a time (with the first commit after the
//! hub's once-a-second sweep, or once [`UNSAVED_MAX`] wait, and all of them
//! as the lead stops), not with the commit of the op that made them: every
//! table a commit touches is one more page it writes to the WAL, and in the
//! decision's own commit the history cost the sequential plan handshake
//! about 8% (`bench --against`). So a lead killed with -9 loses at most the
//! last second of its event log; nothing else is lost with it (the log is a
//! record of what the other tables hold).

use std::{collections::VecDeque, sync::Arc};

use mesh_core::{
    effect::Notice,
    protocol::{Kind, Opening, Request},
};

/// The most entries kept, by default.
pub(crate) const MAX_ENTRIES: usize = 20_000;

/// The most history changes that wait for the sweep's commit.
pub(crate) const UNSAVED_MAX: usize = 512;
/// The most entries one page holds.
pub(crate) const MAX_PAGE: usize = 500;

/// One thing that happened.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its place in the history (only grows).
    pub id: u64,
    /// When (unix ms).
    pub at: i64,
    body: Body,
}

/// An entry's event: as it happened, or as the store kept it.
// Each entry is behind an `Arc` already: a box would be one more allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
enum Body {
    /// The notice itself (a request without its payload), encoded only
    /// when the store or a reader asks: a lead whose store keeps no
    /// history (memory) never encodes one, and a store's second of them is
    /// encoded in its commit, not on the decision's path.
    Notice(Notice),
    /// The event as the store kept it (its row code encodes and reads
    /// it), with the members it concerns.
    Stored {
        kind: String,
        who: Vec<String>,
        event: Arc<[u8]>,
    },
}

impl Entry {
    /// An entry as the store kept it: `event` in the store's encoding.
    pub fn stored(id: u64, at: i64, kind: String, who: Vec<String>, event: Arc<[u8]>) -> Self {
        Self {
            id,
            at,
            body: Body::Stored { kind, who, event },
        }
    }

    /// `request`, `member`, `task`, `tool`, `child`, `review`, `usage`.
    pub fn kind(&self) -> &str {
        match &self.body {
            Body::Notice(notice) => kind_of(notice).map_or("", |(kind, _)| kind),
            Body::Stored { kind, .. } => kind,
        }
    }

    /// The members it concerns.
    pub fn who(&self) -> Vec<String> {
        match &self.body {
            Body::Notice(notice) => kind_of(notice)
                .map(|(_, names)| members(names).map(str::to_owned).collect())
                .unwrap_or_default(),
            Body::Stored { who, .. } => who.clone(),
        }
    }

    /// Whether it concerns `member`.
    fn concerns(&self, member: &str) -> bool {
        match &self.body {
            Body::Notice(notice) => {
                kind_of(notice).is_some_and(|(_, names)| members(names).any(|w| w == member))
            }
            Body::Stored { who, .. } => who.iter().any(|w| w == member),
        }
    }

    /// The event: the notice itself, or as the store kept it.
    pub fn event(&self) -> Event<'_> {
        match &self.body {
            Body::Notice(notice) => Event::Notice(notice),
            Body::Stored { event, .. } => Event::Stored(event),
        }
    }
}

/// An entry's event, to be told: the notice as it happened (a request
/// without its payload), or the bytes the store kept, which the store's
/// row code reads.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// As it happened.
    Notice(&'a Notice),
    /// As the store kept it.
    Stored(&'a Arc<[u8]>),
}

/// Two entries are the same when their places, kinds, members and events
/// are. A live entry is never the same as a stored one: the store's tests
/// compare those through its encoding.
impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        let same_event = match (&self.body, &other.body) {
            (Body::Notice(a), Body::Notice(b)) => a == b,
            (Body::Stored { event: a, .. }, Body::Stored { event: b, .. }) => a == b,
            _ => false,
        };
        self.id == other.id
            && self.at == other.at
            && self.kind() == other.kind()
            && self.who() == other.who()
            && same_event
    }
}

/// Whether the history keeps `request`'s payload: only a shutdown's (its
/// target, reason and who asked: a few hundred bytes); any other may be a
/// megabyte of diff.
pub(crate) fn keeps_payload(request: &Request) -> bool {
    request.opening.kind == Kind::Shutdown
}

/// What of `notice` the history keeps, if it keeps anything: a request
/// without its payload, unless [`keeps_payload`].
pub(crate) fn kept(notice: &Notice) -> Option<Notice> {
    kind_of(notice)?;
    Some(match notice {
        Notice::Request(request) if !keeps_payload(request) => {
            Notice::Request(Box::new(without_payload(request)))
        }
        notice => notice.clone(),
    })
}

/// `request` with an empty payload, the payload never copied.
fn without_payload(request: &Request) -> Request {
    let o = &request.opening;
    Request {
        opening: Opening {
            id: o.id.clone(),
            kind: o.kind,
            sender: o.sender.clone(),
            target: o.target.clone(),
            payload_json: String::new(),
            deadline_unix_ms: o.deadline_unix_ms,
        },
        status: request.status,
        decision: request.decision.clone(),
        feedback: request.feedback.clone(),
        created_at_unix_ms: request.created_at_unix_ms,
        resolved_at_unix_ms: request.resolved_at_unix_ms,
        reviews: request.reviews.clone(),
        waits_for: request.waits_for.clone(),
    }
}

/// What a page of the history is asked for: entries older than `before`
/// (none: the newest), matching every filter given, newest first.
#[derive(Debug, Clone, Default)]
pub(crate) struct Query {
    pub(crate) member: Option<String>,
    pub(crate) kind: Option<String>,
    pub(crate) since: Option<i64>,
    pub(crate) until: Option<i64>,
    /// Text to find in each entry's line.
    pub(crate) text: Option<Text>,
    pub(crate) before: Option<u64>,
    pub(crate) limit: usize,
}

/// Text a page's entries hold: `needle` (lower case) in the line `line`
/// gives an entry (the adapter's, as `lead watch` says it; `None` when the
/// entry cannot be told).
#[derive(Debug, Clone)]
pub(crate) struct Text {
    pub(crate) needle: String,
    pub(crate) line: fn(&Entry) -> Option<String>,
}

/// A page: its entries, newest first, and where the next (older) one
/// starts, if there is more.
#[derive(Debug, Clone)]
pub(crate) struct Page {
    pub(crate) entries: Vec<Arc<Entry>>,
    pub(crate) next_before: Option<u64>,
}

/// The newest entries, in order.
#[derive(Debug)]
pub(crate) struct History {
    entries: VecDeque<Arc<Entry>>,
    next_id: u64,
    max: usize,
    /// The store holds no entry below this id.
    trimmed_below: u64,
    /// The store forgets old entries this many at a time (one range
    /// delete), not a row for each new one: a twentieth of `max`, at most
    /// 1,000. It holds up to this many more than `max`.
    trim_step: u64,
}

impl History {
    /// The history the store kept (oldest first), keeping at most `max`.
    pub(crate) fn restore(kept: Vec<Entry>, max: usize) -> Self {
        let next_id = kept.last().map_or(1, |e| e.id + 1);
        let mut entries: VecDeque<Arc<Entry>> = kept.into_iter().map(Arc::new).collect();
        while entries.len() > max {
            entries.pop_front();
        }
        // Room for all it keeps, taken once (see `audit::Trail::restore`).
        entries.reserve((max + 1).saturating_sub(entries.len()));
        let oldest = entries.front().map_or(next_id, |e| e.id);
        Self {
            entries,
            next_id,
            max,
            // What the store still holds below the oldest kept (at most a
            // step's worth) goes at the next trim.
            trimmed_below: oldest,
            trim_step: (u64::try_from(max).unwrap_or(u64::MAX) / 20).clamp(1, 1_000),
        }
    }

    /// Records `notice` at `at`, if it belongs in the history: the entry,
    /// and the id below which the store may forget, once a step's worth of
    /// the oldest went. The history keeps `notice` (see [`kept`]).
    pub(crate) fn record(
        &mut self,
        at: i64,
        mut notice: Notice,
    ) -> Option<(Arc<Entry>, Option<u64>)> {
        kind_of(&notice)?;
        if let Notice::Request(request) = &mut notice {
            if !keeps_payload(request) {
                request.opening.payload_json = String::new();
            }
        }
        let entry = Arc::new(Entry {
            id: self.next_id,
            at,
            body: Body::Notice(notice),
        });
        self.next_id += 1;
        self.entries.push_back(entry.clone());
        while self.entries.len() > self.max {
            self.entries.pop_front();
        }
        let oldest = self.entries.front().map_or(self.next_id, |e| e.id);
        let trimmed = (oldest.saturating_sub(self.trimmed_below) >= self.trim_step).then(|| {
            self.trimmed_below = oldest;
            oldest
        });
        Some((entry, trimmed))
    }

    /// A page of what `query` asks for.
    pub(crate) fn query(&self, query: &Query) -> Page {
        let limit = query.limit.clamp(1, MAX_PAGE);
        let mut entries = Vec::new();
        let mut next_before = None;
        for entry in self.entries.iter().rev() {
            if query.before.is_some_and(|before| entry.id >= before) {
                continue;
            }
            if !matches(entry, query) {
                continue;
            }
            if entries.len() == limit {
                next_before = entries.last().map(|e: &Arc<Entry>| e.id);
                break;
            }
            entries.push(entry.clone());
        }
        Page {
            entries,
            next_before,
        }
    }
}

/// Whether `entry` meets every filter of `query`.
fn matches(entry: &Entry, query: &Query) -> bool {
    if query.kind.as_deref().is_some_and(|k| k != entry.kind()) {
        return false;
    }
    if query.member.as_deref().is_some_and(|m| !entry.concerns(m)) {
        return false;
    }
    if query.since.is_some_and(|since| entry.at < since)
        || query.until.is_some_and(|until| entry.at > until)
    {
        return false;
    }
    match &query.text {
        Some(text) => (text.line)(entry)
            .is_some_and(|line| line.to_lowercase().contains(text.needle.as_str())),
        None => true,
    }
}

/// The kind of `notice` and the members it concerns (up to two: an empty
/// name or the lead's is no member); `None` for what the history leaves out
/// (messages in inboxes).
fn kind_of(notice: &Notice) -> Option<(&'static str, [&str; 2])> {
    Some(match notice {
        Notice::Envelope(_) => return None,
        Notice::Request(r) => ("request", [&r.opening.sender, &r.opening.target]),
        Notice::Member(m) => ("member", [m.member.name.as_str(), ""]),
        Notice::Task(t) => ("task", [&t.owner, ""]),
        Notice::ToolCall { member, .. } => ("tool", [member, ""]),
        Notice::ChildExited { name, .. } => ("child", [name, ""]),
        Notice::ReviewNote { .. } => ("review", ["", ""]),
        Notice::Usage { name, .. } => ("usage", [name, ""]),
    })
}

/// The members among `names`.
fn members(names: [&str; 2]) -> impl Iterator<Item = &str> {
    names
        .into_iter()
        .filter(|n| !n.is_empty() && *n != mesh_core::names::LEAD)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(member: &str, outcome: &str) -> Notice {
        Notice::ToolCall {
            member: member.into(),
            tool: "read_file".into(),
            args_json: "{}".into(),
            allowed: true,
            outcome: outcome.into(),
        }
    }

    #[test]
    fn pages_go_back_in_time_through_the_filters_and_the_oldest_are_trimmed() {
        let mut history = History::restore(Vec::new(), 5);
        let mut trimmed = None;
        for i in 0..7 {
            let who = if i % 2 == 0 { "ann" } else { "bob" };
            let (_, t) = history
                .record(1_000 + i, tool(who, &format!("outcome {i}")))
                .expect("recorded");
            trimmed = t.or(trimmed);
        }
        assert_eq!(trimmed, Some(3), "ids 1 and 2 went");
        let all = history.query(&Query {
            limit: 2,
            ..Query::default()
        });
        assert_eq!(all.entries.iter().map(|e| e.id).collect::<Vec<_>>(), [7, 6]);
        assert_eq!(all.next_before, Some(6));
        let older = history.query(&Query {
            limit: 10,
            before: all.next_before,
            ..Query::default()
        });
        assert_eq!(
            older.entries.iter().map(|e| e.id).collect::<Vec<_>>(),
            [5, 4, 3]
        );
        assert_eq!(older.next_before, None);
        let ann = history.query(&Query {
            member: Some("ann".into()),
            limit: 10,
            ..Query::default()
        });
        assert_eq!(
            ann.entries.iter().map(|e| e.id).collect::<Vec<_>>(),
            [7, 5, 3]
        );
        let text = history.query(&Query {
            text: Some(Text {
                needle: "outcome 4".into(),
                line: |entry| match entry.event() {
                    Event::Notice(notice) => Some(format!("{notice:?}")),
                    Event::Stored(_) => None,
                },
            }),
            limit: 10,
            ..Query::default()
        });
        assert_eq!(text.entries.iter().map(|e| e.id).collect::<Vec<_>>(), [5]);
        let window = history.query(&Query {
            since: Some(1_003),
            until: Some(1_004),
            kind: Some("tool".into()),
            limit: 10,
            ..Query::default()
        });
        assert_eq!(
            window.entries.iter().map(|e| e.id).collect::<Vec<_>>(),
            [5, 4]
        );
        let restored =
            History::restore(history.entries.iter().map(|e| Entry::clone(e)).collect(), 5);
        assert_eq!(restored.next_id, 8);
    }

    #[test]
    fn an_entry_concerns_its_members_whether_live_or_stored() {
        let mut history = History::restore(Vec::new(), 5);
        let (live, _) = history
            .record(1_000, tool("ann", "done"))
            .expect("recorded");
        let stored = Entry::stored(
            live.id,
            live.at,
            live.kind().to_owned(),
            live.who(),
            Arc::from(&b"bytes"[..]),
        );
        assert_eq!((stored.kind(), stored.who()), ("tool", vec!["ann".into()]));
        assert!(live.concerns("ann") && stored.concerns("ann") && !stored.concerns("bob"));
        assert_ne!(*live, stored, "a live entry is never a stored one");
    }

    #[test]
    fn a_request_is_kept_without_its_payload() {
        let request = Request::pending(
            Opening {
                id: mesh_core::names::RequestId::existing("id", "r1").expect("id"),
                kind: mesh_core::protocol::Kind::PlanApproval,
                sender: "alice".into(),
                target: "lead".into(),
                payload_json: "x".repeat(1 << 20),
                deadline_unix_ms: None,
            },
            1,
        );
        let notice = Notice::Request(Box::new(request));
        let mut history = History::restore(Vec::new(), 5);
        let (entry, _) = history.record(1, notice).expect("recorded");
        let Event::Notice(Notice::Request(kept)) = entry.event() else {
            panic!("a request's event");
        };
        assert!(kept.opening.payload_json.is_empty() && kept.opening.id.as_str() == "r1");
    }

    #[test]
    fn a_shutdown_keeps_its_payload_which_says_who_asked() {
        let payload = r#"{"target":"bob","reason":"done","deadline_unix_ms":0,"asked_by":"operator (console)"}"#;
        let request = Request::pending(
            Opening {
                id: mesh_core::names::RequestId::existing("id", "s1").expect("id"),
                kind: Kind::Shutdown,
                sender: "lead".into(),
                target: "bob".into(),
                payload_json: payload.into(),
                deadline_unix_ms: None,
            },
            1,
        );
        let notice = Notice::Request(Box::new(request));
        let Some(Notice::Request(passed)) = kept(&notice) else {
            panic!("a request's notice");
        };
        assert_eq!(passed.opening.payload_json, payload);
        let mut history = History::restore(Vec::new(), 5);
        let (entry, _) = history.record(1, notice).expect("recorded");
        let Event::Notice(Notice::Request(recorded)) = entry.event() else {
            panic!("a request's event");
        };
        assert_eq!(recorded.opening.payload_json, payload);
    }
}
