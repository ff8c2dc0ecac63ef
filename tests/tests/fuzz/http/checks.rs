//! What every answer of the `http` target must be: the per-request
//! invariants, the writes an answer acknowledges, and a JSON validator
//! without a depth limit.

use super::*;

/// The per-request invariants.
pub(super) fn check_answer(req: &Req, sent: &str, answer: &Answer, v: &mut Violations) {
    let what = format!("{} {}", req.method, req.template.label());
    let report = || {
        format!(
            "{sent}-> {} {}\n{}",
            answer.status,
            answer.content_type,
            snippet(&answer.body, 1500)
        )
    };
    let json: Option<Value> = serde_json::from_slice(&answer.body).ok();
    if answer.status >= 500 {
        let error = json
            .as_ref()
            .and_then(|j| j["error"].as_str())
            .unwrap_or("?")
            .to_string();
        let expected = (answer.status == 501
            && (error == "not_implemented" || req.method == "HEAD"))
            || (answer.status == 500
                && req.template == Template::Replicate
                && error != "unknown_error"
                && error != "?");
        if !expected {
            v.add(format!("{} {error} from {what}", answer.status), report());
        }
    }
    let ct = answer.content_type.as_str();
    let bytes_expected = req.template == Template::Attachment
        && matches!(req.method, "GET")
        && (200..300).contains(&answer.status);
    if req.method == "HEAD"
        || answer.status == 304
        || bytes_expected
        || ct.starts_with("multipart/")
        || ct.starts_with("text/event-stream")
    {
        return;
    }
    if !ct.starts_with("application/json") {
        v.add(
            format!("non-JSON answer ({}, {ct:?}) from {what}", answer.status),
            report(),
        );
        return;
    }
    let valid = json.is_some()
        || is_json(&answer.body)
        || (req.template == Template::Changes
            && !answer.body.is_empty()
            && answer
                .body
                .split(|&b| b == b'\n')
                .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
                .all(is_json));
    if !valid {
        v.add(format!("invalid JSON from {what}"), report());
        return;
    }
    if answer.status >= 400 {
        let shaped = json
            .as_ref()
            .is_some_and(|j| j["error"].is_string() && j["reason"].is_string());
        v.check(
            shaped,
            &format!("error without error/reason from {what}"),
            report,
        );
    }
}

/// Records the writes a 2xx answer acknowledges.
pub(super) fn learn(
    req: &Req,
    answer: &Answer,
    ledger: &mut BTreeMap<(String, String), Acked>,
    last_rev: &mut Option<String>,
) {
    let db = req
        .path
        .trim_start_matches('/')
        .split(['/', '?'])
        .next()
        .map(percent_decode)
        .unwrap_or_default();
    // A database is deleted by its own path, with or without a trailing
    // slash (`DELETE /db/`, which a document path with an empty id becomes).
    let names_a_database = req
        .path
        .split('?')
        .next()
        .unwrap_or("")
        .split('/')
        .filter(|segment| !segment.is_empty())
        .count()
        == 1;
    if req.method == "DELETE"
        && (req.template == Template::Db || (names_a_database && answer.status == 200))
    {
        ledger.retain(|(d, _), _| *d != db);
        return;
    }
    if !req.template.writes() || !matches!(req.method, "PUT" | "POST" | "DELETE" | "COPY") {
        return;
    }
    let Ok(json) = serde_json::from_slice::<Value>(&answer.body) else {
        return;
    };
    let deleting = req.method == "DELETE"
        || req
            .body
            .as_ref()
            .is_some_and(|b| b.windows(8).any(|w| w == b"_deleted"));
    let rows = match &json {
        Value::Array(rows) => rows.iter().collect(),
        row => vec![row],
    };
    for row in rows {
        if row.get("error").is_some() {
            continue;
        }
        let (Some(id), Some(rev)) = (row["id"].as_str(), row["rev"].as_str()) else {
            continue;
        };
        *last_rev = Some(rev.to_string());
        let key = (db.clone(), id.to_string());
        ledger.insert(
            key,
            Acked {
                rev: rev.to_string(),
                maybe_deleted: deleting,
            },
        );
    }
}

