//! `POST /{db}/_bulk_docs` as one pipeline: **source → parse → gate →
//! store → render**. The only variation is the source: a body up to
//! [`BULK_IN_MEMORY`] bytes is decoded from memory ([`memory`]), a larger
//! one is spooled to a file and read in two passes ([`spooled`]) so memory
//! stays bounded. Every document then goes the same way, on one blocking
//! thread while the store writes the ones before it: parsed and limited
//! ([`parse`]), checked by the access gate ([`gate`]: a refused document
//! becomes a row, put back in its place after the write), written by the
//! store in one transaction, and answered ([`render`]).

mod gate;
mod memory;
mod render;
mod spooled;

use std::borrow::Cow;

use axum::extract::Request;
use axum::response::Response;
use store::{Database, DocInput, DocWriteResult, StagedBlob};

use crate::AppState;
use crate::base::access::Writer;
use crate::base::body::{DocBody, Spooled, spool, spool_dir};
use crate::base::doc_input::{check_raw_document_size, parse_doc};
use crate::base::error::ApiError;
use crate::base::json_body::{parse_json, require_json_content_type};

/// `_bulk_docs` bodies up to this size are decoded from memory.
const BULK_IN_MEMORY: usize = 8 << 20;

/// # POST /{db}/_bulk_docs
pub(crate) async fn bulk_docs(
    state: AppState,
    db: String,
    request: Request,
) -> Result<Response, ApiError> {
    let user = crate::base::auth::user_of(&request);
    require_json_content_type(request.headers())?;
    let (database, writer) = state.open_to_write(&db, &user).await?;
    let body = spool(
        request.into_body().into_data_stream(),
        state.config.max_http_request_size,
        &spool_dir(&state),
        BULK_IN_MEMORY,
    )
    .await?;
    let pipeline = Pipeline {
        state,
        database,
        writer,
        runtime: tokio::runtime::Handle::current(),
    };
    tokio::task::spawn_blocking(move || match body {
        Spooled::Memory(bytes) => {
            memory::read(&pipeline.state, &bytes, |batch| pipeline.run(batch))
        }
        Spooled::File(file) => spooled::read(&pipeline, file, |batch| pipeline.run(batch)),
    })
    .await
    .map_err(|e| ApiError::Internal(format!("writing a bulk body: {e}")))?
}

/// One document of a body as it was sent: its JSON text, and (from a
/// spooled body) the attachments whose data already went to the store.
struct RawDoc<'a> {
    json: Cow<'a, [u8]>,
    staged: Vec<(String, StagedBlob)>,
    /// Whether `max_document_size` was already enforced as it was read
    /// (a spooled body's scanner does); otherwise the text is measured
    /// before any tree is built from it.
    size_checked: bool,
}

/// What a source read of a body: its options, and its documents in order,
/// decoded one at a time as the store pulls them.
struct Batch<'a> {
    new_edits: bool,
    all_or_nothing: bool,
    count: usize,
    /// Whether the store waits for its writer before pulling more (a body
    /// too large to hold), rather than pulling every document at once.
    paced: bool,
    docs: Box<dyn Iterator<Item = Result<RawDoc<'a>, ApiError>> + 'a>,
}

/// Everything one `_bulk_docs` request writes with.
struct Pipeline {
    state: AppState,
    database: Database,
    writer: Writer,
    /// The server's runtime: the pipeline runs on a blocking thread and
    /// waits on it for the store and for checks that read the database.
    runtime: tokio::runtime::Handle,
}

impl Pipeline {
    /// Parse, gate, store and render one batch.
    fn run(&self, batch: Batch<'_>) -> Result<Response, ApiError> {
        let Batch {
            new_edits,
            all_or_nothing,
            count,
            paced,
            docs,
        } = batch;
        if all_or_nothing && new_edits {
            return Ok(render::all_or_nothing_refused(docs));
        }
        let mut gate = gate::Gate::new(self, new_edits);
        let checked = docs
            .map(|raw| raw.and_then(|raw| parse(&self.state, raw)))
            .filter_map(|doc| gate.pass(doc));
        let stored = if paced {
            self.runtime
                .block_on(self.database.bulk_docs_paced(checked, count, new_edits))
        } else {
            self.runtime
                .block_on(self.database.bulk_docs_streamed(checked, count, new_edits))
        };
        let written = stored.map_err(|e| match e {
            store::BulkError::Input(e) => e,
            store::BulkError::Store(e) => e.into(),
        })?;
        Ok(render::answer(gate.splice(written), new_edits))
    }
}

/// A sent document as the store takes it: parsed as CouchDB reads JSON,
/// held to the document limits, its stored attachments pointed at.
fn parse(state: &AppState, raw: RawDoc<'_>) -> Result<DocInput, ApiError> {
    if !raw.size_checked && raw.json.len() as u64 > state.config.max_document_size {
        let text = std::str::from_utf8(&raw.json)
            .map_err(|_| ApiError::bad_request("invalid UTF-8 JSON"))?;
        check_raw_document_size(state, text)?;
    }
    let mut doc = parse_doc(state, parse_json(&raw.json)?)?;
    DocBody::resolve(raw.staged, &mut doc)?;
    Ok(doc)
}

/// The `_bulk_docs` row of a document refused before the write.
fn refusal_row(doc: &DocInput, failure: store::DocFailure) -> DocWriteResult {
    DocWriteResult {
        id: doc.id.clone().unwrap_or_default(),
        result: Err(failure),
        refused_rev: doc.rev.as_ref().map(|rev| rev.to_string()),
    }
}
