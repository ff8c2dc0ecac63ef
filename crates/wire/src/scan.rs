//! A streaming reader of JSON text, for request bodies too large to hold
//! whole: it walks objects and arrays, skips or copies values with their
//! syntax checked, and takes large inline attachment data out of a document
//! as it passes (decoded into a sink), so a `_bulk_docs` body or a document
//! with big inline attachments is handled in bounded memory. serde_json
//! still parses every document copied out; this only finds the pieces.

use std::io::{self, BufRead};

use base64::Engine;

/// Containers nested deeper than this inside a copied value are refused:
/// the JSON reader's limit (`ejson::MAX_DEPTH`) for a document's members.
pub const MAX_DEPTH: usize = ejson::MAX_DEPTH;

/// Longest number or literal accepted (serde_json could not use more).
const MAX_TOKEN: usize = 1024;

/// Why a body could not be scanned.
#[derive(Debug)]
pub enum ScanError {
    /// The text is not JSON.
    Syntax(&'static str),
    /// Containers nest deeper than [`MAX_DEPTH`].
    TooDeep,
    /// A value grew past the caller's limit.
    TooLarge,
    /// Attachment data that is not base64; the attachment's name.
    BadData(String),
    /// Reading the body, or the data sink, failed.
    Io(io::Error),
}

impl From<io::Error> for ScanError {
    fn from(e: io::Error) -> ScanError {
        ScanError::Io(e)
    }
}

/// Where copied bytes go: a buffer up to a limit, or nowhere (counted).
/// Past the limit it keeps nothing more but goes on counting, so the
/// value is still read to its end and the scanner stays in step.
struct Out<'a> {
    buf: Option<&'a mut Vec<u8>>,
    len: u64,
    limit: u64,
}

impl Out<'_> {
    fn push(&mut self, bytes: &[u8]) -> Result<(), ScanError> {
        self.len += bytes.len() as u64;
        if self.len > self.limit {
            self.buf = None;
        } else if let Some(buf) = self.buf.as_deref_mut() {
            buf.extend_from_slice(bytes);
        }
        Ok(())
    }

    fn over(&self) -> bool {
        self.len > self.limit
    }
}

/// Reads JSON from a buffered reader, one token at a time.
#[derive(Debug)]
pub struct Scanner<R> {
    input: R,
}

impl<R: BufRead> Scanner<R> {
    pub fn new(input: R) -> Scanner<R> {
        Scanner { input }
    }

    /// The next byte that is not whitespace, left unread; `None` at the end.
    pub fn peek(&mut self) -> Result<Option<u8>, ScanError> {
        loop {
            let buf = self.input.fill_buf()?;
            if buf.is_empty() {
                return Ok(None);
            }
            let blank = buf
                .iter()
                .take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
                .count();
            if blank < buf.len() {
                let byte = buf[blank];
                self.input.consume(blank);
                return Ok(Some(byte));
            }
            let all = buf.len();
            self.input.consume(all);
        }
    }

    fn bump(&mut self) {
        self.input.consume(1);
    }

    fn expect(&mut self, byte: u8, what: &'static str) -> Result<(), ScanError> {
        if self.peek()? == Some(byte) {
            self.bump();
            Ok(())
        } else {
            Err(ScanError::Syntax(what))
        }
    }

    /// Only whitespace remains.
    pub fn end(&mut self) -> Result<(), ScanError> {
        match self.peek()? {
            None => Ok(()),
            Some(_) => Err(ScanError::Syntax(
                "trailing characters after the JSON value",
            )),
        }
    }

    /// Enters an object (consumes `{`).
    pub fn begin_object(&mut self) -> Result<(), ScanError> {
        self.expect(b'{', "expected an object")
    }

    /// Enters an array (consumes `[`).
    pub fn begin_array(&mut self) -> Result<(), ScanError> {
        self.expect(b'[', "expected an array")
    }

