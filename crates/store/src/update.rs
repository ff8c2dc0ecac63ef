//! Writing documents: `bulk_docs` with `new_edits=true` (interactive edits)
//! and `new_edits=false` (replication), inside the writer's transaction.

use revtree::{AttachmentDigest, EditError, LeafState, MergeOutcome, RevId, RevTree, new_rev_hash};
use serde_json::Value;

use crate::attachments::{self, AttachmentMeta, Attachments, digest_md5};
use crate::backend::{DocUpdate, RevisionRef, StoredDoc, WriteRows};
use crate::body::StoredBody;
use crate::doc::AttachmentInput;
use crate::writer::WriteCtx;
use crate::{Database, DocFailure, DocInput, StoreError, local};

/// The outcome for one document of a batch, in request order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocWriteResult {
    pub id: String,
    /// The revision written (or already present), or why this document was refused.
    pub result: Result<String, DocFailure>,
    /// For a refused replicated document (`new_edits: false`): the revision
    /// it carried, which CouchDB names in its error row.
    pub refused_rev: Option<String>,
}

impl Database {
    /// Writes a batch of documents in one transaction.
    ///
    /// With `new_edits` each document is an edit of the revision in `_rev`
    /// (or a creation) and gets a new deterministic revision; conflicts are
    /// per-document rows. Without it (replication) each document's
    /// `_revisions` is merged as is. Request-level problems (a stub with
    /// nothing to keep, a replicated document without a revision) fail the
    /// whole batch and nothing of it is written.
    pub async fn bulk_docs(
        &self,
        docs: Vec<DocInput>,
        new_edits: bool,
    ) -> Result<Vec<DocWriteResult>, StoreError> {
        let count = docs.len();
        let docs = docs.into_iter().map(Ok::<_, std::convert::Infallible>);
        match self.bulk_docs_streamed(docs, count, new_edits).await {
            Ok(results) => Ok(results),
            Err(BulkError::Store(e)) => Err(e),
            Err(BulkError::Input(never)) => match never {},
        }
    }

