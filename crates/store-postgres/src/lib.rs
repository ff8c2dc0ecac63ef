//! Recliner's PostgreSQL backend: every database of a server in one
//! PostgreSQL database, so that any number of `recliner` nodes can serve
//! the same databases (`recliner --store postgres://...`).
//!
//! It implements the store's backend traits (`store::backend`): the rules
//! of CouchDB stay in the store, this crate keeps rows. What it adds for
//! many nodes:
//!
//! - every write group locks its database's row first (`db`), so writes of
//!   one database are serialized across nodes;
//! - each commit is announced with `NOTIFY`, and one listening connection
//!   per node wakes that node's changes feeds and drops its caches
//!   (`listener`); on engines without `NOTIFY` each node polls the
//!   databases' change counters instead ([`PostgresOptions::notify`]);
//! - the tables are created and migrated on start, once however many nodes
//!   start together (`schema`), under an advisory lock or, on engines
//!   without them, a row lock ([`PostgresOptions::advisory_locks`]).
//!
//! View and Mango indexes are derived data: each node keeps its own in its
//! data folder and builds them from the changes feed.

mod conn;
mod coordination;
mod db;
mod listener;
mod rows;
mod schema;
mod text;

use std::path::PathBuf;
use std::time::Duration;

use store::StoreError;
use store::backend::{DbBackend, NewDb, StoreBackend, new_db_meta};

use crate::conn::{Pool, pg};
use crate::db::PgDb;
use crate::listener::Listener;
use crate::text::Text;

/// Which PostgreSQL features the nodes coordinate with. PostgreSQL has
/// them all; some PostgreSQL-compatible engines (distributed ones, poolers
/// in transaction mode) lack `LISTEN`/`NOTIFY` or advisory locks, and work
/// with them switched off, at the cost of a bounded delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostgresOptions {
    /// Commits are announced with `NOTIFY` and heard with `LISTEN`, so
    /// other nodes' feeds wake within milliseconds. Off: neither is sent,
    /// and each node reads the open databases' change counters every
    /// `poll_interval` instead.
    pub notify: bool,
    /// Nodes starting together migrate the tables one at a time under an
    /// advisory lock. Off: under a row lock (`SELECT ... FOR UPDATE`) in a
    /// table of its own.
    pub advisory_locks: bool,
    /// With `notify` off, the longest a node takes to see another node's
    /// commit, `_security` or design change.
    pub poll_interval: Duration,
}

impl Default for PostgresOptions {
    fn default() -> PostgresOptions {
        PostgresOptions {
            notify: true,
            advisory_locks: true,
            poll_interval: Duration::from_millis(250),
        }
    }
}

/// Every database of a server in one PostgreSQL database.
#[derive(Debug)]
pub struct PostgresStore {
    pool: Pool,
    server_uuid: String,
    /// This node's folder for the indexes of the databases it serves.
    index_root: PathBuf,
    listener: Listener,
}

impl PostgresStore {
    /// A store over these databases, coordinating with the other nodes
    /// through the same PostgreSQL database; `data_dir` holds this node's
    /// own files.
    pub fn into_store(self, data_dir: PathBuf, options: store::StoreOptions) -> store::Store {
        let backend = std::sync::Arc::new(self);
        store::Store::with_backend(data_dir, backend.clone(), backend, options)
    }

    /// Connects to `url` (`postgres://user:password@host:port/dbname`),
    /// creates or migrates the tables, and starts following other nodes'
    /// commits. `data_dir` holds this node's own files.
    pub fn connect(
        url: &str,
        data_dir: PathBuf,
        options: PostgresOptions,
    ) -> Result<PostgresStore, StoreError> {
        let config: postgres::Config = url.parse().map_err(pg)?;
        off_async(move || PostgresStore::start(config, data_dir, options))
    }

    /// [`PostgresStore::connect`] with the tables in `schema` (created if
    /// missing): several servers, each with databases of its own, in one
    /// PostgreSQL database.
    pub fn connect_in_schema(
        url: &str,
        schema: &str,
        data_dir: PathBuf,
        options: PostgresOptions,
    ) -> Result<PostgresStore, StoreError> {
        create_schema(url, schema)?;
        let mut config: postgres::Config = url.parse().map_err(pg)?;
        config.options(&format!("-c search_path={}", quote_ident(schema)));
        off_async(move || PostgresStore::start(config, data_dir, options))
    }

