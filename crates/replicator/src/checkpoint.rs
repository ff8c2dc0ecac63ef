//! Replication checkpoints: the log written as `_local/<replication id>` on
//! both peers, how two logs are compared to find where to resume, and the
//! tracker that keeps the checkpointed sequence from running ahead of
//! batches still in flight.

use std::collections::VecDeque;

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

/// Keeps the checkpoint honest when batches finish out of order: the safe
/// sequence is the end of the longest run of finished batches from the
/// start, so no change after an unfinished batch is ever recorded as done.
#[derive(Debug, Default)]
pub struct SeqTracker {
    next_id: u64,
    /// Batches in the order their changes were read: (id, last seq, done).
    in_order: VecDeque<(u64, Value, bool)>,
    safe: Option<Value>,
}

/// A batch handed to a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchId(u64);

impl SeqTracker {
    pub fn new() -> SeqTracker {
        SeqTracker::default()
    }

    /// Registers the next batch read from the changes feed, ending at `last_seq`.
    pub fn start(&mut self, last_seq: Value) -> BatchId {
        let id = self.next_id;
        self.next_id += 1;
        self.in_order.push_back((id, last_seq, false));
        BatchId(id)
    }

    /// Marks a batch written (or its failures counted); advances the safe
    /// sequence over every finished batch at the front.
    pub fn finish(&mut self, batch: BatchId) {
        if let Some(entry) = self.in_order.iter_mut().find(|(id, _, _)| *id == batch.0) {
            entry.2 = true;
        }
        while self.in_order.front().is_some_and(|(_, _, done)| *done) {
            if let Some((_, seq, _)) = self.in_order.pop_front() {
                self.safe = Some(seq);
            }
        }
    }

    /// The highest sequence such that every change at or before it is done.
    pub fn safe_seq(&self) -> Option<&Value> {
        self.safe.as_ref()
    }

    /// Batches started and not yet finished.
    pub fn in_flight(&self) -> usize {
        self.in_order.iter().filter(|(_, _, done)| !done).count()
    }
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
    fn the_safe_seq_never_passes_an_unfinished_batch() {
        let mut t = SeqTracker::new();
        let a = t.start(json!(10));
        let b = t.start(json!(20));
        let c = t.start(json!(30));
        t.finish(c);
        assert_eq!(t.safe_seq(), None, "30 is done but 10 and 20 are not");
        t.finish(a);
        assert_eq!(t.safe_seq(), Some(&json!(10)));
        assert_eq!(t.in_flight(), 1);
        t.finish(b);
        assert_eq!(t.safe_seq(), Some(&json!(30)));
        assert_eq!(t.in_flight(), 0);
    }

    proptest::proptest! {
        #[test]
        fn batches_finishing_in_any_order_never_let_the_checkpoint_run_ahead(
            order in proptest::collection::vec(0usize..1000, 1..40)
        ) {
            // Batch k ends at sequence (k + 1) * 10; finish them in a shuffled order.
            let n = order.len();
            let mut t = SeqTracker::new();
            let ids: Vec<BatchId> = (0..n).map(|k| t.start(json!((k + 1) * 10))).collect();
            let mut perm: Vec<usize> = (0..n).collect();
            for (i, r) in order.iter().enumerate() {
                perm.swap(i, r % n);
            }
            let mut done = vec![false; n];
            for &k in &perm {
                t.finish(ids[k]);
                done[k] = true;
                let prefix = done.iter().take_while(|d| **d).count();
                let expected = (prefix > 0).then(|| json!(prefix * 10));
                proptest::prop_assert_eq!(t.safe_seq().cloned(), expected);
            }
            proptest::prop_assert_eq!(t.in_flight(), 0);
        }
    }
}
