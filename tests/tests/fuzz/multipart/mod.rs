//! Target `multipart`: multipart/related parsing in both directions, against
//! the real server. Each input is a few `PUT /db/{doc}` uploads (some with
//! `?new_edits=false`) of hostile multipart/related bodies: boundaries
//! quoted, bare, long, with odd characters, declared twice or not at all;
//! bodies truncated, with parts missing, duplicated, extra, swapped, with a
//! preamble, LF line ends or a boundary inside an attachment; attachment
//! names and content types with quotes, CR, LF and non-ASCII; `follows`
//! attachments whose declared `length` lies (too small, too large,
//! 1000000000000000000, `u64::MAX`) or is no number; `gzip` encodings with
//! gzip bytes or with bytes that are not gzip; inline and stub attachments
//! beside them; mixed with valid uploads.
//!
//! Invariants: every answer comes, is JSON with `error` and `reason` on
//! failure, and no 5xx; the server stays up and logs no panic. Each
//! accepted write is read back three ways, `?rev=R&attachments=true` as
//! multipart/related and as JSON, and `?open_revs=all&attachments=true` as
//! multipart/mixed, and the multipart answers are read strictly
//! (`answers.rs`: a well-formed boundary, no CR/LF injected into part
//! headers, true lengths). The three agree on every attachment's content,
//! and when the upload can be modelled (its body splits cleanly, see
//! [`model`]) every attachment holds exactly the bytes uploaded for it, and
//! an upload with a lying length or a missing part was refused. After the
//! input every database opens and every accepted revision still reads.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{Index, select};
use serde_json::{Map, Value};

use crate::answers::{self, RelatedDoc, check_json};
use crate::driver::Violations;
use crate::hostile::{self, object};
use crate::http::{Harness, Sent, doc_path, enc, gzip, replace_bytes, snippet};

mod generate;
mod model;
pub(crate) use generate::*;
use model::*;

/// Document ids: few, so uploads meet the same documents.
const IDS: &[&str] = &["doc", "doc", "a", "x y", "é\"\\"];

/// Attachment names: plain ones, and ones with quotes, backslashes, CR, LF,
/// a whole injected header line, non-ASCII, or nothing.
const NAMES: &[&str] = &[
    "att",
    "att",
    "b.txt",
    "c",
    "q\"uote",
    "back\\slash",
    "semi;colon",
    "cr\rlf\n",
    "inj\r\nX-Injected: 1",
    "ü名",
    "",
    "_bad",
    "sp ace",
    "%41",
    "a/b",
];

const CONTENT_TYPES: &[&str] = &[
    "text/plain",
    "text/plain",
    "application/octet-stream",
    "",
    "text/plain; charset=\"utf-8\"",
    "a\"b",
    "x/y\r\nX-Injected: 1",
    "bad\nline",
    "ü/名",
    "text/plain;\tq=1",
    "\u{0}",
];

/// How an attachment is given in the JSON part.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// `follows: true`: its bytes come in a part of their own.
    Follows,
    /// `data`: base64 inline.
    Inline,
    /// `stub: true`: kept from the parent revision.
    Stub,
}

/// The `length` a `follows` attachment declares.
#[derive(Debug, Clone)]
enum Length {
    Exact,
    Absent,
    Less,
    More,
    Is(u64),
    Junk(Value),
}

/// The `encoding` of a `follows` attachment, and the bytes its part carries.
#[derive(Debug, Clone)]
enum Encoding {
    Identity,
    /// `gzip`, with gzip bytes.
    Gzip,
    /// `gzip`, with bytes that are not gzip.
    GzipButPlain,
    /// Another encoding, with the plain bytes.
    Other(String),
}

/// What the attachment's part says of its name.
#[derive(Debug, Clone, Copy)]
enum PartName {
    None,
    Own,
    Wrong,
}

#[derive(Debug, Clone)]
struct Att {
    name: &'static str,
    kind: Kind,
    content_type: &'static str,
    bytes: Vec<u8>,
    length: Length,
    encoding: Encoding,
    part_name: PartName,
    part_type: bool,
    /// A `Content-Length` header on the part: true or a lie.
    part_length: Option<bool>,
}

