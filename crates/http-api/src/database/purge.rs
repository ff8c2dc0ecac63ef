//! Purging: `POST /{db}/_purge`, `GET|PUT /{db}/_purged_infos_limit` and
//! `GET /{db}/_purged_infos`, answered as CouchDB 3.5 answers them. Only
//! server admins purge or set the limit (`access::authorize`, as CouchDB's
//! `chttpd_auth_request`); members read the purge history.

use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::response::Response;
use revtree::{MAX_POS, RevHash, RevId};
use serde_json::{Map, Value, json};
use store::PurgeRequest;

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::json_body::{read_body, read_json_body, require_json_content_type};
use crate::base::response::json_response;

/// CouchDB's `[purge] max_document_id_number`: documents per request.
const MAX_DOCUMENT_ID_NUMBER: usize = 100;

/// CouchDB's `[purge] max_revisions_number`: revisions per request, all
/// documents together, duplicates counted.
const MAX_REVISIONS_NUMBER: usize = 1000;

/// # POST /{db}/_purge
///
/// `{"docid": ["rev", ...], ...}` → 201 `{"purge_seq": null, "purged":
/// {"docid": [the leaves purged]}}`, documents in request order. Revisions
/// that are not leaves, and documents that do not exist, purge nothing but
/// are still recorded (and spend a purge sequence), as in CouchDB.
pub(crate) async fn purge(
    state: AppState,
    db: String,
    request: Request,
) -> Result<Response, ApiError> {
    let user = crate::base::auth::user_of(&request);
    let database = state.open(&db, &user).await?;
    require_json_content_type(request.headers())?;
    let sent = has_body(&request);
    let body = match read_json_body(request.into_body(), &state.config).await? {
        Some(Value::Object(body)) => body,
        None => return Err(no_json(sent)),
        Some(_) => return Err(ApiError::bad_request("Request body must be a JSON object")),
    };
    let mut requests = Vec::with_capacity(body.len());
    let mut revisions = 0;
    for (id, revs) in body {
        let Value::Array(revs) = revs else {
            return Err(ApiError::bad_request("Invalid list of revisions"));
        };
        revisions += revs.len();
        let mut named = Vec::with_capacity(revs.len());
        for rev in &revs {
            named.push(parse_purge_rev(rev)?);
        }
        requests.push(to_request(id, named));
    }
    if requests.len() > MAX_DOCUMENT_ID_NUMBER {
        return Err(ApiError::bad_request(
            "Exceeded maximum number of documents.",
        ));
    }
    if revisions > MAX_REVISIONS_NUMBER {
        return Err(ApiError::bad_request(
            "Exceeded maximum number of revisions.",
        ));
    }
    let results = database.purge(requests).await?;
    let mut purged = Map::new();
    for result in results {
        let revs: Vec<String> = result.purged.iter().map(ToString::to_string).collect();
        purged.insert(result.id, json!(revs));
    }
    Ok(json_response(
        StatusCode::CREATED,
        &json!({"purge_seq": null, "purged": purged}),
    ))
}

/// # GET|HEAD|PUT /{db}/_purged_infos_limit
///
/// How many purge infos the database keeps; PUT takes a positive integer
/// (CouchDB does not check the content type here).
/// # GET /{db}/_purged_infos
/// The purges the database remembers (up to `_purged_infos_limit`), oldest
/// first: each document's id and the revisions purged from it.
pub(crate) async fn purged_infos(
    state: AppState,
    db: String,
    user: &auth::UserCtx,
) -> Result<Response, ApiError> {
    let database = state.open(&db, user).await?;
    let infos: Vec<Value> = database
        .purge_infos()
        .await?
        .into_iter()
        .map(|info| json!({"id": info.id, "revs": info.revs}))
        .collect();
    Ok(json_response(
        StatusCode::OK,
        &json!({"purged_infos": infos}),
    ))
}

