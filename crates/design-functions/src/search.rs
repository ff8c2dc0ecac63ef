//! Search index functions: `nouveau.<name>.index` (CouchDB's Nouveau) and
//! `indexes.<name>.index` (Clouseau's `_search`), run on the pool as map
//! functions are. Each call of `index(...)` in the function is one field
//! of the document's entry in that index; the search engine decides what
//! each kind of field becomes.

use std::sync::{Arc, Mutex};

use crate::index_fields::Gathered;
pub use crate::index_fields::{FieldKind, IndexedDocs, IndexedField};
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
        let section = ejson::to_string_of(api.section()).unwrap_or_default();
        let names_json = ejson::to_string_of(names).unwrap_or_else(|_| "[]".into());
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
        gathered.finish(docs.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

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
