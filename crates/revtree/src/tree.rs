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

/// The smallest id at a position: an empty text hash sorts before every real
/// hash, so it bounds range scans over one generation. Never stored.
fn pos_floor(pos: u64) -> RevId {
    RevId::new(pos, RevHash::Text(Box::from("")))
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
        node.parent.clone().map(|h| RevId::new(rev.pos - 1, h))
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

    /// Adds a new revision as an interactive edit (`new_edits=true`), with
    /// CouchDB's rules:
    /// - `parent` must name a leaf (live or deleted) of a document that is not
    ///   deleted as a whole;
    /// - without `parent`, a new document is created, or a deleted document is
    ///   re-created (not as a deletion) on top of its winning tombstone, so the
    ///   tree does not grow a new root;
    /// - anything else is a conflict.
    ///
    /// `hash_for` receives the effective parent and returns the new revision's
    /// hash (see [`crate::new_rev_hash`]), so the id covers the real parent.
    pub fn new_edit(
        &mut self,
        parent: Option<&RevId>,
        deleted: bool,
        hash_for: impl FnOnce(Option<&RevId>) -> RevHash,
    ) -> Result<RevId, EditError> {
        let doc_deleted = self.is_deleted();
        let base = match parent {
            Some(rev) => {
                if !self.contains(rev) || !self.is_leaf(rev) || doc_deleted {
                    return Err(EditError::Conflict);
                }
                Some(rev.clone())
            }
            None if self.is_empty() => None,
            None if doc_deleted && !deleted => self.winner().map(|leaf| leaf.rev),
            None => return Err(EditError::Conflict),
        };
        let new_rev = RevId::new(
            base.as_ref().map_or(1, |b| b.pos + 1),
            hash_for(base.as_ref()),
        );
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
            match self.nodes.get(&RevId::new(pos, parent.clone())) {
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

    /// Cuts history so that only revisions within `limit` generations of some
    /// leaf remain (`_revs_limit`); a limit of 0 counts as 1. Never drops a
    /// leaf. Revisions whose parent is cut become roots. Returns how many
    /// revisions were removed.
    pub fn stem(&mut self, limit: u32) -> usize {
        let limit = limit.max(1) as u64;
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
        let before = self.nodes.len();
        self.nodes.retain(|rev, _| budget.contains_key(rev));
        let orphans: Vec<RevId> = self
            .nodes
            .iter()
            .filter(|(rev, node)| {
                node.parent
                    .as_ref()
                    .is_some_and(|p| !budget.contains_key(&RevId::new(rev.pos - 1, p.clone())))
            })
            .map(|(rev, _)| rev.clone())
            .collect();
        for rev in orphans {
            if let Some(node) = self.nodes.get_mut(&rev) {
                node.parent = None;
            }
        }
        before - self.nodes.len()
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
