//! Automatic purging of deleted documents (CouchDB's next release, its
//! `couch_auto_purge_plugin`): every interval, each database whose
//! `deleted_document_ttl` (its own `_auto_purge` setting, else the
//! server's) is a period has its deleted documents purged once their
//! deletion is older than it. Purged through [`Database::purge`], the
//! one path `_purge` takes, so views and `_purged_infos` follow.
//!
//! How old a change is comes from the time bins ([`crate::time_seq`]):
//! only changes up to the sequence the database had at `now - ttl`, as the
//! bins tell it, are looked at. The bins err towards earlier sequences, so
//! a document may be kept past its time, never purged early.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::time_seq::{Since, now};
use crate::{ChangesQuery, Database, PurgeRequest, Store, StoreError};

/// The metadata key of a database's `_auto_purge` settings.
const META_KEY: &str = "auto_purge";

/// The setting's name, in `_auto_purge` and the server's configuration.
pub const TTL_KEY: &str = "deleted_document_ttl";

/// Documents per purge (CouchDB's `_purge` takes at most 100).
const PURGE_BATCH: usize = 100;

/// A parsed `deleted_document_ttl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ttl {
    /// Purge deletions older than this many seconds.
    Seconds(u64),
    /// Never purge (a database opting out of the server's default).
    Infinity,
}

/// CouchDB's periods: `{number}_{unit}` with a positive integer and one of
/// `s sec second seconds`, `min minute minutes`, `h hrs hour hours`,
/// `d day days`, `w week weeks`, `mon month months` (30 days),
/// `y year years` (365 days); or `infinity`.
pub fn parse_ttl(text: &str) -> Option<Ttl> {
    if text == "infinity" {
        return Some(Ttl::Infinity);
    }
    let (number, unit) = text.split_once('_')?;
    let unit: u64 = match unit {
        "s" | "sec" | "second" | "seconds" => 1,
        "min" | "minute" | "minutes" => 60,
        "h" | "hrs" | "hour" | "hours" => 3600,
        "d" | "day" | "days" => 86_400,
        "w" | "week" | "weeks" => 7 * 86_400,
        "mon" | "month" | "months" => 30 * 86_400,
        "y" | "year" | "years" => 365 * 86_400,
        _ => return None,
    };
    let digits = number.strip_prefix('+').unwrap_or(number);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    (n > 0).then(|| Ttl::Seconds(n.saturating_mul(unit)))
}

/// Why `PUT /{db}/_auto_purge` refused a body (CouchDB's reasons).
pub fn check_props(props: &Value) -> Result<&Map<String, Value>, &'static str> {
    let Value::Object(props) = props else {
        return Err("malformed auto purge body");
    };
    for (key, value) in props {
        if key != TTL_KEY {
            return Err("invalid auto purge property");
        }
        match value {
            Value::String(ttl) if parse_ttl(ttl).is_some() => {}
            _ => return Err("deleted_document_ttl must be a valid string"),
        }
    }
    Ok(props)
}

impl Database {
    /// The database's `_auto_purge` settings (`{}` when never set).
    pub async fn auto_purge_props(&self) -> Result<Map<String, Value>, StoreError> {
        self.read(|rows| {
            Ok(rows
                .meta(META_KEY)?
                .and_then(|text| serde_json::from_str(&text).ok())
                .unwrap_or_default())
        })
        .await
    }

    /// Replaces the `_auto_purge` settings, checked by [`check_props`].
    pub async fn set_auto_purge_props(&self, props: Map<String, Value>) -> Result<(), StoreError> {
        check_props(&Value::Object(props.clone())).map_err(StoreError::bad_request)?;
        let text = Value::Object(props).to_string();
        self.write(1, move |ctx| {
            ctx.rows.set_meta(META_KEY, &text)?;
            Ok(())
        })
        .await
    }