    /// Writes one document; a refusal of it (a conflict, a missing stub) is
    /// the error of the whole call. Returns the revision written.
    pub async fn put_doc(&self, doc: DocInput, new_edits: bool) -> Result<String, StoreError> {
        let result = self
            .bulk_docs(vec![doc], new_edits)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| {
                StoreError::CommitFailed("a write of one document gave no result".into())
            })?;
        result.result.map_err(StoreError::from)
    }

    /// [`Database::bulk_docs`] for documents still being decoded (an HTTP
    /// body, say): they are pulled one at a time while the writer writes
    /// the ones before, all in one transaction. The first input error stops
    /// the batch and nothing of it is written. `count` is how many to expect.
    pub async fn bulk_docs_streamed<E>(
        &self,
        docs: impl Iterator<Item = Result<DocInput, E>>,
        count: usize,
        new_edits: bool,
    ) -> Result<Vec<DocWriteResult>, BulkError<E>> {
        // No bound: the documents are in memory already, and an async
        // caller must never block on the writer.
        self.bulk_docs_fed(docs, count, new_edits, None).await
    }

    /// [`Database::bulk_docs_streamed`] for a caller on a blocking thread
    /// decoding a body too large to hold (a spooled request): it waits for
    /// the writer whenever a few chunks are queued, so the documents in
    /// memory stay bounded whatever the size of the body.
    pub async fn bulk_docs_paced<E>(
        &self,
        docs: impl Iterator<Item = Result<DocInput, E>>,
        count: usize,
        new_edits: bool,
    ) -> Result<Vec<DocWriteResult>, BulkError<E>> {
        self.bulk_docs_fed(docs, count, new_edits, Some(PACED_CHUNKS))
            .await
    }

    async fn bulk_docs_fed<E>(
        &self,
        docs: impl Iterator<Item = Result<DocInput, E>>,
        count: usize,
        new_edits: bool,
        room: Option<usize>,
    ) -> Result<Vec<DocWriteResult>, BulkError<E>> {
        let weight = count.max(1);
        if count < PREPARE_EARLY_MIN {
            // Small writes go to the writer at once: many of them share one commit.
            let docs: Vec<DocInput> = docs.collect::<Result<_, E>>().map_err(BulkError::Input)?;
            for doc in &docs {
                precheck(doc, new_edits, self.is_partitioned()).map_err(BulkError::Store)?;
            }
            let docs = self
                .compress_inline_all(docs)
                .await
                .map_err(BulkError::Store)?;
            let ids = docs
                .iter()
                .filter_map(|doc| doc.id.clone())
                .filter(|id| !id.starts_with("_local/"))
                .collect();
            return self
                .write_docs(weight, ids, move |ctx| {
                    let prepared = docs.into_iter().map(|doc| Prepared::new(doc, new_edits));
                    write_prepared(ctx, prepared, new_edits)
                })
                .await
                .map_err(BulkError::Store);
        }
        // What needs no database state (body text, revision hash) is done
        // here, on the caller's thread, a chunk at a time, while the writer
        // thread writes the chunks before it.
        let (chunks, arriving) = match room {
            Some(room) => {
                let (paced, arriving) = std::sync::mpsc::sync_channel::<Chunk>(room);
                (ChunkSender::Paced(paced), arriving)
            }
            None => {
                let (open, arriving) = std::sync::mpsc::channel::<Chunk>();
                (ChunkSender::Open(open), arriving)
            }
        };
        let written = self
            .submit_write(weight, move |ctx| {
                let mut results = Vec::with_capacity(weight);
                loop {
                    match arriving.recv() {
                        Ok(Chunk::Docs(docs)) => {
                            results.extend(write_prepared(ctx, docs.into_iter(), new_edits)?)
                        }
                        Ok(Chunk::End) => return Ok(results),
                        // The batch was abandoned midway: write nothing of it.
                        Err(_) => {
                            return Err(StoreError::CommitFailed(
                                "the batch ended before all of it arrived".into(),
                            ));
                        }
                    }
                }
            })
            .await
            .map_err(BulkError::Store)?;
        let mut failure = None;
        let partitioned = self.is_partitioned();
        let mut chunk = Vec::with_capacity(PREPARE_CHUNK);
        let mut chunk_bytes = 0;
        for item in docs {
            let doc = match item {
                Ok(doc) => doc,
                Err(e) => {
                    failure = Some(BulkError::Input(e));
                    break;
                }
            };
            if let Err(e) = precheck(&doc, new_edits, partitioned) {
                failure = Some(BulkError::Store(e));
                break;
            }
            let mut doc = doc;
            self.compress_inline(&mut doc);
            let prepared = Prepared::new(doc, new_edits);
            chunk_bytes += prepared.stored.stored_len();
            chunk.push(prepared);
            if chunk.len() == PREPARE_CHUNK || chunk_bytes >= PREPARE_CHUNK_BYTES {
                chunk_bytes = 0;
                let full = std::mem::replace(&mut chunk, Vec::with_capacity(PREPARE_CHUNK));
                if chunks.send(Chunk::Docs(full)).is_err() {
                    // The writer gave up (an error): its answer says why.
                    break;
                }
            }
        }
        if failure.is_none() {
            let _ = chunks.send(Chunk::Docs(chunk));
            let _ = chunks.send(Chunk::End);
        }
        drop(chunks);
        let result = written.await;
        match failure {
            Some(failure) => Err(failure),
            None => result.map_err(BulkError::Store),
        }
    }
}

impl Database {
    /// Gzips a document's inline attachments of the types CouchDB stores
    /// compressed (the digest of the compressed bytes enters the revision
    /// id, so this comes before any hashing).
    fn compress_inline(&self, doc: &mut DocInput) {
        if is_local(doc) {
            return;
        }
        for (_, att) in &mut doc.attachments {
            if let AttachmentInput::Inline {
                content_type,
                data,
                revpos,
            } = att
                && let Some(level) = self.compression_level(content_type)
            {
                *att = AttachmentInput::InlineGzip {
                    gzip: crate::compression::gzip(data, level),
                    length: data.len() as u64,
                    content_type: std::mem::take(content_type),
                    revpos: *revpos,
                };
            }
        }
    }

