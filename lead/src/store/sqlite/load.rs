//! What a restarting lead reads back: every table into the [`Snapshot`] the
//! hub restores the team from, a function for each.

use mesh_core::{
    grant::Mode,
    names::RequestId,
    protocol::{Kind, Opening, Request, Status},
    tasks::Task,
};
use prost::Message as _;
use rusqlite::params;
use shared::{pb, wire::*};

use super::{decode_decision, message, SqliteStore};
use crate::store::{EnvelopeRecord, MemberRecord, Snapshot, StoreError};

type Loaded<T> = Result<T, StoreError>;

impl SqliteStore {
    /// Everything the store keeps.
    pub(super) fn load_snapshot(&mut self) -> Loaded<Snapshot> {
        Ok(Snapshot {
            members: self.members()?,
            bodies: self.bodies()?,
            envelopes: self.envelopes()?,
            requests: self.requests()?,
            message_ids: self.message_ids()?,
            tasks: self.tasks()?,
            holds: self.holds()?,
            usage: self.usage()?,
            audit: self.audit()?,
            history: self.history()?,
        })
    }

    fn members(&self) -> Loaded<Vec<MemberRecord>> {
        let mut members = self.conn.prepare(
            "SELECT name, member_id, role, token_hash, mode, idle, terminated, last_seq, ord, idle_reason
             FROM members ORDER BY ord",
        )?;
        let rows: Vec<(MemberRecord, i32)> = members
            .query_map([], |row| {
                let member = MemberRecord {
                    name: row.get(0)?,
                    member_id: row.get(1)?,
                    role: row.get(2)?,
                    token_hash: row.get(3)?,
                    mode: Mode::Plan,
                    idle: row.get(5)?,
                    terminated: row.get(6)?,
                    last_seq: row.get(7)?,
                    order: row.get(8)?,
                    idle_reason: row.get(9)?,
                };
                Ok((member, row.get(4)?))
            })?
            .collect::<Result<_, _>>()?;
        // The mode is stored as the wire's number; none is plan mode.
        rows.into_iter()
            .map(|(mut member, mode)| {
                member.mode = mode_from_pb("mode", mode)
                    .map_err(|e| StoreError::Decode {
                        what: "member",
                        detail: e.to_string(),
                    })?
                    .unwrap_or(Mode::Plan);
                Ok(member)
            })
            .collect()
    }

    fn bodies(&self) -> Loaded<Vec<(u64, mesh_core::effect::Message)>> {
        let mut bodies = self.conn.prepare("SELECT id, body FROM bodies")?;
        let rows: Vec<(u64, Vec<u8>)> = bodies
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<_, _>>()?;
        let mut out = Vec::with_capacity(rows.len());
        for (id, bytes) in rows {
            let body = decode_envelope("shared body", &bytes)?
                .body
                .ok_or_else(|| StoreError::Decode {
                    what: "shared body",
                    detail: format!("{id} is empty"),
                })?;
            out.push((id, message("shared body", body)?));
        }
        Ok(out)
    }

    fn envelopes(&self) -> Loaded<Vec<EnvelopeRecord>> {
        let mut envelopes = self
            .conn
            .prepare("SELECT member, body, shared FROM envelopes ORDER BY member, seq")?;
        let rows: Vec<(String, Vec<u8>, Option<u64>)> = envelopes
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
            .collect::<Result<_, _>>()?;
        let mut out = Vec::with_capacity(rows.len());
        for (member, bytes, shared) in rows {
            let envelope = decode_envelope("envelope", &bytes)?;
            let body = envelope
                .body
                .map(|body| message("envelope", body))
                .transpose()?;
            out.push(EnvelopeRecord {
                member,
                seq: envelope.seq,
                message_id: envelope.message_id,
                from: envelope.from,
                sent_at_unix_ms: envelope.sent_at_unix_ms,
                body,
                shared,
            });
        }
        Ok(out)
    }

    fn requests(&self) -> Loaded<Vec<Request>> {
        let mut requests = self.conn.prepare(
            "SELECT request_id, kind, sender, target, status, payload, feedback, created, resolved, deadline, decision,
                 reviews
             FROM requests ORDER BY rowid",
        )?;
        let rows = requests.query_map([], |row| {
            Ok(RequestRow {
                id: row.get(0)?,
                kind: row.get(1)?,
                sender: row.get(2)?,
                target: row.get(3)?,
                status: row.get(4)?,
                payload: row.get(5)?,
                feedback: row.get(6)?,
                created: row.get(7)?,
                resolved: row.get(8)?,
                deadline: row.get(9)?,
                decision: row.get(10)?,
                reviews: row.get(11)?,
            })
        })?;
        let mut out = Vec::new();
        for row in rows {
            out.push(row?.request()?);
        }
        Ok(out)
    }

    fn message_ids(&self) -> Loaded<Vec<(String, String, String)>> {
        let mut ids = self
            .conn
            .prepare("SELECT sender, message_id, digest FROM message_ids ORDER BY sender, n")?;
        let ids = ids
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
            .collect::<Result<_, _>>()?;
        Ok(ids)
    }

