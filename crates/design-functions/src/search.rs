//! Search index functions: `nouveau.<name>.index` (CouchDB's Nouveau) and
//! `indexes.<name>.index` (Clouseau's `_search`), run on the pool as map
//! functions are. Each call of `index(...)` in the function is one field
//! of the document's entry in that index; the search engine decides what
//! each kind of field becomes.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use rquickjs::function::This;
use rquickjs::{Ctx, Exception, Function};
use serde_json::Value;

use crate::sandbox::{Answer, CallIo};
use crate::{DesignDoc, Engine, JsError, json_lines, thrown_error};

/// Which API's index functions, and so which `index()` they call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchApi {
    /// `index(type, name, value[, {store}])` in `nouveau`.
    Nouveau,
    /// `index(name, value[, {store, index, facet}])` in `indexes`.
    Clouseau,
}

impl SearchApi {
    /// The design document's section holding the index definitions.
    pub fn section(self) -> &'static str {
        match self {
            SearchApi::Nouveau => "nouveau",
            SearchApi::Clouseau => "indexes",
        }
    }
}

/// What a field is, as the function named it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// Nouveau's `text`: analyzed.
    Text,
    /// Nouveau's `string`: one term, sortable and countable.
    String,
    /// Nouveau's `double`: a number, for ranges and sorting.
    Double,
    /// Nouveau's `stored`: only returned.
    Stored,
    /// Clouseau's: typed by its value (a string is analyzed text and a
    /// sortable term; a number a double).
    Auto,
}

/// One `index(...)` call.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexedField {
    pub kind: FieldKind,
    pub name: String,
    /// A string or a number (a boolean became `"true"`/`"false"`).
    pub value: Value,
    pub store: bool,
    pub facet: bool,
    /// Clouseau's `{index: false}`: stored (or counted) only.
    pub searchable: bool,
}

/// Per document, per index: its fields, or `None` when the function
/// threw for it (the document is then left out of that index).
pub type IndexedDocs = Vec<Vec<Option<Vec<IndexedField>>>>;

impl Engine {
    /// Runs the index functions `names` of `api` on each document (JSON
    /// text, one per entry).
    pub async fn index_fields(
        &self,
        ddoc: DesignDoc,
        api: SearchApi,
        names: &[String],
        docs: &[String],
    ) -> Result<IndexedDocs, JsError> {
        let section = serde_json::to_string(api.section()).unwrap_or_default();
        let names_json = serde_json::to_string(names).unwrap_or_else(|_| "[]".into());
        let gathered = Arc::new(Mutex::new(Gathered::new(self.limits.memory)));
        let answer = self
            .pool
            .call_with(
                ddoc,
                "index",
                vec![section, names_json, json_lines(docs)],
                CallIo::Index(gathered.clone()),
            )
            .await?;
        match answer {
            Answer::Ok(_) => {}
            Answer::Error(error, reason) => return Err(JsError::Runtime { error, reason }),
            Answer::Thrown(thrown) => return Err(thrown_error(thrown)),
        }
        let gathered = std::mem::take(&mut *gathered.lock().unwrap_or_else(|p| p.into_inner()));
        if gathered.overflowed {
            return Err(JsError::OutOfMemory);
        }
        if gathered.docs.len() != docs.len() {
            return Err(JsError::Internal(
                "the index functions answered for another number of documents".into(),
            ));
        }
        Ok(gathered.docs)
    }
}

/// The fields one call's index functions name, gathered on the engine's
/// thread as `index()` is called, so that no JSON text comes between the
/// functions and the index (a page of long texts would be quoted and
/// parsed again for nothing). Bounded by the engine's memory limit, as
/// the functions' own values are.
#[derive(Debug, Default)]
pub(crate) struct Gathered {
    /// Functions per document.
    functions: usize,
    /// The running function's fields.
    fields: Vec<IndexedField>,
    /// The current document's, per function so far.
    doc: Vec<Option<Vec<IndexedField>>>,
    docs: IndexedDocs,
    bytes: usize,
    limit: usize,
    overflowed: bool,
}

