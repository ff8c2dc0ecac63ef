//! Connections to PostgreSQL: each keeps its prepared statements, and a
//! small pool lends them to writer sessions and readers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use postgres::types::{FromSql, ToSql};
use postgres::{Client, NoTls, Row, Statement};
use store::StoreError;

use crate::text::{Text, unescape};

/// Connections kept for reuse; more are opened when all are lent out, and
/// closed on return past this many.
const MAX_POOLED: usize = 16;

/// A backend error from the client.
pub(crate) fn pg(e: postgres::Error) -> StoreError {
    StoreError::Backend(Box::new(e))
}

/// One connection and the statements prepared on it.
pub(crate) struct PgConn {
    client: Client,
    statements: HashMap<String, Statement>,
}

/// What a statement may bind: numbers, booleans, bytes, and strings only
/// as [`Text`] (escaped, see `crate::text`). `&str` and `String` are not
/// parameters, so no statement can send a string unescaped.
pub(crate) trait Param: ToSql + Sync {
    fn sql(&self) -> &(dyn ToSql + Sync);
}

macro_rules! params {
    ($($t:ty),* $(,)?) => {
        $(impl Param for $t {
            fn sql(&self) -> &(dyn ToSql + Sync) {
                self
            }
        })*
    };
}

params!(
    i32,
    i64,
    f64,
    bool,
    Vec<u8>,
    &[u8],
    Vec<i64>,
    Vec<bool>,
    Vec<Vec<u8>>,
    Vec<&[u8]>
);

impl<S: AsRef<str> + std::fmt::Debug + Sync> Param for Text<S> {
    fn sql(&self) -> &(dyn ToSql + Sync) {
        self
    }
}

impl<S: AsRef<str> + std::fmt::Debug + Sync> Param for Option<Text<S>> {
    fn sql(&self) -> &(dyn ToSql + Sync) {
        self
    }
}

impl<S: AsRef<str> + std::fmt::Debug + Sync> Param for Vec<Text<S>> {
    fn sql(&self) -> &(dyn ToSql + Sync) {
        self
    }
}

impl<S: AsRef<str> + std::fmt::Debug + Sync> Param for Vec<Option<Text<S>>> {
    fn sql(&self) -> &(dyn ToSql + Sync) {
        self
    }
}

pub(crate) type Params<'a> = &'a [&'a dyn Param];

fn to_sql<'a>(params: Params<'a>) -> Vec<&'a (dyn ToSql + Sync)> {
    params.iter().map(|p| p.sql()).collect()
}

/// What a column may be read as: numbers, booleans, bytes. Strings are read
/// with [`PgRow::text`] (unescaped, see `crate::text`).
pub(crate) trait Column<'r>: FromSql<'r> {}

impl Column<'_> for i64 {}
impl Column<'_> for Option<i64> {}
impl Column<'_> for i32 {}
impl Column<'_> for bool {}
impl Column<'_> for Vec<u8> {}
impl Column<'_> for Option<Vec<u8>> {}

/// A row of a statement's answer.
pub(crate) struct PgRow(Row);

impl PgRow {
    /// A column that is no string.
    pub(crate) fn get<'r, T: Column<'r>>(&'r self, index: usize) -> Result<T, StoreError> {
        self.0.try_get(index).map_err(pg)
    }

    /// A string column, unescaped.
    pub(crate) fn text(&self, index: usize) -> Result<String, StoreError> {
        let stored: &str = self.0.try_get(index).map_err(pg)?;
        Ok(unescape(stored).into_owned())
    }

    /// A string column that may be NULL, unescaped.
    pub(crate) fn opt_text(&self, index: usize) -> Result<Option<String>, StoreError> {
        let stored: Option<&str> = self.0.try_get(index).map_err(pg)?;
        Ok(stored.map(|s| unescape(s).into_owned()))
    }
}

impl PgConn {
    fn statement(&mut self, sql: &str) -> Result<Statement, StoreError> {
        if let Some(stmt) = self.statements.get(sql) {
            return Ok(stmt.clone());
        }
        let stmt = self.client.prepare(sql).map_err(pg)?;
        self.statements.insert(sql.to_string(), stmt.clone());
        Ok(stmt)
    }

    pub(crate) fn query(
        &mut self,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Vec<PgRow>, StoreError> {
        let stmt = self.statement(sql)?;
        let rows = self.client.query(&stmt, &to_sql(params)).map_err(pg)?;
        Ok(rows.into_iter().map(PgRow).collect())
    }

    pub(crate) fn query_opt(
        &mut self,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Option<PgRow>, StoreError> {
        let stmt = self.statement(sql)?;
        let row = self.client.query_opt(&stmt, &to_sql(params)).map_err(pg)?;
        Ok(row.map(PgRow))
    }

    pub(crate) fn query_one(&mut self, sql: &str, params: Params<'_>) -> Result<PgRow, StoreError> {
        let stmt = self.statement(sql)?;
        let row = self.client.query_one(&stmt, &to_sql(params)).map_err(pg)?;
        Ok(PgRow(row))
    }

    pub(crate) fn execute(&mut self, sql: &str, params: Params<'_>) -> Result<u64, StoreError> {
        let stmt = self.statement(sql)?;
        self.client.execute(&stmt, &to_sql(params)).map_err(pg)
    }

    /// Statements without parameters or results (`BEGIN`, `SAVEPOINT`, ...).
    pub(crate) fn batch(&mut self, sql: &str) -> Result<(), StoreError> {
        self.client.batch_execute(sql).map_err(pg)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.client.is_closed()
    }
}

/// Connections to one PostgreSQL database, lent out and given back.
#[derive(Clone)]
pub(crate) struct Pool {
    inner: Arc<PoolInner>,
}

struct PoolInner {
    config: postgres::Config,
    idle: Mutex<Vec<PgConn>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").finish_non_exhaustive()
    }
}

impl Pool {
    pub(crate) fn new(config: postgres::Config) -> Pool {
        Pool {
            inner: Arc::new(PoolInner {
                config,
                idle: Mutex::new(Vec::new()),
            }),
        }
    }

    /// A new connection of its own (the listener keeps one).
    pub(crate) fn connect(&self) -> Result<Client, StoreError> {
        self.inner.config.connect(NoTls).map_err(pg)
    }

    /// A connection, pooled or new; it goes back to the pool when dropped.
    pub(crate) fn get(&self) -> Result<Lent, StoreError> {
        let pooled = self
            .inner
            .idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop();
        let conn = match pooled {
            Some(conn) if !conn.is_closed() => conn,
            _ => PgConn {
                client: self.connect()?,
                statements: HashMap::new(),
            },
        };
        Ok(Lent {
            conn: Some(conn),
            pool: self.clone(),
            broken: false,
        })
    }
}

/// A connection lent by the pool.
pub(crate) struct Lent {
    conn: Option<PgConn>,
    pool: Pool,
    /// Left in an unknown state (a transaction not ended): not pooled again.
    pub(crate) broken: bool,
}

impl std::ops::Deref for Lent {
    type Target = PgConn;
    fn deref(&self) -> &PgConn {
        self.conn
            .as_ref()
            .expect("a lent connection is present until dropped")
    }
}

impl std::ops::DerefMut for Lent {
    fn deref_mut(&mut self) -> &mut PgConn {
        self.conn
            .as_mut()
            .expect("a lent connection is present until dropped")
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        if self.broken || conn.is_closed() {
            return;
        }
        let mut idle = self
            .pool
            .inner
            .idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if idle.len() < MAX_POOLED {
            idle.push(conn);
        }
    }
}
