//! A generated model of per-document access: a database created with
//! `?access=true`, users of every standing (members by name, with roles
//! and without, a member by role only, a non-member whose role documents
//! name, a database admin, the server admin, anonymous callers), random
//! documents with random `_access` lists, then rounds of random new
//! documents (some by members), edits, `_access` changes (grants and
//! revocations, some by members), deletions and documents written again
//! after their deletion. The test keeps its own model of what each user
//! may read and, after each round, asks every read route as every user:
//! the ids, bodies, counts and totals must be the model's exactly, a
//! document a user may not read must answer as one that does not exist,
//! and no answer may carry an id or a field value of a document the user
//! may not read. Deletions: a member sees the deletion of a document they
//! read, and a revocation as a deletion of their own (see [`Sight`]).
//!
//! The generator is seeded: the seed is printed, and
//! `RECLINER_MODEL_SEED=N` replays a run.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

use base64::Engine;
use futures_util::StreamExt;
use recliner_tests::users::{FAST_PASSWORDS as FAST, add_user, as_user};
use recliner_tests::{Client, Reply, SplitMix, TempDir, TestServer};
use serde_json::{Value, json};

const DB: &str = "shared";

/// How many documents the admin writes first, and the rounds of changes
/// after them.
const FIRST_DOCS: usize = 80;
const ROUNDS: usize = 3;

/// Words of the documents' `text`, searched by every search route.
const WORDS: [&str; 5] = ["apple", "birch", "cedar", "delta", "ember"];
const KINDS: [&str; 4] = ["red", "green", "blue", "plain"];

/// What `_access` lists are made of: every user's name, a name nobody
/// has, the roles users hold and one nobody holds.
const PRINCIPALS: [&str; 11] = [
    "alice", "bob", "carol", "dan", "eve", "dora", "ghost", "team", "ops", "staff", "interns",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Standing {
    Anonymous,
    /// Logged in, not a member: refused everywhere.
    Outsider,
    Member,
    DbAdmin,
    ServerAdmin,
}

struct Person {
    name: &'static str,
    roles: &'static [&'static str],
    standing: Standing,
}

impl Person {
    fn is_admin(&self) -> bool {
        matches!(self.standing, Standing::DbAdmin | Standing::ServerAdmin)
    }

    /// Whether an `_access` list names this person, by name or by role.
    fn named_in(&self, access: &Option<Vec<String>>) -> bool {
        access.as_ref().is_some_and(|access| {
            access
                .iter()
                .any(|p| p == self.name || self.roles.contains(&p.as_str()))
        })
    }
}

/// Members: `_security` names alice, bob and carol, and the role `staff`
/// (dan's only way in); eve holds `team`, which documents name, but is
/// no member; dora is the database's admin.
const PEOPLE: [Person; 8] = [
    Person {
        name: "alice",
        roles: &["team"],
        standing: Standing::Member,
    },
    Person {
        name: "bob",
        roles: &[],
        standing: Standing::Member,
    },
    Person {
        name: "carol",
        roles: &["team", "ops"],
        standing: Standing::Member,
    },
    Person {
        name: "dan",
        roles: &["staff"],
        standing: Standing::Member,
    },
    Person {
        name: "eve",
        roles: &["team"],
        standing: Standing::Outsider,
    },
    Person {
        name: "dora",
        roles: &["ops"],
        standing: Standing::DbAdmin,
    },
    Person {
        name: "admin",
        roles: &[],
        standing: Standing::ServerAdmin,
    },
    Person {
        name: "anonymous",
        roles: &[],
        standing: Standing::Anonymous,
    },
];

fn person(name: &str) -> &'static Person {
    PEOPLE.iter().find(|p| p.name == name).unwrap()
}

/// One document as the model knows it.
#[derive(Clone, Debug)]
struct Doc {
    /// The `_access` of the last live revision: a deletion that names
    /// nobody keeps the readers it had.
    access: Option<Vec<String>>,
    deleted: bool,
    rev: String,
    kind: String,
    n: i64,
    text: String,
    /// Members who read it while it was live and were then taken off.
    lost_by: BTreeSet<&'static str>,
    /// Members who read its deletion and were not named when it was
    /// written again.
    faded_for: BTreeSet<&'static str>,
}

impl Doc {
    fn has_word(&self, word: &str) -> bool {
        self.text.split(' ').any(|w| w == word)
    }
}

/// What a person sees of a document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sight {
    /// A live document they read.
    Live,
    /// Deleted while they read it: they see the deletion.
    Deleted,
    /// Taken from them: they see a deletion of their own (a revocation
    /// tombstone) in their changes and revisions, and nothing else.
    Lost,
    /// Taken from them while it was deleted: their replica holds its
    /// deletion already, so a tombstone tells them nothing new. Their
    /// feed may show one (when an earlier change took one of their names
    /// off it) or leave the document out; nothing else shows it.
    Faded,
    /// Never theirs: it does not exist for them.
    Never,
}

fn sight(who: &Person, doc: &Doc) -> Sight {
    let reads = who.is_admin() || who.named_in(&doc.access);
    match (reads, doc.deleted) {
        (true, false) => Sight::Live,
        (true, true) => Sight::Deleted,
        (false, _) if doc.lost_by.contains(who.name) => Sight::Lost,
        (false, _) if doc.faded_for.contains(who.name) => Sight::Faded,
        (false, _) => Sight::Never,
    }
}

/// A unique word of each document's text: found in an answer to someone
/// who may not read the document, it is a leak.
fn token(id: &str) -> String {
    format!("tok{}q", &id[1..])
}

/// Ids nobody wrote, asked alongside real ones.
const MISSING: [&str; 3] = ["m900", "m901", "m902"];

struct Model {
    docs: BTreeMap<String, Doc>,
    /// Design documents: admins see them in listings and feeds.
    design: BTreeSet<String>,
    next_id: usize,
}

impl Model {
    fn body(&self, id: &str) -> Value {
        let d = &self.docs[id];
        let mut body = json!({"_id": id, "_rev": d.rev, "kind": d.kind, "n": d.n, "text": d.text});
        if let Some(access) = &d.access {
            body["_access"] = json!(access);
        }
        body
    }

    fn live_for(&self, who: &Person) -> BTreeSet<String> {
        self.docs
            .iter()
            .filter(|(_, d)| sight(who, d) == Sight::Live)
            .map(|(id, _)| id.clone())
            .collect()
    }

