//! The JavaScript query server: design-document functions run in embedded
//! QuickJS, as CouchDB's query server runs them, on a bounded pool of
//! threads of their own (never the async runtime's). A context per design
//! document revision keeps its compiled functions; a call that throws,
//! loops or exhausts memory becomes an error, never a crash.

mod index_fields;
mod pool;
pub mod query_validation;
mod sandbox;
pub mod search;
mod source;
mod validation;
pub mod views;

pub use sandbox::{ListChunk, ListIo};

use std::sync::Arc;
use std::time::Duration;

use sandbox::Answer;
pub use validation::{
    DesignRefusal, Refusal, ValidationError, Validators, check_design_doc, new_doc_json,
};

/// Limits of the pool and of every call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Worker threads, each with its own JavaScript runtime.
    pub threads: usize,
    /// Extra workers started while every worker is busy and a database
    /// has a call waiting with none of its own running, so one database's
    /// slow functions never hold up another's for long; they stop after a
    /// while idle. The pool never has more than `threads + extra_threads`.
    pub extra_threads: usize,
    /// How long one call may run (CouchDB's `os_process_timeout`, 5 s).
    pub timeout: Duration,
    /// Memory of one worker's runtime, in bytes.
    pub memory: usize,
    /// Design documents whose contexts a worker keeps.
    pub contexts_per_thread: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            threads: 2,
            extra_threads: 6,
            timeout: Duration::from_secs(5),
            memory: 256 << 20,
            contexts_per_thread: 64,
        }
    }
}

/// A design document as its functions see it.
#[derive(Debug, Clone)]
pub struct DesignDoc {
    /// The database it lives in: contexts are never shared between databases.
    pub db: String,
    pub id: String,
    pub rev: String,
    /// The whole document as JSON text (`_id` and `_rev` included).
    pub json: Arc<str>,
}

/// Only JavaScript runs here (and Mango's `query` indexes, which run no
/// function): CouchDB's Erlang query server and others are not part of
/// this server, and their sources are not JavaScript. Checked wherever a
/// design document's functions or views are about to run, as CouchDB
/// refuses them when it looks for the language's query server.
pub fn check_language(ddoc: &serde_json::Value) -> Result<(), JsError> {
    match ddoc.get("language") {
        None => Ok(()),
        Some(serde_json::Value::String(l)) if l == "javascript" || l == "query" => Ok(()),
        Some(other) => Err(JsError::Runtime {
            error: "unknown_query_language".into(),
            reason: other
                .as_str()
                .map_or_else(|| other.to_string(), str::to_string),
        }),
    }
}

/// Why a function gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsError {
    /// The function threw, or could not be found or compiled: CouchDB's
    /// `error` and `reason` (`not_found`, `compilation_error`,
    /// `TypeError`...).
    Runtime { error: String, reason: String },
    /// It ran past the time limit.
    Timeout(Duration),
    /// It exhausted the memory of its runtime.
    OutOfMemory,
    /// The engine itself failed, or the pool is gone.
    Internal(String),
}

impl std::fmt::Display for JsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JsError::Runtime { error, reason } => write!(f, "{error}: {reason}"),
            JsError::Timeout(limit) => {
                write!(f, "the function ran for more than {} ms", limit.as_millis())
            }
            JsError::OutOfMemory => f.write_str("the function ran out of memory"),
            JsError::Internal(detail) => write!(f, "query server: {detail}"),
        }
    }
}

impl std::error::Error for JsError {}

/// What `validate_doc_update` decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Accepted,
    /// `throw({forbidden: reason})`: 403.
    Forbidden(String),
    /// `throw({unauthorized: reason})`: 401.
    Unauthorized(String),
    /// Anything else thrown: CouchDB's 500 `unknown_error`... as given.
    Other(String),
}

/// The pool of JavaScript workers. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Engine {
    pool: Arc<pool::Pool>,
    limits: Limits,
}

impl Engine {
    pub fn new(limits: Limits) -> Engine {
        Engine {
            pool: Arc::new(pool::Pool::new(limits)),
            limits,
        }
    }

