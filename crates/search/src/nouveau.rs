//! Nouveau's request and response (CouchDB 3.4+, `_nouveau`): its
//! parameters with its checks and messages, its bookmark, the typed
//! `order` values, and the JSON of the answer.

use base64::Engine as _;
use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use serde_json::{Map, Value, json};

use crate::SearchError;
use crate::collect::{RangeSpec, SortValue};
use crate::request::{SearchRequest, SearchResults, SortSpec};

/// The default page size.
pub const DEFAULT_LIMIT: usize = 25;
/// The default number of values counted per field.
pub const DEFAULT_TOP_N: usize = 10;
/// Nouveau's bound on `top_n`.
const MAX_TOP_N: usize = 1000;

/// A `_nouveau` query's parameters, checked.
#[derive(Debug, Clone)]
pub struct NouveauParams {
    pub request: SearchRequest,
    pub include_docs: bool,
    pub update: bool,
    /// The bookmark given, returned when a page is empty.
    pub bookmark: Option<String>,
    pub counts_requested: bool,
    pub ranges_requested: bool,
}

fn parse_error(reason: impl Into<String>) -> SearchError {
    SearchError::QueryParse(reason.into())
}

impl NouveauParams {
    /// From a GET's query string: values are text, `sort`, `counts` and
    /// `ranges` are JSON.
    pub fn from_query(pairs: &[(String, String)]) -> Result<NouveauParams, SearchError> {
        let mut body = Map::new();
        for (key, text) in pairs {
            let value = match key.as_str() {
                "sort" | "counts" | "ranges" => serde_json::from_str(text).map_err(|_| {
                    SearchError::BadRequest(format!("invalid JSON in {key} parameter"))
                })?,
                "limit" | "top_n" => match text.parse::<i64>() {
                    Ok(n) => Value::from(n),
                    Err(_) => {
                        return Err(parse_error(format!("{key} parameter must be an integer")));
                    }
                },
                "include_docs" | "update" => match text.as_str() {
                    "true" => Value::Bool(true),
                    "false" => Value::Bool(false),
                    _ => {
                        return Err(parse_error(format!("Invalid value for {key}: \"{text}\"")));
                    }
                },
                _ => Value::String(text.clone()),
            };
            body.insert(key.clone(), value);
        }
        NouveauParams::from_body(&body)
    }

    /// From a POST's JSON body.
    pub fn from_body(body: &Map<String, Value>) -> Result<NouveauParams, SearchError> {
        let query = match body.get("q") {
            Some(Value::String(q)) => q.clone(),
            Some(_) => return Err(parse_error("q parameter must be a string")),
            None => return Err(parse_error("q parameter is mandatory")),
        };
        let limit = positive(body, "limit", DEFAULT_LIMIT)?;
        let top_n = positive(body, "top_n", DEFAULT_TOP_N)?;
        if top_n > MAX_TOP_N {
            return Err(parse_error(format!(
                "top_n parameter must be less than or equal to {MAX_TOP_N}"
            )));
        }
        let flag = |key: &str, default: bool| match body.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(parse_error(format!("Invalid value for {key}: {other}"))),
        };
        let include_docs = flag("include_docs", false)?;
        let update = flag("update", true)?;
        let sort = match body.get("sort") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(one)) => vec![sort_spec(one)?],
            Some(Value::Array(many)) => many
                .iter()
                .map(|item| match item {
                    Value::String(s) => sort_spec(s),
                    _ => Err(parse_error("all items in sort parameter must be strings")),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(parse_error(
                    "sort parameter must be a string or a list of strings",
                ));
            }
        };
        let counts = match body.get("counts") {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) => Some(
                items
                    .iter()
                    .map(|item| {
                        item.as_str().map(str::to_string).ok_or_else(|| {
                            parse_error("all items in counts parameter must be strings")
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            Some(_) => return Err(parse_error("counts parameter must be a list of strings")),
        };
        let ranges = match body.get("ranges") {
            None | Some(Value::Null) => None,
            Some(Value::Object(map)) => Some(
                map.iter()
                    .map(|(name, specs)| Ok((name.clone(), range_specs(specs)?)))
                    .collect::<Result<Vec<_>, SearchError>>()?,
            ),
            Some(_) => return Err(parse_error("ranges parameter must be an object")),
        };
        let bookmark = match body.get("bookmark") {
            None | Some(Value::Null) => None,
            Some(Value::String(b)) => Some(b.clone()),
            Some(_) => return Err(parse_error("bookmark parameter must be a string")),
        };
        let after = bookmark.as_deref().map(decode_bookmark).transpose()?;
        Ok(NouveauParams {
            request: SearchRequest {
                query,
                limit,
                sort,
                after,
                counts: counts.clone().unwrap_or_default(),
                top_n,
                ranges: ranges.clone().unwrap_or_default(),
                partition: None,
                drilldown: Vec::new(),
                cancel: None,
            },
            include_docs,
            update,
            bookmark,
            counts_requested: counts.is_some(),
            ranges_requested: ranges.is_some(),
        })
    }
}

/// A positive integer parameter (JSON numbers in a body, text on GET).
fn positive(body: &Map<String, Value>, key: &str, default: usize) -> Result<usize, SearchError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(n) if n > 0 => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
            Some(_) => Err(parse_error(format!(
                "{key} parameter must be greater than zero"
            ))),
            None => Err(parse_error(format!("{key} parameter must be an integer"))),
        },
        Some(_) => Err(parse_error(format!("{key} parameter must be an integer"))),
    }
}

