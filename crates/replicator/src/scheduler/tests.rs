//! The scheduler's rules of crashes, backoff and completion.

use super::*;

fn history(events: &[(u64, EventKind)]) -> VecDeque<Event> {
    // `events` oldest first, at seconds from a base instant.
    let base = Instant::now();
    let mut h = VecDeque::new();
    for (secs, kind) in events {
        h.push_front(Event {
            at: SystemTime::now(),
            at_instant: base + Duration::from_secs(*secs),
            kind: kind.clone(),
        });
    }
    h
}

fn crashed() -> EventKind {
    EventKind::Crashed("boom".into())
}

#[test]
fn quick_crashes_in_a_row_count_and_a_healthy_run_resets_them() {
    let t = Duration::from_secs(120);
    use EventKind::*;
    assert_eq!(consecutive_crashes(&history(&[(0, Added)]), t), 0);
    assert_eq!(
        consecutive_crashes(&history(&[(0, Added), (1, Started), (2, crashed())]), t),
        1
    );
    assert_eq!(
        consecutive_crashes(
            &history(&[
                (0, Added),
                (1, Started),
                (2, crashed()),
                (40, Started),
                (41, crashed()),
                (100, Started),
                (101, crashed()),
            ]),
            t
        ),
        3
    );
    // Ran 1000 s before crashing: healthy, the streak is over.
    assert_eq!(
        consecutive_crashes(
            &history(&[
                (0, Added),
                (1, Started),
                (2, crashed()),
                (40, Started),
                (1040, crashed())
            ]),
            t
        ),
        0
    );
    // A normal stop after a start ends the streak.
    assert_eq!(
        consecutive_crashes(
            &history(&[
                (0, Added),
                (1, Started),
                (2, crashed()),
                (40, Started),
                (50, Stopped)
            ]),
            t
        ),
        0
    );
}

#[test]
fn backoff_starts_at_the_base_doubles_and_is_capped() {
    let config = SchedulerConfig::default();
    assert_eq!(backoff(&config, 0), Duration::ZERO);
    assert_eq!(backoff(&config, 1), Duration::from_secs(30));
    assert_eq!(backoff(&config, 2), Duration::from_secs(60));
    assert_eq!(backoff(&config, 3), Duration::from_secs(120));
    assert_eq!(backoff(&config, 11), Duration::from_secs(30 * 1024));
    assert_eq!(backoff(&config, 50), Duration::from_secs(30 * 1024));
}

#[test]
fn completion_stats_come_from_the_newest_history_entry() {
    let log = json!({"source_last_seq": 7, "history": [
        {"missing_checked": 5, "missing_found": 4, "docs_read": 4, "docs_written": 3, "doc_write_failures": 1},
        {"missing_checked": 1, "missing_found": 1, "docs_read": 1, "docs_written": 1, "doc_write_failures": 0},
    ]});
    assert_eq!(
        completion_stats(&log),
        json!({"revisions_checked": 5, "missing_revisions_found": 4, "docs_read": 4,
               "docs_written": 3, "doc_write_failures": 1, "checkpointed_source_seq": 7})
    );
}