    /// Runs the design document's `validate_doc_update` on a write.
    /// `old_doc` is the revision the write replaces (`null` when none).
    pub async fn validate(
        &self,
        ddoc: DesignDoc,
        new_doc: String,
        old_doc: Option<String>,
        user_ctx: String,
        sec_obj: String,
    ) -> Result<Verdict, JsError> {
        let old = old_doc.unwrap_or_else(|| "null".into());
        match self
            .pool
            .call(ddoc, "validate", vec![new_doc, old, user_ctx, sec_obj])
            .await?
        {
            Answer::Ok(_) => Ok(Verdict::Accepted),
            Answer::Error(error, reason) => Err(JsError::Runtime { error, reason }),
            Answer::Thrown(thrown) => Ok(verdict_of(thrown)),
        }
    }

    /// Runs filter function `name` on documents (JSON texts) with the
    /// request object: whether each passes.
    pub async fn filter(
        &self,
        ddoc: DesignDoc,
        name: &str,
        docs: &[String],
        req: String,
    ) -> Result<Vec<bool>, JsError> {
        let docs = json_array(docs);
        let answer = self
            .pool
            .call(ddoc, "filter", vec![name.to_string(), docs, req])
            .await?;
        bools(answer)
    }

    /// Runs the map functions of `views` on each document (JSON texts):
    /// per document, per view, the `[key, value]` pairs emitted.
    pub async fn map(
        &self,
        ddoc: DesignDoc,
        views: &[String],
        docs: &[String],
    ) -> Result<Vec<Vec<Vec<(serde_json::Value, serde_json::Value)>>>, JsError> {
        let names = ejson::to_string_of(views).unwrap_or_else(|_| "[]".into());
        let answer = self
            .pool
            .call(ddoc, "map", vec![names, json_lines(docs)])
            .await?;
        let value = match answer {
            Answer::Ok(value) => value,
            Answer::Error(error, reason) => return Err(JsError::Runtime { error, reason }),
            Answer::Thrown(thrown) => return Err(thrown_error(thrown)),
        };
        let serde_json::Value::Array(per_doc) = value else {
            return Err(JsError::Internal("a map answered no list".into()));
        };
        Ok(per_doc
            .into_iter()
            .map(|per_view| match per_view {
                serde_json::Value::Array(views) => views
                    .into_iter()
                    .map(|emitted| match emitted {
                        serde_json::Value::Array(pairs) => pairs
                            .into_iter()
                            .filter_map(|pair| match pair {
                                serde_json::Value::Array(mut kv) if kv.len() == 2 => {
                                    let value = kv.pop().unwrap_or_default();
                                    let key = kv.pop().unwrap_or_default();
                                    Some((key, value))
                                }
                                _ => None,
                            })
                            .collect(),
                        _ => Vec::new(),
                    })
                    .collect(),
                _ => Vec::new(),
            })
            .collect())
    }

    /// Runs show function `name` on a document (`null` for none): the
    /// response object (`body`/`json`/`base64`, `code`, `headers`).
    pub async fn show(
        &self,
        ddoc: DesignDoc,
        name: &str,
        doc: String,
        req: String,
    ) -> Result<serde_json::Value, JsError> {
        match self
            .pool
            .call(ddoc, "show", vec![name.to_string(), doc, req])
            .await?
        {
            Answer::Ok(value) => Ok(value),
            Answer::Error(error, reason) => Err(JsError::Runtime { error, reason }),
            Answer::Thrown(thrown) => Err(thrown_error(thrown)),
        }
    }

    /// Runs the design document's `rewrites` function on the request
    /// object: its answer (`{path, query, method, headers, body}`, or
    /// `{code, ...}`; a string is the path), `None` when it gives none.
    pub async fn rewrite(
        &self,
        ddoc: DesignDoc,
        req: String,
    ) -> Result<Option<serde_json::Value>, JsError> {
        match self.pool.call(ddoc, "rewrite", vec![req]).await? {
            Answer::Ok(serde_json::Value::Null) => Ok(None),
            Answer::Ok(value) => Ok(Some(value)),
            Answer::Error(error, reason) => Err(JsError::Runtime { error, reason }),
            Answer::Thrown(thrown) => Err(thrown_error(thrown)),
        }
    }

