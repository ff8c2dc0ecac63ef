//! Target `tree`: revision trees built from generated histories, with
//! positions up to and past every integer edge, hostile hashes, and "wild"
//! paths that honest peers would never send (disagreeing parents, reused
//! hashes). Invariants: nothing panics; merging is order-independent and
//! idempotent; the leaves and winner follow CouchDB's rules on honest
//! histories; edits, stemming and the binary encoding keep the tree sound.
//!
//! The honest-history generator follows `crates/revtree/tests/properties.rs`
//! (a random forest of revisions seen by replicas as paths), with huge root
//! positions added.

use std::collections::{BTreeSet, HashSet};

use proptest::collection::vec;
use proptest::prelude::*;
use revtree::{LeafState, MergeOutcome, RevHash, RevId, RevPath, RevTree};

use crate::driver::Violations;
use crate::hostile;

/// One revision of a generated history.
#[derive(Debug, Clone)]
pub struct Rev {
    pos: u64,
    parent: Option<usize>,
    hash: String,
    deleted: bool,
}

#[derive(Debug, Clone)]
pub struct Case {
    /// An honest history: a forest, unique hashes.
    universe: Vec<Rev>,
    /// Paths replicas send: (newest revision, how many revisions it keeps).
    ends: Vec<(usize, usize)>,
    /// Paths no honest peer sends: `(start, ids, deleted)`.
    wild: Vec<(u64, Vec<String>, bool)>,
    shuffle: u64,
    stem: u32,
    edit: (prop::sample::Index, bool),
    /// Byte edits of the encoding: (index, xor mask); a zero mask truncates there.
    mutations: Vec<(prop::sample::Index, u8)>,
}

fn universe() -> BoxedStrategy<Vec<Rev>> {
    let root_pos = prop_oneof![3 => 1u64..4, 2 => hostile::edge_u64()];
    let hash_style = prop_oneof![
        2 => Just(None),
        1 => hostile::text().prop_map(Some),
    ];
    vec(
        (
            any::<prop::sample::Index>(),
            0u8..6,
            root_pos,
            any::<bool>(),
            hash_style,
            prop::bool::weighted(0.25),
        ),
        1..24,
    )
    .prop_map(|shape| {
        let mut revs: Vec<Rev> = Vec::new();
        for (i, (pick, root_chance, root_pos, md5, suffix, deleted)) in
            shape.into_iter().enumerate()
        {
            let parent = (i > 0 && root_chance != 0).then(|| pick.index(i));
            // A child past u64::MAX cannot be written down: make it a root.
            let (parent, pos) = match parent.and_then(|p| revs[p].pos.checked_add(1)) {
                Some(pos) => (parent, pos),
                None => (None, root_pos),
            };
            let hash = match (md5, suffix) {
                (_, Some(suffix)) => format!("{i}:{suffix}"),
                (true, None) => format!(
                    "{:032x}",
                    (i as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c)
                ),
                (false, None) => format!("h{i}"),
            };
            revs.push(Rev {
                pos,
                parent,
                hash,
                deleted,
            });
        }
        revs
    })
    .boxed()
}

pub fn strategy() -> BoxedStrategy<Case> {
    let wild_hash = prop_oneof![
        3 => prop::sample::select(&["a", "b", "c", "h1", "h2"][..]).prop_map(str::to_string),
        1 => hostile::hash_text(),
    ];
    let wild_start = prop_oneof![3 => 1u64..6, 2 => hostile::edge_u64()];
    universe()
        .prop_flat_map(move |u| {
            let n = u.len();
            (
                Just(u),
                vec((0..n, 1usize..8), 1..12),
                prop::option::weighted(
                    0.4,
                    vec(
                        (
                            wild_start.clone(),
                            vec(wild_hash.clone(), 1..5),
                            any::<bool>(),
                        ),
                        1..5,
                    ),
                ),
                any::<u64>(),
                prop_oneof![1u32..6, Just(1000u32), Just(0u32), Just(u32::MAX)],
                (any::<prop::sample::Index>(), any::<bool>()),
                vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
            )
        })
        .prop_map(|(universe, extra, wild, shuffle, stem, edit, mutations)| {
            // Every revision without a child ends a path, plus random extra paths.
            let has_child: HashSet<usize> = universe.iter().filter_map(|r| r.parent).collect();
            let mut ends: Vec<(usize, usize)> = (0..universe.len())
                .filter(|i| !has_child.contains(i))
                .map(|i| (i, 1 + i % 7))
                .collect();
            ends.extend(extra);
            Case {
                universe,
                ends,
                wild: wild.unwrap_or_default(),
                shuffle,
                stem,
                edit,
                mutations,
            }
        })
        .boxed()
}

type Edit = (RevPath, LeafState);