    /// The next key of the object being walked, unescaped, with its `:`
    /// read; `None` once the closing `}` is read. `first` is true before
    /// the object's first key and is cleared here.
    pub fn next_key(&mut self, first: &mut bool, limit: u64) -> Result<Option<String>, ScanError> {
        match self.peek()? {
            Some(b'}') => {
                self.bump();
                return Ok(None);
            }
            Some(b',') if !*first => self.bump(),
            Some(b'"') if *first => {}
            _ => return Err(ScanError::Syntax("expected a key or the end of the object")),
        }
        *first = false;
        if self.peek()? != Some(b'"') {
            return Err(ScanError::Syntax("expected a key"));
        }
        let mut raw = Vec::new();
        self.string(&mut Out {
            buf: Some(&mut raw),
            len: 0,
            limit,
        })?;
        self.expect(b':', "expected ':' after a key")?;
        Ok(Some(unescape(&raw)?))
    }

    /// Moves to the next element of the array being walked: true when one
    /// follows (its comma read), false once the closing `]` is read.
    pub fn next_element(&mut self, first: &mut bool) -> Result<bool, ScanError> {
        match self.peek()? {
            Some(b']') => {
                self.bump();
                Ok(false)
            }
            Some(b',') if !*first => {
                self.bump();
                Ok(true)
            }
            Some(_) if *first => {
                *first = false;
                Ok(true)
            }
            _ => Err(ScanError::Syntax("expected ',' or ']'")),
        }
    }

    /// Skips one value, checking its syntax; returns its compact length.
    pub fn skip_value(&mut self) -> Result<u64, ScanError> {
        let mut out = Out {
            buf: None,
            len: 0,
            limit: u64::MAX,
        };
        self.value(&mut out)?;
        Ok(out.len)
    }

    /// Appends one value to `buf`, compact (whitespace between tokens
    /// dropped, strings as written). A value over `limit` bytes is read to
    /// its end but answered `TooLarge`, with what was kept of it left in
    /// `buf`.
    pub fn copy_value(&mut self, buf: &mut Vec<u8>, limit: u64) -> Result<u64, ScanError> {
        let mut out = Out {
            buf: Some(buf),
            len: 0,
            limit,
        };
        self.value(&mut out)?;
        if out.over() {
            return Err(ScanError::TooLarge);
        }
        Ok(out.len)
    }

    /// One value of any kind, containers walked with an explicit stack.
    fn value(&mut self, out: &mut Out<'_>) -> Result<(), ScanError> {
        let mut open: Vec<u8> = Vec::new();
        loop {
            // A value starts here.
            match self.peek()? {
                Some(b'{' | b'[') if open.len() >= MAX_DEPTH => {
                    return Err(ScanError::TooDeep);
                }
                Some(b'{') => {
                    self.bump();
                    out.push(b"{")?;
                    if self.peek()? == Some(b'}') {
                        self.bump();
                        out.push(b"}")?;
                    } else {
                        open.push(b'{');
                        self.key_into(out)?;
                        continue;
                    }
                }
                Some(b'[') => {
                    self.bump();
                    out.push(b"[")?;
                    if self.peek()? == Some(b']') {
                        self.bump();
                        out.push(b"]")?;
                    } else {
                        open.push(b'[');
                        continue;
                    }
                }
                Some(b'"') => self.string(out)?,
                Some(b't' | b'f' | b'n' | b'-' | b'0'..=b'9') => self.literal(out)?,
                _ => return Err(ScanError::Syntax("expected a value")),
            }
            // A value ended: close containers until one continues.
            loop {
                let Some(&container) = open.last() else {
                    return Ok(());
                };
                match (self.peek()?, container) {
                    (Some(b','), _) => {
                        self.bump();
                        out.push(b",")?;
                        if container == b'{' {
                            self.key_into(out)?;
                        }
                        break;
                    }
                    (Some(b'}'), b'{') => {
                        self.bump();
                        out.push(b"}")?;
                        open.pop();
                    }
                    (Some(b']'), b'[') => {
                        self.bump();
                        out.push(b"]")?;
                        open.pop();
                    }
                    _ => return Err(ScanError::Syntax("expected ',' or the end of a container")),
                }
            }
        }
    }

