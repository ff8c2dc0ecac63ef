//! How revision bodies are stored.
//!
//! Bodies are JSON text, compressed with Snappy when that saves at least an
//! eighth of the bytes (CouchDB's default `file_compression` is Snappy too).
//! Fewer bytes per document means fewer pages through the WAL and into the
//! file, which is most of what a bulk write costs. Compressed bodies are
//! stored as BLOBs, plain ones as TEXT, so the column's type says which is
//! which and files written before compression read unchanged.

use crate::StoreError;

/// Bodies shorter than this are stored as text: too small to gain much.
const COMPRESS_MIN: usize = 64;

/// A body as a backend stores it.
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