/// The path from revision `i` back to its root, at most `keep` long; `None`
/// when revtree refuses it (a position it does not accept).
fn path_to(universe: &[Rev], i: usize, keep: usize) -> Option<Edit> {
    let mut ids = Vec::new();
    let mut at = Some(i);
    while let Some(j) = at {
        if ids.len() == keep {
            break;
        }
        ids.push(universe[j].hash.as_str());
        at = universe[j].parent;
    }
    let path = RevPath::from_parts(universe[i].pos, &ids).ok()?;
    let state = LeafState {
        deleted: universe[i].deleted,
        available: true,
    };
    Some((path, state))
}

fn merge_all<'a>(edits: impl IntoIterator<Item = &'a Edit>) -> RevTree {
    let mut tree = RevTree::new();
    for (path, state) in edits {
        tree.merge(path, *state);
    }
    tree
}

fn revs_of(tree: &RevTree) -> Vec<String> {
    tree.revs().map(ToString::to_string).collect()
}

pub fn check(case: &Case, v: &mut Violations) {
    let honest: Vec<Edit> = case
        .ends
        .iter()
        .filter_map(|&(i, keep)| path_to(&case.universe, i, keep))
        .collect();
    let wild: Vec<Edit> = case
        .wild
        .iter()
        .filter_map(|(start, ids, deleted)| {
            let path = RevPath::from_parts(*start, ids).ok()?;
            Some((
                path,
                LeafState {
                    deleted: *deleted,
                    available: true,
                },
            ))
        })
        .collect();

    let tree = merge_all(&honest);
    honest_laws(&tree, &honest, &case.universe, v);

    let all: Vec<&Edit> = honest.iter().chain(&wild).collect();
    let forward = merge_all(all.iter().copied());
    let backward = merge_all(all.iter().rev().copied());
    let mut shuffled = all.clone();
    let mut state = case.shuffle | 1;
    for i in (1..shuffled.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        shuffled.swap(i, (state % (i as u64 + 1)) as usize);
    }
    let shuffled_tree = merge_all(shuffled.iter().copied());
    v.check(
        forward == backward && forward == shuffled_tree,
        "merge depends on the order of the paths",
        || {
            format!(
                "forward {:?}\nbackward {:?}\nshuffled {:?}",
                revs_of(&forward),
                revs_of(&backward),
                revs_of(&shuffled_tree)
            )
        },
    );
    let mut again = forward.clone();
    for (path, state) in &all {
        let outcome = again.merge(path, *state);
        v.check(
            outcome == MergeOutcome::AlreadyPresent,
            "merging a path twice is not AlreadyPresent",
            || format!("{path:?}: {outcome:?}"),
        );
    }
    v.check(
        again == forward,
        "merging a path twice changes the tree",
        || format!("{:?} vs {:?}", revs_of(&again), revs_of(&forward)),
    );

    queries(&forward, v);
    encoding(&forward, &case.mutations, v);
    edits(&forward, case.edit, v);
    stemming(&forward, case.stem, v);
}

/// Leaves and winner of an honest history, computed without the tree.
fn honest_laws(tree: &RevTree, edits: &[Edit], universe: &[Rev], v: &mut Violations) {
    let mut seen = BTreeSet::new();
    let mut parents = BTreeSet::new();
    for (path, _) in edits {
        let revs: Vec<RevId> = path.revs().collect();
        seen.extend(revs.iter().cloned());
        parents.extend(revs.iter().skip(1).cloned());
    }
    let expected: BTreeSet<RevId> = seen.difference(&parents).cloned().collect();
    let leaves: BTreeSet<RevId> = tree.leaves().into_iter().map(|l| l.rev).collect();
    v.check(
        leaves == expected,
        "leaves are not those of the merged paths",
        || format!("leaves {leaves:?}\nexpected {expected:?}"),
    );
    let deleted = |r: &RevId| {
        universe
            .iter()
            .any(|x| x.deleted && x.pos == r.pos() && x.hash == r.hash().to_string())
    };
    let best = expected
        .iter()
        .max_by(|a, b| (!deleted(a), *a).cmp(&(!deleted(b), *b)));
    let winner = tree.winner().map(|w| w.rev);
    v.check(
        winner.as_ref() == best,
        "winner is not CouchDB's (live, then highest position, then hash)",
        || format!("winner {winner:?}, expected {best:?}"),
    );
}