/// One sort key: `<score>` (lowest first), `-<score>`, or a field name
/// with an optional `-`/`+`.
fn sort_spec(text: &str) -> Result<SortSpec, SearchError> {
    match text {
        "<score>" | "+<score>" => return Ok(SortSpec::Score { descending: false }),
        "-<score>" => return Ok(SortSpec::Score { descending: true }),
        _ => {}
    }
    let (descending, name) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c == '.' || c == '_' || c.is_alphanumeric());
    if !valid {
        return Err(SearchError::BadRequest(format!(
            "{text} is not a valid sort parameter"
        )));
    }
    Ok(SortSpec::Field {
        name: name.to_string(),
        descending,
    })
}

/// A field's ranges: `[{"label", "min"?, "max"?, "min_inclusive"?,
/// "max_inclusive"?}]`; a missing end is open.
fn range_specs(value: &Value) -> Result<Vec<RangeSpec>, SearchError> {
    let invalid = || parse_error("range values must be lists of objects");
    let Value::Array(items) = value else {
        return Err(invalid());
    };
    items
        .iter()
        .map(|item| {
            let Value::Object(spec) = item else {
                return Err(invalid());
            };
            let bound = |key: &str| match spec.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v
                    .as_f64()
                    .map(Some)
                    .ok_or_else(|| parse_error(format!("range {key} must be a number"))),
            };
            let inclusive = |key: &str| spec.get(key).and_then(Value::as_bool).unwrap_or(true);
            Ok(RangeSpec {
                label: spec
                    .get("label")
                    .and_then(Value::as_str)
                    .ok_or_else(|| parse_error("range label must be a string"))?
                    .to_string(),
                min: bound("min")?,
                max: bound("max")?,
                min_inclusive: inclusive("min_inclusive"),
                max_inclusive: inclusive("max_inclusive"),
            })
        })
        .collect()
}

/// A hit's sort value as Nouveau types it in `order`.
pub fn order_value(value: &SortValue) -> Value {
    match value {
        SortValue::Score(score) => json!({"@type": "float", "value": f64::from(*score)}),
        SortValue::Double(v) => json!({"@type": "double", "value": v}),
        SortValue::Str(s) => json!({"@type": "string", "value": s}),
        SortValue::Null => json!({"@type": "null"}),
    }
}

fn sort_value(value: &Value) -> Option<SortValue> {
    Some(match value.get("@type")?.as_str()? {
        "float" => SortValue::Score(value.get("value")?.as_f64()? as f32),
        "double" => SortValue::Double(value.get("value")?.as_f64()?),
        "string" => SortValue::Str(value.get("value")?.as_str()?.to_string()),
        "null" => SortValue::Null,
        _ => return None,
    })
}

/// The bookmark after `order`: base64url of `[[order...]]` (one list per
/// shard range, as CouchDB writes it; there is one here).
pub fn encode_bookmark(order: &[SortValue]) -> String {
    let list: Vec<Value> = order.iter().map(order_value).collect();
    URL_SAFE_NO_PAD.encode(json!([list]).to_string())
}

/// The `order` a bookmark resumes after.
pub fn decode_bookmark(bookmark: &str) -> Result<Vec<SortValue>, SearchError> {
    let invalid = || SearchError::BadRequest("Invalid bookmark".into());
    let bytes = URL_SAFE_NO_PAD
        .decode(bookmark.trim_end_matches('='))
        .or_else(|_| URL_SAFE.decode(bookmark))
        .map_err(|_| invalid())?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    let order = value
        .as_array()
        .and_then(|shards| shards.first())
        .and_then(Value::as_array)
        .ok_or_else(invalid)?;
    order
        .iter()
        .map(|v| sort_value(v).ok_or_else(invalid))
        .collect()
}

/// The answer's JSON, with `docs` (by hit, when `include_docs`) and the
/// milliseconds the index update took.
pub fn response(
    params: &NouveauParams,
    results: &SearchResults,
    docs: Option<Vec<Value>>,
    update_latency_ms: u64,
) -> Value {
    let bookmark = match results.hits.last() {
        Some(last) => encode_bookmark(&last.order),
        None => params
            .bookmark
            .clone()
            .unwrap_or_else(|| encode_bookmark(&[])),
    };
    let mut docs = docs.map(Vec::into_iter);
    let hits: Vec<Value> = results
        .hits
        .iter()
        .map(|hit| {
            let mut out = json!({
                "id": hit.id,
                "order": hit.order.iter().map(order_value).collect::<Vec<_>>(),
                "fields": hit.fields,
            });
            if let Some(doc) = docs.as_mut().and_then(Iterator::next) {
                out["doc"] = doc;
            }
            out
        })
        .collect();
    let grouped = |groups: &[(String, Vec<(String, u64)>)]| {
        Value::Object(
            groups
                .iter()
                .map(|(name, values)| {
                    (
                        name.clone(),
                        Value::Object(
                            values
                                .iter()
                                .map(|(label, n)| (label.clone(), Value::from(*n)))
                                .collect(),
                        ),
                    )
                })
                .collect(),
        )
    };
    json!({
        "total_hits": results.total,
        "total_hits_relation": "EQUAL_TO",
        "hits": hits,
        "bookmark": bookmark,
        "counts": if params.counts_requested { grouped(&results.counts) } else { Value::Null },
        "ranges": if params.ranges_requested { grouped(&results.ranges) } else { Value::Null },
        "update_latency": update_latency_ms,
    })
}

/// `_nouveau_info`'s answer.
pub fn info(ddoc_id: &str, name: &str, index: &crate::SearchIndex) -> Value {
    let committed = index.committed();
    json!({
        "name": format!("{ddoc_id}/{name}"),
        "search_index": {
            "update_seq": committed.update_seq,
            "purge_seq": committed.purge_seq,
            "num_docs": index.num_docs(),
            "disk_size": index.disk_size(),
            "signature": index.definition().signature,
        }
    })
}
