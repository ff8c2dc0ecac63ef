//! Authorization: what the caller may do, by CouchDB 3.5's rules. The
//! request-level table ([`authorize`]) follows CouchDB's
//! `chttpd_auth_request`: server-admin endpoints, then the database's
//! `_security` (members read and write documents; anonymous callers hear
//! 401, known ones 403). Per-document rules apply where documents are
//! written: design documents are for database admins, and `_users` has
//! its own ([`auth::users`]).

use auth::users::UsersError;
use auth::{SecurityObject, UserCtx};
use axum::http::Method;
use percent_encoding::percent_decode_str;
use serde_json::Value;
use store::{Database, DocFailure, DocInput, DocWriteResult, ErrorKind};

use crate::AppState;
use crate::auth::USERS_DB;

use crate::error::ApiError;

const NOT_SERVER_ADMIN: &str = "You are not a server admin.";
const NOT_DB_ADMIN: &str = "You are not a db or server admin.";

fn require_admin(user: &UserCtx) -> Result<(), ApiError> {
    if user.is_server_admin() {
        Ok(())
    } else {
        Err(ApiError::Unauthorized(NOT_SERVER_ADMIN.into()))
    }
}

/// CouchDB's refusal for a user who is not a member of a database.
fn not_member(user: &UserCtx) -> ApiError {
    match user.denial() {
        auth::Denial::Unauthorized => {
            ApiError::Unauthorized("You are not authorized to access this db.".into())
        }
        auth::Denial::Forbidden => {
            ApiError::Forbidden("You are not allowed to access this db.".into())
        }
    }
}

/// A refusal for a caller who is not a database admin: 401 when anonymous.
pub(crate) fn not_db_admin(user: &UserCtx) -> ApiError {
    match user.denial() {
        auth::Denial::Unauthorized => ApiError::Unauthorized(NOT_DB_ADMIN.into()),
        auth::Denial::Forbidden => ApiError::Forbidden(NOT_DB_ADMIN.into()),
    }
}