    fn start(
        config: postgres::Config,
        data_dir: PathBuf,
        options: PostgresOptions,
    ) -> Result<PostgresStore, StoreError> {
        let pool = Pool::new(config);
        schema::migrate(&pool, options.advisory_locks)?;
        let server_uuid: String = {
            let mut conn = pool.get()?;
            let fresh = uuid::Uuid::new_v4().simple().to_string();
            conn.execute(
                "INSERT INTO recliner_server (key, value) VALUES ('uuid', $1) ON CONFLICT DO NOTHING",
                &[&Text(&fresh)],
            )?;
            conn.query_one("SELECT value FROM recliner_server WHERE key = 'uuid'", &[])?
                .text(0)?
        };
        let listener = if options.notify {
            Listener::start(pool.clone(), &server_uuid)?
        } else {
            Listener::start_polling(pool.clone(), options.poll_interval)?
        };
        Ok(PostgresStore {
            pool,
            server_uuid,
            index_root: data_dir.join("indexes"),
            listener,
        })
    }

    fn db_id(&self, name: &str) -> Result<Option<i64>, StoreError> {
        self.pool
            .get()?
            .query_opt(
                "SELECT db_id FROM recliner_dbs WHERE name = $1",
                &[&Text(name)],
            )?
            .map(|row| row.get(0))
            .transpose()
    }

    fn open(&self, name: &str, db_id: i64, uuid: &str) -> Box<dyn DbBackend> {
        Box::new(PgDb {
            name: name.to_string(),
            db_id,
            pool: self.pool.clone(),
            // By uuid: a database deleted and created again under the same
            // name never finds the old one's indexes.
            index_dir: self.index_root.join(uuid),
            listener: self.listener.clone(),
            listening: Default::default(),
        })
    }
}

/// The tables whose rows a deleted database leaves unless deleted with it:
/// they keep no foreign key to cascade from (see `schema`).
const UNCASCADED: [&str; 3] = ["recliner_revs", "recliner_docs", "recliner_access"];

/// Drops a schema [`PostgresStore::connect_in_schema`] made, and everything in it.
pub fn drop_schema(url: &str, schema: &str) -> Result<(), StoreError> {
    on_schema(url, "DROP SCHEMA IF EXISTS {} CASCADE", schema)
}

/// Runs `statement` (its `{}` the quoted schema name) on a connection of its own.
fn on_schema(url: &str, statement: &str, schema: &str) -> Result<(), StoreError> {
    let config: postgres::Config = url.parse().map_err(pg)?;
    let sql = statement.replace("{}", &quote_ident(schema));
    off_async(move || {
        let mut admin = config.connect(postgres::NoTls).map_err(pg)?;
        admin.batch_execute(&sql).map_err(pg)
    })
}

/// Runs `work` on a thread of its own: the client blocks on a runtime of
/// its own, which cannot run inside the caller's (an async server's).
fn off_async<T: Send>(
    work: impl FnOnce() -> Result<T, StoreError> + Send,
) -> Result<T, StoreError> {
    std::thread::scope(|scope| {
        scope.spawn(work).join().unwrap_or_else(|_| {
            Err(StoreError::CommitFailed(
                "connecting to PostgreSQL panicked".into(),
            ))
        })
    })
}