    /// [`Database::compress_inline`] for a small write about to go to the
    /// writer from an async caller: much data is compressed on a blocking
    /// thread rather than on the runtime's.
    async fn compress_inline_all(
        &self,
        mut docs: Vec<DocInput>,
    ) -> Result<Vec<DocInput>, StoreError> {
        let inline_bytes: usize = docs
            .iter()
            .flat_map(|doc| &doc.attachments)
            .map(|(_, att)| match att {
                AttachmentInput::Inline { data, .. } => data.len(),
                _ => 0,
            })
            .sum();
        if inline_bytes < COMPRESS_INLINE_ON_CALLER {
            docs.iter_mut().for_each(|doc| self.compress_inline(doc));
            return Ok(docs);
        }
        let db = self.clone();
        tokio::task::spawn_blocking(move || {
            docs.iter_mut().for_each(|doc| db.compress_inline(doc));
            docs
        })
        .await
        .map_err(|e| StoreError::CommitFailed(format!("compressing attachments: {e}")))
    }
}

/// Inline attachment bytes compressed on the caller's thread at most;
/// more go to a blocking thread.
const COMPRESS_INLINE_ON_CALLER: usize = 256 << 10;

/// Why a streamed batch was refused: one of its inputs, or the store.
#[derive(Debug)]
pub enum BulkError<E> {
    Input(E),
    Store(StoreError),
}

/// The request-level checks of one document (they fail the whole batch).
fn precheck(doc: &DocInput, new_edits: bool, partitioned: bool) -> Result<(), StoreError> {
    if partitioned && let Some(id) = &doc.id {
        crate::doc::validate_partitioned_id(id)?;
    }
    if !new_edits && doc.rev.is_none() && !is_local(doc) {
        return Err(StoreError::bad_request(
            "When `new_edits: false`, the document needs `_rev` or `_revisions` specified",
        ));
    }
    if let Some((name, _)) = doc
        .attachments
        .iter()
        .find(|(_, a)| matches!(a, AttachmentInput::Follows { .. }))
    {
        return Err(StoreError::bad_request(format!(
            "Attachment {name} is marked `follows` but its bytes were not supplied"
        )));
    }
    Ok(())
}

/// The feeding end of a large batch: unbounded, or waiting for the writer.
enum ChunkSender {
    Open(std::sync::mpsc::Sender<Chunk>),
    Paced(std::sync::mpsc::SyncSender<Chunk>),
}

impl ChunkSender {
    fn send(&self, chunk: Chunk) -> Result<(), ()> {
        match self {
            ChunkSender::Open(open) => open.send(chunk).map_err(|_| ()),
            ChunkSender::Paced(paced) => paced.send(chunk).map_err(|_| ()),
        }
    }
}

/// A piece of a large batch on its way to the writer.
enum Chunk {
    Docs(Vec<Prepared>),
    End,
}

/// Documents prepared per chunk of a large batch.
const PREPARE_CHUNK: usize = 100;

/// A chunk is also sent once its bodies reach this size, so a batch of
/// large documents is not held a hundred at a time.
const PREPARE_CHUNK_BYTES: usize = 4 << 20;

/// Chunks queued for the writer before a paced caller waits.
const PACED_CHUNKS: usize = 2;

/// Writes prepared documents inside the writer's transaction.
pub(crate) fn write_prepared(
    ctx: &mut WriteCtx<'_>,
    docs: impl Iterator<Item = Prepared>,
    new_edits: bool,
) -> Result<Vec<DocWriteResult>, StoreError> {
    let mut results = Vec::new();
    // Partitions found at their size limit, asked once per batch.
    let mut full: std::collections::HashMap<String, bool> = Default::default();
    let docs: Vec<Prepared> = docs.collect();
    if docs.len() > 1 {
        // One look-up for the batch where a backend pays per round trip.
        let ids: Vec<&str> = docs
            .iter()
            .filter_map(|doc| doc.input.id.as_deref())
            .filter(|id| !id.starts_with("_local/"))
            .collect();
        ctx.rows.prefetch_docs(&ids)?;
    }
    for doc in docs {
        let id = doc
            .input
            .id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
        if new_edits
            && !doc.input.deleted
            && ctx.max_partition_size > 0
            && let Some((partition, _)) = id.split_once(':')
            && !id.starts_with('_')
        {
            let at_limit = match full.get(partition) {
                Some(at_limit) => *at_limit,
                None => {
                    let size = ctx.rows.partition_size(partition)?;
                    let at_limit = size >= ctx.max_partition_size;
                    full.insert(partition.to_string(), at_limit);
                    at_limit
                }
            };
            if at_limit && !shrinks(ctx, &id, doc.stored.text_len())? {
                // As CouchDB: edits stop; deletions, replication and edits
                // that make a document smaller go on.
                results.push(DocWriteResult {
                    result: Err(DocFailure {
                        error: crate::ErrorKind::PartitionOverflow,
                        reason: format!("Partition limit exceeded due to update on '{id}'"),
                    }),
                    id,
                    refused_rev: None,
                });
                continue;
            }
        }
        if id.starts_with("_design/") {
            ctx.state.design_changed = true;
        }
        let named_rev = if new_edits {
            None
        } else {
            doc.input.rev.clone()
        };
        let result = if id.starts_with("_local/") {
            local::put_in_tx(ctx, &id, &doc.input)?
        } else if ctx.access && !new_edits && crate::doc_access::is_revocation_tombstone(&doc.input)
        {
            // A revocation tombstone coming back from a user's replica:
            // never a revision of this database (see `doc_access`).
            Ok(doc
                .input
                .replicated_path()
                .map(|p| p.leaf().to_string())
                .unwrap_or_default())
        } else if new_edits {
            interactive_edit(ctx, &id, doc)?
        } else {
            replicated_edit(ctx, &id, doc)?
        };
        let refused_rev = match (&result, named_rev) {
            (Err(_), Some(rev)) => Some(rev.to_string()),
            _ => None,
        };
        results.push(DocWriteResult {
            id,
            result,
            refused_rev,
        });
    }
    Ok(results)
}

