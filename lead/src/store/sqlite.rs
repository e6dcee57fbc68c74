//! The durable store: SQLite (bundled, so a fresh machine needs nothing) in
//! WAL mode, in `<state-dir>/mesh.db`.

use std::path::{Path, PathBuf};

use mesh_core::{effect::Message, grant::Grant, protocol::Decision};
use prost::Message as _;
use rusqlite::Connection;
use shared::{pb, wire::*};

use super::{Change, Snapshot, Store, StoreError};

/// The database's file name in the state dir.
pub const DB_FILE: &str = "mesh.db";
/// Written once the database exists, so that a deleted database is noticed.
pub const MARKER_FILE: &str = "mesh.db.id";
/// Tells a mesh database from any other SQLite file.
const MAGIC: &str = "mesh-lead-state";
/// The schema version this code writes.
const SCHEMA_VERSION: i64 = 8;
/// `Send` message ids kept per sender.
const KEPT_MESSAGE_IDS: u64 = 4_096;

/// Whether each commit waits for the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sync {
    /// `synchronous=FULL`: every commit is flushed; survives a power loss.
    Full,
    /// `synchronous=NORMAL` in WAL mode: commits survive a killed process,
    /// but the last ones may be lost to a power loss.
    Normal,
}

mod commit;
mod load;
mod schema;

/// The SQLite store.
#[derive(Debug)]
pub struct SqliteStore {
    /// The open database.
    conn: Connection,
    /// Its path, for messages.
    path: PathBuf,
    /// Whether it keeps the holds (`meta.holds_kept`): not until the first
    /// commit after schema 5.
    holds_kept: bool,
}

impl SqliteStore {
    /// The database's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A stored body as the core's [`Message`]; one it cannot hold is a
/// decoding error of `what`.
fn message(what: &'static str, body: pb::envelope::Body) -> Result<Message, StoreError> {
    Message::try_from(body).map_err(|e| StoreError::Decode {
        what,
        detail: e.to_string(),
    })
}

impl Store for SqliteStore {
    fn load(&mut self) -> Result<Snapshot, StoreError> {
        self.load_snapshot()
    }

    fn commit(&mut self, changes: &[Change]) -> Result<(), StoreError> {
        self.commit_changes(changes)
    }
}

/// A decision as bytes: a `PlanReview` without its id.
fn encode_decision(decision: &Decision) -> Vec<u8> {
    pb::PlanReview {
        request_id: String::new(),
        approve: decision.approve,
        feedback: decision.feedback.clone(),
        grant: decision.grant.as_ref().map(Grant::to_pb),
        refuse_overlap: false,
    }
    .encode_to_vec()
}

fn decode_decision(blob: &[u8]) -> Result<Decision, StoreError> {
    let bad = |detail: String| StoreError::Decode {
        what: "decision",
        detail,
    };
    let review = pb::PlanReview::decode(blob).map_err(|e| bad(e.to_string()))?;
    let grant = review
        .grant
        .as_ref()
        .map(Grant::try_from)
        .transpose()
        .map_err(|e| bad(e.to_string()))?;
    Ok(Decision {
        approve: review.approve,
        feedback: review.feedback,
        grant,
    })
}

#[cfg(test)]
mod tests {
    use std::fs;

    use mesh_core::{
        grant::Mode,
        names::RequestId,
        protocol::{Kind, Opening, Request, Status},
    };

    use super::*;
    use crate::store::{EnvelopeRecord, MemberRecord, TeamChange};

