//! How revision bodies sit in the `revs.body` column.
//!
//! Bodies are JSON text, compressed with Snappy when that saves at least an
//! eighth of the bytes (CouchDB's default `file_compression` is Snappy too).
//! Fewer bytes per document means fewer pages through the WAL and into the
//! file, which is most of what a bulk write costs. Compressed bodies are
//! stored as BLOBs, plain ones as TEXT, so the column's type says which is
//! which and files written before compression read unchanged.

use rusqlite::ToSql;

use crate::StoreError;
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSqlOutput, ValueRef};

/// Bodies shorter than this are stored as text: too small to gain much.
const COMPRESS_MIN: usize = 64;

/// A body ready to be bound into `revs.body`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredBody {
    Text(String),
    Snappy { data: Vec<u8>, text_len: usize },
}

impl StoredBody {
    /// Bytes held.
    pub fn stored_len(&self) -> usize {
        match self {
            StoredBody::Text(text) => text.len(),
            StoredBody::Snappy { data, .. } => data.len(),
        }
    }

    /// Compresses `text` when that pays.
    pub fn encode(text: String) -> StoredBody {
        if text.len() < COMPRESS_MIN {
            return StoredBody::Text(text);
        }
        match snap::raw::Encoder::new().compress_vec(text.as_bytes()) {
            Ok(data) if data.len() <= text.len() - text.len() / 8 => StoredBody::Snappy {
                data,
                text_len: text.len(),
            },
            _ => StoredBody::Text(text),
        }
    }

    /// The body as a JSON value again.
    pub fn to_value(&self) -> Result<serde_json::Value, StoreError> {
        let parsed = match self {
            StoredBody::Text(text) => ejson::from_stored(text),
            StoredBody::Snappy { data, .. } => ejson::from_stored(&snappy_text(data)?),
        };
        parsed.map_err(|e| corrupt(e.to_string()))
    }

    /// The length of the JSON text, for `sizes.external`.
    pub fn text_len(&self) -> i64 {
        match self {
            StoredBody::Text(text) => text.len() as i64,
            StoredBody::Snappy { text_len, .. } => *text_len as i64,
        }
    }
}

impl ToSql for StoredBody {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            StoredBody::Text(text) => ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes())),
            StoredBody::Snappy { data, .. } => ToSqlOutput::Borrowed(ValueRef::Blob(data)),
        })
    }
}

/// The JSON text of a body stored Snappy-compressed ([`StoredBody::Snappy`]).
pub fn snappy_text(data: &[u8]) -> Result<String, StoreError> {
    let bytes = snap::raw::Decoder::new()
        .decompress_vec(data)
        .map_err(|e| corrupt(e.to_string()))?;
    String::from_utf8(bytes).map_err(|e| corrupt(e.to_string()))
}

fn corrupt(detail: String) -> StoreError {
    StoreError::Corrupt {
        db: String::new(),
        detail: format!("revision body: {detail}"),
    }
}

/// A stored body read back as its JSON text.
pub(crate) struct BodyText(pub String);

impl FromSql for BodyText {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        match value {
            ValueRef::Text(_) => String::column_result(value).map(BodyText),
            ValueRef::Blob(data) => {
                let bytes = snap::raw::Decoder::new()
                    .decompress_vec(data)
                    .map_err(|e| FromSqlError::Other(Box::new(e)))?;
                String::from_utf8(bytes)
                    .map(BodyText)
                    .map_err(|e| FromSqlError::Other(Box::new(e)))
            }
            _ => Err(FromSqlError::InvalidType),
        }
    }
}

/// The length of a stored body's JSON text, without decompressing it.
pub(crate) struct BodyLen(pub i64);

impl FromSql for BodyLen {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        match value {
            ValueRef::Text(text) => Ok(BodyLen(text.len() as i64)),
            ValueRef::Blob(data) => snap::raw::decompress_len(data)
                .map(|len| BodyLen(len as i64))
                .map_err(|e| FromSqlError::Other(Box::new(e))),
            _ => Err(FromSqlError::InvalidType),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    fn round_trip(text: &str) -> (StoredBody, String, i64) {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (body TEXT NOT NULL)")
            .unwrap();
        let stored = StoredBody::encode(text.to_owned());
        conn.execute("INSERT INTO t (body) VALUES (?1)", [&stored])
            .unwrap();
        let (BodyText(back), BodyLen(len)) = conn
            .query_row("SELECT body, body FROM t", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        (stored, back, len)
    }

    #[test]
    fn repetitive_bodies_are_compressed_and_read_back() {
        let text = format!("{{\"pad\":\"{}\"}}", "x".repeat(1000));
        let (stored, back, len) = round_trip(&text);
        assert!(matches!(&stored, StoredBody::Snappy { data, .. } if data.len() < 200));
        assert_eq!(back, text);
        assert_eq!(len, text.len() as i64);
        assert_eq!(stored.text_len(), text.len() as i64);
        assert_eq!(
            stored.to_value().unwrap(),
            serde_json::from_str::<serde_json::Value>(&text).unwrap()
        );
    }

    #[test]
    fn small_and_incompressible_bodies_stay_text() {
        let (stored, back, len) = round_trip("{\"a\":1}");
        assert_eq!(stored, StoredBody::Text("{\"a\":1}".into()));
        assert_eq!((back.as_str(), len), ("{\"a\":1}", 7));

        // Distinct characters with no repeats: Snappy cannot shrink them.
        let noise: String = (0..400u32)
            .filter_map(|i| char::from_u32(0x4e00 + (i * 7919) % 20000))
            .collect();
        let text = format!("{{\"n\":\"{noise}\"}}");
        let (stored, back, len) = round_trip(&text);
        assert!(matches!(stored, StoredBody::Text(_)));
        assert_eq!(back, text);
        assert_eq!(len, text.len() as i64);
    }

    #[test]
    fn a_damaged_blob_is_an_error_not_a_panic() {
        let conn = Connection::open_in_memory().unwrap();
        let damaged: Result<BodyText, _> = conn.query_row("SELECT x'ff00ff00ff'", [], |r| r.get(0));
        assert!(damaged.is_err());
    }
}
