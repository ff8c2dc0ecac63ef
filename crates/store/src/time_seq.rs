//! Time to sequence: which update sequence a database had at a point in
//! time, roughly, so that `_changes?since=<time>` and automatic purging can
//! start from a time instead of a sequence (CouchDB's next release).
//!
//! A database keeps at most [`MAX_BINS`] bins, newest first, each the start
//! time of an interval (rounded down to the resolution, 3 hours) and the
//! sequence committed before the interval's first commit. When the bins
//! are full, old ones are merged into wider ones, so the recent past keeps
//! hours while years ago keeps years. Answers err towards an earlier
//! sequence: a feed from a time may repeat older changes, never miss one.
//!
//! The bins are kept in the database's metadata (`time_seq`), updated in
//! the same transaction as the commit they describe, so they survive a
//! restart, and on any backend.

use std::sync::atomic::Ordering;

use crate::backend::WriteRows;
use crate::{Database, StoreError};

/// The metadata key the bins are kept under.
pub(crate) const META_KEY: &str = crate::backend::TIME_SEQ_META;

/// Bins kept at most (CouchDB's choice: about 1 KB, years of history).
pub const MAX_BINS: usize = 60;

/// The finest interval, in seconds (CouchDB's: 3 hours).
pub const DEFAULT_RESOLUTION: u64 = 3 * HOUR;

/// Commits dated before this (2025-08-01) are ignored: a machine that
/// booted into 1970 must not write bins from the distant past.
pub const MIN_TIME: u64 = 1_754_006_400;

const HOUR: u64 = 3600;
const DAY: u64 = 24 * HOUR;
const MONTH: u64 = 30 * DAY;
const YEAR: u64 = 365 * DAY;

/// The widths bins are merged to, finest first: bins are merged at the
/// finest width that frees room, and only where they are older than the
/// next width, so the recent past keeps its detail.
const INTERVALS: [u64; 12] = [
    3 * HOUR,
    6 * HOUR,
    12 * HOUR,
    DAY,
    10 * DAY,
    MONTH,
    6 * MONTH,
    YEAR,
    2 * YEAR,
    4 * YEAR,
    8 * YEAR,
    16 * YEAR,
];

/// Where a feed from a point in time starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// After this sequence (0: from the start).
    Seq(u64),
    /// After the latest change: nothing was written since that time.
    Now,
}

/// A database's bins: (start time in Unix seconds, sequence before it),
/// newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimeSeq {
    bins: Vec<(u64, u64)>,
}

impl TimeSeq {
    /// The bins as stored; anything unreadable is no bins (the table is a
    /// hint: an empty one makes feeds start earlier, never later).
    pub fn decode(text: Option<&str>) -> TimeSeq {
        let Some(text) = text else {
            return TimeSeq::default();
        };
        let parsed: Option<Vec<(u64, u64)>> = serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .and_then(|v| {
                if v.get("v")?.as_u64()? != 1 {
                    return None;
                }
                v.get("bins")?
                    .as_array()?
                    .iter()
                    .map(|bin| Some((bin.get(0)?.as_u64()?, bin.get(1)?.as_u64()?)))
                    .collect()
            });
        match parsed {
            Some(bins) => TimeSeq { bins },
            None => {
                tracing::warn!("unreadable time_seq metadata; starting it afresh");
                TimeSeq::default()
            }
        }
    }

    /// The stored form, versioned so it can change later.
    pub fn encode(&self) -> String {
        serde_json::json!({"v": 1, "bins": self.bins}).to_string()
    }

    /// The bins, newest first.
    pub fn bins(&self) -> &[(u64, u64)] {
        &self.bins
    }

    /// Records that `seq` was the committed sequence at `now`; true when
    /// the bins changed. Time and sequence only move forward: a commit in
    /// the newest bin's interval, or one dated earlier (a clock set back),
    /// changes nothing.
    pub fn update(&mut self, now: u64, seq: u64, resolution: u64) -> bool {
        if now < MIN_TIME {
            return false;
        }
        let resolution = resolution.max(1);
        let time = now / resolution * resolution;
        match self.bins.first() {
            None => {}
            Some(&(top_time, top_seq)) if time > top_time && seq > top_seq => {}
            Some(_) => return false,
        }
        if self.bins.len() >= MAX_BINS {
            self.roll_up(time);
        }
        self.bins.insert(0, (time, seq));
        true
    }

    /// The sequence to start a feed after, to see every change made at or
    /// after `time`: the sequence before the bin holding `time`, 0 before
    /// the oldest bin, `Now` past the newest bin's interval.
    pub fn since(&self, time: i64, resolution: u64) -> Since {
        if let Some(&(top, _)) = self.bins.first()
            && time > 0
            && time as u64 > top.saturating_add(resolution.max(1))
        {
            return Since::Now;
        }
        self.bins
            .iter()
            .find(|(start, _)| time >= 0 && *start <= time as u64)
            .map_or(Since::Seq(0), |&(_, seq)| Since::Seq(seq))
    }

    /// Changes per bin, oldest first: each bin's start and the number of
    /// sequences from it to the next (the newest to `update_seq`). Changes
    /// from before the first bin (a database older than this table) show
    /// in a bin at time 0.
    pub fn histogram(&self, update_seq: u64) -> Vec<(u64, u64)> {
        let mut bins = self.bins.clone();
        if let Some(&(_, oldest)) = bins.last()
            && oldest > 0
        {
            bins.push((0, 0));
        }
        let mut next = update_seq;
        let mut out = Vec::with_capacity(bins.len());
        for (time, seq) in bins {
            out.push((time, next.saturating_sub(seq)));
            next = seq;
        }
        out.reverse();
        out
    }