    fn request(id: &str, status: Status) -> Request {
        Request {
            opening: Opening {
                id: RequestId::existing("id", id).expect("id"),
                kind: Kind::PlanApproval,
                sender: "alice".into(),
                target: "lead".into(),
                payload_json: "{}".into(),
                deadline_unix_ms: None,
            },
            status,
            decision: (status == Status::Approved).then(|| Decision {
                approve: true,
                feedback: "ok".into(),
                grant: Some(Grant {
                    mode: Mode::Bypass,
                    write_paths: vec!["src/**".into()],
                    expires_at_unix_ms: None,
                }),
            }),
            feedback: String::new(),
            created_at_unix_ms: 1,
            resolved_at_unix_ms: None,
            reviews: vec![mesh_core::protocol::ReviewStep {
                reviewer: "program check".into(),
                verdict: "pass".into(),
                words: "no opinion".into(),
                at_unix_ms: 1,
            }],
        }
    }

    /// The schema version the store's database says it has.
    fn schema_version(store: &SqliteStore) -> i64 {
        store
            .conn
            .query_row(
                "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'schema_version'",
                [],
                |row| row.get(0),
            )
            .expect("version")
    }

    #[test]
    fn what_is_committed_is_loaded_again_after_reopening() {
        let dir = tempfile::tempdir().expect("tempdir");
        let member = MemberRecord {
            name: "alice".into(),
            member_id: "m1".into(),
            role: "coder".into(),
            token_hash: Some("h".into()),
            mode: Mode::AcceptEdits,
            idle: true,
            idle_reason: "done: wrote hello.txt".into(),
            terminated: false,
            last_seq: 3,
            order: 1,
        };
        let envelope = |seq| EnvelopeRecord {
            member: "alice".into(),
            seq,
            message_id: format!("e{seq}"),
            from: "bob".into(),
            sent_at_unix_ms: 5,
            body: Some(Message::Text {
                content: format!("text {seq}"),
            }),
            shared: None,
        };
        {
            let mut store = SqliteStore::open(dir.path(), Sync::Full).expect("open");
            store
                .commit(&[
                    Change::Team(TeamChange::Member(Box::new(member.clone()))),
                    Change::Envelope(envelope(1)),
                    Change::Envelope(envelope(2)),
                    Change::Envelope(envelope(3)),
                    Change::Ack {
                        member: "alice".into(),
                        seq: 1,
                    },
                    Change::Team(TeamChange::Request(Box::new(request(
                        "r1",
                        Status::Pending,
                    )))),
                    Change::Team(TeamChange::Request(Box::new(request(
                        "r2",
                        Status::Pending,
                    )))),
                    Change::MessageId {
                        sender: "alice".into(),
                        message_id: "x".into(),
                        digest: "d".into(),
                    },
                ])
                .expect("commit");
            store
                .commit(&[Change::Team(TeamChange::Request(Box::new(request(
                    "r1",
                    Status::Approved,
                ))))])
                .expect("commit");
        }
        let mut store = SqliteStore::open(dir.path(), Sync::Normal).expect("reopen");
        let snapshot = store.load().expect("load");
        assert_eq!(snapshot.members, vec![member]);
        assert_eq!(snapshot.envelopes, vec![envelope(2), envelope(3)]);
        let ids: Vec<&str> = snapshot
            .requests
            .iter()
            .map(|r| r.opening.id.as_str())
            .collect();
        assert_eq!(
            ids,
            vec!["r1", "r2"],
            "requests keep their order after an update"
        );
        assert_eq!(snapshot.requests[0], request("r1", Status::Approved));
        assert_eq!(
            snapshot.message_ids,
            vec![("alice".to_owned(), "x".to_owned(), "d".to_owned())]
        );
    }

