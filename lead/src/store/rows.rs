//! How each record is kept, whatever the database holds it: envelopes,
//! shared bodies, tasks and decisions as the wire's bytes (as every release
//! has kept them), holds, usage, reviews and the audit trail as JSON, kinds,
//! statuses and modes as the wire's numbers. SQLite and PostgreSQL write and
//! read rows through these, so a team moved from one to the other is the
//! same team.

use std::sync::Arc;

use mesh_core::{
    effect::Message,
    grant::{Grant, Mode},
    holds::Hold,
    names::RequestId,
    protocol::{Decision, Kind, Opening, Request, Status},
    tasks::Task,
    usage::Account,
};
use prost::Message as _;
use shared::{pb, wire::*};

use super::{EnvelopeRecord, StoreError};
use crate::history::{self, Entry};

pub(super) type Loaded<T> = Result<T, StoreError>;

fn bad(what: &'static str, detail: impl ToString) -> StoreError {
    StoreError::Decode {
        what,
        detail: detail.to_string(),
    }
}

/// An envelope as stored: the wire's `Envelope`.
pub(super) fn envelope_bytes(record: &EnvelopeRecord) -> Vec<u8> {
    pb::Envelope {
        seq: record.seq,
        message_id: record.message_id.clone(),
        from: record.from.clone(),
        to: record.member.clone(),
        sent_at_unix_ms: record.sent_at_unix_ms,
        body: record.body.as_ref().map(ToPb::to_pb),
    }
    .encode_to_vec()
}

/// A stored envelope of `member`'s inbox, back.
pub(super) fn envelope_from(
    member: String,
    bytes: &[u8],
    shared: Option<u64>,
) -> Loaded<EnvelopeRecord> {
    let envelope = pb::Envelope::decode(bytes).map_err(|e| bad("envelope", e))?;
    let body = envelope
        .body
        .map(|body| message("envelope", body))
        .transpose()?;
    Ok(EnvelopeRecord {
        member,
        seq: envelope.seq,
        message_id: envelope.message_id,
        from: envelope.from,
        sent_at_unix_ms: envelope.sent_at_unix_ms,
        body,
        shared,
    })
}

/// A shared body as stored: an `Envelope` holding only the body.
pub(super) fn shared_body_bytes(body: &Message) -> Vec<u8> {
    pb::Envelope {
        body: Some(body.to_pb()),
        ..Default::default()
    }
    .encode_to_vec()
}

/// A stored shared body, back.
pub(super) fn shared_body_from(id: u64, bytes: &[u8]) -> Loaded<Message> {
    let body = pb::Envelope::decode(bytes)
        .map_err(|e| bad("shared body", e))?
        .body
        .ok_or_else(|| bad("shared body", format!("{id} is empty")))?;
    message("shared body", body)
}

/// A stored body as the core's [`Message`]; one it cannot hold is a
/// decoding error of `what`.
fn message(what: &'static str, body: pb::envelope::Body) -> Loaded<Message> {
    Message::try_from(body).map_err(|e| bad(what, e))
}

/// A task as stored: the wire's `Task`.
pub(super) fn task_bytes(task: &Task) -> Vec<u8> {
    task.to_pb().encode_to_vec()
}

/// A stored task, back.
pub(super) fn task_from(bytes: &[u8]) -> Loaded<Task> {
    let task = pb::Task::decode(bytes).map_err(|e| bad("task", e))?;
    let status = task.status;
    Task::try_from(task).map_err(|_| bad("task", format!("status {status}")))
}

/// A member's sandbox as its column keeps it; empty: it did not say.
pub(super) fn sandbox_text(sandbox: Option<&mesh_core::sandbox::Sandbox>) -> String {
    sandbox.map(|s| s.encode()).unwrap_or_default()
}

/// A member's decoding as its column keeps it; empty: it did not say.
pub(super) fn decoding_text(decoding: Option<&mesh_core::decoding::Decoding>) -> String {
    decoding.map(|d| d.encode()).unwrap_or_default()
}

/// A hold's paths as stored: a JSON list.
pub(super) fn hold_paths(hold: &Hold) -> String {
    // A list of strings always encodes.
    serde_json::to_string(&hold.paths).unwrap_or_else(|_| "[]".into())
}

