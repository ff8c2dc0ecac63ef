//! How revision bodies sit in the `revs.body` column: text, or Snappy
//! bytes as a BLOB (see `store::backend::StoredBody`), read back as text or
//! measured without decompressing.

use rusqlite::ToSql;
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSqlOutput, ValueRef};
use store::backend::StoredBody;

/// A body bound into `revs.body`: compressed bodies as BLOBs, plain ones
/// as TEXT, so the column's type says which is which.
pub(crate) struct SqlBody<'a>(pub &'a StoredBody);

impl ToSql for SqlBody<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self.0 {
            StoredBody::Text(text) => ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes())),
            StoredBody::Snappy { data, .. } => ToSqlOutput::Borrowed(ValueRef::Blob(data)),
        })
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
        conn.execute("INSERT INTO t (body) VALUES (?1)", [SqlBody(&stored)])
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