/// The document's `_id`.
#[derive(Debug, Clone)]
enum IdField {
    Absent,
    Same,
    Other(Value),
}

/// The document's `_rev` (and `_revisions`).
#[derive(Debug, Clone)]
enum RevField {
    Absent,
    /// The last revision written of this id (`@REV@`).
    Last,
    Junk(String),
    /// `N-hash`, with `_revisions` back through `history` when given.
    Replicated {
        pos: u64,
        hash: &'static str,
        history: Option<Vec<&'static str>>,
    },
}

/// How the `Content-Type` header declares the boundary.
#[derive(Debug, Clone)]
enum Declared {
    Quoted,
    Bare,
    WithParams,
    Upper,
    Other(String),
    Missing,
    Empty,
    Twice(String),
}

/// A change to the body after it is assembled.
#[derive(Debug, Clone)]
enum Mutation {
    DropPart(Index),
    DuplicatePart(Index),
    ExtraPart(Vec<u8>),
    Reverse,
    NoClose,
    Preamble,
    Epilogue,
    LfOnly,
    NoJson,
    BoundaryInContent(Index),
    Truncate(Index),
}

/// One upload.
#[derive(Clone)]
struct Upload {
    id: &'static str,
    new_edits: bool,
    boundary: String,
    declared: Declared,
    id_field: IdField,
    rev: RevField,
    fields: Vec<(String, Value)>,
    deleted: bool,
    atts: Vec<Att>,
    mutations: Vec<Mutation>,
}

/// The uploads of one input, run in order on a fresh database `db`.
#[derive(Clone)]
pub struct Case(Vec<Upload>);

impl Upload {
    fn path(&self) -> String {
        let query = if self.new_edits {
            ""
        } else {
            "?new_edits=false"
        };
        format!("/db/{}{query}", doc_path(self.id))
    }

    /// The JSON part.
    fn doc(&self) -> Value {
        let mut pairs: Vec<(String, Value)> = Vec::new();
        match &self.id_field {
            IdField::Absent => {}
            IdField::Same => pairs.push(("_id".into(), Value::from(self.id))),
            IdField::Other(v) => pairs.push(("_id".into(), v.clone())),
        }
        match &self.rev {
            RevField::Absent => {}
            RevField::Last => pairs.push(("_rev".into(), Value::from("@REV@"))),
            RevField::Junk(s) => pairs.push(("_rev".into(), Value::from(s.as_str()))),
            RevField::Replicated { pos, hash, history } => {
                pairs.push(("_rev".into(), Value::from(format!("{pos}-{hash}"))));
                if let Some(history) = history {
                    let mut ids = vec![Value::from(*hash)];
                    ids.extend(history.iter().map(|h| Value::from(*h)));
                    pairs.push((
                        "_revisions".into(),
                        object(vec![
                            ("start".into(), Value::from(*pos)),
                            ("ids".into(), Value::Array(ids)),
                        ]),
                    ));
                }
            }
        }
        pairs.extend(self.fields.iter().cloned());
        if self.deleted {
            pairs.push(("_deleted".into(), Value::Bool(true)));
        }
        if !self.atts.is_empty() {
            let entries = self
                .atts
                .iter()
                .map(|att| (att.name.to_string(), att.entry()))
                .collect();
            pairs.push(("_attachments".into(), object(entries)));
        }
        object(pairs)
    }

