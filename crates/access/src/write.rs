//! The write gate: every document written into a database, by any route
//! (interactive or replicated, HTTP or a local replication), is checked
//! here: design documents are for database admins, `_users` and
//! `_replicator` have their own rules, and the database's
//! `validate_doc_update` functions judge the rest.

use auth::users::UsersError;
use serde_json::Value;
use store::{Database, DocFailure, DocInput, ErrorKind};

use crate::{Gate, Kind, NOT_DB_ADMIN, Refusal};

const OTHERS_REPLICATION: &str = "Can't update replication documents from other users.";
/// A user's replication document where no replication rules were given
/// to the gate: refused rather than written unjudged.
const NO_REPLICATION_RULES: &str = "Replication documents of users cannot be written here.";

impl Gate {
    /// Nothing to check: a server admin of a plain database without
    /// validation functions (the hot path).
    pub fn unrestricted(&self) -> bool {
        self.user.is_server_admin() && self.kind == Kind::Plain && self.validators.is_empty()
    }

    /// Whether a document needs [`Gate::check_doc`] (its stored state, or
    /// the engine) rather than [`Gate::check_streamed`].
    pub fn needs_full_check(&self, doc: &DocInput) -> bool {
        self.needs_stored_state() || is_design(doc)
    }

    /// Whether bulk writes must go through [`Gate::check_doc`] one by one:
    /// the special databases, and databases with validation functions.
    pub fn needs_stored_state(&self) -> bool {
        self.kind.is_special() || !self.validators.is_empty() || self.per_doc
    }

    /// The check of a document that [`Gate::needs_full_check`] says needs
    /// nothing but the design-document rule.
    pub fn check_streamed(&self, doc: &DocInput) -> Result<(), DocFailure> {
        if self.unrestricted() {
            return Ok(());
        }
        self.check_design(doc)
    }

    /// Design documents are for database admins.
    fn check_design(&self, doc: &DocInput) -> Result<(), DocFailure> {
        if is_design(doc) && !self.is_db_admin() {
            return Err(DocFailure {
                error: match self.user.denial() {
                    auth::Denial::Unauthorized => ErrorKind::Unauthorized,
                    auth::Denial::Forbidden => ErrorKind::Forbidden,
                },
                reason: NOT_DB_ADMIN.into(),
            });
        }
        Ok(())
    }

    /// Checks (and, in the special databases, prepares: an owner set, a
    /// password hashed) one document before it is written.
    /// `Err(Refusal)` refuses the whole request, as CouchDB does when a
    /// user writes another user's document; `Ok(Err(failure))` refuses
    /// this document only.
    pub async fn check_doc(
        &self,
        database: &Database,
        doc: &mut DocInput,
        new_edits: bool,
    ) -> Result<Result<(), DocFailure>, Refusal> {
        let design = is_design(doc);
        if self.unrestricted() && !design {
            return Ok(Ok(()));
        }
        let local = doc
            .id
            .as_deref()
            .is_some_and(|id| id.starts_with("_local/"));
        if self.kind == Kind::Users && !local {
            // As CouchDB's `before_doc_update`, before any other rule: a
            // user writing another's document (a design document too) is
            // told it does not exist; anonymous sign-ups go on.
            let id = doc.id.as_deref().unwrap_or_default();
            match auth::users::check_writer(id, &self.user, &self.security) {
                Err(UsersError::NotFound) => return Err(Refusal::NotFound("missing".into())),
                Err(UsersError::Forbidden(reason) | UsersError::BadRequest(reason)) => {
                    return Err(Refusal::Forbidden(reason));
                }
                Ok(()) => {}
            }
        }
        if let Err(failure) = self.check_design(doc) {
            return Ok(Err(failure));
        }
        if self.per_doc {
            let checked = self.check_doc_access(database, doc, new_edits).await?;
            if checked.is_err() {
                return Ok(checked);
            }
        }
        if design {
            return self.check_views(doc).await;
        }
        if local {
            return Ok(Ok(()));
        }
        let checked = match self.kind {
            Kind::Replicator => self.check_replication_doc(database, doc).await?,
            Kind::Users => self.check_user_doc(database, doc).await?,
            Kind::Plain | Kind::PerDoc => Ok(()),
        };
        if checked.is_err() {
            return Ok(checked);
        }
        self.validate(database, doc, new_edits).await
    }

