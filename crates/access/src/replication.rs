//! Who may start, change and cancel a replication, and whose rights a job
//! runs with: one module that `_replicate`, the `_replicator` write gate
//! (a document written by a request or arriving by replication), the
//! documents manager and the scheduler endpoints all ask.
//!
//! The replicator parses replication requests (it sits above this crate),
//! so it hands the gate its parser as a plain function: the rules stay
//! here, and there is one parser.

use auth::{SecurityObject, UserCtx};
use serde_json::{Map, Value};
use store::{Store, StoreError};

use crate::{Kind, Need, Refusal, Route, admit, route_need};

/// The databases of this server a replication names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalPeers {
    pub source: Option<String>,
    pub target: Option<String>,
    pub create_target: bool,
}

/// Reads the local databases of a replication request or document; `None`
/// when it is not a valid replication (refused where it is parsed).
pub type ReadPeers = fn(&Value) -> Option<LocalPeers>;

/// CouchDB's refusal of a user cancelling another user's replication.
pub const OTHERS_CANCEL: &str = "Can't cancel a replication triggered by another user";

/// The replication rules of one server: its databases (to read their
/// `_security`) and the replicator's parser.
#[derive(Clone)]
pub struct Replications {
    store: Store,
    read_peers: ReadPeers,
}

impl std::fmt::Debug for Replications {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replications").finish_non_exhaustive()
    }
}

impl Replications {
    pub fn new(store: Store, read_peers: ReadPeers) -> Replications {
        Replications { store, read_peers }
    }

    /// Whether `user` may run the replication `spec` describes (a
    /// `_replicate` request or a `_replicator` document). A user who is
    /// not a server admin may only name databases of this server they may
    /// use: one they may read whole as a source (as `_changes` reads it),
    /// one they are a member of as a target, and no target created for
    /// them (creating databases is for server admins). A malformed request
    /// passes here and is refused with its own error where it is parsed.
    pub async fn check_start(&self, user: &UserCtx, spec: &Value) -> Result<(), Refusal> {
        if user.is_server_admin() {
            return Ok(());
        }
        let Some(peers) = (self.read_peers)(spec) else {
            return Ok(());
        };
        for (db, is_target) in [(&peers.source, false), (&peers.target, true)] {
            let Some(db) = db else { continue };
            let rules = self.rules_of(db).await?;
            if rules.is_none() && is_target && peers.create_target {
                return admit(user, None, &Need::ServerAdmin);
            }
            let kind = rules
                .as_ref()
                .map_or_else(|| Kind::of(db), |(_, kind)| *kind);
            let security = rules.map(|(security, _)| security);
            let need = if is_target {
                Need::Member
            } else {
                route_need(kind, &Route::changes())
            };
            admit(user, security.as_ref(), &need)?;
        }
        Ok(())
    }

    /// A database's security object and kind; `None` when it does not
    /// exist.
    async fn rules_of(&self, db: &str) -> Result<Option<(SecurityObject, Kind)>, Refusal> {
        match self.store.db(db).await {
            Ok(database) => Ok(Some((
                SecurityObject::from_json(&*database.security().await?),
                Kind::of_db(&database),
            ))),
            Err(StoreError::DbNotFound(_) | StoreError::IllegalDbName(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

/// Whose rights a job started by `caller` has on this server's
/// databases: `None` for a server admin's (no checks but validation
/// functions), else the caller's.
pub fn job_rights(caller: UserCtx) -> Option<UserCtx> {
    (!caller.is_server_admin()).then_some(caller)
}

/// Who a `_replicator` document's job runs as: its `owner` (the write
/// gate sets it to the writer; only an admin names another), with the
/// roles `roles_of` finds for that user now. A document without an owner
/// runs as `nobody`, never as an admin.
pub async fn document_runs_as<F, Fut>(
    doc: &Map<String, Value>,
    roles_of: F,
    nobody: &UserCtx,
) -> UserCtx
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = Option<Vec<String>>>,
{
    match doc.get("owner") {
        Some(Value::String(owner)) => UserCtx {
            name: Some(owner.clone()),
            roles: roles_of(owner.clone()).await.unwrap_or_default(),
            handler: None,
        },
        _ => nobody.clone(),
    }
}

/// Whether `caller` may cancel a job that runs with `job_rights` (see
/// [`job_rights`]): a server admin cancels any; a user only a job they
/// started themselves, as CouchDB decides.
pub fn check_cancel(caller: &UserCtx, job_rights: Option<&UserCtx>) -> Result<(), Refusal> {
    if caller.is_server_admin() {
        return Ok(());
    }
    match job_rights {
        Some(job_user) if caller.name.is_some() && job_user.name == caller.name => Ok(()),
        _ => Err(Refusal::Unauthorized(OTHERS_CANCEL.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str) -> UserCtx {
        UserCtx {
            name: Some(name.into()),
            roles: vec![],
            handler: None,
        }
    }

    #[test]
    fn only_the_starter_or_an_admin_cancels_a_job() {
        let alice = user("alice");
        assert!(check_cancel(&alice, Some(&alice)).is_ok());
        assert!(matches!(
            check_cancel(&user("bob"), Some(&alice)),
            Err(Refusal::Unauthorized(reason)) if reason == OTHERS_CANCEL
        ));
        // An admin's job (no rights recorded) is an admin's to cancel.
        assert!(check_cancel(&alice, None).is_err());
        let anonymous = UserCtx::default();
        assert!(check_cancel(&anonymous, Some(&anonymous)).is_err());
        assert!(check_cancel(&UserCtx::party_admin(), Some(&alice)).is_ok());
        assert!(check_cancel(&UserCtx::party_admin(), None).is_ok());
    }

    #[test]
    fn a_server_admins_job_runs_unchecked_and_a_users_with_their_rights() {
        assert_eq!(job_rights(UserCtx::party_admin()), None);
        assert_eq!(job_rights(user("alice")), Some(user("alice")));
    }

    #[tokio::test]
    async fn a_document_runs_as_its_owner_with_their_roles_now_or_as_nobody() {
        let nobody = UserCtx::default();
        let mut doc = Map::new();
        let ran = document_runs_as(&doc, |_| async { Some(vec!["x".into()]) }, &nobody).await;
        assert_eq!(ran, nobody);
        doc.insert("owner".into(), Value::String("alice".into()));
        let ran = document_runs_as(&doc, |name| async move { Some(vec![name]) }, &nobody).await;
        assert_eq!(ran.name.as_deref(), Some("alice"));
        assert_eq!(ran.roles, ["alice"]);
        // An owner named `_admin` is a name, not a role.
        doc.insert("owner".into(), Value::String("_admin".into()));
        let ran = document_runs_as(&doc, |_| async { None }, &nobody).await;
        assert!(!ran.is_server_admin());
    }
}
