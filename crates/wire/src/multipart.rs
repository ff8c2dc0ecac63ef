//! Multipart part headers, written one way for the server's answers and the
//! replicator's uploads. Attachment names and content types come from
//! clients; a CR or LF written raw would end the header and let one client
//! inject headers into what another client reads.

use std::borrow::Cow;

/// A fresh boundary: 32 hex digits, as CouchDB's `couch_uuids:random()`.
pub fn new_boundary() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The `boundary` of a content type of the given multipart `kind`
/// (`multipart/related`, `multipart/mixed`), quoted or not; `None` for
/// another type or no boundary.
pub fn boundary_of(content_type: &str, kind: &str) -> Option<String> {
    let mut params = content_type.split(';');
    if !params.next()?.trim().eq_ignore_ascii_case(kind) {
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

/// The headers of an attachment's part (no leading or trailing line break):
/// `Content-Disposition` with the name, `Content-Type`, `Content-Length` of
/// the bytes as sent, and `Content-Encoding` when they are sent encoded.
pub fn attachment_part_headers(
    name: &str,
    content_type: &str,
    length: u64,
    encoding: Option<&str>,
) -> String {
    let mut head = format!(
        "Content-Disposition: attachment; filename={}\r\nContent-Type: {}\r\nContent-Length: {length}",
        quoted(name),
        value(content_type),
    );
    if let Some(encoding) = encoding {
        head.push_str("\r\nContent-Encoding: ");
        head.push_str(&value(encoding));
    }
    head
}

/// `s` as an HTTP quoted-string (for `filename="..."`): `"` and `\` are
/// backslash-escaped, and control characters, which a quoted-string cannot
/// hold, are percent-encoded (`%0D`), as browsers write them.
pub fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_ascii_control() => out.push_str(&format!("%{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `s` with every control character removed, so that it stays one header
/// value. Content types are refused with control characters on the way in;
/// this guards whatever older files hold.
pub fn value(s: &str) -> Cow<'_, str> {
    if s.chars().any(|c| c.is_ascii_control()) {
        Cow::Owned(s.chars().filter(|c| !c.is_ascii_control()).collect())
    } else {
        Cow::Borrowed(s)
    }
}

/// Whether `s` can be written as a header value as it is.
pub fn is_clean(s: &str) -> bool {
    !s.chars().any(|c| c.is_ascii_control())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_attachment_part_has_one_header_per_line_whatever_its_name() {
        let head = attachment_part_headers("a\r\nX: 1", "text/plain\nY: 2", 5, Some("gzip"));
        let lines: Vec<&str> = head.split("\r\n").collect();
        assert_eq!(
            lines,
            [
                "Content-Disposition: attachment; filename=\"a%0D%0AX: 1\"",
                "Content-Type: text/plainY: 2",
                "Content-Length: 5",
                "Content-Encoding: gzip",
            ]
        );
    }

    #[test]
    fn boundaries_are_read_quoted_or_not_and_only_from_the_right_type() {
        let related = "multipart/related";
        assert_eq!(
            boundary_of("multipart/related; boundary=\"abc\"", related).as_deref(),
            Some("abc")
        );
        assert_eq!(
            boundary_of("Multipart/Related;boundary=abc; type=x", related).as_deref(),
            Some("abc")
        );
        assert_eq!(boundary_of("multipart/mixed; boundary=abc", related), None);
        assert_eq!(
            boundary_of("multipart/related; boundary=\"\"", related),
            None
        );
        assert_eq!(boundary_of("multipart/related", related), None);
        assert_eq!(new_boundary().len(), 32);
    }

    #[test]
    fn line_breaks_cannot_reach_the_header() {
        assert_eq!(quoted("a\r\nX-Injected: 1"), "\"a%0D%0AX-Injected: 1\"");
        assert_eq!(quoted(r#"say "hi"\"#), r#""say \"hi\"\\""#);
        assert_eq!(value("text/plain\r\nX-Bad: 1"), "text/plainX-Bad: 1");
        assert_eq!(value("text/plain"), "text/plain");
    }

    proptest! {
        #[test]
        fn no_written_value_holds_a_control_character(s in any::<String>()) {
            prop_assert!(is_clean(&quoted(&s)));
            prop_assert!(is_clean(&value(&s)));
        }
    }
}