    /// A key and its colon, copied.
    fn key_into(&mut self, out: &mut Out<'_>) -> Result<(), ScanError> {
        if self.peek()? != Some(b'"') {
            return Err(ScanError::Syntax("expected a key"));
        }
        self.string(out)?;
        self.expect(b':', "expected ':' after a key")?;
        out.push(b":")
    }

    /// A string, quotes included, copied as written (escapes checked, not
    /// resolved).
    fn string(&mut self, out: &mut Out<'_>) -> Result<(), ScanError> {
        self.bump();
        out.push(b"\"")?;
        self.string_content(|piece| out.push(piece))?;
        out.push(b"\"")
    }

    /// Walks a string's content after its opening quote, handing each run
    /// of plain bytes and each escape (checked, as written) to `each`, and
    /// consumes the closing quote.
    fn string_content(
        &mut self,
        mut each: impl FnMut(&[u8]) -> Result<(), ScanError>,
    ) -> Result<(), ScanError> {
        loop {
            let buf = self.input.fill_buf()?;
            if buf.is_empty() {
                return Err(ScanError::Syntax("unterminated string"));
            }
            let plain = buf
                .iter()
                .take_while(|&&b| b != b'"' && b != b'\\' && b >= 0x20)
                .count();
            if plain > 0 {
                each(&buf[..plain])?;
                self.input.consume(plain);
                continue;
            }
            let byte = buf[0];
            self.bump();
            match byte {
                b'"' => return Ok(()),
                b'\\' => {
                    let escape = self.escape()?;
                    each(&escape.raw[..escape.len])?;
                }
                _ => return Err(ScanError::Syntax("control character in a string")),
            }
        }
    }

    /// The rest of an escape after its backslash.
    fn escape(&mut self) -> Result<Escape, ScanError> {
        let mut raw = [b'\\', 0, 0, 0, 0, 0];
        let kind = self.byte()?;
        raw[1] = kind;
        match kind {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Ok(Escape { raw, len: 2 }),
            b'u' => {
                for slot in &mut raw[2..6] {
                    let digit = self.byte()?;
                    if !digit.is_ascii_hexdigit() {
                        return Err(ScanError::Syntax("invalid \\u escape"));
                    }
                    *slot = digit;
                }
                Ok(Escape { raw, len: 6 })
            }
            _ => Err(ScanError::Syntax("invalid escape")),
        }
    }

    fn byte(&mut self) -> Result<u8, ScanError> {
        let byte = self
            .input
            .fill_buf()?
            .first()
            .copied()
            .ok_or(ScanError::Syntax("unexpected end of the body"))?;
        self.bump();
        Ok(byte)
    }

    /// `true`, `false`, `null` or a number, checked.
    fn literal(&mut self, out: &mut Out<'_>) -> Result<(), ScanError> {
        let mut token = Vec::new();
        loop {
            let buf = self.input.fill_buf()?;
            let n = buf
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
                .count();
            token.extend_from_slice(&buf[..n]);
            let ended = n < buf.len() || buf.is_empty();
            self.input.consume(n);
            if token.len() > MAX_TOKEN {
                return Err(ScanError::Syntax("number too long"));
            }
            if ended {
                break;
            }
        }
        if matches!(&token[..], b"true" | b"false" | b"null") || is_number(&token) {
            out.push(&token)
        } else {
            Err(ScanError::Syntax("invalid literal"))
        }
    }
}

struct Escape {
    raw: [u8; 6],
    len: usize,
}

/// JSON's number grammar: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
fn is_number(token: &[u8]) -> bool {
    let digits = |s: &[u8]| s.iter().take_while(|b| b.is_ascii_digit()).count();
    let mut rest = token.strip_prefix(b"-").unwrap_or(token);
    match rest.first() {
        Some(b'0') => rest = &rest[1..],
        Some(b'1'..=b'9') => rest = &rest[digits(rest)..],
        _ => return false,
    }
    if let Some(fraction) = rest.strip_prefix(b".") {
        let n = digits(fraction);
        if n == 0 {
            return false;
        }
        rest = &fraction[n..];
    }
    if let Some(exponent) = rest.strip_prefix(b"e").or_else(|| rest.strip_prefix(b"E")) {
        let exponent = exponent
            .strip_prefix(b"+")
            .or_else(|| exponent.strip_prefix(b"-"))
            .unwrap_or(exponent);
        let n = digits(exponent);
        if n == 0 {
            return false;
        }
        rest = &exponent[n..];
    }
    rest.is_empty()
}

