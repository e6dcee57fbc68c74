//! What a lead taking over reads back: every table into the [`Snapshot`] the
//! hub restores the team from, in one REPEATABLE READ transaction so the
//! tables agree with each other.

use tokio_postgres::{Client, Row};

use super::pg;
use crate::store::{
    rows::{self, Loaded, RequestRow},
    MemberRecord, Snapshot,
};

/// Everything the store keeps.
pub(super) async fn snapshot(client: &Client) -> Loaded<Snapshot> {
    client
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await
        .map_err(pg)?;
    let read = read(client).await;
    // Nothing was written; a failed read ends the transaction as well.
    let ended = client.batch_execute("ROLLBACK").await.map_err(pg);
    let snapshot = read?;
    ended?;
    Ok(snapshot)
}

async fn read(client: &Client) -> Loaded<Snapshot> {
    let all = |sql: &'static str| async move { client.query(sql, &[]).await.map_err(pg) };
    let members = all(
        "SELECT name, member_id, role, token_hash, mode, idle, terminated, last_seq, ord, idle_reason, sandbox,
             decoding
         FROM members ORDER BY ord",
    )
    .await?
    .iter()
    .map(member)
    .collect::<Loaded<_>>()?;
    let bodies = all("SELECT id, body FROM bodies ORDER BY id")
        .await?
        .iter()
        .map(|row| {
            let id = unsigned(row.get(0));
            Ok((id, rows::shared_body_from(id, row.get(1))?))
        })
        .collect::<Loaded<_>>()?;
    let envelopes = all("SELECT member, body, shared FROM envelopes ORDER BY member, seq")
        .await?
        .iter()
        .map(|row| {
            let shared: Option<i64> = row.get(2);
            rows::envelope_from(row.get(0), row.get(1), shared.map(unsigned))
        })
        .collect::<Loaded<_>>()?;
    let requests = all(
        "SELECT request_id, kind, sender, target, status, payload, feedback, created, resolved, deadline,
             decision, reviews
         FROM requests ORDER BY ord",
    )
    .await?
    .into_iter()
    .map(|row| request(&row).request())
    .collect::<Loaded<_>>()?;
    let message_ids = all("SELECT sender, message_id, digest FROM message_ids ORDER BY sender, n")
        .await?
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect();
    let tasks = all("SELECT body FROM tasks ORDER BY ord")
        .await?
        .iter()
        .map(|row| rows::task_from(row.get(0)))
        .collect::<Loaded<_>>()?;
    let holds = all("SELECT member, paths, task_id FROM holds ORDER BY member")
        .await?
        .iter()
        .map(|row| rows::hold_from(row.get(0), row.get(1), row.get(2)))
        .collect::<Loaded<_>>()?;
    let usage = all("SELECT account FROM usage ORDER BY name")
        .await?
        .iter()
        .map(|row| rows::usage_from(row.get(0)))
        .collect::<Loaded<_>>()?;
    let kept = i64::try_from(crate::audit::KEPT).unwrap_or(i64::MAX);
    let audit = client
        .query(
            "SELECT entry FROM (SELECT seq, entry FROM audit ORDER BY seq DESC LIMIT $1) t ORDER BY seq",
            &[&kept],
        )
        .await
        .map_err(pg)?
        .iter()
        .map(|row| rows::audit_from(row.get(0)))
        .collect::<Loaded<_>>()?;
    let max = i64::try_from(crate::history::MAX_ENTRIES).unwrap_or(i64::MAX);
    let history = client
        .query(
            "SELECT id, at, kind, who, event FROM
                 (SELECT * FROM history ORDER BY id DESC LIMIT $1) t ORDER BY id",
            &[&max],
        )
        .await
        .map_err(pg)?
        .into_iter()
        .map(|row| rows::history_from(row.get(0), row.get(1), row.get(2), row.get(3), row.get(4)))
        .collect::<Loaded<_>>()?;
    Ok(Snapshot {
        members,
        envelopes,
        bodies,
        requests,
        message_ids,
        tasks,
        // A PostgreSQL store keeps the holds from its first commit.
        holds: Some(holds),
        usage,
        history,
        audit,
    })
}

fn unsigned(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn member(row: &Row) -> Loaded<MemberRecord> {
    Ok(MemberRecord {
        name: row.get(0),
        member_id: row.get(1),
        role: row.get(2),
        token_hash: row.get(3),
        mode: rows::mode_from(row.get(4))?,
        idle: row.get(5),
        terminated: row.get(6),
        last_seq: unsigned(row.get(7)),
        order: unsigned(row.get(8)),
        idle_reason: row.get(9),
        sandbox: mesh_core::sandbox::Sandbox::decode(row.get(10)),
        decoding: mesh_core::decoding::Decoding::decode(row.get(11)),
    })
}

fn request(row: &Row) -> RequestRow {
    RequestRow {
        id: row.get(0),
        kind: row.get(1),
        sender: row.get(2),
        target: row.get(3),
        status: row.get(4),
        payload: row.get(5),
        feedback: row.get(6),
        created: row.get(7),
        resolved: row.get(8),
        deadline: row.get(9),
        decision: row.get(10),
        reviews: row.get(11),
    }
}
