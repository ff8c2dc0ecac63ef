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

mod changes;
mod documents;
mod findings;
mod mango;
mod model;
mod reader;
mod refused;
mod revisions;
mod search;
mod views;
mod world;

use std::collections::{BTreeMap, BTreeSet};

use recliner_tests::users::{FAST_PASSWORDS as FAST, add_user, as_user};
use recliner_tests::{Client, SplitMix, TempDir, TestServer};
use serde_json::json;

use crate::findings::{Findings, field_of};
use crate::model::{Model, PEOPLE, Person, Sight, Standing, sight};
use crate::reader::check_reader;
use crate::refused::check_refused;
use crate::world::World;

pub(crate) const DB: &str = "shared";

/// How many documents the admin writes first, and the rounds of changes
/// after them.
pub(crate) const FIRST_DOCS: usize = 80;
const ROUNDS: usize = 3;

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
