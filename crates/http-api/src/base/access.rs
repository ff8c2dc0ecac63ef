//! Authorization of HTTP requests. The server's own endpoints are decided
//! here (CouchDB's `chttpd_auth_request`); everything about a database
//! (which route needs what, which documents a user may write or see) is
//! the shared gate's ([`access`]), which the replicator asks too.

use auth::{SecurityObject, UserCtx};
use axum::http::{Method, StatusCode};
use percent_encoding::percent_decode_str;
use serde_json::Value;
use store::{Database, DocFailure, DocInput, ErrorKind};

use crate::AppState;

use crate::base::error::ApiError;

fn require_admin(user: &UserCtx) -> Result<(), ApiError> {
    Ok(access::admit(user, None, &access::Need::ServerAdmin)?)
}

/// A refusal for a caller who is not a database admin: 401 when anonymous.
pub(crate) fn not_db_admin(user: &UserCtx) -> ApiError {
    access::denied(user, access::NOT_DB_ADMIN).into()
}

/// A database's security object and kind, or `None` when it does not
/// exist.
async fn rules_of(
    state: &AppState,
    db: &str,
) -> Result<Option<(SecurityObject, access::Kind)>, ApiError> {
    match state.databases.for_route_rules(db).await {
        Ok(database) => Ok(Some((
            SecurityObject::from_json(&*database.security().await?),
            access::Kind::of_db(&database),
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
    // `/_node/{name}/_stats`: the part after the node's name.
    let third = parts.nth(1);
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
    match db.as_str() {
        "_all_dbs" | "_dbs_info" if auth.admin_only_all_dbs => return require_admin(user),
        "_all_dbs" | "_dbs_info" => return Ok(()),
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
        name if name.starts_with('_') && access::Kind::of(name) == access::Kind::Plain => {
            return require_admin(user);
        }
        _ => {}
    }
    // A database: the shared table says what the route needs.
    let decoded: Vec<String> = path
        .trim_start_matches('/')
        .split('/')
        .skip(1)
        .filter(|s| !s.is_empty())
        .map(|s| percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect();
    let segments: Vec<&str> = decoded.iter().map(String::as_str).collect();
    let rules = rules_of(state, &db).await?;
    let kind = rules
        .as_ref()
        .map_or_else(|| access::Kind::of(&db), |(_, kind)| *kind);
    let need = access::route_need(
        kind,
        &access::Route {
            method: method.as_str(),
            segments: &segments,
        },
    );
    let security = rules.map(|(security, _)| security);
    Ok(access::admit(user, security.as_ref(), &need)?)
}

/// Who writes documents into one database, and what they may write: the
/// shared [`access::Gate`], with its refusals as HTTP answers.
#[derive(Debug, Clone)]
pub(crate) struct Writer {
    gate: access::Gate,
}

impl From<access::Refusal> for ApiError {
    /// The gate's table (`access::Refusal::answer`) says the status and
    /// error; this only writes them as HTTP answers.
    fn from(refusal: access::Refusal) -> ApiError {
        match refusal.answer() {
            access::Answer::Refused {
                status,
                error,
                reason,
            } => ApiError::Status {
                status: StatusCode::from_u16(status).unwrap_or(StatusCode::FORBIDDEN),
                error,
                reason,
            },
            access::Answer::Store(e) => e.into(),
            access::Answer::Script(e) => crate::base::error::script_error(e),
        }
    }
}

impl AppState {
    /// Database `name` as `user` may read it (see [`AppState::open`]) and
    /// the write gate of the same caller: the only way a handler gets a
    /// [`Writer`], so a gate built for one caller never writes beside a
    /// handle opened for another.
    pub(crate) async fn open_to_write(
        &self,
        name: &str,
        user: &UserCtx,
    ) -> Result<(Database, Writer), ApiError> {
        let database = self.open(name, user).await?;
        let writer = Writer::of(self, &database, user.clone()).await?;
        Ok((database, writer))
    }
}

impl Writer {
    async fn of(state: &AppState, database: &Database, user: UserCtx) -> Result<Writer, ApiError> {
        let gate = access::Gate::of(
            database,
            user,
            Some(&state.validators),
            state.auth.config.iterations,
            Some(&state.databases.replications()),
        )
        .await?;
        Ok(Writer { gate })
    }

    /// Checks (and, in the special databases, prepares) one document
    /// before it is written: see [`access::Gate::check_doc`].
    pub(crate) async fn check(
        &self,
        database: &Database,
        doc: &mut DocInput,
        new_edits: bool,
    ) -> Result<Result<(), DocFailure>, ApiError> {
        Ok(self.gate.check_doc(database, doc, new_edits).await?)
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

    pub(crate) fn needs_full_check(&self, doc: &DocInput) -> bool {
        self.gate.needs_full_check(doc)
    }

    pub(crate) fn check_streamed(&self, doc: &DocInput) -> Result<(), DocFailure> {
        self.gate.check_streamed(doc)
    }

    pub(crate) fn reads_filtered(&self) -> bool {
        self.gate.reads_filtered()
    }

    pub(crate) fn filter_read(
        &self,
        id: &str,
        body: serde_json::Map<String, Value>,
        public_fields: &[String],
    ) -> Result<serde_json::Map<String, Value>, ApiError> {
        Ok(self.gate.filter_read(id, body, public_fields)?)
    }
}
