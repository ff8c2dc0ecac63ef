//! Property tests: the laws of the revision tree, checked on random histories.
//!
//! A random "universe" is a forest of revisions (a random parent for each,
//! unique hashes, roots at random positions as after stemming). Replicas see
//! it as paths: from some revision back towards its root, possibly cut short.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::{BTreeSet, HashSet};

use proptest::prelude::*;
use revtree::{EditError, LeafState, MAX_POS, MergeOutcome, RevHash, RevId, RevPath, RevTree};

/// One revision of the universe: its id, its parent's index, its deletion.
#[derive(Clone, Debug)]
struct Rev {
    id: RevId,
    parent: Option<usize>,
    deleted: bool,
}

/// A path through the universe plus the state of its newest revision.
type Edit = (RevPath, LeafState);

/// A unique hash for revision `i` in one of four styles: md5-like, plain
/// text, hostile text (quotes, backslashes, control characters, non-ASCII),
/// and the empty hash CouchDB accepts (`1-`), given to the first revision.
fn hash_for(i: usize, style: u8) -> RevHash {
    match style {
        // 32 lowercase hex digits: stored decoded, compared as bytes.
        0 => RevHash::parse(&format!(
            "{:032x}",
            (i as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c)
        )),
        1 => RevHash::parse(&format!("h{i}")),
        3 if i == 0 => RevHash::parse(""),
        _ => RevHash::parse(&format!("\"\\\r\n\u{1}é{i}")),
    }
}

/// Where a root sits: low, as usual, or near the highest position, so that
/// every operation meets positions at the bound.
fn root_position() -> impl Strategy<Value = u64> {
    prop_oneof![4 => 1u64..4, 1 => (MAX_POS - 32)..=MAX_POS]
}

fn universe() -> impl Strategy<Value = Vec<Rev>> {
    (1usize..30)
        .prop_flat_map(|n| {
            (
                Just(n),
                prop::collection::vec((any::<prop::sample::Index>(), 0u8..6, root_position()), n),
                prop::collection::vec(0u8..4, n),
                prop::collection::vec(prop::bool::weighted(0.25), n),
            )
        })
        .prop_map(|(_, shape, styles, deleted)| {
            let mut revs: Vec<Rev> = Vec::new();
            for (i, (pick, root_chance, root_pos)) in shape.into_iter().enumerate() {
                // Mostly one tree; sometimes a new root (an unrelated or stemmed history).
                // A revision at the highest position can have no child.
                let parent = if i == 0 || root_chance == 0 {
                    None
                } else {
                    Some(pick.index(i)).filter(|&p| revs[p].id.pos() < MAX_POS)
                };
                let pos = parent.map_or(root_pos, |p| revs[p].id.pos() + 1);
                revs.push(Rev {
                    id: RevId::new(pos, hash_for(i, styles[i])).unwrap(),
                    parent,
                    deleted: deleted[i],
                });
            }
            revs
        })
}

/// The path from revision `i` back to its root, keeping at most `keep` revisions.
fn path_to(universe: &[Rev], i: usize, keep: usize) -> RevPath {
    let mut ids = Vec::new();
    let mut at = Some(i);
    while let Some(j) = at {
        if ids.len() == keep {
            break;
        }
        ids.push(universe[j].id.hash().clone());
        at = universe[j].parent;
    }
    RevPath::new(universe[i].id.pos(), ids).unwrap()
}

/// A universe and the edits that replicas make of it: every revision that
/// has no child is the end of at least one path, plus random extra paths.
fn universe_and_edits() -> impl Strategy<Value = (Vec<Rev>, Vec<Edit>)> {
    universe()
        .prop_flat_map(|u| {
            let n = u.len();
            (
                Just(u),
                prop::collection::vec((0..n, 1usize..8), 0..12),
                prop::collection::vec(1usize..8, n),
            )
        })
        .prop_map(|(u, extra, keeps)| {
            let has_child: HashSet<usize> = u.iter().filter_map(|r| r.parent).collect();
            let mut ends: Vec<(usize, usize)> = (0..u.len())
                .filter(|i| !has_child.contains(i))
                .map(|i| (i, keeps[i]))
                .collect();
            ends.extend(extra);
            let edits = ends
                .into_iter()
                .map(|(i, keep)| {
                    let state = LeafState {
                        deleted: u[i].deleted,
                        available: true,
                    };
                    (path_to(&u, i, keep), state)
                })
                .collect();
            (u, edits)
        })
}

