//! Mango's full-text indexes of type `nouveau` (CouchDB's
//! `mango_idx_nouveau`): the definition `_index` validates and writes into
//! a design document's `nouveau` section, how such an index is listed,
//! whether it can answer a selector, and the sort it is asked for.

use serde_json::{Map, Value, json};

use super::MangoError;
use super::find::FindRequest;

/// CouchDB's `nouveau.max_limit`: the most documents one query returns.
pub const MAX_LIMIT: u64 = 200;

/// A nouveau index, as its design document holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct NouveauIndex {
    /// `_design/...`.
    pub ddoc: String,
    pub name: String,
    /// The stored definition (`nouveau.NAME.index`).
    pub def: Value,
    pub partitioned: bool,
}

impl NouveauIndex {
    /// The nouveau indexes of a design document (none unless its language
    /// is `query`); one whose definition does not validate is skipped, as
    /// CouchDB skips it.
    pub fn of_design_doc(doc: &Value, db_partitioned: bool) -> Vec<NouveauIndex> {
        if doc.get("language").and_then(Value::as_str) != Some("query") {
            return Vec::new();
        }
        let Some(id) = doc.get("_id").and_then(Value::as_str) else {
            return Vec::new();
        };
        let partitioned = doc
            .pointer("/options/partitioned")
            .and_then(Value::as_bool)
            .unwrap_or(db_partitioned);
        let Some(section) = doc.get("nouveau").and_then(Value::as_object) else {
            return Vec::new();
        };
        section
            .iter()
            .filter_map(|(name, entry)| {
                let def = entry.get("index")?;
                super::nouveau_def::validate(def).ok()?;
                Some(NouveauIndex {
                    ddoc: id.to_string(),
                    name: name.clone(),
                    def: def.clone(),
                    partitioned,
                })
            })
            .collect()
    }

    /// The index as `GET /db/_index` lists it (`def_to_json`): fields as
    /// `[{"name": "type"}]`, an empty partial filter left out.
    pub fn describe(&self) -> Value {
        let mut def = Map::new();
        if let Value::Object(stored) = &self.def {
            for (key, value) in stored {
                match (key.as_str(), value) {
                    ("fields", Value::Array(fields)) => {
                        let shown: Vec<Value> = fields
                            .iter()
                            .filter_map(|f| {
                                let name = f.get("name")?.as_str()?;
                                Some(json!({ name: f.get("type")? }))
                            })
                            .collect();
                        def.insert(key.clone(), Value::Array(shown));
                    }
                    ("fields", _) => {
                        def.insert(key.clone(), json!([]));
                    }
                    ("partial_filter_selector", Value::Object(m)) if m.is_empty() => {}
                    _ => {
                        def.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        json!({
            "ddoc": self.ddoc,
            "name": self.name,
            "type": "nouveau",
            "partitioned": self.partitioned,
            "def": def,
        })
    }

    /// `name:type` of each indexed field, `$default` first when the
    /// default field is on; `None` when every field is indexed.
    pub fn columns(&self) -> Option<Vec<String>> {
        let Some(Value::Array(fields)) = self.def.get("fields") else {
            return None;
        };
        let enabled = match self.def.get("default_field") {
            Some(Value::Object(opts)) => {
                opts.get("enabled").and_then(Value::as_bool) != Some(false)
            }
            Some(Value::Bool(b)) => *b,
            _ => true,
        };
        let mut out = Vec::new();
        if enabled {
            out.push("$default".to_string());
        }
        out.extend(fields.iter().filter_map(|f| {
            Some(format!(
                "{}:{}",
                f.get("name")?.as_str()?,
                f.get("type")?.as_str()?
            ))
        }));
        Some(out)
    }

    /// A partial index answers only a query that names it.
    pub fn is_partial(&self) -> bool {
        ["partial_filter_selector", "selector"].iter().any(|k| {
            self.def
                .get(*k)
                .and_then(Value::as_object)
                .is_some_and(|m| !m.is_empty())
        })
    }

    /// `mango_idx_nouveau:is_usable`: not for the empty selector; an index
    /// of every field for any other; else one with every column the
    /// selector's query asks.
    pub fn is_usable(&self, req: &FindRequest) -> bool {
        if req.selector_json.as_object().is_some_and(Map::is_empty) {
            return false;
        }
        match self.columns() {
            None => true,
            Some(columns) => req
                .selector
                .text_fields()
                .iter()
                .all(|f| columns.contains(f)),
        }
    }

    /// Whether `use_index` (a design document, maybe a name) names it.
    pub fn is_named(&self, use_index: &Option<(String, Option<String>)>) -> bool {
        match use_index {
            Some((ddoc, name)) => {
                self.ddoc.strip_prefix("_design/") == Some(ddoc.as_str())
                    && name.as_ref().is_none_or(|n| *n == self.name)
            }
            None => false,
        }
    }
}

/// The sort of a query on a nouveau index: each field's escaped name and
/// whether descending. A field must name its type (`bar:number`).
pub fn sort_fields(req: &FindRequest) -> Result<Vec<(String, bool)>, MangoError> {
    req.sort
        .iter()
        .map(|field| {
            if !(field.ends_with(":string") || field.ends_with(":number")) {
                return Err(MangoError::bad(
                    "text_sort_error",
                    format!(
                        "Unspecified or ambiguous sort type. Try appending :number or :string to the sort field. {field}"
                    ),
                ));
            }
            Ok((crate::text::escape_user(field), req.descending))
        })
        .collect()
}

/// The sort as `_explain` shows it (`-name` when descending), or null.
pub fn explain_sort(req: &FindRequest) -> Value {
    if req.sort.is_empty() {
        return Value::Null;
    }
    Value::Array(
        req.sort
            .iter()
            .map(|f| {
                let name = crate::text::escape_user(f);
                Value::String(if req.descending {
                    format!("-{name}")
                } else {
                    name
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::nouveau_def::new_entry;

    #[test]
    fn an_index_is_listed_and_has_the_columns_couchdb_gives_it() {
        let entry = new_entry(&json!({"fields": [{"name": "foo", "type": "string"}]})).unwrap();
        let index = NouveauIndex {
            ddoc: "_design/d".into(),
            name: "n".into(),
            def: entry["index"].clone(),
            partitioned: false,
        };
        assert_eq!(
            index.describe()["def"].to_string(),
            r#"{"default_analyzer":"keyword","default_field":{},"selector":{},"fields":[{"foo":"string"}],"index_array_lengths":true}"#
        );
        assert_eq!(index.columns().unwrap(), ["$default", "foo:string"]);
    }
}
