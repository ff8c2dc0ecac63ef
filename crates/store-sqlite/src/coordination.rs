//! A data folder of SQLite files serves one node: nothing to coordinate.

use std::time::Duration;

use store::{Coordination, StoreError};

use crate::SqliteStore;

/// The answers of a node alone: every lease is its own, no other node
/// publishes anything, and shared values live in the data folder instead.
impl Coordination for SqliteStore {
    fn shared_value(&self, _key: &str, _fresh: &str) -> Result<Option<String>, StoreError> {
        Ok(None)
    }

    fn is_shared(&self) -> bool {
        false
    }

    fn lease(&self, _key: &str, _holder: &str, _ttl: Duration) -> Result<bool, StoreError> {
        Ok(true)
    }

    fn release_lease(&self, _key: &str, _holder: &str) -> Result<(), StoreError> {
        Ok(())
    }

    fn publish_node_state(
        &self,
        _node: &str,
        _entries: &[(String, String)],
    ) -> Result<(), StoreError> {
        Ok(())
    }

    fn other_nodes_state(
        &self,
        _node: &str,
        _fresh: Duration,
    ) -> Result<Vec<(String, String, String)>, StoreError> {
        Ok(Vec::new())
    }

    fn shared_values(&self, _prefix: &str) -> Result<Vec<(String, String)>, StoreError> {
        Ok(Vec::new())
    }

    fn set_shared_value(&self, _key: &str, _value: Option<&str>) -> Result<(), StoreError> {
        Ok(())
    }
}
