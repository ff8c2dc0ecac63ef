//! The date formats CouchDB writes: the HTTP date of checkpoint histories,
//! the cookie date of `Set-Cookie`, and RFC 3339 of replication states.
//! Computed here once from the Unix time, without a calendar dependency.

use std::time::{SystemTime, UNIX_EPOCH};

const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// UTC calendar fields of a time (Howard Hinnant's algorithm).
struct Civil {
    year: i64,
    month: usize,
    day: i64,
    hour: u64,
    minute: u64,
    second: u64,
    /// Counted from Thursday, 1970-01-01's weekday.
    weekday: usize,
}

fn civil(t: SystemTime) -> Civil {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = (secs / 86_400) as i64;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    Civil {
        year: yoe + era * 400 + i64::from(month <= 2),
        month: month as usize,
        day,
        hour: (secs % 86_400) / 3600,
        minute: (secs % 3600) / 60,
        second: secs % 60,
        weekday: days.rem_euclid(7) as usize,
    }
}

/// `Sun, 22 Nov 2026 03:58:10 GMT`, as in CouchDB's checkpoint histories.
pub fn http_date(t: SystemTime) -> String {
    gmt(t, ' ')
}

/// `Mon, 23-Nov-2026 20:44:31 GMT`, the `Expires` of CouchDB's cookies.
pub fn cookie_date(t: SystemTime) -> String {
    gmt(t, '-')
}

/// The two GMT forms, which differ only in what separates day, month and year.
fn gmt(t: SystemTime, separator: char) -> String {
    let c = civil(t);
    format!(
        "{}, {:02}{separator}{}{separator}{} {:02}:{:02}:{:02} GMT",
        WEEKDAYS[c.weekday],
        c.day,
        MONTHS[c.month - 1],
        c.year,
        c.hour,
        c.minute,
        c.second
    )
}

/// `24/Nov/2026:08:40:00 +0000`, the time of access-log lines (Apache's
/// common and combined log formats).
pub fn access_log_date(t: SystemTime) -> String {
    let c = civil(t);
    format!(
        "{:02}/{}/{}:{:02}:{:02}:{:02} +0000",
        c.day,
        MONTHS[c.month - 1],
        c.year,
        c.hour,
        c.minute,
        c.second
    )
}

/// `2026-11-22T03:13:34Z`, as CouchDB writes `_replication_state_time`.
pub fn rfc3339(t: SystemTime) -> String {
    let c = civil(t);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + std::time::Duration::from_secs(secs)
    }

    #[test]
    fn each_format_matches_couchdbs() {
        assert_eq!(
            cookie_date(at(1_795_466_671)),
            "Mon, 23-Nov-2026 20:44:31 GMT"
        );
        assert_eq!(
            http_date(at(1_795_466_671)),
            "Mon, 23 Nov 2026 20:44:31 GMT"
        );
        assert_eq!(rfc3339(at(1_795_466_671)), "2026-11-23T20:44:31Z");
        assert_eq!(
            rfc3339(at(951_782_400)),
            "2000-02-29T00:00:00Z",
            "a leap day"
        );
        assert_eq!(http_date(at(0)), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(access_log_date(at(0)), "01/Jan/1970:00:00:00 +0000");
        assert_eq!(
            access_log_date(at(1_795_509_600)),
            "24/Nov/2026:08:40:00 +0000"
        );
        assert_eq!(
            http_date(at(1_795_317_214)),
            "Sun, 22 Nov 2026 03:13:34 GMT"
        );
        assert_eq!(rfc3339(at(1_795_317_214)), "2026-11-22T03:13:34Z");
    }
}
