//! Per-document access (`PUT /db?access=true`): who reads and writes each
//! document, from its `_access` (user names and roles, in one namespace as
//! in CouchDB's design). Admins of the database or the server read and
//! write everything; a user reads what names them or one of their roles
//! (the store's scoped handle, [`Gate::readable`], applies that to every
//! read), and writes only documents they may read and that still name
//! them afterwards.

use serde_json::Value;
use store::doc_access::{ACCESS_FIELD, Visibility, access_list, check_access_field};
use store::{Database, DocFailure, DocInput, ErrorKind};

use crate::{Gate, Refusal};

/// CouchDB's reason for a write a user may not make.
pub const ACCESS_REFUSED: &str = "access";
const DDOCS_WITH_ACCESS: &str = "Design Docs with an _access property are not allowed";

fn refused() -> Result<Result<(), DocFailure>, Refusal> {
    Ok(Err(DocFailure {
        error: ErrorKind::Forbidden,
        reason: ACCESS_REFUSED.into(),
    }))
}

impl Gate {
    /// The principals a user's reads are limited to (their name, then
    /// their roles); `None` when they read everything (an admin, or a
    /// database without per-document access).
    pub fn reader(&self) -> Option<Vec<String>> {
        if !self.per_doc || self.is_db_admin() {
            return None;
        }
        Some(principals_of(&self.user))
    }

    /// `database` as this caller may read it: for a user of a database
    /// with per-document access, a handle that shows only their documents.
    pub fn readable(&self, database: &Database) -> Database {
        match self.reader() {
            Some(principals) => database.for_reader(principals),
            None => database.clone(),
        }
    }

    /// The per-document rules of one write (any route, interactive or
    /// replicated).
    pub(crate) async fn check_doc_access(
        &self,
        database: &Database,
        doc: &mut DocInput,
        new_edits: bool,
    ) -> Result<Result<(), DocFailure>, Refusal> {
        let id = doc.id.clone().unwrap_or_default();
        if id.starts_with("_design/") && doc.body.contains_key(ACCESS_FIELD) {
            return Ok(Err(DocFailure {
                error: ErrorKind::DdocsWithAccess,
                reason: DDOCS_WITH_ACCESS.into(),
            }));
        }
        if let Err(e) = check_access_field(&doc.body) {
            return Ok(Err(DocFailure {
                error: ErrorKind::BadRequest,
                reason: e.to_string(),
            }));
        }
        let Some(principals) = self.reader() else {
            return Ok(Ok(()));
        };
        if id.starts_with("_local/") {
            return self.check_local(database, doc, &id, &principals).await;
        }
        // A revocation tombstone coming back is dropped by the store.
        if !new_edits && store::doc_access::is_revocation_tombstone(doc) {
            return Ok(Ok(()));
        }
        let named = access_list(&doc.body);
        let names_writer = |list: &[String]| list.iter().any(|p| principals.contains(p));
        let edit = new_edits && doc.rev.is_some();
        match database.access_of(&id, &principals).await? {
            // An edit of a revision nobody wrote: the store's conflict,
            // whatever the body names (the same answer as just below).
            None if edit => return Ok(Err(DocFailure::conflict())),
            // Nobody's yet: the writer must name themselves.
            None => {}
            Some(Visibility::Readable) => {}
            // Another's document, never the writer's: answered as an id
            // nobody wrote is answered for an edit (a conflict), so a
            // guessed revision cannot tell whether the document exists.
            Some(Visibility::Hidden) if edit => {
                return Ok(Err(DocFailure::conflict()));
            }
            // One the writer lost (they knew it), or a create over
            // another's id.
            Some(_) => return refused(),
        }
        match named {
            Some(list) if names_writer(&list) => Ok(Ok(())),
            // A deletion that names nobody keeps the document's readers.
            None if doc.deleted => Ok(Ok(())),
            _ => refused(),
        }
    }

    /// A local document (a replication checkpoint): read and written by
    /// the users its `_access` names; a user's new one names its writer.
    async fn check_local(
        &self,
        database: &Database,
        doc: &mut DocInput,
        id: &str,
        principals: &[String],
    ) -> Result<Result<(), DocFailure>, Refusal> {
        match database.unscoped().get_local(id).await {
            Ok(existing) => {
                let held = existing
                    .as_object()
                    .and_then(access_list)
                    .is_some_and(|list| list.iter().any(|p| principals.contains(p)));
                if !held {
                    return refused();
                }
            }
            Err(store::StoreError::DocNotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
        match access_list(&doc.body) {
            Some(list) if list.iter().any(|p| principals.contains(p)) => Ok(Ok(())),
            Some(_) => refused(),
            None => match &self.user.name {
                Some(name) => {
                    doc.body.insert(
                        ACCESS_FIELD.into(),
                        Value::Array(vec![Value::String(name.clone())]),
                    );
                    Ok(Ok(()))
                }
                None => refused(),
            },
        }
    }
}

/// A user's principals: their name, then their roles.
fn principals_of(user: &auth::UserCtx) -> Vec<String> {
    let mut out: Vec<String> = user.name.iter().cloned().collect();
    for role in &user.roles {
        if !out.contains(role) {
            out.push(role.clone());
        }
    }
    out
}
