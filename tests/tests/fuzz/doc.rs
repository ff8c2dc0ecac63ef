//! Target `doc`: the store's validation of what clients send, before any
//! database is touched: `validate_doc_id`, `DocInput::from_json` on document
//! shaped and arbitrary JSON, and the reversible database-name to file-name
//! mapping. Invariants: no panic; whatever is accepted is self-consistent
//! (a valid id, a printable revision, a `_revisions` path whose leaf is the
//! revision, a body without unknown special fields).

use proptest::prelude::*;
use serde_json::Value;
use store::{AttachmentInput, DocInput, StagedBlob, name, validate_doc_id};

use crate::driver::Violations;
use crate::hostile;

#[derive(Clone)]
pub enum Case {
    Id(String),
    Doc(Value),
    DbName(String),
}

/// JSON text, so a reproducer can be pasted into a request.
impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Case::Id(id) => write!(f, "validate_doc_id({id:?})"),
            Case::Doc(doc) => write!(f, "DocInput::from_json({doc})"),
            Case::DbName(db) => write!(f, "database name {db:?}"),
        }
    }
}

pub fn strategy() -> BoxedStrategy<Case> {
    let id = prop_oneof![
        3 => hostile::text().prop_map(Value::String),
        1 => prop::sample::select(&["_design/", "_local/", "_design/x", "_local/x", "_x", "", "a"][..])
            .prop_map(Value::from),
        1 => hostile::json_leaf(),
    ];
    let rev = prop_oneof![
        4 => hostile::rev_text().prop_map(Value::String),
        1 => hostile::json_leaf(),
    ];
    prop_oneof![
        2 => hostile::text().prop_map(Case::Id),
        5 => hostile::document(id, rev).prop_map(Case::Doc),
        1 => hostile::json(4).prop_map(Case::Doc),
        2 => prop_oneof![
            3 => "[a-z][a-z0-9_$()+/-]{0,12}",
            1 => hostile::text(),
            1 => "%[0-9A-Fa-f+-]{0,3}[a-z%]{0,4}",
            1 => Just("a".repeat(238)),
            1 => Just("a".repeat(239)),
        ]
        .prop_map(Case::DbName),
    ]
    .boxed()
}

// Special fields a parsed body may keep (CouchDB keeps them as content):
// the store's own list.
use store::BODY_SPECIAL_FIELDS;

pub fn check(case: &Case, v: &mut Violations) {
    match case {
        Case::Id(id) => {
            let _ = validate_doc_id(id);
        }
        Case::Doc(value) => check_doc(value, v),
        Case::DbName(db) => {
            let _ = name::illegal_name_reason(db);
            // Any file in the data folder is looked at as a possible database.
            let _ = name::name_from_file(&format!("{db}{}", name::DB_FILE_SUFFIX));
            if name::is_valid_db_name(db) {
                let file = name::file_name(db);
                let back = name::name_from_file(&file);
                v.check(
                    back.as_deref() == Some(db.as_str()),
                    "database file name does not map back to the name",
                    || format!("{db:?} -> {file:?} -> {back:?}"),
                );
                v.check(
                    !file.contains('/') && file.len() <= 255,
                    "valid database name maps to an unsafe file name",
                    || format!("{db:?} -> {file:?}"),
                );
            }
        }
    }
}

fn check_doc(value: &Value, v: &mut Violations) {
    let Ok(doc) = DocInput::from_json(value.clone()) else {
        return;
    };
    if let Some(id) = &doc.id {
        v.check(
            validate_doc_id(id).is_ok(),
            "DocInput accepted an invalid _id",
            || format!("{id:?}"),
        );
    }
    if let Some(rev) = &doc.rev {
        let shown = rev.to_string();
        v.check(
            revtree::RevId::parse(&shown).as_ref() == Ok(rev),
            "DocInput revision does not print back",
            || format!("{shown:?}"),
        );
    }
    if let Some(path) = doc.replicated_path() {
        v.check(
            doc.rev.as_ref() == Some(&path.leaf()),
            "replicated path's leaf is not the document's revision",
            || format!("rev {:?}, path {path:?}", doc.rev),
        );
        v.check(
            path.revs().all(|r| r.pos() >= 1),
            "replicated path has a position below 1",
            || format!("{path:?}"),
        );
    }
    for key in doc.body.keys() {
        v.check(
            !key.starts_with('_') || BODY_SPECIAL_FIELDS.contains(&key.as_str()),
            "DocInput body keeps an unknown special field",
            || format!("{key:?}"),
        );
    }
    v.check(
        serde_json::to_string(&doc.body).is_ok(),
        "DocInput body does not serialize",
        || Value::Object(doc.body.clone()).to_string(),
    );
    for (name, att) in &doc.attachments {
        v.check(
            !name.starts_with('_'),
            "attachment name starts with _",
            || format!("{name:?}"),
        );
        // A `follows` attachment once uploaded: any declared length.
        let _ = att.clone().staged(StagedBlob {
            digest: store::digest_of(b"x"),
            length: 1,
            gzipped: None,
            pin: Default::default(),
        });
        if let AttachmentInput::Inline { data, .. } = att {
            let _ = store::digest_of(data);
        }
    }
}
