//! The PostgreSQL store (`lead serve --store postgres://...`): the same
//! records as the SQLite store, on a server several leads share. Every
//! batch is one transaction whose first statement checks that this lead
//! still holds the lease at its epoch ([`Fence`]), so a lead that lost the
//! lease can never write again.
//!
//! The client is tokio-postgres, without a pool: the store's one connection
//! pipelines a batch (BEGIN, the fence, every change, COMMIT go out in one
//! flight, one round trip plus the server's flush), and the lease keeper and
//! the standby's LISTEN have connections of their own. Its API is async:
//! the committer runs it as a task on the lead's runtime, which also drives
//! its connection.

use std::fmt;

use tokio_postgres::{types::ToSql, Client, Statement};

use super::{Change, Snapshot, StoreError, Sync as SyncMode};

mod commit;
mod copy;
mod lease;
mod load;
mod schema;
mod target;

pub(super) use copy::import;
pub use lease::{Leader, Lease, Resignations};
pub use target::PgTarget;

/// Tells a mesh database from any other.
const MAGIC: &str = "mesh-lead-state";
/// `Send` message ids kept per sender.
const KEPT_MESSAGE_IDS: i64 = 4_096;
/// The SQLSTATE `mesh_fence` raises when the lease is lost.
const FENCED: &str = "MF001";

/// Who may write: the lease's holder and the epoch it took the lease at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// The lead's name in the lease row.
    pub holder: String,
    /// The epoch of its lease.
    pub epoch: i64,
}

/// A PostgreSQL error as the store's, a lost lease as [`StoreError::Fenced`].
fn pg(e: tokio_postgres::Error) -> StoreError {
    match e.as_db_error() {
        Some(db) if db.code().code() == FENCED => StoreError::Fenced(db.message().to_owned()),
        Some(db) => {
            StoreError::Postgres(format!("{} (SQLSTATE {})", db.message(), db.code().code()))
        }
        None => {
            use std::error::Error as _;
            match e.source() {
                Some(source) => StoreError::Postgres(format!("{e}: {source}")),
                None => StoreError::Postgres(e.to_string()),
            }
        }
    }
}

/// The store.
pub struct PostgresStore {
    client: Client,
    statements: commit::Statements,
    fence: Fence,
    /// Where, for messages (no password).
    display: String,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("at", &self.display)
            .field("fence", &self.fence)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects (the connection runs on the current runtime), creates or
    /// checks the tables, and prepares the statements. Every commit is
    /// fenced by `fence`.
    pub async fn open(target: &PgTarget, sync: SyncMode, fence: Fence) -> Result<Self, StoreError> {
        let display = target.to_string();
        let mut client = target.connect().await?;
        schema::prepare(&mut client, &display).await?;
        let level = match sync {
            SyncMode::Full => "on",
            SyncMode::Normal => "off",
        };
        client
            .batch_execute(&format!("SET synchronous_commit = {level}"))
            .await
            .map_err(pg)?;
        let statements = commit::Statements::prepare(&client).await?;
        Ok(Self {
            client,
            statements,
            fence,
            display,
        })
    }

    /// Where it is (no password).
    pub fn display(&self) -> &str {
        &self.display
    }

    /// Everything stored, once at start.
    pub async fn load(&mut self) -> Result<Snapshot, StoreError> {
        load::snapshot(&self.client).await
    }

    /// Applies `changes` in one transaction, fenced by the lease.
    pub async fn commit(&mut self, changes: &[Change]) -> Result<(), StoreError> {
        if changes.is_empty() {
            return Ok(());
        }
        commit::batch(&self.client, &self.statements, &self.fence, changes).await
    }
}

/// A statement's parameters, owned until the batch is sent.
type Params = Vec<Box<dyn ToSql + Sync + Send>>;

/// One statement of a batch.
struct Write<'a> {
    statement: &'a Statement,
    params: Params,
}
