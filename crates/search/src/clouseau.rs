//! Clouseau's `_search` (CouchDB with dreyfus and Clouseau, Cloudant): its
//! parameters with dreyfus's checks and messages, its bookmark, its plain
//! `order` values, grouping and highlights, and the JSON of the answer. The
//! searching itself is `SearchIndex::search`.

use std::collections::HashSet;

use base64::Engine as _;
use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use serde_json::{Map, Value, json};

use crate::SearchError;
use crate::collect::{RangeSpec, SortKey, SortValue, compare_values};
use crate::query_syntax::{self, Endpoint, Node, Occur, WildPiece};
use crate::request::{Hit, SearchRequest, SortSpec};
use crate::schema::Kind;
use crate::{SearchIndex, nouveau};

/// dreyfus's page size: default and maximum (`limit`, `max_limit`).
pub const LIMITS: (usize, usize) = (25, 200);
/// The same in a partitioned database (`limit_partitions`, ...).
pub const PARTITIONED_LIMITS: (usize, usize) = (2000, 2000);
/// `max_group_limit`, also the most groups answered.
pub const MAX_GROUP_LIMIT: usize = 200;
/// dreyfus's default number of groups (`#grouping.limit`).
const DEFAULT_GROUP_LIMIT: usize = 10;
/// Grouping runs one search per distinct value of `group_field`: values
/// beyond the most frequent this many are not grouped, bounding the work
/// (at most a thousand small searches per request).
pub const MAX_GROUP_VALUES: usize = 1_000;

fn parse_error(reason: impl Into<String>) -> SearchError {
    SearchError::QueryParse(reason.into())
}

fn bad(reason: impl Into<String>) -> SearchError {
    SearchError::BadRequest(reason.into())
}

/// How highlights are asked for.
#[derive(Debug, Clone)]
pub struct Highlight {
    pub fields: Vec<String>,
    pub pre_tag: String,
    pub post_tag: String,
    pub number: usize,
    pub size: usize,
}

/// A `_search` request's parameters as dreyfus reads them; `check` applies
/// the restrictions it checks once the design document is known.
#[derive(Debug, Clone, Default)]
pub struct ClouseauParams {
    pub query: Option<String>,
    pub partition: Option<String>,
    limit: Option<Value>,
    /// `stale=ok`: search what is indexed without updating.
    pub stale: bool,
    pub include_docs: bool,
    include_fields: Option<Value>,
    pub bookmark: Option<String>,
    sort: Option<Value>,
    counts: Option<Value>,
    ranges: Option<Value>,
    drilldown: Vec<Value>,
    group_field: Option<Value>,
    group_sort: Option<Value>,
    group_limit: Option<usize>,
    highlight_fields: Option<Value>,
    pre_tag: Option<Value>,
    post_tag: Option<Value>,
    highlight_number: Option<usize>,
    highlight_size: Option<usize>,
}

impl ClouseauParams {
    /// From a GET's query string (`dreyfus_httpd:parse_index_param`): most
    /// values are JSON, `q`, `bookmark`, `group_field` and `partition` text.
    pub fn from_query(pairs: &[(String, String)]) -> Result<ClouseauParams, SearchError> {
        let mut p = ClouseauParams::default();
        for (key, text) in pairs {
            let value = match key.as_str() {
                "q" | "query" | "partition" | "bookmark" | "group_field" | "group_limit"
                | "highlight_number" | "highlight_size" => Value::String(text.clone()),
                "stale" if text != "ok" => {
                    return Err(parse_error("stale only available as stale=ok"));
                }
                "include_docs" => match text.as_str() {
                    "true" | "false" => Value::Bool(text == "true"),
                    _ => {
                        let shown = format!("{text:?}");
                        return Err(parse_error(format!(
                            "Invalid value for include_docs: {shown}"
                        )));
                    }
                },
                "limit" => serde_json::from_str(text).unwrap_or_else(|_| text.as_str().into()),
                "sort" | "group_sort" | "include_fields" | "counts" | "ranges" | "drilldown"
                | "highlight_fields" | "highlight_pre_tag" | "highlight_post_tag" => {
                    serde_json::from_str(text)
                        .map_err(|_| bad(format!("invalid JSON in {key} parameter: {text}")))?
                }
                _ => Value::String(text.clone()),
            };
            p.set(key, value)?;
        }
        Ok(p)
    }

