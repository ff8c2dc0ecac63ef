//! Revision ids (`N-hash`) and their CouchDB ordering.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a revision id string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseRevError {
    #[error("Invalid rev format")]
    Format,
    #[error("Invalid rev format: the position must be an integer from 1 to 9223372036854775807")]
    Position,
}

/// The largest revision position: CouchDB's positions fit in a signed 64-bit
/// integer, and bounding them here means no arithmetic on a position can
/// overflow (a child's position is checked against this bound).
pub const MAX_POS: u64 = i64::MAX as u64;

/// The hash part of a revision id.
///
/// CouchDB keeps a 32-character hex hash as its 16 decoded bytes and any other
/// hash as the raw text, and orders hashes by comparing those bytes. We keep
/// the same two shapes so that ordering (and therefore the winning revision)
/// is identical to CouchDB's, while any hash a peer sends round-trips exactly.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum RevHash {
    /// A 32-character lowercase hex hash, stored decoded.
    Md5([u8; 16]),
    /// Any other hash, kept as sent. CouchDB accepts an empty one (`1-`).
    Text(Box<str>),
}

impl RevHash {
    /// Parses a hash. Every string is a hash to CouchDB, the empty one too
    /// (`1-`); what it holds is escaped wherever it is written.
    pub fn parse(text: &str) -> RevHash {
        match decode_lower_hex_128(text) {
            Some(bytes) => RevHash::Md5(bytes),
            None => RevHash::Text(text.into()),
        }
    }

    /// The bytes CouchDB compares when it orders revisions.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            RevHash::Md5(bytes) => bytes,
            RevHash::Text(text) => text.as_bytes(),
        }
    }
}

fn decode_lower_hex_128(text: &str) -> Option<[u8; 16]> {
    let raw = text.as_bytes();
    if raw.len() != 32 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 16];
    for (i, pair) in raw.chunks_exact(2).enumerate() {
        out[i] = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(out)
}

impl Ord for RevHash {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_bytes().cmp(other.as_bytes()).then_with(|| {
            // Same bytes in two shapes (a 16-byte text equal to decoded md5
            // bytes): any fixed tie-break keeps Ord consistent with Eq.
            let rank = |h: &RevHash| matches!(h, RevHash::Text(_)) as u8;
            rank(self).cmp(&rank(other))
        })
    }
}

impl PartialOrd for RevHash {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for RevHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RevHash::Md5(bytes) => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                let mut out = [0u8; 32];
                for (i, b) in bytes.iter().enumerate() {
                    out[2 * i] = HEX[(b >> 4) as usize];
                    out[2 * i + 1] = HEX[(b & 0xf) as usize];
                }
                // Only ASCII hex digits were written.
                f.write_str(std::str::from_utf8(&out).map_err(|_| fmt::Error)?)
            }
            RevHash::Text(text) => f.write_str(text),
        }
    }
}

impl fmt::Debug for RevHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// A revision id: the position (generation) in the document's history and a hash.
///
/// Ordered as CouchDB orders `{Pos, RevId}` tuples: by position, then by hash bytes.
///
/// The fields are private to this crate so that no id can exist with a position outside
/// `1..=MAX_POS`: every constructor checks it.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RevId {
    pub(crate) pos: u64,
    pub(crate) hash: RevHash,
}

impl RevId {
    /// An id at `pos`, which must be in `1..=MAX_POS`.
    pub fn new(pos: u64, hash: RevHash) -> Result<RevId, ParseRevError> {
        if (1..=MAX_POS).contains(&pos) {
            Ok(RevId { pos, hash })
        } else {
            Err(ParseRevError::Position)
        }
    }

    /// For positions the caller has already bounded (a path's, a decoded
    /// tree's), and for range-scan bounds over the tree's ordered map, which
    /// may lie up to two generations past `MAX_POS` and are never stored.
    pub(crate) fn unchecked(pos: u64, hash: RevHash) -> RevId {
        RevId { pos, hash }
    }

    /// The generation: 1 for a first revision.
    pub fn pos(&self) -> u64 {
        self.pos
    }

    pub fn hash(&self) -> &RevHash {
        &self.hash
    }

    pub fn into_hash(self) -> RevHash {
        self.hash
    }

    /// The id of a child with `hash`; `None` when the position would pass
    /// `MAX_POS` (such an edit is refused, never wrapped).
    pub fn child(&self, hash: RevHash) -> Option<RevId> {
        RevId::new(self.pos.checked_add(1)?, hash).ok()
    }

    /// The id of the parent with `hash`; `None` for a first revision.
    pub fn parent_with(&self, hash: RevHash) -> Option<RevId> {
        RevId::new(self.pos - 1, hash).ok()
    }

