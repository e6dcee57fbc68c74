//! A watcher's events on the wire: a [`Notice`] as `Watch` sends it, and
//! what it costs the watcher's byte budget.

use crate::pb;
use mesh_core::effect::Notice;

use super::{member_usage, ToPb};

/// What a watcher's event of `notice` at `at_unix_ms` is as `Watch` sends
/// it: its encoded size counts against the watcher's byte budget.
pub fn event_bytes(at_unix_ms: i64, notice: &Notice) -> usize {
    use prost::Message as _;
    pb::Event {
        at_unix_ms,
        kind: Some(notice.to_pb()),
    }
    .encoded_len()
}

/// A watcher's event on the wire.
pub fn event(at_unix_ms: i64, notice: &Notice) -> pb::Event {
    pb::Event {
        at_unix_ms,
        kind: Some(notice.to_pb()),
    }
}

impl ToPb for Notice {
    type Pb = pb::event::Kind;
    fn to_pb(&self) -> pb::event::Kind {
        match self {
            Notice::Envelope(envelope) => pb::event::Kind::Envelope(pb::Envelope {
                seq: envelope.seq,
                message_id: envelope.message_id.clone(),
                from: envelope.from.clone(),
                to: envelope.to.clone(),
                sent_at_unix_ms: envelope.sent_at_unix_ms,
                body: Some(envelope.message.to_pb()),
            }),
            Notice::ChildExited {
                name,
                pid,
                how,
                joined,
                log_path,
                log_tail,
            } => pb::event::Kind::ChildExited(pb::ChildExited {
                name: name.clone(),
                pid: *pid,
                how: how.clone(),
                joined: *joined,
                log_path: log_path.clone(),
                log_tail: log_tail.clone(),
            }),
            Notice::Member(view) => pb::event::Kind::Member(view.to_pb()),
            Notice::Request(request) => pb::event::Kind::Request(request.to_pb()),
            Notice::Task(task) => pb::event::Kind::Task(task.to_pb()),
            Notice::ToolCall {
                member,
                tool,
                args_json,
                allowed,
                outcome,
            } => pb::event::Kind::ToolCall(pb::ToolCallReport {
                tool: tool.clone(),
                args_json: args_json.clone(),
                allowed: *allowed,
                outcome: outcome.clone(),
                member: member.clone(),
            }),
            Notice::ReviewNote {
                request_id,
                reviewer,
                note,
            } => pb::event::Kind::ReviewNote(pb::ReviewNote {
                request_id: request_id.to_string(),
                reviewer: reviewer.clone(),
                note: note.clone(),
            }),
            Notice::Usage { name, standing } => {
                pb::event::Kind::Usage(member_usage(name, standing))
            }
        }
    }
}
