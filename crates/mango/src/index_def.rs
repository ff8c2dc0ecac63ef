//! Mango's JSON indexes: how `POST /db/_index` is read, the design
//! document view CouchDB writes for it (`language: "query"`), the names it
//! generates, and how an index is listed.

use serde_json::{Map, Value, json};
use sha1::{Digest, Sha1};

use super::etf::{self, Term};
use super::{MangoError, erlang_pretty, erlang_text};

/// A JSON index, as its design document holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexDef {
    /// `_design/...`.
    pub ddoc: String,
    pub name: String,
    /// The indexed fields, in order.
    pub fields: Vec<String>,
    /// The direction the definition names (it does not change the index).
    pub descending: bool,
    /// The normalized `partial_filter_selector`, when there is one.
    pub partial: Option<Value>,
    pub partitioned: bool,
}

impl IndexDef {
    /// The JSON indexes of a design document (none unless its language is `query`).
    pub fn of_design_doc(doc: &Value, db_partitioned: bool) -> Vec<IndexDef> {
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
        let Some(views) = doc.get("views").and_then(Value::as_object) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (name, view) in views {
            let Some(map) = view.get("map").and_then(Value::as_object) else {
                continue;
            };
            let Some(Value::Object(fields)) = map.get("fields") else {
                continue;
            };
            let descending = fields.values().any(|d| d == "desc");
            let partial = map
                .get("partial_filter_selector")
                .filter(|p| p.as_object().is_some_and(|m| !m.is_empty()))
                .cloned();
            out.push(IndexDef {
                ddoc: id.to_string(),
                name: name.clone(),
                fields: fields.keys().cloned().collect(),
                descending,
                partial,
                partitioned,
            });
        }
        out
    }

    /// The index as `GET /db/_index` lists it.
    pub fn describe(&self) -> Value {
        let dir = if self.descending { "desc" } else { "asc" };
        let fields: Vec<Value> = self
            .fields
            .iter()
            .map(|f| json!({ f.as_str(): dir }))
            .collect();
        let mut def = json!({ "fields": fields });
        if let Some(partial) = &self.partial {
            def["partial_filter_selector"] = partial.clone();
        }
        json!({
            "ddoc": self.ddoc,
            "name": self.name,
            "type": "json",
            "partitioned": self.partitioned,
            "def": def,
        })
    }
}

/// The special index every database has: documents by id.
pub fn all_docs_description() -> Value {
    json!({"ddoc": null, "name": "_all_docs", "type": "special", "def": {"fields": [{"_id": "asc"}]}})
}

/// A `POST /db/_index` request, checked.
#[derive(Debug, Clone)]
pub struct NewIndex {
    /// `_design/...`.
    pub ddoc: String,
    pub name: String,
    /// The design document's section the index goes in: `views` for a
    /// JSON index, `nouveau` for a full-text one.
    pub section: &'static str,
    /// The entry to put in that section under `name`.
    pub view: Value,
    /// Given explicitly: written into the design document's options.
    pub partitioned: Option<bool>,
}

fn invalid_key(key: &str) -> MangoError {
    MangoError::bad(
        "invalid_key",
        format!("Invalid key {key} for this request."),
    )
}

fn missing(key: &str) -> MangoError {
    MangoError::bad(
        "missing_required_key",
        format!("Missing required key: {key}"),
    )
}

/// Reads `POST /db/_index` as CouchDB's `mango_opts` does.
pub fn parse_new_index(body: &Value) -> Result<NewIndex, MangoError> {
    let Value::Object(map) = body else {
        return Err(MangoError::bad(
            "bad_request",
            "Request body must be a JSON object".into(),
        ));
    };
    for key in map.keys() {
        if !["index", "type", "name", "ddoc", "w", "partitioned"].contains(&key.as_str()) {
            return Err(invalid_key(key));
        }
    }
    let index = map.get("index").ok_or_else(|| missing("index"))?;
    let kind = match map.get("type") {
        None => "json".to_string(),
        Some(Value::String(t)) => t.clone(),
        Some(other) => {
            return Err(MangoError::bad(
                "invalid_string",
                format!("Invalid string: {}", erlang_text(other)),
            ));
        }
    };
    match kind.as_str() {
        "json" => {}
        "nouveau" => {
            let (ddoc, name, w, partitioned) = options(map)?;
            let view = super::nouveau_def::new_entry(index)?;
            let generated = gen_name(index, &ddoc, &name, partitioned, &kind, w);
            return Ok(NewIndex {
                ddoc: ddoc_id(&ddoc, &generated),
                name: name.unwrap_or(generated),
                section: "nouveau",
                view,
                partitioned,
            });
        }
        "text" => {
            return Err(MangoError {
                status: 503,
                error: "required index service unavailable".into(),
                reason: kind,
            });
        }
        other => {
            return Err(MangoError::bad(
                "invalid_index",
                format!("Invalid type for index: {other}"),
            ));
        }
    }
    let Value::Object(def) = index else {
        return Err(MangoError::bad(
            "invalid_index",
            format!(
                "JSON indexes must be an object, not: {}",
                erlang_text(index)
            ),
        ));
    };
    for key in def.keys() {
        if key != "fields" && key != "partial_filter_selector" {
            return Err(invalid_key(key));
        }
    }
    let (fields, descending) = sort_fields(def.get("fields").ok_or_else(|| missing("fields"))?)?;
    let partial = match def.get("partial_filter_selector") {
        None => json!({}),
        Some(selector @ Value::Object(_)) => {
            crate::selector::Selector::parse(selector)
                .map_err(|e| MangoError::bad("invalid_selector", e.0))?;
            super::normal::normalize(selector)
        }
        Some(other) => {
            return Err(MangoError::bad(
                "invalid_selector_json",
                format!("Selector must be a JSON object, not: {}", other),
            ));
        }
    };
    let (ddoc, name, w, partitioned) = options(map)?;
    let generated = gen_name(index, &ddoc, &name, partitioned, &kind, w);
    let ddoc_id = ddoc_id(&ddoc, &generated);
    let name = name.unwrap_or(generated);
    let dir = if descending { "desc" } else { "asc" };
    let mut map_fields = Map::new();
    for f in &fields {
        map_fields.insert(f.clone(), Value::String(dir.into()));
    }
    let view = json!({
        "map": {"fields": map_fields, "partial_filter_selector": partial},
        "reduce": "_count",
        "options": {"def": index},
    });
    Ok(NewIndex {
        ddoc: ddoc_id,
        name,
        section: "views",
        view,
        partitioned,
    })
}