    /// The `Content-Type` header and the body, `@REV@` still in it.
    fn build(&self) -> (String, Vec<u8>) {
        let b = &self.boundary;
        let content_type = match &self.declared {
            Declared::Quoted => format!("multipart/related; boundary=\"{b}\""),
            Declared::Bare => format!("multipart/related; boundary={b}"),
            Declared::WithParams => format!(
                "multipart/related; type=\"application/json\"; boundary=\"{b}\"; start=\"<doc>\""
            ),
            Declared::Upper => format!("Multipart/Related; BOUNDARY=\"{b}\""),
            Declared::Other(other) => format!("multipart/related; boundary=\"{other}\""),
            Declared::Missing => "multipart/related".to_string(),
            Declared::Empty => "multipart/related; boundary=\"\"".to_string(),
            Declared::Twice(other) => {
                format!("multipart/related; boundary=\"{other}\"; boundary=\"{b}\"")
            }
        };
        // (headers, content) of each part.
        let mut parts: Vec<(String, Vec<u8>)> = vec![(
            "Content-Type: application/json\r\n".into(),
            self.doc().to_string().into_bytes(),
        )];
        for att in self.atts.iter().filter(|a| matches!(a.kind, Kind::Follows)) {
            parts.push(att.part());
        }
        let mut close = true;
        let mut after: Vec<&Mutation> = Vec::new();
        for mutation in &self.mutations {
            match mutation {
                Mutation::DropPart(i) if parts.len() > 1 => {
                    parts.remove(1 + i.index(parts.len() - 1));
                }
                Mutation::DuplicatePart(i) if !parts.is_empty() => {
                    let part = parts[i.index(parts.len())].clone();
                    parts.push(part);
                }
                Mutation::ExtraPart(bytes) => parts.push((String::new(), bytes.clone())),
                Mutation::Reverse if parts.len() > 2 => parts[1..].reverse(),
                Mutation::NoJson if !parts.is_empty() => {
                    parts.remove(0);
                }
                Mutation::BoundaryInContent(i) if !parts.is_empty() => {
                    let at = i.index(parts.len());
                    parts[at]
                        .1
                        .extend_from_slice(format!("\r\n--{b}\r\n").as_bytes());
                }
                Mutation::NoClose => close = false,
                other => after.push(other),
            }
        }
        let mut body = Vec::new();
        for (headers, content) in &parts {
            body.extend_from_slice(format!("--{b}\r\n{headers}\r\n").as_bytes());
            body.extend_from_slice(content);
            body.extend_from_slice(b"\r\n");
        }
        if close {
            body.extend_from_slice(format!("--{b}--\r\n").as_bytes());
        }
        for mutation in after {
            match mutation {
                Mutation::Preamble => {
                    body.splice(0..0, b"This is a preamble.\r\n".iter().copied());
                }
                Mutation::Epilogue => body.extend_from_slice(b"This is an epilogue.\r\n"),
                Mutation::LfOnly => body = replace_bytes(&body, b"\r\n", b"\n"),
                Mutation::Truncate(i) => body.truncate(i.index(body.len() + 1)),
                _ => {}
            }
        }
        (content_type, body)
    }
}

impl Att {
    /// The bytes its part carries.
    fn wire_bytes(&self) -> Vec<u8> {
        match self.encoding {
            Encoding::Gzip => gzip(&self.bytes),
            _ => self.bytes.clone(),
        }
    }

    fn entry(&self) -> Value {
        let mut pairs = vec![("content_type".to_string(), Value::from(self.content_type))];
        match self.kind {
            Kind::Inline => pairs.push(("data".into(), Value::from(hostile::base64(&self.bytes)))),
            Kind::Stub => pairs.push(("stub".into(), Value::Bool(true))),
            Kind::Follows => {
                pairs.push(("follows".into(), Value::Bool(true)));
                let exact = self.bytes.len() as u64;
                let length = match &self.length {
                    Length::Exact => Some(Value::from(exact)),
                    Length::Absent => None,
                    Length::Less => Some(Value::from(exact.saturating_sub(1))),
                    Length::More => Some(Value::from(exact + 1)),
                    Length::Is(n) => Some(Value::from(*n)),
                    Length::Junk(v) => Some(v.clone()),
                };
                if let Some(length) = length {
                    pairs.push(("length".into(), length));
                }
                match &self.encoding {
                    Encoding::Identity => {}
                    Encoding::Gzip | Encoding::GzipButPlain => {
                        pairs.push(("encoding".into(), Value::from("gzip")))
                    }
                    Encoding::Other(e) => pairs.push(("encoding".into(), Value::from(e.as_str()))),
                }
            }
        }
        object(pairs)
    }

