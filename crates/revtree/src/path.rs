//! `RevPath`: one line of history, newest first, as in a document's `_revisions`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::rev_id::MAX_POS;
use crate::{RevHash, RevId};

/// Why a `_revisions` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("_revisions.ids must not be empty")]
    Empty,
    #[error("_revisions.start must be at least the number of ids")]
    StartTooSmall,
    #[error("_revisions.start must be at most 9223372036854775807")]
    StartTooLarge,
}

/// A revision and its ancestors, newest first: `ids[0]` is at position
/// `start`, `ids[1]` at `start - 1`, and so on. Never empty, and every
/// position is at least 1.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RevPath {
    start: u64,
    ids: Vec<RevHash>,
}

impl RevPath {
    pub fn new(start: u64, ids: Vec<RevHash>) -> Result<RevPath, PathError> {
        if ids.is_empty() {
            return Err(PathError::Empty);
        }
        if (ids.len() as u64) > start {
            return Err(PathError::StartTooSmall);
        }
        if start > MAX_POS {
            return Err(PathError::StartTooLarge);
        }
        Ok(RevPath { start, ids })
    }

    /// A path of one revision with no known ancestors (a bare `_rev`).
    pub fn single(rev: RevId) -> RevPath {
        RevPath {
            start: rev.pos(),
            ids: vec![rev.into_hash()],
        }
    }

    /// Parses the wire shape: `start` and hash strings, newest first.
    pub fn from_parts(start: u64, ids: &[impl AsRef<str>]) -> Result<RevPath, PathError> {
        let ids = ids.iter().map(|id| RevHash::parse(id.as_ref())).collect();
        RevPath::new(start, ids)
    }

    pub fn start(&self) -> u64 {
        self.start
    }

    pub fn ids(&self) -> &[RevHash] {
        &self.ids
    }

    /// The newest revision of the path.
    pub fn leaf(&self) -> RevId {
        self.rev_at(0)
    }

    /// The revision `i` generations below the leaf; `new` guarantees every
    /// position of the path is in range.
    fn rev_at(&self, i: usize) -> RevId {
        RevId::unchecked(self.start - i as u64, self.ids[i].clone())
    }

    /// The revisions, newest first.
    pub fn revs(&self) -> impl Iterator<Item = RevId> + '_ {
        (0..self.ids.len()).map(|i| self.rev_at(i))
    }

    /// Keeps at most `limit` (at least 1) newest revisions, as `revs_limit` does.
    pub fn truncated(&self, limit: usize) -> RevPath {
        let keep = self.ids.len().min(limit.max(1));
        RevPath {
            start: self.start,
            ids: self.ids[..keep].to_vec(),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct WirePath<T> {
    start: u64,
    ids: Vec<T>,
}

impl Serialize for RevPath {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let ids: Vec<String> = self.ids.iter().map(|h| h.to_string()).collect();
        WirePath {
            start: self.start,
            ids,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RevPath {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = WirePath::<String>::deserialize(deserializer)?;
        RevPath::from_parts(wire.start, &wire.ids).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_round_trip_through_json() {
        let json = r#"{"start":3,"ids":["c","b","a"]}"#;
        let path: RevPath = serde_json::from_str(json).unwrap();
        let revs: Vec<String> = path.revs().map(|r| r.to_string()).collect();
        assert_eq!(revs, ["3-c", "2-b", "1-a"]);
        assert_eq!(ejson::to_string_of(&path).unwrap(), json);
    }

    #[test]
    fn inconsistent_revisions_are_refused() {
        assert_eq!(
            RevPath::from_parts(1, &["a", "b"]),
            Err(PathError::StartTooSmall)
        );
        assert_eq!(
            RevPath::from_parts(1, &[] as &[&str]),
            Err(PathError::Empty)
        );
        assert_eq!(
            RevPath::from_parts(9223372036854775808, &["a"]),
            Err(PathError::StartTooLarge)
        );
        assert!(serde_json::from_str::<RevPath>(r#"{"start":0,"ids":["a"]}"#).is_err());
        assert!(
            serde_json::from_str::<RevPath>(r#"{"start":18446744073709551615,"ids":["a"]}"#)
                .is_err()
        );
    }

    #[test]
    fn truncation_keeps_the_newest_revisions() {
        let path = RevPath::from_parts(5, &["e", "d", "c", "b", "a"]).unwrap();
        let short = path.truncated(2);
        assert_eq!(short.leaf().to_string(), "5-e");
        assert_eq!(short.ids().len(), 2);
        assert_eq!(path.truncated(0).ids().len(), 1);
    }
}
