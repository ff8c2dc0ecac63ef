//! Mango's full-text (`"type": "nouveau"`) indexes: what a document gives
//! such an index, as CouchDB's Mango indexes it (`mango_native_proc`):
//! every leaf under a name made of its path and its type (`a.b:string`,
//! `tags.[]:string`, `tags.[]:length`), each path segment escaped for
//! Lucene, `$default` text from every string when the default field is
//! on, and a `$fieldnames` entry per name, so `$exists` can be asked.

use serde_json::Value;

use crate::selector::Selector;

/// What a field of a Mango text index is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextKind {
    /// Analyzed (`$default`).
    Text,
    /// One whole term (strings, booleans as `"true"`/`"false"`, names).
    String,
    /// A double (numbers, array lengths).
    Number,
}

/// One field a document gives the index.
#[derive(Debug, Clone, PartialEq)]
pub struct TextField {
    pub kind: TextKind,
    pub name: String,
    pub value: Value,
}

/// A Mango text index's definition (`index` of its design document entry).
#[derive(Debug, Clone)]
pub struct TextIndex {
    /// `name:type` of the fields to index (escaped); `None`: all fields.
    fields: Option<Vec<String>>,
    default_field: bool,
    array_lengths: bool,
    partial: Option<Selector>,
}

impl TextIndex {
    /// Reads a definition as `_index` stores it.
    pub fn of(def: &Value) -> TextIndex {
        let fields = match def.get("fields") {
            Some(Value::Array(list)) if !list.is_empty() => Some(
                list.iter()
                    .filter_map(|f| {
                        let name = f.get("name")?.as_str()?;
                        // `text` fields are strings (`get_text_field_type`).
                        let kind = f
                            .get("type")
                            .and_then(Value::as_str)
                            .filter(|t| matches!(*t, "number" | "boolean"))
                            .unwrap_or("string");
                        Some(escape_user(&format!("{name}:{kind}")))
                    })
                    .collect(),
            ),
            _ => None,
        };
        let default_field = match def.get("default_field") {
            Some(Value::Bool(b)) => *b,
            Some(Value::Object(opts)) => {
                opts.get("enabled").and_then(Value::as_bool).unwrap_or(true)
            }
            _ => true,
        };
        let partial = def
            .get("partial_filter_selector")
            .or_else(|| def.get("selector"))
            .filter(|s| s.as_object().is_some_and(|m| !m.is_empty()))
            .and_then(|s| Selector::parse(s).ok());
        TextIndex {
            fields,
            default_field,
            array_lengths: def
                .get("index_array_lengths")
                .and_then(Value::as_bool)
                .unwrap_or(true),
            partial,
        }
    }

    /// What `doc` gives the index: nothing for a design document or one
    /// the partial filter leaves out.
    pub fn fields_of(&self, doc: &Value) -> Vec<TextField> {
        if doc
            .get("_id")
            .and_then(Value::as_str)
            .is_some_and(|id| id.starts_with("_design/"))
        {
            return Vec::new();
        }
        if let Some(partial) = &self.partial
            && !partial.matches(doc)
        {
            return Vec::new();
        }
        let mut leaves = Vec::new();
        self.walk(doc, &mut Vec::new(), &mut leaves);
        let mut out = Vec::with_capacity(leaves.len() * 2 + 1);
        if self.default_field {
            for leaf in &leaves {
                if leaf.kind == TextKind::String && leaf.name.ends_with("_3Astring") {
                    out.push(TextField {
                        kind: TextKind::Text,
                        name: "$default".into(),
                        value: leaf.value.clone(),
                    });
                }
            }
        }
        let mut names: Vec<&str> = leaves.iter().map(|l| l.name.as_str()).collect();
        if out.iter().any(|f| f.name == "$default") {
            names.push("$default");
        }
        names.sort_unstable();
        names.dedup();
        let names: Vec<TextField> = names
            .into_iter()
            .map(|name| TextField {
                kind: TextKind::String,
                name: "$fieldnames".into(),
                value: Value::String(name.to_string()),
            })
            .collect();
        let mut all = names;
        all.extend(out);
        all.extend(leaves);
        all
    }

