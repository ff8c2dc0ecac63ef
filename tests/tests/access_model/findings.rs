//! What a check found ([`Findings`]), everything it asked ([`Asked`]),
//! and the helpers that read answers, follow bookmarks and scan every
//! answer for what the reader may not see.

use std::collections::BTreeSet;
use std::io::Read;

use base64::Engine;
use recliner_tests::{Client, Reply};
use serde_json::{Value, json};

use crate::DB;
use crate::model::{Model, Person, Sight, sight, token};

/// What went wrong in one check, described; `leak` marks answers that
/// showed a user something of a document they may not read.
#[derive(Default)]
pub(crate) struct Findings {
    pub(crate) wrong: Vec<String>,
}

impl Findings {
    pub(crate) fn mismatch(&mut self, who: &str, route: &str, what: String) {
        self.wrong.push(format!("MISMATCH {who} {route}: {what}"));
    }

    pub(crate) fn leak(&mut self, who: &str, route: &str, what: String) {
        self.wrong.push(format!("LEAK {who} {route}: {what}"));
    }

    /// `got` must be `expected`; ids in `got` outside `allowed` are leaks.
    pub(crate) fn ids(
        &mut self,
        who: &str,
        route: &str,
        got: &[String],
        expected: &BTreeSet<String>,
        allowed: &BTreeSet<String>,
    ) {
        self.ids_or(who, route, got, expected, &BTreeSet::new(), allowed);
    }

    /// [`Findings::ids`] where the ids of `optional` may be answered or not.
    pub(crate) fn ids_or(
        &mut self,
        who: &str,
        route: &str,
        got: &[String],
        expected: &BTreeSet<String>,
        optional: &BTreeSet<String>,
        allowed: &BTreeSet<String>,
    ) {
        let mut set: BTreeSet<String> = got.iter().cloned().collect();
        if set.len() != got.len() {
            self.mismatch(who, route, format!("an id answered twice: {got:?}"));
        }
        let foreign: Vec<&String> = set
            .difference(allowed)
            .filter(|id| !optional.contains(*id))
            .collect();
        if !foreign.is_empty() {
            self.leak(
                who,
                route,
                format!("ids the user may not read: {foreign:?}"),
            );
        }
        set.retain(|id| !optional.contains(id) || expected.contains(id));
        if &set != expected {
            let extra: Vec<&String> = set.difference(expected).collect();
            let lacking: Vec<&String> = expected.difference(&set).collect();
            self.mismatch(
                who,
                route,
                format!("ids differ: extra {extra:?}, lacking {lacking:?}"),
            );
        }
    }

    pub(crate) fn equal(&mut self, who: &str, route: &str, got: &Value, expected: &Value) {
        if got != expected {
            self.mismatch(who, route, format!("got {got}, expected {expected}"));
        }
    }
}

fn strings(values: impl IntoIterator<Item = Value>) -> Vec<String> {
    values
        .into_iter()
        .map(|v| v.as_str().unwrap_or("<not a string>").to_string())
        .collect()
}

pub(crate) fn field_of(rows: &Value, field: &str) -> Vec<String> {
    strings(
        rows.as_array()
            .map(|rows| rows.iter().map(|r| r[field].clone()).collect::<Vec<_>>())
            .unwrap_or_default(),
    )
}

