//! Attachments: per-revision metadata, and the content-addressed blob store
//! (bytes kept once per digest, in chunks, shared by every revision and
//! document that has them).

use base64::Engine;
use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::StoreError;

/// Bytes per stored chunk: large enough that a 1 GiB attachment is only
/// 4096 rows, small enough that reading one never costs much memory.
pub const CHUNK_SIZE: usize = 256 * 1024;

/// What a revision records about one of its attachments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachmentMeta {
    pub content_type: String,
    /// Length of the content as the client sees it (decoded).
    pub length: u64,
    /// `md5-<base64>` of the stored bytes.
    pub digest: String,
    /// The revision position at which these bytes were attached.
    pub revpos: u64,
    /// `gzip` when the stored bytes are compressed, as CouchDB's replicator sends them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// Length of the stored (encoded) bytes when `encoding` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoded_length: Option<u64>,
}

impl AttachmentMeta {
    /// The stub CouchDB shows when bytes are not requested; the encoding
    /// of compressed bytes only when asked (`att_encoding_info`).
    pub fn stub_json(&self, encoding_info: bool) -> Value {
        let mut m = self.base_json();
        if !encoding_info {
            m.remove("encoding");
            m.remove("encoded_length");
        }
        m.insert("stub".into(), Value::Bool(true));
        Value::Object(m)
    }

    /// The inline form with the content as base64 `data`: always the
    /// identity bytes, and no `length` (CouchDB puts it on stubs and
    /// `follows` entries only). How the bytes are stored follows the data
    /// only when asked (`att_encoding_info`), as CouchDB shows it.
    pub fn inline_json(&self, data: &[u8], encoding_info: bool) -> Value {
        let mut m = self.base_json();
        m.remove("length");
        let encoding = m.remove("encoding");
        let encoded_length = m.remove("encoded_length");
        m.insert(
            "data".into(),
            Value::String(base64::engine::general_purpose::STANDARD.encode(data)),
        );
        if encoding_info && let (Some(encoding), Some(length)) = (encoding, encoded_length) {
            m.insert("encoding".into(), encoding);
            m.insert("encoded_length".into(), length);
        }
        Value::Object(m)
    }

    /// The multipart form: the bytes follow in their own part.
    pub fn follows_json(&self) -> Value {
        let mut m = self.base_json();
        m.insert("follows".into(), Value::Bool(true));
        Value::Object(m)
    }

    fn base_json(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert(
            "content_type".into(),
            Value::String(self.content_type.clone()),
        );
        m.insert("revpos".into(), Value::from(self.revpos));
        m.insert("digest".into(), Value::String(self.digest.clone()));
        m.insert("length".into(), Value::from(self.length));
        if let Some(encoding) = &self.encoding {
            m.insert("encoding".into(), Value::String(encoding.clone()));
        }
        if let Some(encoded) = self.encoded_length {
            m.insert("encoded_length".into(), Value::from(encoded));
        }
        m
    }
}

/// A revision's attachments in order, as stored in the `revs.atts` column.
pub type Attachments = Vec<(String, AttachmentMeta)>;

pub fn encode_atts(atts: &Attachments) -> Option<String> {
    if atts.is_empty() {
        return None;
    }
    let map: Map<String, Value> = atts
        .iter()
        .map(|(name, meta)| {
            (
                name.clone(),
                serde_json::to_value(meta).unwrap_or(Value::Null),
            )
        })
        .collect();
    Some(Value::Object(map).to_string())
}

pub fn decode_atts(text: Option<&str>) -> Result<Attachments, StoreError> {
    let Some(text) = text else {
        return Ok(Vec::new());
    };
    let map: Map<String, Value> = serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
        db: String::new(),
        detail: format!("attachment metadata: {e}"),
    })?;
    map.into_iter()
        .map(|(name, v)| {
            serde_json::from_value(v)
                .map(|meta| (name, meta))
                .map_err(|e| StoreError::Corrupt {
                    db: String::new(),
                    detail: format!("attachment metadata: {e}"),
                })
        })
        .collect()
}