    /// From a POST's JSON body (`parse_json_index_param`); a `partition`
    /// in the query string counts as one more.
    pub fn from_body(
        body: &Map<String, Value>,
        qs_partition: Option<&str>,
    ) -> Result<ClouseauParams, SearchError> {
        let mut p = ClouseauParams::default();
        if let Some(partition) = qs_partition {
            p.set_partition(partition)?;
        }
        for (key, value) in body {
            p.set(key, value.clone())?;
        }
        Ok(p)
    }

    /// One parameter; unknown ones are ignored, as dreyfus's `extra`.
    fn set(&mut self, key: &str, value: Value) -> Result<(), SearchError> {
        match key {
            "q" | "query" => self.query = value.as_str().map(str::to_string),
            "partition" => match value {
                Value::String(s) => self.set_partition(&s)?,
                _ => return Err(bad("`partition` must be a string")),
            },
            "bookmark" => self.bookmark = value.as_str().map(str::to_string),
            "limit" => self.limit = Some(value),
            "stale" => self.stale = value.as_str() == Some("ok"),
            "include_docs" => {
                if let Value::Bool(b) = value {
                    self.include_docs = b;
                }
            }
            "group_field" => self.group_field = Some(value),
            "group_limit" => self.group_limit = Some(group_limit(&value)?),
            "highlight_number" => self.highlight_number = Some(positive(key, &value)?),
            "highlight_size" => self.highlight_size = Some(positive(key, &value)?),
            "sort" => self.sort = Some(value),
            "group_sort" => self.group_sort = Some(value),
            "include_fields" => self.include_fields = Some(value),
            "counts" => self.counts = Some(value),
            "ranges" => self.ranges = Some(value),
            "drilldown" => self.add_drilldown(value),
            "highlight_fields" => self.highlight_fields = Some(value),
            "highlight_pre_tag" => self.pre_tag = Some(value),
            "highlight_post_tag" => self.post_tag = Some(value),
            _ => {}
        }
        Ok(())
    }

    fn set_partition(&mut self, partition: &str) -> Result<(), SearchError> {
        match &self.partition {
            Some(known) if known != partition => {
                Err(bad("Multiple conflicting values for `partition` provided"))
            }
            _ => {
                self.partition = Some(partition.to_string());
                Ok(())
            }
        }
    }

    /// dreyfus: a list of lists replaces the drilldowns so far, anything
    /// else is one more.
    fn add_drilldown(&mut self, value: Value) {
        match value {
            Value::Array(items) if matches!(items.first(), Some(Value::Array(first)) if !first.is_empty()) =>
            {
                self.drilldown = items;
            }
            other => self.drilldown.push(other),
        }
    }

    /// dreyfus's `validate_search_restrictions`, in its order; the page size.
    pub fn check(
        &self,
        db_partitioned: bool,
        index_partitioned: bool,
    ) -> Result<usize, SearchError> {
        if self.query.is_none() {
            return Err(parse_error("Query must include a 'q' or 'query' argument"));
        }
        let partition = self.partition.is_some();
        if partition && !(db_partitioned && index_partitioned) {
            return Err(bad("`partition` not supported on this index"));
        }
        if index_partitioned && !partition {
            return Err(bad(
                "`partition` parameter is mandatory for queries to this index.",
            ));
        }
        let (default, max) = if db_partitioned {
            PARTITIONED_LIMITS
        } else {
            LIMITS
        };
        let limit = match &self.limit {
            None => default,
            Some(value) => {
                let n = int_param("limit", value)?;
                if n > max as i64 {
                    return Err(parse_error(format!(
                        "Value for limit is too large, must not exceed {max}"
                    )));
                }
                if n < 0 {
                    return Err(parse_error("limit must be greater than or equal to zero"));
                }
                usize::try_from(n).unwrap_or(0)
            }
        };
        let restricted = self.counts.is_some()
            || !self.drilldown.is_empty()
            || self.ranges.is_some()
            || self.group_sort.is_some()
            || self.group_field.is_some()
            || self.group_limit.is_some();
        if partition && restricted {
            return Err(bad(
                "`partition` and any of `drilldown`, `ranges`, `group_field`, `group_sort`, `group_limit` or `group_by` are incompatible",
            ));
        }
        Ok(limit)
    }