/// Batches from this size on are prepared by the caller, chunk by chunk.
const PREPARE_EARLY_MIN: usize = 16;

/// A document with the work done before the writer: its body's stored form
/// and, for an edit whose revision hash cannot depend on stored state (no
/// attachments), the new revision's hash for the parent it names.
pub(crate) struct Prepared {
    /// The input; its `body` has moved out, except for local documents.
    input: DocInput,
    /// The body, kept only for an edit whose hash needs its attachments.
    /// The writer thread frees less memory it did not allocate this way.
    body: Option<Value>,
    /// The body as it will be stored (compressed here, off the writer).
    stored: StoredBody,
    hash: Option<revtree::RevHash>,
    /// The body's `_access` (see [`crate::doc_access`]).
    access: Option<Vec<String>>,
}

impl Prepared {
    pub(crate) fn new(mut input: DocInput, new_edits: bool) -> Prepared {
        if is_local(&input) {
            return Prepared {
                input,
                body: None,
                stored: StoredBody::Text(String::new()),
                hash: None,
                access: None,
            };
        }
        let access = crate::doc_access::access_list(&input.body);
        let body = Value::Object(std::mem::take(&mut input.body));
        let stored = StoredBody::encode(json_text(&body));
        let (body, hash) = match (new_edits, input.attachments.is_empty()) {
            (true, true) => {
                let hash = new_rev_hash(input.rev.as_ref(), input.deleted, &body, &[]);
                (None, Some(hash))
            }
            (true, false) => (Some(body), None),
            (false, _) => (None, None),
        };
        Prepared {
            input,
            body,
            stored,
            hash,
            access,
        }
    }
}

/// A body's JSON text, as CouchDB would send it back (`ejson`).
fn json_text(value: &Value) -> String {
    ejson::to_string(value)
}

fn is_local(doc: &DocInput) -> bool {
    doc.id
        .as_deref()
        .is_some_and(|id| id.starts_with("_local/"))
}

fn missing_stub(id: &str, name: &str) -> StoreError {
    StoreError::MissingStub(format!("Invalid attachment stub in {id} for {name}"))
}

