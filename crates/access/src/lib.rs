//! Who may read and write a database's documents, decided once for every
//! way in: HTTP requests of every kind, the replicator's local reads and
//! writes, and backups all ask a [`Gate`]. It sits below both `http-api`
//! and `replicator` so that neither keeps a copy of a rule: a copy is a
//! side door the day the two drift apart.
//!
//! The rules are CouchDB 3.5's (`_security`, `validate_doc_update`, the
//! special databases `_users` and `_replicator`), made stricter where
//! CouchDB leaks: in `_replicator` no route shows a user another user's
//! credentials, and only a replication document's owner (or an admin)
//! changes it, whatever the route. Who may start and cancel a replication
//! is decided here too ([`replication`]).

mod per_doc;
mod read;
pub mod replication;
mod routes;
mod users_db;
mod write;

use std::sync::Arc;

use auth::{SecurityObject, UserCtx};
use store::{Database, StoreError};

pub use per_doc::ACCESS_REFUSED;
pub use routes::{ACCESS_DENIED, DesignFunction, Endpoint, Need, Route, Status, route_need};
pub use users_db::{
    USERS_DB, authentication_db, configured_authentication_db, ensure_auth_design_doc, is_users_db,
    set_authentication_db,
};

/// What kind of database a gate guards: the special ones have rules of
/// their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Plain,
    /// A users database (see [`is_users_db`]): a user sees and writes
    /// only their own document.
    Users,
    /// `_replicator` (or `prefix/_replicator`): documents have an owner.
    Replicator,
    /// A database created with `?access=true`: each document is for the
    /// users its `_access` names.
    PerDoc,
}

impl Kind {
    pub fn of(db: &str) -> Kind {
        if is_users_db(db) {
            Kind::Users
        } else if store::name::is_replicator_db(db) {
            Kind::Replicator
        } else {
            Kind::Plain
        }
    }

    /// The kind of an open database: its name, or its per-document access.
    pub fn of_db(database: &Database) -> Kind {
        match Kind::of(database.name()) {
            Kind::Plain if database.has_doc_access() => Kind::PerDoc,
            kind => kind,
        }
    }

    /// `_users` and `_replicator`, whose documents have rules of their own.
    pub fn is_special(self) -> bool {
        matches!(self, Kind::Users | Kind::Replicator)
    }
}

/// Why the gate refuses a whole request (a refusal of one document of a
/// bulk write is a [`store::DocFailure`] instead).
#[derive(Debug)]
pub enum Refusal {
    /// 401: the caller must log in (or log in as someone else).
    Unauthorized(String),
    /// 403: the caller is known and may not.
    Forbidden(String),
    /// 404: as far as this caller may know, the document does not exist.
    NotFound(String),
    /// The gate could not read what it decides on.
    Store(StoreError),
    /// A validation function failed to run.
    Script(design_functions::JsError),
}

/// How a refusal is answered, wherever it is (an HTTP request, a write of
/// the replicator's local peer): the one table from a refusal to CouchDB's
/// status and error.
#[derive(Debug)]
pub enum Answer {
    /// The caller is refused: an HTTP status, CouchDB's `error` and the
    /// reason.
    Refused {
        status: u16,
        error: &'static str,
        reason: String,
    },
    /// Not a refusal of the caller: the gate could not read what it
    /// decides on.
    Store(StoreError),
    /// Not a refusal of the caller: a validation function failed to run
    /// (each way in reports a design function's failure as it reports the
    /// others).
    Script(design_functions::JsError),
}

impl Refusal {
    /// The refusal as it is answered (see [`Answer`]).
    pub fn answer(self) -> Answer {
        let refused = |status, error, reason| Answer::Refused {
            status,
            error,
            reason,
        };
        match self {
            Refusal::Unauthorized(reason) => refused(401, "unauthorized", reason),
            Refusal::Forbidden(reason) => refused(403, "forbidden", reason),
            Refusal::NotFound(reason) => refused(404, "not_found", reason),
            Refusal::Store(e) => Answer::Store(e),
            Refusal::Script(e) => Answer::Script(e),
        }
    }
}

impl From<StoreError> for Refusal {
    fn from(e: StoreError) -> Refusal {
        Refusal::Store(e)
    }
}

const NOT_MEMBER_ANONYMOUS: &str = "You are not authorized to access this db.";
const NOT_MEMBER: &str = "You are not allowed to access this db.";
/// CouchDB's refusal of a route for database admins.
pub const NOT_DB_ADMIN: &str = "You are not a db or server admin.";
/// CouchDB's refusal of a route for server admins.
pub const NOT_SERVER_ADMIN: &str = "You are not a server admin.";

/// 401 for an anonymous caller, 403 for a known one.
pub fn denied(user: &UserCtx, reason: &str) -> Refusal {
    match user.denial() {
        auth::Denial::Unauthorized => Refusal::Unauthorized(reason.into()),
        auth::Denial::Forbidden => Refusal::Forbidden(reason.into()),
    }
}

