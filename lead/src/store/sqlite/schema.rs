//! The database's schema, in the versions it went through, and opening it:
//! a damaged, foreign or missing database refused, an older schema upgraded.

use std::{fs, path::Path};

use rusqlite::{params, Connection, OptionalExtension};

use super::{SqliteStore, Sync, DB_FILE, MAGIC, MARKER_FILE, SCHEMA_VERSION};
use crate::store::StoreError;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS members (
    name TEXT PRIMARY KEY, member_id TEXT NOT NULL, role TEXT NOT NULL, token_hash TEXT,
    mode INTEGER NOT NULL, idle INTEGER NOT NULL, terminated INTEGER NOT NULL,
    last_seq INTEGER NOT NULL, ord INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS envelopes (
    member TEXT NOT NULL, seq INTEGER NOT NULL, body BLOB NOT NULL,
    PRIMARY KEY (member, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS requests (
    request_id TEXT PRIMARY KEY, kind INTEGER NOT NULL, sender TEXT NOT NULL, target TEXT NOT NULL,
    status INTEGER NOT NULL, payload TEXT NOT NULL, feedback TEXT NOT NULL,
    created INTEGER NOT NULL, resolved INTEGER, deadline INTEGER, decision BLOB);
CREATE TABLE IF NOT EXISTS message_ids (
    sender TEXT NOT NULL, message_id TEXT NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (sender, message_id));
CREATE INDEX IF NOT EXISTS message_ids_by_n ON message_ids (sender, n);
CREATE TABLE IF NOT EXISTS bodies (id INTEGER PRIMARY KEY, body BLOB NOT NULL);
";

/// Schema 2 (over 1): envelopes may refer to a body shared by the recipients of
/// a fan-out, and `Send` message ids keep a digest of what was sent under them.
/// A shared body goes with the last envelope that refers to it.
const SCHEMA_2: &str = "
ALTER TABLE envelopes ADD COLUMN shared INTEGER;
ALTER TABLE message_ids ADD COLUMN digest TEXT NOT NULL DEFAULT '';
CREATE INDEX envelopes_by_shared ON envelopes (shared) WHERE shared IS NOT NULL;
CREATE TRIGGER envelopes_release_shared AFTER DELETE ON envelopes
WHEN old.shared IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM envelopes WHERE shared = old.shared)
BEGIN
  DELETE FROM bodies WHERE id = old.shared;
END;
UPDATE meta SET value = '2' WHERE key = 'schema_version';
";

/// Schema 3 (over 2): the shared task list, each task as its encoded `Task`.
const SCHEMA_3: &str = "
CREATE TABLE tasks (task_id TEXT PRIMARY KEY, created INTEGER NOT NULL, body BLOB NOT NULL);
UPDATE meta SET value = '3' WHERE key = 'schema_version';
";

/// Schema 4 (over 3): each request keeps what its reviewers said (JSON).
const SCHEMA_4: &str = "
ALTER TABLE requests ADD COLUMN reviews TEXT NOT NULL DEFAULT '[]';
UPDATE meta SET value = '4' WHERE key = 'schema_version';
";

/// Schema 5 (over 4): tasks in the order they were created (an update
/// replaced a task's row before, moving it last; a task keeps its row now,
/// and tasks load in row order), and who holds which files, as the lead
/// last committed it (before, a restart worked holds out from the approved
/// plans, which a member that left and joined again, or plans approved out
/// of the order they were sent in, led astray). `holds_kept` turns 1 with
/// the first commit of a lead that keeps them: until then the holds are
/// worked out.
const SCHEMA_5: &str = "
CREATE TABLE holds (member TEXT PRIMARY KEY, paths TEXT NOT NULL, task_id TEXT NOT NULL);
INSERT INTO meta (key, value) VALUES ('holds_kept', '0');
CREATE TABLE tasks_by_creation (task_id TEXT PRIMARY KEY, created INTEGER NOT NULL, body BLOB NOT NULL);
INSERT INTO tasks_by_creation SELECT task_id, created, body FROM tasks ORDER BY created, task_id;
DROP TABLE tasks;
ALTER TABLE tasks_by_creation RENAME TO tasks;
UPDATE meta SET value = '5' WHERE key = 'schema_version';
";

/// Schema 6 (over 5): what each model user (a member, the model reviewer)
/// used, per process, and its budget: one row per user, its account as
/// JSON (a few epochs, bounded by the core).
const SCHEMA_6: &str = "
CREATE TABLE usage (name TEXT PRIMARY KEY, account TEXT NOT NULL);
UPDATE meta SET value = '6' WHERE key = 'schema_version';
";

/// Schema 7 (over 6): the event history (requests, members, tasks, tool
/// calls, processes, usage), each event as the wire's `Event`; and the audit
/// trail, each entry as JSON (hash-chained: see `audit.rs`).
const SCHEMA_7: &str = "
CREATE TABLE history (id INTEGER PRIMARY KEY, at INTEGER NOT NULL, kind TEXT NOT NULL,
    who TEXT NOT NULL, event BLOB NOT NULL);
CREATE TABLE audit (seq INTEGER PRIMARY KEY, entry TEXT NOT NULL);
UPDATE meta SET value = '7' WHERE key = 'schema_version';
";

/// Schema 8 (over 7): why each member last said it is idle.
const SCHEMA_8: &str = "
ALTER TABLE members ADD COLUMN idle_reason TEXT NOT NULL DEFAULT '';
UPDATE meta SET value = '8' WHERE key = 'schema_version';
";

/// Schema 9 (over 8): how each member confines its commands, as it said at
/// join ([`mesh_core::sandbox::Sandbox::encode`]; empty: it did not say).
const SCHEMA_9: &str = "
ALTER TABLE members ADD COLUMN sandbox TEXT NOT NULL DEFAULT '';
UPDATE meta SET value = '9' WHERE key = 'schema_version';
";

/// Schema 10 (over 9): how each member's model's replies are held to one
/// call, as it said at join ([`mesh_core::decoding::Decoding::encode`];
/// empty: it did not say).
const SCHEMA_10: &str = "
ALTER TABLE members ADD COLUMN decoding TEXT NOT NULL DEFAULT '';
UPDATE meta SET value = '10' WHERE key = 'schema_version';
";

impl SqliteStore {
    /// Opens (or creates) `<state_dir>/mesh.db`. Refuses a damaged file, a
    /// foreign one, and a missing one where the state dir says there was one.
    pub fn open(state_dir: &Path, sync: Sync) -> Result<Self, StoreError> {
        let path = state_dir.join(DB_FILE);
        let marker = state_dir.join(MARKER_FILE);
        let display = path.display().to_string();
        if !path.exists() && marker.exists() {
            return Err(StoreError::Missing {
                path: display,
                marker: marker.display().to_string(),
            });
        }
        let corrupt = corrupt(&display);
        // The database holds token hashes and every unread message: readable
        // by the owner alone, as are the WAL and journal SQLite derives from it.
        {
            use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
            fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&path)?;
            fs::set_permissions(&path, fs::Permissions::from_mode(0o600))?;
        }
        let conn = Connection::open(&path)?;
        // One lead owns a state dir: exclusive locking keeps a second lead
        // out, and spares every transaction its file-lock system calls (set
        // before the first read, so the WAL index lives in memory).
        conn.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
        let check: String = conn
            .query_row("PRAGMA quick_check", [], |row| row.get(0))
            .map_err(&corrupt)?;
        if check != "ok" {
            return Err(StoreError::Corrupt {
                path: display.clone(),
                detail: check,
            });
        }
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
            .map_err(&corrupt)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Corrupt {
                path: display.clone(),
                detail: format!("journal mode {mode}, not WAL"),
            });
        }
        let synchronous = match sync {
            Sync::Full => "FULL",
            Sync::Normal => "NORMAL",
        };
        conn.pragma_update(None, "synchronous", synchronous)?;
        conn.execute_batch(SCHEMA).map_err(&corrupt)?;
        check_magic(&conn, &display)?;
        upgrade(&conn, &display)?;
        // Take the write lock now and keep it (exclusive locking mode), so a
        // second lead on this state dir is refused at start, not mid-run.
        conn.execute_batch("BEGIN EXCLUSIVE; COMMIT;")
            .map_err(&corrupt)?;
        if !marker.exists() {
            fs::write(&marker, format!("{MAGIC} schema {SCHEMA_VERSION}\n"))?;
            fs::File::open(state_dir)?.sync_all()?;
        }
        let holds_kept = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'holds_kept'",
                [],
                |row| row.get::<_, String>(0),
            )
            .map_err(&corrupt)?
            == "1";
        Ok(Self {
            conn,
            path,
            holds_kept,
        })
    }
}