    /// Purges the deleted documents whose deletion is older than `ttl`
    /// seconds, as far as the time bins tell; how many were purged.
    pub async fn purge_deleted_older_than(&self, ttl: u64) -> Result<usize, StoreError> {
        let cutoff = now().saturating_sub(ttl) as i64;
        let resolution = self.live_settings().time_seq_resolution();
        let end = match self.time_seq().await?.since(cutoff, resolution) {
            Since::Seq(seq) => seq,
            Since::Now => self.update_seq(),
        };
        let mut since = 0;
        let mut purged = 0;
        while since < end {
            let page = self
                .changes(ChangesQuery {
                    since,
                    limit: 1000,
                    all_leaves: true,
                    ..ChangesQuery::default()
                })
                .await?;
            let mut batch = Vec::new();
            for row in page.rows.iter().filter(|r| r.seq <= end && r.deleted) {
                batch.push(PurgeRequest {
                    id: row.id.clone(),
                    revs: row.changes.clone(),
                    recorded: row.changes.iter().map(ToString::to_string).collect(),
                });
            }
            for chunk in batch.chunks(PURGE_BATCH) {
                // A document written again since the scan keeps its new
                // leaf: only the leaves named here go, and only if still
                // leaves.
                purged += self
                    .purge(chunk.to_vec())
                    .await?
                    .iter()
                    .filter(|r| !r.purged.is_empty())
                    .count();
            }
            if page.rows.is_empty() || page.last_seq <= since {
                break;
            }
            since = page.last_seq;
        }
        Ok(purged)
    }
}

impl Store {
    /// Purges old deleted documents of every database, each interval,
    /// until `stop` turns true. Among nodes sharing the databases, the
    /// node (`node`) holding the `auto_purge` lease does it.
    pub async fn purge_automatically(
        &self,
        interval: Duration,
        node: &str,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = async { stop.wait_for(|s| *s).await.is_ok() } => return,
            }
            // Held past the next round, so the same node keeps it while
            // it lives and another takes over when it stops.
            let lease = interval.saturating_mul(2).max(Duration::from_secs(15));
            match self.lease("auto_purge", node, lease).await {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "automatic purge could not take its lease");
                    continue;
                }
            }
            let names = match self.all_dbs().await {
                Ok(names) => names,
                Err(e) => {
                    tracing::warn!(error = %e, "automatic purge could not list databases");
                    continue;
                }
            };
            for name in names {
                if *stop.borrow() {
                    return;
                }
                if let Err(e) = self.auto_purge_db(&name).await {
                    tracing::warn!(db = %name, error = %e, "automatic purge failed");
                }
            }
        }
    }

    /// One database's turn: its own TTL, else the server's.
    async fn auto_purge_db(&self, name: &str) -> Result<(), StoreError> {
        let db = match self.db(name).await {
            Ok(db) => db,
            // Deleted since it was listed.
            Err(StoreError::DbNotFound(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        let own = db.auto_purge_props().await?;
        let ttl = match own.get(TTL_KEY).and_then(Value::as_str).and_then(parse_ttl) {
            Some(ttl) => Some(ttl),
            None => self
                .inner
                .live
                .auto_purge_ttl
                .read()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .as_deref()
                .and_then(parse_ttl),
        };
        let Some(Ttl::Seconds(ttl)) = ttl else {
            return Ok(());
        };
        let purged = db.purge_deleted_older_than(ttl).await?;
        if purged > 0 {
            tracing::info!(db = %name, purged, "purged deleted documents automatically");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn periods_are_read_in_couchdbs_units() {
        assert_eq!(parse_ttl("3_mon"), Some(Ttl::Seconds(3 * 30 * 86_400)));
        assert_eq!(parse_ttl("1000_sec"), Some(Ttl::Seconds(1000)));
        assert_eq!(parse_ttl("8_hours"), Some(Ttl::Seconds(8 * 3600)));
        assert_eq!(parse_ttl("2_w"), Some(Ttl::Seconds(14 * 86_400)));
        assert_eq!(parse_ttl("1_y"), Some(Ttl::Seconds(365 * 86_400)));
        assert_eq!(parse_ttl("infinity"), Some(Ttl::Infinity));
        for bad in [
            "",
            "3",
            "3_",
            "_days",
            "0_days",
            "-3_days",
            "3_fortnights",
            "x_days",
            "3_days_x",
        ] {
            assert_eq!(parse_ttl(bad), None, "{bad}");
        }
    }

    #[test]
    fn bodies_are_checked_with_couchdbs_reasons() {
        assert!(check_props(&json!({})).is_ok());
        assert!(check_props(&json!({"deleted_document_ttl": "3_mon"})).is_ok());
        assert_eq!(check_props(&json!([])), Err("malformed auto purge body"));
        assert_eq!(
            check_props(&json!({"x": "3_mon"})),
            Err("invalid auto purge property")
        );
        for bad in [
            json!({"deleted_document_ttl": 5}),
            json!({"deleted_document_ttl": "soon"}),
        ] {
            assert_eq!(
                check_props(&bad),
                Err("deleted_document_ttl must be a valid string")
            );
        }
    }
}