/// A database's security object, or `None` when the database does not
/// exist (the handler then answers 404 as usual).
pub(crate) async fn security_of(
    state: &AppState,
    db: &str,
) -> Result<Option<SecurityObject>, ApiError> {
    match state.store.db(db).await {
        Ok(database) => Ok(Some(SecurityObject::from_json(
            &*database.security().await?,
        ))),
        Err(store::StoreError::DbNotFound(_)) | Err(store::StoreError::IllegalDbName(_)) => {
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// The request-level checks, before any handler runs.
pub(crate) async fn authorize(
    state: &AppState,
    method: &Method,
    path: &str,
    user: &UserCtx,
) -> Result<(), ApiError> {
    let mut parts = path.trim_start_matches('/').split('/');
    let first = parts.next().unwrap_or("");
    let second = parts.next().filter(|s| !s.is_empty());
    let third = parts.next();
    if first.is_empty() || first == "favicon.ico" {
        return Ok(());
    }
    let auth = &state.auth.config;
    if auth.require_valid_user
        && user.name.is_none()
        && !user.is_server_admin()
        && first != "_session"
    {
        return Err(ApiError::Unauthorized("Authentication required.".into()));
    }
    if user.is_server_admin() {
        return Ok(());
    }
    let db = percent_decode_str(first).decode_utf8_lossy().into_owned();
    let whole_db = second.is_none();
    let second = second.map(|s| percent_decode_str(s).decode_utf8_lossy().into_owned());
    match db.as_str() {
        "_all_dbs" | "_dbs_info" if auth.admin_only_all_dbs => return require_admin(user),
        "_all_dbs" | "_dbs_info" => return Ok(()),
        name if name == USERS_DB || store::name::is_replicator_db(name) => {
            if (whole_db && (*method == Method::PUT || *method == Method::DELETE))
                || matches!(second.as_deref(), Some("_all_docs" | "_changes"))
            {
                return require_admin(user);
            }
            check_member(state, &db, user).await?;
            // Other endpoints would list or copy every user's document (or
            // every replication's credentials): only the plain document
            // paths filter what a user may see.
            let listing = second.as_deref().is_some_and(|s| {
                s.starts_with('_') && !["_bulk_docs", "_security", "_design", "_local"].contains(&s)
            });
            if listing {
                return match security_of(state, &db).await? {
                    Some(sec) if !sec.is_admin(user) => require_admin(user),
                    _ => Ok(()),
                };
            }
            return Ok(());
        }
        "_up" | "_uuids" | "_session" | "_stats" | "_utils" => return Ok(()),
        // Monitoring may run as a read-only `_metrics` user.
        "_node" if matches!(third, Some("_stats" | "_system" | "_prometheus")) => {
            return if user.roles.iter().any(|r| r == "_metrics") {
                Ok(())
            } else {
                Err(ApiError::Unauthorized(
                    "You are not a server admin or read-only metrics user".into(),
                ))
            };
        }
        "_replicate" => {
            return if user.name.is_some() {
                Ok(())
            } else {
                Err(ApiError::Unauthorized(
                    "You are not an authenticated user".into(),
                ))
            };
        }
        name if name.starts_with('_') => return require_admin(user),
        _ => {}
    }
    if whole_db && (*method == Method::PUT || *method == Method::DELETE) {
        return require_admin(user);
    }
    match second.as_deref() {
        Some("_purge" | "_purged_infos_limit" | "_sync_shards") => require_admin(user),
        // Mango's indexes are design documents: written by database admins.
        Some("_index") if *method != Method::GET && *method != Method::HEAD => {
            db_admin(state, &db, user).await
        }
        Some("_compact" | "_view_cleanup") => db_admin(state, &db, user).await,
        _ => check_member(state, &db, user).await,
    }
}

async fn db_admin(state: &AppState, db: &str, user: &UserCtx) -> Result<(), ApiError> {
    match security_of(state, db).await? {
        Some(sec) if !sec.is_member(user) => Err(not_member(user)),
        Some(sec) if !sec.is_admin(user) => Err(ApiError::Unauthorized(
            "You are not a server or db admin.".into(),
        )),
        _ => Ok(()),
    }
}

async fn check_member(state: &AppState, db: &str, user: &UserCtx) -> Result<(), ApiError> {
    match security_of(state, db).await? {
        Some(sec) if !sec.is_member(user) => Err(not_member(user)),
        _ => Ok(()),
    }
}

/// Who writes documents into one database, and what they may write.
#[derive(Debug, Clone)]
pub(crate) struct Writer {
    user: UserCtx,
    security: SecurityObject,
    users_db: bool,
    /// `_replicator`: documents get an `owner`, and others' credentials are hidden.
    replicator_db: bool,
    /// The database's design documents with a `validate_doc_update`.
    validators: std::sync::Arc<Vec<query_server::DesignDoc>>,
    state: AppState,
}

impl Writer {
    pub(crate) async fn of(
        state: &AppState,
        database: &Database,
        user: UserCtx,
    ) -> Result<Writer, ApiError> {
        let users_db = database.name() == USERS_DB;
        let replicator_db = store::name::is_replicator_db(database.name());
        // A server admin outside `_users` is never checked: the security
        // object is not even read on that hot path.
        let security = if user.is_server_admin() && !users_db && !replicator_db {
            SecurityObject::default()
        } else {
            SecurityObject::from_json(&*database.security().await?)
        };
        let validators = state.validators.of(database).await?;
        Ok(Writer {
            security,
            users_db,
            replicator_db,
            validators,
            state: state.clone(),
            user,
        })
    }

    /// Nothing to check: a server admin outside `_users`, in a database
    /// without validation functions (the hot path).
    pub(crate) fn unrestricted(&self) -> bool {
        self.user.is_server_admin()
            && !self.users_db
            && !self.replicator_db
            && self.validators.is_empty()
    }

    /// The checks that need no stored state: design documents are for
    /// database admins.
    fn check_design(&self, doc: &DocInput) -> Result<(), DocFailure> {
        let design = doc
            .id
            .as_deref()
            .is_some_and(|id| id.starts_with("_design/"));
        if design && !self.security.is_admin(&self.user) {
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

    /// Checks (and, in `_users`, prepares) one document before it is
    /// written. `Err(ApiError)` refuses the whole request, as CouchDB does
    /// when a user writes another user's document; `Ok(Err(failure))`
    /// refuses this document only.
    pub(crate) async fn check(
        &self,
        database: &Database,
        doc: &mut DocInput,
        new_edits: bool,
    ) -> Result<Result<(), DocFailure>, ApiError> {
        let id = doc.id.clone().unwrap_or_default();
        let design = id.starts_with("_design/");
        if self.unrestricted() && !design {
            return Ok(Ok(()));
        }
        if !self.user.is_server_admin()
            && let Err(failure) = self.check_design(doc)
        {
            return Ok(Err(failure));
        }
        if design {
            return self.check_views(doc).await;
        }
        if id.starts_with("_local/") {
            return Ok(Ok(()));
        }
        let checked = if self.replicator_db {
            self.check_replication_doc(database, &id, doc).await?
        } else if self.users_db {
            self.check_user_doc(database, &id, doc).await?
        } else {
            Ok(())
        };
        if checked.is_err() {
            return Ok(checked);
        }
        self.validate(database, doc, new_edits).await
    }

    /// CouchDB's checks of a design document's views when it is written:
    /// `views` an object, each view with a map function that compiles, and
    /// only the built-in reducers that exist.
    async fn check_views(&self, doc: &DocInput) -> Result<Result<(), DocFailure>, ApiError> {
        let checked = query_server::check_design_doc(self.state.validators.engine(), doc)
            .await
            .map_err(crate::design::script_error)?;
        Ok(checked.map_err(|refusal| match refusal {
            query_server::DesignRefusal::Invalid(reason) => DocFailure {
                error: ErrorKind::InvalidDesignDoc,
                reason,
            },
            query_server::DesignRefusal::Compilation(reason) => DocFailure {
                error: ErrorKind::CompilationError,
                reason,
            },
        }))
    }

    /// The database's `validate_doc_update` functions, on a document about
    /// to be written.
    async fn validate(
        &self,
        database: &Database,
        doc: &DocInput,
        new_edits: bool,
    ) -> Result<Result<(), DocFailure>, ApiError> {
        if self.validators.is_empty() {
            return Ok(Ok(()));
        }
        let user_ctx = serde_json::json!({
            "db": database.name(),
            "name": self.user.name,
            "roles": self.user.roles,
        })
        .to_string();
        let sec_obj = ejson::to_string(&*database.security().await?);
        let verdict = self
            .state
            .validators
            .check(
                database,
                &self.validators,
                doc,
                new_edits,
                &user_ctx,
                &sec_obj,
            )
            .await;
        match verdict {
            Ok(Ok(())) => Ok(Ok(())),
            Ok(Err(refusal)) => Ok(Err(match refusal {
                query_server::Refusal::Forbidden(reason) => DocFailure {
                    error: ErrorKind::Forbidden,
                    reason,
                },
                query_server::Refusal::Unauthorized(reason) => DocFailure {
                    error: ErrorKind::Unauthorized,
                    reason,
                },
                query_server::Refusal::Other(reason) => DocFailure {
                    error: ErrorKind::UnknownError,
                    reason,
                },
            })),
            Err(query_server::ValidationError::Store(e)) => Err(e.into()),
            Err(query_server::ValidationError::Script(e)) => Err(crate::design::script_error(e)),
        }
    }

    /// CouchDB's `_users` rules: a user writes their own document only,
    /// and passwords are stored hashed.
    async fn check_user_doc(
        &self,
        database: &Database,
        id: &str,
        doc: &mut DocInput,
    ) -> Result<Result<(), DocFailure>, ApiError> {
        let id = id.to_string();
        match auth::users::check_writer(&id, &self.user, &self.security) {
            Err(UsersError::NotFound) => return Err(ApiError::not_found("missing")),
            Err(UsersError::Forbidden(reason)) => return Err(ApiError::Forbidden(reason)),
            Ok(()) => {}
        }
        let old = match database.get(&id, store::GetOptions::default()).await {
            Ok(found) => match found.to_value()? {
                Value::Object(body) => Some(body),
                _ => None,
            },
            Err(store::StoreError::DocNotFound(_)) => None,
            Err(e) => return Err(e.into()),
        };
        let mut body = doc.body.clone();
        if doc.deleted {
            body.insert("_deleted".into(), Value::Bool(true));
        }
        let iterations = self.state.auth.config.iterations;
        let checked = auth::users::validate(&id, &body, old.as_ref(), &self.user, &self.security)
            .and_then(|()| auth::users::hash_password(&mut doc.body, iterations));
        Ok(match checked {
            Ok(()) => Ok(()),
            Err(UsersError::Forbidden(reason)) => Err(DocFailure {
                error: ErrorKind::Forbidden,
                reason,
            }),
            // Not a refusal `validate` or `hash_password` makes.
            Err(UsersError::NotFound) => Err(DocFailure {
                error: ErrorKind::Forbidden,
                reason: "missing".into(),
            }),
        })
    }

    /// CouchDB's `_replicator` rules: the server sets `owner` to the writer
    /// (an admin may keep another owner); nobody but an admin edits another
    /// user's replication; and a user may only replicate databases they
    /// may use themselves.
    async fn check_replication_doc(
        &self,
        database: &Database,
        id: &str,
        doc: &mut DocInput,
    ) -> Result<Result<(), DocFailure>, ApiError> {
        let is_admin = self.security.is_admin(&self.user);
        let name = self.user.name.clone().map_or(Value::Null, Value::String);
        let refused = || {
            Ok(Err(DocFailure {
                error: ErrorKind::Forbidden,
                reason: "Can't update replication documents from other users.".into(),
            }))
        };
        if !is_admin {
            // The stored owner counts, not only the one this body claims.
            if let Ok(stored) = database.get(id, store::GetOptions::default()).await
                && let Value::Object(old) = stored.to_value()?
                && old.get("owner").is_some_and(|owner| *owner != name)
            {
                return refused();
            }
        }
        match doc.body.get("owner") {
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
        if !doc.deleted && !self.user.is_server_admin() {
            let spec = Value::Object(doc.body.clone());
            if let Err(e) = check_replication(&self.state, &spec, &self.user).await {
                return Ok(Err(DocFailure {
                    error: ErrorKind::Forbidden,
                    reason: e.error_info().2,
                }));
            }
        }
        Ok(Ok(()))
    }

    /// [`Writer::check`] for a single-document write: a refusal is the answer.
    pub(crate) async fn check_one(
        &self,
        database: &Database,
        doc: &mut DocInput,
        new_edits: bool,
    ) -> Result<(), ApiError> {
        self.check(database, doc, new_edits)
            .await?
            .map_err(|failure| match failure.error {
                ErrorKind::Forbidden => ApiError::Forbidden(failure.reason),
                _ => ApiError::refused(failure.error, failure.reason),
            })
    }

    /// Whether a document needs [`Writer::check`] (its stored state, or
    /// the engine) rather than [`Writer::check_streamed`].
    pub(crate) fn needs_full_check(&self, doc: &DocInput) -> bool {
        self.needs_stored_state()
            || doc
                .id
                .as_deref()
                .is_some_and(|id| id.starts_with("_design/"))
    }

    /// The design-document check for a document of a streamed bulk write
    /// (documents outside `_users` need nothing else).
    pub(crate) fn check_streamed(&self, doc: &DocInput) -> Result<(), DocFailure> {
        if self.unrestricted() {
            return Ok(());
        }
        self.check_design(doc)
    }

    /// Whether bulk writes must go through [`Writer::check`] one by one:
    /// `_users`, and databases with validation functions.
    pub(crate) fn needs_stored_state(&self) -> bool {
        self.users_db || !self.validators.is_empty()
    }

    /// Whether reads must go through [`Writer::filter_read`]: a caller
    /// who is not an admin of `_users` or `_replicator`.
    pub(crate) fn reads_filtered(&self) -> bool {
        (self.users_db || self.replicator_db) && !self.security.is_admin(&self.user)
    }

    /// What a reader of `_users` or `_replicator` may see of a document.
    pub(crate) fn filter_read(
        &self,
        id: &str,
        body: serde_json::Map<String, Value>,
        public_fields: &[String],
    ) -> Result<serde_json::Map<String, Value>, ApiError> {
        if self.replicator_db {
            let name = self.user.name.clone().map_or(Value::Null, Value::String);
            if id.starts_with("_design/") || body.get("owner") == Some(&name) {
                return Ok(body);
            }
            return Ok(without_credentials(body));
        }
        auth::users::readable(id, body, &self.user, &self.security, public_fields).map_err(|e| {
            match e {
                UsersError::NotFound => ApiError::not_found("missing"),
                UsersError::Forbidden(reason) => ApiError::Forbidden(reason),
            }
        })
    }
}

/// A replication document as anyone but its owner may see it: no
/// credentials in `source`/`target` URLs, no `auth` or `headers`.
fn without_credentials(mut body: serde_json::Map<String, Value>) -> serde_json::Map<String, Value> {
    for side in ["source", "target"] {
        match body.get_mut(side) {
            Some(Value::String(url)) => *url = strip_userinfo(url),
            Some(Value::Object(peer)) => {
                peer.remove("auth");
                peer.remove("headers");
                if let Some(Value::String(url)) = peer.get_mut("url") {
                    *url = strip_userinfo(url);
                }
            }
            _ => {}
        }
    }
    body
}

/// `http://user:pass@host/db` → `http://host/db`.
fn strip_userinfo(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let authority_end = rest.find('/').unwrap_or(rest.len());
            match rest[..authority_end].rfind('@') {
                Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
                None => url.to_string(),
            }
        }
        None => url.to_string(),
    }
}

/// A user who is not a server admin may only replicate databases of this
/// server they may use: a member of a local source and of a local target,
/// and no target created for them (creating databases is for server admins).
pub(crate) async fn check_replication(
    state: &AppState,
    spec: &Value,
    user: &UserCtx,
) -> Result<(), ApiError> {
    if user.is_server_admin() {
        return Ok(());
    }
    // A malformed request is refused with its own error further on.
    let Ok(parsed) = state.scheduler.parse_spec(spec) else {
        return Ok(());
    };
    for (peer, is_target) in [(&parsed.source, false), (&parsed.target, true)] {
        let replicator::Peer::Local(db) = peer else {
            continue;
        };
        match security_of(state, db).await? {
            Some(sec) if !sec.is_member(user) => return Err(not_member(user)),
            None if is_target && parsed.create_target => return require_admin(user),
            _ => {}
        }
    }
    Ok(())
}

/// Puts refused documents back among the written ones, in request order.
pub(crate) fn splice(
    written: Vec<DocWriteResult>,
    refused: Vec<(usize, DocWriteResult)>,
) -> Vec<DocWriteResult> {
    if refused.is_empty() {
        return written;
    }
    let mut out = Vec::with_capacity(written.len() + refused.len());
    let mut written = written.into_iter();
    let mut refused = refused.into_iter().peekable();
    loop {
        if refused.peek().is_some_and(|(at, _)| *at == out.len()) {
            if let Some((_, row)) = refused.next() {
                out.push(row);
            }
            continue;
        }
        match written.next() {
            Some(row) => out.push(row),
            None => {
                out.extend(refused.map(|(_, row)| row));
                return out;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str) -> DocWriteResult {
        DocWriteResult {
            id: id.into(),
            result: Ok("1-a".into()),
            refused_rev: None,
        }
    }

    #[test]
    fn credentials_are_taken_out_of_replication_documents() {
        let doc = serde_json::json!({
            "source": "https://bob:pw@example.com/db",
            "target": {"url": "http://u:p@h:5984/t", "auth": {"basic": {}}, "headers": {"x": "y"}},
            "owner": "bob"
        });
        let Value::Object(body) = doc else {
            unreachable!()
        };
        let seen = Value::Object(without_credentials(body));
        assert_eq!(
            seen,
            serde_json::json!({"source": "https://example.com/db", "target": {"url": "http://h:5984/t"}, "owner": "bob"})
        );
        assert_eq!(strip_userinfo("local-db"), "local-db");
        assert_eq!(strip_userinfo("http://h/a@b"), "http://h/a@b");
    }

    #[test]
    fn refusals_return_to_their_places() {
        let out = splice(
            vec![row("b"), row("d")],
            vec![(0, row("a")), (2, row("c")), (4, row("e"))],
        );
        let ids: Vec<_> = out.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c", "d", "e"]);
    }
}
