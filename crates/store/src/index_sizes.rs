//! How much an index holds, kept counted as rows come and go, so a view's
//! `_info` reads its sizes without a scan: `active` counts the bytes of the
//! live rows as stored (sort key, document id, key and value), `external`
//! the bytes of their keys and values as JSON, what the map functions
//! emitted. Compaction leaves both as they are and gives back the rest of
//! the file.

use rusqlite::{Connection, OptionalExtension, Transaction, params};

use crate::StoreError;

/// A view index's sizes in bytes, as CouchDB's `_info` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexSizes {
    /// The file on disk, with its write-ahead log.
    pub file: u64,
    /// The live rows as stored; never more than `file`.
    pub active: u64,
    /// The live rows' keys and values as JSON.
    pub external: u64,
}

/// Bytes of some rows, or the change to them a write makes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RowBytes {
    pub stored: i64,
    pub external: i64,
}

impl RowBytes {
    /// One row's bytes: its sort key and document id are stored beside
    /// its key and value (`key_value`).
    pub(crate) fn of_row(sort_key: usize, doc_id: usize, key_value: usize) -> Self {
        let kv = key_value as i64;
        RowBytes {
            stored: (sort_key + doc_id) as i64 + kv,
            external: kv,
        }
    }

    pub(crate) fn add(&mut self, other: RowBytes) {
        self.stored += other.stored;
        self.external += other.external;
    }

    pub(crate) fn remove(&mut self, other: RowBytes) {
        self.stored -= other.stored;
        self.external -= other.external;
    }
}

/// The SQL of a stored row's key and value bytes (`length` of text counts
/// characters; of a blob, bytes).
pub(crate) const KEY_VALUE_BYTES: &str = "length(CAST(key AS BLOB)) + length(CAST(value AS BLOB))";

/// The counts kept in the index's meta table; counted once from the rows
/// of an index made before they were kept.
pub(crate) fn load(conn: &Connection) -> Result<RowBytes, StoreError> {
    let kept = |name: &str| -> Result<Option<i64>, StoreError> {
        let value: Option<String> = conn
            .query_row("SELECT value FROM meta WHERE name = ?1", [name], |r| {
                r.get(0)
            })
            .optional()?;
        Ok(value.and_then(|v| v.parse().ok()))
    };
    if let (Some(stored), Some(external)) = (kept("stored_bytes")?, kept("external_bytes")?) {
        return Ok(RowBytes { stored, external });
    }
    let (stored, external): (i64, i64) = conn.query_row(
        &format!(
            "SELECT COALESCE(SUM(length(sort_key) + length(CAST(doc_id AS BLOB)) + {KEY_VALUE_BYTES}), 0),
                    COALESCE(SUM({KEY_VALUE_BYTES}), 0) FROM rows"
        ),
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let counted = RowBytes { stored, external };
    let tx = conn.unchecked_transaction()?;
    save(&tx, counted)?;
    tx.commit()?;
    Ok(counted)
}

/// Records the counts, in the transaction that changed the rows.
pub(crate) fn save(tx: &Transaction<'_>, counts: RowBytes) -> Result<(), StoreError> {
    let mut set = tx.prepare_cached("INSERT OR REPLACE INTO meta (name, value) VALUES (?1, ?2)")?;
    set.execute(params!["stored_bytes", counts.stored.max(0).to_string()])?;
    set.execute(params![
        "external_bytes",
        counts.external.max(0).to_string()
    ])?;
    Ok(())
}
