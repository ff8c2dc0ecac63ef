//! `_find` bookmarks as CouchDB writes them: base64url (no padding) of the
//! Erlang term `[{startkey_docid, Id}, {startkey, Key}]`, compressed when
//! that is shorter, so a client may page through either server alike.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

use super::MangoError;
use super::etf::{self, Term};

/// Where the next page starts: the index key and document id of the last
/// row given.
#[derive(Debug, Clone, PartialEq)]
pub struct Bookmark {
    pub key: Value,
    pub doc_id: String,
}

impl Bookmark {
    pub fn encode(&self) -> String {
        let term = Term::List(vec![
            Term::Tuple(vec![
                Term::Atom("startkey_docid".into()),
                Term::Binary(self.doc_id.clone()),
            ]),
            Term::Tuple(vec![Term::Atom("startkey".into()), Term::json(&self.key)]),
        ]);
        URL_SAFE_NO_PAD.encode(etf::encode_compressed(&term))
    }

    /// A bookmark from a request; CouchDB's error for anything else.
    pub fn decode(text: &str) -> Result<Bookmark, MangoError> {
        let invalid = || {
            MangoError::bad(
                "invalid_bookmark",
                format!(
                    "Invalid bookmark value: {}",
                    Value::String(text.to_string())
                ),
            )
        };
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| invalid())?;
        let Some(Term::List(entries)) = etf::decode(&bytes) else {
            return Err(invalid());
        };
        let (mut key, mut doc_id) = (None, None);
        for entry in entries {
            let Term::Tuple(pair) = entry else {
                return Err(invalid());
            };
            match pair.as_slice() {
                [Term::Atom(name), value] if name == "startkey" => key = value.to_json(),
                [Term::Atom(name), Term::Binary(id)] if name == "startkey_docid" => {
                    doc_id = Some(id.clone())
                }
                _ => {}
            }
        }
        match (key, doc_id) {
            (Some(key), Some(doc_id)) => Ok(Bookmark { key, doc_id }),
            _ => Err(invalid()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bookmarks_are_couchdbs() {
        // Written by CouchDB 3.5 for document "dave" at key [40].
        let couch = "g2wAAAACaAJkAA5zdGFydGtleV9kb2NpZG0AAAAEZGF2ZWgCZAAIc3RhcnRrZXlrAAEoag";
        let mark = Bookmark::decode(couch).unwrap();
        assert_eq!(
            mark,
            Bookmark {
                key: json!([40]),
                doc_id: "dave".into()
            }
        );
        assert_eq!(mark.encode(), couch);
        let long = Bookmark {
            key: json!(["a long key that compresses well well well well well well"]),
            doc_id: "a long id that compresses well well well well well".into(),
        };
        assert!(long.encode().starts_with("g1AAAA"), "compressed");
        assert_eq!(Bookmark::decode(&long.encode()).unwrap(), long);
        for bad in [
            "garbage",
            "g2wAAAACaAJkAA5zdGFydGtleV9kb2NpZG0AAAAEZGF2ZWgCZAAIc3RhcnRrZXlrAAEoag==",
            "",
        ] {
            let e = Bookmark::decode(bad).unwrap_err();
            assert_eq!(e.error, "invalid_bookmark");
        }
    }
}
