//! How `POST /db/_index` reads a definition of type `nouveau`
//! (`mango_idx_nouveau:validate_new`) and the design document entry it
//! writes (`make_text`), apart from the queries, so index definitions do
//! not depend on `_find`.

use serde_json::{Map, Value, json};

use super::{MangoError, erlang_pretty, erlang_text};

/// The design document entry for a new index (`make_text`): the
/// validated definition and the analyzer CouchDB derives from it.
pub fn new_entry(index: &Value) -> Result<Value, MangoError> {
    let def = validate(index)?;
    Ok(json!({"index": def, "analyzer": analyzer(&def)}))
}

fn invalid_key(key: &str) -> MangoError {
    MangoError::bad(
        "invalid_key",
        format!("Invalid key {key} for this request."),
    )
}

/// `do_validate`: the options in CouchDB's order, each defaulted.
pub(crate) fn validate(index: &Value) -> Result<Value, MangoError> {
    let Value::Object(given) = index else {
        return Err(MangoError {
            status: 500,
            error: "unknown_error".into(),
            reason: format!(
                "Unknown Error: mango_idx_nouveau :: {{invalid_index_text,{}}}",
                erlang_text(index)
            ),
        });
    };
    const KEYS: [&str; 6] = [
        "default_analyzer",
        "default_field",
        "partial_filter_selector",
        "selector",
        "fields",
        "index_array_lengths",
    ];
    if let Some(bad) = given.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(invalid_key(bad));
    }
    let mut def = Map::new();
    def.insert(
        "default_analyzer".into(),
        given
            .get("default_analyzer")
            .cloned()
            .unwrap_or_else(|| json!("keyword")),
    );
    def.insert(
        "default_field".into(),
        given
            .get("default_field")
            .cloned()
            .unwrap_or_else(|| json!({})),
    );
    for key in ["partial_filter_selector", "selector"] {
        let value = match given.get(key) {
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
        def.insert(key.into(), value);
    }
    def.insert("fields".into(), fields(given.get("fields"))?);
    let lengths = match given.get("index_array_lengths") {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(MangoError::bad(
                "invalid_boolean",
                format!("Invalid boolean value: {}", erlang_text(other)),
            ));
        }
    };
    def.insert("index_array_lengths".into(), Value::Bool(lengths));
    Ok(Value::Object(def))
}

/// `validate_fields`: `"all_fields"` or `[]` for every field, else each
/// exactly `{"name": non-empty, "type": "boolean|number|string|text"}`.
fn fields(value: Option<&Value>) -> Result<Value, MangoError> {
    let all = json!("all_fields");
    let list = match value {
        None => return Ok(all),
        Some(Value::String(s)) if s == "all_fields" => return Ok(all),
        Some(Value::Array(list)) if list.is_empty() => return Ok(all),
        Some(Value::Array(list)) => list,
        Some(other) => return Err(bad_fields(other)),
    };
    for field in list {
        let good = field.as_object().is_some_and(|m| {
            m.len() == 2
                && m.get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| !n.is_empty())
                && m.get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| ["text", "string", "number", "boolean"].contains(&t))
        });
        if !good {
            return Err(bad_fields(value.unwrap_or(&Value::Null)));
        }
    }
    Ok(Value::Array(list.clone()))
}

fn bad_fields(fields: &Value) -> MangoError {
    MangoError::bad(
        "invalid_index_fields_definition",
        format!(
            "Text Index field definitions must be of the form\n            {{\"name\": \"non-empty fieldname\", \"type\":\n                \"boolean,number,string or text\"}}. Def: {}",
            erlang_pretty(fields)
        ),
    )
}

/// `construct_analyzer`: per field, `$default` by the default field's
/// analyzer (standard), the rest by `default_analyzer`.
fn analyzer(def: &Value) -> Value {
    let (enabled, field_analyzer) = match def.get("default_field") {
        Some(Value::Bool(b)) => (*b, json!("standard")),
        Some(Value::Object(opts)) => (
            opts.get("enabled").and_then(Value::as_bool).unwrap_or(true),
            opts.get("analyzer")
                .cloned()
                .unwrap_or_else(|| json!("standard")),
        ),
        _ => (true, json!("standard")),
    };
    if !enabled {
        return json!("keyword");
    }
    json!({
        "name": "perfield",
        "default": def.get("default_analyzer").cloned().unwrap_or_else(|| json!("keyword")),
        "fields": {"$default": field_analyzer},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_definition_is_stored_as_couchdb_stores_it() {
        let entry = new_entry(&json!({"fields": [{"name": "foo", "type": "string"}]})).unwrap();
        assert_eq!(
            entry.to_string(),
            r#"{"index":{"default_analyzer":"keyword","default_field":{},"partial_filter_selector":{},"selector":{},"fields":[{"name":"foo","type":"string"}],"index_array_lengths":true},"analyzer":{"name":"perfield","default":"keyword","fields":{"$default":"standard"}}}"#
        );
        let all = new_entry(&json!({})).unwrap();
        assert_eq!(all["index"]["fields"], "all_fields");
    }

    #[test]
    fn bad_definitions_get_couchdbs_errors() {
        let e = new_entry(&json!({"fields": [{"name": "foo"}]})).unwrap_err();
        assert_eq!(e.error, "invalid_index_fields_definition");
        assert!(
            e.reason.ends_with("Def: [{[{<<\"name\">>,<<\"foo\">>}]}]"),
            "{}",
            e.reason
        );
        let e = new_entry(&json!({"foo": 1})).unwrap_err();
        assert_eq!(e.reason, "Invalid key foo for this request.");
        let e = new_entry(&json!({"index_array_lengths": 1})).unwrap_err();
        assert_eq!(e.reason, "Invalid boolean value: 1");
    }
}
