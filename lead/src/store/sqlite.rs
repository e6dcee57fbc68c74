//! The durable store: SQLite (bundled, so a fresh machine needs nothing) in
//! WAL mode, in `<state-dir>/mesh.db`.

use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::{Change, Snapshot, Store, StoreError};

/// The database's file name in the state dir.
pub const DB_FILE: &str = "mesh.db";
/// Written once the database exists, so that a deleted database is noticed.
pub const MARKER_FILE: &str = "mesh.db.id";
/// Tells a mesh database from any other SQLite file.
const MAGIC: &str = "mesh-lead-state";
/// The schema version this code writes.
const SCHEMA_VERSION: i64 = 10;
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
mod export;
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

impl Store for SqliteStore {
    fn load(&mut self) -> Result<Snapshot, StoreError> {
        self.load_snapshot()
    }

    fn commit(&mut self, changes: &[Change]) -> Result<(), StoreError> {
        self.commit_changes(changes)
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use mesh_core::{
        protocol::{Kind, Opening, Request},
        usage::{Account, Usage},
    };

    use super::*;
    use crate::store::TeamChange;

    // What every store keeps is checked by the store conformance suite
    // (`tests/src/store_conformance.rs`); these are SQLite's own upgrades.

    /// A pending plan, `r1`.
    fn request() -> Request {
        Request::pending(
            Opening {
                id: mesh_core::names::RequestId::existing("id", "r1").expect("id"),
                kind: Kind::PlanApproval,
                sender: "alice".into(),
                target: "lead".into(),
                payload_json: "{}".into(),
                deadline_unix_ms: None,
            },
            1,
        )
    }

    /// Alice's account, with one epoch.
    fn alices_usage() -> Account {
        Account {
            name: "alice".into(),
            member: true,
            epochs: vec![(
                "e1".into(),
                Usage {
                    calls: 2,
                    ..Usage::default()
                },
            )],
            token_budget: 5_000,
            ..Account::default()
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
    fn a_schema_3_database_is_upgraded_and_its_requests_have_no_reviews_yet() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let mut store = SqliteStore::open(dir.path(), Sync::Full).expect("create");
            store
                .commit(&[Change::Team(TeamChange::Request(Box::new(request())))])
                .expect("commit");
        }
        // Make it what a schema-3 lead left.
        let conn = Connection::open(dir.path().join(DB_FILE)).expect("open");
        conn.execute_batch(
            "ALTER TABLE requests DROP COLUMN reviews;
             ALTER TABLE members DROP COLUMN idle_reason;
             ALTER TABLE members DROP COLUMN sandbox;
             ALTER TABLE members DROP COLUMN decoding;
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
