//! Document bodies read in bounded memory: a body over [`IN_MEMORY`] is
//! spooled to an unlinked file in the data folder, then scanned (see
//! `wire::scan`) so that large inline attachment data goes straight into
//! the attachment store instead of into a JSON tree.

use std::io::{BufRead, Seek, Write};
use std::path::{Path, PathBuf};

use axum::body::{Body, Bytes};
use futures_util::{Stream, StreamExt};
use serde_json::{Map, Value};
use store::{AttachmentInput, AttachmentUpload, Database, DocInput, StagedBlob, StoreError};
use wire::scan::{DataSink, DocLimits, ScanError, Scanner};

use crate::AppState;
use crate::base::error::ApiError;

/// Bodies up to this size stay in memory.
const IN_MEMORY: usize = 1 << 20;

/// Inline attachment data kept in a document's JSON, in base64 characters;
/// beyond it, data is decoded into the attachment store as it is read.
pub(crate) const INLINE_DATA_BUDGET: u64 = 1 << 20;

/// A request body read to its end.
pub(crate) enum Spooled {
    Memory(Vec<u8>),
    File(std::fs::File),
}

/// The folder of spooled bodies: inside the data folder, under a name no
/// database can have.
pub(crate) fn spool_dir(state: &AppState) -> PathBuf {
    state.databases.data_dir().join(".request-bodies")
}

/// Reads a body within `limit` bytes (413 past it), into memory up to
/// `in_memory` bytes.
pub(crate) async fn spool<E: std::fmt::Display>(
    mut stream: impl Stream<Item = Result<Bytes, E>> + Unpin,
    limit: u64,
    dir: &Path,
    in_memory: usize,
) -> Result<Spooled, ApiError> {
    let mut memory = Vec::new();
    let mut file: Option<std::fs::File> = None;
    let mut total: u64 = 0;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk
            .map_err(|e| ApiError::bad_request(format!("error reading the request body: {e}")))?;
        total += chunk.len() as u64;
        if total > limit {
            return Err(ApiError::RequestTooLarge);
        }
        if file.is_none() && memory.len() + chunk.len() <= in_memory {
            memory.extend_from_slice(&chunk);
            continue;
        }
        let dir = dir.to_path_buf();
        let pending = std::mem::take(&mut memory);
        let mut open = file.take();
        file = Some(
            tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
                let mut f = match open.take() {
                    Some(f) => f,
                    None => open_spool_file(&dir)?,
                };
                f.write_all(&pending)?;
                f.write_all(&chunk)?;
                Ok(f)
            })
            .await
            .map_err(|e| ApiError::Internal(format!("spooling a request body: {e}")))?
            .map_err(|e| ApiError::Internal(format!("spooling a request body: {e}")))?,
        );
    }
    match file {
        None => Ok(Spooled::Memory(memory)),
        Some(mut f) => {
            f.rewind()
                .map_err(|e| ApiError::Internal(format!("spooling a request body: {e}")))?;
            Ok(Spooled::File(f))
        }
    }
}

/// A new file for a body, removed from the folder at once: it lives while
/// it is open and never outlives the process.
fn open_spool_file(dir: &Path) -> std::io::Result<std::fs::File> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(uuid::Uuid::new_v4().simple().to_string());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(file)
}

/// A document body whose large inline attachments are already stored.
pub(crate) struct DocBody {
    pub map: Map<String, Value>,
    /// Attachments whose `data` went to the store (`""` in `map`).
    pub staged: Vec<(String, StagedBlob)>,
}