    fn live_where(&self, who: &Person, keep: impl Fn(&Doc) -> bool) -> BTreeSet<String> {
        self.docs
            .iter()
            .filter(|(_, d)| sight(who, d) == Sight::Live && keep(d))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Records a write of `id` (not a deletion): who read it before
    /// (`before`, its winner deleted or not) and does not now lost it.
    fn note_write(&mut self, id: &str, before: &[&'static str], was_deleted: bool) {
        let doc = self.docs.get_mut(id).unwrap();
        for p in PEOPLE.iter().filter(|p| p.standing == Standing::Member) {
            if p.named_in(&doc.access) {
                doc.lost_by.remove(p.name);
                doc.faded_for.remove(p.name);
            } else if before.contains(&p.name) {
                if !was_deleted {
                    doc.lost_by.insert(p.name);
                } else if !doc.lost_by.contains(p.name) {
                    doc.faded_for.insert(p.name);
                }
            }
        }
    }
}

/// A random `_access`: absent, empty, one name, one role, or a mixture.
fn random_access(rng: &mut SplitMix) -> Option<Vec<String>> {
    match rng.below(100) {
        0..10 => None,
        10..18 => Some(Vec::new()),
        18..40 => Some(vec![rng.pick(&PRINCIPALS[..7]).to_string()]),
        40..55 => Some(vec![rng.pick(&PRINCIPALS[7..]).to_string()]),
        _ => {
            let mut access = Vec::new();
            for _ in 0..2 + rng.below(3) {
                let p = rng.pick(&PRINCIPALS).to_string();
                if !access.contains(&p) {
                    access.push(p);
                }
            }
            Some(access)
        }
    }
}

fn random_text(rng: &mut SplitMix, id: &str) -> String {
    format!("{} {} {}", rng.pick(&WORDS), rng.pick(&WORDS), token(id))
}

/// The test: a server, its users' clients, the model and the generator.
struct World {
    server: TestServer,
    clients: BTreeMap<&'static str, Client>,
    model: Model,
    rng: SplitMix,
    seed: u64,
    /// Each reader's `last_seq` at the previous check, and the documents
    /// written since that they read before or after the write: their feed
    /// since then is exactly those.
    since: BTreeMap<&'static str, Value>,
    touched: BTreeMap<&'static str, BTreeSet<String>>,
}

impl World {
    fn admin(&self) -> &Client {
        &self.clients["admin"]
    }

    fn client(&self, name: &str) -> &Client {
        &self.clients[name]
    }

    /// Members who read `id` now.
    fn readers_of(&self, id: &str) -> Vec<&'static str> {
        let doc = &self.model.docs[id];
        PEOPLE
            .iter()
            .filter(|p| p.standing == Standing::Member && sight(p, doc) == Sight::Live)
            .map(|p| p.name)
            .collect()
    }

    fn live_ids(&self) -> Vec<String> {
        self.model
            .docs
            .iter()
            .filter(|(_, d)| !d.deleted)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Readers (members and admins) who read the winner of `id`, deleted or not.
    fn winner_readers(&self, id: &str) -> Vec<&'static str> {
        let doc = &self.model.docs[id];
        PEOPLE
            .iter()
            .filter(|p| p.standing == Standing::Member || p.is_admin())
            .filter(|p| p.is_admin() || p.named_in(&doc.access))
            .map(|p| p.name)
            .collect()
    }

    /// Notes a write of `id`, as its readers before and after see it.
    fn touch(&mut self, before: Vec<&'static str>, id: &str) {
        for name in before.into_iter().chain(self.winner_readers(id)) {
            self.touched.entry(name).or_default().insert(id.to_string());
        }
    }

    /// Writes the model's body of `id` as `writer` (`before`: who read it,
    /// `was_deleted`: whether it was deleted).
    async fn put(
        &mut self,
        writer: &str,
        id: &str,
        what: &str,
        before: Vec<&'static str>,
        was_deleted: bool,
    ) {
        let mut body = self.model.body(id);
        if body["_rev"] == "" {
            body.as_object_mut().unwrap().remove("_rev");
        }
        let reply = self
            .client(writer)
            .put(&format!("/{DB}/{id}"), body.clone())
            .await;
        assert_eq!(
            reply.status, 201,
            "seed {}: {what} of {id} by {writer} ({body}): {}",
            self.seed, reply.text
        );
        self.model.docs.get_mut(id).unwrap().rev =
            reply.json()["rev"].as_str().unwrap().to_string();
        self.model.note_write(id, &before, was_deleted);
        self.touch(before, id);
    }

    /// A writer for a change of `id`: a member who reads it (half the
    /// time, when there is one) or an admin of either kind.
    fn writer_for(&mut self, id: &str) -> &'static str {
        let readers = self.readers_of(id);
        if !readers.is_empty() && self.rng.chance(50) {
            readers[self.rng.below(readers.len())]
        } else {
            self.rng.pick(&["admin", "dora"])
        }
    }

    fn new_id(&mut self) -> String {
        let id = format!("d{:03}", self.model.next_id);
        self.model.next_id += 1;
        id
    }

    /// The documents the admin writes first, in one `_bulk_docs`.
    async fn first_docs(&mut self) {
        let mut docs = Vec::new();
        for _ in 0..FIRST_DOCS {
            let id = self.new_id();
            let doc = Doc {
                access: random_access(&mut self.rng),
                deleted: false,
                rev: String::new(),
                kind: self.rng.pick(&KINDS).to_string(),
                n: self.rng.below(100) as i64,
                text: random_text(&mut self.rng, &id),
                lost_by: BTreeSet::new(),
                faded_for: BTreeSet::new(),
            };
            self.model.docs.insert(id.clone(), doc);
            let mut body = self.model.body(&id);
            body.as_object_mut().unwrap().remove("_rev");
            docs.push(body);
        }
        let written = self
            .admin()
            .post(&format!("/{DB}/_bulk_docs"), json!({"docs": docs}))
            .await;
        assert_eq!(written.status, 201, "{}", written.text);
        for row in written.json().as_array().unwrap() {
            assert_eq!(row["ok"], true, "{row}");
            let id = row["id"].as_str().unwrap();
            self.model.docs.get_mut(id).unwrap().rev = row["rev"].as_str().unwrap().to_string();
            self.model.note_write(id, &[], false);
        }
    }

    /// One round of random changes: new documents (some by members, who
    /// must name themselves), edits, `_access` changes (grants and
    /// revocations, some by members) and deletions.
    async fn mutate(&mut self) {
        for _ in 0..4 + self.rng.below(6) {
            let id = self.new_id();
            let writer = self
                .rng
                .pick(&["admin", "dora", "alice", "bob", "carol", "dan"]);
            let mut access = random_access(&mut self.rng);
            let who = person(writer);
            if !who.is_admin() && !who.named_in(&access) {
                // By name, or by one of their roles.
                let own = match who.roles {
                    [] => who.name,
                    roles if self.rng.chance(50) => roles[self.rng.below(roles.len())],
                    _ => who.name,
                };
                access.get_or_insert_with(Vec::new).push(own.to_string());
            }
            let doc = Doc {
                access,
                deleted: false,
                rev: String::new(),
                kind: self.rng.pick(&KINDS).to_string(),
                n: self.rng.below(100) as i64,
                text: random_text(&mut self.rng, &id),
                lost_by: BTreeSet::new(),
                faded_for: BTreeSet::new(),
            };
            self.model.docs.insert(id.clone(), doc);
            self.put(writer, &id, "creation", Vec::new(), false).await;
        }
        for _ in 0..6 + self.rng.below(6) {
            let live = self.live_ids();
            let id = live[self.rng.below(live.len())].clone();
            let writer = self.writer_for(&id);
            let before = self.winner_readers(&id);
            let text = random_text(&mut self.rng, &id);
            let doc = self.model.docs.get_mut(&id).unwrap();
            let next = KINDS.iter().position(|k| *k == doc.kind).unwrap() + 1;
            doc.kind = KINDS[next % KINDS.len()].to_string();
            doc.n = (doc.n + 37) % 100;
            doc.text = text;
            self.put(writer, &id, "edit", before, false).await;
        }
        for _ in 0..6 + self.rng.below(6) {
            let live = self.live_ids();
            let id = live[self.rng.below(live.len())].clone();
            let readers = self.readers_of(&id);
            let mut access = random_access(&mut self.rng);
            let writer = if !readers.is_empty() && self.rng.chance(30) {
                // A member changes who else reads it, and keeps themselves.
                let writer = readers[self.rng.below(readers.len())];
                if !person(writer).named_in(&access) {
                    access.get_or_insert_with(Vec::new).push(writer.to_string());
                }
                writer
            } else {
                self.rng.pick(&["admin", "dora"])
            };
            let before = self.winner_readers(&id);
            self.model.docs.get_mut(&id).unwrap().access = access;
            self.put(writer, &id, "access change", before, false).await;
        }
        // Deleted documents written again, for new readers: a member who
        // read the deletion and is not named now loses it.
        for _ in 0..self.rng.below(3) {
            let deleted: Vec<String> = self
                .model
                .docs
                .iter()
                .filter(|(_, d)| d.deleted)
                .map(|(id, _)| id.clone())
                .collect();
            if deleted.is_empty() {
                break;
            }
            let id = deleted[self.rng.below(deleted.len())].clone();
            let writer = self.rng.pick(&["admin", "dora"]);
            let before = self.winner_readers(&id);
            let doc = self.model.docs.get_mut(&id).unwrap();
            doc.deleted = false;
            doc.access = random_access(&mut self.rng);
            // Without a revision, as a new document is written.
            doc.rev = String::new();
            self.put(writer, &id, "write over a deletion", before, true)
                .await;
        }
        for _ in 0..3 + self.rng.below(4) {
            let live = self.live_ids();
            let id = live[self.rng.below(live.len())].clone();
            let writer = self.writer_for(&id);
            let rev = self.model.docs[&id].rev.clone();
            let reply = self
                .client(writer)
                .delete(&format!("/{DB}/{id}?rev={rev}"))
                .await;
            assert_eq!(
                reply.status, 200,
                "seed {}: deletion of {id} by {writer}: {}",
                self.seed, reply.text
            );
            let doc = self.model.docs.get_mut(&id).unwrap();
            doc.deleted = true;
            doc.rev = reply.json()["rev"].as_str().unwrap().to_string();
            let readers = self.winner_readers(&id);
            self.touch(readers, &id);
        }
    }
}

