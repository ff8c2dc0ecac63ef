//! Which index answers a `_find`, and which part of it to read: CouchDB's
//! choice (`mango_cursor`, `mango_idx_view`) of a usable JSON index (every
//! indexed field constrained by the selector, the sort a suffix of the
//! fields the selector does not fix), the one whose columns best match the
//! selector's ranges, else the documents by id (`_all_docs`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::MangoError;
use super::find::FindRequest;
use super::index_def::{IndexDef, all_docs_description};
use crate::selector::{FieldRange, RangeEnd};

/// The index a query reads.
#[derive(Debug, Clone, PartialEq)]
pub enum Chosen {
    AllDocs,
    Json(IndexDef),
}

/// A bound of the part of the index to read, inclusive.
#[derive(Debug, Clone, PartialEq)]
pub enum Bound {
    /// A JSON index's sort-key bytes (see `collation::sort_key`).
    Key(Vec<u8>),
    /// A document id (`_all_docs`).
    Id(String),
}

/// How a query will run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub index: Chosen,
    /// Ascending bounds; `None` for open.
    pub low: Option<Bound>,
    pub high: Option<Bound>,
    pub descending: bool,
    /// The index rows hold every field the query needs: no document is read.
    pub covering: bool,
    /// No document can match (an empty range on the index's first fields).
    pub empty: bool,
    /// The warnings of the choice (`use_index` not usable).
    pub warnings: Vec<String>,
    /// `start_key`/`end_key` as `_explain` shows them.
    pub start_key: Value,
    pub end_key: Value,
    /// Every other index and why it lost (`_explain`'s `index_candidates`).
    pub candidates: Vec<Value>,
}

const MAX_SHOWN: &str = "<MAX>";

struct Analysis {
    index: IndexDef,
    usable: bool,
    reason: &'static str,
}

/// Chooses the index for a request among a database's JSON indexes.
pub fn plan(req: &FindRequest, indexes: &[IndexDef]) -> Result<Plan, MangoError> {
    let ranges = collapse(req.selector.field_ranges());
    let equal = req.selector.equal_fields();
    let named = |idx: &IndexDef| match &req.use_index {
        Some((ddoc, name)) => {
            idx.ddoc.strip_prefix("_design/") == Some(ddoc.as_str())
                && name.as_ref().is_none_or(|n| *n == idx.name)
        }
        None => false,
    };
    let analyses: Vec<Analysis> = indexes
        .iter()
        .map(|idx| {
            let (usable, reason) = if req.selector.has_text() {
                (false, "needs_text_search")
            } else if idx.partial.is_some() && !named(idx) {
                (false, "is_partial")
            } else if !has_required(req, idx) {
                (false, "field_mismatch")
            } else if !can_use_sort(&idx.fields, &req.sort, &equal) {
                (false, "sort_order_mismatch")
            } else {
                (true, "")
            };
            Analysis {
                index: idx.clone(),
                usable,
                reason,
            }
        })
        .collect();
    let mut warnings = Vec::new();
    let mut chosen: Option<IndexDef> = None;
    if let Some((ddoc, name)) = &req.use_index {
        chosen = analyses
            .iter()
            .filter(|a| a.usable && named(&a.index))
            .map(|a| a.index.clone())
            .min_by(|a, b| (a.fields.len(), &a.name).cmp(&(b.fields.len(), &b.name)));
        if chosen.is_none() {
            let label = match name {
                None => format!("_design/{ddoc}"),
                Some(n) => format!("_design/{ddoc}, {n}"),
            };
            if !req.allow_fallback {
                return Err(MangoError::bad(
                    "invalid_index",
                    format!(
                        "{label} specified by `use_index` could not be found or it is not suitable."
                    ),
                ));
            }
            warnings.push(match name {
                None => format!(
                    "{label} was not used because it does not contain a valid index for this query."
                ),
                Some(_) => {
                    format!("{label} was not used because it is not a valid index for this query.")
                }
            });
        }
    }
    let mut usable: Vec<&IndexDef> = analyses
        .iter()
        .filter(|a| a.usable && a.index.partial.is_none())
        .map(|a| &a.index)
        .collect();
    usable.sort_by(|a, b| {
        (difference(a, &ranges), a.fields.len(), &a.ddoc, &a.name).cmp(&(
            difference(b, &ranges),
            b.fields.len(),
            &b.ddoc,
            &b.name,
        ))
    });
    if chosen.is_none() {
        chosen = usable.first().map(|i| (*i).clone());
    }
    let index = match chosen {
        Some(idx) => Chosen::Json(idx),
        None => {
            let id_sort =
                req.sort.is_empty() || (req.sort == ["_id"] && ranges.contains_key("_id"));
            if !id_sort {
                return Err(MangoError::bad(
                    "no_usable_index",
                    "No index exists for this sort, try indexing by the sort fields.".into(),
                ));
            }
            if !req.allow_fallback && req.use_index.is_none() {
                return Err(MangoError::bad(
                    "invalid_index",
                    "You must specify an index with the `use_index` parameter.".into(),
                ));
            }
            Chosen::AllDocs
        }
    };
    let candidates = candidates(&analyses, &index, &usable);
    let mut plan = match &index {
        Chosen::AllDocs => all_docs_plan(req, &ranges),
        Chosen::Json(idx) => json_plan(req, idx, &ranges),
    };
    plan.warnings = warnings;
    plan.candidates = candidates;
    plan.index = index;
    Ok(plan)
}

