//! The gate stage: every document of a `_bulk_docs` body passes the access
//! gate before the store sees it. Most need only the design-document rule
//! ([`Writer::check_streamed`]); those that need the stored state or the
//! engine (the special databases, validation functions, design documents)
//! get the full check on the runtime while this thread waits. A refused
//! document becomes its row, put back in its place after the write.

use store::{DocFailure, DocInput, DocWriteResult};

use super::{Pipeline, refusal_row};
use crate::base::access::Writer;
use crate::base::error::ApiError;

pub(super) struct Gate<'p> {
    pipeline: &'p Pipeline,
    new_edits: bool,
    /// Documents seen so far: the next one's place in the request.
    at: usize,
    refused: Vec<(usize, DocWriteResult)>,
}

impl<'p> Gate<'p> {
    pub(super) fn new(pipeline: &'p Pipeline, new_edits: bool) -> Gate<'p> {
        Gate {
            pipeline,
            new_edits,
            at: 0,
            refused: Vec::new(),
        }
    }

    /// The document on to the store, or `None` when it was refused (its row
    /// is kept). An error (bad input, or a refusal of the whole request)
    /// goes on to the store, which stops at it.
    pub(super) fn pass(
        &mut self,
        doc: Result<DocInput, ApiError>,
    ) -> Option<Result<DocInput, ApiError>> {
        let at = self.at;
        self.at += 1;
        let writer = &self.pipeline.writer;
        let checked = match doc {
            Ok(doc) if writer.needs_full_check(&doc) => self.full_check(doc),
            Ok(doc) => {
                let verdict = writer.check_streamed(&doc);
                Ok((doc, verdict))
            }
            Err(e) => Err(e),
        };
        match checked {
            Ok((doc, Ok(()))) => Some(Ok(doc)),
            Ok((doc, Err(failure))) => {
                self.refused.push((at, refusal_row(&doc, failure)));
                None
            }
            Err(e) => Some(Err(e)),
        }
    }

    /// [`Writer::check`] (the stored revision, validation functions,
    /// `_users` password hashing) run on the runtime, this thread waiting.
    fn full_check(&self, doc: DocInput) -> Result<(DocInput, Result<(), DocFailure>), ApiError> {
        let (answer, answered) = std::sync::mpsc::channel();
        let writer: Writer = self.pipeline.writer.clone();
        let database = self.pipeline.database.clone();
        let new_edits = self.new_edits;
        self.pipeline.runtime.spawn(async move {
            let mut doc = doc;
            let verdict = writer.check(&database, &mut doc, new_edits).await;
            let _ = answer.send(verdict.map(|v| (doc, v)));
        });
        answered
            .recv()
            .map_err(|_| ApiError::Internal("a document check ended without an answer".into()))?
    }

    /// The store's rows with the refused documents' rows back in their
    /// places: the answer's rows in request order.
    pub(super) fn splice(self, written: Vec<DocWriteResult>) -> Vec<DocWriteResult> {
        splice(written, self.refused)
    }
}

/// Puts refused documents back among the written ones, in request order.
fn splice(
    written: Vec<DocWriteResult>,
    refused: Vec<(usize, DocWriteResult)>,
) -> Vec<DocWriteResult> {
    if refused.is_empty() {
        return written;
    }
    let mut out = Vec::with_capacity(written.len() + refused.len());
    let mut written = written.into_iter();
    let mut refused = refused.into_iter().peekable();
    loop {
        if refused.peek().is_some_and(|(at, _)| *at == out.len()) {
            if let Some((_, row)) = refused.next() {
                out.push(row);
            }
            continue;
        }
        match written.next() {
            Some(row) => out.push(row),
            None => {
                out.extend(refused.map(|(_, row)| row));
                return out;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str) -> DocWriteResult {
        DocWriteResult {
            id: id.into(),
            result: Ok("1-a".into()),
            refused_rev: None,
        }
    }

    #[test]
    fn refusals_return_to_their_places() {
        let out = splice(
            vec![row("b"), row("d")],
            vec![(0, row("a")), (2, row("c")), (4, row("e"))],
        );
        let ids: Vec<_> = out.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c", "d", "e"]);
    }
}
