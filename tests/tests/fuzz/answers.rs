//! How the end-to-end targets `multipart` and `query` read the server's
//! answers: JSON answers and their error shape, and multipart answers with
//! a strict reader of our own (RFC 2046 as CouchDB writes it), so that a
//! malformed boundary, a part header with a raw CR or LF, a wrong
//! `Content-Length` or an attachment part that does not match its JSON
//! entry is a finding rather than something a lenient parser forgives.

use std::collections::BTreeMap;
use std::io::Read;

use serde_json::{Map, Value};

use crate::driver::Violations;
use crate::http::{Answer, is_json, snippet};

/// Checks an answer that must be JSON: no 5xx (but `501 not_implemented`),
/// an `application/json` content type, valid JSON, and `error` and
/// `reason` strings on a 4xx. Returns the parsed value (`Null` for JSON
/// too deep for serde_json), `None` when it is not JSON.
pub(crate) fn check_json(
    what: &str,
    shown: &str,
    answer: &Answer,
    v: &mut Violations,
) -> Option<Value> {
    let report = || {
        format!(
            "{shown}\n-> {} {}\n{}",
            answer.status,
            answer.content_type,
            snippet(&answer.body, 1500)
        )
    };
    let json: Option<Value> = serde_json::from_slice(&answer.body).ok();
    check_status(what, answer, json.as_ref(), &report, v);
    if !answer.content_type.starts_with("application/json") {
        v.add(
            format!(
                "non-JSON answer ({}, {:?}) from {what}",
                answer.status, answer.content_type
            ),
            report(),
        );
        return None;
    }
    let json = match json {
        Some(json) => json,
        None if is_json(&answer.body) => Value::Null,
        None => {
            v.add(format!("invalid JSON from {what}"), report());
            return None;
        }
    };
    check_error_shape(what, answer, &json, &report, v);
    Some(json)
}

/// No 5xx but `501 not_implemented`.
pub(crate) fn check_status(
    what: &str,
    answer: &Answer,
    json: Option<&Value>,
    report: &dyn Fn() -> String,
    v: &mut Violations,
) {
    if answer.status >= 500 {
        let error = json
            .and_then(|j| j["error"].as_str())
            .unwrap_or("?")
            .to_string();
        if !(answer.status == 501 && error == "not_implemented") {
            v.add(format!("{} {error} from {what}", answer.status), report());
        }
    }
}

/// A 4xx carries `error` and `reason` strings.
pub(crate) fn check_error_shape(
    what: &str,
    answer: &Answer,
    json: &Value,
    report: &dyn Fn() -> String,
    v: &mut Violations,
) {
    if answer.status >= 400 && !(json["error"].is_string() && json["reason"].is_string()) {
        v.add(format!("error without error/reason from {what}"), report());
    }
}