/// What went wrong in one check, described; `leak` marks answers that
/// showed a user something of a document they may not read.
#[derive(Default)]
struct Findings {
    wrong: Vec<String>,
}

impl Findings {
    fn mismatch(&mut self, who: &str, route: &str, what: String) {
        self.wrong.push(format!("MISMATCH {who} {route}: {what}"));
    }

    fn leak(&mut self, who: &str, route: &str, what: String) {
        self.wrong.push(format!("LEAK {who} {route}: {what}"));
    }

    /// `got` must be `expected`; ids in `got` outside `allowed` are leaks.
    fn ids(
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
    fn ids_or(
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

    fn equal(&mut self, who: &str, route: &str, got: &Value, expected: &Value) {
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

fn field_of(rows: &Value, field: &str) -> Vec<String> {
    strings(
        rows.as_array()
            .map(|rows| rows.iter().map(|r| r[field].clone()).collect::<Vec<_>>())
            .unwrap_or_default(),
    )
}

/// The counts of `kind` over `ids`, as search answers give them.
fn kind_counts(model: &Model, ids: &BTreeSet<String>) -> Value {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for id in ids {
        *counts.entry(model.docs[id].kind.clone()).or_default() += 1;
    }
    json!({"kind": counts})
}

/// The `low` (n < 50) and `high` ranges of `n` over `ids`.
fn n_ranges(model: &Model, ids: &BTreeSet<String>) -> Value {
    let low = ids.iter().filter(|id| model.docs[*id].n < 50).count();
    json!({"n": {"low": low, "high": ids.len() - low}})
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
struct Asked<'a> {
    who: &'a Person,
    client: &'a Client,
    texts: Vec<(String, String)>,
}

impl Asked<'_> {
    async fn send(&mut self, method: &str, path: &str, body: Option<Value>) -> Reply {
        let reply = self.client.send(method, path, body, &[]).await;
        self.texts
            .push((format!("{method} {path}"), reply.text.clone()));
        reply
    }

    async fn get(&mut self, path: &str) -> Reply {
        self.send("GET", path, None).await
    }

    async fn post(&mut self, path: &str, body: Value) -> Reply {
        self.send("POST", path, Some(body)).await
    }
}

/// Follows a paged route to its end: `ask` gets the bookmark (None first)
/// and answers the page's ids and next bookmark.
async fn walk_pages(
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

fn ids_path(ids: &[&str]) -> String {
    json!(ids)
        .to_string()
        .replace('"', "%22")
        .replace('[', "%5B")
        .replace(']', "%5D")
        .replace(',', "%2C")
}

/// Every read route as one reader (a member or an admin of either kind);
/// answers the `last_seq` of their feed.
async fn check_reader(world: &World, who: &'static Person, found: &mut Findings) -> Value {
    let model = &world.model;
    let client = world.client(who.name);
    let mut asked = Asked {
        who,
        client,
        texts: Vec::new(),
    };
    let name = who.name;
    let live = model.live_for(who);
    let mut listed = live.clone();
    if who.is_admin() {
        listed.extend(model.design.iter().cloned());
    }
    let faded: BTreeSet<String> = model
        .docs
        .iter()
        .filter(|(_, d)| sight(who, d) == Sight::Faded)
        .map(|(id, _)| id.clone())
        .collect();
    let in_feed: BTreeSet<String> = model
        .docs
        .iter()
        .filter(|(_, d)| !matches!(sight(who, d), Sight::Never | Sight::Faded))
        .map(|(id, _)| id.clone())
        .chain(
            who.is_admin()
                .then(|| model.design.clone())
                .into_iter()
                .flatten(),
        )
        .collect();
    let deleted_count = model
        .docs
        .values()
        .filter(|d| sight(who, d) == Sight::Deleted)
        .count();
    let salt = (name.len() as u64) << 32 | model.next_id as u64;
    let mut rng = SplitMix(world.seed ^ salt);

    // Searches first: after a round of writes, a member's stale search
    // must still be of what they read now (admins may see a stale index).
    check_searches(model, who, &live, &mut asked, found).await;

    // The database's figures are the reader's own.
    let info = asked.get(&format!("/{DB}")).await;
    if info.status != 200 {
        found.mismatch(name, "GET /db", format!("{}: {}", info.status, info.text));
    } else {
        let info = info.json();
        found.equal(
            name,
            "GET /db doc_count",
            &info["doc_count"],
            &json!(listed.len()),
        );
        found.equal(
            name,
            "GET /db doc_del_count",
            &info["doc_del_count"],
            &json!(deleted_count),
        );
    }

    // `_all_docs`, plain and with the documents.
    for include_docs in [false, true] {
        let route = format!("GET _all_docs include_docs={include_docs}");
        let all = asked
            .get(&format!("/{DB}/_all_docs?include_docs={include_docs}"))
            .await;
        if all.status != 200 {
            found.mismatch(name, &route, all.text.clone());
            continue;
        }
        let all = all.json();
        found.ids(
            name,
            &route,
            &field_of(&all["rows"], "id"),
            &listed,
            &listed,
        );
        found.equal(name, &route, &all["total_rows"], &json!(listed.len()));
        found.equal(name, &format!("{route} offset"), &all["offset"], &json!(0));
        if include_docs {
            for row in all["rows"].as_array().into_iter().flatten() {
                let id = row["id"].as_str().unwrap_or_default();
                if live.contains(id) {
                    found.equal(name, &route, &row["doc"], &model.body(id));
                }
            }
        }
    }

    // A page from the middle: its offset counts only the reader's rows.
    let start = format!("d{:03}", rng.below(model.next_id));
    let (skip, limit) = (rng.below(3), 1 + rng.below(6));
    let route = format!("GET _all_docs startkey={start} skip={skip} limit={limit}");
    let page = asked
        .get(&format!(
            "/{DB}/_all_docs?startkey=%22{start}%22&skip={skip}&limit={limit}"
        ))
        .await;
    let page = try_json(&page);
    let before = listed.iter().filter(|id| **id < start).count();
    let rows: BTreeSet<String> = listed
        .iter()
        .filter(|id| **id >= start)
        .skip(skip)
        .take(limit)
        .cloned()
        .collect();
    found.ids(name, &route, &field_of(&page["rows"], "id"), &rows, &listed);
    found.equal(
        name,
        &route,
        &json!([page["offset"], page["total_rows"]]),
        &json!([(before + skip).min(listed.len()), listed.len()]),
    );

    // A sample of ids: theirs, others', deleted, lost and missing.
    let all_ids: Vec<&str> = model.docs.keys().map(String::as_str).collect();
    let mut sample: Vec<&str> = Vec::new();
    for _ in 0..24 {
        let id = all_ids[rng.below(all_ids.len())];
        if !sample.contains(&id) {
            sample.push(id);
        }
    }
    sample.extend(MISSING);

    // `_all_docs` by keys: another's document is a missing one, row for row.
    let keyed = asked
        .post(
            &format!("/{DB}/_all_docs?include_docs=true"),
            json!({"keys": sample}),
        )
        .await;
    if keyed.status != 200 {
        found.mismatch(name, "POST _all_docs keys", keyed.text.clone());
    } else {
        let keyed = keyed.json();
        found.equal(
            name,
            "POST _all_docs keys total_rows",
            &keyed["total_rows"],
            &json!(listed.len()),
        );
        let rows = keyed["rows"].as_array().cloned().unwrap_or_default();
        if rows.len() != sample.len() {
            found.mismatch(name, "POST _all_docs keys", format!("{} rows", rows.len()));
        }
        let missing_row = |id: &str| json!({"key": id, "error": "not_found"});
        for (id, row) in sample.iter().zip(&rows) {
            let expected = match model.docs.get(*id).map(|d| (sight(who, d), d)) {
                Some((Sight::Live, d)) => {
                    json!({"id": id, "key": id, "value": {"rev": d.rev}, "doc": model.body(id)})
                }
                Some((Sight::Deleted, d)) => json!({"id": id, "key": id,
                    "value": {"rev": d.rev, "deleted": true}, "doc": null}),
                _ => missing_row(id),
            };
            if MISSING.contains(id) {
                found.equal(name, "POST _all_docs keys (a missing id)", row, &expected);
            } else if expected == missing_row(id) && *row != expected {
                found.leak(
                    name,
                    "POST _all_docs keys",
                    format!("{id} answers {row}, a missing id {}", missing_row(id)),
                );
            } else {
                found.equal(name, "POST _all_docs keys", row, &expected);
            }
        }
    }

    // Every document by id, and with `open_revs=all`: another's is
    // byte for byte a missing one.
    let missing_get = asked.get(&format!("/{DB}/{}", MISSING[0])).await;
    let missing_revs = asked
        .get(&format!("/{DB}/{}?open_revs=all", MISSING[0]))
        .await;
    found.equal(
        name,
        "GET a missing id",
        &json!([missing_get.status, missing_get.json()]),
        &json!([404, {"error": "not_found", "reason": "missing"}]),
    );
    found.equal(
        name,
        "GET a missing id ?open_revs=all",
        &json!(missing_revs.status),
        &json!(404),
    );
    let answers: Vec<(String, Reply, Reply)> = futures_util::stream::iter(model.docs.keys())
        .map(|id| async move {
            let one = client.get(&format!("/{DB}/{id}")).await;
            let revs = client.get(&format!("/{DB}/{id}?open_revs=all")).await;
            (id.clone(), one, revs)
        })
        .buffered(4)
        .collect()
        .await;
    let mut tombstones: BTreeMap<String, String> = BTreeMap::new();
    for (id, one, revs) in answers {
        let doc = &model.docs[&id];
        let route = format!("GET /db/{id}");
        match sight(who, doc) {
            Sight::Live => {
                found.equal(name, &route, &json!(one.status), &json!(200));
                if one.status == 200 {
                    found.equal(name, &route, &one.json(), &model.body(&id));
                }
                let expected = json!([{"ok": model.body(&id)}]);
                found.equal(
                    name,
                    &format!("{route}?open_revs=all"),
                    &try_json(&revs),
                    &expected,
                );
            }
            Sight::Deleted => {
                found.equal(
                    name,
                    &route,
                    &json!([one.status, try_json(&one)]),
                    &json!([404, {"error": "not_found", "reason": "deleted"}]),
                );
                let expected = json!([{"ok": {"_id": id, "_rev": doc.rev, "_deleted": true}}]);
                found.equal(
                    name,
                    &format!("{route}?open_revs=all"),
                    &try_json(&revs),
                    &expected,
                );
            }
            Sight::Lost | Sight::Faded => {
                if (one.status, &one.text) != (missing_get.status, &missing_get.text) {
                    found.leak(
                        name,
                        &route,
                        format!("a lost document answers {} {}", one.status, one.text),
                    );
                }
                let as_missing = missing_revs.text.replace(MISSING[0], &id);
                if sight(who, doc) == Sight::Faded
                    && (revs.status, &revs.text) == (missing_revs.status, &as_missing)
                {
                    continue;
                }
                // A deletion of their own, in place of the revision they held.
                let leaves = try_json(&revs);
                let leaf = &leaves[0]["ok"];
                let rev = leaf["_rev"].as_str().unwrap_or_default().to_string();
                let shape = json!([{"ok": {"_id": id, "_rev": rev, "_deleted": true}}]);
                if revs.status != 200 || leaves != shape || rev == doc.rev {
                    found.mismatch(
                        name,
                        &format!("{route}?open_revs=all"),
                        format!(
                            "a lost document should be one tombstone (not the current {}): {} {}",
                            doc.rev, revs.status, revs.text
                        ),
                    );
                }
                tombstones.insert(id.clone(), rev);
            }
            Sight::Never => {
                if (one.status, &one.text) != (missing_get.status, &missing_get.text) {
                    found.leak(
                        name,
                        &route,
                        format!("another's document answers {} {}", one.status, one.text),
                    );
                }
                let as_missing = missing_revs.text.replace(MISSING[0], &id);
                if (revs.status, &revs.text) != (missing_revs.status, &as_missing) {
                    found.leak(
                        name,
                        &format!("{route}?open_revs=all"),
                        format!("another's document answers {} {}", revs.status, revs.text),
                    );
                }
            }
        }
        // A revision of another's, asked by its number, is missing too.
        if sight(who, doc) == Sight::Never && rng.chance(20) {
            let asked_rev = client.get(&format!("/{DB}/{id}?rev={}", doc.rev)).await;
            let missing_rev = client
                .get(&format!("/{DB}/{}?rev={}", MISSING[1], doc.rev))
                .await;
            if (asked_rev.status, &asked_rev.text) != (missing_rev.status, &missing_rev.text) {
                found.leak(
                    name,
                    &format!("GET /db/{id}?rev="),
                    format!(
                        "{} {} (missing: {})",
                        asked_rev.status, asked_rev.text, missing_rev.text
                    ),
                );
            }
        }
    }

    // `_bulk_get`: as a missing document, with the id its own.
    let bulk = asked
        .post(
            &format!("/{DB}/_bulk_get"),
            json!({"docs": sample.iter().map(|id| json!({"id": id})).collect::<Vec<_>>()}),
        )
        .await;
    if bulk.status != 200 {
        found.mismatch(name, "POST _bulk_get", bulk.text.clone());
    } else {
        let results = bulk.json()["results"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let missing_entry = results
            .iter()
            .find(|r| r["id"] == MISSING[0])
            .cloned()
            .unwrap_or(Value::Null);
        found.equal(
            name,
            "POST _bulk_get (a missing id)",
            &missing_entry,
            &json!({"id": MISSING[0], "docs": [{"error": {"id": MISSING[0], "rev": null, "error": "not_found", "reason": "missing"}}]}),
        );
        let as_missing = |id: &str| -> Value {
            serde_json::from_str(&missing_entry.to_string().replace(MISSING[0], id)).unwrap()
        };
        for (id, result) in sample.iter().zip(&results) {
            let route = format!("POST _bulk_get {id}");
            let Some(doc) = model.docs.get(*id) else {
                found.equal(name, &route, result, &as_missing(id));
                continue;
            };
            let ok = |body: Value| json!({"id": id, "docs": [{"ok": body}]});
            match sight(who, doc) {
                Sight::Live => found.equal(name, &route, result, &ok(model.body(id))),
                Sight::Deleted => found.equal(
                    name,
                    &route,
                    result,
                    &ok(json!({"_id": id, "_rev": doc.rev, "_deleted": true})),
                ),
                Sight::Lost | Sight::Faded if tombstones.contains_key(*id) => found.equal(
                    name,
                    &route,
                    result,
                    &ok(json!({"_id": id, "_rev": tombstones[*id], "_deleted": true})),
                ),
                Sight::Lost | Sight::Faded | Sight::Never => {
                    if *result != as_missing(id) {
                        found.leak(name, &route, format!("{result}, not as a missing id"));
                    }
                }
            }
        }
    }

    // `_revs_diff`: a revision the reader may not read is missing, as one
    // of a document nobody wrote; their own (and their tombstones) are not.
    let mut asked_revs = serde_json::Map::new();
    for id in &sample {
        let rev = model
            .docs
            .get(*id)
            .map_or("1-0123456789abcdef0123456789abcdef".to_string(), |d| {
                d.rev.clone()
            });
        asked_revs.insert(id.to_string(), json!([rev]));
    }
    let diff = asked
        .post(
            &format!("/{DB}/_revs_diff"),
            Value::Object(asked_revs.clone()),
        )
        .await;
    if diff.status != 200 {
        found.mismatch(name, "POST _revs_diff", diff.text.clone());
    } else {
        let diff = diff.json();
        for (id, revs) in &asked_revs {
            let readable = model
                .docs
                .get(id)
                .is_some_and(|d| matches!(sight(who, d), Sight::Live | Sight::Deleted));
            let expected = if readable {
                Value::Null
            } else {
                json!({"missing": revs})
            };
            let got = diff.get(id).cloned().unwrap_or(Value::Null);
            if got != expected {
                let route = format!("POST _revs_diff {id}");
                if readable {
                    found.mismatch(name, &route, format!("{got}: the reader holds it"));
                } else {
                    found.leak(
                        name,
                        &route,
                        format!("{got}, not as a missing id's {expected}"),
                    );
                }
            }
        }
    }
    if !tombstones.is_empty() {
        let held: serde_json::Map<String, Value> = tombstones
            .iter()
            .map(|(id, rev)| (id.clone(), json!([rev])))
            .collect();
        let diff = asked
            .post(&format!("/{DB}/_revs_diff"), Value::Object(held))
            .await;
        found.equal(
            name,
            "POST _revs_diff of the reader's tombstones",
            &try_json(&diff),
            &json!({}),
        );
    }

    // `_changes`: each document once, a lost one as a deletion of the
    // reader's own; with the documents; by ids.
    let doc_ids_filter: Vec<&str> = sample.clone();
    let filtered: BTreeSet<String> = in_feed
        .iter()
        .filter(|id| doc_ids_filter.contains(&id.as_str()))
        .cloned()
        .collect();
    let faded_asked: BTreeSet<String> = faded
        .iter()
        .filter(|id| doc_ids_filter.contains(&id.as_str()))
        .cloned()
        .collect();
    let mut feeds = vec![
        (
            "GET _changes".to_string(),
            format!("/{DB}/_changes"),
            None,
            in_feed.clone(),
        ),
        (
            "GET _changes include_docs".to_string(),
            format!("/{DB}/_changes?include_docs=true"),
            None,
            in_feed.clone(),
        ),
        (
            "POST _changes filter=_doc_ids".to_string(),
            format!("/{DB}/_changes?filter=_doc_ids"),
            Some(json!({"doc_ids": doc_ids_filter})),
            filtered.clone(),
        ),
        (
            "GET _changes filter=_doc_ids".to_string(),
            format!(
                "/{DB}/_changes?filter=_doc_ids&doc_ids={}",
                ids_path(&doc_ids_filter)
            ),
            None,
            filtered,
        ),
    ];
    // A selector sees what the reader sees: a tombstone holds no fields.
    let kind = rng.pick(&KINDS);
    feeds.push((
        format!("POST _changes filter=_selector kind={kind}"),
        format!("/{DB}/_changes?filter=_selector&include_docs=true"),
        Some(json!({"selector": {"kind": kind}})),
        model.live_where(who, |d| d.kind == kind),
    ));
    feeds.push((
        "POST _changes filter=_selector _deleted".to_string(),
        format!("/{DB}/_changes?filter=_selector&include_docs=true"),
        Some(json!({"selector": {"_deleted": true}})),
        model
            .docs
            .iter()
            .filter(|(_, d)| matches!(sight(who, d), Sight::Deleted | Sight::Lost))
            .map(|(id, _)| id.clone())
            .collect(),
    ));
    // Since the previous check: only what the round's writes did to
    // documents the reader read before or after them.
    if let Some(since) = world.since.get(name).and_then(Value::as_str) {
        feeds.push((
            format!("GET _changes since the previous round ({since})"),
            format!("/{DB}/_changes?include_docs=true&since={since}"),
            None,
            world
                .touched
                .get(name)
                .map(|touched| touched.difference(&faded).cloned().collect())
                .unwrap_or_default(),
        ));
    }
    let mut last_seq = Value::Null;
    let mut feed_len = 0;
    let allowed: BTreeSet<String> = in_feed.union(&faded).cloned().collect();
    for (route, path, body, expected) in feeds {
        let route = route.as_str();
        let optional = if route.contains("_doc_ids") {
            &faded_asked
        } else {
            &faded
        };
        let feed = match body {
            Some(body) => asked.post(&path, body).await,
            None => asked.get(&path).await,
        };
        if feed.status != 200 {
            found.mismatch(name, route, feed.text.clone());
            continue;
        }
        let feed = feed.json();
        let rows = feed["results"].as_array().cloned().unwrap_or_default();
        if route == "GET _changes" {
            last_seq = feed["last_seq"].clone();
            feed_len = rows.len();
        }
        found.ids_or(
            name,
            route,
            &field_of(&json!(rows), "id"),
            &expected,
            optional,
            &allowed,
        );
        for row in &rows {
            let id = row["id"].as_str().unwrap_or_default();
            let Some(doc) = model.docs.get(id) else {
                continue;
            };
            let rev = row["changes"][0]["rev"].clone();
            let route = format!("{route} {id}");
            let (flags, expected_rev, body) = match sight(who, doc) {
                Sight::Live => ((Value::Null, Value::Null), json!(doc.rev), model.body(id)),
                Sight::Deleted => (
                    (json!(true), Value::Null),
                    json!(doc.rev),
                    json!({"_id": id, "_rev": doc.rev, "_deleted": true}),
                ),
                Sight::Lost | Sight::Faded => {
                    let tomb = tombstones.get(id).cloned().unwrap_or_default();
                    (
                        (json!(true), json!(true)),
                        json!(tomb),
                        json!({"_id": id, "_rev": tomb, "_deleted": true}),
                    )
                }
                Sight::Never => continue,
            };
            found.equal(
                name,
                &route,
                &json!([row["deleted"], row["removed"], rev]),
                &json!([flags.0, flags.1, expected_rev]),
            );
            if ["include_docs", "since", "_selector"]
                .iter()
                .any(|with_docs| route.contains(with_docs))
            {
                found.equal(name, &route, &row["doc"], &body);
            }
        }
    }

    // A feed's `pending` counts the reader's changes only.
    let limit = 1 + rng.below(feed_len.max(1));
    let feed = asked.get(&format!("/{DB}/_changes?limit={limit}")).await;
    let feed = try_json(&feed);
    found.equal(
        name,
        &format!("GET _changes?limit={limit}"),
        &json!([feed["results"].as_array().map(Vec::len), feed["pending"]]),
        &json!([limit.min(feed_len), feed_len.saturating_sub(limit)]),
    );

    // The view: design functions are for admins.
    check_view(model, who, &live, &mut asked, found).await;

    // `_find`: a JSON index, a scan and `$text`, every page.
    check_find(model, who, &live, &mut asked, found, &mut rng).await;

    // Nothing of a document the reader may not read, anywhere.
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
    last_seq
}

fn try_json(reply: &Reply) -> Value {
    serde_json::from_str(&reply.text).unwrap_or_else(|_| json!({"not json": reply.text}))
}

async fn check_view(
    model: &Model,
    who: &Person,
    live: &BTreeSet<String>,
    asked: &mut Asked<'_>,
    found: &mut Findings,
) {
    let name = who.name;
    let paths = [
        format!("/{DB}/_design/s/_view/by_id?reduce=false"),
        format!("/{DB}/_design/s/_view/by_id"),
        format!("/{DB}/_design/s/_view/count"),
    ];
    if !who.is_admin() {
        for path in paths {
            let reply = asked.get(&path).await;
            found.equal(
                name,
                &path,
                &json!([reply.status, try_json(&reply)]),
                &json!([403, {"error": "forbidden", "reason": "access denied"}]),
            );
        }
        return;
    }
    let rows = asked.get(&paths[0]).await;
    let rows = try_json(&rows);
    found.ids(
        name,
        "_view rows",
        &field_of(&rows["rows"], "id"),
        live,
        live,
    );
    found.equal(
        name,
        "_view total_rows",
        &rows["total_rows"],
        &json!(live.len()),
    );
    let sum: i64 = live.iter().map(|id| model.docs[id].n).sum();
    let summed = asked.get(&paths[1]).await;
    found.equal(
        name,
        "_view _sum",
        &try_json(&summed),
        &json!({"rows": [{"key": null, "value": sum}]}),
    );
    let counted = asked.get(&paths[2]).await;
    found.equal(
        name,
        "_view _count",
        &try_json(&counted),
        &json!({"rows": [{"key": null, "value": live.len()}]}),
    );
}

async fn check_find(
    model: &Model,
    who: &Person,
    live: &BTreeSet<String>,
    asked: &mut Asked<'_>,
    found: &mut Findings,
    rng: &mut SplitMix,
) {
    let name = who.name;
    let floor = rng.below(80) as i64;
    let kind = rng.pick(&KINDS);
    let word = rng.pick(&WORDS);
    let mut queries = vec![
        (
            "_find by-n",
            json!({"selector": {"n": {"$gte": floor}}, "use_index": "by-n"}),
            7,
            model.live_where(who, |d| d.n >= floor),
        ),
        (
            "_find kind (no index)",
            json!({"selector": {"kind": kind}}),
            5,
            model.live_where(who, |d| d.kind == kind),
        ),
        (
            "_find $text",
            json!({"selector": {"$text": word}}),
            6,
            model.live_where(who, |d| d.has_word(word)),
        ),
    ];
    if !who.is_admin() {
        // Before any fresh query of this round: a member's stale `$text`
        // is still of what they read now.
        queries.insert(
            0,
            (
                "_find $text update=false",
                json!({"selector": {"$text": word}, "update": false}),
                6,
                model.live_where(who, |d| d.has_word(word)),
            ),
        );
    }
    for (route, query, limit, expected) in queries {
        let route = format!("{route} {query}");
        let mut bodies = Vec::new();
        let ids = walk_pages(asked, found, &route, limit, async |asked, bookmark| {
            let mut query = query.clone();
            query["limit"] = json!(limit);
            if let Some(bookmark) = bookmark {
                query["bookmark"] = bookmark;
            }
            let reply = asked.post(&format!("/{DB}/_find"), query).await;
            if reply.status != 200 {
                return (
                    vec![format!("status {}: {}", reply.status, reply.text)],
                    Value::Null,
                );
            }
            let reply = reply.json();
            let docs = reply["docs"].as_array().cloned().unwrap_or_default();
            bodies.extend(docs.clone());
            (field_of(&json!(docs), "_id"), reply["bookmark"].clone())
        })
        .await;
        found.ids(name, &route, &ids, &expected, live);
        for doc in bodies {
            let id = doc["_id"].as_str().unwrap_or_default();
            if live.contains(id) {
                found.equal(name, &route, &doc, &model.body(id));
            }
        }
        // Its statistics: what a member's query examined is theirs.
        let mut whole = query.clone();
        whole["limit"] = json!(1000);
        whole["execution_stats"] = json!(true);
        let reply = asked.post(&format!("/{DB}/_find"), whole).await;
        let stats = try_json(&reply)["execution_stats"].clone();
        let route = format!("{route} execution_stats");
        found.equal(
            name,
            &route,
            &stats["results_returned"],
            &json!(expected.len()),
        );
        if who.is_admin() {
            continue;
        }
        for figure in ["total_keys_examined", "total_docs_examined"] {
            let examined = stats[figure].as_u64();
            let scan = route.contains("no index");
            let fits = examined.is_some_and(|n| {
                if scan {
                    n == live.len() as u64
                } else {
                    n <= live.len() as u64
                }
            });
            if !fits {
                found.leak(
                    name,
                    &route,
                    format!(
                        "{figure} {examined:?}, the reader has {} documents",
                        live.len()
                    ),
                );
            }
        }
    }
}

/// Nouveau and Clouseau's `_search`: ids, totals and counts are of the
/// reader's documents only, stale or not, paged or whole.
async fn check_searches(
    model: &Model,
    who: &Person,
    live: &BTreeSet<String>,
    asked: &mut Asked<'_>,
    found: &mut Findings,
) {
    let name = who.name;
    let counts_param = "counts=%5B%22kind%22%5D";
    // A member's stale query comes first: it must be brought up to date
    // for them. An admin's may be stale, so theirs come after a fresh one.
    let orders = if who.is_admin() {
        [false, true]
    } else {
        [true, false]
    };
    for stale in orders {
        let route = format!("_nouveau *:* stale={stale}");
        let reply = if stale {
            asked
                .get(&format!(
                    "/{DB}/_design/s/_nouveau/all?q=*:*&limit=200&update=false&{counts_param}&include_docs=true"
                ))
                .await
        } else {
            let ranges = json!({"n": [
                {"label": "low", "min": 0, "max": 50, "max_inclusive": false},
                {"label": "high", "min": 50, "max": 100},
            ]});
            asked
                .post(
                    &format!("/{DB}/_design/s/_nouveau/all"),
                    json!({"q": "*:*", "limit": 200, "counts": ["kind"], "ranges": ranges,
                           "include_docs": true}),
                )
                .await
        };
        let reply = try_json(&reply);
        found.ids(name, &route, &field_of(&reply["hits"], "id"), live, live);
        found.equal(name, &route, &reply["total_hits"], &json!(live.len()));
        found.equal(name, &route, &reply["counts"], &kind_counts(model, live));
        if !stale {
            found.equal(name, &route, &reply["ranges"], &n_ranges(model, live));
        }
        for hit in reply["hits"].as_array().into_iter().flatten() {
            let id = hit["id"].as_str().unwrap_or_default();
            if live.contains(id) {
                found.equal(name, &route, &hit["doc"], &model.body(id));
            }
        }

        let route = format!("_search *:* stale={stale}");
        let stale_param = if stale { "&stale=ok" } else { "" };
        // ranges={"n":{"low":"[0 TO 50}","high":"[50 TO 100]"}}
        let ranges = "ranges=%7B%22n%22%3A%7B%22low%22%3A%22%5B0%20TO%2050%7D%22%2C%22high%22%3A%22%5B50%20TO%20100%5D%22%7D%7D";
        let reply = asked
            .get(&format!(
                "/{DB}/_design/s/_search/all?q=*:*&limit=200&{counts_param}&{ranges}&include_docs=true{stale_param}"
            ))
            .await;
        let reply = try_json(&reply);
        found.ids(name, &route, &field_of(&reply["rows"], "id"), live, live);
        found.equal(name, &route, &reply["total_rows"], &json!(live.len()));
        found.equal(name, &route, &reply["counts"], &kind_counts(model, live));
        found.equal(name, &route, &reply["ranges"], &n_ranges(model, live));
        for row in reply["rows"].as_array().into_iter().flatten() {
            let id = row["id"].as_str().unwrap_or_default();
            if live.contains(id) {
                found.equal(name, &route, &row["doc"], &model.body(id));
            }
        }
    }

    // Grouped by kind, and drilled down to one: groups and totals of the
    // reader's documents.
    let reply = asked
        .get(&format!(
            "/{DB}/_design/s/_search/all?q=*:*&group_field=kind&group_limit=200&limit=200"
        ))
        .await;
    let reply = try_json(&reply);
    let route = "_search group_field=kind";
    found.equal(name, route, &reply["total_rows"], &json!(live.len()));
    let mut groups = BTreeMap::new();
    for group in reply["groups"].as_array().into_iter().flatten() {
        let ids = field_of(&group["rows"], "id");
        found.equal(name, route, &group["total_rows"], &json!(ids.len()));
        groups.insert(group["by"].as_str().unwrap_or_default().to_string(), ids);
    }
    for kind in KINDS {
        let expected = model.live_where(who, |d| d.kind == kind);
        let got = groups.remove(kind).unwrap_or_default();
        found.ids(name, &format!("{route} {kind}"), &got, &expected, live);
        let path = format!(
            "/{DB}/_design/s/_search/all?q=*:*&limit=200&drilldown=%5B%22kind%22%2C%22{kind}%22%5D"
        );
        let reply = try_json(&asked.get(&path).await);
        let route = format!("_search drilldown kind={kind}");
        found.ids(
            name,
            &route,
            &field_of(&reply["rows"], "id"),
            &expected,
            live,
        );
        found.equal(name, &route, &reply["total_rows"], &json!(expected.len()));
    }
    if !groups.is_empty() {
        found.mismatch(name, route, format!("groups of no kind: {groups:?}"));
    }

    // A word: the reader's documents holding it, counted as theirs.
    for word in WORDS {
        let expected = model.live_where(who, |d| d.has_word(word));
        for stale in [false, true] {
            let route = format!("_nouveau text:{word} stale={stale}");
            let reply = asked
                .get(&format!(
                    "/{DB}/_design/s/_nouveau/all?q=text:{word}&limit=200&{counts_param}&update={}",
                    !stale
                ))
                .await;
            let reply = try_json(&reply);
            found.ids(
                name,
                &route,
                &field_of(&reply["hits"], "id"),
                &expected,
                live,
            );
            found.equal(name, &route, &reply["total_hits"], &json!(expected.len()));
            found.equal(
                name,
                &route,
                &reply["counts"],
                &kind_counts(model, &expected),
            );
            let route = format!("_search text:{word} stale={stale}");
            let stale_param = if stale { "&stale=ok" } else { "" };
            let reply = asked
                .get(&format!(
                    "/{DB}/_design/s/_search/all?q=text:{word}&limit=200&{counts_param}{stale_param}"
                ))
                .await;
            let reply = try_json(&reply);
            found.ids(
                name,
                &route,
                &field_of(&reply["rows"], "id"),
                &expected,
                live,
            );
            found.equal(name, &route, &reply["total_rows"], &json!(expected.len()));
            found.equal(
                name,
                &route,
                &reply["counts"],
                &kind_counts(model, &expected),
            );
        }
    }

    // Another's unique word finds nothing; the reader's own finds one.
    let live_docs = model.docs.iter().filter(|(_, d)| !d.deleted);
    for id in live_docs.map(|(id, _)| id).take(12) {
        let expected: BTreeSet<String> = if live.contains(id) {
            [id.clone()].into()
        } else {
            BTreeSet::new()
        };
        let route = format!("_nouveau text:{}", token(id));
        let reply = asked
            .get(&format!(
                "/{DB}/_design/s/_nouveau/all?q=text:{}",
                token(id)
            ))
            .await;
        let reply = try_json(&reply);
        found.ids(
            name,
            &route,
            &field_of(&reply["hits"], "id"),
            &expected,
            live,
        );
        found.equal(name, &route, &reply["total_hits"], &json!(expected.len()));
    }

    // Every page, following bookmarks.
    let route = "_nouveau *:* paged";
    let ids = walk_pages(asked, found, route, 4, async |asked, bookmark| {
        let mut query = json!({"q": "*:*", "limit": 4});
        if let Some(bookmark) = bookmark {
            query["bookmark"] = bookmark;
        }
        let reply = asked
            .post(&format!("/{DB}/_design/s/_nouveau/all"), query)
            .await;
        let reply = try_json(&reply);
        (field_of(&reply["hits"], "id"), reply["bookmark"].clone())
    })
    .await;
    found.ids(name, route, &ids, live, live);
    let route = "_search *:* paged";
    let ids = walk_pages(asked, found, route, 4, async |asked, bookmark| {
        let mut path = format!("/{DB}/_design/s/_search/all?q=*:*&limit=4");
        if let Some(bookmark) = bookmark.as_ref().and_then(Value::as_str) {
            path.push_str(&format!("&bookmark={bookmark}"));
        }
        let reply = asked.get(&path).await;
        let reply = try_json(&reply);
        (field_of(&reply["rows"], "id"), reply["bookmark"].clone())
    })
    .await;
    found.ids(name, route, &ids, live, live);
}

/// Everything a caller who is not a member (or not logged in) may try:
/// refused, with nothing of any document in the answer.
async fn check_refused(world: &World, who: &'static Person, found: &mut Findings) {
    let client = world.client(who.name);
    let status = if who.standing == Standing::Anonymous {
        401
    } else {
        403
    };
    let some: Vec<&String> = world.model.docs.keys().take(5).collect();
    let mut routes: Vec<(&str, String, Option<Value>)> = vec![
        ("GET", format!("/{DB}"), None),
        ("GET", format!("/{DB}/_all_docs"), None),
        (
            "POST",
            format!("/{DB}/_all_docs"),
            Some(json!({"keys": some})),
        ),
        ("GET", format!("/{DB}/_changes"), None),
        ("GET", format!("/{DB}/_changes?include_docs=true"), None),
        (
            "POST",
            format!("/{DB}/_bulk_get"),
            Some(json!({"docs": some.iter().map(|id| json!({"id": id})).collect::<Vec<_>>()})),
        ),
        (
            "POST",
            format!("/{DB}/_revs_diff"),
            Some(json!({"d000": ["1-0123456789abcdef0123456789abcdef"]})),
        ),
        (
            "POST",
            format!("/{DB}/_find"),
            Some(json!({"selector": {"$text": "apple"}})),
        ),
        (
            "POST",
            format!("/{DB}/_find"),
            Some(json!({"selector": {"n": {"$gte": 0}}})),
        ),
        ("GET", format!("/{DB}/_design/s/_view/by_id"), None),
        ("GET", format!("/{DB}/_design/s/_nouveau/all?q=*:*"), None),
        (
            "GET",
            format!("/{DB}/_design/s/_nouveau/all?q=*:*&update=false"),
            None,
        ),
        ("GET", format!("/{DB}/_design/s/_search/all?q=*:*"), None),
        (
            "GET",
            format!("/{DB}/_design/s/_search/all?q=*:*&stale=ok"),
            None,
        ),
    ];
    for id in world.model.docs.keys() {
        routes.push(("GET", format!("/{DB}/{id}"), None));
    }
    let missing = client.get(&format!("/{DB}/{}", MISSING[0])).await.text;
    for (method, path, body) in routes {
        let reply = client.send(method, &path, body, &[]).await;
        let route = format!("{method} {path}");
        if reply.status != status {
            found.mismatch(
                who.name,
                &route,
                format!("{} (expected {status}): {}", reply.status, reply.text),
            );
        }
        // A document's refusal is a missing one's, whoever it names.
        let one_doc = !path.contains("/_") && path.len() > DB.len() + 2;
        if one_doc && reply.text != missing {
            found.leak(
                who.name,
                &route,
                format!("{}, where a missing id's refusal is {missing}", reply.text),
            );
        }
        for (id, _) in world.model.docs.iter() {
            if reply.text.contains(&format!("\"{id}\"")) || reply.text.contains(&token(id)) {
                found.leak(who.name, &route, format!("{id} shows: {}", reply.text));
            }
        }
    }
}

/// Every person's check, in a random order of the readers.
async fn check_all(world: &mut World, round: usize) {
    let mut found = Findings::default();
    let mut readers: Vec<&'static Person> = PEOPLE
        .iter()
        .filter(|p| p.standing == Standing::Member || p.is_admin())
        .collect();
    for i in (1..readers.len()).rev() {
        readers.swap(i, world.rng.below(i + 1));
    }
    let mut since = BTreeMap::new();
    for who in readers {
        since.insert(who.name, check_reader(world, who, &mut found).await);
    }
    world.since = since;
    world.touched.clear();
    for who in PEOPLE
        .iter()
        .filter(|p| matches!(p.standing, Standing::Anonymous | Standing::Outsider))
    {
        check_refused(world, who, &mut found).await;
    }

    // Together, the members see exactly the live documents that name at
    // least one of them (by name or role).
    let mut union = BTreeSet::new();
    for who in PEOPLE.iter().filter(|p| p.standing == Standing::Member) {
        let all = world
            .client(who.name)
            .get(&format!("/{DB}/_all_docs"))
            .await
            .json();
        union.extend(field_of(&all["rows"], "id"));
    }
    let member_principals: BTreeSet<&str> = PEOPLE
        .iter()
        .filter(|p| p.standing == Standing::Member)
        .flat_map(|p| std::iter::once(p.name).chain(p.roles.iter().copied()))
        .collect();
    let named: BTreeSet<String> = world
        .model
        .docs
        .iter()
        .filter(|(_, d)| {
            !d.deleted
                && d.access
                    .iter()
                    .flatten()
                    .any(|p| member_principals.contains(p.as_str()))
        })
        .map(|(id, _)| id.clone())
        .collect();
    let union: Vec<String> = union.into_iter().collect();
    found.ids("members together", "GET _all_docs", &union, &named, &named);

    let live = world.model.docs.values().filter(|d| !d.deleted).count();
    let sights: Vec<String> = PEOPLE
        .iter()
        .filter(|p| p.standing == Standing::Member)
        .map(|p| {
            let of = |s: Sight| {
                world
                    .model
                    .docs
                    .values()
                    .filter(|d| sight(p, d) == s)
                    .count()
            };
            format!(
                "{} {}/{}/{}/{}",
                p.name,
                of(Sight::Live),
                of(Sight::Deleted),
                of(Sight::Lost),
                of(Sight::Faded)
            )
        })
        .collect();
    eprintln!(
        "access model: round {round}: {} documents ({live} live); live/deleted/lost/faded: {}; {} findings",
        world.model.docs.len(),
        sights.join(", "),
        found.wrong.len()
    );
    assert!(
        found.wrong.is_empty(),
        "seed {} (replay with RECLINER_MODEL_SEED={}), round {round}: {} findings:\n{}",
        world.seed,
        world.seed,
        found.wrong.len(),
        found.wrong.join("\n")
    );
}

#[tokio::test]
async fn every_reader_sees_exactly_the_model_on_every_read_route() {
    let started = std::time::Instant::now();
    let seed = std::env::var("RECLINER_MODEL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("access model: seed {seed} (replay with RECLINER_MODEL_SEED={seed})");
    let data = TempDir::new("access-model");
    let server = TestServer::start_with_env(data.path(), &["--log-level", "warn"], &[FAST]);
    let admin = Client::new(&server);
    let mut clients = BTreeMap::new();
    for p in &PEOPLE {
        let client = match p.standing {
            Standing::Anonymous => Client::anonymous(&server),
            Standing::ServerAdmin => admin.clone(),
            _ => {
                add_user(&admin, p.name, json!(p.roles)).await;
                as_user(&server, p.name)
            }
        };
        clients.insert(p.name, client);
    }
    assert_eq!(
        admin
            .put(&format!("/{DB}?access=true"), json!(null))
            .await
            .status,
        201
    );
    let security = json!({
        "members": {"names": ["alice", "bob", "carol"], "roles": ["staff"]},
        "admins": {"names": ["dora"]},
    });
    let set = admin.put(&format!("/{DB}/_security"), security).await;
    assert_eq!(set.status, 200, "{}", set.text);
    let ddoc = json!({
        "views": {
            "by_id": {"map": "function (doc) { emit(doc._id, doc.n); }", "reduce": "_sum"},
            "count": {"map": "function (doc) { emit(doc.kind, 1); }", "reduce": "_count"},
        },
        "nouveau": {"all": {"index": "function (doc) {
            index('string', 'kind', doc.kind, {store: true});
            index('text', 'text', doc.text);
            index('double', 'n', doc.n);
        }"}},
        "indexes": {"all": {"index": "function (doc) {
            index('kind', doc.kind, {store: true, facet: true});
            index('text', doc.text);
            index('n', doc.n);
        }"}},
    });
    let made = admin.put(&format!("/{DB}/_design/s"), ddoc).await;
    assert_eq!(made.status, 201, "{}", made.text);
    for index in [
        json!({"index": {"fields": ["n"]}, "name": "by-n", "ddoc": "by-n"}),
        json!({"type": "nouveau", "name": "words", "ddoc": "words",
               "index": {"fields": [{"name": "text", "type": "text"}]}}),
    ] {
        let made = admin.post(&format!("/{DB}/_index"), index).await;
        assert_eq!(made.status, 200, "{}", made.text);
    }
    let mut world = World {
        server,
        clients,
        model: Model {
            docs: BTreeMap::new(),
            design: ["_design/s", "_design/by-n", "_design/words"]
                .map(String::from)
                .into(),
            next_id: 0,
        },
        rng: SplitMix(seed),
        seed,
        since: BTreeMap::new(),
        touched: BTreeMap::new(),
    };
    world.first_docs().await;
    check_all(&mut world, 0).await;
    for round in 1..=ROUNDS {
        world.mutate().await;
        check_all(&mut world, round).await;
    }
    eprintln!(
        "access model: {} checks in {:?}",
        ROUNDS + 1,
        started.elapsed()
    );
    world.server.stop();
}