/// New bytes (inline or staged) become metadata at `revpos`.
fn new_bytes_meta(
    ctx: &WriteCtx<'_>,
    name: &str,
    input: AttachmentInput,
    default_revpos: u64,
) -> Result<Option<AttachmentMeta>, StoreError> {
    let rows = ctx.rows;
    Ok(match input {
        AttachmentInput::Inline {
            content_type,
            data,
            revpos,
            ..
        } => {
            // Inline data is always the content itself (identity), whatever
            // `encoding` a client sends along with it.
            if data.len() as u64 > ctx.max_attachment_size {
                return Err(StoreError::AttachmentTooLarge(name.to_string()));
            }
            let digest = rows.put_blob(&data)?;
            Some(AttachmentMeta {
                content_type,
                length: data.len() as u64,
                digest,
                revpos: revpos.unwrap_or(default_revpos),
                encoding: None,
                encoded_length: None,
            })
        }
        AttachmentInput::InlineGzip {
            content_type,
            gzip,
            length,
            revpos,
        } => {
            if length > ctx.max_attachment_size {
                return Err(StoreError::AttachmentTooLarge(name.to_string()));
            }
            let digest = rows.put_blob(&gzip)?;
            Some(AttachmentMeta {
                content_type,
                length,
                digest,
                revpos: revpos.unwrap_or(default_revpos),
                encoding: Some("gzip".into()),
                encoded_length: Some(gzip.len() as u64),
            })
        }
        AttachmentInput::Staged {
            content_type,
            digest,
            length,
            revpos,
            encoding,
            encoded_length,
            length_counted,
            // The pin may go now: compaction runs on this same thread, so it
            // cannot come before this write has referenced the bytes.
            pin: _,
        } => {
            if !rows.has_blob(&digest)? {
                return Err(StoreError::bad_request(format!(
                    "Staged attachment {digest} is not stored"
                )));
            }
            if !length_counted {
                check_declared_length(ctx, name, &digest, length, encoding.as_deref())?;
            }
            Some(AttachmentMeta {
                content_type,
                length,
                digest,
                revpos: revpos.unwrap_or(default_revpos),
                encoding,
                encoded_length,
            })
        }
        AttachmentInput::Stub { .. } | AttachmentInput::Follows { .. } => None,
    })
}

/// Checks the decoded `length` a client declared for bytes it sent encoded
/// (the stored length of identity bytes is measured, never declared): a
/// length over `max_attachment_size` is 413, one the bytes do not inflate
/// to is 400, and an encoding other than gzip is refused.
fn check_declared_length(
    ctx: &WriteCtx<'_>,
    name: &str,
    digest: &str,
    length: u64,
    encoding: Option<&str>,
) -> Result<(), StoreError> {
    let limit = ctx.max_attachment_size;
    if length > limit {
        return Err(StoreError::AttachmentTooLarge(name.to_string()));
    }
    match encoding {
        None => Ok(()),
        Some("gzip") => match attachments::inflated_length(&ctx.rows.blob(digest)?, limit)? {
            Some(actual) if actual == length => Ok(()),
            Some(actual) => Err(StoreError::bad_request(format!(
                "Attachment {name} declares length {length} but its gzip content inflates to {actual} bytes"
            ))),
            None => Err(StoreError::AttachmentTooLarge(name.to_string())),
        },
        Some(other) => Err(StoreError::bad_request(format!(
            "Attachment {name} has an unsupported encoding `{other}`; only gzip is accepted"
        ))),
    }
}