    /// `(headers, content)` of its part.
    fn part(&self) -> (String, Vec<u8>) {
        let bytes = self.wire_bytes();
        let mut headers = String::new();
        match self.part_name {
            PartName::None => {}
            PartName::Own => headers.push_str(&format!(
                "Content-Disposition: attachment; filename=\"{}\"\r\n",
                self.name.replace('\\', "\\\\").replace('"', "\\\"")
            )),
            PartName::Wrong => {
                headers.push_str("Content-Disposition: attachment; filename=\"zz\"\r\n")
            }
        }
        if self.part_type {
            headers.push_str(&format!("Content-Type: {}\r\n", self.content_type));
        }
        if let Some(true_length) = self.part_length {
            let n = bytes.len() + if true_length { 0 } else { 7 };
            headers.push_str(&format!("Content-Length: {n}\r\n"));
        }
        (headers, bytes)
    }
}

impl fmt::Debug for Upload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (content_type, body) = self.build();
        writeln!(f, "PUT {}", self.path())?;
        writeln!(f, "    content-type: {content_type:?}")?;
        writeln!(
            f,
            "    body ({} bytes): b\"{}\"",
            body.len(),
            body.escape_ascii()
        )
    }
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "(setup: DELETE every database, PUT /db; @REV@ = the last revision written of the same id, else 1-x)"
        )?;
        for (i, upload) in self.0.iter().enumerate() {
            write!(f, "{}. {upload:?}", i + 1)?;
        }
        Ok(())
    }
}

// --- running ---

/// An accepted write.
struct Accepted {
    id: &'static str,
    rev: String,
    /// The revision existed before this write (a `new_edits=false` write
    /// of a known revision changes nothing): it may even have no body.
    existed: bool,
}

/// Runs inputs against a live server.
pub struct Target {
    harness: Harness,
}

impl Target {
    pub fn new() -> Target {
        Target {
            harness: Harness::named("fuzz-multipart"),
        }
    }

    pub fn check(&self, case: &Case, v: &mut Violations) {
        self.harness
            .run_input(v, async |base, v| self.run(base, case, v).await);
    }

    async fn run(&self, base: &str, case: &Case, v: &mut Violations) {
        let h = &self.harness;
        if let Err(e) = h.reset(base).await {
            v.add("setup failed", e);
            return;
        }
        let mut last_rev: BTreeMap<&str, String> = BTreeMap::new();
        let mut accepted: Vec<Accepted> = Vec::new();
        for upload in &case.0 {
            let (content_type, body) = upload.build();
            let rev = last_rev.get(upload.id).map_or("1-x", String::as_str);
            let json_rev = Value::from(rev).to_string();
            let body = replace_bytes(&body, b"@REV@", &json_rev.as_bytes()[1..json_rev.len() - 1]);
            if reqwest::header::HeaderValue::from_str(&content_type).is_err() {
                continue; // no client can send that header
            }
            let path = upload.path();
            // The revisions the document has before the write.
            let before = self.tree(base, upload.id).await;
            let shown = format!(
                "PUT {path}\n    content-type: {content_type:?}\n    body ({} bytes): b\"{}\"",
                body.len(),
                body.escape_ascii()
            );
            let request = h
                .client()
                .put(format!("{base}{path}"))
                .header("content-type", &content_type)
                .body(body.clone())
                .build();
            let Ok(request) = request else { continue };
            let answer = match h
                .exchange(request, &shown, "PUT /db/{doc} multipart", v)
                .await
            {
                Sent::Answered(answer) => answer,
                Sent::Died => return,
                Sent::Lost => continue,
            };
            let Some(json) = check_json("PUT /db/{doc} multipart", &shown, &answer, v) else {
                continue;
            };
            if !(200..300).contains(&answer.status) {
                continue;
            }
            let (Some(true), Some(id), Some(new_rev)) = (
                json["ok"].as_bool(),
                json["id"].as_str(),
                json["rev"].as_str(),
            ) else {
                v.add(
                    "an accepted upload does not answer ok, id and rev",
                    format!("{shown}\n-> {} {json}", answer.status),
                );
                continue;
            };
            if id != upload.id {
                v.add(
                    "an accepted upload answers another id",
                    format!("{shown}\n-> {json}"),
                );
            }
            let new_rev = new_rev.to_string();
            let existed = before.contains(&new_rev);
            let expected = model(&content_type, &body);
            if let Some(expected) = &expected {
                if !expected.unfed.is_empty() {
                    v.add(
                        "an upload lacking an attachment's part was accepted",
                        format!("{shown}\n-> {json}\nunfed: {:?}", expected.unfed),
                    );
                }
                if expected.headerless {
                    v.add(
                        "an upload whose document part is not JSON was accepted",
                        format!("{shown}\n-> {json}"),
                    );
                }
                if !expected.lying.is_empty() || (!existed && !expected.lying_gzip.is_empty()) {
                    v.add(
                        "an upload whose declared length lies was accepted",
                        format!(
                            "{shown}\n-> {json}\nlying: {:?} {:?}",
                            expected.lying, expected.lying_gzip
                        ),
                    );
                }
            }
            let exact = expected.filter(|_| !existed);
            self.read_back(
                base,
                upload.id,
                &new_rev,
                existed,
                exact.as_ref(),
                &shown,
                v,
            )
            .await;
            last_rev.insert(upload.id, new_rev.clone());
            accepted.push(Accepted {
                id: upload.id,
                rev: new_rev,
                existed,
            });
        }
        if h.server_alive() {
            self.audit(base, &accepted, v).await;
        }
    }

