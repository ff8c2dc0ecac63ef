//! The tables every node shares, created and migrated on start.
//!
//! Every Recliner database lives in the same tables, keyed by `db_id`; the
//! `recliner_dbs` row of a database holds its counters and is the lock its
//! writers take, so a database's writes are serialized across nodes and its
//! sequences strictly increase. Ids are `COLLATE "C"`: ordered by bytes, as
//! the SQLite backend orders them. Every string is stored escaped (see
//! `crate::text`: `text` refuses U+0000), by an escape that keeps that order.

use crate::conn::{PgConn, Pool};
use store::StoreError;

/// Migrations in order; the version is how many have been applied.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE recliner_server (
    key   text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE recliner_dbs (
    db_id         bigserial PRIMARY KEY,
    name          text COLLATE "C" NOT NULL UNIQUE,
    update_seq    bigint NOT NULL DEFAULT 0,
    purge_seq     bigint NOT NULL DEFAULT 0,
    doc_count     bigint NOT NULL DEFAULT 0,
    doc_del_count bigint NOT NULL DEFAULT 0,
    external_size bigint NOT NULL DEFAULT 0,
    next_doc_key  bigint NOT NULL DEFAULT 1
);

CREATE TABLE recliner_meta (
    db_id bigint NOT NULL REFERENCES recliner_dbs ON DELETE CASCADE,
    key   text NOT NULL,
    value text NOT NULL,
    PRIMARY KEY (db_id, key)
);

CREATE TABLE recliner_docs (
    db_id      bigint NOT NULL REFERENCES recliner_dbs ON DELETE CASCADE,
    doc_key    bigint NOT NULL,
    id         text COLLATE "C" NOT NULL,
    seq        bigint NOT NULL,
    winner     text NOT NULL,
    deleted    boolean NOT NULL,
    winner_row bigint NOT NULL,
    tree       bytea NOT NULL,
    PRIMARY KEY (db_id, doc_key)
);
CREATE UNIQUE INDEX recliner_docs_by_id ON recliner_docs (db_id, id);
CREATE UNIQUE INDEX recliner_docs_by_seq ON recliner_docs (db_id, seq);

CREATE TABLE recliner_revs (
    row      bigserial PRIMARY KEY,
    db_id    bigint NOT NULL REFERENCES recliner_dbs ON DELETE CASCADE,
    doc_key  bigint NOT NULL,
    rev      text NOT NULL,
    body     bytea NOT NULL,
    snappy   boolean NOT NULL,
    body_len bigint NOT NULL,
    atts     text,
    UNIQUE (db_id, doc_key, rev)
);

CREATE TABLE recliner_local (
    db_id bigint NOT NULL REFERENCES recliner_dbs ON DELETE CASCADE,
    id    text COLLATE "C" NOT NULL,
    rev   bigint NOT NULL,
    body  text NOT NULL,
    PRIMARY KEY (db_id, id)
);

CREATE TABLE recliner_blobs (
    db_id   bigint NOT NULL REFERENCES recliner_dbs ON DELETE CASCADE,
    digest  text NOT NULL,
    blob_id bigint NOT NULL,
    length  bigint NOT NULL,
    PRIMARY KEY (db_id, digest)
);

CREATE TABLE recliner_chunks (
    db_id   bigint NOT NULL REFERENCES recliner_dbs ON DELETE CASCADE,
    blob_id bigint NOT NULL,
    idx     bigint NOT NULL,
    data    bytea NOT NULL,
    PRIMARY KEY (db_id, blob_id, idx)
);

CREATE TABLE recliner_purges (
    db_id     bigint NOT NULL REFERENCES recliner_dbs ON DELETE CASCADE,
    purge_seq bigint NOT NULL,
    uuid      text NOT NULL,
    doc_id    text NOT NULL,
    revs      text NOT NULL,
    PRIMARY KEY (db_id, purge_seq)
);
"#,
    r#"
CREATE TABLE recliner_leases (
    key     text PRIMARY KEY,
    holder  text NOT NULL,
    expires timestamptz NOT NULL
);

CREATE TABLE recliner_node_state (
    node    text NOT NULL,
    key     text NOT NULL,
    value   text NOT NULL,
    updated timestamptz NOT NULL,
    PRIMARY KEY (node, key)
);
"#,
    // The access index of databases with per-document access (see
    // `store::doc_access`).
    r#"
CREATE TABLE recliner_access (
    db_id     bigint NOT NULL REFERENCES recliner_dbs ON DELETE CASCADE,
    principal text COLLATE "C" NOT NULL,
    doc_key   bigint NOT NULL,
    seq       bigint NOT NULL,
    gone      text,
    PRIMARY KEY (db_id, principal, doc_key)
);
CREATE INDEX recliner_access_by_seq ON recliner_access (db_id, principal, seq);
CREATE INDEX recliner_access_by_doc ON recliner_access (db_id, doc_key);
"#,
    // Strings are stored escaped from here on (`crate::text`): U+0000 as
    // U+0001 U+0001, U+0001 as U+0001 U+0002. A string without either is
    // its own escape, so this only rewrites the rare stored strings that
    // hold U+0001 (written raw before). Longest first: a string's escape is
    // longer than it, so it can only equal a longer string not rewritten
    // yet, and unique keys never clash on the way. The coordination rows
    // that get written again on their own are dropped instead.
    r#"
DO $$
DECLARE
    target record;
    found record;
