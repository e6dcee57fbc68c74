//! `lead store copy`: a team moved from a SQLite state dir into an empty
//! PostgreSQL database, so that a team started on one machine can move to
//! a pair of leads on a shared database without losing its history.
//!
//! The copy is of rows, not of what a lead loads: every row of every table
//! (the whole audit trail and the whole event history, not the newest a lead
//! keeps in memory), each column's value as SQLite holds it (the wire's
//! bytes, the sealed JSON of the audit trail), requests and tasks in the
//! order they were created. The SQLite half reads (`sqlite/export.rs`), the
//! PostgreSQL half writes everything in one transaction fenced by the lease,
//! reads every row back in it and commits only when each one is the same
//! as its original (`postgres/copy.rs`).

use std::{fmt, path::Path};

use super::{PgTarget, SqliteStore, StoreError, Sync, DB_FILE};

/// A table both stores keep, and the order its rows are read in.
#[derive(Debug)]
pub(super) struct Table {
    /// Its name in both.
    pub(super) name: &'static str,
    /// Its columns, named alike in both (not PostgreSQL's `ord` of requests
    /// and tasks, which the order of the inserts gives).
    pub(super) columns: &'static str,
    /// The order of its rows in SQLite.
    pub(super) sqlite_order: &'static str,
    /// The same order in PostgreSQL (bytewise, as SQLite's).
    pub(super) postgres_order: &'static str,
    /// What its rows are: one, and more or none.
    pub(super) what: (&'static str, &'static str),
}

impl Table {
    /// What `n` of its rows are called.
    pub(super) fn counted(&self, n: usize) -> &'static str {
        if n == 1 {
            self.what.0
        } else {
            self.what.1
        }
    }
}

/// Every table the copy copies (not `meta`, which each store writes for
/// itself, nor PostgreSQL's `lease`).
pub(super) const TABLES: &[Table] = &[
    Table {
        name: "members",
        columns:
            "name, member_id, role, token_hash, mode, idle, terminated, last_seq, ord, idle_reason, sandbox, \
             decoding",
        sqlite_order: "ord, name",
        postgres_order: "ord, name",
        what: ("member", "members"),
    },
    Table {
        name: "bodies",
        columns: "id, body",
        sqlite_order: "id",
        postgres_order: "id",
        what: ("shared body", "shared bodies"),
    },
    Table {
        name: "envelopes",
        columns: "member, seq, body, shared",
        sqlite_order: "member, seq",
        postgres_order: "member, seq",
        what: ("unacknowledged envelope", "unacknowledged envelopes"),
    },
    Table {
        name: "requests",
        columns: "request_id, kind, sender, target, status, payload, feedback, created, resolved, \
                  deadline, decision, reviews",
        sqlite_order: "rowid",
        postgres_order: "ord",
        what: ("request", "requests"),
    },
    Table {
        name: "message_ids",
        columns: "sender, message_id, n, digest",
        sqlite_order: "sender, n, message_id",
        postgres_order: "sender, n, message_id COLLATE \"C\"",
        what: ("message id", "message ids"),
    },
    Table {
        name: "tasks",
        columns: "task_id, created, body",
        sqlite_order: "rowid",
        postgres_order: "ord",
        what: ("task", "tasks"),
    },
    Table {
        name: "holds",
        columns: "member, paths, task_id",
        sqlite_order: "member",
        postgres_order: "member",
        what: ("hold", "holds"),
    },
    Table {
        name: "usage",
        columns: "name, account",
        sqlite_order: "name",
        postgres_order: "name",
        what: ("usage account", "usage accounts"),
    },
    Table {
        name: "history",
        columns: "id, at, kind, who, event",
        sqlite_order: "id",
        postgres_order: "id",
        what: ("history event", "history events"),
    },
    Table {
        name: "audit",
        columns: "seq, entry",
        sqlite_order: "seq",
        postgres_order: "seq",
        what: ("audit entry", "audit entries"),
    },
];

/// A stored value, as SQLite types it: PostgreSQL's integers and flags are
/// integers here, its `text` text and its `bytea` bytes.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Value {
    Null,
    Int(i64),
    Text(String),
    Bytes(Vec<u8>),
}

/// A table's rows, in order, each its columns' values.
pub(super) type Rows = Vec<Vec<Value>>;

/// What was copied.
#[derive(Debug)]
pub struct Copied {
    /// The SQLite database.
    pub from: String,
    /// The PostgreSQL database (no password).
    pub to: String,
    /// Each table's rows, counted: how many, and what.
    pub counts: Vec<(usize, &'static str)>,
}

impl fmt::Display for Copied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let counts: Vec<String> = self
            .counts
            .iter()
            .map(|(n, what)| format!("{n} {what}"))
            .collect();
        write!(
            f,
            "copied {} from {} to {}; every record checked",
            counts.join(", "),
            self.from,
            self.to
        )
    }
}

