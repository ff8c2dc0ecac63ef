//! The source of a `_bulk_docs` pipeline whose body was too large to hold:
//! spooled to a file and read in two passes.

use std::borrow::Cow;
use std::io::{BufRead, Seek};

use serde_json::Value;
use store::StagedBlob;
use wire::scan::{DataSink, DocLimits, ScanError, Scanner};

use super::{Batch, Pipeline, RawDoc};
use crate::base::body::{INLINE_DATA_BUDGET, Uploads, scan_error};
use crate::base::error::ApiError;

/// Reads a body spooled to a file in two passes, so memory stays bounded:
/// the first finds `new_edits` (PouchDB sends it after `docs`), counts the
/// documents, refuses an oversized one and stores every large inline
/// attachment; the second hands the documents to `write` one at a time.
/// Uploads happen before the write starts, as they go through the same
/// writer.
pub(super) fn read<R>(
    pipeline: &Pipeline,
    file: std::fs::File,
    write: impl FnOnce(Batch<'_>) -> Result<R, ApiError>,
) -> Result<R, ApiError> {
    let limits = DocLimits {
        max_body: pipeline.state.config.max_document_size,
        inline_data_budget: INLINE_DATA_BUDGET,
    };
    let max_items = pipeline.state.config.limits.max_bulk_items;
    let mut file = file;
    let mut uploads = Uploads::new(pipeline.database.clone(), Some(pipeline.runtime.clone()));
    let first_pass =
        survey_bulk(&file, limits, max_items, &mut uploads).map_err(|e| uploads.error_for(e));
    let survey = match first_pass {
        Ok(Ok(survey)) => survey,
        Ok(Err(refusal)) | Err(refusal) => return Err(refusal),
    };
    file.rewind()
        .map_err(|e| ApiError::Internal(format!("reading a spooled body: {e}")))?;
    let mut scanner = Scanner::new(std::io::BufReader::with_capacity(64 << 10, &file));
    seek_docs(&mut scanner, survey.docs_keys).map_err(|e| uploads.error_for(e))?;
    let mut staged = survey.staged.into_iter();
    let mut first = true;
    let docs = std::iter::from_fn(move || {
        match scanner.next_element(&mut first) {
            Ok(false) => return None,
            Ok(true) => {}
            Err(e) => return Some(Err(scan_error(e))),
        }
        Some(
            scanner
                .document(limits, &mut Discard)
                .map_err(scan_error)
                .map(|scanned| RawDoc {
                    json: Cow::Owned(scanned.json),
                    staged: staged.next().unwrap_or_default(),
                    size_checked: true,
                }),
        )
    });
    write(Batch {
        new_edits: survey.new_edits,
        all_or_nothing: survey.all_or_nothing,
        count: survey.count,
        paced: true,
        docs: Box::new(docs),
    })
}

/// What the first pass over a `_bulk_docs` body found.
struct BulkSurvey {
    count: usize,
    new_edits: bool,
    all_or_nothing: bool,
    /// How many `docs` keys the body has: the last one counts.
    docs_keys: usize,
    /// Per document of the last `docs`, its attachments already stored.
    staged: Vec<Vec<(String, StagedBlob)>>,
}

/// The first pass (see [`bulk_docs_from_file`]); a request-level refusal is
/// the inner error.
fn survey_bulk(
    file: &std::fs::File,
    limits: DocLimits,
    max_items: usize,
    uploads: &mut Uploads,
) -> Result<Result<BulkSurvey, ApiError>, ScanError> {
    let mut scanner = Scanner::new(std::io::BufReader::with_capacity(64 << 10, file));
    if scanner.peek()? != Some(b'{') {
        return Ok(Err(ApiError::bad_request(
            "Request body must be a JSON object",
        )));
    }
    scanner.begin_object()?;
    let mut survey = BulkSurvey {
        count: 0,
        new_edits: true,
        all_or_nothing: false,
        docs_keys: 0,
        staged: Vec::new(),
    };
    let mut new_edits = None;
    let mut first = true;
    while let Some(key) = scanner.next_key(&mut first, u64::MAX)? {
        match key.as_str() {
            "docs" => {
                if scanner.peek()? != Some(b'[') {
                    return Ok(Err(ApiError::bad_request(
                        "`docs` parameter must be an array.",
                    )));
                }
                survey.docs_keys += 1;
                survey.count = 0;
                survey.staged.clear();
                scanner.begin_array()?;
                let mut first_doc = true;
                while scanner.next_element(&mut first_doc)? {
                    survey.count += 1;
                    if survey.count > max_items {
                        return Ok(Err(ApiError::bad_request(format!(
                            "Too many documents: more than {max_items} (max_bulk_items)"
                        ))));
                    }
                    let doc = scanner.document(limits, uploads)?;
                    if doc.too_large {
                        return Ok(Err(ApiError::DocumentTooLarge(doc.id.unwrap_or_default())));
                    }
                    if !uploads.done.is_empty()
                        && let Ok(Value::Object(map)) =
                            crate::base::json_body::parse_json(&doc.json)
                        && let Err(refusal) = uploads.compress_done(&map)
                    {
                        return Ok(Err(refusal));
                    }
                    survey.staged.push(std::mem::take(&mut uploads.done));
                }
            }
            "all_or_nothing" => {
                let mut raw = Vec::new();
                let _ = scanner.copy_value(&mut raw, 64);
                survey.all_or_nothing = raw == b"true";
            }
            "new_edits" => {
                let mut raw = Vec::new();
                let _ = scanner.copy_value(&mut raw, 64);
                new_edits = Some(raw);
            }
            _ => {
                scanner.skip_value()?;
            }
        }
    }
    scanner.end()?;
    if survey.docs_keys == 0 {
        return Ok(Err(ApiError::bad_request(
            "POST body must include `docs` parameter.",
        )));
    }
    survey.new_edits = match new_edits.as_deref() {
        None | Some(b"true") => true,
        Some(b"false") => false,
        Some(_) => {
            return Ok(Err(ApiError::bad_request(
                "`new_edits` parameter must be a boolean.",
            )));
        }
    };
    Ok(Ok(survey))
}

/// Walks to the inside of the last `docs` array (the first pass checked
/// the body's shape).
fn seek_docs<R: BufRead>(scanner: &mut Scanner<R>, docs_keys: usize) -> Result<(), ScanError> {
    scanner.begin_object()?;
    let mut seen = 0;
    let mut first = true;
    while let Some(key) = scanner.next_key(&mut first, u64::MAX)? {
        if key == "docs" {
            seen += 1;
            if seen == docs_keys {
                return scanner.begin_array();
            }
        }
        scanner.skip_value()?;
    }
    Err(ScanError::Syntax("the body changed between passes"))
}

/// The second pass's sink: the data was stored by the first.
struct Discard;

impl DataSink for Discard {
    fn begin(&mut self, _: &str) -> std::io::Result<()> {
        Ok(())
    }
    fn write(&mut self, _: &[u8]) -> std::io::Result<()> {
        Ok(())
    }
    fn finish(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
