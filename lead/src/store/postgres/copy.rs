//! `lead store copy`'s PostgreSQL half: the lease taken as `store-copy`
//! (refused while a lead holds it), every row written in one transaction
//! that starts with the fence, and read back and compared with its
//! original in that transaction, which commits only if each is the same
//! (and so leaves the database empty otherwise). The lease is then given
//! up at once, so the first lead to start takes it.

use std::{error::Error, time::Duration};

use bytes::BytesMut;
use tokio_postgres::{
    types::{to_sql_checked, IsNull, ToSql, Type},
    Row, Transaction,
};

use super::{
    commit::{in_order, Pending},
    pg, Lease, PgTarget,
};
use crate::store::{
    copy::{first_difference, CopyError, Rows, Table, Value, TABLES},
    StoreError,
};

/// The copy's name in the lease row.
const HOLDER: &str = "store-copy";
/// How long the copy's lease lasts if it dies holding it (while it writes,
/// its transaction holds the lease row, so no lead takes it over).
const TTL: Duration = Duration::from_secs(30);
/// Inserts sent in one flight.
const FLIGHT: usize = 256;

/// Writes `tables` (in [`TABLES`]' order) into the empty mesh database at
/// `target`, checked row by row.
pub(in crate::store) async fn import(target: &PgTarget, tables: &[Rows]) -> Result<(), CopyError> {
    let display = target.to_string();
    // No URL: a lead that starts meanwhile stands by, saying no lead is
    // active yet.
    let lease = Lease::connect(target, HOLDER, "", TTL).await?;
    let Some(epoch) = lease.try_acquire().await? else {
        let leader = lease.leader().await?;
        return Err(CopyError::Leased {
            target: display,
            holder: leader.holder,
            url: leader.url,
            epoch: leader.epoch,
        });
    };
    let written = async {
        let mut client = target.connect().await?;
        let tx = client.transaction().await.map_err(pg)?;
        match fill(&tx, epoch, tables, &display).await {
            Ok(()) => tx.commit().await.map_err(pg)?,
            Err(e) => {
                let _ = tx.rollback().await;
                return Err(e);
            }
        }
        Ok::<_, CopyError>(())
    }
    .await;
    // Whatever happened, the lease goes at once.
    let resigned = lease.resign(epoch).await;
    written?;
    resigned?;
    Ok(())
}

/// The fence, the check that the database is empty, every row, and every
/// row read back.
async fn fill(
    tx: &Transaction<'_>,
    epoch: i64,
    tables: &[Rows],
    display: &str,
) -> Result<(), CopyError> {
    tx.execute("SELECT mesh_fence($1, $2)", &[&HOLDER, &epoch])
        .await
        .map_err(pg)?;
    let mut found = Vec::new();
    for table in TABLES {
        let count: i64 = tx
            .query_one(&format!("SELECT count(*) FROM {}", table.name), &[])
            .await
            .and_then(|row| row.try_get(0))
            .map_err(pg)?;
        if count > 0 {
            found.push(format!(
                "{count} {}",
                table.counted(usize::try_from(count).unwrap_or(usize::MAX))
            ));
        }
    }
    if !found.is_empty() {
        return Err(CopyError::NotEmpty {
            target: display.to_owned(),
            found: found.join(", "),
        });
    }
    for (table, rows) in TABLES.iter().zip(tables) {
        insert(tx, table, rows).await?;
    }
    for (table, rows) in TABLES.iter().zip(tables) {
        let back = read(tx, table).await?;
        if let Some(difference) = first_difference(table, rows, &back) {
            return Err(CopyError::Differs(difference));
        }
    }
    Ok(())
}

