//! Replication checkpoints: the log written as `_local/<replication id>` on
//! both peers, and how two logs are compared to find where to resume. (What
//! keeps a checkpoint from running ahead of writes still in flight is the
//! job's queue of writes, settled oldest first: see `job`.)

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How many sessions a checkpoint remembers: CouchDB keeps 50.
pub const HISTORY_SIZE: usize = 50;

/// One session in a checkpoint's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub session_id: String,
    #[serde(default)]
    pub start_time: String,
    #[serde(default)]
    pub end_time: String,
    #[serde(default)]
    pub start_last_seq: Value,
    #[serde(default)]
    pub end_last_seq: Value,
    #[serde(default)]
    pub recorded_seq: Value,
    #[serde(default)]
    pub missing_checked: u64,
    #[serde(default)]
    pub missing_found: u64,
    #[serde(default)]
    pub docs_read: u64,
    #[serde(default)]
    pub docs_written: u64,
    #[serde(default)]
    pub doc_write_failures: u64,
}

impl HistoryEntry {
    /// The session's figures CouchDB also puts at the top of a `doc_ids`
    /// replication's answer.
    pub fn put_figures(&self, answer: &mut Value) {
        answer["start_time"] = Value::from(self.start_time.clone());
        answer["end_time"] = Value::from(self.end_time.clone());
        answer["docs_read"] = Value::from(self.docs_read);
        answer["docs_written"] = Value::from(self.docs_written);
        answer["doc_write_failures"] = Value::from(self.doc_write_failures);
    }
}

/// The checkpoint document (without `_id`/`_rev`), as CouchDB writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplicationLog {
    pub session_id: String,
    pub source_last_seq: Value,
    #[serde(default)]
    pub replication_id_version: u64,
    #[serde(default)]
    pub history: Vec<HistoryEntry>,
}

impl ReplicationLog {
    /// A log with `entry` as the newest session, keeping at most
    /// [`HISTORY_SIZE`] sessions.
    pub fn with_session(
        previous: &[HistoryEntry],
        entry: HistoryEntry,
        source_last_seq: Value,
        version: u64,
    ) -> ReplicationLog {
        let mut history = Vec::with_capacity(HISTORY_SIZE);
        let session_id = entry.session_id.clone();
        history.push(entry);
        history.extend(
            previous
                .iter()
                .filter(|h| h.session_id != session_id)
                .take(HISTORY_SIZE - 1)
                .cloned(),
        );
        ReplicationLog {
            session_id,
            source_last_seq,
            replication_id_version: version,
            history,
        }
    }
}

/// Where to resume, and the history to carry forward.
#[derive(Debug, Clone, PartialEq)]
pub struct Resume {
    /// The source sequence to read changes after (`0` for from scratch).
    pub since: Value,
    pub history: Vec<HistoryEntry>,
}

fn from_scratch() -> Resume {
    Resume {
        since: Value::from(0),
        history: Vec::new(),
    }
}

/// CouchDB's comparison of the source's and the target's checkpoints:
/// the same session means both recorded the same point; otherwise the
/// newest session both histories share gives its `recorded_seq`; no shared
/// session means starting from scratch.
pub fn compare_logs(source: Option<&ReplicationLog>, target: Option<&ReplicationLog>) -> Resume {
    let (Some(source), Some(target)) = (source, target) else {
        return from_scratch();
    };
    if source.session_id == target.session_id {
        return Resume {
            since: source.source_last_seq.clone(),
            history: source.history.clone(),
        };
    }
    compare_history(&source.history, &target.history)
}

fn compare_history(source: &[HistoryEntry], target: &[HistoryEntry]) -> Resume {
    let (Some(s), Some(t)) = (source.first(), target.first()) else {
        return from_scratch();
    };
    if target.iter().any(|h| h.session_id == s.session_id) {
        return Resume {
            since: s.recorded_seq.clone(),
            history: source[1..].to_vec(),
        };
    }
    if source[1..].iter().any(|h| h.session_id == t.session_id) {
        return Resume {
            since: t.recorded_seq.clone(),
            history: target[1..].to_vec(),
        };
    }
    compare_history(&source[1..], &target[1..])
}

/// A checkpoint document as a peer holds it: its `_rev` (a `_local`
/// document's `0-N`, kept as text: it is no revision-tree id) and its log.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoredLog {
    pub rev: Option<String>,
    pub log: Option<ReplicationLog>,
}

impl StoredLog {
    /// Reads a checkpoint document (`None`: there is none). A log that does
    /// not parse (another replicator's, or damaged) counts as no log: the
    /// replication starts over rather than trusting it, as CouchDB does;
    /// its `_rev` is still kept, so the next checkpoint replaces it.
    pub fn read(doc: Option<Value>) -> StoredLog {
        #[derive(Deserialize)]
        struct Rev {
            #[serde(rename = "_rev", default)]
            rev: Option<String>,
        }
        let Some(doc) = doc else {
            return StoredLog::default();
        };
        let rev = Rev::deserialize(&doc).ok().and_then(|r| r.rev);
        let log = match serde_json::from_value::<ReplicationLog>(doc) {
            Ok(log) => Some(log),
            Err(e) => {
                tracing::warn!(error = %e, "ignoring a checkpoint that does not parse");
                None
            }
        };
        StoredLog { rev, log }
    }
}

