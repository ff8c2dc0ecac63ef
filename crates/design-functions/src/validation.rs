//! `validate_doc_update` on writes, as CouchDB runs it: every design
//! document of the database that has one judges every document written
//! (interactive or replicated, by anyone, admins included), except design
//! and local documents, with the revision the write replaces, the writer's
//! user context and the database's security object. A design document
//! of `"language": "query"` judges with a Mango selector instead
//! ([`crate::query_validation`]).

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};
use store::{AllDocsQuery, AttachmentInput, Database, DocInput, Replaced, StoreError};

use crate::{DesignDoc, Engine, JsError, Verdict};

/// The validation functions of each database, cached until a design
/// document of it changes (its design generation moves).
#[derive(Debug, Clone)]
pub struct Validators {
    engine: Engine,
    cache: Arc<Mutex<FunctionsByDb>>,
}

/// Per database name: the design generation read, what was found, and
/// the selectors of those that validate with one (by id and revision).
type FunctionsByDb = HashMap<String, (u64, Arc<Vec<DesignDoc>>, Arc<Selectors>)>;

/// A selector `validate_doc_update`, or why it could not be read.
type QueryRule = Arc<Result<mango::selector::Selector, mango::selector::SelectorError>>;

/// Of each design document found, by `id\0rev`: its selector when it is a
/// `"language": "query"` one, `None` for a JavaScript function.
type Selectors = HashMap<String, Option<QueryRule>>;

fn selector_key(ddoc: &DesignDoc) -> String {
    format!("{}\0{}", ddoc.id, ddoc.rev)
}

/// Why a write was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `{forbidden: reason}`: 403.
    Forbidden(String),
    /// `{unauthorized: reason}`: 401.
    Unauthorized(String),
    /// Anything else the function threw: CouchDB's `unknown_error`.
    Other(String),
}

/// Why validation could not decide.
#[derive(Debug)]
pub enum ValidationError {
    Store(StoreError),
    Script(JsError),
}

impl From<StoreError> for ValidationError {
    fn from(e: StoreError) -> ValidationError {
        ValidationError::Store(e)
    }
}

