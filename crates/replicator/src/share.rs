//! Fair share of running slots between replicator databases, as CouchDB
//! 3.3's `[replicator.shares]`: each database (for `_replicate` jobs, each
//! user) gets slots in proportion to its shares, whatever its number of
//! jobs. It is CouchDB's take on Kay and Lauder's fair share scheduler:
//! running jobs charge their database for the time they ran; a
//! database's usage decays each turn; each job's priority value grows with
//! its database's usage times its number of jobs over its shares squared,
//! and decays too. Pending jobs with the lowest value start first, running
//! jobs with the highest stop first.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// A database's shares when the configuration names none.
pub const DEFAULT_SHARES: u32 = 100;
/// The bounds any configured value is held to, as CouchDB's.
pub const MIN_SHARES: u32 = 1;
pub const MAX_SHARES: u32 = 1000;

/// How much of a database's usage is left after each turn (CouchDB's
/// `usage_coeff`, Kay and Lauder's K1).
const USAGE_DECAY: f64 = 0.5;
/// How much of a job's priority value is left after each turn (CouchDB's
/// `priority_coeff`, K2).
const PRIORITY_DECAY: f64 = 0.98;

/// The shares of `key` under `configured` (bounded as CouchDB bounds them).
pub fn shares_of(configured: &BTreeMap<String, u32>, key: &str) -> u64 {
    u64::from(
        configured
            .get(key)
            .copied()
            .unwrap_or(DEFAULT_SHARES)
            .clamp(MIN_SHARES, MAX_SHARES),
    )
}

/// The accounting behind the priorities. Keys are replicator database
/// names (or user names); time is counted in microseconds, as CouchDB does.
#[derive(Debug, Default)]
pub(crate) struct FairShare {
    /// Decayed usage per key.
    usage: HashMap<String, u64>,
    /// Time charged per key since the last turn.
    charges: HashMap<String, u64>,
    /// Jobs per key (running or not).
    jobs: HashMap<String, u64>,
    /// Priority value per job id: lower runs first. Missing means 0.
    priorities: HashMap<String, u64>,
}

impl FairShare {
    /// A new job starts with the priority of one turn of its key's usage,
    /// so it does not jump ahead of jobs that have been waiting.
    pub fn job_added(&mut self, id: &str, key: &str, shares: u64) {
        *self.jobs.entry(key.to_string()).or_default() += 1;
        self.raise_priority(id, key, shares);
    }

    pub fn job_removed(&mut self, id: &str, key: &str) {
        self.priorities.remove(id);
        if let Some(count) = self.jobs.get_mut(key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.jobs.remove(key);
            }
        }
    }

    /// Charges `key` for a job's run of `ran`, at most one turn's worth.
    pub fn charge(&mut self, key: &str, ran: Duration, interval: Duration) {
        let micros = ran.min(interval).as_micros();
        let micros = u64::try_from(micros).unwrap_or(u64::MAX);
        let charged = self.charges.entry(key.to_string()).or_default();
        *charged = charged.saturating_add(micros);
    }

    /// One turn: charges the running jobs `(id, key, ran)`, folds the
    /// charges into the decayed usage, decays every priority, and raises
    /// the running jobs' priorities by their keys' new usage.
    pub fn turn(
        &mut self,
        running: &[(String, String, Duration)],
        interval: Duration,
        shares: impl Fn(&str) -> u64,
    ) {
        for (_, key, ran) in running {
            self.charge(key, *ran, interval);
        }
        decay(&mut self.usage, USAGE_DECAY);
        for (key, charged) in self.charges.drain() {
            let usage = self.usage.entry(key).or_default();
            *usage = usage.saturating_add(charged);
        }
        decay(&mut self.priorities, PRIORITY_DECAY);
        for (id, key, _) in running {
            self.raise_priority(id, key, shares(key));
        }
    }

    /// The priority value of a job: lower runs first.
    pub fn priority(&self, id: &str) -> u64 {
        self.priorities.get(id).copied().unwrap_or(0)
    }

    fn raise_priority(&mut self, id: &str, key: &str, shares: u64) {
        let usage = self.usage.get(key).copied().unwrap_or(0) as f64;
        let jobs = self.jobs.get(key).copied().unwrap_or(0) as f64;
        let shares = shares.max(1) as f64;
        let raise = (usage * jobs / (shares * shares)) as u64;
        let priority = self.priorities.entry(id.to_string()).or_default();
        *priority = priority.saturating_add(raise);
    }
}