/// CouchDB's digest string for some bytes' md5.
pub fn digest_string(md5: &[u8]) -> String {
    format!(
        "md5-{}",
        base64::engine::general_purpose::STANDARD.encode(md5)
    )
}

/// The raw MD5 behind a digest string, which a new revision id covers;
/// another kind of digest counts as its text.
pub fn digest_md5(digest: &str) -> Vec<u8> {
    digest
        .strip_prefix("md5-")
        .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
        .unwrap_or_else(|| digest.as_bytes().to_vec())
}

/// The digest of bytes held in memory.
pub fn digest_of(data: &[u8]) -> String {
    digest_string(&Md5::digest(data))
}

/// A fresh blob id. Chunks are written under it before the digest is known,
/// and the digest is then filed pointing at it, so finishing an upload never
/// rewrites its bytes. Random 63-bit ids need no coordination between
/// concurrent uploads (or nodes).
pub fn new_blob_id() -> i64 {
    (uuid::Uuid::new_v4().as_u64_pair().0 >> 1) as i64
}

/// The most bytes an attachment is inflated to for inline JSON, where it is
/// held in memory (and then in base64): larger content is read on its own
/// or as multipart, which stream.
const MAX_INLINE_INFLATED: u64 = 1 << 30;

/// The content of an attachment as clients see it: stored bytes, inflated
/// when they were stored gzip-encoded (as CouchDB's replicator sends text).
/// Inflation stops at the recorded length (checked when the attachment was
/// written), so a small upload can never inflate into gigabytes here.
pub(crate) fn identity_bytes(
    stored: Vec<u8>,
    meta: &AttachmentMeta,
) -> Result<Vec<u8>, StoreError> {
    match meta.encoding.as_deref() {
        Some("gzip") => {
            use std::io::Read;
            let limit = meta.length.min(MAX_INLINE_INFLATED);
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&stored[..])
                .take(limit.saturating_add(1))
                .read_to_end(&mut out)
                .map_err(|e| StoreError::Corrupt {
                    db: String::new(),
                    detail: format!("gzip attachment {} does not inflate: {e}", meta.digest),
                })?;
            if out.len() as u64 != meta.length {
                return Err(StoreError::Corrupt {
                    db: String::new(),
                    detail: format!(
                        "gzip attachment {} does not inflate to its length {} (or is over {} bytes inline)",
                        meta.digest, meta.length, MAX_INLINE_INFLATED
                    ),
                });
            }
            Ok(out)
        }
        _ => Ok(stored),
    }
}

/// How many bytes a stored gzip blob inflates to, counting without keeping
/// them; `None` past `limit`. Checks the `length` a client declares for
/// bytes it sends encoded.
pub(crate) fn inflated_length(stored: &[u8], limit: u64) -> Result<Option<u64>, StoreError> {
    use std::io::Read;
    // An empty stream reads as zero inflated bytes, yet it is no gzip.
    if stored.is_empty() {
        return Err(StoreError::bad_request(
            "gzip attachment does not inflate: no gzip header",
        ));
    }
    let mut decoder = flate2::read::GzDecoder::new(stored).take(limit.saturating_add(1));
    let counted = std::io::copy(&mut decoder, &mut std::io::sink())
        .map_err(|e| StoreError::bad_request(format!("gzip attachment does not inflate: {e}")))?;
    Ok((counted <= limit).then_some(counted))
}

/// An attachment upload in progress: bytes arrive in pieces (from a
/// multipart body or a standalone attachment PUT) and are written chunk by
/// chunk, each chunk a small write of its own, so a large upload neither sits
/// in memory nor holds the database's writer. The finished blob is addressed
/// by its digest; a blob no revision uses is dropped at compaction.
#[derive(Debug)]
pub struct AttachmentUpload {
    db: crate::Database,
    blob_id: i64,
    /// MD5 of the stored bytes.
    hasher: Md5,
    buffer: Vec<u8>,
    /// Stored bytes written so far.
    stored: u64,
    /// Bytes received so far (compressed into fewer when `gzip` is set).
    received: u64,
    next_idx: i64,
    /// The attachment's name, for the error when it grows too large.
    name: String,
    /// Set when the bytes are stored gzip-compressed, as CouchDB stores
    /// its compressible types.
    gzip: Option<crate::compression::Gzipper>,
}

