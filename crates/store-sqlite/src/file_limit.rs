//! A warning at start: SQLite holds files per open database, and the
//! process's limit on open files may be lower than `max_dbs_open` needs.

/// File descriptors an open database holds in the common case: its pooled
/// reader's database file and write-ahead log, the shared-memory index, and
/// a writer connection's two while it is written.
const FDS_PER_OPEN_DB: u64 = 5;

/// Warns when the process's limit on open files (`ulimit -n`, often 1024)
/// is too low for `max_dbs_open`: opening databases would fail with "too
/// many open files" long before the limit closes any. (Linux: read from
/// `/proc`; elsewhere nothing is checked.)
pub(crate) fn check_file_limit(max_dbs_open: usize) {
    let Ok(limits) = std::fs::read_to_string("/proc/self/limits") else {
        return;
    };
    // "unlimited" does not parse: nothing to warn about.
    let Some(soft) = limits
        .lines()
        .find_map(|line| line.strip_prefix("Max open files"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|value| value.parse::<u64>().ok())
    else {
        return;
    };
    let needed = (max_dbs_open as u64).saturating_mul(FDS_PER_OPEN_DB) + 100;
    if soft < needed {
        tracing::warn!(
            max_dbs_open,
            open_files_limit = soft,
            needed,
            "the process may open too few files for max_dbs_open databases: raise `ulimit -n` or lower max_dbs_open"
        );
    }
}