/// # GET|PUT /{db}/_purged_infos_limit
pub(crate) async fn purged_infos_limit(
    state: AppState,
    db: String,
    request: Request,
) -> Result<Response, ApiError> {
    let user = crate::base::auth::user_of(&request);
    let database = state.open(&db, &user).await?;
    if request.method() != Method::PUT {
        return Ok(json_response(
            StatusCode::OK,
            &database.purged_infos_limit().await?,
        ));
    }
    let sent = has_body(&request);
    let bytes = read_body(request.into_body(), state.config.max_json_body_size).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(no_json(sent));
    }
    let limit = parse_limit(&bytes)?;
    database.set_purged_infos_limit(limit).await?;
    Ok(json_response(StatusCode::OK, &json!({"ok": true})))
}

/// Whether the request says it has a body (a length, even 0, or chunks).
fn has_body(request: &Request) -> bool {
    let headers = request.headers();
    headers.contains_key(header::CONTENT_LENGTH) || headers.contains_key(header::TRANSFER_ENCODING)
}

/// CouchDB's answer to a body with no JSON in it: a request without a body
/// is `Missing request body`, an empty or blank one is not JSON.
fn no_json(sent: bool) -> ApiError {
    ApiError::bad_request(if sent {
        "invalid UTF-8 JSON"
    } else {
        "Missing request body"
    })
}

/// A positive JSON integer. CouchDB takes integers of any size; one past
/// `u64` keeps every purge info there is, so it is read as `u64::MAX`.
fn parse_limit(bytes: &[u8]) -> Result<u64, ApiError> {
    let refused = || ApiError::bad_request("`purged_infos_limit` must be positive integer");
    let text = std::str::from_utf8(bytes)
        .map_err(|_| ApiError::bad_request("invalid UTF-8 JSON"))?
        .trim_matches([' ', '\t', '\r', '\n']);
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        let limit = text.parse::<u64>().unwrap_or(u64::MAX);
        return if limit == 0 {
            Err(refused())
        } else {
            Ok(limit)
        };
    }
    // Anything else that is JSON is refused for what it is; the rest is
    // not JSON.
    match ejson::from_str(text) {
        Ok(_) => Err(refused()),
        Err(_) => Err(ApiError::bad_request("invalid UTF-8 JSON")),
    }
}

/// A revision as a purge request names it, read as CouchDB's
/// `couch_doc:parse_rev` reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NamedRev {
    /// The position's decimal digits, without sign or leading zeros.
    pos: String,
    hash: RevHash,
}

impl NamedRev {
    /// The revision a tree may hold: none at position 0 or past `MAX_POS`.
    fn rev(&self) -> Option<RevId> {
        let pos: u64 = self.pos.parse().ok()?;
        (pos <= MAX_POS)
            .then(|| RevId::new(pos, self.hash.clone()).ok())
            .flatten()
    }

    /// CouchDB's order of `{Pos, Hash}`: the position as a number, then
    /// the hash's bytes.
    fn order_key(&self) -> (usize, &str, &[u8]) {
        (self.pos.len(), &self.pos, self.hash.as_bytes())
    }
}

impl std::fmt::Display for NamedRev {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.pos, self.hash)
    }
}

/// `N-hash` with CouchDB's leniency and strictness: the position is a
/// decimal integer (an optional `+`, leading zeros and `0` are accepted,
/// any size); a hash of exactly 32 bytes must be a hexadecimal number (of
/// either case: it names the same 16 bytes as the lowercase form); any
/// other hash is kept as text. Anything else is `Invalid rev format`.
fn parse_purge_rev(value: &Value) -> Result<NamedRev, ApiError> {
    let invalid = || ApiError::bad_request("Invalid rev format");
    let text = value.as_str().ok_or_else(invalid)?;
    let (pos, hash) = text.split_once('-').ok_or_else(invalid)?;
    let digits = pos.strip_prefix('+').unwrap_or(pos);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    let trimmed = digits.trim_start_matches('0');
    let pos = if trimmed.is_empty() { "0" } else { trimmed };
    let hash = if hash.len() == 32 {
        let bytes = parse_hex_128(hash).ok_or_else(invalid)?;
        let lower: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        RevHash::parse(&lower)
    } else {
        RevHash::parse(hash)
    };
    Ok(NamedRev {
        pos: pos.to_string(),
        hash,
    })
}