    #[test]
    fn tasks_created_in_one_millisecond_keep_the_order_they_were_created_in() {
        let dir = tempfile::tempdir().expect("tempdir");
        let task = |id: &str, at: i64| mesh_core::tasks::Task {
            task_id: id.into(),
            subject: id.into(),
            description: String::new(),
            status: mesh_core::tasks::TaskStatus::Pending,
            owner: String::new(),
            blocked_by: Vec::new(),
            files: Vec::new(),
            created_at_unix_ms: at,
            updated_at_unix_ms: at,
            summary: String::new(),
            review: mesh_core::tasks::Review::Plan,
        };
        {
            let mut store = SqliteStore::open(dir.path(), Sync::Full).expect("open");
            store
                .commit(&[
                    Change::Team(TeamChange::Task(task("c", 5))),
                    Change::Team(TeamChange::Task(task("b", 5))),
                    Change::Team(TeamChange::Task(task("a", 7))),
                ])
                .expect("commit");
            // An update keeps a task's place.
            store
                .commit(&[Change::Team(TeamChange::Task(task("c", 5)))])
                .expect("commit");
        }
        let mut store = SqliteStore::open(dir.path(), Sync::Full).expect("reopen");
        let ids: Vec<String> = store
            .load()
            .expect("load")
            .tasks
            .into_iter()
            .map(|t| t.task_id)
            .collect();
        assert_eq!(ids, ["c", "b", "a"]);
    }

    #[test]
    fn the_event_history_is_kept_across_a_restart_and_trimmed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let entry = |id: u64| crate::history::Entry {
            id,
            at: 1_000 + i64::try_from(id).expect("small"),
            kind: "tool".into(),
            who: vec!["ann".into(), "bob".into()],
            event: prost::Message::encode_to_vec(&pb::Event {
                at_unix_ms: 7,
                kind: None,
            })
            .into(),
        };
        {
            let mut store = SqliteStore::open(dir.path(), Sync::Full).expect("create");
            store
                .commit(&[
                    Change::History(std::sync::Arc::new(entry(1))),
                    Change::History(std::sync::Arc::new(entry(2))),
                    Change::History(std::sync::Arc::new(entry(3))),
                    Change::HistoryTrim(2),
                ])
                .expect("commit");
        }
        let mut store = SqliteStore::open(dir.path(), Sync::Full).expect("reopen");
        let history = store.load().expect("load").history;
        assert_eq!(history, vec![entry(2), entry(3)]);
    }