/// `_design/` and the design document asked for, or the generated name.
fn ddoc_id(ddoc: &Option<String>, generated: &str) -> String {
    match ddoc {
        Some(d) if d.starts_with("_design/") => d.clone(),
        Some(d) => format!("_design/{d}"),
        None => format!("_design/{generated}"),
    }
}

/// The request's `ddoc`, `name`, `w` and `partitioned`, checked.
type Options = (Option<String>, Option<String>, u64, Option<bool>);

fn options(map: &Map<String, Value>) -> Result<Options, MangoError> {
    let text = |key: &str| -> Result<Option<String>, MangoError> {
        match map.get(key) {
            None => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Err(MangoError::bad(
                "invalid_empty_string",
                "Index name or ddoc cannot be empty string".into(),
            )),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(MangoError::bad(
                "invalid_string",
                format!("Invalid string: {}", erlang_text(other)),
            )),
        }
    };
    let ddoc = text("ddoc")?;
    let name = text("name")?;
    let w = match map.get("w") {
        None => 2,
        Some(v) => match v.as_u64() {
            Some(n) if n > 0 => n,
            _ => {
                return Err(MangoError::bad(
                    "invalid_pos_integer",
                    format!("{} is not an integer greater than zero", erlang_text(v)),
                ));
            }
        },
    };
    let partitioned = match map.get("partitioned") {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(other) => {
            return Err(MangoError {
                status: 500,
                error: "unknown_error".into(),
                reason: format!(
                    "Unknown Error: mango_opts :: {{invalid_partitioned_value,{}}}",
                    erlang_text(other)
                ),
            });
        }
    };
    Ok((ddoc, name, w, partitioned))
}

/// Sort specs (`"f"` or `{"f": "asc"|"desc"}`), one direction for all.
pub fn sort_fields(spec: &Value) -> Result<(Vec<String>, bool), MangoError> {
    let Value::Array(items) = spec else {
        return Err(MangoError::bad(
            "invalid_sort_json",
            format!(
                "Sort must be an array of sort specs, not: {}",
                erlang_pretty(spec)
            ),
        ));
    };
    let bad = |item: &Value| {
        MangoError::bad(
            "invalid_sort_field",
            format!("Invalid sort field: {}", erlang_pretty(item)),
        )
    };
    let mut fields = Vec::with_capacity(items.len());
    let mut directions = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Value::String(f) if !f.is_empty() => {
                fields.push(f.clone());
                directions.push(false);
            }
            Value::Object(m) if m.len() == 1 => {
                let Some((f, dir)) = m.iter().next() else {
                    return Err(bad(item));
                };
                let descending = match dir.as_str() {
                    Some("asc") => false,
                    Some("desc") => true,
                    _ => return Err(bad(item)),
                };
                if f.is_empty() {
                    return Err(bad(item));
                }
                fields.push(f.clone());
                directions.push(descending);
            }
            Value::String(_) | Value::Object(_) => return Err(bad(item)),
            other => {
                return Err(MangoError::bad(
                    "invalid_sort_field",
                    format!("Invalid sort field: {}", erlang_text(other)),
                ));
            }
        }
    }
    if directions.windows(2).any(|w| w[0] != w[1]) {
        return Err(MangoError::bad(
            "unsupported_mixed_sort",
            "Sorts currently only support a single direction for all fields.".into(),
        ));
    }
    Ok((fields, directions.first().copied().unwrap_or(false)))
}