    /// Every revision of document `id` (leaves and their ancestors), as
    /// far as `open_revs=all&revs=true` tells; none when it fails.
    async fn tree(&self, base: &str, id: &str) -> BTreeSet<String> {
        let path = format!("/db/{}?open_revs=all&revs=true", doc_path(id));
        let Ok(Value::Array(leaves)) = self.harness.get_json(base, &path).await else {
            return BTreeSet::new();
        };
        let mut revs = BTreeSet::new();
        for leaf in &leaves {
            let history = &leaf["ok"]["_revisions"];
            let (Some(start), Some(ids)) = (history["start"].as_u64(), history["ids"].as_array())
            else {
                continue;
            };
            for (i, hash) in ids.iter().enumerate() {
                if let (Some(hash), Some(pos)) = (hash.as_str(), start.checked_sub(i as u64)) {
                    revs.insert(format!("{pos}-{hash}"));
                }
            }
        }
        revs
    }

    /// `GET path` with `accept`: the answer, or `None` (recorded) when none came.
    async fn get(
        &self,
        base: &str,
        path: &str,
        accept: &str,
        v: &mut Violations,
    ) -> Option<(String, crate::http::Answer)> {
        let h = &self.harness;
        let shown = format!("GET {path}\n    accept: {accept}");
        let request = h
            .client()
            .get(format!("{base}{path}"))
            .header("accept", accept)
            .build()
            .ok()?;
        match h.exchange(request, &shown, "a read-back", v).await {
            Sent::Answered(answer) => Some((shown, answer)),
            Sent::Died | Sent::Lost => None,
        }
    }

