use super::*;

const T0: u64 = 1_767_225_600; // 2026-01-01T00:00:00Z
const RES: u64 = DEFAULT_RESOLUTION;

#[test]
fn bins_start_on_the_resolution_and_only_move_forward() {
    let mut ts = TimeSeq::default();
    assert!(ts.update(T0 + 100, 0, RES));
    assert_eq!(ts.bins(), &[(T0, 0)]);
    // Same interval: nothing changes.
    assert!(!ts.update(T0 + 200, 5, RES));
    // Next interval: a new bin with the sequence before its first commit.
    assert!(ts.update(T0 + RES + 1, 7, RES));
    assert_eq!(ts.bins(), &[(T0 + RES, 7), (T0, 0)]);
    // A clock set back, or a sequence that did not move: ignored.
    assert!(!ts.update(T0, 9, RES));
    assert!(!ts.update(T0 + 5 * RES, 7, RES));
    // Before the minimum time: ignored.
    assert!(!TimeSeq::default().update(1000, 1, RES));
}

#[test]
fn since_errs_towards_earlier_sequences() {
    let mut ts = TimeSeq::default();
    ts.update(T0, 0, RES);
    ts.update(T0 + RES, 10, RES);
    ts.update(T0 + 3 * RES, 20, RES);
    // Before every bin: from the start.
    assert_eq!(ts.since(T0 as i64 - 1, RES), Since::Seq(0));
    assert_eq!(ts.since(-5, RES), Since::Seq(0));
    // Inside a bin: from that bin's start.
    assert_eq!(ts.since((T0 + RES + 60) as i64, RES), Since::Seq(10));
    assert_eq!(ts.since((T0 + 2 * RES) as i64, RES), Since::Seq(10));
    assert_eq!(ts.since((T0 + 3 * RES + 5) as i64, RES), Since::Seq(20));
    // Past the newest bin's interval: nothing since.
    assert_eq!(ts.since((T0 + 4 * RES + 1) as i64, RES), Since::Now);
    assert_eq!(TimeSeq::default().since(T0 as i64, RES), Since::Seq(0));
}

#[test]
fn histogram_counts_changes_per_bin_oldest_first() {
    let mut ts = TimeSeq::default();
    ts.update(T0, 3, RES);
    ts.update(T0 + RES, 10, RES);
    assert_eq!(ts.histogram(12), vec![(0, 3), (T0, 7), (T0 + RES, 2)]);
    assert_eq!(TimeSeq::default().histogram(5), vec![]);
}

#[test]
fn full_bins_roll_up_old_ones_and_keep_recent_detail() {
    let mut ts = TimeSeq::default();
    let mut seq = 0;
    // One commit every 3 hours for a year.
    for i in 0..(365 * 8) {
        seq += 1;
        ts.update(T0 + i * RES, seq, RES);
        assert!(ts.bins().len() <= MAX_BINS);
        // Newest first, strictly.
        assert!(
            ts.bins()
                .windows(2)
                .all(|w| w[0].0 > w[1].0 && w[0].1 > w[1].1)
        );
    }
    let newest = ts.bins()[0].0;
    // The last day is still in 3 hour bins.
    assert_eq!(ts.bins()[1].0, newest - RES);
    // The first bin is never lost: a time before it still reads 0.
    assert_eq!(ts.bins().last().map(|b| b.1), Some(1));
}

#[test]
fn stored_form_round_trips_and_bad_text_is_empty() {
    let mut ts = TimeSeq::default();
    ts.update(T0, 4, RES);
    assert_eq!(TimeSeq::decode(Some(&ts.encode())), ts);
    assert_eq!(TimeSeq::decode(Some("nope")), TimeSeq::default());
    assert_eq!(TimeSeq::decode(None), TimeSeq::default());
}

#[test]
fn times_are_read_and_written_in_couchdbs_one_format() {
    assert_eq!(parse_time("2026-01-01T00:00:00Z"), Some(Ok(T0 as i64)));
    assert_eq!(format_time(T0), "2026-01-01T00:00:00Z");
    assert_eq!(format_time(0), "1970-01-01T00:00:00Z");
    assert_eq!(
        parse_time("2024-02-29T23:59:59Z").map(|t| t.map(|t| format_time(t as u64))),
        Some(Ok("2024-02-29T23:59:59Z".into()))
    );
    assert!(matches!(parse_time("1000-01-01T01:01:01Z"), Some(Ok(t)) if t < 0));
    assert_eq!(parse_time("2025-01-01Txx:yy:00Z"), Some(Err(InvalidTime)));
    assert_eq!(parse_time("2025-02-30T00:00:00Z"), Some(Err(InvalidTime)));
    assert_eq!(parse_time("2025-01-01T24:00:00Z"), Some(Err(InvalidTime)));
    assert_eq!(parse_time("12-abc"), None);
    assert_eq!(parse_time("2025-01-01T00:00:00+01:00"), None);
}