/// A finished upload, ready to be referenced by a document write
/// (`AttachmentInput::Staged`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedBlob {
    /// The digest of the stored bytes.
    pub digest: String,
    /// How many bytes were received.
    pub length: u64,
    /// The stored length, when this server gzip-compressed the bytes it
    /// received (see [`crate::Database::begin_attachment_of`]).
    pub gzipped: Option<u64>,
    /// Keeps compaction off these bytes until the write that references
    /// them is done (or given up).
    pub pin: BlobPin,
}

/// Digests of uploaded blobs no revision refers to yet, counted per holder:
/// compaction leaves them alone. Every check runs on the writer thread, and
/// a pin is dropped only after the write holding it ran, so compaction sees
/// either the pin or the revision that now refers to the bytes.
#[derive(Debug, Default)]
pub(crate) struct Pins(Mutex<HashMap<String, usize>>);

impl Pins {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn pin(self: &Arc<Pins>, digest: &str) -> BlobPin {
        *self.lock().entry(digest.to_string()).or_insert(0) += 1;
        BlobPin {
            _hold: Some(Arc::new(PinGuard {
                pins: self.clone(),
                digest: digest.to_string(),
            })),
        }
    }

    pub(crate) fn is_pinned(&self, digest: &str) -> bool {
        self.lock().contains_key(digest)
    }
}

/// A hold on uploaded bytes (see [`StagedBlob::pin`]); the default holds
/// nothing. Clones share the hold, which ends with the last of them.
#[derive(Debug, Clone, Default)]
pub struct BlobPin {
    _hold: Option<Arc<PinGuard>>,
}

/// Pins compare equal: they say nothing about the bytes themselves.
impl PartialEq for BlobPin {
    fn eq(&self, _: &BlobPin) -> bool {
        true
    }
}

impl Eq for BlobPin {}

#[derive(Debug)]
struct PinGuard {
    pins: Arc<Pins>,
    digest: String,
}

impl Drop for PinGuard {
    fn drop(&mut self) {
        let mut pins = self.pins.lock();
        if let Some(count) = pins.get_mut(&self.digest) {
            *count -= 1;
            if *count == 0 {
                pins.remove(&self.digest);
            }
        }
    }
}

impl AttachmentUpload {
    pub(crate) fn new(
        db: crate::Database,
        name: &str,
        gzip_level: Option<u32>,
    ) -> AttachmentUpload {
        db.upload_started();
        AttachmentUpload {
            name: name.to_string(),
            db,
            blob_id: new_blob_id(),
            hasher: Md5::new(),
            buffer: Vec::with_capacity(CHUNK_SIZE),
            stored: 0,
            received: 0,
            next_idx: 0,
            gzip: gzip_level.map(crate::compression::Gzipper::new),
        }
    }

    /// Adds bytes; full chunks are written as they fill. Past the
    /// database's `max_attachment_size` (counted in bytes received) the
    /// upload fails (413).
    pub async fn write(&mut self, data: &[u8]) -> Result<(), StoreError> {
        let total = self.received + data.len() as u64;
        if total > self.db.max_attachment_size() {
            return Err(StoreError::AttachmentTooLarge(self.name.clone()));
        }
        self.received = total;
        match &mut self.gzip {
            Some(gzip) => {
                let compressed = gzip.write(data);
                self.store(&compressed).await
            }
            None => self.store(data).await,
        }
    }

