//! Who leads: one row of the `lease` table, with a holder, the URL its
//! clients reach it at, an epoch and an expiry on the database's clock.
//! A lead takes the lease when it is free or expired (or already its own,
//! as after a restart), which bumps the epoch; it renews it every few
//! seconds; it resigns on a clean stop, which wakes the standbys at once
//! (NOTIFY `mesh_lease`). Each call here runs on a connection of its own,
//! apart from the store's.

use std::time::Duration;

use tokio_postgres::Client;

use super::{pg, schema, PgTarget};
use crate::store::StoreError;

/// The channel a resigning lead notifies.
pub(crate) const CHANNEL: &str = "mesh_lease";

/// The lease row as a standby sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// Who holds it (empty when no lead ever did).
    pub holder: String,
    /// Where its clients reach it.
    pub url: String,
    /// Its console's URL (empty when it has none).
    pub console: String,
    /// Its epoch.
    pub epoch: i64,
    /// How long until it expires (zero when it has).
    pub remaining: Duration,
    /// When it expires, on the database's clock (Unix ms; 0 when resigned
    /// or never held).
    pub expires_unix_ms: i64,
    /// Whether it has expired (or was resigned).
    pub expired: bool,
}

/// A connection for the lease.
#[derive(Debug)]
pub struct Lease {
    client: Client,
    holder: String,
    url: String,
    console: String,
    ttl: Duration,
}

/// A timestamp's Unix ms; 0 for `-infinity` (a resigned lease).
const UNIX_MS: &str =
    "CASE WHEN isfinite(expires_at) THEN (EXTRACT(EPOCH FROM expires_at) * 1000)::int8 ELSE 0 END";

impl Lease {
    /// Connects as `holder`, which its clients reach at `url`, creating the
    /// tables on an empty database.
    pub async fn connect(
        target: &PgTarget,
        holder: &str,
        url: &str,
        ttl: Duration,
    ) -> Result<Self, StoreError> {
        let mut client = target.connect().await?;
        schema::prepare(&mut client, &target.to_string()).await?;
        Ok(Self {
            client,
            holder: holder.to_owned(),
            url: url.to_owned(),
            console: String::new(),
            ttl,
        })
    }

    /// The URL of this lead's console, for the lease row (a standby's
    /// console links to the active lead's).
    #[must_use]
    pub fn with_console(mut self, console: &str) -> Self {
        console.clone_into(&mut self.console);
        self
    }

    /// Lets this connection's commits return before they reach the disk
    /// (for renewals: one lost in a crash of the database only shortens
    /// the lease).
    pub async fn relax(&self) -> Result<(), StoreError> {
        self.client
            .batch_execute("SET synchronous_commit TO off")
            .await
            .map_err(pg)
    }

    /// Who this lead is in the lease row.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Takes the lease if it is free, expired or this lead's already:
    /// the new epoch, or `None` while another lead holds it. A takeover
    /// waits for a batch of the old lead in flight (the fence holds the row).
    pub async fn try_acquire(&self) -> Result<Option<i64>, StoreError> {
        let row = self
            .client
            .query_opt(
                "UPDATE lease SET holder = $1, url = $2, console = $4, epoch = epoch + 1,
                     expires_at = clock_timestamp() + make_interval(secs => $3)
                 WHERE id = 1 AND (expires_at < clock_timestamp() OR holder = $1)
                 RETURNING epoch",
                &[
                    &self.holder,
                    &self.url,
                    &self.ttl.as_secs_f64(),
                    &self.console,
                ],
            )
            .await
            .map_err(pg)?;
        Ok(row.map(|row| row.get(0)))
    }

    /// Extends the lease held at `epoch`: when it now expires (Unix ms, on
    /// the database's clock), or `None` if another lead took it.
    pub async fn renew(&self, epoch: i64) -> Result<Option<i64>, StoreError> {
        let renewed = self
            .client
            .query_opt(
                &format!(
                    "UPDATE lease SET expires_at = clock_timestamp() + make_interval(secs => $3)
                     WHERE id = 1 AND holder = $1 AND epoch = $2
                     RETURNING {UNIX_MS}"
                ),
                &[&self.holder, &epoch, &self.ttl.as_secs_f64()],
            )
            .await
            .map_err(pg)?;
        Ok(renewed.map(|row| row.get(0)))
    }

    /// Gives the lease up at once and wakes the standbys.
    pub async fn resign(&self, epoch: i64) -> Result<(), StoreError> {
        self.client.batch_execute("BEGIN").await.map_err(pg)?;
        let resigned = self
            .client
            .execute(
                "UPDATE lease SET expires_at = '-infinity' WHERE id = 1 AND holder = $1 AND epoch = $2",
                &[&self.holder, &epoch],
            )
            .await
            .map_err(pg);
        let notified = self
            .client
            .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &epoch.to_string()])
            .await
            .map_err(pg);
        let resigned = match resigned {
            Ok(0) => Err(StoreError::Postgres(format!(
                "{} no longer held it at epoch {epoch}",
                self.holder
            ))),
            other => other,
        };
        let ended = self
            .client
            .batch_execute(if resigned.is_ok() && notified.is_ok() {
                "COMMIT"
            } else {
                "ROLLBACK"
            })
            .await
            .map_err(pg);
        resigned?;
        notified?;
        ended
    }

    /// The lease as it stands.
    pub async fn leader(&self) -> Result<Leader, StoreError> {
        let row = self
            .client
            .query_one(
                &format!(
                    "SELECT holder, url, epoch,
                         CASE WHEN expires_at < clock_timestamp() THEN 0::float8
                              ELSE EXTRACT(EPOCH FROM (expires_at - clock_timestamp()))::float8 END,
                         expires_at < clock_timestamp(), console, {UNIX_MS}
                     FROM lease WHERE id = 1"
                ),
                &[],
            )
            .await
            .map_err(pg)?;
        Ok(Leader {
            holder: row.get(0),
            url: row.get(1),
            epoch: row.get(2),
            remaining: Duration::from_secs_f64(row.get::<_, f64>(3)),
            expired: row.get(4),
            console: row.get(5),
            expires_unix_ms: row.get(6),
        })
    }
}

/// Resignations as they happen (LISTEN on a connection of its own).
#[derive(Debug)]
pub struct Resignations {
    /// Keeps the connection open.
    _client: Client,
    notes: tokio::sync::mpsc::UnboundedReceiver<String>,
}

impl Resignations {
    /// Listens on the database at `target`.
    pub async fn listen(target: &PgTarget) -> Result<Self, StoreError> {
        let (client, notes) = target.connect_notified().await?;
        client
            .batch_execute(&format!("LISTEN {CHANNEL}"))
            .await
            .map_err(pg)?;
        Ok(Self {
            _client: client,
            notes,
        })
    }

    /// The next resignation's epoch; `None` once the connection is gone.
    pub async fn next(&mut self) -> Option<String> {
        self.notes.recv().await
    }
}
