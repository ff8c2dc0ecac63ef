//! Attachments CouchDB stores gzip-compressed (`[attachments]
//! compressible_types` at `compression_level`), and the compressor that
//! writes CouchDB's exact bytes: the digest of the stored bytes enters the
//! revision id, so the same edit gets the same revision on both servers
//! only when both compress alike (zlib, `deflateInit2(level, 8, 16 + 15, 8,
//! default)`, as `couch_stream` does).

use std::io::Write;

use regex::Regex;

/// CouchDB's `[attachments]` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentCompression {
    /// 1 (fastest) to 9 (smallest); 0 stores every attachment as sent.
    pub level: u32,
    /// Comma-separated media types whose attachments are compressed; `*`
    /// matches anything (`text/*`).
    pub types: String,
}

/// CouchDB's defaults.
pub const DEFAULT_COMPRESSIBLE_TYPES: &str =
    "text/*, application/javascript, application/json, application/xml";

impl Default for AttachmentCompression {
    fn default() -> AttachmentCompression {
        AttachmentCompression {
            level: 8,
            types: DEFAULT_COMPRESSIBLE_TYPES.into(),
        }
    }
}

/// [`AttachmentCompression`] made ready to apply.
#[derive(Debug)]
pub(crate) struct CompressionRule {
    level: u32,
    patterns: Vec<Regex>,
}

impl CompressionRule {
    /// Each listed type becomes CouchDB's case-insensitive pattern: `*` as
    /// "anything", media type parameters (`; charset=...`) allowed after
    /// it. As in CouchDB, the other characters of an entry are a regular
    /// expression; an entry that is no valid one matches nothing.
    pub(crate) fn new(settings: &AttachmentCompression) -> CompressionRule {
        let patterns = settings
            .types
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .filter_map(|t| {
                Regex::new(&format!(
                    r"(?i)^\s*{}(?:\s*;.*?)?\s*$",
                    t.replace('*', ".*")
                ))
                .ok()
            })
            .collect();
        CompressionRule {
            level: settings.level,
            patterns,
        }
    }

    /// The level to compress an attachment of this type at, if it is compressed.
    pub(crate) fn level_for(&self, content_type: &str) -> Option<u32> {
        ((1..=9).contains(&self.level) && self.patterns.iter().any(|p| p.is_match(content_type)))
            .then_some(self.level)
    }
}

/// A gzip stream written piece by piece; compressed bytes are taken out as
/// they come, so an upload never holds more than a piece of them.
pub(crate) struct Gzipper {
    encoder: flate2::write::ZlibEncoder<Vec<u8>>,
}

impl std::fmt::Debug for Gzipper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Gzipper")
    }
}

impl Gzipper {
    pub(crate) fn new(level: u32) -> Gzipper {
        // zlib's own gzip wrapper (window bits 16 + 15): the header is
        // zlib's, not flate2's, and so are the bytes.
        let compress = flate2::Compress::new_gzip(flate2::Compression::new(level), 15);
        Gzipper {
            encoder: flate2::write::ZlibEncoder::new_with_compress(Vec::new(), compress),
        }
    }

    /// Compresses `data`; returns the compressed bytes ready so far.
    pub(crate) fn write(&mut self, data: &[u8]) -> Vec<u8> {
        // Writing into a Vec cannot fail.
        let _ = self.encoder.write_all(data);
        std::mem::take(self.encoder.get_mut())
    }

    /// Ends the stream; returns its last bytes.
    pub(crate) fn finish(self) -> Vec<u8> {
        self.encoder.finish().unwrap_or_default()
    }
}

/// The gzip form of bytes held in memory.
pub(crate) fn gzip(data: &[u8], level: u32) -> Vec<u8> {
    let mut gz = Gzipper::new(level);
    let mut out = gz.write(data);
    out.extend(gz.finish());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn rule(types: &str) -> CompressionRule {
        CompressionRule::new(&AttachmentCompression {
            level: 8,
            types: types.into(),
        })
    }

    #[test]
    fn default_types_match_as_couchdb_matches_them() {
        let r = CompressionRule::new(&AttachmentCompression::default());
        for yes in [
            "text/plain",
            "TEXT/HTML",
            "text/plain; charset=utf-8",
            "  application/json ",
            "application/javascript;charset=UTF-8",
            "application/xml",
        ] {
            assert_eq!(r.level_for(yes), Some(8), "{yes}");
        }
        for no in [
            "application/octet-stream",
            "image/png",
            "application/jsonx",
            "xtext/plain",
            "",
        ] {
            assert_eq!(r.level_for(no), None, "{no}");
        }
    }

    #[test]
    fn level_zero_or_out_of_range_compresses_nothing() {
        for level in [0, 10] {
            let r = CompressionRule::new(&AttachmentCompression {
                level,
                types: "text/*".into(),
            });
            assert_eq!(r.level_for("text/plain"), None);
        }
    }

    #[test]
    fn an_invalid_pattern_matches_nothing_and_spoils_no_other() {
        let r = rule("text/(, image/*,,");
        assert_eq!(r.level_for("text/("), None);
        assert_eq!(r.level_for("image/png"), Some(8));
    }

    #[test]
    fn gzip_round_trips_and_has_zlibs_header() {
        let data = b"hello hello hello hello".repeat(100);
        let gz = gzip(&data, 8);
        // zlib's gzip header: no name, no time, OS 3 (Unix).
        assert_eq!(&gz[..10], &[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]);
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, data);
    }

    #[test]
    fn pieces_compress_to_the_same_bytes_as_the_whole() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 13) as u8 + b'a').collect();
        let mut gz = Gzipper::new(8);
        let mut pieces = Vec::new();
        for piece in data.chunks(4096) {
            pieces.extend(gz.write(piece));
        }
        pieces.extend(gz.finish());
        assert_eq!(pieces, gzip(&data, 8));
    }

    /// The bytes CouchDB 3.5 stores for `"hello, world\n"` as text/plain
    /// (its digest `md5-...` is the MD5 of exactly these bytes).
    #[test]
    fn the_bytes_are_couchdbs() {
        let gz = gzip(b"hello, world\n", 8);
        let digest = crate::attachments::digest_of(&gz);
        assert_eq!(digest, COUCHDB_HELLO_DIGEST);
    }

    /// Read from a CouchDB 3.5 stub of that attachment.
    const COUCHDB_HELLO_DIGEST: &str = "md5-ds0bbuzDRxNh2r5jkan1GA==";
}
