//! Server-made ids (`/_uuids`, `POST /db` without an `_id`) by CouchDB's
//! `[uuids] algorithm`s. The default, `sequential`, as CouchDB 3.5's:
//! ids that follow each other sort together, which keeps the store's
//! indexes compact when clients insert with them.

use std::sync::Mutex;

/// CouchDB's algorithms.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum UuidAlgorithm {
    /// 128 random bits.
    Random,
    /// 26 random hex digits, then 6 that grow by random steps; a new
    /// random prefix when they run out.
    #[default]
    Sequential,
    /// Microseconds since the epoch (14 hex digits), then 18 random ones.
    UtcRandom,
    /// Microseconds since the epoch (14 hex digits), then a fixed suffix.
    UtcId { suffix: String },
    /// RFC 9562's version 4 (random), as 32 hex digits.
    UuidV4,
    /// RFC 9562's version 7: milliseconds since the epoch, then random
    /// bits; ids made later sort later (CouchDB 3.5.x, and the default of
    /// its next release).
    UuidV7,
}

impl UuidAlgorithm {
    /// CouchDB's names; `utc_id` takes `utc_id_suffix`.
    pub fn parse(name: &str, utc_id_suffix: &str) -> Option<UuidAlgorithm> {
        Some(match name {
            "random" => UuidAlgorithm::Random,
            "sequential" => UuidAlgorithm::Sequential,
            "utc_random" => UuidAlgorithm::UtcRandom,
            "uuid_v4" => UuidAlgorithm::UuidV4,
            "uuid_v7" => UuidAlgorithm::UuidV7,
            "utc_id" => UuidAlgorithm::UtcId {
                suffix: utc_id_suffix.to_string(),
            },
            _ => return None,
        })
    }
}

/// Makes ids; shared by all requests.
#[derive(Debug)]
pub(crate) struct Uuids {
    algorithm: UuidAlgorithm,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    prefix: String,
    seq: u32,
    last_micros: u64,
}

/// Where the sequential suffix starts over with a new prefix (CouchDB's).
const SEQ_LIMIT: u32 = 0xfff000;

fn random_bytes(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n + 16);
    while out.len() < n {
        out.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    }
    out.truncate(n);
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A random step of 1 to 0xffe, as CouchDB's sequential ids take.
fn step() -> u32 {
    let [a, b] = [random_bytes(2)[0], random_bytes(2)[1]];
    u32::from(u16::from_le_bytes([a, b]) % 0xffe) + 1
}

impl Uuids {
    pub(crate) fn new(algorithm: UuidAlgorithm) -> Uuids {
        Uuids {
            algorithm,
            state: Mutex::new(State {
                prefix: hex(&random_bytes(13)),
                seq: step(),
                last_micros: 0,
            }),
        }
    }

    pub(crate) fn next(&self) -> String {
        match &self.algorithm {
            UuidAlgorithm::Random | UuidAlgorithm::UuidV4 => {
                uuid::Uuid::new_v4().simple().to_string()
            }
            UuidAlgorithm::UuidV7 => uuid::Uuid::now_v7().simple().to_string(),
            UuidAlgorithm::Sequential => {
                let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                let id = format!("{}{:06x}", state.prefix, state.seq);
                if state.seq >= SEQ_LIMIT {
                    state.prefix = hex(&random_bytes(13));
                    state.seq = step();
                } else {
                    state.seq += step();
                }
                id
            }
            UuidAlgorithm::UtcRandom => format!("{:014x}{}", self.micros(), &hex(&random_bytes(9))),
            UuidAlgorithm::UtcId { suffix } => format!("{:014x}{suffix}", self.micros()),
        }
    }

    /// Microseconds since the epoch, never the same twice in a row (ids
    /// made in one microsecond still sort in the order they were made).
    fn micros(&self) -> u64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.last_micros = now.max(state.last_micros + 1);
        state.last_micros
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_hex(s: &str) -> bool {
        s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    }

    #[test]
    fn sequential_ids_share_a_prefix_and_grow() {
        let uuids = Uuids::new(UuidAlgorithm::Sequential);
        let ids: Vec<String> = (0..100).map(|_| uuids.next()).collect();
        for pair in ids.windows(2) {
            assert_eq!(pair[0].len(), 32);
            assert!(is_hex(&pair[0]));
            assert_eq!(pair[0][..26], pair[1][..26], "one prefix");
            assert!(pair[0] < pair[1], "{} < {}", pair[0], pair[1]);
        }
    }

    #[test]
    fn sequential_ids_take_a_new_prefix_when_the_suffix_runs_out() {
        let uuids = Uuids::new(UuidAlgorithm::Sequential);
        let first = uuids.next();
        uuids.state.lock().unwrap().seq = SEQ_LIMIT;
        let last = uuids.next();
        assert_eq!(first[..26], last[..26]);
        assert!(last.ends_with("fff000"));
        let fresh = uuids.next();
        assert_ne!(fresh[..26], last[..26]);
    }

    #[test]
    fn utc_ids_start_with_the_time_and_end_as_configured() {
        let uuids = Uuids::new(UuidAlgorithm::UtcId {
            suffix: "-node1".into(),
        });
        let (a, b) = (uuids.next(), uuids.next());
        assert!(a.ends_with("-node1") && is_hex(&a[..14]), "{a}");
        assert!(a < b, "{a} < {b}");
        let random = Uuids::new(UuidAlgorithm::UtcRandom);
        let (c, d) = (random.next(), random.next());
        assert_eq!((c.len(), is_hex(&c)), (32, true));
        assert!(c[..14] < d[..14]);
        assert_eq!(UuidAlgorithm::parse("nope", ""), None);
    }

    #[test]
    fn version_7_ids_carry_the_time_and_sort_in_order() {
        let uuids = Uuids::new(UuidAlgorithm::UuidV7);
        let ids: Vec<String> = (0..500).map(|_| uuids.next()).collect();
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64;
        for id in &ids {
            assert_eq!(id.len(), 32);
            assert!(is_hex(id), "{id}");
            assert_eq!(&id[12..13], "7", "{id}");
            let stamp = u64::from_str_radix(&id[..12], 16).unwrap_or(0);
            assert!(stamp <= millis && millis - stamp < 60_000, "{id}");
        }
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(sorted, ids);
        let v4 = Uuids::new(UuidAlgorithm::UuidV4).next();
        assert_eq!(&v4[12..13], "4", "{v4}");
    }
}