/// CouchDB's generated index name: the SHA-1 of the definition and the
/// options in Erlang's term format, so the same request names the same
/// index on either server.
fn gen_name(
    def: &Value,
    ddoc: &Option<String>,
    name: &Option<String>,
    partitioned: Option<bool>,
    kind: &str,
    w: u64,
) -> String {
    let auto = |v: &Option<String>| match v {
        Some(s) => Term::Binary(s.clone()),
        None => Term::Atom("auto_name".into()),
    };
    let option = |name: &str, value: Term| Term::Tuple(vec![Term::Atom(name.into()), value]);
    let opts = Term::List(vec![
        option("ddoc", auto(ddoc)),
        option("def", Term::json(def)),
        option("name", auto(name)),
        option(
            "partitioned",
            Term::Atom(match partitioned {
                None => "db_default".into(),
                Some(b) => b.to_string(),
            }),
        ),
        option("type", Term::Binary(kind.into())),
        option("w", Term::Int(i128::from(w))),
    ]);
    let term = Term::Tuple(vec![Term::json(def), opts]);
    Sha1::digest(etf::encode(&term))
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_are_couchdbs() {
        let cases = [
            (
                json!({"index": {"fields": ["age"]}}),
                "ae8325de4e40689e6a6f4843a539d4b91f68c4f1",
            ),
            (
                json!({"index": {"fields": [{"name": "asc"}, "age"]}, "type": "json", "w": 3}),
                "46e96e64d76b2d72d270662487131f3d838690bb",
            ),
            (
                json!({"index": {"fields": ["tags"], "partial_filter_selector": {"age": {"$gt": 1.5}}}, "partitioned": false}),
                "7d4d02d491161faddd983ed82b065fa00b41f2b4",
            ),
            (
                json!({"index": {"fields": ["n"], "partial_filter_selector": {"n": {"$in": [1, 2, 300]}, "s": {"$in": [1, 2]}, "f": 1.5, "z": null, "t": true, "neg": -5, "big": 99999999999i64}}}),
                "261808633f014fda834978a4980f35565862e670",
            ),
        ];
        for (body, want) in cases {
            let made = parse_new_index(&body).unwrap();
            assert_eq!(made.name, want, "{body}");
            assert_eq!(made.ddoc, format!("_design/{want}"));
        }
        let named =
            parse_new_index(&json!({"index": {"fields": ["city", "age"]}, "name": "foo"})).unwrap();
        assert_eq!(
            named.ddoc,
            "_design/4aed170b7145ebe06d16bc689f8139a84fe2d276"
        );
        assert_eq!(named.name, "foo");
    }

    #[test]
    fn bad_definitions_get_couchdbs_errors() {
        let cases = [
            (
                json!({}),
                "missing_required_key",
                "Missing required key: index",
            ),
            (
                json!({"index": {}}),
                "missing_required_key",
                "Missing required key: fields",
            ),
            (
                json!({"index": {"fields": [{"a": "asc"}, {"b": "desc"}]}}),
                "unsupported_mixed_sort",
                "Sorts currently only support a single direction for all fields.",
            ),
            (
                json!({"index": {"fields": ["a"]}, "type": "foo"}),
                "invalid_index",
                "Invalid type for index: foo",
            ),
            (
                json!({"index": {"fields": [""]}}),
                "invalid_sort_field",
                "Invalid sort field: <<>>",
            ),
            (
                json!({"index": {"fields": [1]}}),
                "invalid_sort_field",
                "Invalid sort field: 1",
            ),
            (
                json!({"index": {"fields": [{"a": "up"}]}}),
                "invalid_sort_field",
                "Invalid sort field: {[{<<\"a\">>,<<\"up\">>}]}",
            ),
            (
                json!({"index": {"fields": "a"}}),
                "invalid_sort_json",
                "Sort must be an array of sort specs, not: <<\"a\">>",
            ),
            (
                json!({"index": "a"}),
                "invalid_index",
                "JSON indexes must be an object, not: <<97>>",
            ),
            (
                json!({"index": {"fields": ["a"]}, "name": ""}),
                "invalid_empty_string",
                "Index name or ddoc cannot be empty string",
            ),
            (
                json!({"index": {"fields": ["a"]}, "ddoc": 5}),
                "invalid_string",
                "Invalid string: 5",
            ),
            (
                json!({"index": {"fields": ["a"]}, "w": 0}),
                "invalid_pos_integer",
                "0 is not an integer greater than zero",
            ),
            (
                json!({"index": {"fields": ["a"], "foo": 1}}),
                "invalid_key",
                "Invalid key foo for this request.",
            ),
            (
                json!({"index": {"fields": ["a"]}, "foo": 1}),
                "invalid_key",
                "Invalid key foo for this request.",
            ),
        ];
        for (body, error, reason) in cases {
            let e = parse_new_index(&body).unwrap_err();
            assert_eq!(
                (e.error.as_str(), e.reason.as_str()),
                (error, reason),
                "{body}"
            );
        }
        let text =
            parse_new_index(&json!({"index": {"fields": ["a"]}, "type": "text"})).unwrap_err();
        let nouveau =
            parse_new_index(&json!({"index": {}, "type": "nouveau", "name": "n"})).unwrap();
        assert_eq!((nouveau.section, nouveau.name.as_str()), ("nouveau", "n"));
        assert_eq!((text.status, text.reason.as_str()), (503, "text"));
    }
}