    /// Buffers bytes to store, writing each chunk as it fills.
    async fn store(&mut self, mut data: &[u8]) -> Result<(), StoreError> {
        while !data.is_empty() {
            let room = CHUNK_SIZE - self.buffer.len();
            let take = room.min(data.len());
            self.buffer.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.buffer.len() == CHUNK_SIZE {
                self.flush().await?;
            }
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), StoreError> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.buffer, Vec::with_capacity(CHUNK_SIZE));
        self.hasher.update(&chunk);
        self.stored += chunk.len() as u64;
        let id = self.blob_id;
        let idx = self.next_idx;
        self.next_idx += 1;
        self.db
            .write(1, move |ctx| ctx.rows.put_chunk(id, idx as u64, &chunk))
            .await
    }

    /// Writes the last chunk and files the blob under its digest.
    pub async fn finish(mut self) -> Result<StagedBlob, StoreError> {
        // (Drop still runs afterwards and ends the upload's count.)
        let gzipped = match self.gzip.take() {
            Some(gzip) => {
                let last = gzip.finish();
                self.store(&last).await?;
                true
            }
            None => false,
        };
        self.flush().await?;
        let digest = digest_string(&std::mem::take(&mut self.hasher).finalize());
        let length = self.stored;
        let id = self.blob_id;
        // Pinned before the blob is filed, so no compaction can come between.
        let staged = StagedBlob {
            digest: digest.clone(),
            length: self.received,
            gzipped: gzipped.then_some(length),
            pin: self.db.blob_pins().pin(&digest),
        };
        self.db
            .write(1, move |ctx| {
                // Already stored under another blob: this copy is dropped.
                ctx.rows.file_blob(&digest, id, length)
            })
            .await?;
        Ok(staged)
    }
}

impl Drop for AttachmentUpload {
    fn drop(&mut self) {
        self.db.upload_ended();
    }
}

/// A stored attachment being read chunk by chunk.
#[derive(Debug)]
pub struct AttachmentReader {
    db: crate::Database,
    blob_id: i64,
    chunks: u64,
    next: u64,
}

impl AttachmentReader {
    /// The next piece of the attachment, or `None` at the end.
    pub async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, StoreError> {
        if self.next >= self.chunks {
            return Ok(None);
        }
        let id = self.blob_id;
        let idx = self.next;
        self.next += 1;
        self.db
            .read(move |rows| rows.blob_chunk(id, idx))
            .await
            .map(Some)
    }
}

/// Stored bytes fed to the decoder at a time: bounds what one piece of
/// [`InflatingReader`] output can grow to (deflate inflates ~1000:1 at most).
const INFLATE_FEED: usize = 4096;

/// The content of a gzip-encoded attachment, inflated piece by piece as it
/// is read: for clients that do not take `Content-Encoding: gzip`. The
/// stored bytes were checked to inflate to the declared length when they
/// were written; a blob that fails to inflate now is reported as corrupt.
pub struct InflatingReader {
    stored: AttachmentReader,
    decoder: flate2::write::GzDecoder<Vec<u8>>,
    /// The stored chunk being fed, and how far.
    input: Vec<u8>,
    at: usize,
    done: bool,
}

impl std::fmt::Debug for InflatingReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InflatingReader")
            .field("stored", &self.stored)
            .field("at", &self.at)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl InflatingReader {
    pub fn new(stored: AttachmentReader) -> InflatingReader {
        InflatingReader {
            stored,
            decoder: flate2::write::GzDecoder::new(Vec::new()),
            input: Vec::new(),
            at: 0,
            done: false,
        }
    }

    /// The next piece of the content, or `None` at the end.
    pub async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, StoreError> {
        use std::io::Write;
        let corrupt = |e: std::io::Error| StoreError::Corrupt {
            db: String::new(),
            detail: format!("a gzip attachment does not inflate: {e}"),
        };
        loop {
            if self.at < self.input.len() {
                let end = (self.at + INFLATE_FEED).min(self.input.len());
                self.decoder
                    .write_all(&self.input[self.at..end])
                    .map_err(corrupt)?;
                self.at = end;
            } else if self.done {
                return Ok(None);
            } else {
                match self.stored.next_chunk().await? {
                    Some(chunk) => {
                        self.input = chunk;
                        self.at = 0;
                    }
                    None => {
                        self.done = true;
                        self.decoder.try_finish().map_err(corrupt)?;
                    }
                }
            }
            let out = std::mem::take(self.decoder.get_mut());
            if !out.is_empty() {
                return Ok(Some(out));
            }
        }
    }
}

impl crate::Database {
    /// Starts an upload of attachment bytes, stored as they arrive (bytes
    /// a client sends already encoded, or of a type stored as sent).
    pub fn begin_attachment(&self, name: &str) -> AttachmentUpload {
        AttachmentUpload::new(self.clone(), name, None)
    }

