//! Windowed latency histograms as CouchDB 3.5 keeps them, and their summaries.

use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Seconds of samples a histogram summarizes: CouchDB's `[stats] interval`
/// default, so figures read the same on both servers.
pub(super) const WINDOW_SECS: u64 = 10;

/// One histogram slot per second, in a ring longer than the window: the
/// slot a new second takes over is always one no reader still sums.
pub(super) const SLOTS: usize = 16;

/// Smallest and largest values told apart, in milliseconds (CouchDB's):
/// 10 µs to over an hour; values outside count in the first or last bin.
pub(super) const MIN_VALUE: f64 = 0.01;
pub(super) const MAX_VALUE: f64 = 4_000_000.0;

/// A value's bin is its float's exponent and top three mantissa bits: bins
/// grow with the value, about 9% wide each, 230 bins over the whole range.
pub(super) const BIN_SHIFT: u32 = 52 - 3;
pub(super) const FIRST_BIN: u64 = MIN_VALUE.to_bits() >> BIN_SHIFT;
pub(super) const BINS: usize = ((MAX_VALUE.to_bits() >> BIN_SHIFT) - FIRST_BIN + 1) as usize;

pub(super) fn bin_of(value: f64) -> usize {
    // NaN fails the comparison and lands in the first bin.
    let value = if value >= MIN_VALUE {
        value.min(MAX_VALUE)
    } else {
        MIN_VALUE
    };
    ((value.to_bits() >> BIN_SHIFT) - FIRST_BIN) as usize
}

pub(super) fn bin_bits(bin: usize) -> u64 {
    (bin as u64 + FIRST_BIN) << BIN_SHIFT
}

pub(super) fn bin_min(bin: usize) -> f64 {
    f64::from_bits(bin_bits(bin))
}

pub(super) fn bin_max(bin: usize) -> f64 {
    f64::from_bits(bin_bits(bin) | ((1 << BIN_SHIFT) - 1))
}

pub(super) fn bin_middle(bin: usize) -> f64 {
    f64::from_bits(bin_bits(bin) | (1 << (BIN_SHIFT - 1)))
}

/// A slot's second tag: none yet, or being reset for a new second.
pub(super) const UNUSED: u64 = 0;
pub(super) const RESETTING: u64 = u64::MAX;

/// One second of samples.
pub(super) struct Slot {
    /// The second the bins hold (plus one, so that 0 is [`UNUSED`]).
    second: AtomicU64,
    bins: [AtomicU64; BINS],
}

/// Samples of the last [`WINDOW_SECS`] seconds, in log-scale bins.
pub(super) struct Histogram {
    slots: Box<[Slot]>,
}

impl Histogram {
    pub(super) fn new() -> Histogram {
        Histogram {
            slots: (0..SLOTS)
                .map(|_| Slot {
                    second: AtomicU64::new(UNUSED),
                    bins: std::array::from_fn(|_| AtomicU64::new(0)),
                })
                .collect(),
        }
    }

    /// Adds a sample taken during `second`. The first sample of a second
    /// empties its slot (16 seconds old by then); a sample racing with
    /// that reset may be lost, which a ten-second summary can bear better
    /// than a lock on every request.
    pub(super) fn record(&self, second: u64, value: f64) {
        let slot = &self.slots[(second % SLOTS as u64) as usize];
        let tag = second + 1;
        let seen = slot.second.load(Ordering::Acquire);
        if seen < tag
            && slot
                .second
                .compare_exchange(seen, RESETTING, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            for bin in &slot.bins {
                bin.store(0, Ordering::Relaxed);
            }
            slot.second.store(tag, Ordering::Release);
        }
        slot.bins[bin_of(value)].fetch_add(1, Ordering::Relaxed);
    }

    /// The samples of the window ending at second `now`, by bin.
    pub(super) fn window(&self, now: u64) -> [u64; BINS] {
        let mut counts = [0; BINS];
        for slot in self.slots.iter() {
            let tag = slot.second.load(Ordering::Acquire);
            if tag == UNUSED || tag == RESETTING {
                continue;
            }
            let second = tag - 1;
            if second <= now && now - second < WINDOW_SECS {
                for (count, bin) in counts.iter_mut().zip(&slot.bins) {
                    *count += bin.load(Ordering::Relaxed);
                }
            }
        }
        counts
    }
}

