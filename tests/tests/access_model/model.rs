//! The model: the people and their standing, the documents as the test
//! knows them, what each person sees of each document ([`Sight`]), and the
//! generators of random `_access` lists and texts.

use std::collections::{BTreeMap, BTreeSet};

use recliner_tests::SplitMix;
use serde_json::{Value, json};

/// Words of the documents' `text`, searched by every search route.
pub(crate) const WORDS: [&str; 5] = ["apple", "birch", "cedar", "delta", "ember"];
pub(crate) const KINDS: [&str; 4] = ["red", "green", "blue", "plain"];

/// What `_access` lists are made of: every user's name, a name nobody
/// has, the roles users hold and one nobody holds.
const PRINCIPALS: [&str; 11] = [
    "alice", "bob", "carol", "dan", "eve", "dora", "ghost", "team", "ops", "staff", "interns",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Standing {
    Anonymous,
    /// Logged in, not a member: refused everywhere.
    Outsider,
    Member,
    DbAdmin,
    ServerAdmin,
}

pub(crate) struct Person {
    pub(crate) name: &'static str,
    pub(crate) roles: &'static [&'static str],
    pub(crate) standing: Standing,
}

impl Person {
    pub(crate) fn is_admin(&self) -> bool {
        matches!(self.standing, Standing::DbAdmin | Standing::ServerAdmin)
    }

    /// Whether an `_access` list names this person, by name or by role.
    pub(crate) fn named_in(&self, access: &Option<Vec<String>>) -> bool {
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
pub(crate) const PEOPLE: [Person; 8] = [
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

pub(crate) fn person(name: &str) -> &'static Person {
    PEOPLE.iter().find(|p| p.name == name).unwrap()
}

/// One document as the model knows it.
#[derive(Clone, Debug)]
pub(crate) struct Doc {
    /// The `_access` of the last live revision: a deletion that names
    /// nobody keeps the readers it had.
    pub(crate) access: Option<Vec<String>>,
    pub(crate) deleted: bool,
    pub(crate) rev: String,
    pub(crate) kind: String,
    pub(crate) n: i64,
    pub(crate) text: String,
    /// Members who read it while it was live and were then taken off.
    pub(crate) lost_by: BTreeSet<&'static str>,
    /// Members who read its deletion and were not named when it was
    /// written again.
    pub(crate) faded_for: BTreeSet<&'static str>,
}

impl Doc {
    pub(crate) fn has_word(&self, word: &str) -> bool {
        self.text.split(' ').any(|w| w == word)
    }
}

/// What a person sees of a document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sight {
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

pub(crate) fn sight(who: &Person, doc: &Doc) -> Sight {
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
pub(crate) fn token(id: &str) -> String {
    format!("tok{}q", &id[1..])
}

/// Ids nobody wrote, asked alongside real ones.
pub(crate) const MISSING: [&str; 3] = ["m900", "m901", "m902"];

pub(crate) struct Model {
    pub(crate) docs: BTreeMap<String, Doc>,
    /// Design documents: admins see them in listings and feeds.
    pub(crate) design: BTreeSet<String>,
    pub(crate) next_id: usize,
}

impl Model {
    pub(crate) fn body(&self, id: &str) -> Value {
        let d = &self.docs[id];
        let mut body = json!({"_id": id, "_rev": d.rev, "kind": d.kind, "n": d.n, "text": d.text});
        if let Some(access) = &d.access {
            body["_access"] = json!(access);
        }
        body
    }

    pub(crate) fn live_for(&self, who: &Person) -> BTreeSet<String> {
        self.docs
            .iter()
            .filter(|(_, d)| sight(who, d) == Sight::Live)
            .map(|(id, _)| id.clone())
            .collect()
    }

    pub(crate) fn live_where(&self, who: &Person, keep: impl Fn(&Doc) -> bool) -> BTreeSet<String> {
        self.docs
            .iter()
            .filter(|(_, d)| sight(who, d) == Sight::Live && keep(d))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Records a write of `id` (not a deletion): who read it before
    /// (`before`, its winner deleted or not) and does not now lost it.
    pub(crate) fn note_write(&mut self, id: &str, before: &[&'static str], was_deleted: bool) {
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
pub(crate) fn random_access(rng: &mut SplitMix) -> Option<Vec<String>> {
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

pub(crate) fn random_text(rng: &mut SplitMix, id: &str) -> String {
    format!("{} {} {}", rng.pick(&WORDS), rng.pick(&WORDS), token(id))
}
