//! The PostgreSQL store's tables, created or upgraded on start under an
//! advisory lock (so two leads starting on one empty database do not race),
//! and the lease row the leads share.
//!
//! The tables mirror the SQLite store's (schema 10) with PostgreSQL's types:
//! BIGINT for integers, BYTEA for the wire's bytes, BOOLEAN for flags, and
//! `COLLATE "C"` on the keys the load orders by, so the order is the bytewise
//! one SQLite gives whatever the server's default collation is. Requests and
//! tasks carry an identity column for their order of creation (SQLite's
//! rowid).

use tokio_postgres::Client;

use super::{pg, MAGIC};
use crate::store::StoreError;

/// The schema version this code writes.
pub(super) const SCHEMA_VERSION: i64 = 4;

/// Serializes schema changes between leads (any constant both agree on).
const SCHEMA_LOCK: i64 = 0x6d65_7368_0001;

const SCHEMA_1: &str = r#"
CREATE TABLE members (
    name text COLLATE "C" PRIMARY KEY, member_id text NOT NULL, role text NOT NULL,
    token_hash text, mode integer NOT NULL, idle boolean NOT NULL, terminated boolean NOT NULL,
    last_seq bigint NOT NULL, ord bigint NOT NULL, idle_reason text NOT NULL DEFAULT '');
CREATE TABLE envelopes (
    member text COLLATE "C" NOT NULL, seq bigint NOT NULL, body bytea NOT NULL, shared bigint,
    PRIMARY KEY (member, seq));
CREATE INDEX envelopes_by_shared ON envelopes (shared) WHERE shared IS NOT NULL;
CREATE TABLE bodies (id bigint PRIMARY KEY, body bytea NOT NULL);
CREATE TABLE requests (
    ord bigint GENERATED ALWAYS AS IDENTITY, request_id text PRIMARY KEY,
    kind integer NOT NULL, sender text NOT NULL, target text NOT NULL, status integer NOT NULL,
    payload text NOT NULL, feedback text NOT NULL, created bigint NOT NULL, resolved bigint,
    deadline bigint, decision bytea, reviews text NOT NULL DEFAULT '[]');
CREATE TABLE message_ids (
    sender text COLLATE "C" NOT NULL, message_id text NOT NULL, n bigint NOT NULL,
    digest text NOT NULL DEFAULT '', PRIMARY KEY (sender, message_id));
CREATE INDEX message_ids_by_n ON message_ids (sender, n);
CREATE TABLE tasks (
    ord bigint GENERATED ALWAYS AS IDENTITY, task_id text PRIMARY KEY,
    created bigint NOT NULL, body bytea NOT NULL);
CREATE TABLE holds (member text COLLATE "C" PRIMARY KEY, paths text NOT NULL, task_id text NOT NULL);
CREATE TABLE usage (name text COLLATE "C" PRIMARY KEY, account text NOT NULL);
CREATE TABLE history (id bigint PRIMARY KEY, at bigint NOT NULL, kind text NOT NULL,
    who text NOT NULL, event bytea NOT NULL);
CREATE TABLE audit (seq bigint PRIMARY KEY, entry text NOT NULL);

-- A shared body goes with the last envelope that refers to it.
CREATE FUNCTION mesh_release_shared() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM bodies b
     WHERE b.id IN (SELECT DISTINCT shared FROM gone WHERE shared IS NOT NULL)
       AND NOT EXISTS (SELECT 1 FROM envelopes e WHERE e.shared = b.id);
    RETURN NULL;
END $$;
CREATE TRIGGER envelopes_release_shared AFTER DELETE ON envelopes
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION mesh_release_shared();

-- Who leads: one row, its expiry on the database's clock.
CREATE TABLE lease (
    id smallint PRIMARY KEY CHECK (id = 1), holder text NOT NULL, url text NOT NULL,
    epoch bigint NOT NULL, expires_at timestamptz NOT NULL);
INSERT INTO lease VALUES (1, '', '', 0, '-infinity');

