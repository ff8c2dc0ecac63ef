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
    Stats(StatsOf),
    /// Distinct keys: rows arrive in key order, so counting changes of key is exact.
    Distinct {
        count: u64,
        last: Option<Vec<u8>>,
    },
    /// `_top_N` (`top`) or `_bottom_N`: the N greatest (smallest) distinct
    /// values in view collation, greatest (smallest) first.
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
    /// A JavaScript reduce whose output did not shrink: the group's row is
    /// CouchDB's error row, whatever follows.
    Overflowed(String),
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

/// A group's reduction as it is answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Reduced {
    Value(Value),
    /// CouchDB's row without a value: a reduce function whose output grew
    /// (`reduce_overflow_error`), answered in the row, the query still 200.
    Error {
        error: String,
        reason: String,
    },
}

const OVERFLOW: &str = "reduce_overflow_error";

/// The reason of a reduce function's overflow, if `e` is one.
fn overflow_of(e: &ViewError) -> Option<String> {
    match e {
        ViewError::Script(JsError::Runtime { error, reason }) if error == OVERFLOW => {
            Some(reason.clone())
        }
        _ => None,
    }
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

/// `_stats` so far: of numbers, or of arrays of numbers position by
/// position (CouchDB gives one statistics object per position then).
pub(crate) enum StatsOf {
    Nothing,
    One(Stats),
    Each(Vec<Stats>),
}

pub(crate) struct Stats {
    sum: f64,
    count: u64,
    /// The least and greatest numbers as they were given (an integer
    /// stays one beside floats, as in CouchDB).
    min: Option<(f64, Value)>,
    max: Option<(f64, Value)>,
    sumsqr: f64,
    integral: bool,
}

/// A built-in reducer, as CouchDB reads a reduce source that starts with
/// `_`: by its prefix (`_sum`, `_sumorama` and `"_sum\n garbage"` are
/// all `_sum`), but for the rank reducers, whose N must be exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Builtin {
    Sum,
    Count,
    Stats,
    Distinct,
    First,
    Last,
    Rank { top: bool, n: usize },
}

/// The built-in `source` names, or CouchDB's reason for refusing it.
fn builtin_of(source: &str) -> Result<Builtin, String> {
    if let Some(rank) = rank_size(source) {
        return rank.map(|(top, n)| Builtin::Rank { top, n });
    }
    // Longer names first where one is a prefix of another's start.
    for (prefix, builtin) in [
        ("_approx_count_distinct", Builtin::Distinct),
        ("_count", Builtin::Count),
        ("_sum", Builtin::Sum),
        ("_stats", Builtin::Stats),
        ("_first", Builtin::First),
        ("_last", Builtin::Last),
    ] {
        if source.starts_with(prefix) {
            return Ok(builtin);
        }
    }
    Err(format!("`{source}` is not a supported reduce function."))
}

/// Checks a built-in reducer's name as a design document is saved: `Err`
/// is CouchDB's reason for refusing it.
pub(crate) fn check_builtin(name: &str) -> Result<(), String> {
    builtin_of(name).map(|_| ())
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
    if !reducer.starts_with('_') {
        return true;
    }
    matches!(
        builtin_of(reducer),
        Ok(Builtin::Count | Builtin::Sum | Builtin::Stats)
    )
}

