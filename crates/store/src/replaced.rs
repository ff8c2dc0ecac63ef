//! The revision a write replaces, as a `validate_doc_update` function sees
//! it (CouchDB's `oldDoc`): the edited leaf for an interactive edit, the
//! nearest stored ancestor of the new leaf for a replicated one, nothing for
//! a new document. Found before the write, as CouchDB finds it; the write
//! still checks for conflicts itself.

use crate::backend::ReadRows;
use crate::read::{DocJson, GetOptions, get_in};
use crate::{Database, DocInput, StoreError};

/// What a write replaces.
#[derive(Debug)]
pub enum Replaced {
    /// Nothing: a new document, or one whose winner is deleted (`oldDoc` is null).
    Nothing,
    /// This revision, with `_revisions`.
    Doc(DocJson),
    /// The write will not change the document (a conflict, or revisions it
    /// already has): there is nothing to validate.
    NoChange,
}

impl Database {
    /// What `doc` would replace if written now (see [`Replaced`]).
    pub async fn replaced_revision(
        &self,
        doc: &DocInput,
        new_edits: bool,
    ) -> Result<Replaced, StoreError> {
        let Some(id) = doc.id.clone() else {
            return Ok(Replaced::Nothing);
        };
        let rev = doc.rev.clone();
        let path = doc.revisions.clone();
        self.read(move |conn| {
            let Some(row) = ReadRows::doc_row(conn, &id)? else {
                // Editing a revision of a document that does not exist conflicts.
                return Ok(if new_edits && rev.is_some() {
                    Replaced::NoChange
                } else {
                    Replaced::Nothing
                });
            };
            let read = |rev: revtree::RevId| {
                get_in(
                    conn,
                    &id,
                    &GetOptions {
                        rev: Some(rev),
                        revs: true,
                        ..Default::default()
                    },
                )
                .map(Replaced::Doc)
            };
            let leaves = row.tree.leaves();
            if new_edits {
                return match rev {
                    None if row.tree.winner().is_none_or(|w| w.deleted) => Ok(Replaced::Nothing),
                    None => Ok(Replaced::NoChange),
                    Some(rev) if leaves.iter().any(|l| l.rev == rev) => read(rev),
                    Some(_) => Ok(Replaced::NoChange),
                };
            }
            let path = match (path, rev) {
                (Some(path), _) => path,
                (None, Some(rev)) => revtree::RevPath::single(rev),
                (None, None) => return Ok(Replaced::Nothing),
            };
            if row.tree.contains(&path.leaf()) {
                return Ok(Replaced::NoChange);
            }
            for ancestor in path.revs().skip(1) {
                if row.tree.is_available(&ancestor) == Some(true) {
                    return read(ancestor);
                }
            }
            Ok(Replaced::Nothing)
        })
        .await
    }
}