/// CouchDB's `field_ranges`: at the first field (by name) whose range is
/// empty, that field alone.
fn collapse(ranges: BTreeMap<String, FieldRange>) -> BTreeMap<String, FieldRange> {
    if let Some((field, range)) = ranges.iter().find(|(_, r)| r.is_empty()) {
        return [(field.clone(), range.clone())].into();
    }
    ranges
}

fn has_required(req: &FindRequest, idx: &IndexDef) -> bool {
    idx.fields
        .iter()
        .filter(|f| !req.sort.contains(f) && *f != "_id" && *f != "_rev")
        .all(|f| req.selector.requires_field(f))
}

fn can_use_sort(cols: &[String], sort: &[String], equal: &[String]) -> bool {
    if sort.is_empty() {
        return true;
    }
    let rest: Vec<&String> = cols
        .iter()
        .skip_while(|c| equal.contains(c) && !sort.contains(c))
        .collect();
    rest.len() >= sort.len() && rest.iter().zip(sort).all(|(c, s)| *c == s)
}

fn prefix<'a>(idx: &IndexDef, ranges: &'a BTreeMap<String, FieldRange>) -> Vec<&'a FieldRange> {
    idx.fields.iter().map_while(|f| ranges.get(f)).collect()
}

fn difference(idx: &IndexDef, ranges: &BTreeMap<String, FieldRange>) -> usize {
    ranges.len().saturating_sub(prefix(idx, ranges).len())
}

fn bound_value(end: &RangeEnd) -> Option<&Value> {
    match end {
        RangeEnd::Open => None,
        RangeEnd::Inclusive(v) | RangeEnd::Exclusive(v) => Some(v),
    }
}

fn json_plan(req: &FindRequest, idx: &IndexDef, ranges: &BTreeMap<String, FieldRange>) -> Plan {
    let prefix = prefix(idx, ranges);
    let empty = prefix.iter().any(|r| r.is_empty());
    let mut start = Vec::new();
    let mut low = vec![6u8];
    for range in &prefix {
        let Some(v) = bound_value(&range.low) else {
            break;
        };
        start.push(v.clone());
        collation::sort_key(v, &mut low);
    }
    let mut end = Vec::new();
    let mut high = vec![6u8];
    for range in &prefix {
        match bound_value(&range.high) {
            Some(v) => {
                end.push(v.clone());
                collation::sort_key(v, &mut high);
            }
            None => break,
        }
    }
    end.push(json!(MAX_SHOWN));
    high.push(0xff);
    let covering = !req.fields.is_empty()
        && req
            .fields
            .iter()
            .chain(req.selector.fields().iter())
            .all(|f| f == "_id" || idx.fields.contains(f));
    let (start_key, end_key) = if empty {
        (Value::Null, Value::Null)
    } else if req.descending {
        (Value::Array(end), Value::Array(start))
    } else {
        (Value::Array(start), Value::Array(end))
    };
    Plan {
        index: Chosen::Json(idx.clone()),
        low: Some(Bound::Key(low)),
        high: Some(Bound::Key(high)),
        descending: req.descending,
        covering,
        empty,
        warnings: Vec::new(),
        start_key,
        end_key,
        candidates: Vec::new(),
    }
}