    /// Parses `N-hash`: N is a decimal integer in `1..=MAX_POS`, the hash is
    /// everything after the first `-` (possibly empty, as CouchDB allows).
    pub fn parse(text: &str) -> Result<RevId, ParseRevError> {
        let (pos, hash) = text.split_once('-').ok_or(ParseRevError::Format)?;
        if pos.is_empty() || !pos.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ParseRevError::Position);
        }
        let pos: u64 = pos.parse().map_err(|_| ParseRevError::Position)?;
        RevId::new(pos, RevHash::parse(hash))
    }
}

impl FromStr for RevId {
    type Err = ParseRevError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RevId::parse(s)
    }
}

impl fmt::Display for RevId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.pos, self.hash)
    }
}

impl fmt::Debug for RevId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl Serialize for RevId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RevId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        RevId::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lowercase_md5_hash_is_stored_decoded_and_printed_back_identically() {
        let text = "3-0123456789abcdef0123456789abcdef";
        let rev = RevId::parse(text).unwrap();
        assert!(matches!(rev.hash, RevHash::Md5(_)));
        assert_eq!(rev.to_string(), text);
    }

    #[test]
    fn other_hashes_are_kept_as_text() {
        for text in [
            "1-a",
            "2-ABCDEF0123456789ABCDEF0123456789",
            "7-x-y-z",
            "1-日本",
        ] {
            let rev = RevId::parse(text).unwrap();
            assert!(matches!(rev.hash, RevHash::Text(_)), "{text}");
            assert_eq!(rev.to_string(), text);
        }
    }

    #[test]
    fn malformed_ids_are_refused_with_a_reason() {
        assert_eq!(RevId::parse("abc"), Err(ParseRevError::Format));
        assert_eq!(RevId::parse("-abc"), Err(ParseRevError::Position));
        assert_eq!(RevId::parse("0-abc"), Err(ParseRevError::Position));
        assert_eq!(RevId::parse("x-abc"), Err(ParseRevError::Position));
        assert_eq!(RevId::parse("+1-abc"), Err(ParseRevError::Position));
        assert_eq!(
            RevId::parse("99999999999999999999999-a"),
            Err(ParseRevError::Position)
        );
        assert_eq!(RevId::parse(""), Err(ParseRevError::Format));
    }

    #[test]
    fn an_empty_hash_is_a_hash_as_in_couchdb() {
        let rev = RevId::parse("1-").unwrap();
        assert_eq!((rev.pos(), rev.to_string().as_str()), (1, "1-"));
    }

    #[test]
    fn positions_are_bounded_so_a_child_can_never_overflow() {
        let top = RevId::parse("9223372036854775807-a").unwrap();
        assert_eq!(top.pos(), MAX_POS);
        assert_eq!(top.child(RevHash::parse("b")), None);
        for text in ["9223372036854775808-a", "18446744073709551614-abc"] {
            assert_eq!(RevId::parse(text), Err(ParseRevError::Position), "{text}");
        }
        assert!(RevId::new(0, RevHash::parse("a")).is_err());
        let first = RevId::parse("1-a").unwrap();
        assert_eq!(first.parent_with(RevHash::parse("z")), None);
        assert_eq!(first.child(RevHash::parse("b")).unwrap().to_string(), "2-b");
    }

    #[test]
    fn ids_order_by_position_first_then_hash() {
        let a = RevId::parse("2-aaaa").unwrap();
        let b = RevId::parse("10-0000").unwrap();
        assert!(a < b, "10 sorts after 2 numerically, not as text");
        let c = RevId::parse("2-b").unwrap();
        assert!(a < c);
    }

    #[test]
    fn md5_hashes_compare_by_decoded_bytes_as_couchdb_does() {
        // Decoded bytes: 0xff.. vs text "g" (0x67): the md5 sorts after.
        let md5 = RevId::parse("1-ffffffffffffffffffffffffffffffff").unwrap();
        let text = RevId::parse("1-g").unwrap();
        assert!(md5 > text);
        // Text "f" as bytes: 0x66 < 0xff.
        let md5_low = RevId::parse("1-00000000000000000000000000000000").unwrap();
        assert!(
            md5_low < text,
            "a decoded 0x00.. sorts before any printable text"
        );
    }

    #[test]
    fn serde_round_trips_as_a_string() {
        let rev: RevId = serde_json::from_str("\"4-abc\"").unwrap();
        assert_eq!(ejson::to_string_of(&rev).unwrap(), "\"4-abc\"");
        assert!(serde_json::from_str::<RevId>("\"nope\"").is_err());
    }
}
