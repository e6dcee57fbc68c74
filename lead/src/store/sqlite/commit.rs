//! A batch of changes written in one transaction: nothing is answered or
//! delivered before it commits. Each kind of change is written by a
//! function of its own.

use rusqlite::{params, Transaction};

use super::{SqliteStore, KEPT_MESSAGE_IDS};
use crate::store::{rows, Change, EnvelopeRecord, MemberRecord, StoreError, TeamChange};

type Written = Result<(), StoreError>;

impl SqliteStore {
    /// Writes `changes` in one transaction.
    pub(super) fn commit_changes(&mut self, changes: &[Change]) -> Written {
        if changes.is_empty() {
            return Ok(());
        }
        let tx = self.conn.transaction()?;
        for change in changes {
            write(&tx, change)?;
        }
        if !self.holds_kept {
            // The lead commits the holds it worked out first of all.
            tx.execute("UPDATE meta SET value = '1' WHERE key = 'holds_kept'", [])?;
        }
        tx.commit()?;
        self.holds_kept = true;
        Ok(())
    }
}

/// One change, by its kind.
fn write(tx: &Transaction<'_>, change: &Change) -> Written {
    match change {
        Change::Team(TeamChange::Member(m)) => member(tx, m),
        Change::Team(TeamChange::Hold { member, hold }) => self::hold(tx, member, hold.as_ref()),
        Change::Team(TeamChange::Usage(account)) => usage(tx, account),
        Change::Team(TeamChange::Task(task)) => self::task(tx, task),
        Change::Team(TeamChange::Request(r)) => request(tx, r),
        Change::Team(TeamChange::RequestForgotten(request_id)) => {
            tx.prepare_cached("DELETE FROM requests WHERE request_id = ?1")?
                .execute(params![request_id.as_str()])?;
            Ok(())
        }
        Change::Envelope(record) => envelope(tx, record),
        Change::SharedBody { id, body } => {
            tx.prepare_cached("INSERT OR REPLACE INTO bodies (id, body) VALUES (?1, ?2)")?
                .execute(params![id, rows::shared_body_bytes(body)])?;
            Ok(())
        }
        Change::DeleteMember { member } => {
            tx.prepare_cached("DELETE FROM envelopes WHERE member = ?1")?
                .execute(params![member])?;
            tx.prepare_cached("DELETE FROM message_ids WHERE sender = ?1")?
                .execute(params![member])?;
            tx.prepare_cached("DELETE FROM members WHERE name = ?1")?
                .execute(params![member])?;
            Ok(())
        }
        Change::History(entry) => {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO history (id, at, kind, who, event) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![
                i64::try_from(entry.id).unwrap_or(i64::MAX),
                entry.at,
                entry.kind(),
                rows::who_text(entry),
                &rows::history_bytes(entry)[..]
            ])?;
            Ok(())
        }
        Change::HistoryTrim(below) => {
            tx.prepare_cached("DELETE FROM history WHERE id < ?1")?
                .execute(params![i64::try_from(*below).unwrap_or(i64::MAX)])?;
            Ok(())
        }
        Change::Audit(sealed) => {
            tx.prepare_cached("INSERT INTO audit (seq, entry) VALUES (?1, ?2)")?
                .execute(params![
                    i64::try_from(sealed.seq).unwrap_or(i64::MAX),
                    sealed.json
                ])?;
            Ok(())
        }
        Change::Ack { member, seq } => ack(tx, member, *seq),
        Change::ClearInbox { member } => {
            tx.prepare_cached("DELETE FROM envelopes WHERE member = ?1")?
                .execute(params![member])?;
            Ok(())
        }
        Change::MessageId {
            sender,
            message_id,
            digest,
        } => message_id_of(tx, sender, message_id, digest),
    }
}

fn member(tx: &Transaction<'_>, m: &MemberRecord) -> Written {
    let mode = rows::mode_number(m.mode);
    tx.prepare_cached(
        "INSERT INTO members (name, member_id, role, token_hash, mode, idle, terminated, last_seq, ord, idle_reason, sandbox, decoding)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
         ON CONFLICT (name) DO UPDATE SET member_id = ?2, role = ?3, token_hash = ?4, mode = ?5,
             idle = ?6, terminated = ?7, last_seq = ?8, ord = ?9, idle_reason = ?10, sandbox = ?11,
             decoding = ?12",
    )?
    .execute(params![m.name, m.member_id, m.role, m.token_hash, mode, m.idle, m.terminated, m.last_seq, m.order, m.idle_reason, rows::sandbox_text(m.sandbox.as_ref()), rows::decoding_text(m.decoding.as_ref())])?;
    Ok(())
}

