//! The revision tree of one document (CouchDB's key tree).
//!
//! A tree is a forest: stemming cuts old history, and unrelated histories of
//! the same document id may meet during replication. Internally it is a set of
//! nodes keyed by revision id, each knowing its parent when that is known. A
//! merge is the union of nodes and parent links; that union is what makes
//! merging order-independent and idempotent (the laws the property tests check).

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::{RevHash, RevId, RevPath};

/// What a revision node knows besides its id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Node {
    /// The parent's hash (its position is ours minus one); `None` for a root,
    /// whose older history is unknown or was stemmed.
    pub(crate) parent: Option<RevHash>,
    /// Whether this revision is a deletion (tombstone).
    pub(crate) deleted: bool,
    /// Whether the store holds this revision's body.
    pub(crate) available: bool,
}

/// The state of the newest revision of a merged path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeafState {
    pub deleted: bool,
    pub available: bool,
}

/// What a merge added to the tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeOutcome {
    /// The path's revision is new and extends an existing leaf (or the tree was empty).
    NewLeaf,
    /// The path's revision is new and starts a new branch: it hangs off an
    /// interior revision, or off no known revision at all (a conflict).
    NewBranch,
    /// The revision was known, but the merge taught the tree older history or
    /// a revision's body or deletion.
    Internal,
    /// Nothing new.
    AlreadyPresent,
}

/// Why an interactive edit (`new_edits=true`) was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// CouchDB's 409 `conflict`: the named parent is not a leaf, or a live
    /// document was "created" again, or a deleted one was edited by revision.
    #[error("Document update conflict.")]
    Conflict,
    /// The parent is at the highest position a revision can have, so no
    /// child can be numbered (CouchDB would need a bignum; we answer 400).
    #[error("the revision position cannot grow past 9223372036854775807")]
    PositionOverflow,
}

/// A leaf of the tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leaf {
    pub rev: RevId,
    pub deleted: bool,
    pub available: bool,
}

/// A revision's status as `?revs_info=true` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RevStatus {
    Available,
    Missing,
    Deleted,
}

impl RevStatus {
    /// The word CouchDB uses on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            RevStatus::Available => "available",
            RevStatus::Missing => "missing",
            RevStatus::Deleted => "deleted",
        }
    }
}

/// The answer to `_revs_diff` for one document.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RevsDiff {
    /// Requested revisions the tree does not hold, in request order.
    pub missing: Vec<RevId>,
    /// Leaves older than the newest missing revision: bases the sender may
    /// use for attachment stubs (`atts_since`).
    pub possible_ancestors: Vec<RevId>,
}

/// The revision tree of one document.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RevTree {
    pub(crate) nodes: BTreeMap<RevId, Node>,
}

/// What [`RevTree::purge_leaves`] took out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Purged {
    /// The requested leaves that were purged, in CouchDB's order of
    /// revisions (position, then hash bytes): what `_purge` answers.
    pub purged: Vec<RevId>,
    /// Every revision removed (the purged leaves and the branches only
    /// they used), so the store can drop their bodies.
    pub removed: Vec<RevId>,
}

/// The smallest id at a position: an empty text hash sorts before every real
/// hash, so it bounds range scans over one generation. Never stored.
fn pos_floor(pos: u64) -> RevId {
    RevId::unchecked(pos, RevHash::Text(Box::from("")))
}

/// The sort key of CouchDB's winning-revision rule: live before deleted, then
/// the highest position, then the highest hash.
fn winner_key(leaf: &Leaf) -> (bool, &RevId) {
    (!leaf.deleted, &leaf.rev)
}

