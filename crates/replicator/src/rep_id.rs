//! The replication id: which checkpoint a replication reads and writes.
//! Two requests that would copy the same changes between the same peers get
//! the same id, so a restarted replication resumes where it stopped.

use md5::{Digest, Md5};
use serde_json::{Value, json};

use crate::spec::{ChangesFilter, Peer, ReplicationSpec};

/// Bumped whenever the id's inputs change shape: old checkpoints are then
/// ignored rather than misread. Also written into every checkpoint.
pub const REP_ID_VERSION: u64 = 4;

/// Headers that identify credentials rather than the peer; never part of the id.
const IGNORED_HEADERS: &[&str] = &["authorization", "cookie"];

/// A peer as the id sees it. A local database is read and written with the
/// job's rights (`user`, `None` for a server admin's job): users who see
/// different documents of it keep different checkpoints, as the user of a
/// remote peer's URL is part of its identity.
fn peer_info(peer: &Peer, user: Option<&auth::UserCtx>) -> Value {
    match peer {
        Peer::Local(name) => match user {
            None => json!({"local": name}),
            Some(user) => json!({"local": name, "as": user.name}),
        },
        Peer::Remote(remote) => {
            let url = &remote.url;
            let mut headers: Vec<(String, String)> = remote
                .headers
                .iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
                .filter(|(k, _)| !IGNORED_HEADERS.contains(&k.as_str()))
                .collect();
            headers.sort();
            json!({
                "scheme": url.scheme(),
                // The user (never the password) is part of the identity, as in CouchDB.
                "user": remote.auth.as_ref().map(|a| a.username.clone()),
                "host": url.host_str().map(str::to_ascii_lowercase),
                "port": url.port(),
                "path": url.path(),
                "headers": headers,
            })
        }
    }
}

fn filter_info(filter: &ChangesFilter, code: Option<&str>) -> Value {
    match filter {
        ChangesFilter::All => Value::Null,
        ChangesFilter::DocIds(ids) => json!({"doc_ids": ids}),
        ChangesFilter::Selector(selector) => json!({"selector": selector.json}),
        ChangesFilter::Named { name, query_params } => match code {
            Some(code) => json!({"filter": name, "code": code, "query_params": query_params}),
            None => json!({"filter": name, "query_params": query_params}),
        },
    }
}

/// The base replication id (32 hex digits): md5 over the versioned list of
/// this server's uuid, the normalized peers, the filter, `winning_revs_only`
/// and `since_seq`.
pub fn replication_id(server_uuid: &str, spec: &ReplicationSpec) -> String {
    replication_id_with_code(server_uuid, spec, None)
}

/// [`replication_id`] that also covers a filter function's source code, as
/// CouchDB's does: a replication whose filter was edited starts over
/// instead of resuming from a checkpoint the old code wrote.
pub fn replication_id_with_code(
    server_uuid: &str,
    spec: &ReplicationSpec,
    filter_code: Option<&str>,
) -> String {
    let inputs = json!([
        REP_ID_VERSION,
        server_uuid,
        peer_info(&spec.source, spec.user.as_ref()),
        peer_info(&spec.target, spec.user.as_ref()),
        filter_info(&spec.filter, filter_code),
        spec.winning_revs_only,
        spec.since_seq,
    ]);
    let mut canonical = Vec::new();
    // Canonical JSON (sorted keys) so equal inputs always hash alike.
    let _ = revtree::write_canonical_json(&mut canonical, &inputs);
    let digest = Md5::digest(&canonical);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The job id CouchDB shows: the base id plus `+continuous` and
/// `+create_target` when set.
pub fn job_id(server_uuid: &str, spec: &ReplicationSpec) -> String {
    let mut id = replication_id(server_uuid, spec);
    if spec.continuous {
        id.push_str("+continuous");
    }
    if spec.create_target {
        id.push_str("+create_target");
    }
    id
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(v: Value) -> ReplicationSpec {
        ReplicationSpec::parse(&v).unwrap()
    }

    #[test]
    fn the_id_is_stable_and_ignores_credentials_and_options_that_do_not_change_data() {
        let a =
            spec(json!({"source": "http://u:one@h:5984/db", "target": "t", "worker_processes": 2}));
        let b = spec(
            json!({"source": {"url": "http://h:5984/db/", "auth": {"basic": {"username": "u", "password": "two"}}}, "target": "t"}),
        );
        assert_eq!(replication_id("uuid", &a), replication_id("uuid", &b));
        assert_eq!(replication_id("uuid", &a).len(), 32);
        // Pinned: changing the inputs' shape must come with a REP_ID_VERSION bump.
        assert_eq!(
            replication_id("uuid", &spec(json!({"source": "a", "target": "b"}))),
            replication_id("uuid", &spec(json!({"source": "a/", "target": "b"})))
        );
    }

    #[test]
    fn anything_that_changes_the_copied_data_changes_the_id() {
        let base = spec(json!({"source": "a", "target": "b"}));
        let id = replication_id("uuid", &base);
        let variants = [
            json!({"source": "a", "target": "c"}),
            json!({"source": "c", "target": "b"}),
            json!({"source": "a", "target": "b", "doc_ids": ["x"]}),
            json!({"source": "a", "target": "b", "selector": {"k": 1}}),
            json!({"source": "a", "target": "b", "filter": "d/f"}),
            json!({"source": "a", "target": "b", "since_seq": 5}),
            json!({"source": "a", "target": "b", "winning_revs_only": true}),
            json!({"source": "http://h/a", "target": "b"}),
            json!({"source": {"url": "http://h/a", "headers": {"X-Tenant": "1"}}, "target": "b"}),
        ];
        for v in variants {
            assert_ne!(replication_id("uuid", &spec(v.clone())), id, "{v}");
        }
        assert_ne!(replication_id("other-server", &base), id);
    }

    #[test]
    fn users_replicating_local_databases_keep_checkpoints_of_their_own() {
        let user = |name: &str| auth::UserCtx {
            name: Some(name.into()),
            roles: vec![],
            handler: None,
        };
        let as_user = |u: Option<auth::UserCtx>, v: Value| ReplicationSpec { user: u, ..spec(v) };
        let local = json!({"source": "a", "target": "b"});
        let admin = replication_id("uuid", &as_user(None, local.clone()));
        let alice = replication_id("uuid", &as_user(Some(user("alice")), local.clone()));
        let bob = replication_id("uuid", &as_user(Some(user("bob")), local.clone()));
        assert_ne!(admin, alice);
        assert_ne!(alice, bob);
        assert_eq!(
            alice,
            replication_id("uuid", &as_user(Some(user("alice")), local))
        );
        // Remote peers are read with their URL's credentials, whoever asks.
        let remote = json!({"source": "http://h:5984/a", "target": "http://h:5984/b"});
        assert_eq!(
            replication_id("uuid", &as_user(None, remote.clone())),
            replication_id("uuid", &as_user(Some(user("alice")), remote))
        );
    }

    #[test]
    fn job_ids_carry_couchdbs_suffixes() {
        let s =
            spec(json!({"source": "a", "target": "b", "continuous": true, "create_target": true}));
        let id = job_id("uuid", &s);
        assert!(id.ends_with("+continuous+create_target"), "{id}");
        assert!(id.starts_with(&replication_id("uuid", &s)));
    }
}
