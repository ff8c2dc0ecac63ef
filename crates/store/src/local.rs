//! Local documents (`_local/...`): no revision tree, revisions `0-N`, never
//! in the changes feed or `_all_docs`, never replicated. Replication
//! checkpoints live here. As in CouchDB, writes do not check the revision
//! (last writer wins), and a deletion removes the document.

use std::ops::Bound;

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Map, Value};

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
        ctx.conn
            .prepare_cached("DELETE FROM local_docs WHERE id = ?1")?
            .execute([id])?;
        return Ok(Ok("0-0".into()));
    }
    let rev = previous + 1;
    let body = Value::Object(doc.body.clone()).to_string();
    ctx.conn
        .prepare_cached("INSERT OR REPLACE INTO local_docs (id, rev, body) VALUES (?1, ?2, ?3)")?
        .execute(params![id, rev as i64, body])?;
    Ok(Ok(format!("0-{rev}")))
}

fn get_in(conn: &Connection, id: &str) -> Result<Option<Value>, StoreError> {
    let row: Option<(i64, String)> = conn
        .prepare_cached("SELECT rev, body FROM local_docs WHERE id = ?1")?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let Some((rev, body)) = row else {
        return Ok(None);
    };
    local_doc(id, rev, &body).map(Some)
}

/// A stored local document with its `_id` and `_rev` first.
fn local_doc(id: &str, rev: i64, body: &str) -> Result<Value, StoreError> {
    let body: Map<String, Value> = serde_json::from_str(body).map_err(|e| StoreError::Corrupt {
        db: String::new(),
        detail: format!("local document {id}: {e}"),
    })?;
    let mut doc = Map::with_capacity(body.len() + 2);
    doc.insert("_id".into(), Value::String(id.to_string()));
    doc.insert("_rev".into(), Value::String(format!("0-{rev}")));
    doc.extend(body);
    Ok(Value::Object(doc))
}

/// The rows of `_local_docs` in id order (byte order, as CouchDB's local
/// tree), within the query's bounds, skip and limit.
fn local_docs_in(conn: &Connection, query: &AllDocsQuery) -> Result<Vec<LocalRow>, StoreError> {
    let (low, high) = if query.descending {
        (&query.end, &query.start)
    } else {
        (&query.start, &query.end)
    };
    let mut sql = String::from("SELECT id, rev, body FROM local_docs WHERE 1");
    let mut args: Vec<&str> = Vec::new();
    for (bound, included, excluded) in [(low, ">=", ">"), (high, "<=", "<")] {
        match bound {
            Bound::Included(id) => {
                sql.push_str(&format!(" AND id {included} ?"));
                args.push(id);
            }
            Bound::Excluded(id) => {
                sql.push_str(&format!(" AND id {excluded} ?"));
                args.push(id);
            }
            Bound::Unbounded => {}
        }
    }
    sql.push_str(if query.descending {
        " ORDER BY id DESC"
    } else {
        " ORDER BY id ASC"
    });
    // SQLite reads a negative limit as none.
    let limit = i64::try_from(query.limit).unwrap_or(-1);
    let skip = i64::try_from(query.skip).unwrap_or(i64::MAX);
    sql.push_str(&format!(" LIMIT {limit} OFFSET {skip}"));
    let mut statement = conn.prepare(&sql)?;
    let rows = statement.query_map(rusqlite::params_from_iter(args), |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, String>(2)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (id, rev, body) = row?;
        let doc = match query.include_docs {
            true => Some(local_doc(&id, rev, &body)?),
            false => None,
        };
        out.push(LocalRow {
            id,
            rev: format!("0-{rev}"),
            doc,
        });
    }
    Ok(out)
}

impl Database {
    /// A local document with its `_id` and `_rev`.
    pub async fn get_local(&self, id: &str) -> Result<Value, StoreError> {
        let id = id.to_string();
        self.read(move |conn| get_in(conn, &id)?.ok_or(StoreError::DocNotFound("missing")))
            .await
    }

    /// `_local_docs`: local documents in id order within the query's range
    /// (its `conflicts` and `attachments` do not apply).
    pub async fn local_docs(&self, query: AllDocsQuery) -> Result<Vec<LocalRow>, StoreError> {
        self.read(move |conn| local_docs_in(conn, &query)).await
    }

    /// `_local_docs` with `keys`: a row per key, `None` for a missing one.
    pub async fn local_docs_keys(
        &self,
        keys: Vec<String>,
        include_docs: bool,
    ) -> Result<Vec<(String, Option<LocalRow>)>, StoreError> {
        self.read(move |conn| {
            let mut out = Vec::with_capacity(keys.len());
            for key in keys {
                let row = get_in(conn, &key)?.map(|doc| LocalRow {
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
        if !id.starts_with("_local/") || id.len() == "_local/".len() {
            return Err(StoreError::bad_request("Invalid _local document id."));
        }
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
            let removed = ctx
                .conn
                .prepare_cached("DELETE FROM local_docs WHERE id = ?1")?
                .execute([&id])?;
            if removed == 0 {
                return Err(StoreError::DocNotFound("missing"));
            }
            Ok("0-0".to_string())
        })
        .await
    }
}