/// The percentiles CouchDB reports: its key in JSON, the fraction, and
/// Prometheus's quantile label.
pub(super) const PERCENTILES: [(u32, f64, &str); 6] = [
    (50, 0.5, "0.5"),
    (75, 0.75, "0.75"),
    (90, 0.9, "0.9"),
    (95, 0.95, "0.95"),
    (99, 0.99, "0.99"),
    (999, 0.999, "0.999"),
];

/// A histogram's summary, in CouchDB's terms. Each sample stands for the
/// middle of its bin; percentiles are placed within their bin by rank.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Summary {
    pub(crate) n: u64,
    pub(super) min: f64,
    pub(super) max: f64,
    pub(super) mean: f64,
    pub(super) geometric_mean: f64,
    pub(super) harmonic_mean: f64,
    pub(super) variance: f64,
    /// `None` when the spread is too small to divide by (CouchDB shows 0).
    pub(super) skewness: Option<f64>,
    pub(super) kurtosis: Option<f64>,
    pub(super) percentiles: [f64; PERCENTILES.len()],
}

impl Summary {
    pub(super) fn of(counts: &[u64; BINS]) -> Summary {
        let filled = || {
            counts
                .iter()
                .enumerate()
                .filter(|(_, count)| **count > 0)
                .map(|(bin, count)| (bin, *count, *count as f64))
        };
        let (mut n, mut sum, mut sum_log, mut sum_inverse) = (0u64, 0.0, 0.0, 0.0);
        for (bin, count, weight) in filled() {
            let value = bin_middle(bin);
            n += count;
            sum += weight * value;
            sum_log += weight * value.ln();
            sum_inverse += weight / value;
        }
        let (Some((first, ..)), Some((last, ..))) = (filled().next(), filled().next_back()) else {
            return Summary::default();
        };
        let total = n as f64;
        let mean = sum / total;
        let mut ranks = PERCENTILES.map(|(_, fraction, _)| Some(total * fraction));
        let mut percentiles = [0.0; PERCENTILES.len()];
        let (mut moment2, mut moment3, mut moment4) = (0.0, 0.0, 0.0);
        for (bin, _, weight) in filled() {
            for (rank, percentile) in ranks.iter_mut().zip(&mut percentiles) {
                if let Some(left) = rank {
                    if *left < weight {
                        let (low, high) = (bin_min(bin), bin_max(bin));
                        *percentile = low + (high - low) * (*left / weight);
                        *rank = None;
                    } else {
                        *left -= weight;
                    }
                }
            }
            let diff = bin_middle(bin) - mean;
            moment2 += weight * diff * diff;
            moment3 += weight * diff.powi(3);
            moment4 += weight * diff.powi(4);
        }
        let variance = moment2 / total;
        let deviation = variance.sqrt();
        let ratio = |moment: f64, power: i32| {
            let scale = deviation.powi(power);
            (scale >= 1e-12).then(|| moment / total / scale)
        };
        Summary {
            n,
            min: bin_min(first),
            max: bin_max(last),
            mean,
            geometric_mean: (sum_log / total).exp(),
            harmonic_mean: total / sum_inverse,
            variance,
            skewness: ratio(moment3, 3),
            kurtosis: ratio(moment4, 4).map(|k| k - 3.0),
            percentiles,
        }
    }

    /// CouchDB's shape; all zeros (integers, as there) without samples.
    pub(super) fn to_json(&self) -> Value {
        let percentile: Vec<Value> = PERCENTILES
            .iter()
            .zip(&self.percentiles)
            .map(|((key, ..), value)| {
                if self.n == 0 {
                    json!([key, 0])
                } else {
                    json!([key, value])
                }
            })
            .collect();
        if self.n == 0 {
            return json!({
                "n": 0, "min": 0, "max": 0, "arithmetic_mean": 0, "geometric_mean": 0,
                "harmonic_mean": 0, "median": 0, "variance": 0, "standard_deviation": 0,
                "skewness": 0, "kurtosis": 0, "percentile": percentile, "histogram": [[0, 0]],
            });
        }
        let or_zero = |v: Option<f64>| v.map_or(json!(0), |v| json!(v));
        json!({
            "n": self.n,
            "min": self.min,
            "max": self.max,
            "arithmetic_mean": self.mean,
            "geometric_mean": self.geometric_mean,
            "harmonic_mean": self.harmonic_mean,
            "median": self.percentiles[0],
            "variance": self.variance,
            "standard_deviation": self.variance.sqrt(),
            "skewness": or_zero(self.skewness),
            "kurtosis": or_zero(self.kurtosis),
            "percentile": percentile,
            // CouchDB keeps this key, always so, for older clients.
            "histogram": [[0, 0]],
        })
    }
}

pub(super) fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