/// A 32-byte hash as Erlang's `list_to_integer(Hash, 16)` reads it, as the
/// 16 bytes `<<N:128>>` CouchDB makes of it: an optional sign, then hex
/// digits of either case.
fn parse_hex_128(text: &str) -> Option<[u8; 16]> {
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let value = u128::from_str_radix(digits, 16).ok()?;
    Some(
        if negative {
            value.wrapping_neg()
        } else {
            value
        }
        .to_be_bytes(),
    )
}

/// One document's request: the revisions a tree may hold to purge, and
/// every revision sorted and without duplicates for its purge info, as
/// CouchDB records them.
fn to_request(id: String, mut named: Vec<NamedRev>) -> PurgeRequest {
    named.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
    named.dedup_by(|a, b| a.order_key() == b.order_key());
    PurgeRequest {
        id,
        revs: named.iter().filter_map(NamedRev::rev).collect(),
        recorded: named.iter().map(ToString::to_string).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(text: &str) -> Result<String, ApiError> {
        parse_purge_rev(&json!(text)).map(|r| r.to_string())
    }

    #[test]
    fn revisions_are_read_as_couchdb_reads_them() {
        assert_eq!(named("1-abc").unwrap(), "1-abc");
        assert_eq!(named("01-x").unwrap(), "1-x");
        assert_eq!(named("+1-x").unwrap(), "1-x");
        assert_eq!(named("00-x").unwrap(), "0-x");
        assert_eq!(named("1-x-y").unwrap(), "1-x-y");
        assert_eq!(named("1-").unwrap(), "1-");
        assert_eq!(
            named("99999999999999999999-x").unwrap(),
            "99999999999999999999-x"
        );
        let upper = "1-967A00DFF5E02ADD41819138ABB3284D";
        assert_eq!(named(upper).unwrap(), upper.to_lowercase());
        for bad in [
            " 1-x",
            "-1-x",
            "x-1",
            "1",
            "",
            "+-x",
            "1-zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
        ] {
            assert!(named(bad).is_err(), "{bad:?}");
        }
        for value in [json!(null), json!(1), json!(["1-x"])] {
            assert!(parse_purge_rev(&value).is_err());
        }
    }

    #[test]
    fn only_revisions_a_tree_can_hold_are_purged_but_all_are_recorded() {
        let revs = [
            "2-b",
            "0-x",
            "1-a",
            "01-a",
            "99999999999999999999-x",
            "10-a",
        ]
        .map(|r| parse_purge_rev(&json!(r)).unwrap());
        let request = to_request("d".into(), revs.to_vec());
        let held: Vec<String> = request.revs.iter().map(ToString::to_string).collect();
        assert_eq!(held, ["1-a", "2-b", "10-a"]);
        assert_eq!(
            request.recorded,
            ["0-x", "1-a", "2-b", "10-a", "99999999999999999999-x"]
        );
    }

    #[test]
    fn the_limit_is_a_positive_integer() {
        assert_eq!(parse_limit(b"10").unwrap(), 10);
        assert_eq!(parse_limit(b" 12\n").unwrap(), 12);
        assert_eq!(parse_limit(b"99999999999999999999").unwrap(), u64::MAX);
        for refused in [&b"0"[..], b"-1", b"1.5", b"1e3", b"\"10\"", b"null", b"[]"] {
            let reason = parse_limit(refused).unwrap_err().error_info().2;
            assert_eq!(reason, "`purged_infos_limit` must be positive integer");
        }
        for not_json in [&b"abc"[..], b"", b"  "] {
            let reason = parse_limit(not_json).unwrap_err().error_info().2;
            assert_eq!(reason, "invalid UTF-8 JSON");
        }
    }
}