    /// Runs list function `name` with its head (`total_rows`, `offset`):
    /// its rows arrive on `io.rows` as it asks for them, and what it sends
    /// goes out on `io.out` at each row (its head first). Answers the text
    /// it sent last.
    pub async fn list(
        &self,
        ddoc: DesignDoc,
        name: &str,
        head: String,
        req: String,
        io: ListIo,
    ) -> Result<String, JsError> {
        let answer = self
            .pool
            .call_with(
                ddoc,
                "list",
                vec![name.to_string(), head, req],
                sandbox::CallIo::List(io),
            )
            .await?;
        match answer {
            Answer::Ok(serde_json::Value::String(tail)) => Ok(tail),
            Answer::Ok(other) => Ok(other.to_string()),
            Answer::Error(error, reason) => Err(JsError::Runtime { error, reason }),
            Answer::Thrown(thrown) => Err(thrown_error(thrown)),
        }
    }

    /// Runs update function `name`: the document to save (or `null`) and
    /// the response object.
    pub async fn update(
        &self,
        ddoc: DesignDoc,
        name: &str,
        doc: String,
        req: String,
    ) -> Result<(serde_json::Value, serde_json::Value), JsError> {
        match self
            .pool
            .call(ddoc, "update", vec![name.to_string(), doc, req])
            .await?
        {
            Answer::Ok(serde_json::Value::Array(mut pair)) if pair.len() == 2 => {
                let response = pair.pop().unwrap_or_default();
                let doc = pair.pop().unwrap_or_default();
                Ok((doc, response))
            }
            Answer::Ok(other) => Err(JsError::Internal(format!(
                "an update function answered {other}"
            ))),
            Answer::Error(error, reason) => Err(JsError::Runtime { error, reason }),
            Answer::Thrown(thrown) => Err(thrown_error(thrown)),
        }
    }

    /// Whether a function's source compiles: `Err` is CouchDB's reason
    /// (`SyntaxError: ... (source)`).
    pub async fn compile_check(&self, ddoc: DesignDoc, source: &str) -> Result<(), JsError> {
        match self
            .pool
            .call(ddoc, "compileCheck", vec![source.to_string()])
            .await?
        {
            Answer::Ok(_) => Ok(()),
            Answer::Error(error, reason) => Err(JsError::Runtime { error, reason }),
            Answer::Thrown(thrown) => Err(thrown_error(thrown)),
        }
    }

    /// Runs a reduce function (by its source) on `[key, id]` pairs and
    /// values, or re-reduces values (`keys` `None`).
    pub async fn reduce(
        &self,
        ddoc: DesignDoc,
        source: &str,
        keys: Option<String>,
        values: String,
    ) -> Result<serde_json::Value, JsError> {
        let rereduce = keys.is_none();
        let answer = self
            .pool
            .call(
                ddoc,
                "reduce",
                vec![
                    source.to_string(),
                    keys.unwrap_or_else(|| "null".into()),
                    values,
                    rereduce.to_string(),
                ],
            )
            .await?;
        match answer {
            Answer::Ok(value) => Ok(value),
            Answer::Error(error, reason) => Err(JsError::Runtime { error, reason }),
            Answer::Thrown(thrown) => Err(thrown_error(thrown)),
        }
    }

    /// `filter=_view`: whether the view's map function emits anything for
    /// each document.
    pub async fn filter_view(
        &self,
        ddoc: DesignDoc,
        view: &str,
        docs: &[String],
    ) -> Result<Vec<bool>, JsError> {
        let docs = json_array(docs);
        let answer = self
            .pool
            .call(ddoc, "filterView", vec![view.to_string(), docs])
            .await?;
        bools(answer)
    }
}

