//! [`Sql`] on an SQLite connection (`rusqlite`).
use geoflash::{Error, Result};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::Connection;

use super::sql::{Dialect, Sql, Value};

/// An SQLite connection, or a transaction through the connection it borrows.
pub struct SqliteSql<'a>(pub &'a Connection);

fn db_err(e: rusqlite::Error) -> Error {
    Error::results_store(e.to_string())
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Int(i) => ValueRef::Integer(*i),
            Value::Real(f) => ValueRef::Real(*f),
            Value::Text(s) => ValueRef::Text(s.as_bytes()),
        }))
    }
}

fn value(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Int(i),
        ValueRef::Real(f) => Value::Real(f),
        ValueRef::Text(t) | ValueRef::Blob(t) => Value::Text(String::from_utf8_lossy(t).into()),
    }
}

impl Sql for SqliteSql<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64> {
        let n = self
            .0
            .execute(sql, rusqlite::params_from_iter(params.iter()))
            .map_err(db_err)?;
        Ok(n as u64)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>> {
        let mut st = self.0.prepare(sql).map_err(db_err)?;
        let n = st.column_count();
        let mut rows = st
            .query(rusqlite::params_from_iter(params.iter()))
            .map_err(db_err)?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(db_err)? {
            let mut row = Vec::with_capacity(n);
            for i in 0..n {
                row.push(value(r.get_ref(i).map_err(db_err)?));
            }
            out.push(row);
        }
        Ok(out)
    }

    fn batch(&mut self, sql: &str) -> Result<()> {
        self.0.execute_batch(sql).map_err(db_err)
    }
}
