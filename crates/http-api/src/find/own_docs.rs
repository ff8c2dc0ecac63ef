//! A JSON index's answer, for a reader limited by `_access`, read from
//! their own documents instead of the index's rows.
//!
//! An index holds every user's rows. A reader who may read few documents,
//! querying a range where others hold many, would otherwise pay for each
//! of those rows (a fetch, found hidden): the time the query takes would
//! count what others hold. When the range holds more rows than the reader
//! has documents (both counted cheaply: the index's block counts, the
//! access index), the answer is built from the reader's documents: keyed
//! by the index's own rule (`design_functions::views::mango_index_key`),
//! kept within the range, ordered as the index orders them, then judged
//! and written exactly as index rows are. Either way the query costs at
//! most what the reader's own documents cost.

use mango::index_def::IndexDef;
use mango::plan::Bound;
use serde_json::Value;
use store::{AllDocsQuery, Database};

use super::{PAGE, Run};
use crate::base::error::ApiError;
use crate::base::streamed::{BodyWriter, Stop};

/// One of the reader's documents as the index would hold it.
struct Row {
    sort_key: Vec<u8>,
    key: Value,
    id: String,
}

fn key_bytes(bound: &Option<Bound>) -> Option<Vec<u8>> {
    match bound {
        Some(Bound::Key(bytes)) => Some(bytes.clone()),
        _ => None,
    }
}

/// Whether a scoped reader's query on `index` (view `view` of `def`) is
/// cheaper from their own documents than from the index's rows.
pub(super) async fn cheaper_than_index(
    run: &Run,
    def: &IndexDef,
    index: &store::Index,
    view: u32,
) -> Result<bool, ApiError> {
    if run.database.reader().is_none() || def.partitioned || run.req.partition.is_some() {
        return Ok(false);
    }
    let in_range = index
        .count_between(view, key_bytes(&run.plan.low), key_bytes(&run.plan.high))
        .await?;
    let own = run.database.info().await?.doc_count;
    Ok(in_range > own)
}

impl Run {
    /// The index's answer from the reader's documents (see the module).
    pub(super) async fn read_own_docs(
        &mut self,
        writer: &mut BodyWriter,
        def: &IndexDef,
    ) -> Result<(), Stop> {
        let mut rows = self.own_rows(def, writer).await?;
        rows.sort_by(|a, b| (&a.sort_key, &a.id).cmp(&(&b.sort_key, &b.id)));
        if self.plan.descending {
            rows.reverse();
        }
        // A bookmark resumes at its own row, as the index's range does.
        if let Some(mark) = &self.req.bookmark {
            let mut at = Vec::new();
            collation::sort_key(&mark.key, &mut at);
            let position = (at, mark.doc_id.clone());
            rows.retain(|row| {
                let here = (row.sort_key.clone(), row.id.clone());
                if self.plan.descending {
                    here <= position
                } else {
                    here >= position
                }
            });
        }
        for batch in rows.chunks(PAGE) {
            if self.done() {
                break;
            }
            writer.still_wanted()?;
            let ids: Vec<String> = batch.iter().map(|row| row.id.clone()).collect();
            let found = self.fetch_ids(ids).await?;
            for (row, found) in batch.iter().zip(found) {
                if self.done() {
                    break;
                }
                let Some(doc) = found else { continue };
                self.keys_examined += 1;
                self.offer(writer, &doc, row.key.clone(), &row.id).await?;
            }
        }
        Ok(())
    }

    /// The reader's documents the index would hold within the plan's range.
    async fn own_rows(&self, def: &IndexDef, writer: &BodyWriter) -> Result<Vec<Row>, Stop> {
        let (low, high) = (key_bytes(&self.plan.low), key_bytes(&self.plan.high));
        let mut rows = Vec::new();
        let mut after: Option<String> = None;
        loop {
            writer.still_wanted()?;
            let page = own_page(&self.database, after.take()).await?;
            let exhausted = page.rows.len() < PAGE;
            after = page.rows.last().map(|row| row.id.clone());
            for row in page.rows {
                let Some(doc) = row.doc else { continue };
                if row.id.starts_with("_design/") {
                    continue;
                }
                let doc = doc.to_value()?;
                let Some(key) = design_functions::views::mango_index_key(
                    &def.fields,
                    def.partial.as_ref(),
                    &doc,
                ) else {
                    continue;
                };
                let mut sort_key = Vec::new();
                collation::sort_key(&key, &mut sort_key);
                let inside = low.as_ref().is_none_or(|low| sort_key >= *low)
                    && high.as_ref().is_none_or(|high| sort_key <= *high);
                if inside {
                    rows.push(Row {
                        sort_key,
                        key,
                        id: row.id,
                    });
                }
            }
            if exhausted {
                return Ok(rows);
            }
        }
    }
}

/// A page of the reader's documents, with their bodies, after `after`.
async fn own_page(
    database: &Database,
    after: Option<String>,
) -> Result<store::AllDocsPage, store::StoreError> {
    database
        .all_docs(AllDocsQuery {
            start: after.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded),
            limit: PAGE,
            include_docs: true,
            count_offset: false,
            ..Default::default()
        })
        .await
}