impl Validators {
    pub fn new(engine: Engine) -> Validators {
        Validators {
            engine,
            cache: Arc::default(),
        }
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The design documents of `database` that have a validation function.
    pub async fn of(&self, database: &Database) -> Result<Arc<Vec<DesignDoc>>, StoreError> {
        let generation = database.design_generation();
        // Every write request comes here: no allocation while cached.
        if let Some((seen, found, _)) = self.lock().get(database.name())
            && *seen == generation
        {
            return Ok(found.clone());
        }
        let name = database.name().to_string();
        // Every writer is judged by every function, whoever asks: read
        // whole, never through a reader's scoped handle (which would hide
        // the design documents from a member of a per-document access
        // database, and cache that for everyone).
        let page = database
            .unscoped()
            .all_docs(AllDocsQuery {
                start: Bound::Included("_design/".into()),
                end: Bound::Excluded("_design0".into()),
                include_docs: true,
                ..Default::default()
            })
            .await?;
        let mut found = Vec::new();
        let mut selectors = Selectors::new();
        for row in page.rows {
            let Some(doc) = row.doc else { continue };
            let text = doc.into_string();
            let body = ejson::from_stored(&text).ok();
            let selector = body.as_ref().and_then(crate::query_validation::selector_of);
            let has_function = body
                .as_ref()
                .is_some_and(|v| v.get("validate_doc_update").is_some_and(Value::is_string));
            if has_function || selector.is_some() {
                let ddoc = DesignDoc {
                    db: name.clone(),
                    id: row.id,
                    rev: row.rev.to_string(),
                    json: text.into(),
                };
                selectors.insert(selector_key(&ddoc), selector.map(Arc::new));
                found.push(ddoc);
            }
        }
        let found = Arc::new(found);
        self.lock()
            .insert(name, (generation, found.clone(), Arc::new(selectors)));
        Ok(found)
    }

    /// The selector `ddoc` validates with, if it is a `"language":
    /// "query"` one: from the cache, or read from the document when the
    /// cache moved on since the caller's list was made.
    fn selector(&self, cached: &Selectors, ddoc: &DesignDoc) -> Option<QueryRule> {
        if let Some(selector) = cached.get(&selector_key(ddoc)) {
            return selector.clone();
        }
        let body = ejson::from_stored(&ddoc.json).ok()?;
        crate::query_validation::selector_of(&body).map(Arc::new)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FunctionsByDb> {
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs every validation function of the database on `doc`; the first
    /// refusal wins. `user_ctx` and `sec_obj` are JSON texts.
    pub async fn check(
        &self,
        database: &Database,
        functions: &[DesignDoc],
        doc: &DocInput,
        new_edits: bool,
        user_ctx: &str,
        sec_obj: &str,
    ) -> Result<Result<(), Refusal>, ValidationError> {
        if functions.is_empty() || !is_validated(doc) {
            return Ok(Ok(()));
        }
        let old = match database.replaced_revision(doc, new_edits).await? {
            Replaced::NoChange => return Ok(Ok(())),
            Replaced::Nothing => None,
            Replaced::Doc(json) => Some(json.into_string()),
        };
        let new_value = new_doc_json(doc);
        let new_doc = ejson::to_string(&new_value);
        let selectors = self
            .lock()
            .get(database.name())
            .map(|(_, _, selectors)| selectors.clone())
            .unwrap_or_default();
        for ddoc in functions {
            if let Some(selector) = self.selector(&selectors, ddoc) {
                let old_value = old
                    .as_deref()
                    .and_then(|text| ejson::from_stored(text).ok());
                if crate::query_validation::accepts(&selector, &new_value, old_value.as_ref()) {
                    continue;
                }
                return Ok(Err(Refusal::Forbidden(
                    crate::query_validation::NOT_VALID.into(),
                )));
            }
            let verdict = self
                .engine
                .validate(
                    ddoc.clone(),
                    new_doc.clone(),
                    old.clone(),
                    user_ctx.to_string(),
                    sec_obj.to_string(),
                )
                .await
                .map_err(ValidationError::Script)?;
            let refusal = match verdict {
                Verdict::Accepted => continue,
                Verdict::Forbidden(reason) => Refusal::Forbidden(reason),
                Verdict::Unauthorized(reason) => Refusal::Unauthorized(reason),
                Verdict::Other(reason) => Refusal::Other(reason),
            };
            return Ok(Err(refusal));
        }
        Ok(Ok(()))
    }
}

/// Why CouchDB refuses a design document (`validate_ddoc`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DesignRefusal {
    /// 400 `invalid_design_doc`.
    Invalid(String),
    /// 400 `compilation_error`.
    Compilation(String),
}

/// CouchDB's checks of a design document's views when it is written (by a
/// client or a replication): `rewrites` an array or a function's source,
/// `views` an object, each view with a map function that compiles, and
/// only the built-in reducers that exist.
pub async fn check_design_doc(
    engine: &Engine,
    doc: &DocInput,
) -> Result<Result<(), DesignRefusal>, JsError> {
    if doc.deleted {
        return Ok(Ok(()));
    }
    if doc
        .body
        .get("rewrites")
        .is_some_and(|r| !r.is_array() && !r.is_string())
    {
        return Ok(Err(DesignRefusal::Invalid(
            "`rewrites` field must have array or string type".into(),
        )));
    }
    let Some(views) = doc.body.get("views") else {
        return Ok(Ok(()));
    };
    let Value::Object(views) = views else {
        return Ok(Err(DesignRefusal::Invalid(
            "`views` field must have object type".into(),
        )));
    };
    let javascript = doc
        .body
        .get("language")
        .and_then(Value::as_str)
        .is_none_or(|l| l == "javascript");
    for (name, view) in views {
        // `views.lib` holds modules map functions may require.
        if name == "lib" {
            continue;
        }
        let Some(map) = view.get("map") else {
            return Ok(Err(DesignRefusal::Invalid(format!(
                "View `{name}` must contain map function"
            ))));
        };
        if let Some(reduce) = view.get("reduce").and_then(Value::as_str)
            && reduce.starts_with('_')
            && let Err(reason) = crate::views::reduce::check_builtin(reduce)
        {
            return Ok(Err(DesignRefusal::Invalid(reason)));
        }
        if !javascript {
            continue;
        }
        let map = map.as_str().map_or_else(|| map.to_string(), str::to_string);
        // A JavaScript reduce is compiled too, as CouchDB does: else every
        // query of the view would fail instead of the save.
        let reduce = view
            .get("reduce")
            .and_then(Value::as_str)
            .filter(|r| !r.starts_with('_'));
        for (kind, source) in [("map", Some(map.as_str())), ("reduce", reduce)] {
            let Some(source) = source else { continue };
            let scratch = DesignDoc {
                db: String::new(),
                id: doc.id.clone().unwrap_or_default(),
                rev: "checking".into(),
                json: "{}".into(),
            };
            match engine.compile_check(scratch, source).await {
                Ok(()) => {}
                Err(JsError::Runtime { reason, .. }) => {
                    return Ok(Err(DesignRefusal::Compilation(format!(
                        "Compilation of the {kind} function in the '{name}' view failed: {reason}"
                    ))));
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(Ok(()))
}

/// Design and local documents are not judged by validation functions.
fn is_validated(doc: &DocInput) -> bool {
    !doc.id
        .as_deref()
        .is_some_and(|id| id.starts_with("_design/") || id.starts_with("_local/"))
}

/// The document as a validation function receives it (`newDoc`): its
/// body, `_id`, `_rev` and `_revisions` as sent, `_deleted`, and its
/// attachments as stubs.
pub fn new_doc_json(doc: &DocInput) -> Value {
    let mut out = Map::new();
    if let Some(id) = &doc.id {
        out.insert("_id".into(), Value::String(id.clone()));
    }
    if let Some(rev) = &doc.rev {
        out.insert("_rev".into(), Value::String(rev.to_string()));
    }
    for (k, v) in &doc.body {
        out.insert(k.clone(), v.clone());
    }
    if doc.deleted {
        out.insert("_deleted".into(), Value::Bool(true));
    }
    if let Some(path) = &doc.revisions {
        out.insert(
            "_revisions".into(),
            serde_json::json!({
                "start": path.start(),
                "ids": path.ids().iter().map(|h| h.to_string()).collect::<Vec<_>>(),
            }),
        );
    } else if let Some(rev) = &doc.rev {
        out.insert(
            "_revisions".into(),
            serde_json::json!({"start": rev.pos(), "ids": [rev.hash().to_string()]}),
        );
    }
    if !doc.attachments.is_empty() {
        let atts: Map<String, Value> = doc
            .attachments
            .iter()
            .map(|(name, att)| (name.clone(), stub_of(att)))
            .collect();
        out.insert("_attachments".into(), Value::Object(atts));
    }
    Value::Object(out)
}

fn stub_of(att: &AttachmentInput) -> Value {
    let mut m = Map::new();
    let (content_type, length, revpos) = match att {
        AttachmentInput::Stub { revpos, .. } => (None, None, *revpos),
        AttachmentInput::Inline {
            content_type,
            data,
            revpos,
        } => (Some(content_type), Some(data.len() as u64), *revpos),
        AttachmentInput::InlineGzip {
            content_type,
            length,
            revpos,
            ..
        } => (Some(content_type), Some(*length), *revpos),
        AttachmentInput::Follows {
            content_type,
            length,
            revpos,
            ..
        } => (Some(content_type), *length, *revpos),
        AttachmentInput::Staged {
            content_type,
            length,
            revpos,
            ..
        } => (Some(content_type), Some(*length), *revpos),
    };
    if let Some(content_type) = content_type {
        m.insert("content_type".into(), Value::String(content_type.clone()));
    }
    if let Some(revpos) = revpos {
        m.insert("revpos".into(), Value::from(revpos));
    }
    if let Some(length) = length {
        m.insert("length".into(), Value::from(length));
    }
    m.insert("stub".into(), Value::Bool(true));
    Value::Object(m)
}