    /// The stored fields to answer (`include_fields`), when limited.
    fn include_fields(&self) -> Result<Option<HashSet<String>>, SearchError> {
        self.include_fields
            .as_ref()
            .map(|v| strings_of(v, "include_fields").map(|names| names.into_iter().collect()))
            .transpose()
    }

    fn highlight(&self) -> Result<Option<Highlight>, SearchError> {
        let Some(fields) = &self.highlight_fields else {
            return Ok(None);
        };
        let tag = |value: &Option<Value>, default: &str| match value {
            None => Ok(default.to_string()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(bad(format!("{other} is not a valid highlight tag"))),
        };
        Ok(Some(Highlight {
            fields: strings_of(fields, "highlight_fields")?,
            pre_tag: tag(&self.pre_tag, "<em>")?,
            post_tag: tag(&self.post_tag, "</em>")?,
            number: self.highlight_number.unwrap_or(1),
            // dreyfus's 0 leaves Lucene's `SimpleFragmenter` at 100 chars.
            size: self.highlight_size.unwrap_or(100),
        }))
    }
}

/// An integer parameter: a JSON integer, or text that is one.
fn int_param(name: &str, value: &Value) -> Result<i64, SearchError> {
    let invalid = |shown: String| parse_error(format!("Invalid value for {name}: {shown}"));
    match value {
        Value::Number(n) => n.as_i64().ok_or_else(|| invalid(n.to_string())),
        Value::String(s) => s
            .trim()
            .parse::<i64>()
            .map_err(|_| invalid(format!("{s:?}"))),
        other => Err(invalid(other.to_string())),
    }
}

/// dreyfus's `parse_positive_int_param2`.
fn positive(name: &str, value: &Value) -> Result<usize, SearchError> {
    let n = int_param(name, value)?;
    if n <= 0 {
        return Err(parse_error(format!("{name} must be greater than zero")));
    }
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// `group_limit`: positive, at most `max_group_limit`.
fn group_limit(value: &Value) -> Result<usize, SearchError> {
    let n = int_param("group_limit", value)?;
    if n > MAX_GROUP_LIMIT as i64 {
        return Err(parse_error(format!(
            "Value for group_limit is too large, must not exceed {MAX_GROUP_LIMIT}"
        )));
    }
    positive("group_limit", value)
}

/// A list of strings, or Clouseau's `X is not a valid NAME query`.
fn strings_of(value: &Value, name: &str) -> Result<Vec<String>, SearchError> {
    let invalid = || bad(format!("{value} is not a valid {name} query"));
    value
        .as_array()
        .ok_or_else(invalid)?
        .iter()
        .map(|item| item.as_str().map(str::to_string).ok_or_else(invalid))
        .collect()
}

/// Clouseau's `SORT_FIELD_RE`, `^([-+])?([\.\w]+)(?:<(\w+)>)?$`: the sign,
/// the name and the type.
fn sort_field(text: &str) -> Option<(bool, &str, Option<&str>)> {
    let (descending, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let (name, kind) = match rest.find('<') {
        Some(at) => {
            let kind = rest[at + 1..].strip_suffix('>')?;
            if kind.is_empty() || !kind.chars().all(|c| c == '_' || c.is_alphanumeric()) {
                return None;
            }
            (&rest[..at], Some(kind))
        }
        None => (rest, None),
    };
    let word = |c: char| c == '.' || c == '_' || c.is_alphanumeric();
    (!name.is_empty() && name.chars().all(word)).then_some((descending, name, kind))
}

/// One of Clouseau's sort keys. `<score>` is Lucene's inverse score sort
/// (lowest first), `-<score>` best first; Lucene's `<doc>` (index order)
/// becomes `_id` order, the only stable order here.
fn sort_spec(index: &SearchIndex, text: &str) -> Result<SortSpec, SearchError> {
    match text {
        "<score>" => return Ok(SortSpec::Score { descending: false }),
        "-<score>" => return Ok(SortSpec::Score { descending: true }),
        "<doc>" | "-<doc>" => {
            return Ok(SortSpec::Field {
                name: "_id".into(),
                descending: text.starts_with('-'),
            });
        }
        _ => {}
    }
    if text
        .trim_start_matches(['-', '+'])
        .starts_with("<distance,")
    {
        return Err(bad(format!("geo distance sort is not supported: {text}")));
    }
    let Some((descending, name, kind)) = sort_field(text) else {
        return Err(bad(format!("Unrecognized sort parameter: {text}")));
    };
    match kind {
        None | Some("string") => {}
        Some("number") => {
            if matches!(
                index.committed().registry.get(name),
                Some(Kind::Text | Kind::String)
            ) {
                return Err(bad("cannot sort string field as numeric field"));
            }
        }
        Some(other) => return Err(bad(format!("Unrecognized type: {other}"))),
    }
    Ok(SortSpec::Field {
        name: name.to_string(),
        descending,
    })
}

/// `sort` or `group_sort`: `"relevance"`, a string or a list of strings.
fn sort_specs(index: &SearchIndex, value: Option<&Value>) -> Result<Vec<SortSpec>, SearchError> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) if s == "relevance" => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![sort_spec(index, s)?]),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => sort_spec(index, s),
                other => Err(bad(format!("Unrecognized sort parameter: {other}"))),
            })
            .collect(),
        Some(other) => Err(bad(format!("Unrecognized sort parameter: {other}"))),
    }
}