/// A bookmark's content, as far as it can be read: base64 of JSON, or of
/// a compressed Erlang term as CouchDB's Mango writes them.
fn bookmark_text(bookmark: &Value) -> String {
    let Some(text) = bookmark.as_str() else {
        return String::new();
    };
    let Ok(bytes) =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text.trim_end_matches('='))
    else {
        return text.to_string();
    };
    let mut term = Vec::new();
    if bytes.starts_with(&[0x83, 0x50]) && bytes.len() > 6 {
        if flate2::read::ZlibDecoder::new(&bytes[6..])
            .read_to_end(&mut term)
            .is_err()
        {
            return String::from_utf8_lossy(&bytes).into_owned();
        }
    } else if bytes.starts_with(&[0x83]) {
        term = bytes[1..].to_vec();
    } else {
        return String::from_utf8_lossy(&bytes).into_owned();
    }
    // An Erlang term: its binaries (`m`, a 4-byte length, the bytes),
    // quoted as JSON strings would be.
    let mut strings = Vec::new();
    let mut at = 0;
    while at + 5 <= term.len() {
        if term[at] == b'm' {
            let len = u32::from_be_bytes([term[at + 1], term[at + 2], term[at + 3], term[at + 4]]);
            let end = at + 5 + len as usize;
            if let Some(Ok(s)) = term.get(at + 5..end).map(std::str::from_utf8) {
                strings.push(format!("\"{s}\""));
                at = end;
                continue;
            }
        }
        at += 1;
    }
    strings.join(" ")
}

/// Everything one check asked one person, for the leak scan.
pub(crate) struct Asked<'a> {
    pub(crate) who: &'a Person,
    pub(crate) client: &'a Client,
    pub(crate) texts: Vec<(String, String)>,
}

impl Asked<'_> {
    pub(crate) async fn send(&mut self, method: &str, path: &str, body: Option<Value>) -> Reply {
        let reply = self.client.send(method, path, body, &[]).await;
        self.texts
            .push((format!("{method} {path}"), reply.text.clone()));
        reply
    }

    pub(crate) async fn get(&mut self, path: &str) -> Reply {
        self.send("GET", path, None).await
    }

    pub(crate) async fn post(&mut self, path: &str, body: Value) -> Reply {
        self.send("POST", path, Some(body)).await
    }
}

/// Follows a paged route to its end: `ask` gets the bookmark (None first)
/// and answers the page's ids and next bookmark.
pub(crate) async fn walk_pages(
    asked: &mut Asked<'_>,
    found: &mut Findings,
    route: &str,
    limit: usize,
    mut ask: impl AsyncFnMut(&mut Asked<'_>, Option<Value>) -> (Vec<String>, Value),
) -> Vec<String> {
    let mut ids = Vec::new();
    let mut bookmark = None;
    let mut bookmarks = Vec::new();
    for _ in 0..200 {
        let (page, next) = ask(asked, bookmark.clone()).await;
        let last = next.is_null();
        if page.len() > limit {
            found.mismatch(
                asked.who.name,
                route,
                format!("a page of {} rows with limit {limit}", page.len()),
            );
        }
        if page.is_empty() {
            break;
        }
        ids.extend(page);
        if last {
            break;
        }
        bookmarks.push(bookmark_text(&next));
        bookmark = Some(next);
    }
    asked
        .texts
        .push((format!("{route} bookmarks"), bookmarks.join(" ")));
    ids
}

pub(crate) fn try_json(reply: &Reply) -> Value {
    serde_json::from_str(&reply.text).unwrap_or_else(|_| json!({"not json": reply.text}))
}

/// Nothing of a document the reader may not read, anywhere: no answer
/// holds its text, and no listing its id.
pub(crate) fn scan_for_leaks(model: &Model, asked: &Asked<'_>, found: &mut Findings) {
    let who = asked.who;
    let name = who.name;
    let forbidden: Vec<(String, String)> = model
        .docs
        .iter()
        .filter(|(_, d)| sight(who, d) != Sight::Live)
        .map(|(id, _)| (id.clone(), token(id)))
        .collect();
    for (route, text) in &asked.texts {
        // Answers that echo no ids the reader sent.
        let listing = route.contains("_nouveau")
            || route.contains("_search")
            || route.contains("_find")
            || route.contains("bookmarks")
            || route.starts_with(&format!("GET /{DB}/_all_docs"));
        for (id, tok) in &forbidden {
            if text.contains(tok.as_str()) {
                found.leak(name, route, format!("the text of {id} ({tok}) shows"));
            }
            if listing && text.contains(&format!("\"{id}\"")) {
                found.leak(name, route, format!("the id {id} shows"));
            }
        }
    }
}