-- The first statement of every commit: the batch is written only by the
-- lead that holds the lease at this epoch. It takes the lease row FOR SHARE,
-- so a takeover waits for a batch in flight and the next batch of the old
-- lead fails.
CREATE FUNCTION mesh_fence(who text, at_epoch bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM lease WHERE id = 1 AND holder = who AND epoch = at_epoch FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'MF001',
            MESSAGE = format('lease lost: %s no longer leads at epoch %s', who, at_epoch);
    END IF;
END $$;
"#;

/// Schema 2: the lease names the active lead's console too, so a standby's
/// console can link to it.
const SCHEMA_2: &str = "ALTER TABLE lease ADD COLUMN console text NOT NULL DEFAULT ''";

/// Schema 3: how each member confines its commands, as it said at join
/// (empty: it did not say).
const SCHEMA_3: &str = "ALTER TABLE members ADD COLUMN sandbox text NOT NULL DEFAULT ''";

/// Schema 4: how each member's model's replies are held to one call, as it
/// said at join (empty: it did not say).
const SCHEMA_4: &str = "ALTER TABLE members ADD COLUMN decoding text NOT NULL DEFAULT ''";

/// The changes from each version to the next: `UPGRADES[n - 1]` takes
/// schema `n` to `n + 1`.
const UPGRADES: [&str; 3] = [SCHEMA_2, SCHEMA_3, SCHEMA_4];

/// Creates the tables on an empty database, upgrades an older mesh
/// database, and checks a used one is a mesh database this code reads.
pub(super) async fn prepare(client: &mut Client, display: &str) -> Result<(), StoreError> {
    let corrupt = |detail: String| StoreError::Corrupt {
        path: display.to_owned(),
        detail,
    };
    let tx = client.transaction().await.map_err(pg)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .await
        .map_err(pg)?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS meta (key text PRIMARY KEY, value text NOT NULL)")
        .await
        .map_err(pg)?;
    let rows = tx
        .query("SELECT key, value FROM meta", &[])
        .await
        .map_err(pg)?;
    let get = |key: &str| {
        rows.iter()
            .find(|row| row.get::<_, &str>(0) == key)
            .map(|row| row.get::<_, String>(1))
    };
    match (get("magic"), get("schema_version")) {
        (None, _) => {
            let tables: i64 = tx
                .query_one(
                    "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename <> 'meta'",
                    &[],
                )
                .await
                .map_err(pg)?
                .get(0);
            if tables != 0 {
                return Err(corrupt(format!(
                    "the database has {tables} tables but no mesh meta; give the lead an empty database"
                )));
            }
            tx.batch_execute(SCHEMA_1).await.map_err(pg)?;
            for upgrade in UPGRADES {
                tx.batch_execute(upgrade).await.map_err(pg)?;
            }
            tx.execute(
                "INSERT INTO meta (key, value) VALUES ('magic', $1), ('schema_version', $2)",
                &[&MAGIC, &SCHEMA_VERSION.to_string()],
            )
            .await
            .map_err(pg)?;
        }
        (Some(magic), _) if magic != MAGIC => {
            return Err(corrupt(format!("meta.magic is {magic:?}")));
        }
        (Some(_), version) => {
            let found = version.as_deref().and_then(|v| v.parse::<i64>().ok());
            match found {
                Some(SCHEMA_VERSION) => {}
                Some(old) if (1..SCHEMA_VERSION).contains(&old) => {
                    for upgrade in UPGRADES.iter().skip(usize::try_from(old - 1).unwrap_or(0)) {
                        tx.batch_execute(upgrade).await.map_err(pg)?;
                    }
                    tx.execute(
                        "UPDATE meta SET value = $1 WHERE key = 'schema_version'",
                        &[&SCHEMA_VERSION.to_string()],
                    )
                    .await
                    .map_err(pg)?;
                    tracing::info!(
                        from = old,
                        to = SCHEMA_VERSION,
                        "upgraded the database's schema"
                    );
                }
                _ => {
                    return Err(corrupt(format!(
                        "schema version {}; this lead reads {SCHEMA_VERSION} and the ones before",
                        version.unwrap_or_default()
                    )));
                }
            }
        }
    }
    tx.commit().await.map_err(pg)?;
    Ok(())
}