    /// CouchDB's checks of a design document's views when it is written:
    /// `views` an object, each view with a map function that compiles, and
    /// only the built-in reducers that exist.
    async fn check_views(&self, doc: &DocInput) -> Result<Result<(), DocFailure>, Refusal> {
        let Some(engine) = &self.engine else {
            return Ok(Ok(()));
        };
        let checked = design_functions::check_design_doc(engine.engine(), doc)
            .await
            .map_err(Refusal::Script)?;
        Ok(checked.map_err(|refusal| match refusal {
            design_functions::DesignRefusal::Invalid(reason) => DocFailure {
                error: ErrorKind::InvalidDesignDoc,
                reason,
            },
            design_functions::DesignRefusal::Compilation(reason) => DocFailure {
                error: ErrorKind::CompilationError,
                reason,
            },
        }))
    }

    /// The user context validation functions see.
    pub fn user_ctx_json(&self) -> String {
        let mut ctx = serde_json::Map::new();
        ctx.insert("db".into(), Value::String(self.db.clone()));
        ctx.insert(
            "name".into(),
            self.user.name.clone().map_or(Value::Null, Value::String),
        );
        ctx.insert(
            "roles".into(),
            Value::Array(self.user.roles.iter().cloned().map(Value::String).collect()),
        );
        ejson::to_string(&Value::Object(ctx))
    }

    /// The database's `validate_doc_update` functions, on a document about
    /// to be written.
    async fn validate(
        &self,
        database: &Database,
        doc: &DocInput,
        new_edits: bool,
    ) -> Result<Result<(), DocFailure>, Refusal> {
        let Some(engine) = self.engine.as_ref().filter(|_| !self.validators.is_empty()) else {
            return Ok(Ok(()));
        };
        let sec_obj = ejson::to_string(&*database.security().await?);
        let verdict = engine
            .check(
                database,
                &self.validators,
                doc,
                new_edits,
                &self.user_ctx_json(),
                &sec_obj,
            )
            .await;
        let failure = |error, reason| Ok(Err(DocFailure { error, reason }));
        match verdict {
            Ok(Ok(())) => Ok(Ok(())),
            Ok(Err(design_functions::Refusal::Forbidden(reason))) => {
                failure(ErrorKind::Forbidden, reason)
            }
            Ok(Err(design_functions::Refusal::Unauthorized(reason))) => {
                failure(ErrorKind::Unauthorized, reason)
            }
            Ok(Err(design_functions::Refusal::Other(reason))) => {
                failure(ErrorKind::UnknownError, reason)
            }
            Err(design_functions::ValidationError::Store(e)) => Err(e.into()),
            Err(design_functions::ValidationError::Script(e)) => Err(Refusal::Script(e)),
        }
    }

