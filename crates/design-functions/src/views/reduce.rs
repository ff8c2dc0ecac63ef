//! Reductions of view rows, fed one row at a time so a group of any size
//! is reduced in bounded memory: CouchDB's built-in reducers (`_count`,
//! `_sum`, `_stats`, `_approx_count_distinct`, and 3.5's `_top_N`,
//! `_bottom_N`, `_first`, `_last`) in Rust, and JavaScript reduce
//! functions in chunks whose results are re-reduced.

use serde_json::{Map, Value, json};
use store::IndexEntry;

use crate::views::ViewError;
use crate::{DesignDoc, Engine, JsError};

/// Rows reduced at once by a JavaScript reduce function; more are reduced
/// in such chunks, then re-reduced.
const REDUCE_CHUNK: usize = 1000;

/// Reduce output larger than this must shrink (CouchDB's
/// `reduce_limit_threshold`).
const REDUCE_LIMIT_THRESHOLD: usize = 5000;

/// The reduction of one group so far.
pub(crate) enum Reduction {
    Count(u64),
    Sum(Value),
    Stats(Stats),
    /// Distinct keys: rows arrive in key order, so counting changes of key is exact.
    Distinct {
        count: u64,
        last: Option<Vec<u8>>,
    },
    /// `_top_N` (`top`) or `_bottom_N`: the N greatest (smallest) values in
    /// view collation, greatest (smallest) first.
    Rank {
        top: bool,
        n: usize,
        values: Vec<Value>,
    },
    /// `_first` (`first`) or `_last`: the value of the group's first (last)
    /// row in key order, then document id, whichever way rows are read.
    Edge {
        first: bool,
        row: Option<(Vec<u8>, String, Value)>,
    },
    Js(JsReduction),
    /// A built-in reducer met a value it cannot take: the group's value is
    /// CouchDB's error object, whatever follows.
    Failed(Value),
}

/// The reason CouchDB gives for values `_sum` cannot add.
const SUM_REASON: &str = "The _sum function requires that map values be numbers, arrays of numbers, or objects. Objects cannot be mixed with other data structures. Objects can be arbitrarily nested, provided that the values for all fields are themselves numbers, arrays of numbers, or objects.";

/// CouchDB's error object for a value a built-in reducer cannot take.
fn reduce_failure(reason: &str, value: &Value) -> Value {
    json!({"error": "builtin_reduce_error", "reason": reason, "caused_by": value})
}

/// Whether a cached reduction is such an error object.
fn is_failure(value: &Value) -> bool {
    value.get("error").and_then(Value::as_str) == Some("builtin_reduce_error")
}

pub(crate) struct JsReduction {
    ddoc: DesignDoc,
    source: String,
    /// `[key, id]` pairs and values not reduced yet.
    keys: Vec<Value>,
    values: Vec<Value>,
    /// Results of reduced chunks, re-reduced once there are many.
    partials: Vec<Value>,
}

#[derive(Default)]
pub(crate) struct Stats {
    sum: f64,
    count: u64,
    min: f64,
    max: f64,
    sumsqr: f64,
    integral: bool,
}

/// Checks a built-in reducer's name as a design document is saved: `Err`
/// is CouchDB's reason for refusing it.
pub(crate) fn check_builtin(name: &str) -> Result<(), String> {
    if matches!(
        name,
        "_sum" | "_count" | "_stats" | "_approx_count_distinct" | "_first" | "_last"
    ) {
        return Ok(());
    }
    match rank_size(name) {
        Some(Ok(_)) => Ok(()),
        Some(Err(reason)) => Err(reason),
        None => Err(format!("`{name}` is not a supported reduce function.")),
    }
}

/// `_top_N` or `_bottom_N` with N in 1..=100: whether it is top, and N.
fn rank_of(name: &str) -> Option<(bool, usize)> {
    match rank_size(name)? {
        Ok((top, n)) => Some((top, n)),
        Err(_) => None,
    }
}

