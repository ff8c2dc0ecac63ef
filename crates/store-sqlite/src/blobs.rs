//! Attachment bytes in a SQLite file: chunks (`att_chunks`) under a blob
//! id, filed under their digest (`att_blobs`).

use rusqlite::{Connection, OptionalExtension, params};

use store::StoreError;
use store::backend::CHUNK_SIZE;

/// The blob holding bytes with this digest, if stored.
pub(super) fn blob_id(conn: &Connection, digest: &str) -> Result<Option<i64>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT blob_id FROM att_blobs WHERE digest = ?1")?
        .query_row([digest], |r| r.get(0))
        .optional()?)
}

/// Whether the blob store holds bytes with this digest.
pub(super) fn has_blob(conn: &Connection, digest: &str) -> Result<bool, StoreError> {
    Ok(blob_id(conn, digest)?.is_some())
}

/// Stores bytes held in memory (inline attachments); returns their digest.
pub(super) fn put_blob(conn: &Connection, data: &[u8]) -> Result<String, StoreError> {
    let digest = store::digest_of(data);
    if has_blob(conn, &digest)? {
        return Ok(digest);
    }
    let id = store::backend::new_blob_id();
    let mut insert =
        conn.prepare_cached("INSERT INTO att_chunks (blob_id, idx, data) VALUES (?1, ?2, ?3)")?;
    for (i, chunk) in data.chunks(CHUNK_SIZE).enumerate() {
        insert.execute(params![id, i as i64, chunk])?;
    }
    conn.prepare_cached("INSERT INTO att_blobs (digest, blob_id, length) VALUES (?1, ?2, ?3)")?
        .execute(params![digest, id, data.len() as i64])?;
    Ok(digest)
}

/// A stored blob's id and number of chunks, or `None` when the digest is unknown.
pub(super) fn blob_chunks(
    conn: &Connection,
    digest: &str,
) -> Result<Option<(i64, u64)>, StoreError> {
    let Some(id) = blob_id(conn, digest)? else {
        return Ok(None);
    };
    let count: i64 = conn
        .prepare_cached("SELECT COUNT(*) FROM att_chunks WHERE blob_id = ?1")?
        .query_row([id], |r| r.get(0))?;
    Ok(Some((id, count as u64)))
}

/// One chunk of a stored blob.
pub(super) fn read_chunk(conn: &Connection, id: i64, idx: u64) -> Result<Vec<u8>, StoreError> {
    conn.prepare_cached("SELECT data FROM att_chunks WHERE blob_id = ?1 AND idx = ?2")?
        .query_row(params![id, idx as i64], |r| r.get(0))
        .optional()?
        .ok_or_else(|| StoreError::Corrupt {
            db: String::new(),
            detail: format!("attachment blob {id} lacks chunk {idx}"),
        })
}

/// All bytes of a blob, for inline (`attachments=true` JSON) answers, where
/// CouchDB also builds the whole base64 string.
pub(super) fn read_blob(conn: &Connection, digest: &str) -> Result<Vec<u8>, StoreError> {
    let Some(id) = blob_id(conn, digest)? else {
        return Err(StoreError::Corrupt {
            db: String::new(),
            detail: format!("attachment {digest} is not stored"),
        });
    };
    let mut out = Vec::new();
    let mut stmt =
        conn.prepare_cached("SELECT data FROM att_chunks WHERE blob_id = ?1 ORDER BY idx")?;
    let mut rows = stmt.query([id])?;
    while let Some(row) = rows.next()? {
        let chunk: Vec<u8> = row.get(0)?;
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// Stores one chunk of an upload.
pub(super) fn put_chunk(
    conn: &Connection,
    id: i64,
    idx: u64,
    data: &[u8],
) -> Result<(), StoreError> {
    conn.prepare_cached("INSERT INTO att_chunks (blob_id, idx, data) VALUES (?1, ?2, ?3)")?
        .execute(params![id, idx as i64, data])?;
    Ok(())
}

/// Files an uploaded blob under its digest, or drops its chunks when the
/// digest is stored already.
pub(super) fn file_blob(
    conn: &Connection,
    digest: &str,
    id: i64,
    length: u64,
) -> Result<(), StoreError> {
    if has_blob(conn, digest)? {
        conn.prepare_cached("DELETE FROM att_chunks WHERE blob_id = ?1")?
            .execute([id])?;
    } else {
        conn.prepare_cached("INSERT INTO att_blobs (digest, blob_id, length) VALUES (?1, ?2, ?3)")?
            .execute(params![digest, id, length as i64])?;
    }
    Ok(())
}
