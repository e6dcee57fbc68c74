//! Every row of the database as stored, for `lead store copy`: each value
//! as SQLite holds it, nothing decoded, nothing left out (the load keeps
//! only the newest history and audit entries; this reads them all).

use rusqlite::types::ValueRef;

use super::SqliteStore;
use crate::store::{
    copy::{CopyError, Rows, Table, Value, TABLES},
    StoreError,
};

impl SqliteStore {
    /// Every table the copy copies, in [`TABLES`]' order, each table's rows
    /// in order. Refuses a database whose holds a lead would still work out
    /// from the plans (see `meta.holds_kept`): they are in no row.
    pub(in crate::store) fn export(&self) -> Result<Vec<Rows>, CopyError> {
        // One read transaction: the tables agree with each other.
        let tx = self
            .conn
            .unchecked_transaction()
            .map_err(StoreError::from)?;
        let mut tables = Vec::with_capacity(TABLES.len());
        for table in TABLES {
            tables.push(self.rows(table)?);
        }
        tx.commit().map_err(StoreError::from)?;
        let requests = TABLES
            .iter()
            .zip(&tables)
            .find(|(table, _)| table.name == "requests")
            .map_or(0, |(_, rows)| rows.len());
        if !self.holds_kept && requests > 0 {
            return Err(CopyError::HoldsNotKept {
                path: self.path.display().to_string(),
            });
        }
        Ok(tables)
    }

    /// `table`'s rows, in order.
    fn rows(&self, table: &Table) -> Result<Rows, StoreError> {
        let sql = format!(
            "SELECT {} FROM {} ORDER BY {}",
            table.columns, table.name, table.sqlite_order
        );
        let mut statement = self.conn.prepare(&sql)?;
        let width = statement.column_count();
        let mut rows = statement.query([])?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            let mut values = Vec::with_capacity(width);
            for column in 0..width {
                values.push(value(table, column, row.get_ref(column)?)?);
            }
            out.push(values);
        }
        Ok(out)
    }
}

/// A value as SQLite holds it; none of the tables has a real number, and
/// text is UTF-8.
fn value(table: &Table, column: usize, value: ValueRef<'_>) -> Result<Value, StoreError> {
    let bad = |detail: String| StoreError::Decode {
        what: "row",
        detail: format!("{} column {}: {detail}", table.name, column + 1),
    };
    Ok(match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(n) => Value::Int(n),
        ValueRef::Real(x) => return Err(bad(format!("a real number ({x}) where none belongs"))),
        ValueRef::Text(text) => Value::Text(
            String::from_utf8(text.to_vec()).map_err(|e| bad(format!("text not UTF-8: {e}")))?,
        ),
        ValueRef::Blob(bytes) => Value::Bytes(bytes.to_vec()),
    })
}

#[cfg(test)]
mod tests {
    use std::{fs, path::Path};

    use crate::store::{
        sqlite::{DB_FILE, MARKER_FILE},
        SqliteStore, Sync,
    };

    #[test]
    fn a_database_whose_holds_are_not_kept_yet_is_refused() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schema4");
        let dir = tempfile::tempdir().expect("tempdir");
        for file in [DB_FILE, MARKER_FILE] {
            fs::copy(fixture.join(file), dir.path().join(file)).expect("copy the fixture");
        }
        let store = SqliteStore::open(dir.path(), Sync::Full).expect("upgrade");
        let err = store.export().expect_err("holds not kept");
        assert!(
            err.to_string()
                .contains("start a lead on the state dir once"),
            "{err}"
        );
    }

    #[test]
    fn every_row_is_read_as_stored() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SqliteStore::open(dir.path(), Sync::Full).expect("create");
        store
            .conn
            .execute_batch(
                "INSERT INTO audit (seq, entry) VALUES (2, '{\"b\": 2}'), (1, '{\"a\":1}');
                 INSERT INTO bodies (id, body) VALUES (7, x'00ff');",
            )
            .expect("rows");
        let tables = store.export().expect("export");
        let audit = tables.last().expect("audit last");
        use crate::store::copy::Value::{Bytes, Int, Text};
        assert_eq!(
            audit,
            &vec![
                vec![Int(1), Text("{\"a\":1}".into())],
                vec![Int(2), Text("{\"b\": 2}".into())]
            ]
        );
        assert_eq!(tables[1], vec![vec![Int(7), Bytes(vec![0, 0xff])]]);
    }
}