/// Whether a change's document matches a selector (`filter=_selector`):
/// the one test of `_changes` and of replications from a local source.
/// The row must carry its document.
pub fn selector_passes(selector: &mango::selector::Selector, row: &store::ChangeRow) -> bool {
    row.doc
        .as_ref()
        .and_then(|d| d.to_value().ok())
        .is_some_and(|doc| selector.matches(&doc))
}

/// A filter function (`filters.name`), or a view's map function used as
/// one (`filter=_view`, `req` then `None`), ready to judge pages of documents.
#[derive(Debug, Clone)]
pub struct DocFilter {
    pub engine: Engine,
    pub ddoc: DesignDoc,
    /// The filter's name, or the view's.
    pub name: String,
    /// The request object a filter function receives (JSON text).
    pub req: Option<String>,
}

impl DocFilter {
    /// Whether each row of a page of changes passes (rows read with their
    /// documents; one without is `null` to the function).
    pub async fn passes_rows(&self, rows: &[store::ChangeRow]) -> Result<Vec<bool>, JsError> {
        let docs: Vec<String> = rows
            .iter()
            .map(|row| {
                row.doc
                    .as_ref()
                    .map_or_else(|| "null".to_string(), |d| d.as_str().to_string())
            })
            .collect();
        self.passes(&docs).await
    }

    /// Whether each document (JSON text) passes.
    pub async fn passes(&self, docs: &[String]) -> Result<Vec<bool>, JsError> {
        match &self.req {
            Some(req) => {
                self.engine
                    .filter(self.ddoc.clone(), &self.name, docs, req.clone())
                    .await
            }
            None => {
                self.engine
                    .filter_view(self.ddoc.clone(), &self.name, docs)
                    .await
            }
        }
    }
}

/// JSON texts one a line, for the map entry point (which reads them one by
/// one). A raw newline in JSON text can only be blank space between
/// tokens, so it becomes a space.
fn json_lines(items: &[String]) -> String {
    let mut out = String::with_capacity(items.iter().map(|d| d.len() + 1).sum::<usize>());
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if item.contains('\n') {
            out.push_str(&item.replace('\n', " "));
        } else {
            out.push_str(item);
        }
    }
    out
}

fn json_array(items: &[String]) -> String {
    let mut out = String::with_capacity(items.iter().map(|d| d.len() + 1).sum::<usize>() + 2);
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(item);
    }
    out.push(']');
    out
}

fn bools(answer: Answer) -> Result<Vec<bool>, JsError> {
    match answer {
        Answer::Ok(serde_json::Value::Array(items)) => {
            Ok(items.iter().map(|v| v.as_bool().unwrap_or(false)).collect())
        }
        Answer::Ok(other) => Err(JsError::Internal(format!(
            "a filter answered {other} instead of a list"
        ))),
        Answer::Error(error, reason) => Err(JsError::Runtime { error, reason }),
        Answer::Thrown(thrown) => Err(thrown_error(thrown)),
    }
}

/// A thrown value as CouchDB reports it: `{error, reason}` objects keep
/// their words, other values are an `unnamed_error`.
fn thrown_error(thrown: serde_json::Value) -> JsError {
    let field = |k: &str| thrown.get(k).map(text_of);
    match (field("error"), field("reason")) {
        (Some(error), Some(reason)) => JsError::Runtime { error, reason },
        _ => JsError::Runtime {
            error: "unnamed_error".into(),
            reason: text_of(&thrown),
        },
    }
}

fn text_of(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// CouchDB's reading of what `validate_doc_update` threw: a one-member
/// object names the refusal, a string is an unknown error.
fn verdict_of(thrown: serde_json::Value) -> Verdict {
    match thrown {
        serde_json::Value::Object(map) if map.len() == 1 => {
            let (key, value) = map.into_iter().next().unwrap_or_default();
            let reason = text_of(&value);
            match key.as_str() {
                "forbidden" => Verdict::Forbidden(reason),
                "unauthorized" => Verdict::Unauthorized(reason),
                _ => Verdict::Other(reason),
            }
        }
        other => Verdict::Other(text_of(&other)),
    }
}

#[cfg(test)]
mod tests;