impl Gathered {
    fn new(limit: usize) -> Gathered {
        Gathered {
            limit,
            ..Gathered::default()
        }
    }

    fn field(&mut self, field: IndexedField) {
        let size = FIELD_OVERHEAD
            + field.name.len()
            + field.value.as_str().map(str::len).unwrap_or_default();
        self.bytes = self.bytes.saturating_add(size);
        if self.bytes > self.limit {
            self.overflowed = true;
        } else {
            self.fields.push(field);
        }
    }

    /// The running function ended: its fields are the document's entry
    /// in its index when it returned, none when it threw.
    fn done(&mut self, document: usize, kept: bool) -> Result<(), &'static str> {
        if document != self.docs.len() {
            return Err("index functions ended out of order");
        }
        let fields = std::mem::take(&mut self.fields);
        self.doc.push(kept.then_some(fields));
        if self.doc.len() >= self.functions {
            self.docs.push(std::mem::take(&mut self.doc));
        }
        Ok(())
    }
}

/// What a field costs beside its text, for the memory bound.
const FIELD_OVERHEAD: usize = 64;

/// The host's side of `index()`: `__couch_index_begin(functions)`,
/// `__couch_index_field(kind, name, value, store, facet, searchable)` and
/// `__couch_index_done(document, kept)`, which the prelude takes for
/// itself (design functions cannot reach them).
pub(crate) fn install(
    ctx: &Ctx<'_>,
    slot: Rc<RefCell<Option<Arc<Mutex<Gathered>>>>>,
) -> rquickjs::Result<()> {
    let gathering = slot.clone();
    let begin = Function::new(ctx.clone(), move |functions: usize| {
        with_gathered(&gathering, |g| {
            *g = Gathered {
                functions: functions.max(1),
                ..Gathered::new(g.limit)
            };
        });
    })?;
    let gathering = slot.clone();
    let field = Function::new(
        ctx.clone(),
        move |kind: String,
              name: String,
              value: rquickjs::Value<'_>,
              store: bool,
              facet: bool,
              searchable: bool|
              -> rquickjs::Result<()> {
            let kind = match kind.as_str() {
                "text" => FieldKind::Text,
                "string" => FieldKind::String,
                "double" => FieldKind::Double,
                "stored" => FieldKind::Stored,
                _ => FieldKind::Auto,
            };
            let value = if let Some(text) = value.as_string() {
                Value::String(utf8(text)?)
            } else {
                value.as_number().map(number_value).unwrap_or(Value::Null)
            };
            with_gathered(&gathering, |g| {
                g.field(IndexedField {
                    kind,
                    name,
                    value,
                    store,
                    facet,
                    searchable,
                })
            });
            Ok(())
        },
    )?;
    let gathering = slot;
    let done = Function::new(
        ctx.clone(),
        move |ctx: Ctx<'_>, document: usize, kept: bool| -> rquickjs::Result<()> {
            let ended = with_gathered(&gathering, |g| g.done(document, kept));
            match ended {
                Some(Err(message)) => Err(Exception::throw_internal(&ctx, message)),
                _ => Ok(()),
            }
        },
    )?;
    let globals = ctx.globals();
    globals.set("__couch_index_begin", begin)?;
    globals.set("__couch_index_field", field)?;
    globals.set("__couch_index_done", done)?;
    Ok(())
}

/// A string as UTF-8; lone surrogates (which have none) become U+FFFD, as
/// in a JSON text of it read back.
fn utf8(text: &rquickjs::String<'_>) -> rquickjs::Result<String> {
    match text.to_string() {
        Ok(text) => Ok(text),
        Err(_) => {
            let string: rquickjs::Object = text.ctx().globals().get("String")?;
            let prototype: rquickjs::Object = string.get("prototype")?;
            let well_formed: Function = prototype.get("toWellFormed")?;
            let fixed: rquickjs::String = well_formed.call((This(text.clone()),))?;
            fixed.to_string()
        }
    }
}