/// Decodes `%XX` escapes (a database name from a request path).
pub(super) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(b) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `bytes` is exactly one JSON value (RFC 8259), at any depth:
/// serde_json stops at 128 levels, which a server may legitimately pass
/// (a deep document inside a response's rows), so deep answers are checked
/// here instead. Iterative, so no depth can exhaust the stack.
pub(crate) fn is_json(bytes: &[u8]) -> bool {
    if std::str::from_utf8(bytes).is_err() {
        return false;
    }
    let mut stack: Vec<u8> = Vec::new(); // the open `[` and `{`
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while bytes
            .get(*i)
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            *i += 1;
        }
    };
    // After `{` or `,` in an object: a key and its colon.
    let key = |i: &mut usize| {
        skip_ws(i);
        if !json_string(bytes, i) {
            return false;
        }
        skip_ws(i);
        if bytes.get(*i) != Some(&b':') {
            return false;
        }
        *i += 1;
        true
    };
    'value: loop {
        skip_ws(&mut i);
        match bytes.get(i) {
            Some(&open @ (b'[' | b'{')) => {
                i += 1;
                skip_ws(&mut i);
                let close = if open == b'[' { b']' } else { b'}' };
                if bytes.get(i) == Some(&close) {
                    i += 1;
                } else {
                    stack.push(open);
                    if open == b'{' && !key(&mut i) {
                        return false;
                    }
                    continue 'value;
                }
            }
            Some(b'"') => {
                if !json_string(bytes, &mut i) {
                    return false;
                }
            }
            Some(b't') | Some(b'f') | Some(b'n') => {
                let word: &[u8] = match bytes[i] {
                    b't' => b"true",
                    b'f' => b"false",
                    _ => b"null",
                };
                if !bytes[i..].starts_with(word) {
                    return false;
                }
                i += word.len();
            }
            Some(_) => {
                if !json_number(bytes, &mut i) {
                    return false;
                }
            }
            None => return false,
        }
        // A value is complete: close containers, or go on to the next value.
        loop {
            skip_ws(&mut i);
            let Some(&open) = stack.last() else {
                return i == bytes.len();
            };
            match bytes.get(i) {
                Some(b',') => {
                    i += 1;
                    if open == b'{' && !key(&mut i) {
                        return false;
                    }
                    continue 'value;
                }
                Some(b']') if open == b'[' => {
                    i += 1;
                    stack.pop();
                }
                Some(b'}') if open == b'{' => {
                    i += 1;
                    stack.pop();
                }
                _ => return false,
            }
        }
    }
}

/// A JSON string at `*i` (which must be its opening quote); moves past it.
pub(super) fn json_string(bytes: &[u8], i: &mut usize) -> bool {
    if bytes.get(*i) != Some(&b'"') {
        return false;
    }
    *i += 1;
    loop {
        match bytes.get(*i) {
            None => return false,
            Some(b'"') => {
                *i += 1;
                return true;
            }
            Some(b'\\') => match bytes.get(*i + 1) {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => *i += 2,
                Some(b'u')
                    if bytes
                        .get(*i + 2..*i + 6)
                        .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) =>
                {
                    *i += 6
                }
                _ => return false,
            },
            Some(&b) if b < 0x20 => return false,
            Some(_) => *i += 1,
        }
    }
}

/// A JSON number at `*i`; moves past it.
pub(super) fn json_number(bytes: &[u8], i: &mut usize) -> bool {
    let digits = |i: &mut usize| {
        let start = *i;
        while bytes.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i > start
    };
    if bytes.get(*i) == Some(&b'-') {
        *i += 1;
    }
    match bytes.get(*i) {
        Some(b'0') => *i += 1,
        Some(b'1'..=b'9') => {
            digits(i);
        }
        _ => return false,
    }
    if bytes.get(*i) == Some(&b'.') {
        *i += 1;
        if !digits(i) {
            return false;
        }
    }
    if matches!(bytes.get(*i), Some(b'e' | b'E')) {
        *i += 1;
        if matches!(bytes.get(*i), Some(b'+' | b'-')) {
            *i += 1;
        }
        if !digits(i) {
            return false;
        }
    }
    true
}