impl Reduction {
    /// An empty reduction by the view's reduce function (its source): a
    /// built-in when it starts with `_`, as CouchDB decides (a source
    /// with blank space before the `_` is JavaScript).
    pub(crate) fn new(ddoc: &DesignDoc, source: &str) -> Result<Reduction, ViewError> {
        if !source.starts_with('_') {
            return Ok(Reduction::Js(JsReduction {
                ddoc: ddoc.clone(),
                source: source.to_string(),
                keys: Vec::new(),
                values: Vec::new(),
                partials: Vec::new(),
            }));
        }
        let builtin = builtin_of(source).map_err(|_| {
            ViewError::Script(JsError::Runtime {
                error: "unknown_builtin_reduce".into(),
                reason: format!("Builtin reduce function invalid: {source}"),
            })
        })?;
        Ok(match builtin {
            Builtin::Count => Reduction::Count(0),
            Builtin::Sum => Reduction::Sum(json!(0)),
            Builtin::Stats => Reduction::Stats(StatsOf::Nothing),
            Builtin::Distinct => Reduction::Distinct {
                count: 0,
                last: None,
            },
            Builtin::First | Builtin::Last => Reduction::Edge {
                first: builtin == Builtin::First,
                row: None,
            },
            Builtin::Rank { top, n } => Reduction::Rank {
                top,
                n,
                values: Vec::with_capacity(n + 1),
            },
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
                // Each value once, as CouchDB 3.5 keeps them: the top 3 of
                // 500, 500, 499, 498 are 500, 499, 498.
                let kept_already = at > 0
                    && collation::collate(&values[at - 1], &value) == std::cmp::Ordering::Equal;
                if at < *n && !kept_already {
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
            Reduction::Overflowed(_) => {}
            Reduction::Js(js) => {
                js.keys.push(json!([parse(&row.key), row.id]));
                js.values.push(parse(&row.value));
                if js.values.len() >= REDUCE_CHUNK
                    && let Err(e) = js.reduce_pending(engine).await
                {
                    *self = Reduction::Overflowed(overflow_of(&e).ok_or(e)?);
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
            Reduction::Failed(_) | Reduction::Overflowed(_) => {}
            _ if is_failure(&other) => *self = Reduction::Failed(other),
            Reduction::Sum(total) => match add(total, &other) {
                Some(sum) => *total = sum,
                None => *self = Reduction::Failed(reduce_failure(SUM_REASON, &other)),
            },
            Reduction::Stats(stats) => {
                if let Err(reason) = stats.merge(&other) {
                    *self = Reduction::Failed(reduce_failure(&reason, &other));
                }
            }
            Reduction::Distinct { .. } | Reduction::Rank { .. } | Reduction::Edge { .. } => {
                return Err(ViewError::Script(JsError::Internal(
                    "this reduction does not merge".into(),
                )));
            }
            Reduction::Js(js) => {
                js.partials.push(other);
                if js.partials.len() >= REDUCE_CHUNK {
                    let input = ejson::to_string(&Value::Array(std::mem::take(&mut js.partials)));
                    match js.call(engine, None, input).await {
                        Ok(out) => js.partials.push(out),
                        Err(e) => *self = Reduction::Overflowed(overflow_of(&e).ok_or(e)?),
                    }
                }
            }
        }
        Ok(())
    }

    /// The group's reduction.
    pub(crate) async fn finish(self, engine: &Engine) -> Result<Reduced, ViewError> {
        let value = match self {
            Reduction::Count(n) => json!(n),
            Reduction::Sum(total) => total,
            Reduction::Failed(error) => error,
            Reduction::Stats(stats) => stats.value(),
            Reduction::Distinct { count, .. } => json!(count),
            Reduction::Rank { values, .. } => Value::Array(values),
            Reduction::Edge { row, .. } => row.map_or(Value::Null, |(_, _, value)| value),
            Reduction::Overflowed(reason) => return Ok(overflowed(reason)),
            Reduction::Js(mut js) => {
                let finished = async {
                    if !js.values.is_empty() {
                        js.reduce_pending(engine).await?;
                    }
                    js.finish(engine).await
                };
                match finished.await {
                    Ok(value) => value,
                    Err(e) => return Ok(overflowed(overflow_of(&e).ok_or(e)?)),
                }
            }
        };
        Ok(Reduced::Value(value))
    }
}

fn overflowed(reason: String) -> Reduced {
    Reduced::Error {
        error: OVERFLOW.into(),
        reason,
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

const STATS_REASON: &str =
    "The _stats function requires that map values be numbers or arrays of numbers";

impl StatsOf {
    /// Adds a number, or an array of numbers as long as the ones before;
    /// anything else is the reason it cannot.
    fn add(&mut self, value: &Value) -> Result<(), String> {
        let refused = || format!("{STATS_REASON}, not '{value}'");
        match (&mut *self, value) {
            (StatsOf::Nothing, Value::Number(_)) => {
                let mut one = Stats::new();
                one.add(value).ok_or_else(refused)?;
                *self = StatsOf::One(one);
            }
            (StatsOf::One(one), Value::Number(_)) => one.add(value).ok_or_else(refused)?,
            (StatsOf::Nothing, Value::Array(items)) if !items.is_empty() => {
                let mut each: Vec<Stats> = items.iter().map(|_| Stats::new()).collect();
                for (stats, item) in each.iter_mut().zip(items) {
                    stats.add(item).ok_or_else(refused)?;
                }
                *self = StatsOf::Each(each);
            }
            (StatsOf::Each(each), Value::Array(items)) if items.len() == each.len() => {
                for (stats, item) in each.iter_mut().zip(items) {
                    stats.add(item).ok_or_else(refused)?;
                }
            }
            _ => return Err(refused()),
        }
        Ok(())
    }

    /// Adds another run's result (an object, or an array of them).
    fn merge(&mut self, other: &Value) -> Result<(), String> {
        let refused = || format!("{STATS_REASON}, not '{other}'");
        match (&mut *self, other) {
            (_, Value::Object(_)) if other.get("count").and_then(Value::as_u64) == Some(0) => {}
            (StatsOf::Nothing, Value::Object(_)) => {
                let mut one = Stats::new();
                one.merge(other);
                *self = StatsOf::One(one);
            }
            (StatsOf::One(one), Value::Object(_)) => one.merge(other),
            (StatsOf::Nothing, Value::Array(items)) => {
                let mut each: Vec<Stats> = items.iter().map(|_| Stats::new()).collect();
                for (stats, item) in each.iter_mut().zip(items) {
                    stats.merge(item);
                }
                *self = StatsOf::Each(each);
            }
            (StatsOf::Each(each), Value::Array(items)) if items.len() == each.len() => {
                for (stats, item) in each.iter_mut().zip(items) {
                    stats.merge(item);
                }
            }
            _ => return Err(refused()),
        }
        Ok(())
    }

    fn value(&self) -> Value {
        match self {
            StatsOf::Nothing => Stats::new().value(),
            StatsOf::One(one) => one.value(),
            StatsOf::Each(each) => Value::Array(each.iter().map(Stats::value).collect()),
        }
    }
}

impl Stats {
    fn new() -> Stats {
        Stats {
            sum: 0.0,
            count: 0,
            min: None,
            max: None,
            sumsqr: 0.0,
            integral: true,
        }
    }

    /// Adds a number; `None` for anything else.
    fn add(&mut self, value: &Value) -> Option<()> {
        let Value::Number(n) = value else {
            return None;
        };
        let f = n.as_f64().unwrap_or(0.0);
        self.integral &= n.is_i64();
        self.sum += f;
        self.count += 1;
        self.keep_extremes(f, value);
        self.sumsqr += f * f;
        Some(())
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
        for key in ["min", "max"] {
            if let Some(given) = other.get(key).filter(|v| v.is_number()) {
                self.keep_extremes(given.as_f64().unwrap_or(0.0), given);
            }
        }
        self.sumsqr += field("sumsqr");
    }

    fn keep_extremes(&mut self, f: f64, given: &Value) {
        if self.min.as_ref().is_none_or(|(least, _)| f < *least) {
            self.min = Some((f, given.clone()));
        }
        if self.max.as_ref().is_none_or(|(greatest, _)| f > *greatest) {
            self.max = Some((f, given.clone()));
        }
    }

    fn value(&self) -> Value {
        let extreme =
            |kept: &Option<(f64, Value)>| kept.as_ref().map_or(json!(0), |(_, v)| v.clone());
        json!({
            "sum": number(self.sum, self.integral),
            "count": self.count,
            "min": extreme(&self.min),
            "max": extreme(&self.max),
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
            error: OVERFLOW.into(),
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
        // A number beside an array counts as an array of one, as
        // CouchDB's `_sum` reads it: 1 + [2, 3] is [3, 3].
        (Value::Number(_), Value::Array(_)) => add(&Value::Array(vec![a.clone()]), b),
        (Value::Array(_), Value::Number(_)) => add(a, &Value::Array(vec![b.clone()])),
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