/// Clouseau's `drilldown`: lists of a field and the values one of which a
/// hit must have.
fn drilldowns(items: &[Value]) -> Result<Vec<(String, Vec<String>)>, SearchError> {
    items
        .iter()
        .map(|item| {
            let Some(list) = item.as_array().filter(|l| l.len() >= 2) else {
                return Err(bad(format!("invalid drilldown query {item}")));
            };
            let mut strings = list.iter().map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| bad(format!("{item} contains non-string element {v}")))
            });
            let field = strings.next().unwrap_or_else(|| Ok(String::new()))?;
            Ok((field, strings.collect::<Result<_, _>>()?))
        })
        .collect()
}

/// `ranges`: `{"field": {"label": "[0 TO 100]", ...}}` in query syntax.
fn ranges(value: &Value) -> Result<Vec<(String, Vec<RangeSpec>)>, SearchError> {
    let Value::Object(fields) = value else {
        return Err(bad("invalid ranges query"));
    };
    fields
        .iter()
        .map(|(name, labels)| {
            let Value::Object(labels) = labels else {
                return Err(bad(format!("{value} is not a valid ranges query")));
            };
            let specs = labels
                .iter()
                .map(|(label, query)| {
                    let query = query.as_str().ok_or_else(|| bad("invalid ranges query"))?;
                    range_spec(label, query)
                })
                .collect::<Result<_, _>>()?;
            Ok((name.clone(), specs))
        })
        .collect()
}

fn range_spec(label: &str, query: &str) -> Result<RangeSpec, SearchError> {
    let malformed = || bad(format!("{query} was not a well-formed range specification"));
    let Ok(Node::Range { lower, upper, .. }) = query_syntax::parse(query) else {
        return Err(malformed());
    };
    let bound = |end: &Endpoint| -> Result<(Option<f64>, bool), SearchError> {
        match end {
            Endpoint::Open => Ok((None, true)),
            Endpoint::Included(t) | Endpoint::Excluded(t) => {
                let n: f64 = t.trim().parse().map_err(|_| malformed())?;
                let inclusive = matches!(end, Endpoint::Included(_));
                Ok((n.is_finite().then_some(n), inclusive))
            }
        }
    };
    let (min, min_inclusive) = bound(&lower)?;
    let (max, max_inclusive) = bound(&upper)?;
    Ok(RangeSpec {
        label: label.to_string(),
        min,
        max,
        min_inclusive,
        max_inclusive,
    })
}

/// A row of the answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub id: String,
    pub order: Vec<Value>,
    pub fields: Map<String, Value>,
    pub highlights: Option<Map<String, Value>>,
}

/// A group of a grouped search.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub by: String,
    pub total: u64,
    pub rows: Vec<Row>,
}

