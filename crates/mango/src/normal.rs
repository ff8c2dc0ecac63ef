//! Selectors written back in CouchDB's normalized form: what `_explain`
//! shows and what an index's design document stores as its
//! `partial_filter_selector`. Bare values become `$eq`, objects of several
//! members an `$and` (not flattened), nested objects dotted paths, and
//! negations are pushed down to the conditions.

use serde_json::{Map, Value, json};

/// The normalized form of a selector already known to parse.
pub fn normalize(selector: &Value) -> Value {
    match selector {
        Value::Object(map) if map.is_empty() => json!({}),
        other => push_negations(norm(other, None)),
    }
}

fn single(key: String, value: Value) -> Value {
    let mut map = Map::new();
    map.insert(key, value);
    Value::Object(map)
}

fn join(path: &Option<String>, field: &str) -> String {
    match path {
        Some(p) if !p.is_empty() => format!("{p}.{field}"),
        _ => field.to_string(),
    }
}

fn norm(value: &Value, path: Option<String>) -> Value {
    let Value::Object(map) = value else {
        return single(
            path.unwrap_or_default(),
            single("$eq".into(), value.clone()),
        );
    };
    if map.is_empty() {
        return single(path.unwrap_or_default(), single("$eq".into(), json!({})));
    }
    if map.len() > 1 {
        let parts = map
            .iter()
            .map(|(k, v)| member(k, v, &path))
            .collect::<Vec<_>>();
        return single("$and".into(), Value::Array(parts));
    }
    match map.iter().next() {
        Some((k, v)) => member(k, v, &path),
        None => json!({}),
    }
}

fn member(key: &str, arg: &Value, path: &Option<String>) -> Value {
    match key {
        "$and" | "$or" | "$nor" => {
            let items = arg
                .as_array()
                .map(|xs| xs.iter().map(|x| norm(x, path.clone())).collect())
                .unwrap_or_default();
            single(key.into(), Value::Array(items))
        }
        "$not" => single("$not".into(), norm(arg, path.clone())),
        op if op.starts_with('$') => {
            let arg = match op {
                "$elemMatch" => normalize(arg),
                "$allMatch" | "$keyMapMatch" => {
                    let operators = arg
                        .as_object()
                        .is_some_and(|m| m.keys().any(|k| k.starts_with('$')));
                    if operators {
                        push_negations(norm(arg, Some(String::new())))
                    } else {
                        normalize(arg)
                    }
                }
                _ => arg.clone(),
            };
            single(path.clone().unwrap_or_default(), single(op.into(), arg))
        }
        field => norm(arg, Some(join(path, field))),
    }
}

fn push_negations(value: Value) -> Value {
    let Value::Object(map) = value else {
        return value;
    };
    if map.len() != 1 {
        return Value::Object(map);
    }
    let Some((key, arg)) = map.into_iter().next() else {
        return json!({});
    };
    match key.as_str() {
        "$and" | "$or" => {
            let items = match arg {
                Value::Array(xs) => xs.into_iter().map(push_negations).collect(),
                other => vec![other],
            };
            single(key, Value::Array(items))
        }
        "$nor" => {
            let items = match arg {
                Value::Array(xs) => xs.into_iter().map(|x| negate(push_negations(x))).collect(),
                other => vec![other],
            };
            single("$and".into(), Value::Array(items))
        }
        "$not" => negate(push_negations(arg)),
        _ => single(key, arg),
    }
}

fn negate(value: Value) -> Value {
    let Value::Object(map) = value else {
        return single("$not".into(), value);
    };
    if map.len() != 1 {
        return single("$not".into(), Value::Object(map));
    }
    let Some((key, arg)) = map.into_iter().next() else {
        return json!({});
    };
    match key.as_str() {
        "$and" | "$or" => {
            let flipped = if key == "$and" { "$or" } else { "$and" };
            let items = match arg {
                Value::Array(xs) => xs.into_iter().map(negate).collect(),
                other => vec![negate(other)],
            };
            single(flipped.into(), Value::Array(items))
        }
        "$not" => arg,
        field => {
            let Value::Object(cond) = &arg else {
                return single("$not".into(), single(key, arg));
            };
            let Some((op, op_arg)) = cond.iter().next().filter(|_| cond.len() == 1) else {
                return single("$not".into(), single(key, arg.clone()));
            };
            let inverted = match op.as_str() {
                "$lt" => Some("$gte"),
                "$lte" => Some("$gt"),
                "$eq" => Some("$ne"),
                "$ne" => Some("$eq"),
                "$gte" => Some("$lt"),
                "$gt" => Some("$lte"),
                "$in" => Some("$nin"),
                "$nin" => Some("$in"),
                _ => None,
            };
            match (inverted, op.as_str()) {
                (Some(inv), _) => single(field.into(), single(inv.into(), op_arg.clone())),
                (None, "$exists") => single(
                    field.into(),
                    single(
                        "$exists".into(),
                        Value::Bool(!op_arg.as_bool().unwrap_or(false)),
                    ),
                ),
                _ => single(
                    field.into(),
                    single("$not".into(), Value::Object(cond.clone())),
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn couchdbs_normal_forms() {
        let cases = [
            (json!({"_id": "bob"}), json!({"_id": {"$eq": "bob"}})),
            (json!({"age": {"$gt": 26}}), json!({"age": {"$gt": 26}})),
            (
                json!({"a": {"c": {"d": 3}, "b": {"$gt": 1}}}),
                json!({"$and": [{"a.c.d": {"$eq": 3}}, {"a.b": {"$gt": 1}}]}),
            ),
            (
                json!({"city": "Paris", "age": {"$gte": 30, "$lte": 40}}),
                json!({"$and": [{"city": {"$eq": "Paris"}}, {"$and": [{"age": {"$gte": 30}}, {"age": {"$lte": 40}}]}]}),
            ),
            (
                json!({"$and": [{"a": 1}, {"$and": [{"b": 2}, {"c": 3}]}], "d": {"$not": {"$gt": 5}}, "$nor": [{"e": 1}, {"f": {"$in": [1]}}]}),
                json!({"$and": [{"$and": [{"a": {"$eq": 1}}, {"$and": [{"b": {"$eq": 2}}, {"c": {"$eq": 3}}]}]}, {"d": {"$lte": 5}}, {"$and": [{"e": {"$ne": 1}}, {"f": {"$nin": [1]}}]}]}),
            ),
            (
                json!({"a": {"$not": {"$and": [{"$gt": 1}, {"$lt": 5}]}}}),
                json!({"$or": [{"a": {"$lte": 1}}, {"a": {"$gte": 5}}]}),
            ),
            (
                json!({"x": {"$elemMatch": {"y": 1, "z": {"$ne": 2}}}, "k": {"$keyMapMatch": {"$eq": "q"}}, "m": {"$allMatch": {"$gt": 1}}}),
                json!({"$and": [{"x": {"$elemMatch": {"$and": [{"y": {"$eq": 1}}, {"z": {"$ne": 2}}]}}}, {"k": {"$keyMapMatch": {"": {"$eq": "q"}}}}, {"m": {"$allMatch": {"": {"$gt": 1}}}}]}),
            ),
            (json!({}), json!({})),
        ];
        for (input, want) in cases {
            assert_eq!(normalize(&input), want, "{input}");
        }
    }
}