    fn walk(&self, value: &Value, path: &mut Vec<String>, out: &mut Vec<TextField>) {
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    path.push(key.clone());
                    self.walk(child, path, out);
                    path.pop();
                }
            }
            Value::Array(items) => {
                path.push("[]".into());
                if self.array_lengths {
                    self.leaf(
                        path,
                        "length",
                        Value::from(items.len()),
                        TextKind::Number,
                        out,
                    );
                }
                for item in items {
                    self.walk(item, path, out);
                }
                path.pop();
            }
            Value::String(_) => self.leaf(path, "string", value.clone(), TextKind::String, out),
            Value::Number(_) => self.leaf(path, "number", value.clone(), TextKind::Number, out),
            Value::Bool(b) => self.leaf(
                path,
                "boolean",
                Value::String(b.to_string()),
                TextKind::String,
                out,
            ),
            Value::Null => self.leaf(
                path,
                "null",
                Value::String("true".into()),
                TextKind::String,
                out,
            ),
        }
    }

    fn leaf(
        &self,
        path: &[String],
        kind_name: &str,
        value: Value,
        kind: TextKind,
        out: &mut Vec<TextField>,
    ) {
        if path.is_empty() {
            return;
        }
        let name = field_name(path, kind_name);
        let wanted = match &self.fields {
            None => true,
            Some(fields) => fields.contains(&name),
        };
        if wanted {
            out.push(TextField { kind, name, value });
        }
    }
}

/// `a.b:type`, each segment escaped (the type goes on the last one before
/// escaping, as CouchDB names them).
pub fn field_name(path: &[String], kind: &str) -> String {
    let last = path.len().saturating_sub(1);
    path.iter()
        .enumerate()
        .map(|(i, part)| {
            if i == last {
                escape_field(&format!("{part}:{kind}"))
            } else {
                escape_field(part)
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// A user's dotted field name with each segment escaped.
pub fn escape_user(name: &str) -> String {
    crate::fields::split(name)
        .iter()
        .map(|part| escape_field(part))
        .collect::<Vec<_>>()
        .join(".")
}

/// Lucene-safe: ASCII letters and digits stay, every other byte is `_XX`
/// (upper-case hex).
pub fn escape_field(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    for byte in part.bytes() {
        if byte.is_ascii_alphanumeric() {
            out.push(byte as char);
        } else {
            out.push_str(&format!("_{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn names(fields: &[TextField]) -> Vec<String> {
        fields
            .iter()
            .map(|f| format!("{}={}", f.name, f.value))
            .collect()
    }

    #[test]
    fn every_leaf_is_named_by_path_and_type() {
        let index = TextIndex::of(&json!({}));
        let doc = json!({"_id": "d", "a": {"b": "x"}, "n": 2, "t": true, "z": null, "l": ["p", 1]});
        let got = names(&index.fields_of(&doc));
        for expected in [
            "a.b:string=\"x\"",
            "n:number=2",
            "t:boolean=\"true\"",
            "z:null=\"true\"",
            "l.[]:length=2",
            "l.[]:string=\"p\"",
            "l.[]:number=1",
            "_id:string=\"d\"",
            "$default=\"x\"",
            "$fieldnames=\"a.b:string\"",
            "$fieldnames=\"$default\"",
        ] {
            let escaped = expected
                .replace("l.[]", "l._5B_5D")
                .replace("_id:", "_5Fid_3A")
                .replace("a.b:string", "a.b_3Astring")
                .replace("n:number", "n_3Anumber")
                .replace("t:boolean", "t_3Aboolean")
                .replace("z:null", "z_3Anull")
                .replace("_5B_5D:", "_5B_5D_3A");
            assert!(got.contains(&escaped), "{escaped} in {got:?}");
        }
    }

    #[test]
    fn only_the_named_fields_and_not_design_documents() {
        let index = TextIndex::of(
            &json!({"fields": [{"name": "foo", "type": "string"}], "default_field": false}),
        );
        let got = index.fields_of(&json!({"_id": "x", "foo": "a", "bar": 1}));
        assert_eq!(
            names(&got),
            ["$fieldnames=\"foo_3Astring\"", "foo_3Astring=\"a\""]
        );
        assert!(
            index
                .fields_of(&json!({"_id": "_design/x", "foo": "a"}))
                .is_empty()
        );
        let partial = TextIndex::of(&json!({"partial_filter_selector": {"keep": true}}));
        assert!(
            partial
                .fields_of(&json!({"_id": "x", "keep": false}))
                .is_empty()
        );
        assert!(
            !partial
                .fields_of(&json!({"_id": "x", "keep": true}))
                .is_empty()
        );
    }
}