/// A stored hold, back.
pub(super) fn hold_from(member: String, paths: &str, task_id: String) -> Loaded<(String, Hold)> {
    let paths: Vec<String> = serde_json::from_str(paths).map_err(|e| bad("hold", e))?;
    Ok((member, Hold { paths, task_id }))
}

/// A usage account as stored: JSON.
pub(super) fn usage_json(account: &Account) -> String {
    // Plain numbers and strings always encode.
    serde_json::to_string(account).unwrap_or_else(|_| "{}".into())
}

/// A stored usage account, back.
pub(super) fn usage_from(json: &str) -> Loaded<Account> {
    serde_json::from_str(json).map_err(|e| bad("usage account", e))
}

/// A stored audit entry (its JSON, byte for byte as it was hashed), back.
pub(super) fn audit_from(json: &str) -> Loaded<crate::audit::Entry> {
    serde_json::from_str(json).map_err(|e| bad("audit entry", e))
}

/// The members an event concerns, as stored: comma-separated.
pub(super) fn who_text(entry: &Entry) -> String {
    entry.who().join(",")
}

/// A history entry's event as the store keeps it: the event `Watch`
/// gives (a request without its payload), encoded. A live entry is encoded
/// here, in the commit, not on the decision's path.
pub(super) fn history_bytes(entry: &Entry) -> Arc<[u8]> {
    match entry.event() {
        history::Event::Notice(notice) => history_pb(entry.at, notice).encode_to_vec().into(),
        history::Event::Stored(bytes) => bytes.clone(),
    }
}

/// A history entry's event, as `Watch` and the console give it.
pub fn history_event(entry: &Entry) -> Result<pb::Event, prost::DecodeError> {
    match entry.event() {
        history::Event::Notice(notice) => Ok(history_pb(entry.at, notice)),
        history::Event::Stored(bytes) => pb::Event::decode(&bytes[..]),
    }
}

/// `notice` at `at` as an event on the wire; a request without its
/// payload (unless [`history::keeps_payload`]), which is not copied
/// to be dropped.
fn history_pb(at: i64, notice: &mesh_core::effect::Notice) -> pb::Event {
    let kind = match notice {
        mesh_core::effect::Notice::Request(request) if !history::keeps_payload(request) => {
            pb::event::Kind::Request(request_without_payload(request))
        }
        notice => notice.to_pb(),
    };
    pb::Event {
        at_unix_ms: at,
        kind: Some(kind),
    }
}

/// A stored event of the history, back (checked to decode, kept as bytes).
pub(super) fn history_from(
    id: i64,
    at: i64,
    kind: String,
    who: &str,
    event: Vec<u8>,
) -> Loaded<Entry> {
    pb::Event::decode(&event[..]).map_err(|e| bad("history entry", e))?;
    Ok(Entry::stored(
        u64::try_from(id).unwrap_or(0),
        at,
        kind,
        who.split(',')
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect(),
        event.into(),
    ))
}

/// A member's mode as stored: the wire's number.
pub(super) fn mode_number(mode: Mode) -> i32 {
    mode.to_pb() as i32
}

/// A stored mode, back; none is plan mode.
pub(super) fn mode_from(number: i32) -> Loaded<Mode> {
    Ok(mode_from_pb("mode", number)
        .map_err(|e| bad("member", e))?
        .unwrap_or(Mode::Plan))
}

/// A request's kind as stored: the wire's number.
pub(super) fn kind_number(kind: Kind) -> i32 {
    kind.to_pb() as i32
}

/// A request's status as stored: the wire's number.
pub(super) fn status_number(status: Status) -> i32 {
    status.to_pb() as i32
}

/// A request's reviews as stored: JSON.
pub(super) fn reviews_json(request: &Request) -> String {
    serde_json::to_string(&request.reviews).unwrap_or_else(|_| "[]".into())
}

/// A decision as stored: a `PlanReview` without its id.
pub(super) fn decision_bytes(decision: &Decision) -> Vec<u8> {
    pb::PlanReview {
        request_id: String::new(),
        approve: decision.approve,
        feedback: decision.feedback.clone(),
        grant: decision.grant.as_ref().map(Grant::to_pb),
        refuse_overlap: false,
    }
    .encode_to_vec()
}

