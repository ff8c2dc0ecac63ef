//! Server admins shared by the nodes of one store (PostgreSQL): kept in the
//! store as `admin:<name>` → password hash, so an admin added, changed or
//! removed on one node (`_config/admins`) holds on every node within a
//! few seconds. The command line's `--admin` stays the node's own.
//!
//! Each round compares three states: what the store has, what this node's
//! configuration has, and what the last round agreed on. A name this node
//! changed since is written to the store; a name the store changed since
//! is applied here; a name both changed takes the store's value (the first
//! writer wins, the others follow).

use std::collections::{BTreeMap, BTreeSet};

use store::Store;

use crate::node_config::ServerConfig;

const PREFIX: &str = "admin:";

/// Admins by name: password hashes.
pub type Admins = BTreeMap<String, String>;

/// What the last round agreed on; empty before the first.
#[derive(Debug, Default)]
pub struct AdminSync {
    agreed: Option<Admins>,
}

/// What one round decides.
#[derive(Debug, Default, PartialEq, Eq)]
struct Round {
    /// To write to the store (`None`: remove).
    to_store: Vec<(String, Option<String>)>,
    /// The admins this node takes.
    local: Admins,
}

/// The three-way merge of one round. Before the first round (`agreed` is
/// `None`) the store wins for every name it has, and this node adds those
/// it alone has.
fn merge(agreed: Option<&Admins>, local: &Admins, shared: &Admins) -> Round {
    let names: BTreeSet<&String> = local.keys().chain(shared.keys()).collect();
    let mut round = Round {
        to_store: Vec::new(),
        local: shared.clone(),
    };
    for name in names {
        let (mine, theirs) = (local.get(name), shared.get(name));
        let only_here_changed = match agreed {
            Some(agreed) => {
                let before = agreed.get(name);
                mine != before && theirs == before
            }
            // First round: the store's admins stand; what only this node
            // has is shared.
            None => theirs.is_none(),
        };
        if only_here_changed {
            round.to_store.push((name.clone(), mine.cloned()));
            match mine {
                Some(hash) => round.local.insert(name.clone(), hash.clone()),
                None => round.local.remove(name),
            };
        }
    }
    round
}

impl AdminSync {
    /// One round: the store and this node's configuration agree afterwards.
    pub async fn sync(&mut self, store: &Store, config: &ServerConfig) {
        let shared: Admins = match store.shared_values(PREFIX).await {
            Ok(rows) => rows
                .into_iter()
                .filter_map(|(key, hash)| Some((key.strip_prefix(PREFIX)?.to_string(), hash)))
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the shared admins");
                return;
            }
        };
        let local = config.admins();
        let round = merge(self.agreed.as_ref(), &local, &shared);
        for (name, hash) in &round.to_store {
            let key = format!("{PREFIX}{name}");
            if let Err(e) = store.set_shared_value(&key, hash.as_deref()).await {
                tracing::warn!(admin = %name, error = %e, "cannot share an admin");
                return;
            }
        }
        if round.local != local {
            tracing::info!("server admins changed on another node: applied here");
            config.set_admins(round.local.clone());
        }
        self.agreed = Some(round.local);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admins(pairs: &[(&str, &str)]) -> Admins {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_first_round_takes_the_stores_admins_and_shares_its_own() {
        let round = merge(
            None,
            &admins(&[("mine", "h1"), ("both", "local")]),
            &admins(&[("theirs", "h2"), ("both", "shared")]),
        );
        assert_eq!(
            round.to_store,
            [("mine".to_string(), Some("h1".to_string()))]
        );
        assert_eq!(
            round.local,
            admins(&[("both", "shared"), ("mine", "h1"), ("theirs", "h2")])
        );
    }

    #[test]
    fn later_rounds_carry_each_sides_changes_to_the_other() {
        let agreed = admins(&[("a", "1"), ("b", "1"), ("c", "1")]);
        // Here: `a` changed, `b` removed. There: `c` changed, `d` added.
        let local = admins(&[("a", "2"), ("c", "1")]);
        let shared = admins(&[("a", "1"), ("b", "1"), ("c", "3"), ("d", "1")]);
        let round = merge(Some(&agreed), &local, &shared);
        assert_eq!(
            round.to_store,
            [
                ("a".to_string(), Some("2".to_string())),
                ("b".to_string(), None)
            ]
        );
        assert_eq!(round.local, admins(&[("a", "2"), ("c", "3"), ("d", "1")]));
    }

    #[test]
    fn a_name_changed_on_both_sides_takes_the_stores_value() {
        let agreed = admins(&[("a", "1")]);
        let round = merge(
            Some(&agreed),
            &admins(&[("a", "mine")]),
            &admins(&[("a", "theirs")]),
        );
        assert!(round.to_store.is_empty());
        assert_eq!(round.local, admins(&[("a", "theirs")]));
    }
}