/// A string as written (quotes included) to its value.
fn unescape(raw: &[u8]) -> Result<String, ScanError> {
    if !raw.contains(&b'\\') {
        return std::str::from_utf8(&raw[1..raw.len() - 1])
            .map(str::to_string)
            .map_err(|_| ScanError::Syntax("invalid UTF-8"));
    }
    match ejson::from_slice(raw) {
        Ok(serde_json::Value::String(s)) => Ok(s),
        _ => Err(ScanError::Syntax("invalid string")),
    }
}

/// Receives the decoded bytes of inline attachment data too large to keep.
pub trait DataSink {
    /// Data for attachment `name` starts.
    fn begin(&mut self, name: &str) -> io::Result<()>;
    /// The next decoded bytes.
    fn write(&mut self, decoded: &[u8]) -> io::Result<()>;
    /// The data ended.
    fn finish(&mut self) -> io::Result<()>;
}

/// How much of a document is kept in memory.
#[derive(Debug, Clone, Copy)]
pub struct DocLimits {
    /// `max_document_size`: the body, as CouchDB counts it (attachments
    /// apart). Past it, nothing more is copied and the document is marked
    /// too large.
    pub max_body: u64,
    /// Inline attachment data kept in the copy, in base64 characters, over
    /// the whole document; data that would go past it goes to the sink.
    pub inline_data_budget: u64,
}

/// A document read by [`Scanner::document`].
#[derive(Debug, Default)]
pub struct ScannedDoc {
    /// The document, compact; data sent to the sink is `""` here. Empty
    /// when the document is too large.
    pub json: Vec<u8>,
    /// The body's size as `max_document_size` counts it.
    pub body_size: u64,
    /// The body is over `max_body`.
    pub too_large: bool,
    /// `_id`, when it is a string.
    pub id: Option<String>,
    /// Names of the attachments whose data went to the sink, each once,
    /// in the order the sink saw them.
    pub streamed: Vec<String>,
}

impl<R: BufRead> Scanner<R> {
    /// Reads one document. When it is not an object it is copied whole (up
    /// to `max_body`) for the caller's parse to refuse. Decisions about
    /// which data goes to the sink depend only on the bytes, so two scans
    /// of the same text decide alike.
    pub fn document(
        &mut self,
        limits: DocLimits,
        sink: &mut dyn DataSink,
    ) -> Result<ScannedDoc, ScanError> {
        let mut doc = ScannedDoc::default();
        if self.peek()? != Some(b'{') {
            let mut json = Vec::new();
            match self.copy_value(&mut json, limits.max_body) {
                Ok(_) => doc.json = json,
                Err(ScanError::TooLarge) => doc.too_large = true,
                Err(e) => return Err(e),
            }
            return Ok(doc);
        }
        self.begin_object()?;
        let mut json = b"{".to_vec();
        let mut budget = limits.inline_data_budget;
        doc.body_size = 2;
        let mut first = true;
        while let Some(key) = self.next_key(&mut first, u64::MAX)? {
            if doc.too_large {
                // Only `_id` matters now, for the error.
                if key == "_id" {
                    let mut raw = Vec::new();
                    self.copy_value(&mut raw, 1 << 20)?;
                    doc.id = serde_json::from_slice(&raw).ok();
                } else {
                    self.skip_value()?;
                }
                continue;
            }
            if json.len() > 1 {
                json.push(b',');
            }
            json.extend_from_slice(crate::json::string(&key).as_bytes());
            json.push(b':');
            if key == "_attachments" && self.peek()? == Some(b'{') {
                self.attachments(&mut json, &mut budget, &mut doc.streamed, sink)?;
                continue;
            }
            let start = json.len();
            let room = limits.max_body.saturating_sub(doc.body_size);
            match self.copy_value(&mut json, room) {
                Ok(len) => {
                    doc.body_size += key.len() as u64 + 4 + len;
                    if key == "_id" {
                        doc.id = serde_json::from_slice(&json[start..]).ok();
                    }
                    if doc.body_size > limits.max_body {
                        doc.too_large = true;
                    }
                }
                Err(ScanError::TooLarge) => doc.too_large = true,
                Err(e) => return Err(e),
            }
            if doc.too_large {
                json = Vec::new();
            }
        }
        if !doc.too_large {
            json.push(b'}');
            doc.json = json;
        }
        Ok(doc)
    }

