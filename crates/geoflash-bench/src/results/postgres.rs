//! [`Sql`] on a PostgreSQL client or transaction (the `postgres` crate).
use geoflash::{Error, Result};
use postgres::types::{private::BytesMut, IsNull, ToSql, Type};
use postgres::GenericClient;

use super::sql::{Dialect, Sql, Value};
use crate::pg::message;

/// A PostgreSQL client or transaction.
pub struct PgSql<'a, C: GenericClient>(pub &'a mut C);

fn db_err(e: postgres::Error) -> Error {
    Error::results_store(message(&e))
}

type BoxError = Box<dyn std::error::Error + Sync + Send>;

impl ToSql for Value {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> std::result::Result<IsNull, BoxError> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(i) => match *ty {
                Type::INT8 => i.to_sql(ty, out),
                Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*i)?.to_sql(ty, out),
                Type::FLOAT8 => (*i as f64).to_sql(ty, out),
                _ => Err(format!("integer {i} for a column of type {ty}").into()),
            },
            Value::Real(f) => match *ty {
                Type::FLOAT8 => f.to_sql(ty, out),
                Type::FLOAT4 => (*f as f32).to_sql(ty, out),
                _ => Err(format!("number {f} for a column of type {ty}").into()),
            },
            Value::Text(s) => s.as_str().to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        matches!(
            *ty,
            Type::INT8
                | Type::INT4
                | Type::INT2
                | Type::FLOAT8
                | Type::FLOAT4
                | Type::TEXT
                | Type::VARCHAR
                | Type::BPCHAR
                | Type::NAME
                | Type::UNKNOWN
        )
    }

    postgres::types::to_sql_checked!();
}

fn get<'a, T: postgres::types::FromSql<'a>>(
    row: &'a postgres::Row,
    i: usize,
    f: impl FnOnce(T) -> Value,
) -> Result<Value> {
    Ok(row
        .try_get::<_, Option<T>>(i)
        .map_err(db_err)?
        .map(f)
        .unwrap_or(Value::Null))
}

fn value(row: &postgres::Row, i: usize) -> Result<Value> {
    let ty = row.columns().get(i).map(|c| c.type_().clone());
    match ty {
        Some(Type::INT8) => get::<i64>(row, i, Value::Int),
        Some(Type::INT4) => get::<i32>(row, i, |v| Value::Int(v.into())),
        Some(Type::INT2) => get::<i16>(row, i, |v| Value::Int(v.into())),
        Some(Type::FLOAT8) => get::<f64>(row, i, Value::Real),
        Some(Type::FLOAT4) => get::<f32>(row, i, |v| Value::Real(v.into())),
        Some(Type::BOOL) => get::<bool>(row, i, |v| Value::Int(v.into())),
        Some(Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME) => {
            get::<String>(row, i, Value::Text)
        }
        Some(other) => Err(Error::results_store(format!(
            "column {i} has type {other}: cast it to bigint, double precision or text"
        ))),
        None => Err(Error::results_store(format!("no column {i}"))),
    }
}

impl<C: GenericClient> Sql for PgSql<'_, C> {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64> {
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|v| v as _).collect();
        self.0
            .execute(Dialect::Postgres.statement(sql).as_str(), &refs)
            .map_err(db_err)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>> {
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|v| v as _).collect();
        let rows = self
            .0
            .query(Dialect::Postgres.statement(sql).as_str(), &refs)
            .map_err(db_err)?;
        rows.iter()
            .map(|r| (0..r.len()).map(|i| value(r, i)).collect())
            .collect()
    }

    fn batch(&mut self, sql: &str) -> Result<()> {
        self.0.batch_execute(sql).map_err(db_err)
    }
}
