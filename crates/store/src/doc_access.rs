//! Per-document access (`PUT /db?access=true`): each document is for the
//! users its `_access` names (a user name or a role), and for admins.
//!
//! The store keeps the rule's data and applies it to every read:
//! - an access index, written in the same transaction as the document
//!   (see [`maintain`]): for each principal named by a document's winner,
//!   a row at the document's latest sequence; for each principal that
//!   lost it, a row saying so (`gone`) at the sequence it was lost, with
//!   the leaves that principal may still hold;
//! - a handle for one user ([`Database::for_reader`]): every read through
//!   it (documents, revisions, attachments, `_all_docs`, the changes feed,
//!   `_bulk_get`, `_revs_diff`, local documents) shows only what that user
//!   may read, and answers for the rest exactly as for a document that
//!   does not exist.
//!
//! Who is an admin, and what a user may write, is decided by the `access`
//! crate's gate; it opens the handle.
//!
//! **Revocation.** A user removed from a document's `_access` must learn
//! to drop it, with a stock CouchDB client (PouchDB) that knows nothing of
//! access. Their feed shows the document once more, deleted, under a
//! revocation tombstone: a child of each leaf they may hold, with a hash
//! derived from the document id and that leaf ([`revocation_tombstone`]).
//! The client stores it as a deletion and the document disappears from
//! its side. The tombstone never enters this database's tree: a
//! replicated write of one is answered as a success and dropped
//! ([`is_revocation_tombstone`]), and `_revs_diff` tells the user who got
//! it that the database has it, so their client never sends it back.

use std::sync::Arc;

use md5::{Digest, Md5};
use revtree::{RevHash, RevId, RevTree};
use serde_json::{Map, Value};

use crate::backend::{AccessRow, DocRow, ReadRows};
use crate::doc::DocInput;
use crate::writer::WriteCtx;
use crate::{Database, StoreError};

/// The field naming a document's readers and writers.
pub const ACCESS_FIELD: &str = "_access";

use crate::backend::ACCESS_INDEX_META as INDEX_META;

/// Documents re-indexed per write while the index is rebuilt.
const REBUILD_PAGE: usize = 500;

/// The principals a body's `_access` names, without duplicates; `None`
/// when it has no `_access` (an ill-formed one names nobody: the write
/// gate refuses it, see [`check_access_field`]).
pub fn access_list(body: &Map<String, Value>) -> Option<Vec<String>> {
    let list = body.get(ACCESS_FIELD)?;
    let mut out: Vec<String> = Vec::new();
    for entry in list.as_array().map(Vec::as_slice).unwrap_or_default() {
        if let Value::String(name) = entry
            && !out.contains(name)
        {
            out.push(name.clone());
        }
    }
    Some(out)
}

/// `_access`, when present, is a list of user names and roles.
pub fn check_access_field(body: &Map<String, Value>) -> Result<(), StoreError> {
    match body.get(ACCESS_FIELD) {
        None => Ok(()),
        Some(Value::Array(list)) if list.iter().all(Value::is_string) => Ok(()),
        Some(_) => Err(StoreError::bad_request(
            "`_access` must be a list of user names and roles",
        )),
    }
}

/// The deleted revision a user who lost a document is given in place of
/// `leaf`: its child, with a hash no edit produces (an md5 over a fixed
/// label, the document id and the leaf), so every server derives the same
/// one and recognizes it. `None` at the highest position.
pub fn revocation_tombstone(id: &str, leaf: &RevId) -> Option<RevId> {
    let mut md5 = Md5::new();
    md5.update(b"recliner revoked\0");
    md5.update(id.as_bytes());
    md5.update(b"\0");
    md5.update(leaf.to_string().as_bytes());
    leaf.child(RevHash::Md5(md5.finalize().into()))
}

/// Whether a replicated write is a revocation tombstone coming back: a
/// deletion whose revision is [`revocation_tombstone`] of its parent.
pub fn is_revocation_tombstone(doc: &DocInput) -> bool {
    if !doc.deleted {
        return false;
    }
    let (Some(id), Some(path)) = (doc.id.as_deref(), doc.replicated_path()) else {
        return false;
    };
    let mut revs = path.revs();
    match (revs.next(), revs.next()) {
        (Some(leaf), Some(parent)) => revocation_tombstone(id, &parent) == Some(leaf),
        _ => false,
    }
}

/// What one user may see of one document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Visibility {
    Readable,
    /// The user lost it: these are the leaves they may hold, each answered
    /// by its [`revocation_tombstone`].
    Revoked(Vec<RevId>),
    /// Nothing: as if it did not exist.
    Hidden,
}