impl DocBody {
    /// Points the streamed attachments of the parsed document at their
    /// stored bytes. A `_local` document takes no attachments: one whose
    /// data was too large to keep inline is refused rather than emptied.
    pub fn resolve(staged: Vec<(String, StagedBlob)>, doc: &mut DocInput) -> Result<(), ApiError> {
        if !staged.is_empty()
            && doc
                .id
                .as_deref()
                .is_some_and(|id| id.starts_with("_local/"))
        {
            return Err(ApiError::bad_request(
                "_local documents do not accept attachments.",
            ));
        }
        for (name, blob) in staged {
            if let Some((_, input)) = doc.attachments.iter_mut().find(|(n, _)| *n == name)
                && let AttachmentInput::Inline {
                    content_type,
                    revpos,
                    ..
                } = input
            {
                let revpos = *revpos;
                let mut uploaded = AttachmentInput::uploaded(std::mem::take(content_type), blob);
                if let AttachmentInput::Staged { revpos: at, .. } = &mut uploaded {
                    *at = revpos;
                }
                *input = uploaded;
            }
        }
        Ok(())
    }
}

/// Reads a single document's JSON body: bounded by `max_http_request_size`
/// while it arrives and by `max_document_size` while it is scanned (413
/// `document_too_large` before any tree is built); inline attachment data
/// over the budget goes to the store as it is read. `inline_only` keeps all
/// data in the JSON (for `_local` documents, which take no attachments).
pub(crate) async fn read_doc_body(
    state: &AppState,
    database: &Database,
    body: Body,
    inline_only: bool,
) -> Result<DocBody, ApiError> {
    read_doc_stream(state, database, body.into_data_stream(), inline_only).await
}

/// [`read_doc_body`] for any stream of bytes, such as the JSON part of a
/// multipart upload.
pub(crate) async fn read_doc_stream<E: std::fmt::Display>(
    state: &AppState,
    database: &Database,
    stream: impl Stream<Item = Result<Bytes, E>> + Unpin,
    inline_only: bool,
) -> Result<DocBody, ApiError> {
    let spooled = spool(
        stream,
        state.config.max_http_request_size,
        &spool_dir(state),
        IN_MEMORY,
    )
    .await?;
    let limits = DocLimits {
        max_body: state.config.max_document_size,
        inline_data_budget: if inline_only {
            u64::MAX
        } else {
            INLINE_DATA_BUDGET
        },
    };
    match spooled {
        // Too small to hold data over the budget: no sink is ever called.
        Spooled::Memory(bytes) => {
            let mut sink = Uploads::new(database.clone(), None);
            scan_doc(&bytes[..], limits, &mut sink)
        }
        Spooled::File(file) => {
            let database = database.clone();
            let handle = tokio::runtime::Handle::current();
            tokio::task::spawn_blocking(move || {
                let mut sink = Uploads::new(database, Some(handle));
                scan_doc(
                    std::io::BufReader::with_capacity(64 << 10, file),
                    limits,
                    &mut sink,
                )
            })
            .await
            .map_err(|e| ApiError::Internal(format!("reading a document body: {e}")))?
        }
    }
}

fn scan_doc(
    input: impl BufRead,
    limits: DocLimits,
    sink: &mut Uploads,
) -> Result<DocBody, ApiError> {
    let mut scanner = Scanner::new(input);
    // CouchDB's words for a body with nothing in it.
    if matches!(scanner.peek(), Ok(None)) {
        return Err(ApiError::bad_request("Missing request body"));
    }
    let scanned = scanner
        .document(limits, sink)
        .and_then(|doc| scanner.end().map(|()| doc))
        .map_err(|e| sink.error_for(e))?;
    if scanned.too_large {
        return Err(ApiError::DocumentTooLarge(scanned.id.unwrap_or_default()));
    }
    match crate::base::json_body::parse_json(&scanned.json)? {
        Value::Object(map) => {
            sink.compress_done(&map)?;
            Ok(DocBody {
                map,
                staged: std::mem::take(&mut sink.done),
            })
        }
        _ => Err(ApiError::bad_request("Document must be a JSON object")),
    }
}

