//! Search index functions: `nouveau.<name>.index` (CouchDB's Nouveau) and
//! `indexes.<name>.index` (Clouseau's `_search`), run on the pool as map
//! functions are. Each call of `index(...)` in the function is one field
//! of the document's entry in that index; the search engine decides what
//! each kind of field becomes.

use serde_json::Value;

use crate::sandbox::Answer;
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

impl IndexedField {
    fn of(entry: Value) -> Option<IndexedField> {
        let Value::Array(parts) = entry else {
            return None;
        };
        let kind = match parts.first()?.as_str()? {
            "text" => FieldKind::Text,
            "string" => FieldKind::String,
            "double" => FieldKind::Double,
            "stored" => FieldKind::Stored,
            "auto" => FieldKind::Auto,
            _ => return None,
        };
        let flag = |i: usize| parts.get(i).and_then(Value::as_bool).unwrap_or(false);
        Some(IndexedField {
            kind,
            name: parts.get(1)?.as_str()?.to_string(),
            value: parts.get(2)?.clone(),
            store: flag(3),
            facet: flag(4),
            searchable: parts.get(5).and_then(Value::as_bool).unwrap_or(true),
        })
    }
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
        let answer = self
            .pool
            .call(ddoc, "index", vec![section, names_json, json_lines(docs)])
            .await?;
        let value = match answer {
            Answer::Ok(value) => value,
            Answer::Error(error, reason) => return Err(JsError::Runtime { error, reason }),
            Answer::Thrown(thrown) => return Err(thrown_error(thrown)),
        };
        let Value::Array(per_doc) = value else {
            return Err(JsError::Internal(
                "an index function answered no list".into(),
            ));
        };
        Ok(per_doc
            .into_iter()
            .map(|per_index| match per_index {
                Value::Array(indexes) => indexes
                    .into_iter()
                    .map(|fields| match fields {
                        Value::Array(fields) => {
                            Some(fields.into_iter().filter_map(IndexedField::of).collect())
                        }
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            })
            .collect())
    }
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
}
