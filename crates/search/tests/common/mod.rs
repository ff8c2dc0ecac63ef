//! What the engine's tests share: an index definition needing no
//! database, and fields as index functions name them.

use std::collections::BTreeMap;

use design_functions::DesignDoc;
use design_functions::search::{FieldKind, IndexedField, SearchApi};
use search::IndexDefinition;
use serde_json::Value;

/// A Nouveau index with the standard analyzer (and `field_analyzers`).
pub fn definition(field_analyzers: &[(&str, &str)]) -> IndexDefinition {
    IndexDefinition {
        api: SearchApi::Nouveau,
        name: "i".into(),
        ddoc: DesignDoc {
            db: "db".into(),
            id: "_design/d".into(),
            rev: "1-a".into(),
            json: "{}".into(),
        },
        default_analyzer: "standard".into(),
        field_analyzers: field_analyzers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        partitioned: false,
        mango: None,
        signature: "test".into(),
    }
}

pub fn field(kind: FieldKind, name: &str, value: Value) -> IndexedField {
    IndexedField {
        kind,
        name: name.into(),
        value,
        store: false,
        facet: false,
        searchable: true,
    }
}