/// What a `_top_`/`_bottom_` name asks, or CouchDB's reason for refusing
/// it; `None` for names that are not rank reducers at all.
fn rank_size(name: &str) -> Option<Result<(bool, usize), String>> {
    let (top, digits) = match (name.strip_prefix("_top_"), name.strip_prefix("_bottom_")) {
        (Some(d), _) => (true, d),
        (_, Some(d)) => (false, d),
        _ => return None,
    };
    Some(match digits.parse::<i64>() {
        Ok(n) if (1..=100).contains(&n) && digits.bytes().all(|b| b.is_ascii_digit()) => {
            Ok((top, n as usize))
        }
        Ok(_)
            if digits
                .trim_start_matches('-')
                .bytes()
                .all(|b| b.is_ascii_digit()) =>
        {
            Err("rank value must be between 1 and 100".into())
        }
        _ => Err("invalid rank reducer".into()),
    })
}

/// Whether a reducer's results over separate runs of rows combine into the
/// result over all of them (JavaScript ones by re-reducing). Counts of
/// distinct keys do not; nor do the built-ins that keep some of the values
/// (their results are read from the rows).
pub(crate) fn merges(reducer: &str) -> bool {
    let name = reducer.trim();
    !name.starts_with('_') || matches!(name, "_count" | "_sum" | "_stats")
}

impl Reduction {
    /// An empty reduction by the view's reduce function (its source).
    pub(crate) fn new(ddoc: &DesignDoc, source: &str) -> Result<Reduction, ViewError> {
        let trimmed = source.trim();
        if !trimmed.starts_with('_') {
            return Ok(Reduction::Js(JsReduction {
                ddoc: ddoc.clone(),
                source: source.to_string(),
                keys: Vec::new(),
                values: Vec::new(),
                partials: Vec::new(),
            }));
        }
        Ok(match trimmed {
            "_count" => Reduction::Count(0),
            "_sum" => Reduction::Sum(json!(0)),
            "_stats" => Reduction::Stats(Stats {
                integral: true,
                min: f64::INFINITY,
                max: f64::NEG_INFINITY,
                ..Default::default()
            }),
            "_approx_count_distinct" => Reduction::Distinct {
                count: 0,
                last: None,
            },
            "_first" | "_last" => Reduction::Edge {
                first: trimmed == "_first",
                row: None,
            },
            other if rank_of(other).is_some() => {
                let (top, n) = rank_of(other).unwrap_or((true, 1));
                Reduction::Rank {
                    top,
                    n,
                    values: Vec::with_capacity(n + 1),
                }
            }
            other => {
                return Err(ViewError::Script(JsError::Runtime {
                    error: "unknown_builtin_reduce".into(),
                    reason: format!("Builtin reduce function invalid: {other}"),
                }));
            }
        })
    }

    /// Adds one row.
    pub(crate) async fn add(&mut self, engine: &Engine, row: &IndexEntry) -> Result<(), ViewError> {
        match self {
            Reduction::Count(n) => *n += 1,
            Reduction::Sum(total) => {
                let value = parse(&row.value);
                match add(total, &value) {
                    Some(sum) => *total = sum,
                    None => *self = Reduction::Failed(reduce_failure(SUM_REASON, &value)),
                }
            }
            Reduction::Stats(stats) => {
                let value = parse(&row.value);
                if let Err(reason) = stats.add(&value) {
                    *self = Reduction::Failed(reduce_failure(&reason, &value));
                }
            }
            Reduction::Failed(_) => {}
            Reduction::Rank { top, n, values } => {
                let value = parse(&row.value);
                // Kept greatest (smallest) first: the new value goes after
                // every value that ranks before it.
                let ranks_before = |kept: &Value| {
                    let order = collation::collate(kept, &value);
                    if *top { order.is_ge() } else { order.is_le() }
                };
                let at = values.partition_point(ranks_before);
                if at < *n {
                    values.insert(at, value);
                    values.truncate(*n);
                }
            }
            Reduction::Edge { first, row: kept } => {
                let replaces = kept.as_ref().is_none_or(|(key, id, _)| {
                    let order = (row.sort_key.as_slice(), row.id.as_str())
                        .cmp(&(key.as_slice(), id.as_str()));
                    if *first { order.is_lt() } else { order.is_gt() }
                });
                if replaces {
                    *kept = Some((row.sort_key.clone(), row.id.clone(), parse(&row.value)));
                }
            }
            Reduction::Distinct { count, last } => {
                if last.as_deref() != Some(row.sort_key.as_slice()) {
                    *count += 1;
                    *last = Some(row.sort_key.clone());
                }
            }
            Reduction::Js(js) => {
                js.keys.push(json!([parse(&row.key), row.id]));
                js.values.push(parse(&row.value));
                if js.values.len() >= REDUCE_CHUNK {
                    js.reduce_pending(engine).await?;
                }
            }
        }
        Ok(())
    }