/// Inserts `rows` into `table`, in their order, a flight at a time.
async fn insert(tx: &Transaction<'_>, table: &Table, rows: &Rows) -> Result<(), StoreError> {
    let width = table.columns.split(',').count();
    let places: Vec<String> = (1..=width).map(|n| format!("${n}")).collect();
    let statement = tx
        .prepare(&format!(
            "INSERT INTO {} ({}) VALUES ({})",
            table.name,
            table.columns,
            places.join(", ")
        ))
        .await
        .map_err(pg)?;
    // Each value checked first, so that one that does not go is named.
    let columns: Vec<&str> = table.columns.split(',').map(str::trim).collect();
    for (n, row) in rows.iter().enumerate() {
        for ((value, ty), column) in row.iter().zip(statement.params()).zip(&columns) {
            if let Err(why) = value.fits(ty) {
                return Err(StoreError::Postgres(format!(
                    "{} row {} column {column}: {why}",
                    table.name,
                    n + 1
                )));
            }
        }
    }
    for flight in rows.chunks(FLIGHT) {
        let params: Vec<Vec<&(dyn ToSql + Sync)>> = flight
            .iter()
            .map(|row| row.iter().map(|v| v as &(dyn ToSql + Sync)).collect())
            .collect();
        let pending: Vec<Pending<'_>> = params
            .iter()
            .map(|params| -> Pending<'_> { Box::pin(tx.execute(&statement, params)) })
            .collect();
        // The first error is the one that counts: the server skips the
        // rest of the transaction after it.
        for result in in_order(pending).await {
            if let Err(e) = result {
                let detail = match pg(e) {
                    StoreError::Postgres(detail) => detail,
                    other => other.to_string(),
                };
                return Err(StoreError::Postgres(format!(
                    "inserting into {}: {detail}",
                    table.name
                )));
            }
        }
    }
    Ok(())
}

/// `table`'s rows as PostgreSQL holds them, in the order SQLite's were read.
async fn read(tx: &Transaction<'_>, table: &Table) -> Result<Rows, StoreError> {
    let sql = format!(
        "SELECT {} FROM {} ORDER BY {}",
        table.columns, table.name, table.postgres_order
    );
    tx.query(&sql, &[])
        .await
        .map_err(pg)?
        .iter()
        .map(|row| (0..row.len()).map(|i| value(table, row, i)).collect())
        .collect()
}

/// A column's value, as SQLite types it.
fn value(table: &Table, row: &Row, i: usize) -> Result<Value, StoreError> {
    let ty = row.columns().get(i).map(|c| c.type_().clone());
    let value = match ty {
        Some(ty) if ty == Type::INT4 => row
            .try_get::<_, Option<i32>>(i)
            .map(|n| n.map(|n| Value::Int(n.into()))),
        Some(ty) if ty == Type::INT8 => row.try_get::<_, Option<i64>>(i).map(|n| n.map(Value::Int)),
        Some(ty) if ty == Type::BOOL => row
            .try_get::<_, Option<bool>>(i)
            .map(|b| b.map(|b| Value::Int(b.into()))),
        Some(ty) if ty == Type::TEXT => row
            .try_get::<_, Option<String>>(i)
            .map(|t| t.map(Value::Text)),
        Some(ty) if ty == Type::BYTEA => row
            .try_get::<_, Option<Vec<u8>>>(i)
            .map(|b| b.map(Value::Bytes)),
        other => {
            return Err(StoreError::Postgres(format!(
                "{} column {}: type {other:?} is none a mesh table has",
                table.name,
                i + 1
            )))
        }
    };
    Ok(value.map_err(pg)?.unwrap_or(Value::Null))
}

impl Value {
    /// Whether it goes in a column of type `ty`: integers in `integer`
    /// (those that fit), `bigint` and (0 and 1) `boolean`, text in `text`,
    /// bytes in `bytea`; and why not.
    fn fits(&self, ty: &Type) -> Result<(), String> {
        let fits = match self {
            Value::Null => true,
            Value::Int(n) if *ty == Type::INT4 => i32::try_from(*n).is_ok(),
            Value::Int(n) if *ty == Type::BOOL => matches!(n, 0 | 1),
            Value::Int(_) => *ty == Type::INT8,
            Value::Text(_) => *ty == Type::TEXT,
            Value::Bytes(_) => *ty == Type::BYTEA,
        };
        if fits {
            return Ok(());
        }
        Err(match self {
            Value::Int(n) => format!("the integer {n} does not go in a {ty} column"),
            Value::Text(_) => format!("text does not go in a {ty} column"),
            _ => format!("bytes do not go in a {ty} column"),
        })
    }
}

/// SQLite's values in PostgreSQL's columns, as [`Value::fits`] says.
impl ToSql for Value {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        self.fits(ty)?;
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(n) if *ty == Type::INT4 => i32::try_from(*n)?.to_sql(ty, out),
            Value::Int(n) if *ty == Type::BOOL => (*n == 1).to_sql(ty, out),
            Value::Int(n) => n.to_sql(ty, out),
            Value::Text(text) => text.to_sql(ty, out),
            Value::Bytes(bytes) => bytes.to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}
