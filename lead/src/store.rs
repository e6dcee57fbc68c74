//! Where the lead keeps what must survive it: the members (with session token
//! hashes), every protocol request, every envelope not yet acknowledged, and
//! the `Send` message ids that make retries idempotent.
//!
//! The hub gathers the changes of a burst of commands and commits them in one
//! transaction before it answers any of those commands (group commit).

pub use mesh_core::members::MemberRecord;
pub use mesh_core::team::Change as TeamChange;
use mesh_core::{effect::Message, protocol::Request, tasks::Task};

#[doc(hidden)]
mod copy;
mod postgres;
mod rows;
mod sqlite;

pub use copy::{copy_to_postgres, Copied, CopyError};
pub use postgres::{Fence, Leader, Lease, PgTarget, PostgresStore, Resignations};
pub use rows::history_event;
pub use sqlite::{SqliteStore, Sync, DB_FILE, MARKER_FILE};

/// One unacknowledged envelope, as persisted.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvelopeRecord {
    /// Whose inbox holds it.
    pub member: String,
    /// Its place in the inbox.
    pub seq: u64,
    /// Its message id.
    pub message_id: String,
    /// Who sent it.
    pub from: String,
    /// When the lead accepted it (unix ms).
    pub sent_at_unix_ms: i64,
    /// What it carries; `None` when its body is shared.
    pub body: Option<Message>,
    /// The shared body it carries, by id.
    pub shared: Option<u64>,
}

/// A change to persist.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A new envelope in a member's inbox.
    Envelope(EnvelopeRecord),
    /// A body the recipients of a fan-out share (stored once; dropped with
    /// the last envelope that refers to it).
    SharedBody { id: u64, body: Message },
    /// The member processed everything up to `seq`.
    Ack { member: String, seq: u64 },
    /// The member's inbox is dropped (it terminated, or its name was reused).
    ClearInbox { member: String },
    /// A `Send` message id seen from `sender`, with the digest of what it sent.
    MessageId {
        sender: String,
        message_id: String,
        digest: String,
    },
    /// A terminated member is forgotten (its retention passed).
    DeleteMember { member: String },
    /// Something happened, for the event history.
    History(std::sync::Arc<crate::history::Entry>),
    /// The history forgets every entry below this id.
    HistoryTrim(u64),
    /// A decision, appended to the audit trail (as JSON, encoded once).
    Audit(crate::audit::Sealed),
    /// What the core says changed of the members, the requests, the tasks,
    /// the holds and the usage.
    Team(TeamChange),
}

/// Everything a store holds, as loaded at start.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Members in join order.
    pub members: Vec<MemberRecord>,
    /// Unacknowledged envelopes, by member, in `seq` order.
    pub envelopes: Vec<EnvelopeRecord>,
    /// Shared bodies by id.
    pub bodies: Vec<(u64, Message)>,
    /// Requests, oldest first.
    pub requests: Vec<Request>,
    /// `Send` message ids by sender, oldest first, with their digests
    /// (empty for ids stored before digests were).
    pub message_ids: Vec<(String, String, String)>,
    /// Tasks, oldest first.
    pub tasks: Vec<Task>,
    /// Who holds which files; `None` where the store has not kept them yet
    /// (a database from before schema 5, or a store that keeps nothing):
    /// the lead then works them out from the approved plans.
    pub holds: Option<Vec<(String, mesh_core::holds::Hold)>>,
    /// What each model user used, and the members' budgets.
    pub usage: Vec<mesh_core::usage::Account>,
    /// The event history's newest entries, oldest first.
    pub history: Vec<crate::history::Entry>,
    /// The audit trail's newest entries, oldest first.
    pub audit: Vec<crate::audit::Entry>,
}

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database file is damaged or not a mesh database.
    #[error("the state database {path} is corrupt or not a mesh database ({detail}); refusing to start over it. Move it aside to start empty, or restore it from a backup")]
    Corrupt { path: String, detail: String },
    /// The database file vanished from a state dir that had one.
    #[error("the state database {path} is missing, but {marker} says this state dir had one; refusing to start empty. If that is intended, delete {marker}")]
    Missing { path: String, marker: String },
    /// Another lead holds the database.
    #[error(
        "the state database {path} is in use by another lead; give each lead its own --state-dir"
    )]
    InUse { path: String },
    /// SQLite failed.
    #[error("state database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The file system failed.
    #[error("state dir: {0}")]
    Io(#[from] std::io::Error),
    /// A stored value did not decode.
    #[error("state database: a stored {what} did not decode: {detail}")]
    Decode { what: &'static str, detail: String },
    /// PostgreSQL failed, or could not be reached.
    #[error("PostgreSQL store: {0}")]
    Postgres(String),
    /// Another lead holds the lease now: this one may write no more.
    #[error("{0}; stepping down")]
    Fenced(String),
    /// The committer thread is gone (it stopped after a failure).
    #[error("state database: the committer stopped")]
    Stopped,
}

/// A store the lead opened, as its committer (`committer.rs`) owns it.
#[derive(Debug)]
pub enum Storage {
    /// A store with a blocking API (SQLite, memory): committed to on a
    /// thread of its own, or in the hub's task if it does not block.
    Local(Box<dyn Store>),
    /// PostgreSQL, whose client is async: committed to by a task on the
    /// lead's runtime.
    Postgres(Box<PostgresStore>),
}

impl Storage {
    /// Whether it keeps the lead's record (the audit trail, the event
    /// history): if not, the lead seals and encodes them only when read.
    pub fn keeps_record(&self) -> bool {
        match self {
            Storage::Local(store) => store.keeps_record(),
            Storage::Postgres(_) => true,
        }
    }
}

/// A place to keep the lead's state, with a blocking API.
pub trait Store: Send + std::fmt::Debug {
    /// Everything stored, once at start.
    fn load(&mut self) -> Result<Snapshot, StoreError>;
    /// Applies `changes` atomically and durably (as the store's sync mode says).
    fn commit(&mut self, changes: &[Change]) -> Result<(), StoreError>;
    /// Whether a commit blocks on I/O (and so runs on a thread of its own).
    fn blocks(&self) -> bool {
        true
    }
    /// Whether it keeps the lead's record (the audit trail, the event
    /// history): if not, the lead seals and encodes them only when read.
    fn keeps_record(&self) -> bool {
        true
    }
}

/// Keeps nothing: for tests and benchmarks (`--store memory`).
#[derive(Debug, Default)]
pub struct MemoryStore;

impl Store for MemoryStore {
    fn load(&mut self) -> Result<Snapshot, StoreError> {
        Ok(Snapshot::default())
    }

    fn commit(&mut self, _changes: &[Change]) -> Result<(), StoreError> {
        Ok(())
    }

    fn blocks(&self) -> bool {
        false
    }

    fn keeps_record(&self) -> bool {
        false
    }
}

/// SHA-256 of a token, hex: what the store keeps instead of the token.
pub use mesh_core::members::token_hash;

/// Bytes as lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    hex
}

#[cfg(test)]
mod tests {
    #[test]
    fn token_hashes_are_sha256_in_lower_hex() {
        assert_eq!(
            super::token_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