    /// Adds the reduction of other rows (a block's, cached), as a
    /// re-reduce would. Not for `_approx_count_distinct`, whose counts of
    /// separate rows do not add up.
    pub(crate) async fn merge(&mut self, engine: &Engine, other: Value) -> Result<(), ViewError> {
        match self {
            Reduction::Count(n) => *n += other.as_u64().unwrap_or(0),
            Reduction::Failed(_) => {}
            _ if is_failure(&other) => *self = Reduction::Failed(other),
            Reduction::Sum(total) => match add(total, &other) {
                Some(sum) => *total = sum,
                None => *self = Reduction::Failed(reduce_failure(SUM_REASON, &other)),
            },
            Reduction::Stats(stats) => stats.merge(&other),
            Reduction::Distinct { .. } | Reduction::Rank { .. } | Reduction::Edge { .. } => {
                return Err(ViewError::Script(JsError::Internal(
                    "this reduction does not merge".into(),
                )));
            }
            Reduction::Js(js) => {
                js.partials.push(other);
                if js.partials.len() >= REDUCE_CHUNK {
                    let input = ejson::to_string(&Value::Array(std::mem::take(&mut js.partials)));
                    let out = js.call(engine, None, input).await?;
                    js.partials.push(out);
                }
            }
        }
        Ok(())
    }

    /// The group's reduced value.
    pub(crate) async fn finish(self, engine: &Engine) -> Result<Value, ViewError> {
        match self {
            Reduction::Count(n) => Ok(json!(n)),
            Reduction::Sum(total) => Ok(total),
            Reduction::Failed(error) => Ok(error),
            Reduction::Stats(stats) => Ok(stats.value()),
            Reduction::Distinct { count, .. } => Ok(json!(count)),
            Reduction::Rank { values, .. } => Ok(Value::Array(values)),
            Reduction::Edge { row, .. } => Ok(row.map_or(Value::Null, |(_, _, value)| value)),
            Reduction::Js(mut js) => {
                if !js.values.is_empty() {
                    js.reduce_pending(engine).await?;
                }
                js.finish(engine).await
            }
        }
    }
}

impl JsReduction {
    async fn reduce_pending(&mut self, engine: &Engine) -> Result<(), ViewError> {
        let keys = ejson::to_string(&Value::Array(std::mem::take(&mut self.keys)));
        let input = ejson::to_string(&Value::Array(std::mem::take(&mut self.values)));
        let out = self.call(engine, Some(keys), input).await?;
        self.partials.push(out);
        if self.partials.len() >= REDUCE_CHUNK {
            let input = ejson::to_string(&Value::Array(std::mem::take(&mut self.partials)));
            let out = self.call(engine, None, input).await?;
            self.partials.push(out);
        }
        Ok(())
    }

    async fn finish(mut self, engine: &Engine) -> Result<Value, ViewError> {
        match self.partials.len() {
            0 | 1 => Ok(self.partials.pop().unwrap_or(Value::Null)),
            _ => {
                let input = ejson::to_string(&Value::Array(std::mem::take(&mut self.partials)));
                self.call(engine, None, input).await
            }
        }
    }

    async fn call(
        &self,
        engine: &Engine,
        keys: Option<String>,
        input: String,
    ) -> Result<Value, ViewError> {
        let input_len = input.len();
        let out = engine
            .reduce(self.ddoc.clone(), &self.source, keys, input)
            .await?;
        check_shrinks(&out, input_len)?;
        Ok(out)
    }
}

impl Stats {
    /// Adds a number; anything else is the reason it cannot.
    fn add(&mut self, value: &Value) -> Result<(), String> {
        let Value::Number(n) = value else {
            return Err(format!(
                "The _stats function requires that map values be numbers or arrays of numbers, not '{value}'"
            ));
        };
        let f = n.as_f64().unwrap_or(0.0);
        self.integral &= n.is_i64();
        self.sum += f;
        self.count += 1;
        self.min = self.min.min(f);
        self.max = self.max.max(f);
        self.sumsqr += f * f;
        Ok(())
    }

