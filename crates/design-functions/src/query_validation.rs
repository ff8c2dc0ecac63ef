//! `validate_doc_update` written as a Mango selector (CouchDB's next
//! release): a design document with `"language": "query"` and
//! `"validate_doc_update": {"newDoc": {...}, "oldDoc": {...}}` accepts a
//! write when `{"newDoc": <the new document>, "oldDoc": <the revision it
//! replaces, or null>}` matches the selector, and refuses it otherwise with
//! CouchDB's 403 `forbidden` "document is not valid". No JavaScript runs.
//! [`crate::Validators`] finds these beside the JavaScript functions and
//! judges with both, so every way a write comes in is judged by them.

use mango::selector::{Selector, SelectorError};
use serde_json::{Map, Value};

/// CouchDB's reason when a document does not match.
pub const NOT_VALID: &str = "document is not valid";

/// The selector of a design document that validates with one: `None` when
/// it validates with JavaScript or not at all.
pub fn selector_of(ddoc: &Value) -> Option<Result<Selector, SelectorError>> {
    if ddoc.get("language").and_then(Value::as_str) != Some("query") {
        return None;
    }
    let rule = ddoc.get("validate_doc_update")?;
    if !rule.is_object() {
        return None;
    }
    Some(Selector::parse(rule))
}

/// Whether a write is accepted; when not, the caller refuses it with
/// [`NOT_VALID`]. A selector that cannot be read accepts nothing: a write
/// is never let through unjudged.
pub fn accepts(
    selector: &Result<Selector, SelectorError>,
    new_doc: &Value,
    old_doc: Option<&Value>,
) -> bool {
    let Ok(selector) = selector else {
        return false;
    };
    let mut both = Map::new();
    both.insert("newDoc".into(), new_doc.clone());
    both.insert("oldDoc".into(), old_doc.cloned().unwrap_or(Value::Null));
    selector.matches(&Value::Object(both))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(selector: Value) -> Result<Selector, SelectorError> {
        selector_of(&json!({"language": "query", "validate_doc_update": selector})).unwrap()
    }

    #[test]
    fn only_query_design_documents_with_an_object_validate_by_selector() {
        assert!(selector_of(&json!({"validate_doc_update": "function(){}"})).is_none());
        assert!(
            selector_of(&json!({"language": "javascript", "validate_doc_update": {}})).is_none()
        );
        assert!(selector_of(&json!({"language": "query", "validate_doc_update": "x"})).is_none());
        assert!(selector_of(&json!({"language": "query"})).is_none());
        assert!(selector_of(&json!({"language": "query", "validate_doc_update": {}})).is_some());
    }

    #[test]
    fn new_and_old_documents_are_matched_together() {
        let typed = rule(json!({"newDoc": {"type": {"$type": "string"}, "year": {"$lt": 2026}}}));
        assert!(accepts(
            &typed,
            &json!({"type": "movie", "year": 1994}),
            None
        ));
        for bad in [
            json!({"type": 42, "year": 1994}),
            json!({"type": "movie", "year": 2094}),
        ] {
            assert!(!accepts(&typed, &bad, None));
        }
        let keeps_type = rule(json!({"oldDoc.type": "movie", "newDoc.type": "movie"}));
        let old = json!({"type": "movie"});
        assert!(accepts(&keeps_type, &json!({"type": "movie"}), Some(&old)));
        assert!(!accepts(
            &keeps_type,
            &json!({"type": "director"}),
            Some(&old)
        ));
        // A new document has no old one: `oldDoc` is null.
        assert!(!accepts(&keeps_type, &json!({"type": "movie"}), None));
        let unreadable = rule(json!({"newDoc": {"$bogus": 1}}));
        assert!(unreadable.is_err());
        assert!(!accepts(&unreadable, &json!({}), None));
    }
}