fn merge_all<'a>(edits: impl IntoIterator<Item = &'a Edit>) -> RevTree {
    let mut tree = RevTree::new();
    for (path, state) in edits {
        tree.merge(path, *state);
    }
    tree
}

/// The leaves the tree must have, computed without the tree: revisions seen
/// in some path that no path shows as a parent.
fn expected_leaves(edits: &[Edit]) -> BTreeSet<RevId> {
    let mut all = BTreeSet::new();
    let mut parents = BTreeSet::new();
    for (path, _) in edits {
        let revs: Vec<RevId> = path.revs().collect();
        all.extend(revs.iter().cloned());
        parents.extend(revs.iter().skip(1).cloned());
    }
    all.difference(&parents).cloned().collect()
}

/// Generations from `rev` up to its root in `tree`, counting `rev` itself.
fn depth(tree: &RevTree, rev: &RevId) -> usize {
    tree.history(rev).map_or(0, |p| p.ids().len())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn merge_is_order_independent((_, edits) in universe_and_edits(), seed in any::<u64>()) {
        let forward = merge_all(&edits);
        let backward = merge_all(edits.iter().rev());
        let mut shuffled = edits.clone();
        // A seeded Fisher-Yates shuffle: any permutation can come up.
        let mut state = seed | 1;
        for i in (1..shuffled.len()).rev() {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17;
            shuffled.swap(i, (state % (i as u64 + 1)) as usize);
        }
        prop_assert_eq!(&forward, &backward);
        prop_assert_eq!(&forward, &merge_all(&shuffled));
    }

    #[test]
    fn merge_is_idempotent((_, edits) in universe_and_edits()) {
        let mut tree = merge_all(&edits);
        let once = tree.clone();
        for (path, state) in &edits {
            prop_assert_eq!(tree.merge(path, *state), MergeOutcome::AlreadyPresent);
        }
        prop_assert_eq!(tree, once);
    }

    #[test]
    fn merge_finds_exactly_the_leaves_of_the_union((_, edits) in universe_and_edits()) {
        let tree = merge_all(&edits);
        let leaves: BTreeSet<RevId> = tree.leaves().into_iter().map(|l| l.rev).collect();
        prop_assert_eq!(leaves, expected_leaves(&edits));
    }

    #[test]
    fn the_winner_is_the_greatest_leaf_by_couchdbs_rule((u, edits) in universe_and_edits()) {
        let tree = merge_all(&edits);
        let winner = tree.winner().expect("a non-empty tree has a winner");
        let deleted = |r: &RevId| u.iter().any(|x| &x.id == r && x.deleted);
        let best = expected_leaves(&edits)
            .into_iter()
            .max_by(|a, b| (!deleted(a), a).cmp(&(!deleted(b), b)))
            .unwrap();
        prop_assert_eq!(&winner.rev, &best);
        prop_assert_eq!(winner.deleted, deleted(&best));
        prop_assert_eq!(merge_all(edits.iter().rev()).winner().unwrap(), winner);
        // Conflicts and deleted conflicts partition the other leaves.
        let others = tree.conflicts().len() + tree.deleted_conflicts().len();
        prop_assert_eq!(others + 1, tree.leaves().len());
    }

    #[test]
    fn stemming_keeps_every_leaf_and_at_most_the_limit(
        (_, edits) in universe_and_edits(),
        limit in 1u32..6,
    ) {
        let full = merge_all(&edits);
        let mut stemmed = full.clone();
        stemmed.stem(limit);
        let leaves = |t: &RevTree| t.leaves().into_iter().map(|l| l.rev).collect::<Vec<_>>();
        prop_assert_eq!(leaves(&stemmed), leaves(&full));
        let limit = limit as usize;
        for leaf in full.leaves() {
            // Each leaf keeps exactly its newest `limit` generations (or all it had)...
            let kept = full.history(&leaf.rev).unwrap().truncated(limit);
            let now = stemmed.history(&leaf.rev).unwrap();
            prop_assert!(now.ids().len() >= kept.ids().len());
            prop_assert_eq!(&now.ids()[..kept.ids().len()], kept.ids());
        }
        // ...and nothing older than `limit` generations of every leaf survives.
        for rev in stemmed.revs() {
            let near_a_leaf = stemmed.leaves().iter().any(|leaf| {
                leaf.rev.pos() >= rev.pos()
                    && (leaf.rev.pos() - rev.pos()) < limit as u64
                    && stemmed.latest(rev).iter().any(|l| l.rev == leaf.rev)
            });
            prop_assert!(near_a_leaf, "{rev} is more than {limit} generations from every leaf");
        }
        // A single line of history is at most `limit` deep.
        if full.leaves().len() == 1 {
            let leaf = &full.leaves()[0].rev;
            prop_assert!(depth(&stemmed, leaf) <= limit);
        }
        let mut twice = stemmed.clone();
        prop_assert!(twice.stem(limit as u32).is_empty());
        prop_assert_eq!(twice, stemmed);
    }

    #[test]
    fn revs_diff_of_the_trees_own_revisions_is_empty((_, edits) in universe_and_edits()) {
        let tree = merge_all(&edits);
        let leaves: Vec<RevId> = tree.leaves().into_iter().map(|l| l.rev).collect();
        prop_assert!(tree.revs_diff(&leaves).missing.is_empty());
        let all: Vec<RevId> = tree.revs().cloned().collect();
        prop_assert!(tree.revs_diff(&all).missing.is_empty());
        // A revision the tree never saw is missing, with the lower leaves as ancestors.
        let unknown = RevId::new(3, RevHash::parse("never-seen")).unwrap();
        let diff = tree.revs_diff(std::slice::from_ref(&unknown));
        prop_assert_eq!(diff.missing, vec![unknown]);
        let lower: BTreeSet<RevId> = leaves.into_iter().filter(|l| l.pos() < 3).collect();
        prop_assert_eq!(diff.possible_ancestors.into_iter().collect::<BTreeSet<_>>(), lower);
    }

    #[test]
    fn an_edit_of_a_leaf_replaces_it_as_a_leaf((_, edits) in universe_and_edits(), pick in any::<prop::sample::Index>()) {
        let mut tree = merge_all(&edits);
        let leaves = tree.leaves();
        let target = &leaves[pick.index(leaves.len())];
        let before = tree.clone();
        let result = tree.new_edit(Some(&target.rev), false, |_| RevHash::parse("fresh"));
        if tree.is_deleted() || leaves.iter().all(|l| l.deleted) {
            prop_assert!(result.is_err(), "a deleted document is edited only by re-creation");
        } else if target.rev.pos() == MAX_POS {
            prop_assert_eq!(result, Err(EditError::PositionOverflow));
            prop_assert_eq!(tree, before, "a refused edit changes nothing");
        } else {
            let new = result.unwrap();
            prop_assert_eq!(new.pos(), target.rev.pos() + 1);
            let after: Vec<RevId> = tree.leaves().into_iter().map(|l| l.rev).collect();
            prop_assert!(after.contains(&new) && !after.contains(&target.rev));
            prop_assert_eq!(after.len(), leaves.len());
        }
    }

    #[test]
    fn purging_leaves_takes_only_their_branches(
        (_, edits) in universe_and_edits(),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        interior in any::<prop::sample::Index>(),
    ) {
        let before = merge_all(&edits);
        let leaves = before.leaves();
        let mut asked: Vec<RevId> = picks.iter().map(|p| leaves[p.index(leaves.len())].rev.clone()).collect();
        // Revisions that are not leaves, known or not, are never purged.
        let all: Vec<RevId> = before.revs().cloned().collect();
        let inner = all[interior.index(all.len())].clone();
        asked.push(inner.clone());
        asked.push(RevId::new(2, RevHash::parse("never-seen")).unwrap());
        let asked_leaves: BTreeSet<RevId> = leaves.iter().map(|l| l.rev.clone()).filter(|r| asked.contains(r)).collect();

        let mut tree = before.clone();
        let outcome = tree.purge_leaves(&asked);

        // Exactly the requested leaves are reported, in CouchDB's order.
        prop_assert_eq!(outcome.purged.iter().cloned().collect::<BTreeSet<_>>(), asked_leaves.clone());
        prop_assert!(outcome.purged.windows(2).all(|w| w[0] < w[1]));
        // The other leaves stay, each with its whole history and flags.
        let staying: Vec<_> = leaves.iter().filter(|l| !asked_leaves.contains(&l.rev)).cloned().collect();
        let mut now = tree.leaves();
        now.sort_by(|a, b| a.rev.cmp(&b.rev));
        let mut expected = staying.clone();
        expected.sort_by(|a, b| a.rev.cmp(&b.rev));
        prop_assert_eq!(now, expected);
        for leaf in &staying {
            prop_assert_eq!(tree.history(&leaf.rev), before.history(&leaf.rev));
            for (rev, status) in before.revs_info(&leaf.rev).unwrap() {
                prop_assert_eq!(tree.revs_info(&rev).map(|i| i[0].1), Some(status));
            }
        }
        // No orphan: every revision left is a remaining leaf or above one,
        // and the removed ones are exactly the rest.
        for rev in tree.revs() {
            prop_assert!(!tree.latest(rev).is_empty(), "{rev} is an orphan");
        }
        let removed: BTreeSet<RevId> = outcome.removed.iter().cloned().collect();
        let gone: BTreeSet<RevId> = before.revs().filter(|r| !tree.contains(r)).cloned().collect();
        prop_assert_eq!(&removed, &gone);
        prop_assert!(asked_leaves.is_subset(&removed));
        let under_a_staying_leaf = before.latest(&inner).iter().any(|l| !asked_leaves.contains(&l.rev));
        prop_assert_eq!(tree.contains(&inner), under_a_staying_leaf);
        // What CouchDB's remove_leafs builds: the remaining leaves' paths, merged.
        let rebuilt = merge_all(&staying.iter().map(|l| (before.history(&l.rev).unwrap(), LeafState { deleted: l.deleted, available: l.available })).collect::<Vec<_>>());
        prop_assert_eq!(tree.revs().collect::<Vec<_>>(), rebuilt.revs().collect::<Vec<_>>());
        for rev in tree.revs() {
            prop_assert_eq!(tree.parent(rev), rebuilt.parent(rev));
        }
        // The winner is recomputed among what is left; nothing left, no document.
        let best = staying.iter().max_by(|a, b| (!a.deleted, &a.rev).cmp(&(!b.deleted, &b.rev))).cloned();
        prop_assert_eq!(tree.winner(), best);
        prop_assert_eq!(tree.is_empty(), staying.is_empty());
        prop_assert_eq!(RevTree::decode(&tree.encode()).unwrap(), tree.clone());
        // Purging again changes nothing.
        let again = tree.clone();
        prop_assert_eq!(tree.purge_leaves(&asked), revtree::Purged::default());
        prop_assert_eq!(tree, again);
    }

    #[test]
    fn the_encoding_round_trips((_, edits) in universe_and_edits(), limit in 1u32..5) {
        let mut tree = merge_all(&edits);
        prop_assert_eq!(RevTree::decode(&tree.encode()).unwrap(), tree.clone());
        tree.stem(limit);
        prop_assert_eq!(RevTree::decode(&tree.encode()).unwrap(), tree);
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let _ = RevTree::decode(&bytes);
        let mut framed = vec![revtree::FORMAT_V1];
        framed.extend(bytes);
        let _ = RevTree::decode(&framed);
    }
}