impl Visibility {
    /// A user's view of a document from its access rows: readable when any
    /// of their principals holds it; else lost when one lost it (the latest
    /// loss tells which leaves).
    pub(crate) fn of(rows: &[AccessRow], principals: &[String]) -> Visibility {
        let mine = rows.iter().filter(|r| principals.contains(&r.principal));
        let mut lost: Option<&AccessRow> = None;
        for row in mine {
            match &row.gone {
                None => return Visibility::Readable,
                Some(_) if lost.is_none_or(|l| l.seq < row.seq) => lost = Some(row),
                Some(_) => {}
            }
        }
        match lost.and_then(|row| row.gone.as_deref()) {
            Some(gone) => Visibility::Revoked(parse_gone(gone)),
            None => Visibility::Hidden,
        }
    }

    /// The leaves a user who lost the document may hold.
    pub(crate) fn leaves(&self) -> &[RevId] {
        match self {
            Visibility::Revoked(leaves) => leaves,
            _ => &[],
        }
    }

    /// The tombstones a user who lost the document is given.
    pub(crate) fn tombstones(&self, id: &str) -> Vec<RevId> {
        match self {
            Visibility::Revoked(leaves) => leaves
                .iter()
                .filter_map(|leaf| revocation_tombstone(id, leaf))
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// The leaves of a `gone` column (a JSON array of revision ids).
pub(crate) fn parse_gone(text: &str) -> Vec<RevId> {
    serde_json::from_str::<Vec<String>>(text)
        .unwrap_or_default()
        .iter()
        .filter_map(|rev| RevId::parse(rev).ok())
        .collect()
}

/// A user's view of a document, read in one snapshot with its row.
pub(crate) fn visibility_in(
    rows: &dyn ReadRows,
    id: &str,
    principals: &[String],
) -> Result<(Option<DocRow>, Visibility), StoreError> {
    let Some(row) = rows.doc_row(id)? else {
        return Ok((None, Visibility::Hidden));
    };
    let visibility = Visibility::of(&rows.access_rows(row.key)?, principals);
    Ok((Some(row), visibility))
}

/// Keeps a document's access rows right after a write moved it to `seq`
/// (inside the write's transaction). `previous` is its tree before the
/// write (`None`: a new document); `written_access` the `_access` of the
/// revision this write stored, when it is the winner.
pub(crate) fn maintain(
    ctx: &mut WriteCtx<'_>,
    key: i64,
    seq: u64,
    previous: Option<&RevTree>,
    tree: &RevTree,
    written_access: Option<Option<Vec<String>>>,
) -> Result<(), StoreError> {
    let Some(winner) = tree.winner() else {
        return Ok(());
    };
    let old_rows = match previous {
        Some(_) => ctx.rows.access_rows(key)?,
        None => Vec::new(),
    };
    let held: Vec<String> = old_rows
        .iter()
        .filter(|r| r.gone.is_none())
        .map(|r| r.principal.clone())
        .collect();
    let same_winner = previous
        .and_then(RevTree::winner)
        .is_some_and(|w| w.rev == winner.rev);
    let named = match written_access {
        Some(access) => access,
        None if same_winner => Some(held.clone()),
        None => match ctx.rows.revision_text(key, &winner.rev)? {
            Some(text) => match ejson::from_stored(&text) {
                Ok(Value::Object(body)) => access_list(&body),
                _ => None,
            },
            None => None,
        },
    };
    // A deletion that does not say who sees it reaches those who saw the
    // document, so their replicas delete it too.
    let now = match named {
        Some(list) => list,
        None if winner.deleted => held,
        None => Vec::new(),
    };
    let mut rows: Vec<AccessRow> = now
        .iter()
        .map(|principal| AccessRow {
            principal: principal.clone(),
            seq,
            gone: None,
        })
        .collect();
    for old in old_rows {
        if now.contains(&old.principal) {
            continue;
        }
        if old.gone.is_some() {
            rows.push(old);
            continue;
        }
        let leaves: Vec<String> = previous
            .map(|tree| {
                tree.leaves()
                    .into_iter()
                    .filter(|leaf| !leaf.deleted)
                    .map(|leaf| leaf.rev.to_string())
                    .collect()
            })
            .unwrap_or_default();
        if !leaves.is_empty() {
            rows.push(AccessRow {
                principal: old.principal,
                seq,
                gone: Some(ejson::to_string_of(&leaves).unwrap_or_default()),
            });
        }
    }
    if rows.is_empty() && previous.is_none() {
        return Ok(());
    }
    ctx.rows.set_access_rows(key, &rows)
}

/// The principals a stored winner's body names.
fn named_by(body: Option<&(String, Option<String>)>) -> Vec<String> {
    body.and_then(|(text, _)| match ejson::from_stored(text) {
        Ok(Value::Object(body)) => access_list(&body),
        _ => None,
    })
    .unwrap_or_default()
}

impl Database {
    /// This database, once its access index is whole: a database with
    /// per-document access opened without one (it was lost, or the
    /// database was copied in without it) gets it rebuilt first, from the
    /// documents' winners, so no read of a user sees less, or more, than
    /// the documents say. Who lost what before is not known again.
    pub(crate) async fn with_access_index(self) -> Result<Database, StoreError> {
        if !self.has_doc_access() {
            return Ok(self);
        }
        self.access_index_ready()
            .get_or_try_init(|| async {
                let ready = self
                    .read(|rows| Ok(rows.meta(INDEX_META)?.as_deref() == Some("1")))
                    .await?;
                if !ready {
                    self.rebuild_access_index().await?;
                }
                Ok::<(), StoreError>(())
            })
            .await?;
        Ok(self)
    }

    /// Rebuilds the access index page by page, in order of change: each
    /// document gets rows for what its winner names, at its sequence. A
    /// document written meanwhile is skipped (its write kept its rows).
    async fn rebuild_access_index(&self) -> Result<(), StoreError> {
        tracing::warn!(db = %self.name(), "rebuilding the access index");
        let mut since = 0;
        loop {
            let page = self
                .read(move |rows| {
                    let mut found = Vec::new();
                    rows.changes(since, false, REBUILD_PAGE as u64, true, &mut |id, row| {
                        let winner = row.tree.winner().map(|w| w.rev);
                        let named = named_by(row.winner_body.as_ref());
                        found.push((id, row.key, row.seq, winner, named));
                        Ok(())
                    })?;
                    Ok(found)
                })
                .await?;
            let Some(last) = page.last().map(|(_, _, seq, _, _)| *seq) else {
                break;
            };
            let full = page.len() == REBUILD_PAGE;
            self.write(page.len(), move |ctx| {
                for (id, key, seq, winner, named) in page {
                    let current = ctx
                        .rows
                        .load_doc(&id)?
                        .and_then(|stored| stored.tree.winner().map(|w| w.rev));
                    if current.is_none() || current != winner {
                        continue;
                    }
                    let rows: Vec<AccessRow> = named
                        .into_iter()
                        .map(|principal| AccessRow {
                            principal,
                            seq,
                            gone: None,
                        })
                        .collect();
                    ctx.rows.set_access_rows(key, &rows)?;
                }
                Ok(())
            })
            .await?;
            since = last;
            if !full {
                break;
            }
        }
        self.write(1, |ctx| ctx.rows.set_meta(INDEX_META, "1"))
            .await
    }

    /// Forgets that the access index is whole, for the tests of its
    /// rebuild: the next open rebuilds it.
    #[cfg(feature = "test-hooks")]
    pub async fn forget_access_index(&self) -> Result<(), StoreError> {
        self.write(1, |ctx| {
            let mut after = 0;
            loop {
                let docs = ctx.rows.docs_after(after, 500)?;
                let Some(last) = docs.last().map(|(key, _, _)| *key) else {
                    break;
                };
                for (key, _, _) in docs {
                    ctx.rows.set_access_rows(key, &[])?;
                }
                after = last;
            }
            ctx.rows.set_meta(INDEX_META, "0")
        })
        .await
    }

    /// This database as `principals` (a user's name, then their roles) may
    /// read it; the database itself when it has no per-document access.
    pub fn for_reader(&self, principals: Vec<String>) -> Database {
        if !self.has_doc_access() {
            return self.clone();
        }
        let mut scoped = self.clone();
        scoped.reader = Some(Arc::from(principals));
        scoped
    }

    /// The whole database, for the server's own reads on a user's behalf
    /// (the design documents holding Mango's indexes).
    pub fn unscoped(&self) -> Database {
        let mut whole = self.clone();
        whole.reader = None;
        whole
    }

    /// A document's row in one snapshot, if this handle's reader may read
    /// it (any document for an unscoped handle).
    pub(crate) fn readable_row(
        &self,
        rows: &dyn ReadRows,
        id: &str,
    ) -> Result<Option<DocRow>, StoreError> {
        match &self.reader {
            None => rows.doc_row(id),
            Some(principals) => match visibility_in(rows, id, principals)? {
                (row, Visibility::Readable) => Ok(row),
                _ => Ok(None),
            },
        }
    }

    /// The principals this handle reads for; `None`: everything.
    pub fn reader(&self) -> Option<&[String]> {
        self.reader.as_deref()
    }

    /// What `principals` may see of a document; `None` when it was never
    /// written (for the write gate: a user may create it).
    pub async fn access_of(
        &self,
        id: &str,
        principals: &[String],
    ) -> Result<Option<Visibility>, StoreError> {
        let (id, principals) = (id.to_string(), principals.to_vec());
        self.read(move |rows| {
            let (row, visibility) = visibility_in(rows, &id, &principals)?;
            Ok(row.map(|_| visibility))
        })
        .await
    }

    /// What this handle's reader may see of a document (`Readable` for an
    /// unscoped handle).
    pub async fn visibility(&self, id: &str) -> Result<Visibility, StoreError> {
        let Some(principals) = self.reader.clone() else {
            return Ok(Visibility::Readable);
        };
        let id = id.to_string();
        self.read(move |rows| Ok(visibility_in(rows, &id, &principals)?.1))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(principal: &str, seq: u64, gone: Option<&str>) -> AccessRow {
        AccessRow {
            principal: principal.into(),
            seq,
            gone: gone.map(str::to_string),
        }
    }

    #[test]
    fn a_user_sees_what_any_of_their_principals_holds() {
        let rows = [row("alice", 5, None), row("team", 3, Some(r#"["2-a"]"#))];
        let alice = ["alice".to_string()];
        let team_member = ["bob".to_string(), "team".to_string()];
        let both = ["alice".to_string(), "team".to_string()];
        let stranger = ["carol".to_string()];
        assert_eq!(Visibility::of(&rows, &alice), Visibility::Readable);
        assert_eq!(Visibility::of(&rows, &both), Visibility::Readable);
        assert_eq!(
            Visibility::of(&rows, &team_member),
            Visibility::Revoked(vec![RevId::parse("2-a").unwrap()])
        );
        assert_eq!(Visibility::of(&rows, &stranger), Visibility::Hidden);
    }

    #[test]
    fn the_latest_loss_tells_which_leaves_a_user_holds() {
        let rows = [
            row("team", 3, Some(r#"["2-a"]"#)),
            row("bob", 7, Some(r#"["4-b","3-c"]"#)),
        ];
        let bob = ["bob".to_string(), "team".to_string()];
        let seen = Visibility::of(&rows, &bob);
        assert_eq!(
            seen,
            Visibility::Revoked(vec![
                RevId::parse("4-b").unwrap(),
                RevId::parse("3-c").unwrap()
            ])
        );
        let tombstones = seen.tombstones("doc");
        assert_eq!(tombstones.len(), 2);
        assert_eq!(tombstones[0].pos(), 5);
        assert_eq!(tombstones[1].pos(), 4);
    }

    #[test]
    fn tombstones_are_recognized_and_differ_by_document_and_leaf() {
        let leaf = RevId::parse("3-0123456789abcdef0123456789abcdef").unwrap();
        let a = revocation_tombstone("a", &leaf).unwrap();
        let b = revocation_tombstone("b", &leaf).unwrap();
        assert_ne!(a, b);
        assert_eq!(a.pos(), 4);
        let doc = |rev: &RevId, deleted: bool| {
            let mut body = serde_json::json!({
                "_id": "a",
                "_rev": rev.to_string(),
                "_revisions": {"start": rev.pos(), "ids": [rev.hash().to_string(), leaf.hash().to_string()]},
            });
            if deleted {
                body["_deleted"] = Value::Bool(true);
            }
            DocInput::from_json(body).unwrap()
        };
        assert!(is_revocation_tombstone(&doc(&a, true)));
        assert!(!is_revocation_tombstone(&doc(&a, false)));
        assert!(!is_revocation_tombstone(&doc(&b, true)));
    }

    #[test]
    fn access_lists_are_read_without_duplicates_and_checked() {
        let body = |v: Value| v.as_object().cloned().unwrap();
        assert_eq!(
            access_list(&body(serde_json::json!({"_access": ["a", "b", "a"]}))),
            Some(vec!["a".to_string(), "b".to_string()])
        );
        assert_eq!(access_list(&body(serde_json::json!({"x": 1}))), None);
        assert!(check_access_field(&body(serde_json::json!({"_access": ["a"]}))).is_ok());
        assert!(check_access_field(&body(serde_json::json!({"_access": "a"}))).is_err());
        assert!(check_access_field(&body(serde_json::json!({"_access": [1]}))).is_err());
    }
}
