//! The world of one run: the server, a client per person, the model and
//! the seeded generator; its rounds of random writes keep the model up to
//! date with what they do.

use std::collections::{BTreeMap, BTreeSet};

use recliner_tests::{Client, SplitMix, TestServer};
use serde_json::{Value, json};

use crate::model::{
    Doc, KINDS, Model, PEOPLE, Sight, Standing, person, random_access, random_text, sight,
};
use crate::{DB, FIRST_DOCS};

/// The test: a server, its users' clients, the model and the generator.
pub(crate) struct World {
    pub(crate) server: TestServer,
    pub(crate) clients: BTreeMap<&'static str, Client>,
    pub(crate) model: Model,
    pub(crate) rng: SplitMix,
    pub(crate) seed: u64,
    /// Each reader's `last_seq` at the previous check, and the documents
    /// written since that they read before or after the write: their feed
    /// since then is exactly those.
    pub(crate) since: BTreeMap<&'static str, Value>,
    pub(crate) touched: BTreeMap<&'static str, BTreeSet<String>>,
}

impl World {
    fn admin(&self) -> &Client {
        &self.clients["admin"]
    }

    pub(crate) fn client(&self, name: &str) -> &Client {
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
    pub(crate) async fn first_docs(&mut self) {
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
    pub(crate) async fn mutate(&mut self) {
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
