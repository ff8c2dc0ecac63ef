//! Connections to PostgreSQL: each keeps its prepared statements, and a
//! small pool lends them to writer sessions and readers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use postgres::types::ToSql;
use postgres::{Client, NoTls, Row, Statement};
use store::StoreError;

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

pub(crate) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

impl PgConn {
    fn statement(&mut self, sql: &str) -> Result<Statement, StoreError> {
        if let Some(stmt) = self.statements.get(sql) {
            return Ok(stmt.clone());
        }
        let stmt = self.client.prepare(sql).map_err(pg)?;
        self.statements.insert(sql.to_string(), stmt.clone());
        Ok(stmt)
    }

    pub(crate) fn query(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, StoreError> {
        let stmt = self.statement(sql)?;
        self.client.query(&stmt, params).map_err(pg)
    }

    pub(crate) fn query_opt(
        &mut self,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Option<Row>, StoreError> {
        let stmt = self.statement(sql)?;
        self.client.query_opt(&stmt, params).map_err(pg)
    }

    pub(crate) fn query_one(&mut self, sql: &str, params: Params<'_>) -> Result<Row, StoreError> {
        let stmt = self.statement(sql)?;
        self.client.query_one(&stmt, params).map_err(pg)
    }

    pub(crate) fn execute(&mut self, sql: &str, params: Params<'_>) -> Result<u64, StoreError> {
        let stmt = self.statement(sql)?;
        self.client.execute(&stmt, params).map_err(pg)
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