    fn merge(&mut self, other: &Value) {
        let field = |k: &str| other.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        let count = other.get("count").and_then(Value::as_u64).unwrap_or(0);
        if count == 0 {
            return;
        }
        self.integral &= ["sum", "min", "max", "sumsqr"]
            .iter()
            .all(|k| other.get(*k).is_some_and(Value::is_i64));
        self.sum += field("sum");
        self.count += count;
        self.min = self.min.min(field("min"));
        self.max = self.max.max(field("max"));
        self.sumsqr += field("sumsqr");
    }

    fn value(&self) -> Value {
        let empty = self.count == 0;
        json!({
            "sum": number(self.sum, self.integral),
            "count": self.count,
            "min": if empty { json!(0) } else { number(self.min, self.integral) },
            "max": if empty { json!(0) } else { number(self.max, self.integral) },
            "sumsqr": number(self.sumsqr, self.integral),
        })
    }
}

fn parse(text: &str) -> Value {
    ejson::from_str(text).unwrap_or(Value::Null)
}

/// CouchDB's `reduce_limit`: a reduce function whose output does not
/// shrink is an error, not an index the size of its input.
fn check_shrinks(out: &Value, input_len: usize) -> Result<(), ViewError> {
    let out_len = ejson::to_vec(out).len();
    if out_len > REDUCE_LIMIT_THRESHOLD && out_len * 2 > input_len {
        return Err(ViewError::Script(JsError::Runtime {
            error: "reduce_overflow_error".into(),
            reason: format!(
                "Reduce output must shrink more rapidly: input size: {input_len} output size: {out_len}"
            ),
        }));
    }
    Ok(())
}

/// `_sum` of two values: numbers add, arrays add element by element
/// (the longer one's tail kept), objects member by member.
fn add(a: &Value, b: &Value) -> Option<Value> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => Some(number(
            x.as_f64().unwrap_or(0.0) + y.as_f64().unwrap_or(0.0),
            x.is_i64() && y.is_i64(),
        )),
        (Value::Array(x), Value::Array(y)) => {
            let n = x.len().max(y.len());
            (0..n)
                .map(|i| match (x.get(i), y.get(i)) {
                    (Some(p), Some(q)) => add(p, q),
                    (Some(p), None) | (None, Some(p)) => Some(p.clone()),
                    (None, None) => None,
                })
                .collect::<Option<Vec<_>>>()
                .map(Value::Array)
        }
        (Value::Number(_), Value::Array(y)) if is_zero(a) => Some(Value::Array(y.clone())),
        (Value::Array(x), Value::Number(_)) => {
            let mut x = x.clone();
            if let Some(first) = x.first_mut() {
                *first = add(first, b)?;
            }
            Some(Value::Array(x))
        }
        (Value::Object(x), Value::Object(y)) => {
            let mut out: Map<String, Value> = x.clone();
            for (k, v) in y {
                let merged = match out.get(k) {
                    Some(existing) => add(existing, v)?,
                    None => v.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Some(Value::Object(out))
        }
        (Value::Number(_), Value::Object(y)) if is_zero(a) => Some(Value::Object(y.clone())),
        _ => None,
    }
}

fn is_zero(v: &Value) -> bool {
    v.as_f64() == Some(0.0)
}

fn number(f: f64, integral: bool) -> Value {
    if integral && f.fract() == 0.0 && f.abs() < 9.0e15 {
        json!(f as i64)
    } else {
        json!(f)
    }
}

#[cfg(test)]
mod rank_tests {
    use super::*;

    #[test]
    fn rank_reducers_are_named_as_couchdb_names_them() {
        assert_eq!(check_builtin("_top_1"), Ok(()));
        assert_eq!(check_builtin("_bottom_100"), Ok(()));
        assert_eq!(check_builtin("_first"), Ok(()));
        let rank = Err("rank value must be between 1 and 100".to_string());
        assert_eq!(check_builtin("_top_0"), rank);
        assert_eq!(check_builtin("_top_101"), rank);
        let invalid = Err("invalid rank reducer".to_string());
        for name in ["_top_x", "_bottom_", "_top_1_", "_top_+5"] {
            assert_eq!(check_builtin(name), invalid, "{name}");
        }
        assert_eq!(
            check_builtin("_median"),
            Err("`_median` is not a supported reduce function.".to_string())
        );
        assert!(!merges("_top_3") && !merges("_first") && merges("_sum") && merges("function(){}"));
    }
}