/// A number as `JSON.stringify` writes it and CouchDB reads it back: an
/// integer when it has no fraction, null for NaN and the infinities (no
/// JSON number, so nothing to index).
fn number_value(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9.2e18 {
        return Value::from(n as i64);
    }
    serde_json::Number::from_f64(n)
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

/// Runs `work` on the running call's gathering, when it gathers.
fn with_gathered<T>(
    slot: &Rc<RefCell<Option<Arc<Mutex<Gathered>>>>>,
    work: impl FnOnce(&mut Gathered) -> T,
) -> Option<T> {
    let slot = slot.borrow();
    let gathered = slot.as_ref()?;
    let mut gathered = gathered.lock().unwrap_or_else(|p| p.into_inner());
    Some(work(&mut gathered))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn engine() -> Engine {
        Engine::new(crate::Limits::default())
    }

    fn ddoc(body: Value) -> DesignDoc {
        DesignDoc {
            db: "db".into(),
            id: "_design/search".into(),
            rev: "1-a".into(),
            json: body.to_string().into(),
        }
    }

    #[tokio::test]
    async fn nouveau_functions_index_typed_fields_and_skip_documents_they_throw_on() {
        let doc = ddoc(json!({"_id": "_design/search", "nouveau": {
            "main": {"index": "function (doc) { index('text', 'title', doc.title, {store: true}); if (doc.n !== undefined) index('double', 'n', doc.n); index('string', 'cat', doc.cat || 'none'); }"},
            "strict": {"index": "function (doc) { index('double', 'n', doc.title); }"},
            "reserved": {"index": "function (doc) { index('string', '_id', 'x'); }"},
            "odd": {"index": "function (doc) { index('boolean', 'b', true); }"},
        }}));
        let names: Vec<String> = ["main", "strict", "reserved", "odd"]
            .map(String::from)
            .to_vec();
        let docs = vec![
            json!({"_id": "a", "title": "Hello there", "n": 3, "cat": "x"}).to_string(),
            json!({"_id": "b", "title": "Hi"}).to_string(),
        ];
        let out = engine()
            .index_fields(doc, SearchApi::Nouveau, &names, &docs)
            .await
            .unwrap();
        assert_eq!(out.len(), 2);
        let main = out[0][0].as_ref().unwrap();
        assert_eq!(main.len(), 3);
        assert_eq!(main[0].kind, FieldKind::Text);
        assert_eq!(main[0].name, "title");
        assert_eq!(main[0].value, json!("Hello there"));
        assert!(main[0].store);
        assert_eq!(main[1].kind, FieldKind::Double);
        assert_eq!(main[1].value, json!(3));
        assert!(!main[1].store);
        assert_eq!(out[1][0].as_ref().unwrap()[1].value, json!("none"));
        // A wrong type, a reserved name, an unknown type: the document is
        // left out of that index only.
        for (i, refused) in out[0].iter().enumerate().skip(1) {
            assert_eq!(*refused, None, "index {i}");
        }
    }

    #[tokio::test]
    async fn clouseau_functions_type_fields_by_their_values() {
        let doc = ddoc(json!({"_id": "_design/search", "indexes": {
            "all": {"index": "function (doc) { index('default', doc.title); index('n', doc.n, {store: true, facet: true}); index('flag', doc.ok, {index: false, store: 'yes'}); }"},
            "bad": {"index": "function (doc) { index('x', {a: 1}); }"},
        }}));
        let names: Vec<String> = ["all", "bad"].map(String::from).to_vec();
        let docs = vec![json!({"_id": "a", "title": "Hello", "n": 2.5, "ok": true}).to_string()];
        let out = engine()
            .index_fields(doc, SearchApi::Clouseau, &names, &docs)
            .await
            .unwrap();
        let all = out[0][0].as_ref().unwrap();
        assert!(all.iter().all(|f| f.kind == FieldKind::Auto));
        assert_eq!(all[0].name, "default");
        assert!(all[0].searchable && !all[0].store);
        assert_eq!(all[1].value, json!(2.5));
        assert!(all[1].store && all[1].facet);
        assert_eq!(all[2].value, json!("true"));
        assert!(all[2].store && !all[2].searchable);
        assert_eq!(out[0][1], None);
    }

    #[tokio::test]
    async fn a_function_that_throws_after_indexing_keeps_nothing_and_numbers_read_as_json() {
        let doc = ddoc(json!({"_id": "_design/search", "nouveau": {
            "half": {"index": "function (doc) { index('double', 'n', doc.n); if (doc.boom) throw new Error('boom'); index('text', 't', doc.t); }"},
        }}));
        let names = vec!["half".to_string()];
        let docs = vec![
            r#"{"_id": "a", "n": 2.5, "t": "x\ud800y"}"#.to_string(),
            json!({"_id": "b", "n": 1e300, "boom": true}).to_string(),
            "not json".to_string(),
            json!({"_id": "c", "n": -0.0, "t": "z"}).to_string(),
        ];
        let out = engine()
            .index_fields(doc, SearchApi::Nouveau, &names, &docs)
            .await
            .unwrap();
        assert_eq!(out.len(), 4, "one answer per document, in order");
        let a = out[0][0].as_ref().unwrap();
        assert_eq!(a[0].value, json!(2.5));
        // A lone surrogate cannot be UTF-8: it is read as the replacement
        // character, as a JSON text of it would be.
        assert_eq!(a[1].value, json!("x\u{fffd}y"));
        assert_eq!(out[1][0], None, "a function that threw keeps no field");
        assert_eq!(out[2], vec![None], "a document that is no JSON is skipped");
        assert_eq!(out[3][0].as_ref().unwrap()[0].value, json!(0));
    }

    #[tokio::test]
    async fn index_functions_cannot_reach_the_hosts_gathering() {
        let doc = ddoc(json!({"_id": "_design/search", "nouveau": {
            "sly": {"index": "function (doc) { index('text', 't', doc.t); __couch_index_done(0, true); }"},
            "probe": {"index": "function (doc) { index('string', 'seen', typeof __couch_index_field); }"},
        }}));
        let names = vec!["sly".to_string(), "probe".to_string()];
        let docs = vec![
            json!({"_id": "a", "t": "one"}).to_string(),
            json!({"_id": "b", "t": "two"}).to_string(),
        ];
        let out = engine()
            .index_fields(doc, SearchApi::Nouveau, &names, &docs)
            .await
            .unwrap();
        assert_eq!(out.len(), 2);
        for per_doc in &out {
            assert_eq!(per_doc[0], None, "the function threw a ReferenceError");
            assert_eq!(per_doc[1].as_ref().unwrap()[0].value, json!("undefined"));
        }
    }

    #[tokio::test]
    async fn what_index_functions_gather_is_bounded_by_the_engines_memory() {
        let engine = Engine::new(crate::Limits {
            memory: 8 << 20,
            ..crate::Limits::default()
        });
        let doc = ddoc(json!({"_id": "_design/search", "nouveau": {
            "flood": {"index": "function (doc) { var s = new Array(1025).join('x'); for (var i = 0; i < 20000; i++) index('text', 't', s); }"},
        }}));
        let docs = vec![json!({"_id": "a"}).to_string()];
        let flooded = engine
            .index_fields(
                doc.clone(),
                SearchApi::Nouveau,
                &["flood".to_string()],
                &docs,
            )
            .await;
        assert!(matches!(flooded, Err(JsError::OutOfMemory)), "{flooded:?}");
    }
}