    /// Reads an accepted write back three ways and checks them (see the
    /// module comment).
    #[allow(clippy::too_many_arguments)]
    async fn read_back(
        &self,
        base: &str,
        id: &str,
        rev: &str,
        existed: bool,
        expected: Option<&Expected>,
        upload: &str,
        v: &mut Violations,
    ) {
        let p = doc_path(id);
        let context = |shown: &str, answer: &crate::http::Answer| {
            format!(
                "after the accepted upload\n{upload}\n{shown}\n-> {} {}\n{}",
                answer.status,
                answer.content_type,
                snippet(&answer.body, 3000)
            )
        };
        // 1. JSON, attachments inline.
        let json_path = format!("/db/{p}?rev={}&attachments=true", enc(rev));
        let Some((shown, answer)) = self.get(base, &json_path, "application/json", v).await else {
            return;
        };
        if existed && answer.status == 404 {
            return; // a known revision, maybe without a body of its own
        }
        let Some(json) = check_json("a JSON read-back", &shown, &answer, v) else {
            return;
        };
        if answer.status != 200 {
            v.add(
                format!("an accepted revision does not read back: {}", answer.status),
                context(&shown, &answer),
            );
            return;
        }
        let Some(doc) = json.as_object() else {
            return; // deeper than serde_json reads: nothing to compare
        };
        if doc.get("_rev").and_then(Value::as_str) != Some(rev) {
            v.add(
                "a read-back by rev answers another rev",
                context(&shown, &answer),
            );
        }
        let inline = match answers::inline_atts(doc) {
            Ok(inline) => inline,
            Err(e) => {
                v.add(
                    "a JSON read-back's attachments are malformed",
                    format!("{e}\n{}", context(&shown, &answer)),
                );
                return;
            }
        };
        if let Some(expected) = expected {
            for (name, (stored, gzip)) in &expected.atts {
                let content = if *gzip {
                    answers::gunzip(stored).unwrap_or_default()
                } else {
                    stored.clone()
                };
                if inline.get(name) != Some(&content) {
                    v.add(
                        "an attachment does not read back as uploaded (JSON)",
                        format!(
                            "attachment {name:?}: uploaded b\"{}\", read {:?}\n{}",
                            content.escape_ascii(),
                            inline.get(name).map(|b| b.escape_ascii().to_string()),
                            context(&shown, &answer)
                        ),
                    );
                }
            }
        }
        // 2. multipart/related.
        let Some((shown, answer)) = self.get(base, &json_path, "multipart/related", v).await else {
            return;
        };
        let related = if answer.content_type.starts_with("multipart/") {
            if answer.status != 200 {
                v.add(
                    format!("a multipart read-back answers {}", answer.status),
                    context(&shown, &answer),
                );
                return;
            }
            match answers::read_related(&answer.content_type, &answer.body) {
                Ok(related) => related,
                Err(e) => {
                    v.add(
                        "a multipart/related answer is malformed",
                        format!("{e}\n{}", context(&shown, &answer)),
                    );
                    return;
                }
            }
        } else {
            let Some(json) = check_json("a multipart/related read-back", &shown, &answer, v) else {
                return;
            };
            if answer.status != 200 {
                v.add(
                    format!("a multipart read-back answers {}", answer.status),
                    context(&shown, &answer),
                );
                return;
            }
            // Nothing follows: the document alone, as JSON, with its data inline.
            let json = json.as_object().cloned().unwrap_or_default();
            if json
                .get("_attachments")
                .is_some_and(|a| a.as_object().is_some_and(|a| !a.is_empty()))
            {
                v.add(
                    "a document with attachments answers JSON to Accept: multipart/related",
                    context(&shown, &answer),
                );
            }
            RelatedDoc {
                json,
                atts: BTreeMap::new(),
            }
        };
        self.compare(
            "multipart/related",
            &related,
            &inline,
            expected,
            &context(&shown, &answer),
            v,
        );
        // 3. open_revs=all as multipart/mixed.
        let mixed_path = format!("/db/{p}?open_revs=all&attachments=true&revs=true");
        let Some((shown, answer)) = self.get(base, &mixed_path, "multipart/mixed", v).await else {
            return;
        };
        if answer.status != 200 || !answer.content_type.starts_with("multipart/mixed") {
            let _ = check_json("an open_revs read-back", &shown, &answer, v);
            v.add(
                format!(
                    "open_revs=all as multipart/mixed answers {} {}",
                    answer.status, answer.content_type
                ),
                context(&shown, &answer),
            );
            return;
        }
        match answers::read_mixed(&answer.content_type, &answer.body) {
            Ok(parts) => {
                let leaf = parts.iter().find_map(|p| match p {
                    answers::MixedPart::Doc(d)
                        if d.json.get("_rev").and_then(Value::as_str) == Some(rev) =>
                    {
                        Some(d)
                    }
                    _ => None,
                });
                // Not a leaf any more (a later write may have extended it): nothing to compare.
                if let Some(leaf) = leaf {
                    self.compare(
                        "multipart/mixed",
                        leaf,
                        &inline,
                        expected,
                        &context(&shown, &answer),
                        v,
                    );
                }
            }
            Err(e) => v.add(
                "a multipart/mixed answer is malformed",
                format!("{e}\n{}", context(&shown, &answer)),
            ),
        }
    }