/// A stored decision, back.
pub(super) fn decision_from(blob: &[u8]) -> Loaded<Decision> {
    let review = pb::PlanReview::decode(blob).map_err(|e| bad("decision", e))?;
    let grant = review
        .grant
        .as_ref()
        .map(Grant::try_from)
        .transpose()
        .map_err(|e| bad("decision", e))?;
    Ok(Decision {
        approve: review.approve,
        feedback: review.feedback,
        grant,
    })
}

/// A row of `requests`, as it is stored.
#[derive(Debug)]
pub(super) struct RequestRow {
    pub(super) id: String,
    pub(super) kind: i32,
    pub(super) sender: String,
    pub(super) target: String,
    pub(super) status: i32,
    pub(super) payload: String,
    pub(super) feedback: String,
    pub(super) created: i64,
    pub(super) resolved: Option<i64>,
    pub(super) deadline: Option<i64>,
    pub(super) decision: Option<Vec<u8>>,
    pub(super) reviews: String,
}

impl RequestRow {
    /// The request it keeps.
    pub(super) fn request(self) -> Loaded<Request> {
        let id = RequestId::existing("request_id", &self.id).map_err(|e| bad("request id", e))?;
        Ok(Request {
            opening: Opening {
                id,
                kind: pb::RequestType::try_from(self.kind)
                    .and_then(Kind::try_from)
                    .map_err(|_| bad("request type", self.kind))?,
                sender: self.sender,
                target: self.target,
                payload_json: self.payload,
                deadline_unix_ms: self.deadline,
            },
            status: pb::RequestStatus::try_from(self.status)
                .and_then(Status::try_from)
                .map_err(|_| bad("request status", self.status))?,
            decision: self.decision.map(|blob| decision_from(&blob)).transpose()?,
            feedback: self.feedback,
            created_at_unix_ms: self.created,
            resolved_at_unix_ms: self.resolved,
            reviews: serde_json::from_str(&self.reviews).map_err(|e| bad("request reviews", e))?,
            waits_for: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use mesh_core::effect::Notice;

    use super::*;

    #[test]
    fn a_live_history_entry_is_kept_and_told_as_the_one_the_store_gives_back() {
        let mut history = history::History::restore(Vec::new(), 5);
        let (live, _) = history
            .record(
                1_000,
                Notice::ToolCall {
                    member: "ann".into(),
                    tool: "read_file".into(),
                    args_json: "{}".into(),
                    allowed: true,
                    outcome: "done".into(),
                },
            )
            .expect("recorded");
        let stored = history_from(
            i64::try_from(live.id).expect("small"),
            live.at,
            live.kind().to_owned(),
            &who_text(&live),
            history_bytes(&live).to_vec(),
        )
        .expect("decodes");
        assert_eq!((stored.kind(), stored.who()), ("tool", vec!["ann".into()]));
        assert_eq!(history_bytes(&live), history_bytes(&stored));
        assert_eq!(
            history_event(&live).expect("live"),
            history_event(&stored).expect("stored")
        );
        assert!(history_from(1, 1, "tool".into(), "", vec![0xff, 0xff]).is_err());
    }

    #[test]
    fn a_shutdown_tells_its_payload_on_the_wire() {
        let payload = r#"{"target":"bob","reason":"done","deadline_unix_ms":0,"asked_by":"lead"}"#;
        let request = Request::pending(
            Opening {
                id: RequestId::existing("id", "s1").expect("id"),
                kind: Kind::Shutdown,
                sender: "lead".into(),
                target: "bob".into(),
                payload_json: payload.into(),
                deadline_unix_ms: None,
            },
            1,
        );
        let mut history = history::History::restore(Vec::new(), 5);
        let (entry, _) = history
            .record(1, Notice::Request(Box::new(request)))
            .expect("recorded");
        let Some(pb::event::Kind::Request(on_the_wire)) =
            history_event(&entry).expect("event").kind
        else {
            panic!("a request's event on the wire");
        };
        assert_eq!(on_the_wire.payload_json, payload);
    }
}
