//! A compact, versioned binary encoding of a revision tree, for the store.
//!
//! Layout (format 1): the format byte, the node count, then every node in id
//! order: position, hash (kind byte, then 16 raw bytes or a length-prefixed
//! UTF-8 text), a flags byte, and the index of the parent node when known.
//! Integers are LEB128 varints. Parents sort before their children (lower
//! position), so a parent index always points backwards, which the decoder
//! checks along with everything else: a corrupt blob is an error, never a panic.

use std::collections::BTreeMap;

use crate::tree::Node;
use crate::{RevHash, RevId, RevTree};

/// The current encoding's format byte. Bump it when the layout changes and
/// keep decoding every older format.
pub const FORMAT_V1: u8 = 1;

const HASH_MD5: u8 = 0;
const HASH_TEXT: u8 = 1;
const FLAG_DELETED: u8 = 1;
const FLAG_AVAILABLE: u8 = 2;
const FLAG_HAS_PARENT: u8 = 4;

/// Why stored bytes could not be read back as a tree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("corrupt revision tree encoding: {0}")]
pub struct DecodeError(&'static str);

impl RevTree {
    /// Encodes the tree; equal trees give equal bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(2 + self.nodes.len() * 20);
        out.push(FORMAT_V1);
        put_varint(&mut out, self.nodes.len() as u64);
        let mut index: BTreeMap<&RevId, u64> = BTreeMap::new();
        for (i, (rev, node)) in self.nodes.iter().enumerate() {
            put_varint(&mut out, rev.pos);
            match &rev.hash {
                RevHash::Md5(bytes) => {
                    out.push(HASH_MD5);
                    out.extend_from_slice(bytes);
                }
                RevHash::Text(text) => {
                    out.push(HASH_TEXT);
                    put_varint(&mut out, text.len() as u64);
                    out.extend_from_slice(text.as_bytes());
                }
            }
            let parent_index = node.parent.as_ref().and_then(|p| {
                index
                    .get(&RevId::unchecked(rev.pos - 1, p.clone()))
                    .copied()
            });
            let mut flags = 0;
            if node.deleted {
                flags |= FLAG_DELETED;
            }
            if node.available {
                flags |= FLAG_AVAILABLE;
            }
            if parent_index.is_some() {
                flags |= FLAG_HAS_PARENT;
            }
            out.push(flags);
            if let Some(p) = parent_index {
                put_varint(&mut out, p);
            }
            index.insert(rev, i as u64);
        }
        out
    }

    /// Decodes bytes written by [`RevTree::encode`] (any supported format).
    pub fn decode(bytes: &[u8]) -> Result<RevTree, DecodeError> {
        let mut r = Reader { bytes, at: 0 };
        match r.byte()? {
            FORMAT_V1 => {}
            _ => return Err(DecodeError("unknown format byte")),
        }
        let count = r.varint()?;
        // Every node takes at least 3 bytes: refuse absurd counts up front.
        if count > bytes.len() as u64 {
            return Err(DecodeError("node count larger than the data"));
        }
        let mut order: Vec<RevId> = Vec::with_capacity(count as usize);
        let mut nodes = BTreeMap::new();
        for _ in 0..count {
            let pos = r.varint()?;
            if pos == 0 {
                return Err(DecodeError("position 0"));
            }
            let hash = match r.byte()? {
                HASH_MD5 => {
                    let mut raw = [0u8; 16];
                    raw.copy_from_slice(r.take(16)?);
                    RevHash::Md5(raw)
                }
                HASH_TEXT => {
                    let len = r.varint()?;
                    let len = usize::try_from(len).map_err(|_| DecodeError("hash too long"))?;
                    let text = std::str::from_utf8(r.take(len)?)
                        .map_err(|_| DecodeError("hash is not UTF-8"))?;
                    RevHash::Text(text.into())
                }
                _ => return Err(DecodeError("unknown hash kind")),
            };
            let rev = RevId::new(pos, hash).map_err(|_| DecodeError("position out of range"))?;
            if order.last().is_some_and(|last| last >= &rev) {
                return Err(DecodeError("nodes out of order"));
            }
            let flags = r.byte()?;
            if flags & !(FLAG_DELETED | FLAG_AVAILABLE | FLAG_HAS_PARENT) != 0 {
                return Err(DecodeError("unknown flags"));
            }
            let parent = if flags & FLAG_HAS_PARENT != 0 {
                let p = usize::try_from(r.varint()?).map_err(|_| DecodeError("bad parent"))?;
                let parent = order
                    .get(p)
                    .ok_or(DecodeError("parent index out of range"))?;
                if parent.pos + 1 != pos {
                    return Err(DecodeError("parent is not one generation older"));
                }
                Some(parent.hash.clone())
            } else {
                None
            };
            nodes.insert(
                rev.clone(),
                Node {
                    parent,
                    deleted: flags & FLAG_DELETED != 0,
                    available: flags & FLAG_AVAILABLE != 0,
                },
            );
            order.push(rev);
        }
        if r.at != bytes.len() {
            return Err(DecodeError("trailing bytes"));
        }
        Ok(RevTree { nodes })
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .at
            .checked_add(n)
            .ok_or(DecodeError("length overflow"))?;
        let slice = self
            .bytes
            .get(self.at..end)
            .ok_or(DecodeError("truncated"))?;
        self.at = end;
        Ok(slice)
    }

    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError("varint too long"))
    }
}
