//! CouchDB 3.5's `auth_lockout`: after `threshold` failed logins for one
//! name from one address, further attempts from that address are refused
//! (even with the right password) until `lifetime` has passed since the
//! first failure. Other addresses are not affected, so an attacker cannot
//! lock the real user out from elsewhere.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// CouchDB's refusal while locked.
pub const LOCKED_REASON: &str =
    "Account is temporarily locked due to multiple authentication failures";

/// Who is logging in: the caller's address (when known) and the name tried.
type Attempt = (Option<IpAddr>, String);

/// Failed logins per address and name.
#[derive(Debug)]
pub struct Lockout {
    threshold: u32,
    lifetime: Duration,
    /// Failures so far, and when the first of them happened.
    failures: Mutex<HashMap<Attempt, (u32, Instant)>>,
}

/// Entries kept at most; past it the oldest half is forgotten.
const MAX_ENTRIES: usize = 10_000;

impl Lockout {
    pub fn new(threshold: u32, lifetime: Duration) -> Lockout {
        Lockout {
            threshold,
            lifetime,
            failures: Mutex::new(HashMap::new()),
        }
    }

    fn key(ip: Option<IpAddr>, name: &str) -> Attempt {
        (ip, name.to_string())
    }

    /// Whether attempts for `name` from `ip` are refused now.
    pub fn is_locked(&self, ip: Option<IpAddr>, name: &str, now: Instant) -> bool {
        let failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        failures
            .get(&Lockout::key(ip, name))
            .is_some_and(|(count, since)| {
                *count >= self.threshold && now.duration_since(*since) < self.lifetime
            })
    }

    /// Counts a failed attempt.
    pub fn failed(&self, ip: Option<IpAddr>, name: &str, now: Instant) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if failures.len() >= MAX_ENTRIES {
            let lifetime = self.lifetime;
            failures.retain(|_, (_, since)| now.duration_since(*since) < lifetime);
            if failures.len() >= MAX_ENTRIES {
                failures.clear();
            }
        }
        let entry = failures.entry(Lockout::key(ip, name)).or_insert((0, now));
        if now.duration_since(entry.1) >= self.lifetime {
            *entry = (0, now);
        }
        entry.0 += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_failures_lock_one_address_for_a_while() {
        let lockout = Lockout::new(3, Duration::from_secs(60));
        let here = Some(IpAddr::from([127, 0, 0, 1]));
        let there = Some(IpAddr::from([127, 0, 0, 2]));
        let t0 = Instant::now();
        for _ in 0..2 {
            lockout.failed(here, "bob", t0);
        }
        assert!(!lockout.is_locked(here, "bob", t0));
        lockout.failed(here, "bob", t0);
        assert!(lockout.is_locked(here, "bob", t0));
        assert!(
            !lockout.is_locked(there, "bob", t0),
            "elsewhere is not locked"
        );
        assert!(
            !lockout.is_locked(here, "ann", t0),
            "another name is not locked"
        );
        let later = t0 + Duration::from_secs(61);
        assert!(!lockout.is_locked(here, "bob", later), "the lock ends");
        lockout.failed(here, "bob", later);
        assert!(
            !lockout.is_locked(here, "bob", later),
            "and counting starts over"
        );
    }
}
