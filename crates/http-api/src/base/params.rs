//! Query-string parameters with CouchDB's parsing rules and error reasons.

use axum::http::Uri;
use revtree::RevId;
use serde_json::Value;

use crate::base::error::ApiError;

/// The decoded query string of a request.
#[derive(Debug, Clone, Default)]
pub struct Query(Vec<(String, String)>);

impl Query {
    pub fn parse(uri: &Uri) -> Query {
        let pairs = form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        Query(pairs)
    }

    /// The last value given for `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every parameter in order, as given.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.0
    }

    pub fn has(&self, key: &str) -> bool {
        self.0.iter().any(|(k, _)| k == key)
    }

    /// `true`/`false`; anything else is a 400 naming the parameter.
    pub fn bool(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some("true") => Ok(Some(true)),
            Some("false") => Ok(Some(false)),
            Some(other) => Err(ApiError::bad_request(format!(
                "Invalid boolean parameter: {key}={other:?}"
            ))),
        }
    }

    /// A document endpoint's boolean, read as CouchDB reads it: only `true`
    /// is true, and any other value is ignored rather than refused.
    pub fn doc_flag(&self, key: &str) -> bool {
        self.get(key) == Some("true")
    }

    /// A boolean parameter that defaults to false.
    pub fn flag(&self, key: &str) -> Result<bool, ApiError> {
        Ok(self.bool(key)?.unwrap_or(false))
    }

    /// A non-negative integer.
    pub fn u64(&self, key: &str) -> Result<Option<u64>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(text) => text.trim().parse().map(Some).map_err(|_| {
                ApiError::bad_request(format!(
                    "Invalid value for {key}: {text:?}, expected a non-negative integer"
                ))
            }),
        }
    }

    /// A JSON-encoded parameter (`key`, `startkey`, `open_revs`, ...).
    pub fn json(&self, key: &str) -> Result<Option<Value>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            // CouchDB's reason for any unparsable JSON parameter.
            Some(text) => Ok(Some(ejson::from_str(text)?)),
        }
    }

    /// A revision id parameter.
    pub fn rev(&self, key: &str) -> Result<Option<RevId>, ApiError> {
        self.get(key).map(parse_rev).transpose()
    }

    /// A boolean of the view-style endpoints (`_all_docs` and its kin),
    /// refused as CouchDB's view parser refuses it.
    pub fn view_bool(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some("true") => Ok(Some(true)),
            Some("false") => Ok(Some(false)),
            Some(other) => Err(query_parse_error(format!(
                "Invalid boolean parameter: {other:?}"
            ))),
        }
    }

    /// A non-negative integer of the view-style endpoints.
    pub fn view_uint(&self, key: &str) -> Result<Option<u64>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(text) => {
                let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
                if let Ok(n) = text.parse::<u64>() {
                    Ok(Some(n))
                } else if digits(text) {
                    // CouchDB's integers have no bound: past u64, as many as there are.
                    Ok(Some(u64::MAX))
                } else if text.strip_prefix('-').is_some_and(digits) {
                    Err(query_parse_error(format!(
                        "Invalid value for positive integer: {text:?}"
                    )))
                } else {
                    Err(query_parse_error(format!(
                        "Invalid value for integer: {text:?}"
                    )))
                }
            }
        }
    }
}

/// CouchDB's 400 for a view-style parameter it cannot use.
pub fn query_parse_error(reason: String) -> ApiError {
    ApiError::Invalid {
        error: "query_parse_error",
        reason,
    }
}

/// Parses a revision id with CouchDB's reason on failure.
pub fn parse_rev(text: &str) -> Result<RevId, ApiError> {
    RevId::parse(text).map_err(|_| ApiError::bad_request("Invalid rev format"))
}

/// Parses a JSON list of revision ids (`open_revs`, `atts_since`).
pub fn rev_list(value: &Value, what: &str) -> Result<Vec<RevId>, ApiError> {
    let Value::Array(items) = value else {
        // CouchDB's reason, whichever list it is.
        let _ = what;
        return Err(ApiError::bad_request("Invalid list of revisions"));
    };
    items
        .iter()
        .map(|v| {
            v.as_str()
                .ok_or_else(|| ApiError::bad_request("Invalid rev format"))
                .and_then(parse_rev)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Query {
        Query::parse(&format!("/x?{s}").parse::<Uri>().unwrap())
    }

    #[test]
    fn parameters_decode_and_the_last_one_wins() {
        let query = q("a=1&b=x%20y&a=2&c=%22k%22");
        assert_eq!(query.get("a"), Some("2"));
        assert_eq!(query.get("b"), Some("x y"));
        assert_eq!(query.json("c").unwrap(), Some(Value::String("k".into())));
    }

    #[test]
    fn bad_values_name_the_parameter() {
        let query = q("include_docs=yes&limit=-1&startkey=nope");
        assert!(
            matches!(query.bool("include_docs"), Err(ApiError::BadRequest(r)) if r.contains("include_docs"))
        );
        assert!(matches!(query.u64("limit"), Err(ApiError::BadRequest(r)) if r.contains("limit")));
        // CouchDB's own words for these.
        assert!(
            matches!(query.json("startkey"), Err(ApiError::BadRequest(r)) if r == "invalid UTF-8 JSON")
        );
        let reason = |e: ApiError| match e {
            ApiError::Invalid { error, reason } => format!("{error}: {reason}"),
            other => format!("{other:?}"),
        };
        assert_eq!(
            reason(query.view_bool("include_docs").unwrap_err()),
            "query_parse_error: Invalid boolean parameter: \"yes\""
        );
        assert_eq!(
            reason(query.view_uint("limit").unwrap_err()),
            "query_parse_error: Invalid value for positive integer: \"-1\""
        );
        assert_eq!(
            reason(q("skip=abc").view_uint("skip").unwrap_err()),
            "query_parse_error: Invalid value for integer: \"abc\""
        );
    }
}
