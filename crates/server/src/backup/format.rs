//! The couchbackup file format: a header line, then lines that are JSON
//! arrays of documents. A resumed backup has a resume marker line where
//! the interrupted run stopped.

use serde_json::{Value, json};

/// The marker couchbackup writes where a backup was resumed.
pub(crate) const RESUME_MARKER: &str = "@cloudant/couchbackup:resume";

/// The first line of a backup: who wrote it, in couchbackup's mode `full`,
/// with attachments inline.
pub(crate) fn header() -> String {
    json!({
        "name": "@cloudant/couchbackup",
        "version": "2.11.12",
        "mode": "full",
        "attachments": true,
        "writer": format!("recliner {}", env!("CARGO_PKG_VERSION")),
    })
    .to_string()
}

pub(crate) fn resume_line() -> String {
    json!({ "marker": RESUME_MARKER }).to_string()
}

/// What one line of a backup holds.
#[derive(Debug, PartialEq)]
pub(crate) enum Line {
    Docs(Vec<Value>),
    /// The header, a resume marker or a blank line.
    Nothing,
}

/// Reads one line. A line that does not parse is an error unless it is
/// where an interrupted backup was resumed (its tail is the marker), as
/// couchbackup reads it.
pub(crate) fn parse_line(number: usize, text: &str) -> Result<Line, String> {
    let text = text.trim_end_matches(['\r', '\n']);
    if text.trim().is_empty() {
        return Ok(Line::Nothing);
    }
    match ejson::from_str(text) {
        Ok(Value::Array(docs)) => {
            if let Some(bad) = docs.iter().position(|d| !d.is_object()) {
                return Err(format!("line {number}: item {bad} is not a document"));
            }
            Ok(Line::Docs(docs))
        }
        Ok(Value::Object(o)) if o.get("marker").and_then(Value::as_str) == Some(RESUME_MARKER) => {
            Ok(Line::Nothing)
        }
        Ok(Value::Object(o)) if number == 1 && o.contains_key("name") && o.contains_key("mode") => {
            Ok(Line::Nothing)
        }
        Ok(_) => Err(format!(
            "line {number}: not an array of documents nor a backup header"
        )),
        Err(_) if text.ends_with(&resume_line()) => Ok(Line::Nothing),
        Err(e) => Err(format!("line {number}: not JSON ({e})")),
    }
}

/// Attachment fields CouchDB and the Cloudant SDK (which couchbackup
/// writes and reads through) name differently.
const ATTACHMENT_NAMES: [(&str, &str); 2] = [
    ("content_type", "contentType"),
    ("encoded_length", "encodedLength"),
];

/// couchbackup writes attachments as the Cloudant SDK models them
/// (`contentType`), and restores only those names: CouchDB's are put back
/// when a backup is loaded.
pub(crate) fn couchdb_attachment_names(doc: &mut Value) {
    rename_attachment_fields(doc, |(couchdb, sdk)| (sdk, couchdb));
}

/// The other way, for the backups `recliner dump` writes.
pub(crate) fn couchbackup_attachment_names(doc: &mut Value) {
    rename_attachment_fields(doc, |names| names);
}

fn rename_attachment_fields(
    doc: &mut Value,
    direction: impl Fn((&'static str, &'static str)) -> (&'static str, &'static str),
) {
    let Some(Value::Object(attachments)) = doc.get_mut("_attachments") else {
        return;
    };
    for attachment in attachments.values_mut() {
        let Value::Object(fields) = attachment else {
            continue;
        };
        for names in ATTACHMENT_NAMES {
            let (from, to) = direction(names);
            if let Some(value) = fields.remove(from) {
                fields.entry(to).or_insert(value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_as_couchbackup_reads_them() {
        assert_eq!(parse_line(1, &header()).unwrap(), Line::Nothing);
        assert_eq!(
            parse_line(2, "[{\"_id\":\"a\",\"_rev\":\"1-x\"}]\n").unwrap(),
            Line::Docs(vec![json!({"_id": "a", "_rev": "1-x"})])
        );
        assert_eq!(parse_line(3, "").unwrap(), Line::Nothing);
        assert_eq!(parse_line(4, &resume_line()).unwrap(), Line::Nothing);
        // A line cut by an interruption, then the marker of the resume.
        let cut = format!("[{{\"_id\":\"a\",\"v\":{}", resume_line());
        assert_eq!(parse_line(5, &cut).unwrap(), Line::Nothing);
        assert!(parse_line(6, "[{\"_id\":\"a\"").is_err());
        assert!(parse_line(7, "[1, 2]").is_err());
        assert!(parse_line(8, "{\"name\":\"x\",\"mode\":\"full\"}").is_err());
        assert!(parse_line(9, "{\"not\":\"docs\"}").is_err());
    }

    #[test]
    fn the_sdks_attachment_names_become_couchdbs() {
        let mut doc = json!({"_id": "a", "_attachments": {"x": {"contentType": "text/plain", "data": "aGk=", "encodedLength": 4}}});
        couchdb_attachment_names(&mut doc);
        assert_eq!(
            doc["_attachments"]["x"],
            json!({"data": "aGk=", "content_type": "text/plain", "encoded_length": 4})
        );
        couchbackup_attachment_names(&mut doc);
        assert_eq!(
            doc["_attachments"]["x"],
            json!({"data": "aGk=", "contentType": "text/plain", "encodedLength": 4})
        );
    }
}