impl RevTree {
    pub fn new() -> RevTree {
        RevTree::default()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Number of revisions held.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn contains(&self, rev: &RevId) -> bool {
        self.nodes.contains_key(rev)
    }

    /// Every revision in the tree, in id order.
    pub fn revs(&self) -> impl Iterator<Item = &RevId> {
        self.nodes.keys()
    }

    /// Whether `rev` is a deletion; `None` when the tree lacks it.
    pub fn is_deleted_rev(&self, rev: &RevId) -> Option<bool> {
        self.nodes.get(rev).map(|n| n.deleted)
    }

    /// Whether the body of `rev` is stored; `None` when the tree lacks it.
    pub fn is_available(&self, rev: &RevId) -> Option<bool> {
        self.nodes.get(rev).map(|n| n.available)
    }

    /// Records whether the store still holds `rev`'s body (compaction drops
    /// the bodies of old revisions). Returns false if the tree lacks `rev`.
    pub fn set_available(&mut self, rev: &RevId, available: bool) -> bool {
        match self.nodes.get_mut(rev) {
            Some(node) => {
                node.available = available;
                true
            }
            None => false,
        }
    }

    /// The parent of `rev`, if `rev` is held and its parent is known.
    pub fn parent(&self, rev: &RevId) -> Option<RevId> {
        let node = self.nodes.get(rev)?;
        // A node with a parent is at position 2 or more (merge and decoding
        // both check it), so the parent's position is in range.
        node.parent
            .clone()
            .map(|h| RevId::unchecked(rev.pos - 1, h))
    }

    fn children<'a>(&'a self, rev: &'a RevId) -> impl Iterator<Item = &'a RevId> + 'a {
        self.nodes
            .range(pos_floor(rev.pos + 1)..pos_floor(rev.pos + 2))
            .filter(move |(_, node)| node.parent.as_ref() == Some(&rev.hash))
            .map(|(id, _)| id)
    }

    fn is_leaf(&self, rev: &RevId) -> bool {
        self.children(rev).next().is_none()
    }

    /// Merges one line of history (a document's `_revisions`, or a bare
    /// `_rev`) into the tree; `leaf` describes the path's newest revision.
    ///
    /// Laws (property-tested): merging a set of paths gives the same tree in
    /// any order, and merging a path twice changes nothing the second time.
    /// Parent links only ever go from unknown to known; if two paths disagree
    /// about a revision's parent (impossible with honest peers), the smaller
    /// parent id wins so that the result still does not depend on order.
    pub fn merge(&mut self, path: &RevPath, leaf: LeafState) -> MergeOutcome {
        let leaf_rev = path.leaf();
        let was_empty = self.is_empty();
        let leaf_existed = self.contains(&leaf_rev);
        let attach_was_leaf = if leaf_existed {
            false
        } else {
            path.revs()
                .skip(1)
                .find(|rev| self.contains(rev))
                .is_some_and(|rev| self.is_leaf(&rev))
        };

        let mut changed = false;
        let ids = path.ids();
        for (i, rev) in path.revs().enumerate() {
            let parent = ids.get(i + 1).cloned();
            let state = if i == 0 { leaf } else { LeafState::default() };
            match self.nodes.get_mut(&rev) {
                Some(node) => {
                    let joined = join_parent(node.parent.clone(), parent);
                    let deleted = node.deleted || state.deleted;
                    let available = node.available || state.available;
                    changed |= joined != node.parent
                        || deleted != node.deleted
                        || available != node.available;
                    *node = Node {
                        parent: joined,
                        deleted,
                        available,
                    };
                }
                None => {
                    self.nodes.insert(
                        rev,
                        Node {
                            parent,
                            deleted: state.deleted,
                            available: state.available,
                        },
                    );
                    changed = true;
                }
            }
        }

        if !leaf_existed {
            if was_empty || attach_was_leaf {
                MergeOutcome::NewLeaf
            } else {
                MergeOutcome::NewBranch
            }
        } else if changed {
            MergeOutcome::Internal
        } else {
            MergeOutcome::AlreadyPresent
        }
    }

    /// The revision an interactive edit (`new_edits=true`) builds on, with
    /// CouchDB's rules:
    /// - `requested` must name a leaf (live or deleted) of a document that is
    ///   not deleted as a whole;
    /// - without `requested`, a new document is created (`None`), or a deleted
    ///   document is re-created (not as a deletion) on top of its winning
    ///   tombstone, so the tree does not grow a new root;
    /// - anything else is a conflict.
    pub fn edit_parent(
        &self,
        requested: Option<&RevId>,
        deleting: bool,
    ) -> Result<Option<RevId>, EditError> {
        let doc_deleted = self.is_deleted();
        match requested {
            Some(rev) => {
                if !self.contains(rev) || !self.is_leaf(rev) || doc_deleted {
                    return Err(EditError::Conflict);
                }
                Ok(Some(rev.clone()))
            }
            None if self.is_empty() => Ok(None),
            None if doc_deleted && !deleting => Ok(self.winner().map(|leaf| leaf.rev)),
            None => Err(EditError::Conflict),
        }
    }

