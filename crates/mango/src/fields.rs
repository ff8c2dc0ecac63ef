//! `fields` in `_find`: the parts of each document to return, built as
//! CouchDB builds them (nested paths rebuild their nesting; missing ones
//! are left out; array positions become object keys).

use serde_json::{Map, Value};

/// Splits a field name at its unescaped dots.
pub fn split(name: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'.') => {
                current.push('.');
                chars.next();
            }
            '.' => parts.push(std::mem::take(&mut current)),
            other => current.push(other),
        }
    }
    parts.push(current);
    parts
}

/// Whether a field name has no empty segment (`a..b`, `.a`).
pub fn valid_name(name: &str) -> bool {
    split(name).iter().all(|p| !p.is_empty())
}

/// The document reduced to `fields` (the whole document when empty).
pub fn project(doc: &Value, fields: &[String]) -> Value {
    if fields.is_empty() {
        return doc.clone();
    }
    let mut out = Value::Object(Map::new());
    for field in fields {
        let path = split(field);
        if let Some(value) = lookup(doc, &path) {
            insert(&mut out, &path, value.clone());
        }
    }
    out
}

fn lookup<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut at = value;
    for segment in path {
        at = match at {
            Value::Object(map) => map.get(segment)?,
            Value::Array(items) => items.get(segment.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(at)
}

fn insert(out: &mut Value, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut at = out;
    for segment in parents {
        let Value::Object(map) = at else { return };
        at = map
            .entry(segment.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if !at.is_object() {
            // A shorter path took the whole value already.
            return;
        }
    }
    if let Value::Object(map) = at {
        match (map.get_mut(last), value) {
            (Some(Value::Object(existing)), Value::Object(more)) => {
                for (k, v) in more {
                    existing.entry(k).or_insert(v);
                }
            }
            (Some(_), _) => {}
            (None, value) => {
                map.insert(last.clone(), value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn projections_are_couchdbs() {
        let doc = json!({"_id": "zed", "a.b": 1, "a": {"b": 2, "c": {"d": 3}}, "arr": [{"x": 1}, {"x": 2}], "n": null, "_rev": "1-x"});
        let fields: Vec<String> = [
            "a.b", "a\\.b", "arr.1.x", "arr.0", "a.c.d", "a.zz", "n", "_rev", "a.b.c",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            project(&doc, &fields),
            json!({"a": {"b": 2, "c": {"d": 3}}, "a.b": 1, "arr": {"1": {"x": 2}, "0": {"x": 1}}, "n": null, "_rev": "1-x"})
        );
        for order in [["a.c", "a.c.d"], ["a.c.d", "a.c"]] {
            let fields: Vec<String> = order.iter().map(|s| s.to_string()).collect();
            assert_eq!(project(&doc, &fields), json!({"a": {"c": {"d": 3}}}));
        }
        assert!(!valid_name("a..b") && valid_name("a\\.b.c"));
    }
}