/// A checkpoint document as written: the log, with the `_rev` it replaces.
#[derive(Debug, Serialize)]
pub struct LogDoc<'a> {
    #[serde(rename = "_rev", skip_serializing_if = "Option::is_none")]
    pub rev: Option<&'a str>,
    #[serde(flatten)]
    pub log: &'a ReplicationLog,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn entry(session: &str, recorded: u64) -> HistoryEntry {
        HistoryEntry {
            session_id: session.into(),
            start_time: String::new(),
            end_time: String::new(),
            start_last_seq: json!(0),
            end_last_seq: json!(recorded),
            recorded_seq: json!(recorded),
            missing_checked: 0,
            missing_found: 0,
            docs_read: 0,
            docs_written: 0,
            doc_write_failures: 0,
        }
    }

    fn log(session: &str, last: u64, history: Vec<HistoryEntry>) -> ReplicationLog {
        ReplicationLog {
            session_id: session.into(),
            source_last_seq: json!(last),
            replication_id_version: 4,
            history,
        }
    }

    #[test]
    fn the_same_session_resumes_from_its_last_seq() {
        let s = log("s3", 30, vec![entry("s3", 30), entry("s2", 20)]);
        let t = log("s3", 30, vec![entry("s3", 30)]);
        let resume = compare_logs(Some(&s), Some(&t));
        assert_eq!(resume.since, json!(30));
        assert_eq!(resume.history.len(), 2);
    }

    #[test]
    fn a_common_session_deep_in_history_gives_its_recorded_seq() {
        // The target missed the source's last two sessions (say it was restored from a backup).
        let s = log(
            "s5",
            50,
            vec![
                entry("s5", 50),
                entry("s4", 40),
                entry("s3", 30),
                entry("s2", 20),
            ],
        );
        let t = log(
            "t9",
            99,
            vec![
                entry("t9", 99),
                entry("t8", 88),
                entry("s3", 30),
                entry("s1", 10),
            ],
        );
        let resume = compare_logs(Some(&s), Some(&t));
        assert_eq!(resume.since, json!(30));
        // And in the other direction the same point is found.
        assert_eq!(compare_logs(Some(&t), Some(&s)).since, json!(30));
    }

    #[test]
    fn no_common_history_or_a_missing_log_starts_from_scratch() {
        let s = log("a", 5, vec![entry("a", 5)]);
        let t = log("b", 7, vec![entry("b", 7)]);
        assert_eq!(compare_logs(Some(&s), Some(&t)).since, json!(0));
        assert_eq!(compare_logs(None, Some(&t)).since, json!(0));
        assert_eq!(compare_logs(Some(&s), None).since, json!(0));
        assert_eq!(
            compare_logs(Some(&log("x", 1, vec![])), Some(&log("y", 1, vec![]))).since,
            json!(0)
        );
    }

    #[test]
    fn history_is_capped_at_fifty_sessions_newest_first() {
        let old: Vec<HistoryEntry> = (0..60).map(|i| entry(&format!("s{i}"), i)).collect();
        let log = ReplicationLog::with_session(&old, entry("new", 100), json!(100), 4);
        assert_eq!(log.history.len(), HISTORY_SIZE);
        assert_eq!(log.history[0].session_id, "new");
        assert_eq!(log.history[1].session_id, "s0");
        assert_eq!(log.session_id, "new");
    }

    #[test]
    fn logs_round_trip_through_couchdbs_json() {
        let text = r#"{"session_id":"s","source_last_seq":"12-g1AAA","replication_id_version":4,
            "history":[{"session_id":"s","start_time":"Mon","end_time":"Mon","start_last_seq":0,
            "end_last_seq":"12-g1AAA","recorded_seq":"12-g1AAA","missing_checked":3,"missing_found":3,
            "docs_read":3,"docs_written":3,"doc_write_failures":0}]}"#;
        let log: ReplicationLog = serde_json::from_str(text).unwrap();
        assert_eq!(log.history[0].recorded_seq, json!("12-g1AAA"));
        let back: Value = serde_json::to_value(&log).unwrap();
        assert_eq!(back["history"][0]["docs_written"], 3);
    }

    #[test]
    fn stored_logs_keep_their_rev_and_written_ones_carry_it() {
        let stored = StoredLog::read(Some(json!({
            "_id": "_local/x", "_rev": "0-3", "session_id": "s", "source_last_seq": 5,
            "history": [],
        })));
        assert_eq!(stored.rev.as_deref(), Some("0-3"));
        let log = stored.log.unwrap();
        assert_eq!(log.source_last_seq, json!(5));
        let doc = serde_json::to_value(LogDoc {
            rev: Some("0-3"),
            log: &log,
        })
        .unwrap();
        assert_eq!(
            (&doc["_rev"], &doc["session_id"]),
            (&json!("0-3"), &json!("s"))
        );
        let doc = serde_json::to_value(LogDoc {
            rev: None,
            log: &log,
        })
        .unwrap();
        assert!(doc.get("_rev").is_none());
        // Damaged: no log to trust, but its revision is still replaced.
        let damaged = StoredLog::read(Some(json!({"_rev": "0-9", "history": 3})));
        assert_eq!((damaged.rev.as_deref(), damaged.log), (Some("0-9"), None));
        assert_eq!(StoredLog::read(None), StoredLog::default());
    }
}