/// What a `_search` found, ready to be answered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    pub total: u64,
    pub rows: Vec<Row>,
    pub bookmark: String,
    pub counts: Option<Value>,
    pub ranges: Option<Value>,
    /// Set for a grouped search (`group_field`).
    pub groups: Option<Vec<Group>>,
}

/// Runs a checked request (blocking): `limit` from `check`, `base` holding
/// the partition and the reader scope.
pub fn run(
    index: &SearchIndex,
    params: &ClouseauParams,
    limit: usize,
    base: SearchRequest,
) -> Result<Outcome, SearchError> {
    let query = params.query.clone().unwrap_or_default();
    let sort = sort_specs(index, params.sort.as_ref())?;
    let mut request = SearchRequest {
        query: query.clone(),
        limit,
        sort: sort.clone(),
        drilldown: drilldowns(&params.drilldown)?,
        top_n: usize::MAX,
        ..base
    };
    let include = params.include_fields()?;
    let highlight = params.highlight()?;
    let highlighter = highlight
        .as_ref()
        .map(|h| Highlighter::new(index, &query, h))
        .transpose()?;
    let shape = |hits: &[Hit], at: usize, keys: usize| -> Vec<Row> {
        hits.iter()
            .enumerate()
            .map(|(i, hit)| row(hit, at + i, keys, include.as_ref(), highlighter.as_ref()))
            .collect()
    };
    if let Some(group) = &params.group_field {
        let field = group_field(group)?;
        let group_sort = sort_specs(index, params.group_sort.as_ref())?;
        let groups = params.group_limit.unwrap_or(DEFAULT_GROUP_LIMIT);
        let (total, found) = grouped(index, &request, &field, &group_sort, groups)?;
        let keys = sort.len().max(1);
        return Ok(Outcome {
            total,
            groups: Some(
                found
                    .into_iter()
                    .map(|(by, n, hits)| Group {
                        by,
                        total: n,
                        rows: shape(&hits, 0, keys),
                    })
                    .collect(),
            ),
            ..Outcome::default()
        });
    }
    if let Some(counts) = &params.counts {
        request.counts = strings_of(counts, "counts")?;
    }
    if let Some(value) = &params.ranges {
        request.ranges = ranges(value)?;
    }
    let keys = effective_keys(&request.sort);
    let mut at = 0;
    if let Some(bookmark) = &params.bookmark {
        let (offset, after) = decode_bookmark(bookmark)?;
        // An empty order (a bookmark of an empty first page) starts over.
        if !after.is_empty() {
            if after.len() != keys {
                return Err(bad("sort order not compatible with given bookmark"));
            }
            at = offset;
            request.after = Some(after);
        }
    }
    let results = index.search(&request)?;
    let bookmark = match results.hits.last() {
        Some(last) => encode_bookmark(at + results.hits.len(), &last.order),
        None => params
            .bookmark
            .clone()
            .unwrap_or_else(|| encode_bookmark(0, &[])),
    };
    Ok(Outcome {
        total: results.total,
        rows: shape(&results.hits, at, sort.len().max(1)),
        bookmark,
        counts: params.counts.as_ref().map(|_| facets(&results.counts)),
        ranges: params.ranges.as_ref().map(|_| facets(&results.ranges)),
        groups: None,
    })
}

/// The number of values in a hit's `order` under `sort` (`_id` is added
/// as the last key unless it is one).
fn effective_keys(sort: &[SortSpec]) -> usize {
    let keys = sort.len().max(1);
    match sort.last() {
        Some(SortSpec::Field { name, .. }) if name == "_id" => keys,
        _ => keys + 1,
    }
}

/// Clouseau's `group_field`: a string field, maybe `name<string>`.
fn group_field(value: &Value) -> Result<String, SearchError> {
    let text = value
        .as_str()
        .ok_or_else(|| bad(format!("Unrecognized group_field parameter: {value}")))?;
    match sort_field(text) {
        Some((_, name, None | Some("string"))) => Ok(name.to_string()),
        Some((_, _, Some("number"))) => Err(bad(
            "Group by number not supported. Group by string terms only.",
        )),
        Some((_, _, Some(other))) => Err(bad(format!("Unrecognized group_field value: {other}"))),
        None => Err(bad(format!("Unrecognized group_field parameter: {text}"))),
    }
}