/// Refuses a database that is not a mesh lead's; marks a new one as one.
fn check_magic(conn: &Connection, display: &str) -> Result<(), StoreError> {
    let magic: Option<String> = conn
        .query_row("SELECT value FROM meta WHERE key = 'magic'", [], |row| {
            row.get(0)
        })
        .optional()?;
    match magic.as_deref() {
        Some(MAGIC) => {}
        Some(other) => {
            return Err(StoreError::Corrupt {
                path: display.to_owned(),
                detail: format!("meta.magic is {other:?}"),
            });
        }
        None => {
            let tables: i64 =
                conn.query_row("SELECT count(*) FROM members", [], |row| row.get(0))?;
            if tables != 0 {
                return Err(StoreError::Corrupt {
                    path: display.to_owned(),
                    detail: "members without meta.magic".into(),
                });
            }
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('magic', ?1), ('schema_version', '1')",
                params![MAGIC],
            )?;
        }
    }
    Ok(())
}

/// Brings an older schema up to this one, in one transaction; refuses a
/// newer one.
fn upgrade(conn: &Connection, display: &str) -> Result<(), StoreError> {
    let corrupt = corrupt(display);
    let version: i64 = conn
        .query_row(
            "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'schema_version'",
            [],
            |row| row.get(0),
        )
        .map_err(&corrupt)?;
    match version {
        1 => conn
            .execute_batch(&format!(
                "BEGIN; {SCHEMA_2} {SCHEMA_3} {SCHEMA_4} {SCHEMA_5} {SCHEMA_6} {SCHEMA_7} {SCHEMA_8} {SCHEMA_9} {SCHEMA_10} COMMIT;"
            ))
            .map_err(&corrupt)?,
        2 => conn
            .execute_batch(&format!(
                "BEGIN; {SCHEMA_3} {SCHEMA_4} {SCHEMA_5} {SCHEMA_6} {SCHEMA_7} {SCHEMA_8} {SCHEMA_9} {SCHEMA_10} COMMIT;"
            ))
            .map_err(&corrupt)?,
        3 => conn
            .execute_batch(&format!(
                "BEGIN; {SCHEMA_4} {SCHEMA_5} {SCHEMA_6} {SCHEMA_7} {SCHEMA_8} {SCHEMA_9} {SCHEMA_10} COMMIT;"
            ))
            .map_err(&corrupt)?,
        4 => conn
            .execute_batch(&format!("BEGIN; {SCHEMA_5} {SCHEMA_6} {SCHEMA_7} {SCHEMA_8} {SCHEMA_9} {SCHEMA_10} COMMIT;"))
            .map_err(&corrupt)?,
        5 => conn
            .execute_batch(&format!("BEGIN; {SCHEMA_6} {SCHEMA_7} {SCHEMA_8} {SCHEMA_9} {SCHEMA_10} COMMIT;"))
            .map_err(&corrupt)?,
        6 => conn
            .execute_batch(&format!("BEGIN; {SCHEMA_7} {SCHEMA_8} {SCHEMA_9} {SCHEMA_10} COMMIT;"))
            .map_err(&corrupt)?,
        7 => conn
            .execute_batch(&format!("BEGIN; {SCHEMA_8} {SCHEMA_9} {SCHEMA_10} COMMIT;"))
            .map_err(&corrupt)?,
        8 => conn
            .execute_batch(&format!("BEGIN; {SCHEMA_9} {SCHEMA_10} COMMIT;"))
            .map_err(&corrupt)?,
        9 => conn
            .execute_batch(&format!("BEGIN; {SCHEMA_10} COMMIT;"))
            .map_err(&corrupt)?,
        SCHEMA_VERSION => {}
        other => {
            return Err(StoreError::Corrupt {
                path: display.to_owned(),
                detail: format!(
                    "schema version {other}; this lead reads {SCHEMA_VERSION} (and upgrades 1 to 9 to it)"
                ),
            })
        }
    }
    Ok(())
}

/// A SQLite error on opening, as the store says it: a database another lead
/// holds, or a damaged one.
fn corrupt(display: &str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |e: rusqlite::Error| match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            StoreError::InUse {
                path: display.to_owned(),
            }
        }
        _ => StoreError::Corrupt {
            path: display.to_owned(),
            detail: e.to_string(),
        },
    }
}
