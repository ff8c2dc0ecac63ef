//! What the nodes serving one store agree on: leases (which node runs a
//! `_replicator` job), what each node runs (for `_scheduler` and
//! `_active_tasks` on every node), and values every node shares (the cookie
//! secret, admins). Apart from [`crate::backend::StoreBackend`] because a
//! backend that serves a single node has nothing to coordinate: its answers
//! are fixed (every lease granted, no other node, nothing shared).

use crate::StoreError;

/// Coordination between the nodes that share a store's databases.
pub trait Coordination: Send + Sync + std::fmt::Debug {
    /// A value every node of the server shares (a cookie secret): the one
    /// stored, or `fresh` stored now when there is none. `None` when the
    /// backend serves this node alone (its data folder keeps such values).
    fn shared_value(&self, key: &str, fresh: &str) -> Result<Option<String>, StoreError>;
    /// Whether other processes (nodes) may serve the same databases.
    fn is_shared(&self) -> bool;
    /// Takes or renews the lease `key` for `holder` until `ttl` from now:
    /// true when `holder` has it, false when another holder's lease has not
    /// run out. Nodes sharing the store run a `_replicator` job only while
    /// they hold its lease. A backend that serves one node grants every lease.
    fn lease(&self, key: &str, holder: &str, ttl: std::time::Duration) -> Result<bool, StoreError>;
    /// Gives a lease up (a stopped job), so another node need not wait for
    /// it to run out.
    fn release_lease(&self, key: &str, holder: &str) -> Result<(), StoreError>;
    /// Publishes what `node` runs (its `_scheduler` entries, as JSON text by
    /// key), replacing what it published before, for the other nodes to show.
    fn publish_node_state(
        &self,
        node: &str,
        entries: &[(String, String)],
    ) -> Result<(), StoreError>;
    /// What the other nodes published within `fresh`: node, key and JSON
    /// text. Nothing where no other node can share the store.
    fn other_nodes_state(
        &self,
        node: &str,
        fresh: std::time::Duration,
    ) -> Result<Vec<(String, String, String)>, StoreError>;
    /// The shared values whose keys start with `prefix`, by key.
    fn shared_values(&self, prefix: &str) -> Result<Vec<(String, String)>, StoreError>;
    /// Sets (or, with `None`, removes) a shared value.
    fn set_shared_value(&self, key: &str, value: Option<&str>) -> Result<(), StoreError>;
}
