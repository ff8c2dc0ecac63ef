//! Following other nodes without `NOTIFY`: every interval, one query reads
//! the change counters of the databases open on this node (`update_seq`,
//! and `design_gen` and `security_gen`, which every commit that changes a
//! design document or `_security` moves in the same transaction), and each
//! counter that moved is handed on as the notification would have been.
//! A database seen for the first time is told everything may have changed:
//! a commit between its opening and the first read is never missed.

use std::collections::HashMap;
use std::sync::Weak;
use std::time::Duration;

use store::StoreError;
use store::backend::RemoteChange;

use super::{Listeners, dispatch, open_ids};
use crate::conn::Pool;

/// A database's change counters as one read found them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Counters {
    update_seq: i64,
    design_gen: i64,
    security_gen: i64,
}

const READ: &str = "SELECT db_id, update_seq, design_gen, security_gen
                    FROM recliner_dbs WHERE db_id = ANY($1)";

/// Reads the counters once: the columns exist and the engine answers.
pub(super) fn check(pool: &Pool) -> Result<(), StoreError> {
    pool.get()?.query(READ, &[&Vec::<i64>::new()])?;
    Ok(())
}

pub(super) fn run(pool: Pool, every: Duration, listeners: Weak<Listeners>) {
    let mut seen: HashMap<i64, Counters> = HashMap::new();
    let mut failing = false;
    loop {
        std::thread::sleep(every);
        // Not held across the sleep: the store may be dropped meanwhile.
        let Some(live) = listeners.upgrade() else {
            return;
        };
        let ids = open_ids(&live);
        seen.retain(|id, _| ids.contains(id));
        if ids.is_empty() {
            continue;
        }
        match read(&pool, ids) {
            Ok(now) => {
                if failing {
                    tracing::info!("reading the databases' change counters again");
                    failing = false;
                }
                for (db_id, counters) in now {
                    for change in changes(seen.insert(db_id, counters), counters) {
                        dispatch(&live, db_id, change);
                    }
                }
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(error = %e, "cannot read the databases' change counters; retrying");
                    failing = true;
                }
            }
        }
    }
}

fn read(pool: &Pool, ids: Vec<i64>) -> Result<Vec<(i64, Counters)>, StoreError> {
    pool.get()?
        .query(READ, &[&ids])?
        .iter()
        .map(|row| {
            Ok((
                row.get(0)?,
                Counters {
                    update_seq: row.get(1)?,
                    design_gen: row.get(2)?,
                    security_gen: row.get(3)?,
                },
            ))
        })
        .collect()
}

/// What to tell a database's listeners, given its counters at the last
/// read (`None`: never read) and now.
pub(super) fn changes(before: Option<Counters>, now: Counters) -> Vec<RemoteChange> {
    let update_seq = now.update_seq.max(0) as u64;
    let Some(before) = before else {
        return vec![
            RemoteChange::Committed {
                update_seq,
                design_changed: true,
            },
            RemoteChange::Security,
        ];
    };
    let mut changes = Vec::new();
    let design_changed = before.design_gen != now.design_gen;
    if before.update_seq != now.update_seq || design_changed {
        changes.push(RemoteChange::Committed {
            update_seq,
            design_changed,
        });
    }
    if before.security_gen != now.security_gen {
        changes.push(RemoteChange::Security);
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(update_seq: i64, design_gen: i64, security_gen: i64) -> Counters {
        Counters {
            update_seq,
            design_gen,
            security_gen,
        }
    }

    #[test]
    fn a_first_read_tells_everything_and_a_quiet_one_nothing() {
        assert_eq!(
            changes(None, at(5, 1, 2)),
            vec![
                RemoteChange::Committed {
                    update_seq: 5,
                    design_changed: true
                },
                RemoteChange::Security
            ]
        );
        assert_eq!(changes(Some(at(5, 1, 2)), at(5, 1, 2)), vec![]);
    }

    #[test]
    fn each_counter_that_moved_is_told() {
        assert_eq!(
            changes(Some(at(5, 1, 2)), at(7, 1, 2)),
            vec![RemoteChange::Committed {
                update_seq: 7,
                design_changed: false
            }]
        );
        assert_eq!(
            changes(Some(at(5, 1, 2)), at(6, 2, 2)),
            vec![RemoteChange::Committed {
                update_seq: 6,
                design_changed: true
            }]
        );
        assert_eq!(
            changes(Some(at(5, 1, 2)), at(5, 1, 3)),
            vec![RemoteChange::Security]
        );
    }
}