    /// Adds a new revision as an interactive edit on the parent that
    /// [`RevTree::edit_parent`] chooses. `hash_for` receives that effective
    /// parent and returns the new revision's hash (see
    /// [`crate::new_rev_hash`]), so the id covers the real parent.
    pub fn new_edit(
        &mut self,
        requested: Option<&RevId>,
        deleted: bool,
        hash_for: impl FnOnce(Option<&RevId>) -> RevHash,
    ) -> Result<RevId, EditError> {
        let base = self.edit_parent(requested, deleted)?;
        let hash = hash_for(base.as_ref());
        let new_rev = match &base {
            None => RevId::unchecked(1, hash),
            Some(base) => base.child(hash).ok_or(EditError::PositionOverflow)?,
        };
        if self.contains(&new_rev) {
            return Err(EditError::Conflict);
        }
        self.nodes.insert(
            new_rev.clone(),
            Node {
                parent: base.map(|b| b.hash),
                deleted,
                available: true,
            },
        );
        Ok(new_rev)
    }

    /// All leaves, winner first, then in CouchDB's order (live before
    /// deleted, higher position first, higher hash first).
    pub fn leaves(&self) -> Vec<Leaf> {
        let parents: HashSet<(u64, &RevHash)> = self
            .nodes
            .iter()
            .filter_map(|(rev, node)| node.parent.as_ref().map(|p| (rev.pos - 1, p)))
            .collect();
        let mut leaves: Vec<Leaf> = self
            .nodes
            .iter()
            .filter(|(rev, _)| !parents.contains(&(rev.pos, &rev.hash)))
            .map(|(rev, node)| Leaf {
                rev: rev.clone(),
                deleted: node.deleted,
                available: node.available,
            })
            .collect();
        leaves.sort_by(|a, b| winner_key(b).cmp(&winner_key(a)));
        leaves
    }

    /// The winning revision: CouchDB's deterministic choice, so every replica
    /// of the same tree shows the same document.
    pub fn winner(&self) -> Option<Leaf> {
        self.leaves().into_iter().next()
    }

    /// Whether the document as a whole is deleted (its winner is a tombstone).
    /// An empty tree is not deleted: it does not exist.
    pub fn is_deleted(&self) -> bool {
        self.winner().is_some_and(|w| w.deleted)
    }

    /// Live leaves other than the winner (`_conflicts`).
    pub fn conflicts(&self) -> Vec<RevId> {
        self.leaves()
            .into_iter()
            .skip(1)
            .filter(|l| !l.deleted)
            .map(|l| l.rev)
            .collect()
    }

    /// Deleted leaves other than the winner (`_deleted_conflicts`).
    pub fn deleted_conflicts(&self) -> Vec<RevId> {
        self.leaves()
            .into_iter()
            .skip(1)
            .filter(|l| l.deleted)
            .map(|l| l.rev)
            .collect()
    }

    /// `rev` and its known ancestors, newest first (`_revisions`).
    pub fn history(&self, rev: &RevId) -> Option<RevPath> {
        let mut ids = vec![rev.hash.clone()];
        let mut node = self.nodes.get(rev)?;
        let mut pos = rev.pos;
        while let Some(parent) = &node.parent {
            pos -= 1;
            ids.push(parent.clone());
            match self.nodes.get(&RevId::unchecked(pos, parent.clone())) {
                Some(next) => node = next,
                None => break,
            }
        }
        RevPath::new(rev.pos, ids).ok()
    }

    /// `rev` and its ancestors with their status, newest first (`_revs_info`).
    pub fn revs_info(&self, rev: &RevId) -> Option<Vec<(RevId, RevStatus)>> {
        let path = self.history(rev)?;
        Some(
            path.revs()
                .map(|r| {
                    let status = match self.nodes.get(&r) {
                        Some(n) if n.deleted => RevStatus::Deleted,
                        Some(n) if n.available => RevStatus::Available,
                        _ => RevStatus::Missing,
                    };
                    (r, status)
                })
                .collect(),
        )
    }

    /// The leaves that descend from `rev` (itself if it is a leaf), winner
    /// order; empty when the tree lacks `rev` (`latest=true`).
    pub fn latest(&self, rev: &RevId) -> Vec<Leaf> {
        if !self.contains(rev) {
            return Vec::new();
        }
        self.leaves()
            .into_iter()
            .filter(|leaf| self.descends_from(&leaf.rev, rev))
            .collect()
    }

    fn descends_from(&self, rev: &RevId, ancestor: &RevId) -> bool {
        let mut current = rev.clone();
        while current.pos > ancestor.pos {
            match self.parent(&current) {
                Some(parent) => current = parent,
                None => return false,
            }
        }
        &current == ancestor
    }