    /// CouchDB's users rules: roles are set by admins, and passwords are
    /// stored hashed (always, whatever the rules said).
    async fn check_user_doc(
        &self,
        database: &Database,
        doc: &mut DocInput,
    ) -> Result<Result<(), DocFailure>, Refusal> {
        // Who may write it at all was decided first, in `check_doc`.
        let id = doc.id.clone().unwrap_or_default();
        let old = match stored_body(database, &id).await? {
            Some(Value::Object(body)) => Some(body),
            _ => None,
        };
        let mut body = doc.body.clone();
        if doc.deleted {
            body.insert("_deleted".into(), Value::Bool(true));
        }
        // Users always get the rules. Admins get them as CouchDB gives
        // them, from `_design/_auth`: only while the database holds it (a
        // database just named the authentication database gets it a moment
        // later, as in CouchDB, and an admin may load documents first).
        let judged = !self.is_db_admin()
            || stored_body(database, auth::users::AUTH_DDOC_ID)
                .await?
                .is_some();
        let checked = if judged {
            auth::users::validate(&id, &body, old.as_ref(), &self.user, &self.security)
        } else {
            Ok(())
        }
        .and_then(|()| auth::users::hash_password(&mut doc.body, self.iterations));
        Ok(checked.map_err(|e| match e {
            UsersError::Forbidden(reason) => DocFailure {
                error: ErrorKind::Forbidden,
                reason,
            },
            UsersError::BadRequest(reason) => DocFailure {
                error: ErrorKind::BadRequest,
                reason,
            },
            // Not a refusal `validate` or `hash_password` makes.
            UsersError::NotFound => DocFailure {
                error: ErrorKind::Forbidden,
                reason: "missing".into(),
            },
        }))
    }

    /// The `_replicator` rules, on every route (a replicated revision
    /// too): the document's `owner` is its writer (an admin may name
    /// another), and only the owner or an admin changes or deletes it.
    /// CouchDB lets a plain write take another user's document over; here
    /// the owner of the stored revision decides.
    async fn check_replication_doc(
        &self,
        database: &Database,
        doc: &mut DocInput,
    ) -> Result<Result<(), DocFailure>, Refusal> {
        let is_admin = self.is_db_admin();
        let name = self.user.name.clone().map_or(Value::Null, Value::String);
        let refused = || {
            Ok(Err(DocFailure {
                error: ErrorKind::Forbidden,
                reason: OTHERS_REPLICATION.into(),
            }))
        };
        if !is_admin {
            let id = doc.id.clone().unwrap_or_default();
            if let Some(Value::Object(old)) = stored_body(database, &id).await?
                && old.get("owner").is_some_and(|owner| *owner != name)
            {
                return refused();
            }
            if self.user.name.is_none() {
                // A document must name who it runs as.
                return refused();
            }
        }
        match doc.body.get("owner") {
            // An admin without a name (an admin party, a server admin's
            // replication) leaves the owner unset rather than `null`.
            None | Some(Value::Null) if name.is_null() => {
                doc.body.remove("owner");
            }
            None => {
                doc.body.insert("owner".into(), name);
            }
            Some(owner) if *owner == name => {}
            Some(Value::Null) if is_admin => {
                doc.body.insert("owner".into(), name);
            }
            Some(_) if is_admin => {}
            Some(_) => return refused(),
        }
        if self.user.is_server_admin() || doc.deleted {
            return Ok(Ok(()));
        }
        // A user's replication names only databases they may use, however
        // the document arrives: the job would fail later as its owner, and
        // this says so now.
        let Some(replications) = &self.replications else {
            return Ok(Err(DocFailure {
                error: ErrorKind::Forbidden,
                reason: NO_REPLICATION_RULES.into(),
            }));
        };
        let spec = Value::Object(doc.body.clone());
        match replications.check_start(&self.user, &spec).await {
            Ok(()) => Ok(Ok(())),
            Err(
                Refusal::Unauthorized(reason)
                | Refusal::Forbidden(reason)
                | Refusal::NotFound(reason),
            ) => Ok(Err(DocFailure {
                error: ErrorKind::Forbidden,
                reason,
            })),
            Err(other) => Err(other),
        }
    }
}

/// The current body of a document, `None` when it does not exist.
async fn stored_body(database: &Database, id: &str) -> Result<Option<Value>, Refusal> {
    match database.get(id, store::GetOptions::default()).await {
        Ok(found) => Ok(Some(found.to_value()?)),
        Err(store::StoreError::DocNotFound(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn is_design(doc: &DocInput) -> bool {
    doc.id
        .as_deref()
        .is_some_and(|id| id.starts_with("_design/"))
}
