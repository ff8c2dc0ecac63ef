//! The model of the `multipart` target: what the server must make of an
//! upload, worked out from the bytes sent.

use super::*;

/// What an accepted upload must have stored, worked out from the bytes
/// sent, the way the server reads them: the boundary from the content type
/// (the first `boundary` parameter, quotes trimmed), the first part the
/// document, then each part feeds the waiting `follows` attachment its
/// filename names, else the first one waiting; parts left over are ignored.
#[derive(Debug, Default)]
pub(super) struct Expected {
    /// Attachment name → the bytes stored (as sent: gzip when `.1`).
    pub(super) atts: BTreeMap<String, (Vec<u8>, bool)>,
    /// `follows` attachments no part fed: the upload must be refused.
    pub(super) unfed: Vec<String>,
    /// Attachments whose declared length their bytes do not have: the
    /// upload must be refused.
    pub(super) lying: Vec<String>,
    /// Of those, the gzip ones: their length is checked when the revision
    /// is written, so a `new_edits=false` upload of a revision the
    /// database already has (a no-op, as in CouchDB) may pass.
    pub(super) lying_gzip: Vec<String>,
    /// The document part is not said to be JSON (no headers, or another
    /// type): the upload must be refused, as CouchDB refuses it (415).
    /// Attachment parts without headers are read as CouchDB reads them.
    pub(super) headerless: bool,
}

/// The server's reading of a multipart content type's boundary.
pub(super) fn server_boundary(content_type: &str) -> Option<String> {
    let mut params = content_type.split(';');
    if !params
        .next()?
        .trim()
        .eq_ignore_ascii_case("multipart/related")
    {
        return None;
    }
    params.find_map(|p| {
        let (key, value) = p.split_once('=')?;
        key.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| value.trim().trim_matches('"').to_string())
            .filter(|b| !b.is_empty())
    })
}

/// The filename a part's headers give, when it is plain enough to say
/// for sure how the server reads it: `Err` when it is not.
pub(super) fn plain_filename(part: &answers::Part) -> Result<Option<String>, ()> {
    let Some(disposition) = part.header("content-disposition") else {
        return Ok(None);
    };
    let name = disposition
        .strip_prefix("attachment; filename=\"")
        .and_then(|rest| rest.strip_suffix('"'))
        .ok_or(())?;
    if name.contains(['"', '\\']) || name.contains("filename") {
        return Err(());
    }
    Ok(Some(name.to_string()))
}

/// The model of an upload (see [`Expected`]); `None` when the body does not
/// split cleanly, or holds something whose fate the model does not know
/// (a deletion, an unknown encoding, a length that is no number, ...).
pub(super) fn model(content_type: &str, body: &[u8]) -> Option<Expected> {
    use base64::Engine;
    let boundary = server_boundary(content_type)?;
    let parts = answers::split(body, &boundary).ok()?;
    let (first, rest) = parts.split_first()?;
    let doc: Map<String, Value> = serde_json::from_slice(&first.body).ok()?;
    if doc
        .get("_deleted")
        .is_some_and(|d| d != &Value::Bool(false) && !d.is_null())
    {
        return None;
    }
    let mut expected = Expected {
        headerless: !first.header("content-type").is_some_and(|t| {
            t.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        }),
        ..Expected::default()
    };
    let Some(atts) = doc.get("_attachments") else {
        return Some(expected);
    };
    let mut waiting: Vec<(String, bool, Option<u64>)> = Vec::new();
    for (name, entry) in atts.as_object()? {
        let entry = entry.as_object()?;
        let follows = entry.get("follows") == Some(&Value::Bool(true));
        let data = entry.get("data");
        let stub = entry.get("stub").is_some();
        match (follows, data, stub) {
            (true, None, false) => {
                let gzip = match entry.get("encoding") {
                    None | Some(Value::Null) => false,
                    Some(Value::String(e)) if e == "gzip" => true,
                    Some(_) => return None,
                };
                let length = match entry.get("length") {
                    None | Some(Value::Null) => None,
                    Some(l) => Some(l.as_u64()?),
                };
                waiting.push((name.clone(), gzip, length));
            }
            (false, Some(Value::String(data)), false) => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .ok()?;
                expected.atts.insert(name.clone(), (bytes, false));
            }
            (false, None, true) => {}
            _ => return None,
        }
    }
    for part in rest {
        if waiting.is_empty() {
            break;
        }
        let filename = plain_filename(part).ok()?;
        let at = filename
            .and_then(|f| waiting.iter().position(|(name, _, _)| *name == f))
            .unwrap_or(0);
        let (name, gzip, length) = waiting.remove(at);
        let content_length = if gzip {
            match answers::gunzip(&part.body) {
                Ok(inflated) => Some(inflated.len() as u64),
                Err(_) => None, // the upload must be refused
            }
        } else {
            Some(part.body.len() as u64)
        };
        if content_length.is_none() || length.is_some_and(|l| Some(l) != content_length) {
            if gzip {
                expected.lying_gzip.push(name.clone());
            } else {
                expected.lying.push(name.clone());
            }
        }
        expected.atts.insert(name, (part.body.clone(), gzip));
    }
    expected.unfed = waiting.into_iter().map(|(name, _, _)| name).collect();
    Some(expected)
}
