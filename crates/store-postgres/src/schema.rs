//! The tables every node shares, created and migrated on start.
//!
//! Every Recliner database lives in the same tables, keyed by `db_id`; the
//! `recliner_dbs` row of a database holds its counters and is the lock its
//! writers take, so a database's writes are serialized across nodes and its
//! sequences strictly increase. Ids are `COLLATE "C"`: ordered by bytes, as
//! the SQLite backend orders them. Every string is stored escaped (see
//! `crate::text`: `text` refuses U+0000), by an escape that keeps that order.

use crate::conn::PgConn;
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
];

/// A number no other program's advisory lock is likely to use: held while
/// a node migrates, so nodes starting together migrate once.
const MIGRATION_LOCK: i64 = 0x7265_636c_696e_6572; // "recliner"

/// Brings the tables up to date.
pub(crate) fn migrate(conn: &mut PgConn) -> Result<(), StoreError> {
    conn.batch("BEGIN")?;
    let result = (|| {
        conn.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
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
    })();
    match result {
        Ok(()) => conn.batch("COMMIT"),
        Err(e) => {
            let _ = conn.batch("ROLLBACK");
            Err(e)
        }
    }
}