type Found = (String, u64, Vec<Hit>);

/// Grouping as Lucene's two passes: the groups (each value of `field`
/// among the hits, at most `MAX_GROUP_VALUES`) ordered by their best hit
/// under `group_sort`, the first `groups` of them, each with its first
/// `request.limit` hits under `request.sort`. Documents without the field
/// form no group.
fn grouped(
    index: &SearchIndex,
    request: &SearchRequest,
    field: &str,
    group_sort: &[SortSpec],
    groups: usize,
) -> Result<(u64, Vec<Found>), SearchError> {
    let values = index.search(&SearchRequest {
        limit: 0,
        counts: vec![field.to_string()],
        top_n: MAX_GROUP_VALUES,
        ..request.clone()
    })?;
    let in_group = |value: &str| {
        let mut r = request.clone();
        r.drilldown
            .push((field.to_string(), vec![value.to_string()]));
        r
    };
    let mut best: Vec<(String, u64, Vec<SortValue>)> = Vec::new();
    for (value, n) in values.counts.into_iter().flat_map(|(_, v)| v) {
        let first = index.search(&SearchRequest {
            limit: 1,
            sort: group_sort.to_vec(),
            ..in_group(&value)
        })?;
        if let Some(hit) = first.hits.into_iter().next() {
            best.push((value, n, hit.order));
        }
    }
    let descending = directions(group_sort);
    best.sort_by(|a, b| compare_values(&a.2, &b.2, &descending).then_with(|| a.0.cmp(&b.0)));
    best.truncate(groups);
    let mut found = Vec::with_capacity(best.len());
    for (value, n, _) in best {
        let page = index.search(&in_group(&value))?;
        found.push((value, n, page.hits));
    }
    Ok((values.total, found))
}

/// `sort` as the engine's keys with `_id` last. Only their directions
/// matter here: they order hits already collected.
fn directions(sort: &[SortSpec]) -> Vec<SortKey> {
    let mut keys: Vec<SortKey> = sort
        .iter()
        .map(|s| match s {
            SortSpec::Score { descending } | SortSpec::Field { descending, .. } => SortKey::Score {
                descending: *descending,
            },
        })
        .collect();
    if keys.is_empty() {
        keys.push(SortKey::Score { descending: true });
    }
    keys.push(SortKey::Score { descending: false });
    keys
}