    #[test]
    fn a_schema_3_database_is_upgraded_and_its_requests_have_no_reviews_yet() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let mut store = SqliteStore::open(dir.path(), Sync::Full).expect("create");
            store
                .commit(&[Change::Team(TeamChange::Request(Box::new(request(
                    "r1",
                    Status::Pending,
                ))))])
                .expect("commit");
        }
        // Make it what a schema-3 lead left.
        let conn = Connection::open(dir.path().join(DB_FILE)).expect("open");
        conn.execute_batch(
            "ALTER TABLE requests DROP COLUMN reviews;
             ALTER TABLE members DROP COLUMN idle_reason;
             DROP TABLE holds;
             DROP TABLE usage;
             DROP TABLE history;
             DROP TABLE audit;
             DELETE FROM meta WHERE key = 'holds_kept';
             UPDATE meta SET value = '3' WHERE key = 'schema_version';",
        )
        .expect("downgrade");
        drop(conn);
        let mut store = SqliteStore::open(dir.path(), Sync::Full).expect("upgrade");
        let snapshot = store.load().expect("load");
        assert_eq!(snapshot.requests.len(), 1);
        assert!(snapshot.requests[0].reviews.is_empty());
        assert_eq!(schema_version(&store), SCHEMA_VERSION);
    }

    /// An account with two epochs and an operator's budget.
    fn alices_usage() -> mesh_core::usage::Account {
        let used = |tokens| mesh_core::usage::Usage {
            prompt_tokens: tokens,
            completion_tokens: 7,
            calls: 2,
            model_ms: 300,
        };
        mesh_core::usage::Account {
            name: "alice".into(),
            member: true,
            settled: used(1),
            epochs: vec![("e1".into(), used(10)), ("e2".into(), used(20))],
            operator_budget: Some(5_000),
            token_budget: 5_000,
        }
    }

    #[test]
    fn usage_accounts_are_replaced_in_place_and_loaded_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut later = alices_usage();
        later
            .epochs
            .push(("e3".into(), mesh_core::usage::Usage::default()));
        {
            let mut store = SqliteStore::open(dir.path(), Sync::Full).expect("open");
            store
                .commit(&[Change::Team(TeamChange::Usage(Box::new(alices_usage())))])
                .expect("commit");
            store
                .commit(&[Change::Team(TeamChange::Usage(Box::new(later.clone())))])
                .expect("commit");
        }
        let mut store = SqliteStore::open(dir.path(), Sync::Full).expect("reopen");
        assert_eq!(store.load().expect("load").usage, vec![later]);
    }

    #[test]
    fn a_database_written_by_the_schema_4_release_is_upgraded_on_open() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schema4");
        let dir = tempfile::tempdir().expect("tempdir");
        for file in [DB_FILE, MARKER_FILE] {
            fs::copy(fixture.join(file), dir.path().join(file)).expect("copy the fixture");
        }
        {
            let mut store = SqliteStore::open(dir.path(), Sync::Full).expect("upgrade");
            let snapshot = store.load().expect("load");
            let names: Vec<&str> = snapshot.members.iter().map(|m| m.name.as_str()).collect();
            assert_eq!(names, ["alice", "bob"]);
            assert_eq!(snapshot.requests.len(), 7);
            assert_eq!(snapshot.tasks.len(), 3);
            assert!(snapshot.requests.iter().all(|r| r.reviews.is_empty()));
            assert_eq!(
                snapshot.holds, None,
                "not kept yet: worked out from the plans"
            );
            assert!(snapshot.usage.is_empty(), "no usage before schema 6");
            // The first commit of a lead that keeps holds writes them.
            store
                .commit(&[
                    Change::Team(TeamChange::Hold {
                        member: "carol".into(),
                        hold: Some(mesh_core::holds::Hold {
                            paths: vec!["src/**".into()],
                            task_id: String::new(),
                        }),
                    }),
                    Change::Team(TeamChange::Usage(Box::new(alices_usage()))),
                ])
                .expect("commit");
        }
        let mut store = SqliteStore::open(dir.path(), Sync::Full).expect("reopen");
        assert_eq!(schema_version(&store), SCHEMA_VERSION);
        let snapshot = store.load().expect("load");
        assert_eq!(snapshot.members.len(), 2, "the members are kept");
        assert_eq!(snapshot.usage, vec![alices_usage()]);
        let holds = snapshot.holds.expect("kept now");
        assert_eq!(holds.len(), 1);
        assert_eq!(holds[0].0, "carol");
        assert_eq!(holds[0].1.paths, ["src/**"]);
    }

    #[test]
    fn a_corrupt_or_foreign_or_missing_database_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        drop(SqliteStore::open(dir.path(), Sync::Full).expect("create"));
        let db = dir.path().join(DB_FILE);
        fs::write(
            &db,
            b"this is not a database, just text that is long enough to have a header...",
        )
        .expect("write");
        let _ = fs::remove_file(dir.path().join("mesh.db-wal"));
        let _ = fs::remove_file(dir.path().join("mesh.db-shm"));
        let err = SqliteStore::open(dir.path(), Sync::Full).expect_err("corrupt");
        assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("refusing to start"), "{err}");

        fs::remove_file(&db).expect("remove");
        let err = SqliteStore::open(dir.path(), Sync::Full).expect_err("missing");
        assert!(matches!(err, StoreError::Missing { .. }), "{err}");

        let other = tempfile::tempdir().expect("tempdir");
        let conn = Connection::open(other.path().join(DB_FILE)).expect("open");
        conn.execute_batch("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT); INSERT INTO meta VALUES ('magic', 'other');")
            .expect("foreign");
        drop(conn);
        let err = SqliteStore::open(other.path(), Sync::Full).expect_err("foreign");
        assert!(err.to_string().contains("not a mesh database"), "{err}");
    }
}