/// CouchDB's refusal of a caller who is not a member of a database.
pub fn not_member(user: &UserCtx) -> Refusal {
    match user.denial() {
        auth::Denial::Unauthorized => Refusal::Unauthorized(NOT_MEMBER_ANONYMOUS.into()),
        auth::Denial::Forbidden => Refusal::Forbidden(NOT_MEMBER.into()),
    }
}

/// Whether `user` may use a route that needs `need` in a database with
/// `security` (`None`: the database does not exist, and only a route for
/// server admins is refused; the handler answers 404 for the rest).
pub fn admit(
    user: &UserCtx,
    security: Option<&SecurityObject>,
    need: &Need,
) -> Result<(), Refusal> {
    if user.is_server_admin() {
        return Ok(());
    }
    if *need == Need::ServerAdmin {
        return Err(Refusal::Unauthorized(NOT_SERVER_ADMIN.into()));
    }
    let Some(security) = security else {
        return Ok(());
    };
    if !security.is_member(user) {
        return Err(not_member(user));
    }
    match need {
        Need::DbAdmin { reason, status } if !security.is_admin(user) => Err(match status {
            Status::ByCaller => denied(user, reason),
            Status::Unauthorized => Refusal::Unauthorized((*reason).into()),
            Status::Forbidden => Refusal::Forbidden((*reason).into()),
        }),
        _ => Ok(()),
    }
}

/// The rules of one database for one caller: built per request (or per
/// use by a replication), so a `_security` change applies at once.
#[derive(Debug, Clone)]
pub struct Gate {
    user: UserCtx,
    security: SecurityObject,
    kind: Kind,
    db: String,
    /// The database's design documents with a `validate_doc_update`.
    validators: Arc<Vec<design_functions::DesignDoc>>,
    /// `None` only where no query server runs (some tests of the
    /// replicator): then no function judges a write.
    engine: Option<design_functions::Validators>,
    /// PBKDF2 iterations for passwords written into `_users`.
    iterations: u32,
    /// Judges the replications a `_replicator` document describes; `None`
    /// refuses a user's replication document (see
    /// [`Gate::check_replication_doc`]).
    replications: Option<replication::Replications>,
    /// The database has per-document access (see `per_doc`).
    per_doc: bool,
}

impl Gate {
    /// The gate of `database` for `user`.
    pub async fn of(
        database: &Database,
        user: UserCtx,
        engine: Option<&design_functions::Validators>,
        iterations: u32,
        replications: Option<&replication::Replications>,
    ) -> Result<Gate, Refusal> {
        let kind = Kind::of_db(database);
        // A server admin of a plain database is never checked: the
        // security object is not even read on that hot path.
        let security = if user.is_server_admin() && kind == Kind::Plain {
            SecurityObject::default()
        } else {
            SecurityObject::from_json(&*database.security().await?)
        };
        let mut validators = match engine {
            Some(engine) => engine.of(database).await?,
            None => Arc::default(),
        };
        if kind == Kind::Users {
            validators = without_users_rules(validators);
        }
        Ok(Gate {
            validators,
            engine: engine.cloned(),
            db: database.name().to_string(),
            user,
            security,
            kind,
            iterations,
            replications: replications.cloned(),
            per_doc: database.has_doc_access(),
        })
    }

    pub fn user(&self) -> &UserCtx {
        &self.user
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn is_db_admin(&self) -> bool {
        self.user.is_server_admin() || self.security.is_admin(&self.user)
    }

    /// Members (and admins) may use a database at all.
    pub fn check_member(&self) -> Result<(), Refusal> {
        self.check(&Need::Member)
    }

    /// Whether the caller may use a route that needs `need`.
    pub fn check(&self, need: &Need) -> Result<(), Refusal> {
        admit(&self.user, Some(&self.security), need)
    }

    /// Whether the caller may read the database as a replication source
    /// does: every document, through its changes.
    pub fn check_read_all(&self) -> Result<(), Refusal> {
        self.check(&route_need(self.kind, &Route::changes()))
    }
}

/// A users database's validation functions but `_design/_auth` while it
/// holds the users rules' own function: the write gate enforces those
/// rules itself, so they have one meaning (and no JavaScript runs for
/// them). A function an admin put there instead is run as any other.
fn without_users_rules(
    validators: Arc<Vec<design_functions::DesignDoc>>,
) -> Arc<Vec<design_functions::DesignDoc>> {
    let is_rules = |doc: &design_functions::DesignDoc| {
        doc.id == auth::users::AUTH_DDOC_ID
            && ejson::from_stored(&doc.json).is_ok_and(|body| {
                body.get("validate_doc_update")
                    .and_then(serde_json::Value::as_str)
                    == Some(auth::users::VALIDATE_FUNCTION)
            })
    };
    if !validators.iter().any(is_rules) {
        return validators;
    }
    Arc::new(
        validators
            .iter()
            .filter(|doc| !is_rules(doc))
            .cloned()
            .collect(),
    )
}

#[cfg(test)]
mod tests;