/// A hit as a row. Its `order` is its sort values then, where Lucene puts
/// its shard-local document number, the hit's position in the result.
fn row(
    hit: &Hit,
    position: usize,
    keys: usize,
    include: Option<&HashSet<String>>,
    highlighter: Option<&Highlighter>,
) -> Row {
    let mut order: Vec<Value> = hit.order.iter().take(keys).map(plain).collect();
    order.push(Value::from(position));
    let fields: Map<String, Value> = match include {
        Some(names) => hit
            .fields
            .iter()
            .filter(|(k, _)| names.contains(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        None => hit.fields.clone(),
    };
    Row {
        id: hit.id.clone(),
        order,
        highlights: highlighter.map(|h| h.highlights(&hit.fields)),
        fields,
    }
}

/// A sort value as Clouseau shows it: untyped.
fn plain(value: &SortValue) -> Value {
    match value {
        SortValue::Score(s) => Value::from(f64::from(*s)),
        SortValue::Double(d) => Value::from(*d),
        SortValue::Str(s) => Value::String(s.clone()),
        SortValue::Null => Value::Null,
    }
}

fn facets(groups: &[(String, Vec<(String, u64)>)]) -> Value {
    Value::Object(
        groups
            .iter()
            .map(|(name, values)| {
                let counts = values
                    .iter()
                    .map(|(label, n)| (label.clone(), Value::from(*n)))
                    .collect();
                (name.clone(), Value::Object(counts))
            })
            .collect(),
    )
}

/// The bookmark after a hit: base64url of `[position, [typed order]]`.
/// Clouseau's is opaque to clients, so this is Recliner's own.
pub fn encode_bookmark(position: usize, order: &[SortValue]) -> String {
    let list: Vec<Value> = order.iter().map(nouveau::order_value).collect();
    URL_SAFE_NO_PAD.encode(json!([position, list]).to_string())
}

/// The position and `order` a bookmark resumes after.
pub fn decode_bookmark(bookmark: &str) -> Result<(usize, Vec<SortValue>), SearchError> {
    let invalid = || bad("Invalid bookmark");
    let bytes = URL_SAFE_NO_PAD
        .decode(bookmark.trim_end_matches('='))
        .or_else(|_| URL_SAFE.decode(bookmark))
        .map_err(|_| invalid())?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    let position = value.get(0).and_then(Value::as_u64).ok_or_else(invalid)?;
    let order = value
        .get(1)
        .and_then(Value::as_array)
        .ok_or_else(invalid)?
        .iter()
        .map(|v| typed(v).ok_or_else(invalid))
        .collect::<Result<_, _>>()?;
    Ok((usize::try_from(position).unwrap_or(0), order))
}

fn typed(value: &Value) -> Option<SortValue> {
    Some(match value.get("@type")?.as_str()? {
        "float" => SortValue::Score(value.get("value")?.as_f64()? as f32),
        "double" => SortValue::Double(value.get("value")?.as_f64()?),
        "string" => SortValue::Str(value.get("value")?.as_str()?.to_string()),
        "null" => SortValue::Null,
        _ => return None,
    })
}

/// The answer's JSON, with `docs` by id when `include_docs`.
pub fn response(outcome: &Outcome, docs: Option<&Map<String, Value>>) -> Value {
    let rows = |rows: &[Row]| -> Vec<Value> {
        rows.iter()
            .map(|r| {
                let mut out = json!({"id": r.id, "order": r.order, "fields": r.fields});
                if let Some(h) = &r.highlights {
                    out["highlights"] = Value::Object(h.clone());
                }
                if let Some(docs) = docs {
                    out["doc"] = docs.get(&r.id).cloned().unwrap_or(Value::Null);
                }
                out
            })
            .collect()
    };
    if let Some(groups) = &outcome.groups {
        let groups: Vec<Value> = groups
            .iter()
            .map(|g| json!({"by": g.by, "total_rows": g.total, "rows": rows(&g.rows)}))
            .collect();
        return json!({"total_rows": outcome.total, "groups": groups});
    }
    let mut out = json!({
        "total_rows": outcome.total,
        "bookmark": outcome.bookmark,
        "rows": rows(&outcome.rows),
    });
    for (key, facets) in [("counts", &outcome.counts), ("ranges", &outcome.ranges)] {
        if let Some(facets) = facets {
            out[key] = facets.clone();
        }
    }
    out
}

/// Highlights as Lucene's `Highlighter` with a `QueryScorer` on the whole
/// query: a stored value's tokens that match a word of the query (of any
/// field, as the scorer has no field) are wrapped in the tags, in
/// fragments of about `size` chars split at token boundaries
/// (`SimpleFragmenter`), the best `number` (most distinct words) first.
/// Phrases mark each of their words wherever it is.
struct Highlighter {
    params: Highlight,
    /// By highlighted field: the analyzer and the words, analyzed by it.
    fields: Vec<(String, String, Vec<Word>)>,
}

impl Highlighter {
    fn new(
        index: &SearchIndex,
        query: &str,
        params: &Highlight,
    ) -> Result<Highlighter, SearchError> {
        let parsed = query_syntax::parse(query).map_err(|e| bad(e.0))?;
        let mut words = Vec::new();
        collect_words(&parsed, &mut words);
        let def = index.definition();
        let fields = params.fields.iter().map(|field| {
            let analyzer = def.analyzer_of(field).to_string();
            let analyzed = |t: &str| crate::analyze(&analyzer, t).unwrap_or_default();
            let patterns = words.iter().flat_map(|word| match word {
                Word::Text(t) => analyzed(t).into_iter().map(Word::Text).collect(),
                Word::Wild(p) => vec![Word::Wild(p.clone())],
                Word::Fuzzy(t, d) => analyzed(t)
                    .into_iter()
                    .map(|t| Word::Fuzzy(t, *d))
                    .collect(),
            });
            (field.clone(), analyzer.clone(), patterns.collect())
        });
        let fields = fields.collect();
        Ok(Highlighter {
            params: params.clone(),
            fields,
        })
    }

    fn highlights(&self, stored: &Map<String, Value>) -> Map<String, Value> {
        self.fields
            .iter()
            .map(|(field, analyzer, patterns)| {
                let values: Vec<&str> = match stored.get(field) {
                    Some(Value::String(s)) => vec![s.as_str()],
                    Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
                    _ => Vec::new(),
                };
                let fragments: Vec<Value> = values
                    .into_iter()
                    .flat_map(|text| self.fragments(analyzer, patterns, text))
                    .map(Value::String)
                    .collect();
                (field.clone(), Value::Array(fragments))
            })
            .collect()
    }

    fn fragments(&self, analyzer: &str, patterns: &[Word], text: &str) -> Vec<String> {
        let Ok(mut analyzer) = crate::analyzer(analyzer) else {
            return Vec::new();
        };
        let size = self.params.size;
        let mut frags = vec![Fragment::default()];
        let mut stream = analyzer.token_stream(text);
        while stream.advance() {
            let token = stream.token();
            let (from, to) = (token.offset_from, token.offset_to);
            if from > to || text.get(from..to).is_none() {
                continue;
            }
            // `SimpleFragmenter`: a token ending past the next multiple of
            // the size starts a fragment (offsets in chars, as Java's).
            if text[..to].chars().count() >= size * frags.len() {
                let start = frags.last().map_or(0, |f| f.end);
                frags.push(Fragment {
                    start,
                    end: start,
                    ..Fragment::default()
                });
            }
            let hit = patterns.iter().any(|p| matches(p, &token.text));
            if let Some(frag) = frags.last_mut() {
                frag.end = to;
                if hit {
                    frag.marks.push((from, to));
                    frag.words.insert(token.text.clone());
                }
            }
        }
        if let Some(last) = frags.last_mut() {
            last.end = text.len();
        }
        let mut ranked: Vec<&Fragment> = frags.iter().filter(|f| !f.words.is_empty()).collect();
        // Most distinct words first; a stable sort keeps text order in ties.
        ranked.sort_by_key(|f| std::cmp::Reverse(f.words.len()));
        ranked
            .into_iter()
            .take(self.params.number)
            .map(|frag| {
                let mut out = String::new();
                let mut at = frag.start;
                for &(from, to) in &frag.marks {
                    if from >= at {
                        out.push_str(&text[at..from]);
                        out.push_str(&self.params.pre_tag);
                        out.push_str(&text[from..to]);
                        out.push_str(&self.params.post_tag);
                        at = to;
                    }
                }
                out.push_str(text.get(at..frag.end).unwrap_or(""));
                out
            })
            .collect()
    }
}

/// A piece of a highlighted value: byte offsets, the matched tokens'
/// offsets and the distinct words they are.
#[derive(Default)]
struct Fragment {
    start: usize,
    end: usize,
    marks: Vec<(usize, usize)>,
    words: HashSet<String>,
}

/// A word of the query a highlight marks (analyzed, once per field).
enum Word {
    Text(String),
    Wild(Vec<WildPiece>),
    Fuzzy(String, u8),
}

/// The words of a query's positive clauses.
fn collect_words(node: &Node, out: &mut Vec<Word>) {
    match node {
        Node::Boolean(clauses) => {
            for (occur, clause) in clauses {
                if *occur != Occur::MustNot {
                    collect_words(clause, out);
                }
            }
        }
        Node::Boost(inner, _) => collect_words(inner, out),
        Node::Term { text, .. } | Node::Phrase { text, .. } => out.push(Word::Text(text.clone())),
        Node::Wildcard { pattern, .. } => out.push(Word::Wild(pattern.clone())),
        Node::Fuzzy { text, distance, .. } => out.push(Word::Fuzzy(text.clone(), *distance)),
        Node::All | Node::Regex { .. } | Node::Range { .. } => {}
    }
}

fn matches(pattern: &Word, token: &str) -> bool {
    match pattern {
        Word::Text(t) => t == token,
        Word::Wild(pieces) => {
            let chars: Vec<char> = token.chars().collect();
            crate::wildcard::matches(pieces, &chars)
        }
        Word::Fuzzy(t, d) => edits(t, token) <= usize::from(*d),
    }
}

/// Levenshtein distance.
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (row[j + 1] + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}