    fn tasks(&self) -> Loaded<Vec<Task>> {
        let mut tasks = self.conn.prepare("SELECT body FROM tasks ORDER BY rowid")?;
        let blobs: Vec<Vec<u8>> = tasks
            .query_map([], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        let mut out = Vec::with_capacity(blobs.len());
        for blob in blobs {
            let bad = |detail: String| StoreError::Decode {
                what: "task",
                detail,
            };
            let task = pb::Task::decode(blob.as_slice()).map_err(|e| bad(e.to_string()))?;
            let status = task.status;
            out.push(Task::try_from(task).map_err(|_| bad(format!("status {status}")))?);
        }
        Ok(out)
    }

    /// The holds, where the store keeps them (not before the first commit
    /// after schema 5).
    fn holds(&self) -> Loaded<Option<Vec<(String, mesh_core::holds::Hold)>>> {
        if !self.holds_kept {
            return Ok(None);
        }
        let mut holds = self
            .conn
            .prepare("SELECT member, paths, task_id FROM holds ORDER BY member")?;
        let rows: Vec<(String, String, String)> = holds
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
            .collect::<Result<_, _>>()?;
        let mut kept = Vec::with_capacity(rows.len());
        for (member, paths, task_id) in rows {
            let paths: Vec<String> =
                serde_json::from_str(&paths).map_err(|e| StoreError::Decode {
                    what: "hold",
                    detail: e.to_string(),
                })?;
            kept.push((member, mesh_core::holds::Hold { paths, task_id }));
        }
        Ok(Some(kept))
    }

    fn usage(&self) -> Loaded<Vec<mesh_core::usage::Account>> {
        let mut usage = self
            .conn
            .prepare("SELECT account FROM usage ORDER BY name")?;
        let rows: Vec<String> = usage
            .query_map([], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        rows.iter()
            .map(|row| {
                serde_json::from_str(row).map_err(|e| StoreError::Decode {
                    what: "usage account",
                    detail: e.to_string(),
                })
            })
            .collect()
    }

    /// The newest `audit::KEPT` entries of the trail, oldest first.
    fn audit(&self) -> Loaded<Vec<crate::audit::Entry>> {
        let mut audit = self
            .conn
            .prepare("SELECT entry FROM audit ORDER BY seq DESC LIMIT ?1")?;
        let kept = i64::try_from(crate::audit::KEPT).unwrap_or(i64::MAX);
        let rows: Vec<String> = audit
            .query_map(params![kept], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        rows.iter()
            .rev()
            .map(|row| {
                serde_json::from_str(row).map_err(|e| StoreError::Decode {
                    what: "audit entry",
                    detail: e.to_string(),
                })
            })
            .collect()
    }

    /// The newest `history::MAX_ENTRIES` events, oldest first.
    fn history(&self) -> Loaded<Vec<crate::history::Entry>> {
        let mut history = self
            .conn
            .prepare("SELECT id, at, kind, who, event FROM history ORDER BY id DESC LIMIT ?1")?;
        let max = i64::try_from(crate::history::MAX_ENTRIES).unwrap_or(i64::MAX);
        let rows: Vec<(i64, i64, String, String, Vec<u8>)> = history
            .query_map(params![max], |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                ))
            })?
            .collect::<Result<_, _>>()?;
        let mut out = Vec::with_capacity(rows.len());
        for (id, at, kind, who, event) in rows.into_iter().rev() {
            crate::render::decode_event(&event).map_err(|e| StoreError::Decode {
                what: "history entry",
                detail: e.to_string(),
            })?;
            out.push(crate::history::Entry {
                id: u64::try_from(id).unwrap_or(0),
                at,
                kind,
                who: who
                    .split(',')
                    .filter(|w| !w.is_empty())
                    .map(str::to_owned)
                    .collect(),
                event: event.into(),
            });
        }
        Ok(out)
    }
}

fn decode_envelope(what: &'static str, bytes: &[u8]) -> Loaded<pb::Envelope> {
    pb::Envelope::decode(bytes).map_err(|e| StoreError::Decode {
        what,
        detail: e.to_string(),
    })
}

/// A row of `requests`, as it is stored.
struct RequestRow {
    id: String,
    kind: i32,
    sender: String,
    target: String,
    status: i32,
    payload: String,
    feedback: String,
    created: i64,
    resolved: Option<i64>,
    deadline: Option<i64>,
    decision: Option<Vec<u8>>,
    reviews: String,
}

impl RequestRow {
    /// The request it keeps.
    fn request(self) -> Loaded<Request> {
        let bad = |what: &'static str, detail: String| StoreError::Decode { what, detail };
        let id = RequestId::existing("request_id", &self.id)
            .map_err(|e| bad("request id", e.to_string()))?;
        Ok(Request {
            opening: Opening {
                id,
                kind: pb::RequestType::try_from(self.kind)
                    .and_then(Kind::try_from)
                    .map_err(|_| bad("request type", self.kind.to_string()))?,
                sender: self.sender,
                target: self.target,
                payload_json: self.payload,
                deadline_unix_ms: self.deadline,
            },
            status: pb::RequestStatus::try_from(self.status)
                .and_then(Status::try_from)
                .map_err(|_| bad("request status", self.status.to_string()))?,
            decision: self
                .decision
                .map(|blob| decode_decision(&blob))
                .transpose()?,
            feedback: self.feedback,
            created_at_unix_ms: self.created,
            resolved_at_unix_ms: self.resolved,
            reviews: serde_json::from_str(&self.reviews)
                .map_err(|e| bad("request reviews", e.to_string()))?,
        })
    }
}