/// One part of a multipart body: its headers (name, value) and its bytes.
#[derive(Debug, Clone)]
pub(crate) struct Part {
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Part {
    /// The value of header `name` (case-insensitive), if present.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A character RFC 2046 allows in a boundary (`bchars`).
fn is_bchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "'()+_,-./:=? ".contains(c)
}

/// An HTTP token character (`tchar`).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The boundary of a multipart content type of the given `kind`, checked
/// strictly: one `boundary` parameter, a token or a quoted string, 1 to 70
/// `bchars` not ending in a space.
pub(crate) fn boundary_param(content_type: &str, kind: &str) -> Result<String, String> {
    let mut pieces = content_type.split(';');
    let essence = pieces.next().unwrap_or("").trim();
    if !essence.eq_ignore_ascii_case(kind) {
        return Err(format!("content type {content_type:?} is not {kind}"));
    }
    let mut found = None;
    for param in pieces {
        let (key, value) = param
            .split_once('=')
            .ok_or_else(|| format!("parameter {param:?} without `=` in {content_type:?}"))?;
        if !key.trim().eq_ignore_ascii_case("boundary") {
            continue;
        }
        if found.is_some() {
            return Err(format!("two boundaries in {content_type:?}"));
        }
        let value = value.trim();
        let value = match value.strip_prefix('"') {
            Some(rest) => rest
                .strip_suffix('"')
                .filter(|inner| !inner.contains(['"', '\\']))
                .ok_or_else(|| format!("badly quoted boundary in {content_type:?}"))?,
            None => value,
        };
        found = Some(value.to_string());
    }
    let boundary = found.ok_or_else(|| format!("no boundary in {content_type:?}"))?;
    if boundary.is_empty()
        || boundary.len() > 70
        || !boundary.chars().all(is_bchar)
        || boundary.ends_with(' ')
    {
        return Err(format!("malformed boundary {boundary:?}"));
    }
    Ok(boundary)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Splits `body` on `boundary` strictly: the body starts with the first
/// delimiter (no preamble), every line break is CRLF, every part has a
/// header block ended by an empty line (possibly empty itself), and the
/// closing delimiter ends the body (at most a CRLF after it).
pub(crate) fn split(body: &[u8], boundary: &str) -> Result<Vec<Part>, String> {
    let delimiter = format!("--{boundary}").into_bytes();
    if !body.starts_with(&delimiter) {
        return Err("the body does not start with its boundary".into());
    }
    let separator = [&b"\r\n"[..], &delimiter].concat();
    let mut i = delimiter.len();
    let mut parts = Vec::new();
    loop {
        let rest = &body[i..];
        if let Some(after) = rest.strip_prefix(b"--") {
            if after.is_empty() || after == b"\r\n" {
                return Ok(parts);
            }
            return Err(format!(
                "{} bytes after the closing delimiter: {:?}",
                after.len(),
                snippet(after, 80)
            ));
        }
        let Some(rest) = rest.strip_prefix(b"\r\n") else {
            return Err(format!(
                "a delimiter is followed by {:?}, not CRLF",
                snippet(rest, 40)
            ));
        };
        i += 2;
        let (headers, start) = if rest.starts_with(b"\r\n") {
            (Vec::new(), i + 2)
        } else {
            let end = find(rest, b"\r\n\r\n").ok_or("a part's headers never end")?;
            (parse_headers(&rest[..end])?, i + end + 4)
        };
        let length =
            find(&body[start..], &separator).ok_or("a part is not closed by a delimiter")?;
        parts.push(Part {
            headers,
            body: body[start..start + length].to_vec(),
        });
        i = start + length + separator.len();
    }
}

/// A part's header block: one `Name: value` per CRLF-ended line; a raw CR
/// or LF anywhere else is header injection.
fn parse_headers(block: &[u8]) -> Result<Vec<(String, String)>, String> {
    let mut headers = Vec::new();
    let mut rest = block;
    loop {
        let (line, next) = match find(rest, b"\r\n") {
            Some(at) => (&rest[..at], Some(&rest[at + 2..])),
            None => (rest, None),
        };
        if line.contains(&b'\r') || line.contains(&b'\n') {
            return Err(format!(
                "a raw CR or LF inside a part header: {:?}",
                snippet(line, 200)
            ));
        }
        let text = std::str::from_utf8(line)
            .map_err(|_| format!("a part header is not UTF-8: {:?}", snippet(line, 200)))?;
        let (name, value) = text
            .split_once(':')
            .ok_or_else(|| format!("a part header line without a colon: {text:?}"))?;
        if name.is_empty() || !name.bytes().all(is_tchar) {
            return Err(format!("a part header name that is no token: {name:?}"));
        }
        if value.chars().any(|c| c.is_ascii_control() && c != '\t') {
            return Err(format!(
                "a control character in part header {name}: {value:?}"
            ));
        }
        headers.push((
            name.to_string(),
            value.trim_matches([' ', '\t']).to_string(),
        ));
        match next {
            Some(next) => rest = next,
            None => return Ok(headers),
        }
    }
}

/// A multipart answer of `kind`, read strictly.
pub(crate) fn read(content_type: &str, body: &[u8], kind: &str) -> Result<Vec<Part>, String> {
    let boundary = boundary_param(content_type, kind)?;
    split(body, &boundary)
}

/// How the server writes an attachment's name in `filename="..."`: control
/// characters percent-encoded (inside the quotes, `"` and `\` are escaped).
pub(crate) fn filename_of(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_control() {
                format!("%{:02X}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// The text of an HTTP quoted-string (`"..."`, backslash escapes).
fn unquote(s: &str) -> Result<String, String> {
    let inner = s
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .ok_or_else(|| format!("not a quoted string: {s:?}"))?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next().ok_or("a quoted string ends in a backslash")?),
            '"' => return Err(format!("a raw quote inside a quoted string: {s:?}")),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// An attachment as a multipart answer carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SentAtt {
    /// The bytes as sent: gzip-compressed when `gzip`.
    pub(crate) bytes: Vec<u8>,
    pub(crate) gzip: bool,
}

impl SentAtt {
    /// The content itself.
    pub(crate) fn identity(&self) -> Result<Vec<u8>, String> {
        if self.gzip {
            gunzip(&self.bytes)
        } else {
            Ok(self.bytes.clone())
        }
    }
}

/// `bytes` inflated (at most 64 MiB).
pub(crate) fn gunzip(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .take(64 << 20)
        .read_to_end(&mut out)
        .map_err(|e| format!("does not inflate: {e}"))?;
    Ok(out)
}

/// A document as a multipart/related answer: its JSON, and the attachments
/// whose bytes follow it, by name.
#[derive(Debug, Clone)]
pub(crate) struct RelatedDoc {
    pub(crate) json: Map<String, Value>,
    pub(crate) atts: BTreeMap<String, SentAtt>,
}

/// Reads a multipart/related document answer strictly: a JSON part
/// (`Content-Type: application/json` only), then one part per attachment
/// the JSON marks `follows`, in its order, each with exactly
/// `Content-Disposition: attachment; filename="<name>"`, the entry's
/// `Content-Type`, the true `Content-Length`, and `Content-Encoding` when
/// (and only when) the entry has an `encoding`; lengths agree with the
/// entry's `length` and `encoded_length`.
pub(crate) fn read_related(content_type: &str, body: &[u8]) -> Result<RelatedDoc, String> {
    let parts = read(content_type, body, "multipart/related")?;
    let (first, rest) = parts.split_first().ok_or("no part at all")?;
    if first.headers.len() != 1 || first.header("content-type") != Some("application/json") {
        return Err(format!(
            "the document part's headers are {:?}",
            first.headers
        ));
    }
    let json: Map<String, Value> = serde_json::from_slice(&first.body).map_err(|e| {
        format!(
            "the document part is not a JSON object ({e}): {}",
            snippet(&first.body, 300)
        )
    })?;
    let follows: Vec<(String, Map<String, Value>)> = json
        .get("_attachments")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(_, a)| a["follows"] == Value::Bool(true))
        .map(|(name, a)| (name.clone(), a.as_object().cloned().unwrap_or_default()))
        .collect();
    if follows.len() != rest.len() {
        return Err(format!(
            "{} attachments follow in the JSON but {} parts come after it",
            follows.len(),
            rest.len()
        ));
    }
    let mut atts = BTreeMap::new();
    for ((name, entry), part) in follows.iter().zip(rest) {
        let att = attachment_part(name, entry, part).map_err(|e| {
            format!(
                "attachment {name:?}: {e}; its part headers: {:?}",
                part.headers
            )
        })?;
        atts.insert(name.clone(), att);
    }
    Ok(RelatedDoc { json, atts })
}

/// Checks one attachment part against its JSON entry.
fn attachment_part(name: &str, entry: &Map<String, Value>, part: &Part) -> Result<SentAtt, String> {
    let allowed = [
        "content-disposition",
        "content-type",
        "content-length",
        "content-encoding",
    ];
    for (i, (k, _)) in part.headers.iter().enumerate() {
        let lower = k.to_ascii_lowercase();
        if !allowed.contains(&lower.as_str()) {
            return Err(format!("unexpected header {k:?} (header injection?)"));
        }
        if part.headers[..i]
            .iter()
            .any(|(j, _)| j.eq_ignore_ascii_case(k))
        {
            return Err(format!("header {k} twice"));
        }
    }
    let disposition = part
        .header("content-disposition")
        .ok_or("no Content-Disposition")?;
    let quoted = disposition
        .strip_prefix("attachment; filename=")
        .ok_or_else(|| format!("Content-Disposition is {disposition:?}"))?;
    let filename = unquote(quoted)?;
    if filename != filename_of(name) {
        return Err(format!("filename {filename:?} for attachment {name:?}"));
    }
    let content_type = entry
        .get("content_type")
        .and_then(Value::as_str)
        .ok_or("no content_type in the JSON entry")?;
    let expected_type: String = content_type
        .chars()
        .filter(|c| !c.is_ascii_control())
        .collect();
    let shown_type = part.header("content-type").ok_or("no Content-Type")?;
    if shown_type != expected_type.trim_matches([' ', '\t']) {
        return Err(format!(
            "Content-Type {shown_type:?} for content_type {content_type:?}"
        ));
    }
    let declared: u64 = part
        .header("content-length")
        .and_then(|l| l.parse().ok())
        .ok_or("no numeric Content-Length")?;
    if declared != part.body.len() as u64 {
        return Err(format!(
            "Content-Length {declared} but {} bytes",
            part.body.len()
        ));
    }
    let encoding = entry.get("encoding").and_then(Value::as_str);
    let length = entry
        .get("length")
        .and_then(Value::as_u64)
        .ok_or("no length")?;
    match (part.header("content-encoding"), encoding) {
        (None, None) => {
            if length != declared {
                return Err(format!("length {length} but {declared} bytes"));
            }
            Ok(SentAtt {
                bytes: part.body.clone(),
                gzip: false,
            })
        }
        (Some("gzip"), Some("gzip")) => {
            if let Some(encoded) = entry.get("encoded_length")
                && encoded.as_u64() != Some(declared)
            {
                return Err(format!("encoded_length {encoded} but {declared} bytes"));
            }
            let att = SentAtt {
                bytes: part.body.clone(),
                gzip: true,
            };
            let inflated = att.identity()?;
            if inflated.len() as u64 != length {
                return Err(format!(
                    "length {length} but the gzip bytes inflate to {}",
                    inflated.len()
                ));
            }
            Ok(att)
        }
        (shown, entry) => Err(format!(
            "Content-Encoding {shown:?} for an entry with encoding {entry:?}"
        )),
    }
}

/// One part of an `open_revs` multipart/mixed answer.
#[derive(Debug, Clone)]
pub(crate) enum MixedPart {
    Doc(RelatedDoc),
    /// `{"missing": rev}`, marked `error="true"`.
    Missing,
}

/// Reads an `open_revs` multipart/mixed answer strictly: each part has
/// one `Content-Type` header and is a document (JSON alone when nothing
/// follows it, else a multipart/related body) or a missing revision.
pub(crate) fn read_mixed(content_type: &str, body: &[u8]) -> Result<Vec<MixedPart>, String> {
    let parts = read(content_type, body, "multipart/mixed")?;
    parts
        .iter()
        .map(|part| {
            if part.headers.len() != 1 {
                return Err(format!("a part's headers are {:?}", part.headers));
            }
            let inner = part
                .header("content-type")
                .ok_or("a part without Content-Type")?;
            if inner.to_ascii_lowercase().starts_with("multipart/related") {
                return read_related(inner, &part.body).map(MixedPart::Doc);
            }
            let json: Value = serde_json::from_slice(&part.body).map_err(|e| {
                format!(
                    "a JSON part does not parse ({e}): {}",
                    snippet(&part.body, 300)
                )
            })?;
            match inner {
                "application/json; error=\"true\"" if json.get("missing").is_some() => {
                    Ok(MixedPart::Missing)
                }
                "application/json" => {
                    let json = json
                        .as_object()
                        .cloned()
                        .ok_or("a document part is no object")?;
                    let follows = json
                        .get("_attachments")
                        .and_then(Value::as_object)
                        .is_some_and(|atts| {
                            atts.values().any(|a| a["follows"] == Value::Bool(true))
                        });
                    if follows {
                        return Err(
                            "a JSON part has attachments that follow, but nothing follows".into(),
                        );
                    }
                    Ok(MixedPart::Doc(RelatedDoc {
                        json,
                        atts: BTreeMap::new(),
                    }))
                }
                other => Err(format!(
                    "a part of type {other:?}: {}",
                    snippet(&part.body, 200)
                )),
            }
        })
        .collect()
}

/// The attachments of a JSON document read with `attachments=true`: each
/// entry's `data`, decoded, by name.
pub(crate) fn inline_atts(doc: &Map<String, Value>) -> Result<BTreeMap<String, Vec<u8>>, String> {
    use base64::Engine;
    let mut out = BTreeMap::new();
    let Some(atts) = doc.get("_attachments") else {
        return Ok(out);
    };
    let atts = atts.as_object().ok_or("_attachments is no object")?;
    for (name, entry) in atts {
        let data = entry["data"]
            .as_str()
            .ok_or_else(|| format!("attachment {name:?} has no data: {entry}"))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| format!("attachment {name:?}: data is not base64: {e}"))?;
        // CouchDB gives no `length` beside `data`; when given, it is the size.
        if !entry["length"].is_null() && entry["length"].as_u64() != Some(bytes.len() as u64) {
            return Err(format!(
                "attachment {name:?}: length {} but {} bytes of data",
                entry["length"],
                bytes.len()
            ));
        }
        out.insert(name.clone(), bytes);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reader_takes_what_couchdb_writes_and_refuses_injection() {
        let body = b"--abc\r\nContent-Type: application/json\r\n\r\n{\"_id\":\"d\",\"_attachments\":{\"a\\\"b\":{\"content_type\":\"text/plain\",\"length\":3,\"follows\":true}}}\r\n--abc\r\nContent-Disposition: attachment; filename=\"a\\\"b\"\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nxyz\r\n--abc--";
        let doc = read_related("multipart/related; boundary=\"abc\"", body).unwrap();
        assert_eq!(doc.atts["a\"b"].bytes, b"xyz");
        let injected = String::from_utf8_lossy(body).replace(
            "Content-Type: text/plain\r\n",
            "Content-Type: text/plain\nX-Injected: 1\r\n",
        );
        assert!(read_related("multipart/related; boundary=\"abc\"", injected.as_bytes()).is_err());
        assert!(
            boundary_param("multipart/related; boundary=\"a b \"", "multipart/related").is_err()
        );
        assert!(boundary_param("multipart/related; boundary=\"\"", "multipart/related").is_err());
        assert!(
            boundary_param(
                &format!("multipart/related; boundary={}", "x".repeat(71)),
                "multipart/related"
            )
            .is_err()
        );
        assert_eq!(filename_of("a\r\nb"), "a%0D%0Ab");
    }
}
