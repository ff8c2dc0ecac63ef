//! The one door to the databases: the only way a handler reaches one.
//!
//! [`Databases`] holds the store in a private field, so the compiler keeps
//! every other module of this crate from opening a database by itself.
//! [`Databases::open`] opens a database as one caller may read it: in a
//! database with per-document access, a member gets the store's scoped
//! handle, which shows them only their documents on every read (counts,
//! feeds, searches included); everyone else, and every other database,
//! gets the database itself. Whether the caller may use the route at all
//! was decided before any handler ran (`base::access::authorize`); what
//! they may write is the write gate's (`base::access::Writer`).
//!
//! The few reads that must see a database whole are named methods here,
//! each saying why: the authenticator's look-ups of users, the route
//! rules' read of `_security`, `_db_updates` for server admins, and
//! whether a database exists.

use std::path::Path;

use auth::UserCtx;
use store::{Database, Store, StoreError};

use crate::base::error::ApiError;

/// The server's databases, behind the door.
#[derive(Debug, Clone)]
pub(crate) struct Databases {
    store: Store,
}

impl Databases {
    pub(crate) fn new(store: Store) -> Databases {
        Databases { store }
    }

    /// `name` as `user` may read it (see the module's doc): the only way a
    /// handler gets a [`Database`].
    pub(crate) async fn open(
        &self,
        name: &str,
        user: &UserCtx,
        iterations: u32,
    ) -> Result<Database, ApiError> {
        let database = self.store.db(name).await?;
        if !database.has_doc_access() || user.is_server_admin() {
            return Ok(database);
        }
        let gate = access::Gate::of(&database, user.clone(), None, iterations, None).await?;
        Ok(gate.readable(&database))
    }

    /// The replication rules (`access::replication`), which read the
    /// `_security` of the databases a replication names.
    pub(crate) fn replications(&self) -> access::replication::Replications {
        access::replication::Replications::new(
            self.store.clone(),
            replicator::ReplicationSpec::local_peers,
        )
    }

    /// Whether a database of that name exists (its content unread).
    pub(crate) async fn exists(&self, name: &str) -> bool {
        self.store.db(name).await.is_ok()
    }

    /// `name` whole, for the route rules: its `_security` and kind, read
    /// before the caller is admitted.
    pub(crate) async fn for_route_rules(&self, name: &str) -> Result<Database, StoreError> {
        self.store.db(name).await
    }

    /// The store, for the authenticator alone: it reads users' documents
    /// whole to check passwords and roles, and answers nobody's reads.
    pub(crate) fn for_logins(&self) -> &Store {
        &self.store
    }

    /// The database of server events, for `_db_updates` (server admins).
    pub(crate) async fn events(&self) -> Result<Database, StoreError> {
        self.store.db(store::db_events::GLOBAL_CHANGES_DB).await
    }

    pub(crate) async fn create_db_with(
        &self,
        name: &str,
        how: store::CreateDb,
    ) -> Result<Database, StoreError> {
        self.store.create_db_with(name, how).await
    }

    pub(crate) async fn delete_db(&self, name: &str) -> Result<(), StoreError> {
        self.store.delete_db(name).await
    }

    pub(crate) async fn all_dbs(&self) -> Result<Vec<String>, StoreError> {
        self.store.all_dbs().await
    }

    pub(crate) fn open_dbs(&self) -> usize {
        self.store.open_dbs()
    }

    pub(crate) fn server_uuid(&self) -> &str {
        self.store.server_uuid()
    }

    pub(crate) async fn health(&self) -> store::Health {
        self.store.health().await
    }

    pub(crate) fn is_shared(&self) -> bool {
        self.store.is_shared()
    }

    pub(crate) fn data_dir(&self) -> &Path {
        self.store.data_dir()
    }

    /// This node's replication jobs, for the other nodes sharing the store.
    pub(crate) async fn publish_node_state(
        &self,
        node: &str,
        entries: Vec<(String, String)>,
    ) -> Result<(), StoreError> {
        self.store.publish_node_state(node, entries).await
    }

    /// What the other nodes sharing the store published, fresher than `fresh`.
    pub(crate) async fn other_nodes_state(
        &self,
        node: &str,
        fresh: std::time::Duration,
    ) -> Result<Vec<(String, String, String)>, StoreError> {
        self.store.other_nodes_state(node, fresh).await
    }
}