    /// `_attachments`: each entry's `data` is kept inline while the budget
    /// lasts, else decoded into the sink and left as `""`.
    fn attachments(
        &mut self,
        json: &mut Vec<u8>,
        budget: &mut u64,
        streamed: &mut Vec<String>,
        sink: &mut dyn DataSink,
    ) -> Result<(), ScanError> {
        self.begin_object()?;
        json.push(b'{');
        let mut first = true;
        let mut any = false;
        while let Some(name) = self.next_key(&mut first, u64::MAX)? {
            push_key(json, &mut any, &name);
            if self.peek()? != Some(b'{') {
                self.copy_value(json, u64::MAX)?;
                continue;
            }
            self.begin_object()?;
            json.push(b'{');
            let mut inner_first = true;
            let mut inner_any = false;
            while let Some(field) = self.next_key(&mut inner_first, u64::MAX)? {
                push_key(json, &mut inner_any, &field);
                if field == "data" && self.peek()? == Some(b'"') {
                    let went_to_sink = self.data(json, budget, &name, sink)?;
                    // The last `data` of a name decides, as the parse does.
                    streamed.retain(|n| n != &name);
                    if went_to_sink {
                        streamed.push(name.clone());
                    }
                } else {
                    self.copy_value(json, u64::MAX)?;
                }
            }
            json.push(b'}');
        }
        json.push(b'}');
        Ok(())
    }

    /// One `data` string: copied while it fits the budget, else decoded
    /// into the sink (true) and written as `""`.
    fn data(
        &mut self,
        json: &mut Vec<u8>,
        budget: &mut u64,
        name: &str,
        sink: &mut dyn DataSink,
    ) -> Result<bool, ScanError> {
        self.bump();
        // The string's content as written, while it fits the budget.
        let mut kept: Vec<u8> = Vec::new();
        let mut decoder: Option<Base64Stream> = None;
        self.string_content(|piece| match decoder.as_mut() {
            Some(decoder) => decoder.push(piece, name, sink),
            None if (kept.len() + piece.len()) as u64 <= *budget => {
                kept.extend_from_slice(piece);
                Ok(())
            }
            None => {
                // Over the budget: from here on it goes to the sink.
                sink.begin(name)?;
                let mut fresh = Base64Stream::default();
                fresh.push(&std::mem::take(&mut kept), name, sink)?;
                fresh.push(piece, name, sink)?;
                decoder = Some(fresh);
                Ok(())
            }
        })?;
        match decoder {
            Some(mut decoder) => {
                decoder.finish(name, sink)?;
                sink.finish()?;
                json.extend_from_slice(b"\"\"");
                Ok(true)
            }
            None => {
                *budget -= kept.len() as u64;
                json.push(b'"');
                json.extend_from_slice(&kept);
                json.push(b'"');
                Ok(false)
            }
        }
    }
}

/// Writes `"key":` into a copied object, after a comma unless first.
fn push_key(json: &mut Vec<u8>, any: &mut bool, key: &str) {
    if std::mem::replace(any, true) {
        json.push(b',');
    }
    json.extend_from_slice(crate::json::string(key).as_bytes());
    json.push(b':');
}

/// Base64 text arriving in pieces, decoded in whole quanta.
#[derive(Default)]
struct Base64Stream {
    pending: Vec<u8>,
}

/// Decodes this many characters at a time (a multiple of 4).
const DECODE_STEP: usize = 64 * 1024;