    /// A multipart view of a revision against its JSON view and the model.
    fn compare(
        &self,
        view: &str,
        doc: &RelatedDoc,
        inline: &BTreeMap<String, Vec<u8>>,
        expected: Option<&Expected>,
        context: &str,
        v: &mut Violations,
    ) {
        let names: BTreeSet<&String> = doc.atts.keys().collect();
        let inline_names: BTreeSet<&String> = inline.keys().collect();
        if names != inline_names {
            v.add(
                format!("{view} and JSON read-backs list different attachments"),
                format!("{view}: {names:?}, JSON: {inline_names:?}\n{context}"),
            );
        }
        for (name, att) in &doc.atts {
            match att.identity() {
                Ok(content) if inline.get(name).is_none_or(|i| *i == content) => {}
                Ok(content) => v.add(
                    format!("{view} and JSON read-backs disagree on an attachment's content"),
                    format!(
                        "attachment {name:?}: {view} b\"{}\", JSON b\"{}\"\n{context}",
                        content.escape_ascii(),
                        inline[name].escape_ascii()
                    ),
                ),
                Err(e) => v.add(
                    format!("a gzip attachment of a {view} answer does not inflate"),
                    format!("attachment {name:?}: {e}\n{context}"),
                ),
            }
        }
        let Some(expected) = expected else { return };
        for (name, (stored, gzip)) in &expected.atts {
            let sent = SentView(doc.atts.get(name));
            // Bytes sent encoded are kept as sent; content sent as it is
            // reads back as that content, stored compressed (text types, as
            // CouchDB stores them) or not.
            let kept = sent.0.is_some_and(|a| {
                if *gzip {
                    a.bytes == *stored && a.gzip
                } else {
                    a.identity().is_ok_and(|content| content == *stored)
                }
            });
            if kept {
                continue;
            }
            v.add(
                format!("an attachment does not read back as uploaded ({view})"),
                format!(
                    "attachment {name:?}: uploaded b\"{}\" (gzip: {gzip}), read {sent:?}\n{context}",
                    stored.escape_ascii()
                ),
            );
        }
    }

    /// After the input: every database opens, every accepted revision reads.
    async fn audit(&self, base: &str, accepted: &[Accepted], v: &mut Violations) {
        let h = &self.harness;
        let dbs = match h.get_json(base, "/_all_dbs").await {
            Ok(Value::Array(dbs)) => dbs,
            Ok(other) => {
                v.add("_all_dbs is not a list", other.to_string());
                return;
            }
            Err(e) => {
                v.add(format!("_all_dbs fails: {}", e.class), e.detail);
                return;
            }
        };
        for db in dbs.iter().filter_map(Value::as_str) {
            if let Err(e) = h.get_json(base, &format!("/{}", enc(db))).await {
                v.add(format!("a database does not open: {}", e.class), e.detail);
            }
        }
        for write in accepted {
            let path = format!("/db/{}?rev={}", doc_path(write.id), enc(&write.rev));
            match h.get_json(base, &path).await {
                Ok(_) => {}
                Err(e) if write.existed && e.class == "answers 404" => {}
                Err(e) => v.add(
                    format!(
                        "an accepted revision is unreadable after the input: {}",
                        e.class
                    ),
                    e.detail,
                ),
            }
        }
    }
}

/// An attachment of a multipart view, as reports show it.
struct SentView<'a>(Option<&'a answers::SentAtt>);

impl fmt::Debug for SentView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.write_str("nothing"),
            Some(att) => write!(f, "b\"{}\" (gzip: {})", att.bytes.escape_ascii(), att.gzip),
        }
    }
}