    /// Starts an upload of an attachment's content, of a known media type:
    /// gzip-compressed as it is stored when the type is one CouchDB
    /// compresses (`[attachments] compressible_types`).
    pub fn begin_attachment_of(&self, name: &str, content_type: &str) -> AttachmentUpload {
        AttachmentUpload::new(self.clone(), name, self.compression_level(content_type))
    }

    /// How many bytes stored gzip bytes inflate to: the length clients
    /// see of an attachment uploaded gzip-encoded. Bytes that are no gzip
    /// are refused (400), as are ones inflating past `max_attachment_size` (413).
    pub async fn gzip_content_length(&self, name: &str, digest: &str) -> Result<u64, StoreError> {
        let (name, digest) = (name.to_string(), digest.to_string());
        let limit = self.max_attachment_size();
        self.read(move |rows| inflated_length(&rows.blob(&digest)?, limit))
            .await?
            .ok_or(StoreError::AttachmentTooLarge(name))
    }

    /// Uploaded bytes whose media type was learned only once they were
    /// stored (inline data streamed before its `content_type`): gzipped
    /// into a new blob when the type is one CouchDB compresses, else kept.
    /// The bytes as received become garbage for compaction.
    pub async fn compress_staged(
        &self,
        name: &str,
        content_type: &str,
        blob: StagedBlob,
    ) -> Result<StagedBlob, StoreError> {
        let Some(level) = self.compression_level(content_type) else {
            return Ok(blob);
        };
        if blob.gzipped.is_some() {
            return Ok(blob);
        }
        let digest = blob.digest.clone();
        let (blob_id, chunks) = self
            .read(move |rows| {
                rows.blob_chunks(&digest)?
                    .ok_or_else(|| StoreError::Corrupt {
                        db: String::new(),
                        detail: format!("uploaded attachment bytes {digest} are missing"),
                    })
            })
            .await?;
        let mut received = AttachmentReader {
            db: self.clone(),
            blob_id,
            chunks,
            next: 0,
        };
        let mut upload = AttachmentUpload::new(self.clone(), name, Some(level));
        while let Some(chunk) = received.next_chunk().await? {
            upload.write(&chunk).await?;
        }
        let compressed = upload.finish().await?;
        // Only now may compaction take the bytes as received.
        drop(blob);
        Ok(compressed)
    }

    /// An attachment of a document revision (the winner when `rev` is
    /// `None`): its metadata and a chunked reader for its stored bytes.
    pub async fn attachment(
        &self,
        id: &str,
        name: &str,
        rev: Option<revtree::RevId>,
    ) -> Result<(AttachmentMeta, AttachmentReader), StoreError> {
        let (id, name) = (id.to_string(), name.to_string());
        let handle = self.clone();
        let (meta, (blob_id, chunks)) = self
            .read(move |rows| {
                let row = handle
                    .readable_row(rows, &id)?
                    .ok_or(StoreError::DocNotFound("missing"))?;
                let rev = match rev {
                    Some(rev) => rev,
                    None => {
                        let winner = row
                            .tree
                            .winner()
                            .ok_or(StoreError::DocNotFound("missing"))?;
                        if winner.deleted {
                            return Err(StoreError::DocNotFound("deleted"));
                        }
                        winner.rev
                    }
                };
                let atts = rows
                    .revision_attachments(row.key, &rev)?
                    .ok_or(StoreError::DocNotFound("missing"))?;
                let meta = atts
                    .into_iter()
                    .find(|(n, _)| n == &name)
                    .map(|(_, m)| m)
                    .ok_or(StoreError::DocNotFound("Document is missing attachment"))?;
                let chunks =
                    rows.blob_chunks(&meta.digest)?
                        .ok_or_else(|| StoreError::Corrupt {
                            db: String::new(),
                            detail: format!("attachment bytes {} are missing", meta.digest),
                        })?;
                Ok((meta, chunks))
            })
            .await?;
        Ok((
            meta,
            AttachmentReader {
                db: self.clone(),
                blob_id,
                chunks,
                next: 0,
            },
        ))
    }
}