/// Why a copy was refused or failed. Nothing is written to the target
/// unless every row was written and checked.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// Either store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The state dir has no database.
    #[error("{path} does not exist: --from names a lead's state dir (the one that holds mesh.db)")]
    NoDatabase { path: String },
    /// A lead is running on the state dir.
    #[error("{0}; stop that lead before copying its state dir")]
    Running(StoreError),
    /// The database predates kept holds and no lead since wrote them.
    #[error("{path} was written by a lead older than schema 5 and does not keep who holds which files yet: start a lead on the state dir once and stop it, then copy")]
    HoldsNotKept { path: String },
    /// The target holds a team already.
    #[error("{target} is not empty: it holds {found}; copy into an empty database")]
    NotEmpty { target: String, found: String },
    /// A lead runs on the target.
    #[error("{target} is in use: {holder} leads on it (at {url:?}, epoch {epoch}); copy into a database no lead uses")]
    Leased {
        target: String,
        holder: String,
        url: String,
        epoch: i64,
    },
    /// A row read back differs from the one written.
    #[error("the copy differs from the state dir, so nothing was copied: {0}")]
    Differs(String),
}

/// Copies the state dir `from` (a stopped lead's; its database is upgraded
/// to this lead's schema first) into the empty PostgreSQL database `to`.
pub async fn copy_to_postgres(from: &Path, to: &PgTarget) -> Result<Copied, CopyError> {
    let db = from.join(DB_FILE);
    if !db.is_file() {
        return Err(CopyError::NoDatabase {
            path: db.display().to_string(),
        });
    }
    // Held open (and so locked) until the copy is done: no lead starts on
    // the state dir meanwhile.
    let store = SqliteStore::open(from, Sync::Full).map_err(|e| match e {
        StoreError::InUse { .. } => CopyError::Running(e),
        e => CopyError::Store(e),
    })?;
    let tables = store.export()?;
    super::postgres::import(to, &tables).await?;
    Ok(Copied {
        from: store.path().display().to_string(),
        to: to.to_string(),
        counts: TABLES
            .iter()
            .zip(&tables)
            .map(|(table, rows)| (rows.len(), table.counted(rows.len())))
            .collect(),
    })
}

/// The first row of `table` where what PostgreSQL holds differs from what
/// SQLite held, said: its place, its first column, the column that differs.
pub(super) fn first_difference(table: &Table, sqlite: &Rows, postgres: &Rows) -> Option<String> {
    let columns: Vec<&str> = table.columns.split(',').map(str::trim).collect();
    for (i, (a, b)) in sqlite.iter().zip(postgres).enumerate() {
        if a == b {
            continue;
        }
        let key = a.first().map(shown).unwrap_or_default();
        let differing = a.iter().zip(b).enumerate().find(|(_, (x, y))| x != y);
        let what = match differing {
            Some((c, (x, y))) if a.len() == b.len() => format!(
                "column {}: SQLite has {}, PostgreSQL {}",
                columns.get(c).copied().unwrap_or("?"),
                shown(x),
                shown(y)
            ),
            _ => format!("SQLite has {} columns, PostgreSQL {}", a.len(), b.len()),
        };
        return Some(format!("{} row {} ({key}): {what}", table.name, i + 1));
    }
    if sqlite.len() != postgres.len() {
        let (longer, which) = if sqlite.len() > postgres.len() {
            (sqlite, "is missing from PostgreSQL")
        } else {
            (postgres, "is in PostgreSQL only")
        };
        let n = sqlite.len().min(postgres.len());
        let key = longer
            .get(n)
            .and_then(|row| row.first())
            .map(shown)
            .unwrap_or_default();
        return Some(format!(
            "{}: SQLite has {} rows, PostgreSQL {}; row {} ({key}) {which}",
            table.name,
            sqlite.len(),
            postgres.len(),
            n + 1
        ));
    }
    None
}

/// A value, short, for a message.
fn shown(value: &Value) -> String {
    match value {
        Value::Null => "NULL".into(),
        Value::Int(n) => n.to_string(),
        Value::Text(text) => {
            let short: String = text.chars().take(60).collect();
            if short.len() < text.len() {
                format!("{short:?}... ({} bytes)", text.len())
            } else {
                format!("{short:?}")
            }
        }
        Value::Bytes(bytes) => {
            let head = super::hex(&bytes[..bytes.len().min(16)]);
            let more = if bytes.len() > 16 { "..." } else { "" };
            format!("{} bytes {head}{more}", bytes.len())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn audit() -> &'static Table {
        TABLES.iter().find(|t| t.name == "audit").expect("audit")
    }

    #[test]
    fn the_first_difference_is_named_by_table_row_and_column() {
        let row = |seq, entry: &str| vec![Value::Int(seq), Value::Text(entry.into())];
        let sqlite = vec![row(1, "{\"a\":1}"), row(2, "{\"b\":2}")];
        assert_eq!(first_difference(audit(), &sqlite, &sqlite.clone()), None);
        let changed = vec![row(1, "{\"a\":1}"), row(2, "{\"b\": 2}")];
        assert_eq!(
            first_difference(audit(), &sqlite, &changed).as_deref(),
            Some(
                "audit row 2 (2): column entry: SQLite has \"{\\\"b\\\":2}\", PostgreSQL \"{\\\"b\\\": 2}\""
            )
        );
        assert_eq!(
            first_difference(audit(), &sqlite, &sqlite[..1].to_vec()).as_deref(),
            Some("audit: SQLite has 2 rows, PostgreSQL 1; row 2 (2) is missing from PostgreSQL")
        );
        let bytes = vec![vec![Value::Int(1), Value::Bytes(vec![0xab; 20])]];
        let other = vec![vec![Value::Int(1), Value::Null]];
        let said = first_difference(audit(), &bytes, &other).expect("differs");
        assert!(
            said.ends_with(&format!(
                "SQLite has 20 bytes {}..., PostgreSQL NULL",
                "ab".repeat(16)
            )),
            "{said}"
        );
    }
}