impl Base64Stream {
    /// Takes JSON string content (escapes unresolved) and decodes what
    /// makes whole steps.
    fn push(&mut self, piece: &[u8], name: &str, sink: &mut dyn DataSink) -> Result<(), ScanError> {
        if piece.contains(&b'\\') {
            let value = unescape(&[b"\"", piece, b"\""].concat())?;
            self.pending.extend_from_slice(value.as_bytes());
        } else {
            self.pending.extend_from_slice(piece);
        }
        if self.pending.len() >= DECODE_STEP {
            let whole = self.pending.len() / 4 * 4;
            // Padding belongs at the very end only.
            if self.pending[..whole].contains(&b'=') {
                return Err(ScanError::BadData(name.to_string()));
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(&self.pending[..whole])
                .map_err(|_| ScanError::BadData(name.to_string()))?;
            sink.write(&bytes)?;
            self.pending.drain(..whole);
        }
        Ok(())
    }

    /// Decodes the rest, which must end the base64 text properly.
    fn finish(&mut self, name: &str, sink: &mut dyn DataSink) -> Result<(), ScanError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&self.pending)
            .map_err(|_| ScanError::BadData(name.to_string()))?;
        sink.write(&bytes)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    fn scanner(text: &[u8]) -> Scanner<io::BufReader<&[u8]>> {
        // A tiny buffer, so every token crosses buffer boundaries.
        Scanner::new(io::BufReader::with_capacity(3, text))
    }

    fn copy(text: &str) -> Result<Vec<u8>, ScanError> {
        let mut s = scanner(text.as_bytes());
        let mut out = Vec::new();
        s.copy_value(&mut out, u64::MAX)?;
        s.end()?;
        Ok(out)
    }

    #[derive(Default)]
    struct Collect {
        begun: Vec<String>,
        bytes: Vec<u8>,
        finished: usize,
    }

    impl DataSink for Collect {
        fn begin(&mut self, name: &str) -> io::Result<()> {
            self.begun.push(name.to_string());
            Ok(())
        }
        fn write(&mut self, decoded: &[u8]) -> io::Result<()> {
            self.bytes.extend_from_slice(decoded);
            Ok(())
        }
        fn finish(&mut self) -> io::Result<()> {
            self.finished += 1;
            Ok(())
        }
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            ".*".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 40, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(".*", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_json_copies_to_an_equal_value_and_skips_whole(value in json_value(), pretty in any::<bool>()) {
            // Input for the scanner, spaced or not: text a client may send.
            #[allow(clippy::disallowed_methods)]
            let text = if pretty {
                serde_json::to_string_pretty(&value).unwrap()
            } else {
                serde_json::to_string(&value).unwrap()
            };
            let copied = copy(&text).unwrap();
            let original: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(serde_json::from_slice::<Value>(&copied).unwrap(), original);
            let mut s = scanner(text.as_bytes());
            prop_assert_eq!(s.skip_value().unwrap(), copied.len() as u64);
            s.end().unwrap();
        }

        #[test]
        fn data_decodes_alike_kept_or_streamed(
            bytes in prop::collection::vec(any::<u8>(), 0..400),
            budget in 0u64..600,
            escape_slashes in any::<bool>(),
        ) {
            let mut encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
            if escape_slashes {
                encoded = encoded.replace('/', "\\/");
            }
            let text = format!(
                r#"{{"_id":"d","_attachments":{{"a":{{"content_type":"x","data":"{encoded}"}}}},"z":1}}"#
            );
            let mut sink = Collect::default();
            let doc = scanner(text.as_bytes())
                .document(DocLimits { max_body: 1000, inline_data_budget: budget }, &mut sink)
                .unwrap();
            let parsed: Value = serde_json::from_slice(&doc.json).unwrap();
            prop_assert_eq!(doc.id.as_deref(), Some("d"));
            prop_assert_eq!(&parsed["z"], &json!(1));
            let data = parsed["_attachments"]["a"]["data"].as_str().unwrap();
            if doc.streamed.is_empty() {
                let inline = base64::engine::general_purpose::STANDARD.decode(data).unwrap();
                prop_assert_eq!(inline, bytes);
                prop_assert!(sink.begun.is_empty());
            } else {
                prop_assert_eq!(data, "");
                prop_assert_eq!(&doc.streamed, &vec!["a".to_string()]);
                prop_assert_eq!(&sink.bytes, &bytes);
                prop_assert_eq!(sink.finished, 1);
            }
        }
    }

