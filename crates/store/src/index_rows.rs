//! The rows of a secondary index and the ranges read from it: what the
//! caller writes and reads, apart from how an index stores them (shared by
//! `index` and its reduce blocks, `index_blocks`).

/// One emitted row, as written.
#[derive(Debug, Clone)]
pub struct IndexRow {
    /// Which view of the index (its position in the design document).
    pub view: u32,
    /// The sort key of `key` (see `collation::sort_key`).
    pub sort_key: Vec<u8>,
    /// The key as JSON text, as emitted.
    pub key: String,
    /// The value as JSON text.
    pub value: String,
}

/// A document's rows after it changed: none when it was deleted or emits nothing.
#[derive(Debug, Clone)]
pub struct IndexedDoc {
    pub id: String,
    pub rows: Vec<IndexRow>,
}

/// A row read back, in key order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    pub sort_key: Vec<u8>,
    pub key: String,
    pub id: String,
    pub value: String,
    /// The row's place among its document's rows at this key.
    pub n: i64,
}

impl IndexEntry {
    /// Where the row sits, to read on after it.
    pub fn position(&self) -> IndexPosition {
        (self.sort_key.clone(), self.id.clone(), self.n)
    }
}

/// A row's place in its view: (sort key, document id, row number).
pub type IndexPosition = (Vec<u8>, String, i64);

/// A range of one view: bounds on (sort key, document id), either open.
#[derive(Debug, Clone, Default)]
pub struct IndexRange {
    pub view: u32,
    /// Start (inclusive) in the direction of travel: the key, and the
    /// document id at that key (`startkey_docid`).
    pub start: Option<(Vec<u8>, Option<String>)>,
    /// End in the direction of travel, and whether it is included.
    pub end: Option<(Vec<u8>, Option<String>)>,
    pub inclusive_end: bool,
    pub descending: bool,
    pub skip: usize,
    pub limit: usize,
    /// Only rows past this one in the direction of travel: the next page.
    pub after: Option<IndexPosition>,
}