fn interactive_edit(
    ctx: &mut WriteCtx<'_>,
    id: &str,
    prepared: Prepared,
) -> Result<Result<String, DocFailure>, StoreError> {
    let Prepared {
        input: doc,
        body,
        stored: body_stored,
        hash: early_hash,
        access,
    } = prepared;
    let stored = ctx.rows.load_doc(id)?;
    let mut tree = stored.as_ref().map(|s| s.tree.clone()).unwrap_or_default();
    let Ok(parent) = tree.edit_parent(doc.rev.as_ref(), doc.deleted) else {
        return Ok(Err(DocFailure::conflict()));
    };
    let parent_atts = match (&parent, &stored) {
        (Some(p), Some(s)) => ctx.rows.revision_attachments(s.key, p)?,
        _ => Vec::new(),
    };
    let new_pos = match &parent {
        None => 1,
        Some(p) if p.pos() >= revtree::MAX_POS => return Err(position_overflow(id)),
        Some(p) => p.pos() + 1,
    };
    let mut atts: Attachments = Vec::with_capacity(doc.attachments.len());
    for (name, input) in doc.attachments {
        let meta = match input {
            AttachmentInput::Stub { revpos, .. } => {
                let kept = parent_atts
                    .iter()
                    .find(|(n, _)| n == &name)
                    .map(|(_, m)| m.clone());
                match kept {
                    Some(meta) if revpos.is_none_or(|r| r == meta.revpos) => meta,
                    _ => return Err(missing_stub(id, &name)),
                }
            }
            other => match new_bytes_meta(ctx, &name, other, new_pos)? {
                Some(mut meta) => {
                    meta.revpos = new_pos;
                    meta
                }
                None => return Err(missing_stub(id, &name)),
            },
        };
        atts.push((name, meta));
    }
    // The early hash assumed the parent the document names; re-creating a
    // deleted document has the deleted leaf as parent instead.
    let hash = match early_hash {
        Some(hash) if parent.as_ref() == doc.rev.as_ref() => hash,
        _ => {
            let md5s: Vec<Vec<u8>> = atts.iter().map(|(_, m)| digest_md5(&m.digest)).collect();
            let digests: Vec<AttachmentDigest<'_>> = atts
                .iter()
                .zip(&md5s)
                .map(|((name, m), md5)| AttachmentDigest {
                    name,
                    content_type: &m.content_type,
                    md5,
                })
                .collect();
            // Rare (attachments, or re-creating a deleted document): the
            // body value is rebuilt when it was not kept.
            let body = match body {
                Some(body) => body,
                None => body_stored.to_value()?,
            };
            new_rev_hash(parent.as_ref(), doc.deleted, &body, &digests)
        }
    };
    // `new_edit` takes the requested parent and derives the same effective one.
    let new_rev = match tree.new_edit(doc.rev.as_ref(), doc.deleted, |_| hash) {
        Ok(rev) => rev,
        Err(EditError::Conflict) => return Ok(Err(DocFailure::conflict())),
        Err(EditError::PositionOverflow) => return Err(position_overflow(id)),
    };
    let key = stored.as_ref().map_or_else(|| allocate_key(ctx), |s| s.key);
    let written = ctx
        .rows
        .write_revision(key, &new_rev, &body_stored, &atts)?;
    finish_update(
        ctx,
        id,
        key,
        stored.as_ref(),
        tree,
        Some(Written {
            rev: new_rev.clone(),
            at: written,
            access,
        }),
    )?;
    Ok(Ok(new_rev.to_string()))
}

/// An edit of a revision at `MAX_POS`: no position is left for its child.
fn position_overflow(id: &str) -> StoreError {
    StoreError::bad_request(format!(
        "Document {id} is at the highest revision position and cannot be edited"
    ))
}

fn replicated_edit(
    ctx: &mut WriteCtx<'_>,
    id: &str,
    prepared: Prepared,
) -> Result<Result<String, DocFailure>, StoreError> {
    let Prepared {
        input: doc,
        stored: body_stored,
        access,
        ..
    } = prepared;
    let Some(path) = doc.replicated_path() else {
        return Err(StoreError::bad_request(
            "When `new_edits: false`, the document needs `_rev` or `_revisions` specified",
        ));
    };
    let leaf = path.leaf();
    let stored = ctx.rows.load_doc(id)?;
    let mut tree = stored.as_ref().map(|s| s.tree.clone()).unwrap_or_default();
    let had_body = tree.is_available(&leaf) == Some(true);
    let outcome = tree.merge(
        &path,
        LeafState {
            deleted: doc.deleted,
            available: true,
        },
    );
    if outcome == MergeOutcome::AlreadyPresent {
        return Ok(Ok(leaf.to_string()));
    }
    let key = stored.as_ref().map_or_else(|| allocate_key(ctx), |s| s.key);
    let mut written = None;
    if !had_body {
        let mut atts: Attachments = Vec::with_capacity(doc.attachments.len());
        for (name, input) in doc.attachments {
            let meta = match input {
                AttachmentInput::Stub { digest, revpos } => {
                    let known = match &stored {
                        Some(s) => find_stored_attachment(
                            ctx.rows,
                            s.key,
                            &name,
                            digest.as_deref(),
                            revpos,
                        )?,
                        None => None,
                    };
                    known.ok_or_else(|| missing_stub(id, &name))?
                }
                other => new_bytes_meta(ctx, &name, other, leaf.pos())?
                    .ok_or_else(|| missing_stub(id, &name))?,
            };
            atts.push((name, meta));
        }
        let row = ctx.rows.write_revision(key, &leaf, &body_stored, &atts)?;
        written = Some(Written {
            rev: leaf.clone(),
            at: row,
            access,
        });
    }
    finish_update(ctx, id, key, stored.as_ref(), tree, written)?;
    Ok(Ok(leaf.to_string()))
}

