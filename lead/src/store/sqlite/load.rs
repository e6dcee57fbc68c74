//! What a restarting lead reads back: every table into the [`Snapshot`] the
//! hub restores the team from, a function for each.

use mesh_core::{protocol::Request, tasks::Task};
use rusqlite::params;

use super::SqliteStore;
use crate::store::{
    rows::{self, Loaded, RequestRow},
    EnvelopeRecord, MemberRecord, Snapshot,
};

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
            "SELECT name, member_id, role, token_hash, mode, idle, terminated, last_seq, ord, idle_reason, sandbox,
                 decoding
             FROM members ORDER BY ord",
        )?;
        let rows: Vec<(MemberRecord, i32)> = members
            .query_map([], |row| {
                let member = MemberRecord {
                    name: row.get(0)?,
                    member_id: row.get(1)?,
                    role: row.get(2)?,
                    token_hash: row.get(3)?,
                    mode: mesh_core::grant::Mode::Plan,
                    idle: row.get(5)?,
                    terminated: row.get(6)?,
                    last_seq: row.get(7)?,
                    order: row.get(8)?,
                    idle_reason: row.get(9)?,
                    sandbox: mesh_core::sandbox::Sandbox::decode(&row.get::<_, String>(10)?),
                    decoding: mesh_core::decoding::Decoding::decode(&row.get::<_, String>(11)?),
                };
                Ok((member, row.get(4)?))
            })?
            .collect::<Result<_, _>>()?;
        rows.into_iter()
            .map(|(mut member, mode)| {
                member.mode = rows::mode_from(mode)?;
                Ok(member)
            })
            .collect()
    }

    fn bodies(&self) -> Loaded<Vec<(u64, mesh_core::effect::Message)>> {
        let mut bodies = self.conn.prepare("SELECT id, body FROM bodies")?;
        let rows: Vec<(u64, Vec<u8>)> = bodies
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<_, _>>()?;
        rows.into_iter()
            .map(|(id, bytes)| Ok((id, rows::shared_body_from(id, &bytes)?)))
            .collect()
    }

    fn envelopes(&self) -> Loaded<Vec<EnvelopeRecord>> {
        let mut envelopes = self
            .conn
            .prepare("SELECT member, body, shared FROM envelopes ORDER BY member, seq")?;
        let rows: Vec<(String, Vec<u8>, Option<u64>)> = envelopes
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
            .collect::<Result<_, _>>()?;
        rows.into_iter()
            .map(|(member, bytes, shared)| rows::envelope_from(member, &bytes, shared))
            .collect()
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
        blobs.iter().map(|blob| rows::task_from(blob)).collect()
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
        let kept = rows
            .into_iter()
            .map(|(member, paths, task_id)| rows::hold_from(member, &paths, task_id))
            .collect::<Loaded<_>>()?;
        Ok(Some(kept))
    }

    fn usage(&self) -> Loaded<Vec<mesh_core::usage::Account>> {
        let mut usage = self
            .conn
            .prepare("SELECT account FROM usage ORDER BY name")?;
        let rows: Vec<String> = usage
            .query_map([], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        rows.iter().map(|row| rows::usage_from(row)).collect()
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
        rows.iter().rev().map(|row| rows::audit_from(row)).collect()
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
        rows.into_iter()
            .rev()
            .map(|(id, at, kind, who, event)| rows::history_from(id, at, kind, &who, event))
            .collect()
    }
}