/// Multiplies every value by `factor`, dropping those that reach 0
/// (missing means 0).
fn decay(values: &mut HashMap<String, u64>, factor: f64) {
    values.retain(|_, value| {
        *value = (*value as f64 * factor) as u64;
        *value > 0
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const TURN: Duration = Duration::from_secs(60);

    #[test]
    fn shares_default_to_100_and_stay_within_bounds() {
        let configured: BTreeMap<String, u32> = [
            ("a".to_string(), 0),
            ("b".to_string(), 5000),
            ("c".to_string(), 300),
        ]
        .into();
        assert_eq!(shares_of(&configured, "a"), 1);
        assert_eq!(shares_of(&configured, "b"), 1000);
        assert_eq!(shares_of(&configured, "c"), 300);
        assert_eq!(shares_of(&configured, "d"), 100);
    }

    #[test]
    fn charges_are_at_most_one_turn_and_become_usage() {
        let mut share = FairShare::default();
        share.job_added("j1", "db1", 100);
        share.charge("db1", Duration::from_secs(1), TURN);
        share.charge("db1", Duration::from_secs(600), TURN);
        assert_eq!(share.charges["db1"], 61_000_000);
        share.turn(&[], TURN, |_| 100);
        assert_eq!(share.usage["db1"], 61_000_000);
        assert!(share.charges.is_empty());
        // Usage halves each turn without new charges.
        share.turn(&[], TURN, |_| 100);
        assert_eq!(share.usage["db1"], 30_500_000);
    }

    #[test]
    fn running_raises_a_priority_and_waiting_lowers_it() {
        let mut share = FairShare::default();
        share.job_added("run", "db", 100);
        share.job_added("wait", "db", 100);
        let running = [("run".to_string(), "db".to_string(), TURN)];
        share.turn(&running, TURN, |_| 100);
        let high = share.priority("run");
        assert!(high > 0 && share.priority("wait") == 0);
        share.turn(&[], TURN, |_| 100);
        assert!(share.priority("run") < high);
        share.job_removed("run", "db");
        assert_eq!(share.priority("run"), 0);
        assert_eq!(share.jobs["db"], 1);
        share.job_removed("wait", "db");
        assert!(share.jobs.is_empty());
    }

    /// CouchDB's scheduler in small: each turn stops the `churn` running
    /// jobs with the highest values and starts the `churn` pending ones
    /// with the lowest. Returns each key's percentage of the slots used.
    fn simulate(keys: &[(&str, u64, usize, usize)], turns: usize, churn: usize) -> Vec<u64> {
        let mut share = FairShare::default();
        let shares: HashMap<String, u64> = keys
            .iter()
            .map(|(k, s, _, _)| (k.to_string(), *s))
            .collect();
        let mut running = Vec::new();
        let mut pending = Vec::new();
        for (key, shares, run, wait) in keys {
            for i in 0..run + wait {
                let id = format!("{key}-{i}");
                share.job_added(&id, key, *shares);
                let job = (id, key.to_string(), TURN);
                if i < *run {
                    running.push(job);
                } else {
                    pending.push(job);
                }
            }
        }
        let mut used: HashMap<String, u64> = HashMap::new();
        for _ in 0..turns {
            for (_, key, _) in &running {
                *used.entry(key.clone()).or_default() += 1;
            }
            share.turn(&running, TURN, |k| shares[k]);
            running.sort_by_key(|(id, _, _)| std::cmp::Reverse(share.priority(id)));
            pending.sort_by_key(|(id, _, _)| share.priority(id));
            let stopped: Vec<_> = running.drain(..churn.min(running.len())).collect();
            let started: Vec<_> = pending.drain(..churn.min(pending.len())).collect();
            running.extend(started);
            pending.extend(stopped);
        }
        let total: u64 = used.values().sum();
        keys.iter()
            .map(|(k, ..)| (used.get(*k).copied().unwrap_or(0) * 100 + total / 2) / total)
            .collect()
    }

    #[test]
    fn slots_follow_the_shares_not_the_number_of_jobs() {
        // The cases of CouchDB's own tests, with its expected shares.
        let [a, b] = simulate(&[("a", 100, 25, 75), ("b", 100, 25, 75)], 1000, 10)[..] else {
            unreachable!()
        };
        assert!((49..=51).contains(&a) && (49..=51).contains(&b), "{a} {b}");
        let [a, b] = simulate(&[("a", 900, 25, 75), ("b", 100, 25, 75)], 1000, 10)[..] else {
            unreachable!()
        };
        assert!((89..=91).contains(&a) && (9..=11).contains(&b), "{a} {b}");
        let [a, b] = simulate(&[("a", 100, 25, 25), ("b", 100, 25, 125)], 1000, 10)[..] else {
            unreachable!()
        };
        assert!((49..=51).contains(&a) && (49..=51).contains(&b), "{a} {b}");
        let [a, b] = simulate(&[("a", 100, 25, 75), ("b", 300, 25, 75)], 1000, 10)[..] else {
            unreachable!()
        };
        assert!((24..=26).contains(&a) && (74..=76).contains(&b), "{a} {b}");
    }
}