fn all_docs_plan(req: &FindRequest, ranges: &BTreeMap<String, FieldRange>) -> Plan {
    let id = ranges.get("_id");
    let text = |end: Option<&RangeEnd>| {
        end.and_then(bound_value)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let low = text(id.map(|r| &r.low));
    let high = text(id.map(|r| &r.high));
    let start_key = low.clone().map(Value::String).unwrap_or(Value::Null);
    let end_key = high
        .clone()
        .map(Value::String)
        .unwrap_or_else(|| json!(MAX_SHOWN));
    let (start_key, end_key) = if req.descending {
        (end_key, start_key)
    } else {
        (start_key, end_key)
    };
    Plan {
        index: Chosen::AllDocs,
        low: low.map(Bound::Id),
        high: high.map(Bound::Id),
        descending: req.descending,
        covering: false,
        empty: id.is_some_and(FieldRange::is_empty),
        warnings: Vec::new(),
        start_key,
        end_key,
        candidates: Vec::new(),
    }
}

/// `_explain`'s `index_candidates`: every index but the chosen one, each
/// with its first reason and CouchDB's ranking (usable losers by their
/// place; then, each group one rank after the one before if it has
/// members: `_all_docs` passed over, unusable indexes, partial ones).
fn candidates(analyses: &[Analysis], chosen: &Chosen, usable: &[&IndexDef]) -> Vec<Value> {
    let favoured = usable.len().max(1) as u64;
    let unfavored = *chosen != Chosen::AllDocs;
    let not_usable_rank = favoured + u64::from(unfavored);
    let any_not_usable = analyses
        .iter()
        .any(|a| !a.usable && a.reason != "is_partial");
    let partial_rank = not_usable_rank + u64::from(any_not_usable);
    let mut out: Vec<(String, String, Value)> = Vec::new();
    for a in analyses {
        if *chosen == Chosen::Json(a.index.clone()) {
            continue;
        }
        let (reason, ranking) = if a.usable {
            let position = usable
                .iter()
                .position(|i| **i == a.index)
                .map_or(favoured, |p| p as u64);
            let reason = match chosen {
                Chosen::Json(winner) if winner.fields.len() < a.index.fields.len() => {
                    "too_many_fields"
                }
                Chosen::Json(_) if position > 0 => "alphabetically_comes_after",
                _ => "less_overlap",
            };
            (reason, position.max(1))
        } else if a.reason == "is_partial" {
            (a.reason, partial_rank)
        } else {
            (a.reason, not_usable_rank)
        };
        out.push((
            a.index.ddoc.clone(),
            a.index.name.clone(),
            json!({"index": a.index.describe(), "analysis": {"usable": a.usable, "reasons": [{"name": reason}], "ranking": ranking, "covering": false}}),
        ));
    }
    out.sort_by(|a, b| (&b.0, &b.1).cmp(&(&a.0, &a.1)));
    let mut list: Vec<Value> = out.into_iter().map(|(_, _, v)| v).collect();
    if unfavored {
        list.push(json!({"index": all_docs_description(), "analysis": {"usable": true, "reasons": [{"name": "unfavored_type"}], "ranking": favoured, "covering": null}}));
    }
    list
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::find::FindRequest;

    fn idx(name: &str, fields: &[&str]) -> IndexDef {
        IndexDef {
            ddoc: format!("_design/{name}"),
            name: name.into(),
            fields: fields.iter().map(|f| f.to_string()).collect(),
            descending: false,
            partial: None,
            partitioned: false,
        }
    }

    fn find(body: Value) -> FindRequest {
        FindRequest::parse(&body).unwrap()
    }

    #[test]
    fn the_best_usable_index_is_chosen_as_couchdb_chooses() {
        let indexes = [idx("age", &["age"]), idx("city-age", &["city", "age"])];
        let p = plan(&find(json!({"selector": {"age": {"$gt": 26}}})), &indexes).unwrap();
        assert_eq!(p.index, Chosen::Json(indexes[0].clone()));
        assert_eq!((p.start_key, p.end_key), (json!([26]), json!(["<MAX>"])));
        let p = plan(
            &find(json!({"selector": {"city": "Paris", "age": {"$gte": 30, "$lte": 40}}})),
            &indexes,
        )
        .unwrap();
        assert_eq!(p.index, Chosen::Json(indexes[1].clone()));
        assert_eq!(
            (p.start_key, p.end_key),
            (json!(["Paris", 30]), json!(["Paris", 40, "<MAX>"]))
        );
        let p = plan(
            &find(json!({"selector": {"city": {"$in": ["Paris"]}, "age": {"$gt": 1}}})),
            &indexes,
        )
        .unwrap();
        assert_eq!(
            p.index,
            Chosen::Json(indexes[0].clone()),
            "fewer unmatched ranges"
        );
        let p = plan(
            &find(json!({"selector": {"city": "Paris"}, "sort": ["age"]})),
            &indexes,
        )
        .unwrap();
        assert_eq!(
            p.index,
            Chosen::Json(indexes[1].clone()),
            "a fixed field before the sort"
        );
        let p = plan(&find(json!({"selector": {"name": "x"}})), &indexes).unwrap();
        assert_eq!(p.index, Chosen::AllDocs);
        let e = plan(
            &find(json!({"selector": {"name": "x"}, "sort": ["name"]})),
            &indexes,
        )
        .unwrap_err();
        assert_eq!(e.error, "no_usable_index");
        let p = plan(
            &find(json!({"selector": {"_id": {"$gt": "a"}}, "sort": [{"_id": "desc"}]})),
            &indexes,
        )
        .unwrap();
        assert_eq!(
            (p.index, p.start_key, p.end_key),
            (Chosen::AllDocs, json!("<MAX>"), json!("a"))
        );
        let p = plan(
            &find(json!({"selector": {"age": {"$gt": 50, "$lt": 10}}})),
            &indexes,
        )
        .unwrap();
        assert!(p.empty);
        let p = plan(
            &find(json!({"selector": {"age": {"$exists": false}}})),
            &indexes,
        )
        .unwrap();
        assert_eq!(p.index, Chosen::AllDocs);
        let p = plan(
            &find(json!({"selector": {"age": 1}, "use_index": "nope"})),
            &indexes,
        )
        .unwrap();
        assert_eq!(
            p.warnings,
            ["_design/nope was not used because it does not contain a valid index for this query."]
        );
        let e = plan(&find(json!({"selector": {"age": 1}, "use_index": ["nope", "x"], "allow_fallback": false})), &indexes).unwrap_err();
        assert_eq!(
            e.reason,
            "_design/nope, x specified by `use_index` could not be found or it is not suitable."
        );
    }
}