/// An attachment some stored revision of this document already has: the
/// target of a replicated stub, matched by name and digest, else (as
/// CouchDB matches stubs) by name and revpos. The digest alone cannot
/// decide: a peer that stores text as sent (PouchDB) names it by the
/// content's digest, where this database holds it compressed under another.
fn find_stored_attachment(
    rows: &dyn WriteRows,
    key: i64,
    name: &str,
    digest: Option<&str>,
    revpos: Option<u64>,
) -> Result<Option<AttachmentMeta>, StoreError> {
    let mut same_revpos = None;
    for atts in rows.every_revision_attachments(key)? {
        for (n, meta) in atts {
            if n != name {
                continue;
            }
            if digest == Some(meta.digest.as_str()) {
                return Ok(Some(meta));
            }
            if same_revpos.is_none() && revpos == Some(meta.revpos) {
                same_revpos = Some(meta);
            }
        }
    }
    Ok(same_revpos)
}

fn allocate_key(ctx: &mut WriteCtx<'_>) -> i64 {
    let key = ctx.state.next_doc_key;
    ctx.state.next_doc_key += 1;
    key
}

/// Stems the tree, drops stemmed bodies, stores the document row at the next
/// sequence and keeps the counters right. `written` is the revision whose
/// body this update stored, if any.
fn finish_update(
    ctx: &mut WriteCtx<'_>,
    id: &str,
    key: i64,
    stored: Option<&StoredDoc>,
    mut tree: RevTree,
    written: Option<Written>,
) -> Result<(), StoreError> {
    for rev in tree.stem(ctx.state.revs_limit) {
        ctx.rows.drop_revision(key, &rev)?;
    }
    record_winner(ctx, key, id, &tree, written, 1, stored.map(|s| &s.tree))?;
    let state = &mut *ctx.state;
    if let Some(old) = stored {
        match old.live_body_len {
            Some(len) => {
                state.doc_count -= 1;
                state.external_size -= len;
            }
            None => state.doc_del_count -= 1,
        }
    }
    Ok(())
}

/// The revision an update stored the body of.
pub(crate) struct Written {
    pub rev: RevId,
    pub at: RevisionRef,
    /// Its `_access`.
    pub access: Option<Vec<String>>,
}

/// Writes a document's row for its tree's winner, `advance` sequences on,
/// and counts the winner in the database's counters. `written` is the
/// revision whose body this update stored, if any (else the winner's body
/// is looked up); `previous` the tree before the update (`None`: a new
/// document).
pub(crate) fn record_winner(
    ctx: &mut WriteCtx<'_>,
    key: i64,
    id: &str,
    tree: &RevTree,
    written: Option<Written>,
    advance: u64,
    previous: Option<&RevTree>,
) -> Result<(), StoreError> {
    let winner = tree.winner().ok_or_else(|| StoreError::Corrupt {
        db: String::new(),
        detail: format!("document {id} has an empty revision tree"),
    })?;
    let (winner_ref, written_access) = match written {
        Some(written) if written.rev == winner.rev => (written.at, Some(written.access)),
        _ => (
            ctx.rows
                .revision_ref(key, &winner.rev)?
                .unwrap_or(RevisionRef {
                    row: 0,
                    body_len: 0,
                }),
            None,
        ),
    };
    let state = &mut *ctx.state;
    state.update_seq += advance;
    let seq = state.update_seq;
    ctx.rows.write_doc(&DocUpdate {
        key,
        id,
        seq,
        winner: &winner.rev,
        deleted: winner.deleted,
        winner_row: winner_ref.row,
        tree,
        is_new: previous.is_none(),
        was_live: previous
            .and_then(RevTree::winner)
            .is_some_and(|w| !w.deleted),
    })?;
    if ctx.access {
        crate::doc_access::maintain(ctx, key, seq, previous, tree, written_access)?;
    }
    let state = &mut *ctx.state;
    if winner.deleted {
        state.doc_del_count += 1;
    } else {
        state.doc_count += 1;
        state.external_size += winner_ref.body_len;
    }
    Ok(())
}

/// Whether a body of `new_len` bytes makes document `id` smaller than
/// its current winner (what a full partition still takes, as CouchDB's
/// size check counts only growth).
fn shrinks(ctx: &mut WriteCtx<'_>, id: &str, new_len: i64) -> Result<bool, StoreError> {
    let old_len = match ctx.rows.load_doc(id)? {
        Some(stored) => stored.live_body_len,
        None => None,
    };
    Ok(old_len.is_some_and(|old_len| new_len < old_len))
}