    /// Makes room for one bin by merging old ones (see the module's doc).
    fn roll_up(&mut self, now: u64) {
        // Oldest first, with each bin's width: (start, width, seq).
        let mut next_start = now;
        let mut timed: Vec<(u64, u64, u64)> = Vec::with_capacity(self.bins.len());
        for &(start, seq) in &self.bins {
            timed.push((start, next_start.saturating_sub(start), seq));
            next_start = start;
        }
        timed.reverse();
        for pair in INTERVALS.windows(2) {
            let (width, next_width) = (pair[0], pair[1]);
            let threshold = now.saturating_sub(next_width);
            let split = timed.iter().take_while(|b| b.0 <= threshold).count();
            let merged = merge(&timed[..split], width);
            if merged.len() < split {
                let rest = timed.split_off(split);
                timed = merged;
                timed.extend(rest);
                return self.set_timed(timed);
            }
        }
        // Nothing merged at any width: merge the older half at the width
        // of its widest bin, which always frees room.
        let half = timed.len() / 2;
        let widest = timed[..half].iter().map(|b| b.1).max().unwrap_or(0);
        let rest = timed.split_off(half);
        timed = merge(&timed, widest);
        timed.extend(rest);
        self.set_timed(timed);
    }

    fn set_timed(&mut self, timed: Vec<(u64, u64, u64)>) {
        self.bins = timed.into_iter().rev().map(|(t, _, s)| (t, s)).collect();
    }
}

/// Merges each pair of neighbouring bins (oldest first) both no wider than
/// `width` into the older one.
fn merge(bins: &[(u64, u64, u64)], width: u64) -> Vec<(u64, u64, u64)> {
    let mut out = Vec::with_capacity(bins.len());
    let mut i = 0;
    while i < bins.len() {
        match (bins[i], bins.get(i + 1)) {
            ((t1, w1, s1), Some(&(_, w2, _))) if w1 <= width && w2 <= width => {
                out.push((t1, w1 + w2, s1));
                i += 2;
            }
            (bin, _) => {
                out.push(bin);
                i += 1;
            }
        }
    }
    out
}

/// The time now, in Unix seconds.
pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Records a commit in the bins, inside its transaction: `before` is the
/// sequence committed before it. The bins are written only when they
/// change (at most once per interval).
pub(crate) fn record_commit(
    rows: &dyn WriteRows,
    before: u64,
    resolution: u64,
) -> Result<(), StoreError> {
    let mut bins = TimeSeq::decode(rows.meta(META_KEY)?.as_deref());
    if bins.update(now(), before, resolution) {
        rows.set_meta(META_KEY, &bins.encode())?;
    }
    Ok(())
}

/// A time as CouchDB's `since` takes it: exactly `YYYY-MM-DDTHH:MM:SSZ`.
/// `None` when the text does not have that shape (it may be a sequence);
/// `Some(Err)` when it does but is no time.
pub fn parse_time(text: &str) -> Option<Result<i64, InvalidTime>> {
    let b = text.as_bytes();
    if b.len() != 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'Z'
    {
        return None;
    }
    let number = |from: usize, to: usize| -> Result<i64, InvalidTime> {
        let digits = &b[from..to];
        if !digits.iter().all(u8::is_ascii_digit) {
            return Err(InvalidTime);
        }
        Ok(digits.iter().fold(0, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let parsed = (|| {
        let (year, month, day) = (number(0, 4)?, number(5, 7)?, number(8, 10)?);
        let (hour, minute, second) = (number(11, 13)?, number(14, 16)?, number(17, 19)?);
        if !(1..=12).contains(&month)
            || day < 1
            || day > days_in_month(year, month)
            || hour > 23
            || minute > 59
            || second > 59
        {
            return Err(InvalidTime);
        }
        Ok(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
    })();
    Some(parsed)
}

/// A `since` that has a time's shape but is no time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidTime;

/// `YYYY-MM-DDTHH:MM:SSZ` of a Unix time (the wire's one date writer).
pub fn format_time(time: u64) -> String {
    wire::time::rfc3339(std::time::UNIX_EPOCH + std::time::Duration::from_secs(time))
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

impl Database {
    /// The database's time bins as they are now.
    pub async fn time_seq(&self) -> Result<TimeSeq, StoreError> {
        self.read(|rows| Ok(TimeSeq::decode(rows.meta(META_KEY)?.as_deref())))
            .await
    }

    /// The sequence a feed from `time` (Unix seconds) starts after: every
    /// change made at or after it comes after that sequence.
    pub async fn seq_since_time(&self, time: i64) -> Result<u64, StoreError> {
        let resolution = self.live_settings().time_seq_resolution();
        let update_seq = self.update_seq();
        Ok(match self.time_seq().await?.since(time, resolution) {
            Since::Seq(seq) => seq.min(update_seq),
            Since::Now => update_seq,
        })
    }

    /// Forgets the bins (`DELETE /{db}/_time_seq`): for a clock that
    /// wrote times in the future. Feeds from a time start at 0 until new
    /// commits write bins again.
    pub async fn reset_time_seq(&self) -> Result<(), StoreError> {
        self.write(1, |ctx| {
            ctx.rows.set_meta(META_KEY, &TimeSeq::default().encode())?;
            Ok(())
        })
        .await
    }
}

impl crate::LiveSettings {
    /// The finest interval of time bins, in seconds.
    pub(crate) fn time_seq_resolution(&self) -> u64 {
        self.time_seq_resolution.load(Ordering::Relaxed).max(1)
    }
}

#[cfg(test)]
mod tests;
