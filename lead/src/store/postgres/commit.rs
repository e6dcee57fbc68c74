//! A batch of changes written in one transaction, fenced by the lease and
//! pipelined: BEGIN, the fence, a statement per change and COMMIT go out
//! together and the server runs them in order. Every statement is prepared
//! once, at connect, and none needs a value read back first.

use std::future::Future;

use tokio_postgres::{types::ToSql, Client, Statement};

use super::{pg, Fence, Params, Write, KEPT_MESSAGE_IDS};
use crate::store::{rows, Change, EnvelopeRecord, MemberRecord, StoreError, TeamChange};

/// Every statement a batch uses, prepared.
pub(super) struct Statements {
    fence: Statement,
    member: Statement,
    hold: Statement,
    hold_gone: Statement,
    usage: Statement,
    task: Statement,
    request: Statement,
    request_gone: Statement,
    envelope: Statement,
    body: Statement,
    inbox_gone: Statement,
    message_ids_gone: Statement,
    member_gone: Statement,
    history: Statement,
    history_trim: Statement,
    audit: Statement,
    acked: Statement,
    last_seq: Statement,
    message_id: Statement,
    message_ids_trim: Statement,
}

impl Statements {
    pub(super) async fn prepare(client: &Client) -> Result<Self, StoreError> {
        let prepare = |sql: &'static str| async move { client.prepare(sql).await.map_err(pg) };
        Ok(Self {
            fence: prepare("SELECT mesh_fence($1, $2)").await?,
            member: prepare(
                "INSERT INTO members (name, member_id, role, token_hash, mode, idle, terminated, last_seq, ord, idle_reason, sandbox, decoding)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
                 ON CONFLICT (name) DO UPDATE SET member_id = $2, role = $3, token_hash = $4, mode = $5,
                     idle = $6, terminated = $7, last_seq = $8, ord = $9, idle_reason = $10, sandbox = $11,
                     decoding = $12",
            )
            .await?,
            hold: prepare(
                "INSERT INTO holds (member, paths, task_id) VALUES ($1, $2, $3)
                 ON CONFLICT (member) DO UPDATE SET paths = $2, task_id = $3",
            )
            .await?,
            hold_gone: prepare("DELETE FROM holds WHERE member = $1").await?,
            usage: prepare(
                "INSERT INTO usage (name, account) VALUES ($1, $2)
                 ON CONFLICT (name) DO UPDATE SET account = $2",
            )
            .await?,
            task: prepare(
                "INSERT INTO tasks (task_id, created, body) VALUES ($1, $2, $3)
                 ON CONFLICT (task_id) DO UPDATE SET created = $2, body = $3",
            )
            .await?,
            request: prepare(
                "INSERT INTO requests (request_id, kind, sender, target, status, payload, feedback,
                     created, resolved, deadline, decision, reviews)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
                 ON CONFLICT (request_id) DO UPDATE SET status = $5, feedback = $7, resolved = $9,
                     decision = $11, reviews = $12",
            )
            .await?,
            request_gone: prepare("DELETE FROM requests WHERE request_id = $1").await?,
            envelope: prepare(
                "INSERT INTO envelopes (member, seq, body, shared) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (member, seq) DO UPDATE SET body = $3, shared = $4",
            )
            .await?,
            body: prepare(
                "INSERT INTO bodies (id, body) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET body = $2",
            )
            .await?,
            inbox_gone: prepare("DELETE FROM envelopes WHERE member = $1").await?,
            message_ids_gone: prepare("DELETE FROM message_ids WHERE sender = $1").await?,
            member_gone: prepare("DELETE FROM members WHERE name = $1").await?,
            history: prepare(
                "INSERT INTO history (id, at, kind, who, event) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (id) DO UPDATE SET at = $2, kind = $3, who = $4, event = $5",
            )
            .await?,
            history_trim: prepare("DELETE FROM history WHERE id < $1").await?,
            audit: prepare("INSERT INTO audit (seq, entry) VALUES ($1, $2)").await?,
            acked: prepare("DELETE FROM envelopes WHERE member = $1 AND seq <= $2").await?,
            // The member's record is not rewritten for each envelope: its
            // last seq is at least what was acknowledged, so a restart never
            // hands out a seq the member has seen.
            last_seq: prepare("UPDATE members SET last_seq = GREATEST(last_seq, $2) WHERE name = $1")
                .await?,
            message_id: prepare(
                "INSERT INTO message_ids (sender, message_id, n, digest)
                 SELECT $1, $2, coalesce(max(n), 0) + 1, $3 FROM message_ids WHERE sender = $1
                 ON CONFLICT DO NOTHING",
            )
            .await?,
            message_ids_trim: prepare(
                "DELETE FROM message_ids WHERE sender = $1
                   AND n <= (SELECT max(n) FROM message_ids WHERE sender = $1) - $2",
            )
            .await?,
        })
    }
}

