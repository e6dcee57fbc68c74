//! The PostgreSQL store (`lead serve --store postgres://...`): the same
//! records as the SQLite store, on a server several leads share. Every
//! batch is one transaction whose first statement checks that this lead
//! still holds the lease at its epoch ([`Fence`]), so a lead that lost the
//! lease can never write again.
//!
//! The client is tokio-postgres, without a pool: the store's one connection
//! pipelines a batch (BEGIN, the fence, every change, COMMIT go out in one
//! flight, one round trip plus the server's flush), and the lease keeper and
//! the standby's LISTEN have connections of their own. The store owns a
//! current-thread runtime that drives its connection while a commit waits,
//! so a commit on the committer thread needs no hop to the lead's workers.

use std::{fmt, future::Future};

use tokio::runtime::Runtime;
use tokio_postgres::{types::ToSql, Client, Statement};

use super::{Change, Snapshot, Store, StoreError, Sync as SyncMode};

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
    /// Drives the connection while a call waits; `None` once dropped.
    runtime: Option<Runtime>,
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
    /// Connects, creates or checks the tables, and prepares the statements.
    /// Every commit is fenced by `fence`.
    pub fn open(target: &PgTarget, sync: SyncMode, fence: Fence) -> Result<Self, StoreError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let display = target.to_string();
        let (client, statements) = block(&runtime, async {
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
            Ok::<_, StoreError>((client, statements))
        })?;
        Ok(Self {
            runtime: Some(runtime),
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

    /// Runs `f` on the store's connection, from a plain thread or from the
    /// lead's (multi-thread) runtime.
    fn run<T>(&self, f: impl Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
        match &self.runtime {
            Some(runtime) => block(runtime, f),
            None => Err(StoreError::Stopped),
        }
    }
}

/// Blocks on `f` with `runtime`, leaving the lead's runtime first if this
/// thread is one of its workers.
fn block<F: Future>(runtime: &Runtime, f: F) -> F::Output {
    match tokio::runtime::Handle::try_current() {
        Ok(_) => tokio::task::block_in_place(|| runtime.block_on(f)),
        Err(_) => runtime.block_on(f),
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        // Dropping a runtime inside another one panics; this does not.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Store for PostgresStore {
    fn load(&mut self) -> Result<Snapshot, StoreError> {
        self.run(load::snapshot(&self.client))
    }

    fn commit(&mut self, changes: &[Change]) -> Result<(), StoreError> {
        if changes.is_empty() {
            return Ok(());
        }
        self.run(commit::batch(
            &self.client,
            &self.statements,
            &self.fence,
            changes,
        ))
    }
}

/// A statement's parameters, owned until the batch is sent.
type Params = Vec<Box<dyn ToSql + Sync + Send>>;

/// One statement of a batch.
struct Write<'a> {
    statement: &'a Statement,
    params: Params,
}
