//! Local documents (`_local/...`): no revision tree, revisions `0-N`, never
//! in the changes feed or `_all_docs`, never replicated. Replication
//! checkpoints live here. As in CouchDB, writes do not check the revision
//! (last writer wins), and a deletion removes the document.

use serde_json::{Map, Value};

use crate::backend::{LocalDocRow, ReadRows};
use crate::writer::WriteCtx;
use crate::{AllDocsQuery, Database, DocFailure, DocInput, StoreError};

/// One row of `_local_docs`.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalRow {
    pub id: String,
    pub rev: String,
    /// The document, when asked for.
    pub doc: Option<Value>,
}

/// The revision number in a local `_rev` (`0-N`); `None` when malformed.
fn parse_local_rev(rev: &str) -> Option<u64> {
    rev.strip_prefix("0-")?.parse().ok()
}

/// Writes a local document inside a write transaction; returns its new `_rev`.
pub(crate) fn put_in_tx(
    ctx: &mut WriteCtx<'_>,
    id: &str,
    doc: &DocInput,
) -> Result<Result<String, DocFailure>, StoreError> {
    let previous = match &doc.local_rev {
        None => 0,
        Some(rev) => match parse_local_rev(rev) {
            Some(n) => n,
            // Not a revision at all: CouchDB's 400. A revision that is not
            // a local one (`1-abc`) is CouchDB's generic `error`.
            None => {
                let kind = match revtree::RevId::parse(rev) {
                    Ok(_) => crate::ErrorKind::Error,
                    Err(_) => crate::ErrorKind::BadRequest,
                };
                return Ok(Err(DocFailure {
                    error: kind,
                    reason: "Invalid rev format".into(),
                }));
            }
        },
    };
    if doc.deleted {
        ctx.rows.delete_local(id)?;
        return Ok(Ok("0-0".into()));
    }
    let rev = previous.saturating_add(1);
    let body = ejson::to_string(&Value::Object(doc.body.clone()));
    ctx.rows.put_local(id, rev, &body)?;
    Ok(Ok(format!("0-{rev}")))
}

fn get_in(rows: &dyn ReadRows, id: &str) -> Result<Option<Value>, StoreError> {
    match rows.local_doc(id)? {
        Some(row) => local_doc(&row).map(Some),
        None => Ok(None),
    }
}

/// A stored local document with its `_id` and `_rev` first.
fn local_doc(row: &LocalDocRow) -> Result<Value, StoreError> {
    let corrupt = |detail: String| StoreError::Corrupt {
        db: String::new(),
        detail: format!("local document {}: {detail}", row.id),
    };
    let body = match ejson::from_stored(&row.body) {
        Ok(Value::Object(body)) => body,
        Ok(_) => return Err(corrupt("not an object".into())),
        Err(e) => return Err(corrupt(e.to_string())),
    };
    let mut doc = Map::with_capacity(body.len() + 2);
    doc.insert("_id".into(), Value::String(row.id.clone()));
    doc.insert("_rev".into(), Value::String(format!("0-{}", row.rev)));
    doc.extend(body);
    Ok(Value::Object(doc))
}

/// The rows of `_local_docs` in id order (byte order, as CouchDB's local
/// tree), within the query's bounds, skip and limit.
fn local_docs_in(rows: &dyn ReadRows, query: &AllDocsQuery) -> Result<Vec<LocalRow>, StoreError> {
    let page = query.id_page();
    let mut out = Vec::new();
    for row in rows.local_docs(&page)? {
        let doc = match query.include_docs {
            true => Some(local_doc(&row)?),
            false => None,
        };
        out.push(LocalRow {
            rev: format!("0-{}", row.rev),
            id: row.id,
            doc,
        });
    }
    Ok(out)
}

/// A local document's id: `_local/` and a name, as CouchDB checks it
/// before anything else of a write.
pub fn validate_local_id(id: &str) -> Result<(), StoreError> {
    if !id.starts_with("_local/") || id.len() == "_local/".len() {
        return Err(StoreError::bad_request("Invalid _local document id."));
    }
    Ok(())
}

/// Whether a user (`who`: their name and roles) may read a local document
/// of a database with per-document access: its `_access` names them.
pub(crate) fn local_readable(doc: &Value, who: &[String]) -> bool {
    doc.as_object()
        .and_then(crate::doc_access::access_list)
        .is_some_and(|list| list.iter().any(|p| who.contains(p)))
}

impl Database {
    /// A local document with its `_id` and `_rev`.
    pub async fn get_local(&self, id: &str) -> Result<Value, StoreError> {
        let id = id.to_string();
        let reader = self.reader.clone();
        self.read(move |conn| {
            get_in(conn, &id)?
                .filter(|doc| reader.as_deref().is_none_or(|who| local_readable(doc, who)))
                .ok_or(StoreError::DocNotFound("missing"))
        })
        .await
    }

    /// `_local_docs`: local documents in id order within the query's range
    /// (its `conflicts` and `attachments` do not apply).
    pub async fn local_docs(&self, query: AllDocsQuery) -> Result<Vec<LocalRow>, StoreError> {
        let reader = self.reader.clone();
        let mut rows = self.read(move |conn| local_docs_in(conn, &query)).await?;
        if let Some(who) = reader {
            // A listing for one user: only what they may read (the page's
            // bounds and limit apply before this; the route is for admins).
            rows.retain(|row| {
                row.doc
                    .as_ref()
                    .is_some_and(|doc| local_readable(doc, &who))
            });
        }
        Ok(rows)
    }

    /// `_local_docs` with `keys`: a row per key, `None` for a missing one.
    pub async fn local_docs_keys(
        &self,
        keys: Vec<String>,
        include_docs: bool,
    ) -> Result<Vec<(String, Option<LocalRow>)>, StoreError> {
        let reader = self.reader.clone();
        self.read(move |conn| {
            let mut out = Vec::with_capacity(keys.len());
            for key in keys {
                let row = get_in(conn, &key)?
                    .filter(|doc| reader.as_deref().is_none_or(|who| local_readable(doc, who)))
                    .map(|doc| LocalRow {
                        id: key.clone(),
                        rev: doc["_rev"].as_str().unwrap_or_default().to_string(),
                        doc: include_docs.then_some(doc),
                    });
                out.push((key, row));
            }
            Ok(out)
        })
        .await
    }

    /// Writes a local document (`id` starts with `_local/`); returns the new `_rev`.
    pub async fn put_local(&self, id: &str, doc: Value) -> Result<String, StoreError> {
        validate_local_id(id)?;
        let Value::Object(mut map) = doc else {
            return Err(StoreError::bad_request("Document must be a JSON object"));
        };
        // The URL names the document; a local `_rev` parses only with a local `_id`.
        map.insert("_id".into(), Value::String(id.to_string()));
        let input = DocInput::from_json(Value::Object(map))?;
        let id = id.to_string();
        let result = self
            .write(1, move |ctx| put_in_tx(ctx, &id, &input))
            .await?;
        result.map_err(|failure| StoreError::Invalid {
            error: failure.error,
            reason: failure.reason,
        })
    }

    /// Deletes a local document; 404 `missing` when there is none.
    pub async fn delete_local(&self, id: &str) -> Result<String, StoreError> {
        let id = id.to_string();
        self.write(1, move |ctx| {
            if !ctx.rows.delete_local(&id)? {
                return Err(StoreError::DocNotFound("missing"));
            }
            Ok("0-0".to_string())
        })
        .await
    }
}