    /// Which of `revs` this tree lacks, and which leaves could be their
    /// ancestors (`_revs_diff`).
    pub fn revs_diff(&self, revs: &[RevId]) -> RevsDiff {
        let mut seen = HashSet::new();
        let missing: Vec<RevId> = revs
            .iter()
            .filter(|rev| !self.contains(rev) && seen.insert(*rev))
            .cloned()
            .collect();
        let Some(max_missing) = missing.iter().map(|r| r.pos).max() else {
            return RevsDiff::default();
        };
        let mut possible_ancestors: Vec<RevId> = self
            .leaves()
            .into_iter()
            .filter(|leaf| leaf.rev.pos < max_missing)
            .map(|leaf| leaf.rev)
            .collect();
        possible_ancestors.sort();
        RevsDiff {
            missing,
            possible_ancestors,
        }
    }

    /// Purges leaves (`POST /db/_purge`), as CouchDB's `remove_leafs`: each
    /// requested leaf goes with its branch up to where that branch joins a
    /// leaf that stays; every other revision keeps its history. Requested
    /// revisions that are not leaves are left alone. Purging every leaf
    /// empties the tree (the document is gone). Nothing becomes a new leaf,
    /// so the winner is again one of the remaining leaves.
    pub fn purge_leaves(&mut self, revs: &[RevId]) -> Purged {
        let requested: HashSet<&RevId> = revs.iter().collect();
        let (gone, staying): (Vec<Leaf>, Vec<Leaf>) = self
            .leaves()
            .into_iter()
            .partition(|leaf| requested.contains(&leaf.rev));
        if gone.is_empty() {
            return Purged::default();
        }
        let mut purged: Vec<RevId> = gone.into_iter().map(|leaf| leaf.rev).collect();
        purged.sort();
        // What stays: the remaining leaves and everything above them.
        let mut kept: HashSet<RevId> = HashSet::new();
        for leaf in staying {
            let mut current = Some(leaf.rev);
            while let Some(rev) = current {
                if !kept.insert(rev.clone()) {
                    break;
                }
                current = self.parent(&rev).filter(|p| self.contains(p));
            }
        }
        let removed: Vec<RevId> = self
            .nodes
            .keys()
            .filter(|rev| !kept.contains(*rev))
            .cloned()
            .collect();
        for rev in &removed {
            self.nodes.remove(rev);
        }
        Purged { purged, removed }
    }

    /// Cuts history so that only revisions within `limit` generations of some
    /// leaf remain (`_revs_limit`); a limit of 0 counts as 1. Never drops a
    /// leaf. Revisions whose parent is cut become roots. Returns the removed
    /// revisions, so the store can drop their bodies.
    pub fn stem(&mut self, limit: u32) -> Vec<RevId> {
        let limit = limit.max(1) as u64;
        // No chain can be longer than the whole tree: nothing to cut.
        if self.nodes.len() as u64 <= limit {
            return Vec::new();
        }
        // For each kept revision, the most generations still allowed above it.
        let mut budget: HashMap<RevId, u64> = HashMap::new();
        for leaf in self.leaves() {
            let mut current = Some(leaf.rev);
            let mut left = limit;
            while let Some(rev) = current {
                if left == 0 || budget.get(&rev).is_some_and(|&b| b >= left) {
                    break;
                }
                budget.insert(rev.clone(), left);
                left -= 1;
                current = self.parent(&rev);
            }
        }
        let removed: Vec<RevId> = self
            .nodes
            .keys()
            .filter(|rev| !budget.contains_key(*rev))
            .cloned()
            .collect();
        for rev in &removed {
            self.nodes.remove(rev);
        }
        let orphans: Vec<RevId> = self
            .nodes
            .iter()
            .filter(|(rev, node)| {
                node.parent.as_ref().is_some_and(|p| {
                    !budget.contains_key(&RevId::unchecked(rev.pos - 1, p.clone()))
                })
            })
            .map(|(rev, _)| rev.clone())
            .collect();
        for rev in orphans {
            if let Some(node) = self.nodes.get_mut(&rev) {
                node.parent = None;
            }
        }
        removed
    }
}