BEGIN
    FOR target IN SELECT * FROM (VALUES
        ('recliner_docs', 'id'), ('recliner_docs', 'winner'),
        ('recliner_revs', 'rev'), ('recliner_local', 'id'),
        ('recliner_purges', 'doc_id'), ('recliner_access', 'principal'),
        ('recliner_server', 'key'), ('recliner_server', 'value')) AS t(tab, col)
    LOOP
        FOR found IN EXECUTE format(
            'SELECT ctid FROM %I WHERE strpos(%I, chr(1)) > 0 ORDER BY octet_length(%I) DESC',
            target.tab, target.col, target.col)
        LOOP
            EXECUTE format(
                'UPDATE %I SET %I = replace(%I, chr(1), chr(1) || chr(2)) WHERE ctid = $1',
                target.tab, target.col, target.col)
            USING found.ctid;
        END LOOP;
    END LOOP;
END
$$;
DELETE FROM recliner_leases WHERE strpos(key || holder, chr(1)) > 0;
DELETE FROM recliner_node_state WHERE strpos(node || key || value, chr(1)) > 0;
"#,
    // Change counters nodes without `NOTIFY` poll (`crate::listener`):
    // moved by every commit that changes a design document or `_security`.
    r#"
ALTER TABLE recliner_dbs
    ADD COLUMN IF NOT EXISTS design_gen bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS security_gen bigint NOT NULL DEFAULT 0;
"#,
    // The tables written once per document keep no foreign key: checking
    // it cost a trigger per row, a quarter of a bulk write's time. Their
    // rows cannot outlive their database: every write first locks the
    // database's row (gone, the write fails), and deleting a database
    // deletes them in the same transaction (`PostgresStore::delete_db`).
    r#"
ALTER TABLE recliner_docs DROP CONSTRAINT IF EXISTS recliner_docs_db_id_fkey;
ALTER TABLE recliner_revs DROP CONSTRAINT IF EXISTS recliner_revs_db_id_fkey;
ALTER TABLE recliner_access DROP CONSTRAINT IF EXISTS recliner_access_db_id_fkey;
"#,
];

/// A number no other program's advisory lock is likely to use: held while
/// a node migrates, so nodes starting together migrate once.
const MIGRATION_LOCK: i64 = 0x7265_636c_696e_6572; // "recliner"

/// The table whose one row is locked instead, where advisory locks are off.
const LOCK_TABLE: &str =
    "CREATE TABLE IF NOT EXISTS recliner_migration_lock (id integer PRIMARY KEY);
INSERT INTO recliner_migration_lock (id) VALUES (1) ON CONFLICT DO NOTHING";

/// How many times creating the lock table is tried: two nodes creating it
/// at once may both pass `IF NOT EXISTS`, and one then fails.
const LOCK_TABLE_TRIES: u32 = 5;

/// Brings the tables up to date, one node at a time: under an advisory
/// lock, or (`advisory_locks` off) under a row lock in a table of its own.
pub(crate) fn migrate(pool: &Pool, advisory_locks: bool) -> Result<(), StoreError> {
    let mut conn = pool.get()?;
    if !advisory_locks {
        create_lock_table(&mut conn)?;
    }
    conn.batch("BEGIN")?;
    let result = (|| {
        if advisory_locks {
            conn.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
        } else {
            conn.query_one(
                "SELECT id FROM recliner_migration_lock WHERE id = 1 FOR UPDATE",
                &[],
            )?;
        }
        apply_missing(&mut conn)
    })();
    match result {
        Ok(()) => conn.batch("COMMIT"),
        Err(e) => {
            if conn.batch("ROLLBACK").is_err() {
                conn.broken = true;
            }
            Err(e)
        }
    }
}

fn create_lock_table(conn: &mut PgConn) -> Result<(), StoreError> {
    let mut tries = 0;
    loop {
        tries += 1;
        match conn.batch(LOCK_TABLE) {
            Ok(()) => return Ok(()),
            Err(e) if tries < LOCK_TABLE_TRIES => {
                tracing::debug!(error = %e, "creating the migration lock table again");
                std::thread::sleep(std::time::Duration::from_millis(50 * u64::from(tries)));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Applies the migrations the tables lack (the caller holds the lock).
fn apply_missing(conn: &mut PgConn) -> Result<(), StoreError> {
    conn.batch("CREATE TABLE IF NOT EXISTS recliner_schema (version integer NOT NULL)")?;
    let version: i32 = match conn.query_opt("SELECT version FROM recliner_schema", &[])? {
        Some(row) => row.get(0)?,
        None => {
            conn.execute("INSERT INTO recliner_schema (version) VALUES (0)", &[])?;
            0
        }
    };
    let applied = usize::try_from(version).unwrap_or(0);
    for migration in MIGRATIONS.iter().skip(applied) {
        conn.batch(migration)?;
    }
    if applied < MIGRATIONS.len() {
        let latest = MIGRATIONS.len() as i32;
        conn.execute("UPDATE recliner_schema SET version = $1", &[&latest])?;
        tracing::info!(version = latest, "PostgreSQL tables migrated");
    } else if applied > MIGRATIONS.len() {
        return Err(StoreError::Backend(
            format!(
                "the PostgreSQL tables are at version {version}, newer than this recliner knows ({}): upgrade recliner",
                MIGRATIONS.len()
            )
            .into(),
        ));
    }
    Ok(())
}
