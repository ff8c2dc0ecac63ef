//! The fixed tantivy schema of every search index, and the registry of the
//! fields its function has named.
//!
//! Field names are chosen by design functions, so each kind of field is one
//! JSON field of the schema whose paths are those names: `s` holds the
//! strings (one term each, sortable and countable), `d` the doubles (for
//! ranges, sorting and range counts), `t<n>` the text of each analyzer the
//! index uses. A name is one path segment even when it has dots (`a.b`).

use std::collections::BTreeMap;

use tantivy::schema::{
    FAST, Field, IndexRecordOption, JsonObjectOptions, STORED, STRING, Schema, TextFieldIndexing,
};

use crate::SearchError;

/// What a field is, once the index has seen it: the first kind named
/// wins for the whole index, as in Nouveau.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    String,
    Double,
    Stored,
}

impl Kind {
    /// The name Nouveau's messages give it.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Text => "TEXT",
            Kind::String => "STRING",
            Kind::Double => "DOUBLE",
            Kind::Stored => "STORED",
        }
    }

    fn of_label(label: &str) -> Option<Kind> {
        Some(match label {
            "TEXT" => Kind::Text,
            "STRING" => Kind::String,
            "DOUBLE" => Kind::Double,
            "STORED" => Kind::Stored,
            _ => return None,
        })
    }
}

/// The kinds of the fields indexed so far, by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Registry(BTreeMap<String, Kind>);

impl Registry {
    pub fn get(&self, name: &str) -> Option<Kind> {
        self.0.get(name).copied()
    }

    /// Records `name` as `kind`, or Nouveau's refusal when it already has
    /// another kind.
    pub fn claim(&mut self, name: &str, kind: Kind) -> Result<(), SearchError> {
        match self.0.get(name) {
            Some(existing) if *existing != kind => Err(SearchError::BadRequest(format!(
                "field {name} is of type {} not {}",
                kind.label(),
                existing.label()
            ))),
            Some(_) => Ok(()),
            None => {
                self.0.insert(name.to_string(), kind);
                Ok(())
            }
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Object(
            self.0
                .iter()
                .map(|(k, v)| (k.clone(), v.label().into()))
                .collect(),
        )
    }

    pub fn from_json(value: Option<&serde_json::Value>) -> Registry {
        Registry(
            value
                .and_then(serde_json::Value::as_object)
                .map(|map| {
                    map.iter()
                        .filter_map(|(k, v)| Some((k.clone(), Kind::of_label(v.as_str()?)?)))
                        .collect()
                })
                .unwrap_or_default(),
        )
    }
}

/// The schema's fields.
#[derive(Debug, Clone)]
pub struct Fields {
    /// The document id: one term, stored, and a fast column (the tie-break
    /// of every sort, and what a hit is).
    pub id: Field,
    pub partition: Field,
    /// The user names and roles of a per-document access database's
    /// document.
    pub access: Field,
    /// The stored fields, as JSON `[[name, value], ...]` in call order.
    pub stored: Field,
    pub strings: Field,
    pub doubles: Field,
    /// Text by analyzer name.
    pub texts: Vec<(String, Field)>,
}

/// Tokenizer names registered on the index: the analyzer's, prefixed.
pub fn tokenizer_name(analyzer: &str) -> String {
    format!("a:{analyzer}")
}

impl Fields {
    /// The schema of an index using `analyzers` (sorted, each once).
    pub fn schema(analyzers: &[String]) -> (Schema, Fields) {
        let mut builder = Schema::builder();
        let id = builder.add_text_field("_id", STRING | STORED | FAST);
        let partition = builder.add_text_field("_partition", STRING);
        let access = builder.add_text_field("_access", STRING);
        let stored = builder.add_bytes_field("_stored", STORED);
        let strings = builder.add_json_field(
            "s",
            JsonObjectOptions::default()
                .set_indexing_options(
                    TextFieldIndexing::default()
                        .set_tokenizer("raw")
                        .set_index_option(IndexRecordOption::WithFreqs),
                )
                .set_fast("raw"),
        );
        let doubles = builder.add_json_field("d", JsonObjectOptions::default().set_fast("raw"));
        let texts = analyzers
            .iter()
            .enumerate()
            .map(|(n, analyzer)| {
                let field = builder.add_json_field(
                    &format!("t{n}"),
                    JsonObjectOptions::default().set_indexing_options(
                        TextFieldIndexing::default()
                            .set_tokenizer(&tokenizer_name(analyzer))
                            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
                    ),
                );
                (analyzer.clone(), field)
            })
            .collect();
        let fields = Fields {
            id,
            partition,
            access,
            stored,
            strings,
            doubles,
            texts,
        };
        (builder.build(), fields)
    }

    /// The fields of an index opened from its folder.
    pub fn of(schema: &Schema, analyzers: &[String]) -> Result<Fields, SearchError> {
        let get = |name: &str| {
            schema
                .get_field(name)
                .map_err(|_| SearchError::Engine(format!("the index has no field {name}")))
        };
        Ok(Fields {
            id: get("_id")?,
            partition: get("_partition")?,
            access: get("_access")?,
            stored: get("_stored")?,
            strings: get("s")?,
            doubles: get("d")?,
            texts: analyzers
                .iter()
                .enumerate()
                .map(|(n, analyzer)| Ok((analyzer.clone(), get(&format!("t{n}"))?)))
                .collect::<Result<_, SearchError>>()?,
        })
    }

    /// The text field of `analyzer`.
    pub fn text(&self, analyzer: &str) -> Option<Field> {
        self.texts
            .iter()
            .find(|(name, _)| name == analyzer)
            .map(|(_, field)| *field)
    }
}

/// A field name as one segment of a JSON path, in the index's documents,
/// terms and fast columns alike: `%`, `.` and `\\` are percent-encoded,
/// because tantivy splits paths at dots in places where an escaped dot
/// is not kept (the fast-field range of a `double` named `a.b`).
pub fn path(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '%' => out.push_str("%25"),
            '.' => out.push_str("%2E"),
            '\\' => out.push_str("%5C"),
            c => out.push(c),
        }
    }
    out
}

/// The name of a fast column: the JSON field's name, then the path.
pub fn column(json_field: &str, name: &str) -> String {
    format!("{json_field}.{}", path(name))
}