fn envelope(tx: &Transaction<'_>, record: &EnvelopeRecord) -> Written {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO envelopes (member, seq, body, shared) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![
        record.member,
        record.seq,
        rows::envelope_bytes(record),
        record.shared
    ])?;
    Ok(())
}

fn hold(tx: &Transaction<'_>, member: &str, hold: Option<&mesh_core::holds::Hold>) -> Written {
    match hold {
        Some(hold) => {
            let paths = rows::hold_paths(hold);
            tx.prepare_cached(
                "INSERT INTO holds (member, paths, task_id) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (member) DO UPDATE SET paths = ?2, task_id = ?3",
            )?
            .execute(params![member, paths, hold.task_id])?;
        }
        None => {
            tx.prepare_cached("DELETE FROM holds WHERE member = ?1")?
                .execute(params![member])?;
        }
    }
    Ok(())
}

fn usage(tx: &Transaction<'_>, account: &mesh_core::usage::Account) -> Written {
    let json = rows::usage_json(account);
    tx.prepare_cached(
        "INSERT INTO usage (name, account) VALUES (?1, ?2) \
         ON CONFLICT (name) DO UPDATE SET account = ?2",
    )?
    .execute(params![account.name, json])?;
    Ok(())
}

fn task(tx: &Transaction<'_>, task: &mesh_core::tasks::Task) -> Written {
    tx.prepare_cached(
        "INSERT INTO tasks (task_id, created, body) VALUES (?1, ?2, ?3) \
         ON CONFLICT (task_id) DO UPDATE SET created = ?2, body = ?3",
    )?
    .execute(params![
        task.task_id,
        task.created_at_unix_ms,
        rows::task_bytes(task)
    ])?;
    Ok(())
}

fn request(tx: &Transaction<'_>, r: &mesh_core::protocol::Request) -> Written {
    tx.prepare_cached(
        "INSERT INTO requests (request_id, kind, sender, target, status, payload, feedback,
             created, resolved, deadline, decision, reviews)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
         ON CONFLICT (request_id) DO UPDATE SET status = ?5, feedback = ?7, resolved = ?9,
             decision = ?11, reviews = ?12",
    )?
    .execute(params![
        r.opening.id.as_str(),
        rows::kind_number(r.opening.kind),
        r.opening.sender,
        r.opening.target,
        rows::status_number(r.status),
        r.opening.payload_json,
        r.feedback,
        r.created_at_unix_ms,
        r.resolved_at_unix_ms,
        r.opening.deadline_unix_ms,
        r.decision.as_ref().map(rows::decision_bytes),
        rows::reviews_json(r),
    ])?;
    Ok(())
}

fn ack(tx: &Transaction<'_>, member: &str, seq: u64) -> Written {
    tx.prepare_cached("DELETE FROM envelopes WHERE member = ?1 AND seq <= ?2")?
        .execute(params![member, seq])?;
    // The member's record is not rewritten for each envelope: keep its last
    // seq at least what was acknowledged, so a restart never hands out a seq
    // the member has seen.
    tx.prepare_cached("UPDATE members SET last_seq = max(last_seq, ?2) WHERE name = ?1")?
        .execute(params![member, seq])?;
    Ok(())
}

fn message_id_of(tx: &Transaction<'_>, sender: &str, message_id: &str, digest: &str) -> Written {
    let n: u64 = tx
        .prepare_cached("SELECT coalesce(max(n), 0) + 1 FROM message_ids WHERE sender = ?1")?
        .query_row(params![sender], |row| row.get(0))?;
    tx.prepare_cached(
        "INSERT OR IGNORE INTO message_ids (sender, message_id, n, digest) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![sender, message_id, n, digest])?;
    if n > KEPT_MESSAGE_IDS {
        tx.prepare_cached("DELETE FROM message_ids WHERE sender = ?1 AND n <= ?2")?
            .execute(params![sender, n - KEPT_MESSAGE_IDS])?;
    }
    Ok(())
}