/// An SQL identifier, quoted.
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl StoreBackend for PostgresStore {
    fn server_uuid(&self) -> &str {
        &self.server_uuid
    }

    fn create_db(&self, name: &str, setup: &NewDb<'_>) -> Result<Box<dyn DbBackend>, StoreError> {
        let mut conn = self.pool.get()?;
        conn.batch("BEGIN")?;
        let created = (|| {
            let Some(row) = conn.query_opt(
                "INSERT INTO recliner_dbs (name) VALUES ($1) ON CONFLICT (name) DO NOTHING RETURNING db_id",
                &[&Text(name)],
            )?
            else {
                return Err(StoreError::DbExists(name.to_string()));
            };
            let db_id: i64 = row.get(0)?;
            let meta = new_db_meta(setup);
            for (key, value) in &meta {
                conn.execute(
                    "INSERT INTO recliner_meta (db_id, key, value) VALUES ($1, $2, $3)",
                    &[&db_id, &Text(key), &Text(value)],
                )?;
            }
            let uuid = meta
                .iter()
                .find(|(key, _)| *key == "uuid")
                .map(|(_, value)| value.clone())
                .unwrap_or_default();
            Ok((db_id, uuid))
        })();
        match created {
            Ok((db_id, uuid)) => {
                conn.batch("COMMIT")?;
                Ok(self.open(name, db_id, &uuid))
            }
            Err(e) => {
                if conn.batch("ROLLBACK").is_err() {
                    conn.broken = true;
                }
                Err(e)
            }
        }
    }

    fn open_db(&self, name: &str) -> Result<Box<dyn DbBackend>, StoreError> {
        let row = self.pool.get()?.query_opt(
            "SELECT d.db_id, m.value FROM recliner_dbs d
             LEFT JOIN recliner_meta m ON m.db_id = d.db_id AND m.key = 'uuid'
             WHERE d.name = $1",
            &[&Text(name)],
        )?;
        let Some(row) = row else {
            return Err(StoreError::DbNotFound(name.to_string()));
        };
        let db_id: i64 = row.get(0)?;
        let uuid: Option<String> = row.opt_text(1)?;
        Ok(self.open(name, db_id, uuid.as_deref().unwrap_or_default()))
    }

    fn exists(&self, name: &str) -> Result<bool, StoreError> {
        Ok(self.db_id(name)?.is_some())
    }

    fn delete_db(&self, name: &str) -> Result<(), StoreError> {
        let mut conn = self.pool.get()?;
        conn.batch("BEGIN")?;
        let deleted = (|| {
            // The database's row first: its writers hold it locked, so this
            // waits for them, and no write of it starts after.
            let Some(row) = conn.query_opt(
                "DELETE FROM recliner_dbs d USING recliner_meta m
                 WHERE d.name = $1 AND m.db_id = d.db_id AND m.key = 'uuid'
                 RETURNING d.db_id, m.value",
                &[&Text(name)],
            )?
            else {
                return Err(StoreError::DbNotFound(name.to_string()));
            };
            let db_id: i64 = row.get(0)?;
            // The tables without a foreign key to cascade from (migration 6).
            for table in UNCASCADED {
                conn.execute(&format!("DELETE FROM {table} WHERE db_id = $1"), &[&db_id])?;
            }
            row.text(1)
        })();
        let uuid = match deleted {
            Ok(uuid) => {
                conn.batch("COMMIT")?;
                uuid
            }
            Err(e) => {
                if conn.batch("ROLLBACK").is_err() {
                    conn.broken = true;
                }
                return Err(e);
            }
        };
        match std::fs::remove_dir_all(self.index_root.join(uuid)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(db = %name, error = %e, "a deleted database's indexes stay on disk")
            }
        }
        Ok(())
    }

    fn list_dbs(&self) -> Result<Vec<String>, StoreError> {
        self.pool
            .get()?
            .query("SELECT name FROM recliner_dbs ORDER BY name", &[])?
            .iter()
            .map(|row| row.text(0))
            .collect()
    }

    fn check_read(&self) -> Result<(), StoreError> {
        let row = self
            .pool
            .get()?
            .query_opt("SELECT value FROM recliner_server WHERE key = 'uuid'", &[])?;
        let uuid: Option<String> = row.map(|row| row.text(0)).transpose()?;
        if uuid.as_deref() != Some(self.server_uuid.as_str()) {
            return Err(StoreError::Corrupt {
                db: String::new(),
                detail: "the server uuid in PostgreSQL changed".into(),
            });
        }
        Ok(())
    }

    fn check_write(&self) -> Result<(), StoreError> {
        // A write that changes nothing, committed: PostgreSQL takes writes.
        let mut conn = self.pool.get()?;
        conn.execute(
            "UPDATE recliner_server SET value = value WHERE key = 'uuid'",
            &[],
        )?;
        Ok(())
    }

    fn db_size(&self, name: &str) -> u64 {
        let size = (|| -> Result<i64, StoreError> {
            let row = self.pool.get()?.query_one(
                "SELECT COALESCE((SELECT external_size FROM recliner_dbs WHERE name = $1), 0)
                 + COALESCE((SELECT sum(b.length) FROM recliner_blobs b JOIN recliner_dbs d
                             ON d.db_id = b.db_id WHERE d.name = $1), 0)::bigint",
                &[&Text(name)],
            )?;
            row.get(0)
        })();
        size.map_or(0, |n| n.max(0) as u64)
    }
}

/// Creates `schema` if missing: a place of its own for one server's tables
/// (name it in the URL: `?options=-csearch_path%3D<schema>`).
pub fn create_schema(url: &str, schema: &str) -> Result<(), StoreError> {
    on_schema(url, "CREATE SCHEMA IF NOT EXISTS {}", schema)
}
