//! Coordination of the nodes sharing one PostgreSQL database: leases,
//! what each node runs, and shared values, in tables every node reads.

use store::{Coordination, StoreError};

use crate::PostgresStore;
use crate::text::Text;

impl Coordination for PostgresStore {
    fn shared_value(&self, key: &str, fresh: &str) -> Result<Option<String>, StoreError> {
        let mut conn = self.pool.get()?;
        conn.execute(
            "INSERT INTO recliner_server (key, value) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            &[&Text(key), &Text(fresh)],
        )?;
        let row = conn.query_one(
            "SELECT value FROM recliner_server WHERE key = $1",
            &[&Text(key)],
        )?;
        Ok(Some(row.text(0)?))
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn lease(&self, key: &str, holder: &str, ttl: std::time::Duration) -> Result<bool, StoreError> {
        // PostgreSQL's clock decides expiry: the nodes' clocks may differ.
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        let row = self.pool.get()?.query_opt(
            "INSERT INTO recliner_leases (key, holder, expires)
             VALUES ($1, $2, now() + $3 * interval '1 millisecond')
             ON CONFLICT (key) DO UPDATE SET holder = EXCLUDED.holder, expires = EXCLUDED.expires
             WHERE recliner_leases.holder = EXCLUDED.holder OR recliner_leases.expires < now()
             RETURNING holder",
            &[&Text(key), &Text(holder), &(ttl_ms as f64)],
        )?;
        Ok(row.is_some())
    }

    fn release_lease(&self, key: &str, holder: &str) -> Result<(), StoreError> {
        self.pool.get()?.execute(
            "DELETE FROM recliner_leases WHERE key = $1 AND holder = $2",
            &[&Text(key), &Text(holder)],
        )?;
        Ok(())
    }

    fn publish_node_state(
        &self,
        node: &str,
        entries: &[(String, String)],
    ) -> Result<(), StoreError> {
        let mut conn = self.pool.get()?;
        conn.batch("BEGIN")?;
        let written = (|| {
            conn.execute(
                "DELETE FROM recliner_node_state WHERE node = $1",
                &[&Text(node)],
            )?;
            for (key, value) in entries {
                conn.execute(
                    "INSERT INTO recliner_node_state (node, key, value, updated) VALUES ($1, $2, $3, now())",
                    &[&Text(node), &Text(key), &Text(value)],
                )?;
            }
            // A node that runs nothing still says it is alive.
            conn.execute(
                "INSERT INTO recliner_node_state (node, key, value, updated) VALUES ($1, '', '', now())",
                &[&Text(node)],
            )?;
            Ok(())
        })();
        match written {
            Ok(()) => conn.batch("COMMIT"),
            Err(e) => {
                if conn.batch("ROLLBACK").is_err() {
                    conn.broken = true;
                }
                Err(e)
            }
        }
    }

    fn other_nodes_state(
        &self,
        node: &str,
        fresh: std::time::Duration,
    ) -> Result<Vec<(String, String, String)>, StoreError> {
        let fresh_ms = fresh.as_millis() as f64;
        self.pool
            .get()?
            .query(
                "SELECT node, key, value FROM recliner_node_state
                 WHERE node <> $1 AND key <> '' AND updated > now() - $2 * interval '1 millisecond'
                 ORDER BY node, key",
                &[&Text(node), &fresh_ms],
            )?
            .iter()
            .map(|row| Ok((row.text(0)?, row.text(1)?, row.text(2)?)))
            .collect()
    }

    fn shared_values(&self, prefix: &str) -> Result<Vec<(String, String)>, StoreError> {
        // By range rather than LIKE: a prefix may hold `%` or `_`.
        let end = format!("{prefix}\u{10FFFF}");
        self.pool
            .get()?
            .query(
                "SELECT key, value FROM recliner_server WHERE key >= $1 AND key < $2 ORDER BY key",
                &[&Text(prefix), &Text(&end)],
            )?
            .iter()
            .map(|row| Ok((row.text(0)?, row.text(1)?)))
            .collect()
    }

    fn set_shared_value(&self, key: &str, value: Option<&str>) -> Result<(), StoreError> {
        let mut conn = self.pool.get()?;
        match value {
            Some(value) => conn.execute(
                "INSERT INTO recliner_server (key, value) VALUES ($1, $2)
                 ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                &[&Text(key), &Text(value)],
            )?,
            None => conn.execute("DELETE FROM recliner_server WHERE key = $1", &[&Text(key)])?,
        };
        Ok(())
    }
}