/// Writes `changes` in one fenced transaction; any failure is the batch's.
pub(super) async fn batch(
    client: &Client,
    statements: &Statements,
    fence: &Fence,
    changes: &[Change],
) -> Result<(), StoreError> {
    let mut writes = vec![Write {
        statement: &statements.fence,
        params: vec![Box::new(fence.holder.clone()), Box::new(fence.epoch)],
    }];
    for change in changes {
        write(statements, change, &mut writes);
    }
    let params: Vec<Vec<&(dyn ToSql + Sync)>> = writes
        .iter()
        .map(|w| {
            w.params
                .iter()
                .map(|p| p.as_ref() as &(dyn ToSql + Sync))
                .collect()
        })
        .collect();
    // Each call sends its messages when first polled; polling them in
    // order sends the whole batch in one flight, in order. The server stops
    // at the first error (the rest fail as "transaction aborted", and COMMIT
    // then rolls back), so any error is the batch's.
    let mut flight: Vec<Pending<'_>> = Vec::with_capacity(writes.len() + 2);
    flight.push(Box::pin(async {
        client.batch_execute("BEGIN").await.map(|()| 0)
    }));
    for (w, params) in writes.iter().zip(&params) {
        flight.push(Box::pin(client.execute(w.statement, params)));
    }
    flight.push(Box::pin(async {
        client.batch_execute("COMMIT").await.map(|()| 0)
    }));
    for result in in_order(flight).await {
        result.map_err(pg)?;
    }
    Ok(())
}

pub(super) type Pending<'a> =
    std::pin::Pin<Box<dyn Future<Output = Result<u64, tokio_postgres::Error>> + Send + 'a>>;

/// Awaits every future, polling them in their order each time (so the first
/// poll of each comes in order), and gives their results in that order.
pub(super) async fn in_order(
    mut flight: Vec<Pending<'_>>,
) -> Vec<Result<u64, tokio_postgres::Error>> {
    let mut done: Vec<Option<Result<u64, tokio_postgres::Error>>> =
        flight.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut all = true;
        for (future, slot) in flight.iter_mut().zip(done.iter_mut()) {
            if slot.is_none() {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(result) => *slot = Some(result),
                    std::task::Poll::Pending => all = false,
                }
            }
        }
        if all {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    done.into_iter().flatten().collect()
}

fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The statements one change needs, by its kind.
fn write<'a>(s: &'a Statements, change: &Change, writes: &mut Vec<Write<'a>>) {
    let mut push =
        |statement: &'a Statement, params: Params| writes.push(Write { statement, params });
    match change {
        Change::Team(TeamChange::Member(m)) => push(&s.member, member(m)),
        Change::Team(TeamChange::Hold { member, hold }) => match hold {
            Some(hold) => push(
                &s.hold,
                vec![
                    Box::new(member.clone()),
                    Box::new(rows::hold_paths(hold)),
                    Box::new(hold.task_id.clone()),
                ],
            ),
            None => push(&s.hold_gone, vec![Box::new(member.clone())]),
        },
        Change::Team(TeamChange::Usage(account)) => push(
            &s.usage,
            vec![
                Box::new(account.name.clone()),
                Box::new(rows::usage_json(account)),
            ],
        ),
        Change::Team(TeamChange::Task(task)) => push(
            &s.task,
            vec![
                Box::new(task.task_id.clone()),
                Box::new(task.created_at_unix_ms),
                Box::new(rows::task_bytes(task)),
            ],
        ),
        Change::Team(TeamChange::Request(r)) => push(&s.request, request(r)),
        Change::Team(TeamChange::RequestForgotten(id)) => {
            push(&s.request_gone, vec![Box::new(id.as_str().to_owned())]);
        }
        Change::Envelope(record) => push(&s.envelope, envelope(record)),
        Change::SharedBody { id, body } => push(
            &s.body,
            vec![Box::new(int(*id)), Box::new(rows::shared_body_bytes(body))],
        ),
        Change::DeleteMember { member } => {
            push(&s.inbox_gone, vec![Box::new(member.clone())]);
            push(&s.message_ids_gone, vec![Box::new(member.clone())]);
            push(&s.member_gone, vec![Box::new(member.clone())]);
        }
        Change::History(entry) => push(
            &s.history,
            vec![
                Box::new(int(entry.id)),
                Box::new(entry.at),
                Box::new(entry.kind().to_owned()),
                Box::new(rows::who_text(entry)),
                Box::new(rows::history_bytes(entry).to_vec()),
            ],
        ),
        Change::HistoryTrim(below) => push(&s.history_trim, vec![Box::new(int(*below))]),
        Change::Audit(sealed) => push(
            &s.audit,
            vec![Box::new(int(sealed.seq)), Box::new(sealed.json.clone())],
        ),
        Change::Ack { member, seq } => {
            push(
                &s.acked,
                vec![Box::new(member.clone()), Box::new(int(*seq))],
            );
            push(
                &s.last_seq,
                vec![Box::new(member.clone()), Box::new(int(*seq))],
            );
        }
        Change::ClearInbox { member } => push(&s.inbox_gone, vec![Box::new(member.clone())]),
        Change::MessageId {
            sender,
            message_id,
            digest,
        } => {
            push(
                &s.message_id,
                vec![
                    Box::new(sender.clone()),
                    Box::new(message_id.clone()),
                    Box::new(digest.clone()),
                ],
            );
            push(
                &s.message_ids_trim,
                vec![Box::new(sender.clone()), Box::new(KEPT_MESSAGE_IDS)],
            );
        }
    }
}

fn member(m: &MemberRecord) -> Params {
    vec![
        Box::new(m.name.clone()),
        Box::new(m.member_id.clone()),
        Box::new(m.role.clone()),
        Box::new(m.token_hash.clone()),
        Box::new(rows::mode_number(m.mode)),
        Box::new(m.idle),
        Box::new(m.terminated),
        Box::new(int(m.last_seq)),
        Box::new(int(m.order)),
        Box::new(m.idle_reason.clone()),
        Box::new(rows::sandbox_text(m.sandbox.as_ref())),
        Box::new(rows::decoding_text(m.decoding.as_ref())),
    ]
}

fn envelope(record: &EnvelopeRecord) -> Params {
    vec![
        Box::new(record.member.clone()),
        Box::new(int(record.seq)),
        Box::new(rows::envelope_bytes(record)),
        Box::new(record.shared.map(int)),
    ]
}

fn request(r: &mesh_core::protocol::Request) -> Params {
    vec![
        Box::new(r.opening.id.as_str().to_owned()),
        Box::new(rows::kind_number(r.opening.kind)),
        Box::new(r.opening.sender.clone()),
        Box::new(r.opening.target.clone()),
        Box::new(rows::status_number(r.status)),
        Box::new(r.opening.payload_json.clone()),
        Box::new(r.feedback.clone()),
        Box::new(r.created_at_unix_ms),
        Box::new(r.resolved_at_unix_ms),
        Box::new(r.opening.deadline_unix_ms),
        Box::new(r.decision.as_ref().map(rows::decision_bytes)),
        Box::new(rows::reviews_json(r)),
    ]
}