/// Parent knowledge only grows: unknown < known, and of two different known
/// parents the smaller id wins (a total, commutative, idempotent choice).
fn join_parent(a: Option<RevHash>, b: Option<RevHash>) -> Option<RevHash> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(s: &str) -> RevId {
        RevId::parse(s).unwrap()
    }

    /// `"3-c 2-b 1-a"`: a path written newest first.
    fn path(s: &str) -> RevPath {
        let revs: Vec<RevId> = s.split_whitespace().map(rev).collect();
        RevPath::new(revs[0].pos, revs.into_iter().map(|r| r.hash).collect()).unwrap()
    }

    const LIVE: LeafState = LeafState {
        deleted: false,
        available: true,
    };
    const DEAD: LeafState = LeafState {
        deleted: true,
        available: true,
    };

    fn tree(paths: &[(&str, LeafState)]) -> RevTree {
        let mut t = RevTree::new();
        for (p, state) in paths {
            t.merge(&path(p), *state);
        }
        t
    }

    fn revs(list: &[RevId]) -> Vec<String> {
        list.iter().map(ToString::to_string).collect()
    }

    fn leaf_revs(t: &RevTree) -> Vec<String> {
        t.leaves().iter().map(|l| l.rev.to_string()).collect()
    }

    #[test]
    fn merging_into_an_empty_tree_adds_a_new_leaf() {
        let mut t = RevTree::new();
        assert_eq!(t.merge(&path("2-b 1-a"), LIVE), MergeOutcome::NewLeaf);
        assert_eq!(t.len(), 2);
        assert_eq!(leaf_revs(&t), ["2-b"]);
    }

    #[test]
    fn extending_a_leaf_is_a_new_leaf_and_a_sibling_is_a_new_branch() {
        let mut t = tree(&[("2-b 1-a", LIVE)]);
        assert_eq!(t.merge(&path("3-c 2-b 1-a"), LIVE), MergeOutcome::NewLeaf);
        assert_eq!(t.merge(&path("2-x 1-a"), LIVE), MergeOutcome::NewBranch);
        assert_eq!(leaf_revs(&t), ["3-c", "2-x"]);
        assert_eq!(revs(&t.conflicts()), ["2-x"]);
    }

    #[test]
    fn merging_a_known_path_again_changes_nothing() {
        let mut t = tree(&[("3-c 2-b 1-a", LIVE)]);
        let before = t.clone();
        assert_eq!(
            t.merge(&path("3-c 2-b 1-a"), LIVE),
            MergeOutcome::AlreadyPresent
        );
        assert_eq!(
            t.merge(&path("2-b 1-a"), LeafState::default()),
            MergeOutcome::AlreadyPresent
        );
        assert_eq!(t, before);
    }

    #[test]
    fn older_history_for_a_stemmed_tree_is_internal_and_reconnects_the_root() {
        let mut t = tree(&[("4-d 3-c", LIVE)]);
        assert_eq!(t.parent(&rev("3-c")), None);
        assert_eq!(
            t.merge(&path("4-d 3-c 2-b 1-a"), LIVE),
            MergeOutcome::Internal
        );
        assert_eq!(t.history(&rev("4-d")).unwrap(), path("4-d 3-c 2-b 1-a"));
        assert_eq!(leaf_revs(&t), ["4-d"]);
    }

    #[test]
    fn an_unrelated_history_becomes_a_second_root() {
        let mut t = tree(&[("2-b 1-a", LIVE)]);
        assert_eq!(t.merge(&path("2-y 1-x"), LIVE), MergeOutcome::NewBranch);
        let roots = t.revs().filter(|r| t.parent(r).is_none()).count();
        assert_eq!(roots, 2);
        assert_eq!(leaf_revs(&t), ["2-y", "2-b"]);
    }

    #[test]
    fn paths_that_meet_only_in_the_middle_are_joined() {
        // Two stemmed views of one history, then the full one: a single tree.
        let mut t = tree(&[("3-c 2-b", LIVE), ("2-b 1-a", LIVE)]);
        assert_eq!(leaf_revs(&t), ["3-c"]);
        assert_eq!(t.history(&rev("3-c")).unwrap(), path("3-c 2-b 1-a"));
        t.merge(&path("3-z 2-b"), LIVE);
        assert_eq!(revs(&t.conflicts()), ["3-c"]);
    }

    #[test]
    fn the_winner_prefers_live_leaves_then_position_then_hash() {
        // A deleted leaf loses to a live one even when it is longer.
        let t = tree(&[("3-z 2-b 1-a", DEAD), ("2-c 1-a", LIVE)]);
        assert_eq!(t.winner().unwrap().rev, rev("2-c"));
        assert_eq!(revs(&t.deleted_conflicts()), ["3-z"]);
        assert!(t.conflicts().is_empty());
        // Among live leaves the longer wins.
        let t = tree(&[("3-a 2-b 1-a", LIVE), ("2-z 1-a", LIVE)]);
        assert_eq!(t.winner().unwrap().rev, rev("3-a"));
        // Same position: the higher hash wins.
        let t = tree(&[("2-b 1-a", LIVE), ("2-c 1-a", LIVE)]);
        assert_eq!(t.winner().unwrap().rev, rev("2-c"));
        // Everything deleted: the document is deleted; winner by position.
        let t = tree(&[("2-b 1-a", DEAD), ("3-c 2-x 1-a", DEAD)]);
        assert!(t.is_deleted());
        assert_eq!(t.winner().unwrap().rev, rev("3-c"));
    }

    #[test]
    fn couchdb_compares_md5_hashes_as_bytes_for_the_winner() {
        let high = "2-ffffffffffffffffffffffffffffffff";
        let t = tree(&[(&format!("{high} 1-a"), LIVE), ("2-zzz 1-a", LIVE)]);
        // 0xff > b'z' (0x7a): the decoded md5 wins, though "f" < "z" as text.
        assert_eq!(t.winner().unwrap().rev, rev(high));
    }

    #[test]
    fn an_edit_must_name_a_leaf() {
        let mut t = RevTree::new();
        let hash = |h: &str| RevHash::parse(h);
        let one = t.new_edit(None, false, |p| {
            assert!(p.is_none());
            hash("a")
        });
        assert_eq!(one, Ok(rev("1-a")));
        assert_eq!(
            t.new_edit(None, false, |_| hash("b")),
            Err(EditError::Conflict)
        );
        let two = t.new_edit(Some(&rev("1-a")), false, |p| {
            assert_eq!(p, Some(&rev("1-a")));
            hash("b")
        });
        assert_eq!(two, Ok(rev("2-b")));
        assert_eq!(
            t.new_edit(Some(&rev("1-a")), false, |_| hash("c")),
            Err(EditError::Conflict)
        );
        assert_eq!(
            t.new_edit(Some(&rev("2-zz")), false, |_| hash("c")),
            Err(EditError::Conflict)
        );
        assert_eq!(leaf_revs(&t), ["2-b"]);
        assert!(t.is_available(&rev("2-b")).unwrap());
    }

    #[test]
    fn an_edit_of_a_missing_document_by_revision_is_a_conflict() {
        let mut t = RevTree::new();
        let r = t.new_edit(Some(&rev("1-a")), false, |_| RevHash::parse("b"));
        assert_eq!(r, Err(EditError::Conflict));
        assert!(t.is_empty());
    }

    #[test]
    fn deleting_then_recreating_extends_the_winning_tombstone() {
        let mut t = RevTree::new();
        let h = |s: &str| RevHash::parse(s);
        t.new_edit(None, false, |_| h("a")).unwrap();
        t.new_edit(Some(&rev("1-a")), true, |_| h("b")).unwrap();
        assert!(t.is_deleted());
        // Editing the tombstone by its revision is a conflict, as in CouchDB.
        assert_eq!(
            t.new_edit(Some(&rev("2-b")), false, |_| h("x")),
            Err(EditError::Conflict)
        );
        // Deleting again without a revision is a conflict too.
        assert_eq!(t.new_edit(None, true, |_| h("x")), Err(EditError::Conflict));
        // Re-creation without a revision hangs off the tombstone.
        let mut seen_parent = None;
        let new = t
            .new_edit(None, false, |p| {
                seen_parent = p.cloned();
                h("c")
            })
            .unwrap();
        assert_eq!(seen_parent, Some(rev("2-b")));
        assert_eq!(new, rev("3-c"));
        assert!(!t.is_deleted());
        assert_eq!(t.history(&new).unwrap(), path("3-c 2-b 1-a"));
        assert_eq!(
            t.new_edit(None, false, |_| h("d")),
            Err(EditError::Conflict)
        );
    }

    #[test]
    fn a_deleted_losing_leaf_of_a_live_document_can_be_edited() {
        let mut t = tree(&[("2-b 1-a", DEAD), ("2-c 1-a", LIVE)]);
        let new = t.new_edit(Some(&rev("2-b")), false, |_| RevHash::parse("d"));
        assert_eq!(new, Ok(rev("3-d")));
        assert_eq!(t.winner().unwrap().rev, rev("3-d"));
    }

    #[test]
    fn resolving_a_conflict_by_deleting_the_loser() {
        let mut t = tree(&[("2-b 1-a", LIVE), ("2-c 1-a", LIVE)]);
        assert_eq!(revs(&t.conflicts()), ["2-b"]);
        t.new_edit(Some(&rev("2-b")), true, |_| RevHash::parse("x"))
            .unwrap();
        assert!(t.conflicts().is_empty());
        assert_eq!(revs(&t.deleted_conflicts()), ["3-x"]);
        assert_eq!(t.winner().unwrap().rev, rev("2-c"));
        assert!(!t.is_deleted());
    }

    #[test]
    fn revs_info_reports_available_missing_and_deleted() {
        let mut t = tree(&[("1-a", LIVE), ("3-c 2-b 1-a", DEAD)]);
        t.set_available(&rev("1-a"), false);
        t.merge(&path("2-b 1-a"), LIVE);
        let info = t.revs_info(&rev("3-c")).unwrap();
        let shown: Vec<(String, &str)> = info
            .iter()
            .map(|(r, s)| (r.to_string(), s.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                ("3-c".to_string(), "deleted"),
                ("2-b".to_string(), "available"),
                ("1-a".to_string(), "missing")
            ]
        );
        assert!(t.revs_info(&rev("9-z")).is_none());
    }

    #[test]
    fn latest_finds_the_leaves_below_a_revision() {
        let t = tree(&[
            ("3-c 2-b 1-a", LIVE),
            ("3-d 2-b 1-a", LIVE),
            ("2-x 1-a", LIVE),
        ]);
        let names = |v: Vec<Leaf>| v.into_iter().map(|l| l.rev.to_string()).collect::<Vec<_>>();
        assert_eq!(names(t.latest(&rev("2-b"))), ["3-d", "3-c"]);
        assert_eq!(names(t.latest(&rev("1-a"))), ["3-d", "3-c", "2-x"]);
        assert_eq!(names(t.latest(&rev("2-x"))), ["2-x"]);
        assert!(t.latest(&rev("2-nope")).is_empty());
    }

    #[test]
    fn revs_diff_lists_missing_revisions_and_possible_ancestors() {
        let t = tree(&[
            ("3-c 2-b 1-a", LIVE),
            ("2-x 1-a", LIVE),
            ("5-e 4-d 3-c 2-b 1-a", DEAD),
        ]);
        let diff = t.revs_diff(&[rev("3-c"), rev("4-new"), rev("4-new"), rev("2-y")]);
        assert_eq!(revs(&diff.missing), ["4-new", "2-y"]);
        // Leaves with a position below the highest missing one (4).
        assert_eq!(revs(&diff.possible_ancestors), ["2-x"]);
        let none = t.revs_diff(&[rev("1-a"), rev("5-e")]);
        assert_eq!(none, RevsDiff::default());
        let all = RevTree::new().revs_diff(&[rev("1-a")]);
        assert_eq!(revs(&all.missing), ["1-a"]);
        assert!(all.possible_ancestors.is_empty());
    }

    #[test]
    fn purging_a_leaf_takes_its_branch_up_to_the_fork() {
        let mut t = tree(&[
            ("4-d 3-c 2-b 1-a", LIVE),
            ("3-x 2-b 1-a", LIVE),
            ("2-y 1-a", DEAD),
        ]);
        // A non-leaf and an unknown revision are ignored.
        let out = t.purge_leaves(&[rev("4-d"), rev("2-b"), rev("9-z")]);
        assert_eq!(revs(&out.purged), ["4-d"]);
        assert_eq!(revs(&out.removed), ["3-c", "4-d"]);
        assert_eq!(leaf_revs(&t), ["3-x", "2-y"]);
        assert_eq!(t.history(&rev("3-x")).unwrap(), path("3-x 2-b 1-a"));
        // The deleted branch goes alone; the fork point stays for 3-x.
        let out = t.purge_leaves(&[rev("2-y")]);
        assert_eq!(revs(&out.removed), ["2-y"]);
        assert_eq!(leaf_revs(&t), ["3-x"]);
        // The last leaf takes the whole tree with it.
        let out = t.purge_leaves(&[rev("3-x")]);
        assert_eq!(revs(&out.purged), ["3-x"]);
        assert_eq!(revs(&out.removed), ["1-a", "2-b", "3-x"]);
        assert!(t.is_empty() && t.winner().is_none());
    }

    #[test]
    fn purging_the_winner_makes_the_best_remaining_leaf_win() {
        let mut t = tree(&[("3-c 2-b 1-a", LIVE), ("2-x 1-a", DEAD)]);
        let out = t.purge_leaves(&[rev("3-c"), rev("3-c")]);
        assert_eq!(revs(&out.purged), ["3-c"]);
        let winner = t.winner().unwrap();
        assert_eq!((winner.rev, winner.deleted), (rev("2-x"), true));
        assert!(t.is_deleted());
        assert_eq!(t.purge_leaves(&[rev("3-c")]), Purged::default());
    }

    #[test]
    fn stemming_keeps_the_newest_generations_of_each_branch() {
        let mut t = tree(&[("5-e 4-d 3-c 2-b 1-a", LIVE)]);
        assert_eq!(revs(&t.stem(3)), ["1-a", "2-b"]);
        assert_eq!(t.history(&rev("5-e")).unwrap(), path("5-e 4-d 3-c"));
        assert_eq!(t.parent(&rev("3-c")), None);

        // A short branch keeps its fork point alive for its own sake.
        let mut t = tree(&[("5-e 4-d 3-c 2-b 1-a", LIVE), ("2-x 1-a", LIVE)]);
        t.stem(2);
        assert_eq!(leaf_revs(&t), ["5-e", "2-x"]);
        assert_eq!(t.history(&rev("5-e")).unwrap(), path("5-e 4-d"));
        assert_eq!(t.history(&rev("2-x")).unwrap(), path("2-x 1-a"));
        assert!(!t.contains(&rev("2-b")) && !t.contains(&rev("3-c")));
    }

    #[test]
    fn stemming_never_drops_a_leaf_even_at_limit_zero() {
        let mut t = tree(&[("3-c 2-b 1-a", LIVE), ("2-x 1-a", DEAD)]);
        t.stem(0);
        assert_eq!(leaf_revs(&t), ["3-c", "2-x"]);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn a_stemmed_tree_rejoins_when_the_full_history_is_merged_again() {
        let mut t = tree(&[("4-d 3-c 2-b 1-a", LIVE)]);
        t.stem(2);
        t.merge(&path("5-e 4-d 3-c 2-b 1-a"), LIVE);
        assert_eq!(t.history(&rev("5-e")).unwrap(), path("5-e 4-d 3-c 2-b 1-a"));
    }

    #[test]
    fn disagreeing_parents_resolve_the_same_way_in_any_order() {
        let a = tree(&[("3-c 2-b 1-a", LIVE), ("3-c 2-z 1-a", LIVE)]);
        let b = tree(&[("3-c 2-z 1-a", LIVE), ("3-c 2-b 1-a", LIVE)]);
        assert_eq!(a, b);
        assert_eq!(a.parent(&rev("3-c")), Some(rev("2-b")));
    }

    #[test]
    fn the_encoding_round_trips_and_is_canonical() {
        let mut t = tree(&[
            ("3-c 2-b 1-a", LIVE),
            ("2-0123456789abcdef0123456789abcdef 1-a", DEAD),
            ("7-x 6-y", LIVE),
        ]);
        t.set_available(&rev("1-a"), false);
        let bytes = t.encode();
        assert_eq!(bytes[0], crate::FORMAT_V1);
        assert_eq!(RevTree::decode(&bytes).unwrap(), t);
        let again = tree(&[
            ("7-x 6-y", LIVE),
            ("2-0123456789abcdef0123456789abcdef 1-a", DEAD),
            ("3-c 2-b 1-a", LIVE),
        ]);
        let mut again = again;
        again.set_available(&rev("1-a"), false);
        assert_eq!(again.encode(), bytes);
    }

    #[test]
    fn corrupt_encodings_are_errors_not_panics() {
        let t = tree(&[("3-c 2-b 1-a", LIVE), ("2-x 1-a", DEAD)]);
        let bytes = t.encode();
        for cut in 0..bytes.len() {
            assert!(
                RevTree::decode(&bytes[..cut]).is_err(),
                "truncated at {cut}"
            );
        }
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(RevTree::decode(&extra).is_err());
        let mut format = bytes.clone();
        format[0] = 99;
        assert!(RevTree::decode(&format).is_err());
        assert!(RevTree::decode(&[crate::FORMAT_V1, 0]).unwrap().is_empty());
    }
}
