//! The SQLite schema of one database file, and the connection settings.
//!
//! Durability: WAL mode. By default (`full`, `synchronous = FULL`) every
//! group commit fsyncs the WAL before any of its writes is acknowledged, as
//! CouchDB 3 fsyncs before it answers: acknowledged writes survive a power
//! loss. `normal` (`synchronous = NORMAL`) is an opt-in: a commit is in the
//! WAL file (handed to the OS) when it returns, so acknowledged writes still
//! survive a crash or `kill -9` of the process, but a power loss or OS crash
//! can lose the last commits (`ensure_full_commit` syncs them).

use rusqlite::Connection;
use store::Durability;

/// Bumped whenever the schema changes; `migrate` brings older files forward
/// (every table is created `IF NOT EXISTS`, so an older file gains the
/// tables it lacks). 2 added `purge_infos`, 3 `doc_access`, 4 `id_blocks`
/// (counted by triggers), 5 counts them at commit instead, 6 adds their
/// groups, 7 `seq_buckets`.
pub const SCHEMA_VERSION: i64 = 7;

const CREATE: &str = "
CREATE TABLE IF NOT EXISTS db_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS db_state (
    id            INTEGER PRIMARY KEY CHECK (id = 0),
    update_seq    INTEGER NOT NULL,
    purge_seq     INTEGER NOT NULL,
    doc_count     INTEGER NOT NULL,
    doc_del_count INTEGER NOT NULL,
    external_size INTEGER NOT NULL
);

-- One row per document: its revision tree and the winner, at the sequence
-- of its latest update (so each document appears once in the changes feed).
CREATE TABLE IF NOT EXISTS docs (
    doc_key    INTEGER PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    seq        INTEGER NOT NULL,
    winner     TEXT NOT NULL,
    deleted    INTEGER NOT NULL,
    winner_row INTEGER NOT NULL,
    tree       BLOB NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS docs_by_seq ON docs (seq);

-- One row per stored revision body (leaves, and older revisions until
-- compaction); attachments metadata as a JSON object, NULL when none.
CREATE TABLE IF NOT EXISTS revs (
    row     INTEGER PRIMARY KEY,
    doc_key INTEGER NOT NULL,
    rev     TEXT NOT NULL,
    body    TEXT NOT NULL,
    atts    TEXT,
    UNIQUE (doc_key, rev)
);

CREATE TABLE IF NOT EXISTS local_docs (
    id   TEXT PRIMARY KEY,
    rev  INTEGER NOT NULL,
    body TEXT NOT NULL
) WITHOUT ROWID;

-- Attachment bytes, stored once per digest and shared by every revision and
-- document that has them, in chunks so no attachment sits whole in memory.
CREATE TABLE IF NOT EXISTS att_blobs (
    digest  TEXT PRIMARY KEY,
    blob_id INTEGER NOT NULL,
    length  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS att_chunks (
    blob_id INTEGER NOT NULL,
    idx     INTEGER NOT NULL,
    data    BLOB NOT NULL,
    PRIMARY KEY (blob_id, idx)
);

-- One row per document of each `_purge` request, at its purge sequence:
-- CouchDB's purge infos, kept up to `purged_infos_limit`. `revs` is the
-- JSON array of the revisions as requested.
CREATE TABLE IF NOT EXISTS purge_infos (
    purge_seq INTEGER PRIMARY KEY,
    uuid      TEXT NOT NULL,
    doc_id    TEXT NOT NULL,
    revs      TEXT NOT NULL
);

-- The access index of a database with per-document access: one row per
-- user name or role a document's winner names (`gone` NULL), at the
-- document's sequence, or that lost it (`gone`: the leaves it may hold,
-- as a JSON array), at the sequence it was lost. Empty in other databases.
CREATE TABLE IF NOT EXISTS doc_access (
    principal TEXT NOT NULL,
    doc_key   INTEGER NOT NULL,
    seq       INTEGER NOT NULL,
    gone      TEXT,
    PRIMARY KEY (principal, doc_key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS doc_access_by_seq ON doc_access (principal, seq);
CREATE INDEX IF NOT EXISTS doc_access_by_doc ON doc_access (doc_key);
";

/// Applies the per-connection settings every connection needs.
pub fn configure(conn: &Connection, durability: Durability) -> rusqlite::Result<()> {
    conn.pragma_update(None, "journal_mode", "WAL")?;
    let sync = match durability {
        Durability::Normal => "NORMAL",
        Durability::Full => "FULL",
    };
    conn.pragma_update(None, "synchronous", sync)?;
    conn.pragma_update(None, "foreign_keys", "OFF")?;
    // Readers and the writer never block each other in WAL mode; this only
    // covers the short exclusive moments of checkpoints and schema setup.
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    conn.set_prepared_statement_cache_capacity(64);
    // The writer's WAL is checkpointed by the database's checkpointer
    // thread (see `checkpoint`), which replaces SQLite's automatic one.
    // Under a long stream of writes the WAL can grow to that module's
    // backstop (128 MiB) before it starts over; it is then cut back to
    // 32 MiB on disk rather than keeping its largest size for good.
    conn.pragma_update(None, "journal_size_limit", 32 * 1024 * 1024)?;
    // An 8 MiB page cache per connection keeps hot index pages in memory.
    conn.pragma_update(None, "cache_size", -8192)?;
    // Savepoint sub-journals and sort spills stay in memory, not temp files.
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    // The write-ahead log and its index stay on disk when the last
    // connection closes (the log emptied): with more databases than
    // `max_dbs_open`, each close and reopen otherwise deleted and created
    // both files again, and creating files was most of a restart's work.
    conn.file_control(
        Some(rusqlite::MAIN_DB),
        rusqlite::FileControl::PersistWal(&mut 1),
    )?;
    Ok(())
}

/// Creates the schema in a new file, or checks an existing one.
pub fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if version == SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn.transaction()?;
    tx.execute_batch(CREATE)?;
    tx.execute_batch(crate::id_blocks::SCHEMA)?;
    if version < 5 {
        tx.execute_batch(crate::id_blocks::DROP_TRIGGERS)?;
    }
    if version < 6 {
        crate::id_blocks::fill(&tx)?;
    }
    tx.execute_batch(crate::seq_buckets::SCHEMA)?;
    if version < 7 {
        crate::seq_buckets::fill(&tx)?;
    }
    tx.execute(
        "INSERT OR IGNORE INTO db_state (id, update_seq, purge_seq, doc_count, doc_del_count, external_size)
         VALUES (0, 0, 0, 0, 0, 0)",
        [],
    )?;
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()
}