    #[test]
    fn large_data_is_decoded_across_many_steps_with_escapes() {
        let bytes: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let encoded = base64::engine::general_purpose::STANDARD
            .encode(&bytes)
            .replace('/', "\\/");
        let text = format!(
            r#"{{"_id":"big","_attachments":{{"small":{{"data":"aGk="}},"big":{{"content_type":"x","data":"{encoded}"}}}}}}"#
        );
        let mut sink = Collect::default();
        let limits = DocLimits {
            max_body: 1000,
            inline_data_budget: 1024,
        };
        let doc = Scanner::new(io::BufReader::new(text.as_bytes()))
            .document(limits, &mut sink)
            .unwrap();
        assert_eq!(doc.streamed, vec!["big".to_string()]);
        assert_eq!(sink.bytes, bytes);
        let parsed: Value = serde_json::from_slice(&doc.json).unwrap();
        assert_eq!(parsed["_attachments"]["small"]["data"], "aGk=");
        assert_eq!(parsed["_attachments"]["big"]["data"], "");
        assert!(doc.json.len() < 200, "{}", doc.json.len());
    }

    #[test]
    fn invalid_json_is_refused() {
        for bad in [
            "",
            "[1,]",
            "[1 2]",
            "{\"a\" 1}",
            "{\"a\":1,}",
            "{,}",
            "01",
            "1.",
            "-",
            "1e",
            "tru",
            "nul",
            "\"\\x\"",
            "\"\\u12g4\"",
            "\"a\nb\"",
            "\"open",
            "{\"a\":}",
            "[}",
            "{]",
            "1 2",
        ] {
            assert!(copy(bad).is_err(), "{bad:?} was accepted");
        }
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert!(copy(&deep).is_err());
        let fine = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(copy(&fine).is_ok());
    }

    #[test]
    fn a_body_over_the_limit_is_marked_and_its_id_still_found() {
        let big = "x".repeat(500);
        let text = format!(r#"{{"a":"{big}","b":[1,2,3],"_id":"the\"id"}}"#);
        let mut sink = Collect::default();
        let doc = scanner(text.as_bytes())
            .document(
                DocLimits {
                    max_body: 100,
                    inline_data_budget: 0,
                },
                &mut sink,
            )
            .unwrap();
        assert!(doc.too_large);
        assert!(doc.json.is_empty());
        assert_eq!(doc.id.as_deref(), Some("the\"id"));
        let small = scanner(br#"{"_id":"s","a":1}"#)
            .document(
                DocLimits {
                    max_body: 100,
                    inline_data_budget: 0,
                },
                &mut sink,
            )
            .unwrap();
        assert!(!small.too_large);
        assert_eq!(small.body_size, 2 + (3 + 4 + 3) + (1 + 4 + 1));
    }

    #[test]
    fn bad_base64_names_its_attachment_and_the_last_data_of_a_name_decides() {
        let text = format!(
            r#"{{"_attachments":{{"a":{{"data":"{}!!"}}}}}}"#,
            "QUFB".repeat(100)
        );
        let limits = DocLimits {
            max_body: 1000,
            inline_data_budget: 10,
        };
        match scanner(text.as_bytes()).document(limits, &mut Collect::default()) {
            Err(ScanError::BadData(name)) => assert_eq!(name, "a"),
            other => panic!("{other:?}"),
        }
        let text = format!(
            r#"{{"_attachments":{{"a":{{"data":"{}"}},"a":{{"data":"QUFB"}}}}}}"#,
            "QUFB".repeat(100)
        );
        let mut sink = Collect::default();
        let doc = scanner(text.as_bytes())
            .document(limits, &mut sink)
            .unwrap();
        assert!(doc.streamed.is_empty(), "{:?}", doc.streamed);
        assert_eq!(sink.begun, vec!["a".to_string()]);
    }
}
