//! What a path below the server routes names (a database, a document, an
//! attachment, a design function), decoded by hand: ids and attachment
//! names may contain encoded slashes that a generic router would mangle.

use percent_encoding::percent_decode_str;

use crate::base::error::ApiError;

/// What a path names below the server level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// `/db`
    Db(String),
    /// `/db/_name...`: a database endpoint such as `_all_docs`.
    Endpoint { db: String, name: String },
    /// `/db/docid`, `/db/_design/name`, `/db/_local/name`
    Doc { db: String, id: String },
    /// `/db/docid/attachment/name`
    Attachment {
        db: String,
        id: String,
        name: String,
    },
    /// `/db/_design/ddoc/_kind/rest`: a design document function (`_view`,
    /// `_show`, ...). Attachment names cannot start with `_`, so such a
    /// path is never an attachment.
    DesignFunction {
        db: String,
        ddoc: String,
        kind: String,
        rest: Vec<String>,
    },
}

fn decode(segment: &str) -> Result<String, ApiError> {
    percent_decode_str(segment)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| ApiError::bad_request("URL path is not valid UTF-8"))
}

/// Splits a request path into what it names.
pub(crate) fn parse_target(path: &str) -> Result<Target, ApiError> {
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    let mut segments = trimmed.splitn(2, '/');
    let db = decode(segments.next().unwrap_or(""))?;
    let rest = segments.next().unwrap_or("");
    if rest.is_empty() {
        return Ok(Target::Db(db));
    }
    let mut parts = rest.splitn(2, '/');
    let first = decode(parts.next().unwrap_or(""))?;
    let after = parts.next();
    let (id, attachment) = if first == "_design" || first == "_local" {
        let mut inner = after.unwrap_or("").splitn(2, '/');
        let name = decode(inner.next().unwrap_or(""))?;
        let tail = inner.next();
        if first == "_design"
            && let Some(tail) = tail
            && tail.starts_with('_')
        {
            let mut pieces = tail.split('/').map(decode);
            let kind = pieces.next().transpose()?.unwrap_or_default();
            let rest = pieces.collect::<Result<Vec<_>, _>>()?;
            return Ok(Target::DesignFunction {
                db,
                ddoc: name,
                kind,
                rest,
            });
        }
        (format!("{first}/{name}"), tail)
    } else if first.starts_with('_')
        && !first.starts_with("_design/")
        && !first.starts_with("_local/")
    {
        if after.is_none_or(str::is_empty) {
            return Ok(Target::Endpoint { db, name: first });
        }
        // `/db/_name/x` is an attachment of a document CouchDB will refuse
        // by its id (405 for the methods attachments lack, 400 for a write).
        (first, after)
    } else {
        (first, after)
    };
    match attachment.filter(|a| !a.is_empty()) {
        None => Ok(Target::Doc { db, id }),
        Some(_) if id.starts_with("_local/") => Err(ApiError::bad_request(
            "_local documents do not accept attachments.",
        )),
        Some(raw) => {
            let name = raw
                .split('/')
                .map(decode)
                .collect::<Result<Vec<_>, _>>()?
                .join("/");
            Ok(Target::Attachment { db, id, name })
        }
    }
}