/// Writes streamed attachment data into the store, one upload at a time.
pub(crate) struct Uploads {
    database: Database,
    /// The runtime to wait on, from the blocking thread that scans.
    handle: Option<tokio::runtime::Handle>,
    current: Option<(String, AttachmentUpload)>,
    pub(crate) done: Vec<(String, StagedBlob)>,
    /// The store's own error, when an upload failed.
    failure: Option<StoreError>,
}

impl Uploads {
    pub(crate) fn new(database: Database, handle: Option<tokio::runtime::Handle>) -> Uploads {
        Uploads {
            database,
            handle,
            current: None,
            done: Vec::new(),
            failure: None,
        }
    }

    fn wait<T>(
        &mut self,
        work: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> std::io::Result<T> {
        let Some(handle) = &self.handle else {
            return Err(std::io::Error::other("no upload is possible here"));
        };
        handle.block_on(work).map_err(|e| {
            let shown = std::io::Error::other(e.to_string());
            self.failure = Some(e);
            shown
        })
    }

    /// Gzips the stored data of a document just read whose `content_type`
    /// CouchDB compresses: the type is known only once the whole
    /// attachment object is read, after its data went to the store.
    pub(crate) fn compress_done(&mut self, doc: &Map<String, Value>) -> Result<(), ApiError> {
        if self.done.is_empty() {
            return Ok(());
        }
        let content_type = |name: &str| {
            doc.get("_attachments")
                .and_then(|atts| atts.get(name))
                .and_then(|att| att.get("content_type"))
                .and_then(Value::as_str)
                .unwrap_or("application/octet-stream")
                .to_string()
        };
        for i in 0..self.done.len() {
            let (name, blob) = &self.done[i];
            let (name, content_type) = (name.clone(), content_type(name));
            if self.database.compression_level(&content_type).is_none() {
                continue;
            }
            let blob = blob.clone();
            let database = self.database.clone();
            let compressed = self
                .wait(async move { database.compress_staged(&name, &content_type, blob).await })
                .map_err(|e| match self.failure.take() {
                    Some(failure) => failure.into(),
                    None => ApiError::Internal(e.to_string()),
                })?;
            self.done[i].1 = compressed;
        }
        Ok(())
    }

    /// The answer for a failed scan: the store's error when an upload
    /// failed, else CouchDB's reasons for bad JSON or bad data.
    pub(crate) fn error_for(&mut self, e: ScanError) -> ApiError {
        match self.failure.take() {
            Some(failure) => failure.into(),
            None => scan_error(e),
        }
    }
}

impl DataSink for Uploads {
    fn begin(&mut self, name: &str) -> std::io::Result<()> {
        let upload = self.database.begin_attachment(name);
        self.current = Some((name.to_string(), upload));
        Ok(())
    }

    fn write(&mut self, decoded: &[u8]) -> std::io::Result<()> {
        let Some((name, mut upload)) = self.current.take() else {
            return Err(std::io::Error::other(
                "attachment data outside an attachment",
            ));
        };
        let result = self.wait(upload.write(decoded));
        self.current = Some((name, upload));
        result
    }

    fn finish(&mut self) -> std::io::Result<()> {
        let Some((name, upload)) = self.current.take() else {
            return Err(std::io::Error::other(
                "attachment data outside an attachment",
            ));
        };
        let blob = self.wait(upload.finish())?;
        // The last data of a name decides, as the document's parse does.
        self.done.retain(|(n, _)| *n != name);
        self.done.push((name, blob));
        Ok(())
    }
}

/// CouchDB's reasons for bad JSON or bad attachment data.
pub(crate) fn scan_error(e: ScanError) -> ApiError {
    match e {
        ScanError::BadData(name) => {
            ApiError::bad_request(format!("Invalid attachment data for {name}"))
        }
        ScanError::Io(e) => ApiError::Internal(format!("reading a request body: {e}")),
        ScanError::Syntax(_) | ScanError::TooLarge => ApiError::bad_request("invalid UTF-8 JSON"),
        ScanError::TooDeep => ApiError::from(ejson::JsonError::TooDeep),
    }
}