/// Every read-only query on every revision: no panic, consistent answers.
fn queries(tree: &RevTree, v: &mut Violations) {
    let leaves = tree.leaves();
    v.check(
        tree.is_empty()
            || tree.conflicts().len() + tree.deleted_conflicts().len() + 1 == leaves.len(),
        "conflicts and deleted conflicts do not partition the losing leaves",
        || format!("{:?}", revs_of(tree)),
    );
    for leaf in &leaves {
        match tree.history(&leaf.rev) {
            Some(path) => {
                v.check(
                    path.leaf() == leaf.rev,
                    "history of a leaf starts elsewhere",
                    || format!("{}: {path:?}", leaf.rev),
                );
                let mut copy = tree.clone();
                let outcome = copy.merge(
                    &path,
                    LeafState {
                        deleted: leaf.deleted,
                        available: leaf.available,
                    },
                );
                v.check(
                    outcome == MergeOutcome::AlreadyPresent,
                    "merging a leaf's own history changes the tree",
                    || format!("{}: {outcome:?}", leaf.rev),
                );
            }
            None => v.add("a leaf has no history", leaf.rev.to_string()),
        }
        let _ = tree.revs_info(&leaf.rev);
        v.check(
            tree.latest(&leaf.rev).iter().any(|l| l.rev == leaf.rev),
            "latest of a leaf misses the leaf",
            || leaf.rev.to_string(),
        );
    }
    let all: Vec<RevId> = tree.revs().cloned().collect();
    for rev in &all {
        let _ = tree.parent(rev);
        let _ = tree.latest(rev);
        let _ = tree.revs_info(rev);
    }
    v.check(
        tree.revs_diff(&all).missing.is_empty(),
        "revs_diff reports held revisions missing",
        || format!("{:?}", revs_of(tree)),
    );
    let unknown: Vec<RevId> = [
        "1-zz",
        "2-zz",
        "9223372036854775807-zz",
        "4611686018427387904-zz",
    ]
    .iter()
    .filter_map(|t| RevId::parse(t).ok())
    .collect();
    let diff = tree.revs_diff(&unknown);
    v.check(
        diff.missing.len() == unknown.iter().filter(|r| !tree.contains(r)).count(),
        "revs_diff misses unknown revisions",
        || format!("{diff:?}"),
    );
}

/// Encoding round-trips; decoding a damaged encoding never panics, and what
/// it accepts is a tree that encodes back to a decodable form.
fn encoding(tree: &RevTree, mutations: &[(prop::sample::Index, u8)], v: &mut Violations) {
    let bytes = tree.encode();
    match RevTree::decode(&bytes) {
        Ok(back) => v.check(&back == tree, "encoding does not round-trip", || {
            format!("{:?} vs {:?}", revs_of(tree), revs_of(&back))
        }),
        Err(e) => v.add(
            "a tree's own encoding does not decode",
            format!("{e:?} for {:?}", revs_of(tree)),
        ),
    }
    if mutations.is_empty() || bytes.is_empty() {
        return;
    }
    let mut damaged = bytes.clone();
    for (at, mask) in mutations {
        if damaged.is_empty() {
            break;
        }
        let i = at.index(damaged.len());
        if *mask == 0 {
            damaged.truncate(i);
        } else {
            damaged[i] ^= mask;
        }
    }
    if let Ok(decoded) = RevTree::decode(&damaged) {
        let again = RevTree::decode(&decoded.encode());
        v.check(
            again.as_ref() == Ok(&decoded),
            "a decoded damaged encoding does not round-trip",
            || format!("{damaged:?}"),
        );
        queries(&decoded, v);
    }
}

/// Interactive edits on a leaf and without a parent: no panic; an accepted
/// edit is one generation above its parent and is a leaf.
fn edits(tree: &RevTree, (pick, deleted): (prop::sample::Index, bool), v: &mut Violations) {
    let leaves = tree.leaves();
    let target = (!leaves.is_empty()).then(|| leaves[pick.index(leaves.len())].rev.clone());
    for requested in [target, None] {
        let mut copy = tree.clone();
        let base = copy.edit_parent(requested.as_ref(), deleted);
        let result = copy.new_edit(requested.as_ref(), deleted, |_| RevHash::parse("fuzz-edit"));
        let Ok(new) = result else { continue };
        let expected = match base {
            Ok(Some(parent)) => parent.pos().checked_add(1),
            Ok(None) => Some(1),
            Err(_) => None,
        };
        v.check(
            Some(new.pos()) == expected,
            "an edit is not one generation above its parent",
            || format!("{requested:?} -> {new}, expected position {expected:?}"),
        );
        v.check(
            copy.leaves().iter().any(|l| l.rev == new),
            "an edit is not a leaf",
            || format!("{new}"),
        );
        v.check(
            RevTree::decode(&copy.encode()).as_ref() == Ok(&copy),
            "encoding does not round-trip after an edit",
            || format!("{new}"),
        );
    }
}

/// Stemming keeps every leaf, is idempotent, and keeps the encoding sound.
fn stemming(tree: &RevTree, limit: u32, v: &mut Violations) {
    let mut stemmed = tree.clone();
    stemmed.stem(limit);
    let leaves = |t: &RevTree| t.leaves().into_iter().map(|l| l.rev).collect::<Vec<_>>();
    v.check(
        leaves(&stemmed) == leaves(tree),
        "stemming changes the leaves",
        || {
            format!(
                "limit {limit}: {:?} -> {:?}",
                leaves(tree),
                leaves(&stemmed)
            )
        },
    );
    let mut twice = stemmed.clone();
    let removed = twice.stem(limit);
    v.check(
        removed.is_empty() && twice == stemmed,
        "stemming twice removes more",
        || format!("limit {limit}: {removed:?}"),
    );
    v.check(
        RevTree::decode(&stemmed.encode()).as_ref() == Ok(&stemmed),
        "encoding does not round-trip after stemming",
        || format!("limit {limit}"),
    );
    queries(&stemmed, v);
}
