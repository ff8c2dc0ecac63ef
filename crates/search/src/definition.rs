//! A search index as its design document defines it, and the signature
//! that names its folder: anything that changes what is indexed changes
//! the signature, so an edited function gets a fresh index.

use std::collections::BTreeMap;
use std::sync::Arc;

use design_functions::DesignDoc;
use design_functions::search::SearchApi;
use md5::{Digest, Md5};
use serde_json::{Value, json};
use store::Database;

use crate::SearchError;

/// One index of a design document (`nouveau.NAME` or `indexes.NAME`).
#[derive(Debug, Clone)]
pub struct IndexDefinition {
    pub api: SearchApi,
    pub name: String,
    pub ddoc: DesignDoc,
    /// The analyzer of fields `field_analyzers` does not name.
    pub default_analyzer: String,
    pub field_analyzers: BTreeMap<String, String>,
    /// Documents are searched by partition (the design document is).
    pub partitioned: bool,
    /// A Mango index's definition: its fields come from Rust, not from a
    /// function.
    pub mango: Option<Arc<mango::text::TextIndex>>,
    pub signature: String,
}

impl IndexDefinition {
    /// Index `name` of `api` in design document `ddoc` (its JSON), with
    /// CouchDB's reasons when it is missing or malformed.
    pub fn of(
        database: &Database,
        ddoc: &Value,
        api: SearchApi,
        name: &str,
    ) -> Result<IndexDefinition, SearchError> {
        let entry = ddoc
            .get(api.section())
            .and_then(|section| section.get(name))
            .ok_or_else(|| SearchError::NotFound(format!("{name} not found.")))?;
        // Mango's indexes (`language: "query"`) are definitions, not code.
        let query = ddoc.get("language").and_then(Value::as_str) == Some("query");
        let source = match entry.get("index") {
            Some(Value::String(source)) if !query => source.clone(),
            Some(def @ Value::Object(_)) if query => def.to_string(),
            _ => {
                return Err(SearchError::InvalidDesignDoc(format!(
                    "index `{name}` must have parameter `index`"
                )));
            }
        };
        let mango = match entry.get("index") {
            Some(def) if query => Some(Arc::new(mango::text::TextIndex::of(def))),
            _ => None,
        };
        let (default_analyzer, field_analyzers) = match api {
            SearchApi::Nouveau => (
                entry
                    .get("default_analyzer")
                    .and_then(Value::as_str)
                    .unwrap_or("standard")
                    .to_string(),
                string_map(entry.get("field_analyzers")),
            ),
            SearchApi::Clouseau => clouseau_analyzers(entry.get("analyzer")),
        };
        for analyzer in field_analyzers
            .values()
            .chain(std::iter::once(&default_analyzer))
        {
            if crate::analyzer(analyzer).is_err() {
                return Err(SearchError::BadRequest(format!(
                    "{analyzer} is not a valid analyzer name"
                )));
            }
        }
        let partitioned = ddoc
            .pointer("/options/partitioned")
            .and_then(Value::as_bool)
            .unwrap_or(database.is_partitioned());
        let basis = json!({
            "api": api.section(),
            "index": source,
            "default_analyzer": default_analyzer,
            "field_analyzers": field_analyzers,
            "lucene_version": entry.get("lucene_version"),
            "partitioned": partitioned,
        });
        let digest = Md5::digest(basis.to_string().as_bytes());
        let signature = digest.iter().map(|b| format!("{b:02x}")).collect();
        let text = |k: &str| {
            ddoc.get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        Ok(IndexDefinition {
            api,
            name: name.to_string(),
            ddoc: DesignDoc {
                db: database.name().to_string(),
                id: text("_id"),
                rev: text("_rev"),
                json: ejson::to_string(ddoc).into(),
            },
            default_analyzer,
            field_analyzers,
            partitioned,
            mango,
            signature,
        })
    }

    /// The analyzer of field `name`.
    pub fn analyzer_of(&self, name: &str) -> &str {
        self.field_analyzers
            .get(name)
            .unwrap_or(&self.default_analyzer)
    }

    /// Every analyzer the index uses, each once, in a fixed order.
    pub fn analyzers(&self) -> Vec<String> {
        let mut all: Vec<String> = self.field_analyzers.values().cloned().collect();
        all.push(self.default_analyzer.clone());
        all.sort();
        all.dedup();
        all
    }
}

/// The signatures of every search index a database's design documents
/// define, for cleanup.
pub fn signatures_in_use(database: &Database, ddocs: &[Value]) -> Vec<String> {
    let mut keep = Vec::new();
    for ddoc in ddocs {
        for api in [SearchApi::Nouveau, SearchApi::Clouseau] {
            let Some(section) = ddoc.get(api.section()).and_then(Value::as_object) else {
                continue;
            };
            for name in section.keys() {
                if let Ok(def) = IndexDefinition::of(database, ddoc, api, name) {
                    keep.push(def.signature);
                }
            }
        }
    }
    keep
}

fn string_map(value: Option<&Value>) -> BTreeMap<String, String> {
    value
        .and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Clouseau's `analyzer`: a name, or `{"name": "perfield", "default": ..,
/// "fields": {..}}`.
fn clouseau_analyzers(value: Option<&Value>) -> (String, BTreeMap<String, String>) {
    match value {
        Some(Value::String(name)) => (name.clone(), BTreeMap::new()),
        Some(Value::Object(spec)) => {
            let default = spec
                .get("default")
                .and_then(Value::as_str)
                .unwrap_or("standard")
                .to_string();
            if spec.get("name").and_then(Value::as_str) == Some("perfield") {
                (default, string_map(spec.get("fields")))
            } else {
                let name = spec
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("standard");
                (name.to_string(), BTreeMap::new())
            }
        }
        _ => ("standard".to_string(), BTreeMap::new()),
    }
}
