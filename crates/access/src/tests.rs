use crate::{Answer, Kind, Need, Refusal, Route, Status, route_need};
use store::StoreError;

fn need(kind: Kind, method: &str, segments: &[&str]) -> Need {
    route_need(kind, &Route { method, segments })
}

#[test]
fn kinds_are_told_by_name() {
    assert_eq!(Kind::of("_users"), Kind::Users);
    assert_eq!(Kind::of("_replicator"), Kind::Replicator);
    assert_eq!(Kind::of("team/_replicator"), Kind::Replicator);
    assert_eq!(Kind::of("users"), Kind::Plain);
}

#[test]
fn the_authentication_db_and_prefixed_users_dbs_get_the_users_rules() {
    assert_eq!(Kind::of("team/_users"), Kind::Users);
    assert_eq!(Kind::of("team_users"), Kind::Plain);
    assert_eq!(Kind::of("accounts-for-kinds"), Kind::Plain);
    crate::set_authentication_db("accounts-for-kinds");
    assert_eq!(Kind::of("accounts-for-kinds"), Kind::Users);
    assert_eq!(&*crate::authentication_db(), "accounts-for-kinds");
    // `_users` keeps its rules when logins are looked up elsewhere.
    assert_eq!(Kind::of("_users"), Kind::Users);
    crate::set_authentication_db("");
    assert_eq!(Kind::of("accounts-for-kinds"), Kind::Plain);
    assert_eq!(&*crate::authentication_db(), "_users");
}

#[test]
fn a_users_design_document_is_written_through_the_gate_but_read_by_admins() {
    assert_eq!(
        need(Kind::Users, "PUT", &["_design", "_auth"]),
        Need::Member,
        "the write gate answers per document"
    );
    for (method, segments) in [
        ("DELETE", &["_design", "_auth"][..]),
        ("COPY", &["_design", "_auth"][..]),
        ("PUT", &["_design", "_auth", "attachment"][..]),
    ] {
        assert!(
            matches!(
                need(Kind::Users, method, segments),
                Need::DbAdmin {
                    status: Status::Forbidden,
                    ..
                }
            ),
            "{method} {segments:?}"
        );
    }
}

#[test]
fn plain_databases_are_open_to_members_but_for_admin_routes() {
    assert_eq!(need(Kind::Plain, "GET", &["doc"]), Need::Member);
    assert_eq!(need(Kind::Plain, "GET", &["_changes"]), Need::Member);
    assert_eq!(need(Kind::Plain, "PUT", &[]), Need::ServerAdmin);
    assert_eq!(need(Kind::Plain, "POST", &["_purge"]), Need::ServerAdmin);
    assert_eq!(need(Kind::Plain, "GET", &["_revs_limit"]), Need::Member);
    assert!(matches!(
        need(Kind::Plain, "PUT", &["_revs_limit"]),
        Need::DbAdmin {
            status: Status::ByCaller,
            ..
        }
    ));
}

#[test]
fn special_databases_open_only_the_routes_that_filter_what_a_user_sees() {
    for kind in [Kind::Users, Kind::Replicator] {
        assert_eq!(need(kind, "GET", &["org.couchdb.user:bob"]), Need::Member);
        assert_eq!(need(kind, "POST", &["_bulk_docs"]), Need::Member);
        assert_eq!(need(kind, "GET", &["_changes"]), Need::ServerAdmin);
        assert_eq!(need(kind, "POST", &["_all_docs"]), Need::ServerAdmin);
        for listing in ["_find", "_bulk_get", "_design_docs", "_revs_diff"] {
            assert!(matches!(
                need(kind, "POST", &[listing]),
                Need::DbAdmin { .. }
            ));
        }
        assert!(matches!(
            need(kind, "GET", &["_design", "x", "_view", "v"]),
            Need::DbAdmin {
                status: Status::Forbidden,
                ..
            }
        ));
        assert!(matches!(
            need(kind, "GET", &["_design", "x", "_show", "s", "id"]),
            Need::DbAdmin { .. }
        ));
    }
    assert!(matches!(
        need(Kind::Users, "GET", &["_design", "x"]),
        Need::DbAdmin { .. }
    ));
    assert_eq!(
        need(Kind::Replicator, "GET", &["_design", "x"]),
        Need::Member
    );
    assert_eq!(
        need(Kind::Replicator, "GET", &["_design", "x", "_info"]),
        Need::Member
    );
}

#[test]
fn users_of_a_per_document_database_reach_documents_but_not_design_functions() {
    for (method, segments) in [
        ("GET", &[][..]),
        ("GET", &["doc"][..]),
        ("PUT", &["doc"][..]),
        ("GET", &["doc", "att.txt"][..]),
        ("GET", &["_all_docs"][..]),
        ("POST", &["_changes"][..]),
        ("POST", &["_bulk_get"][..]),
        ("POST", &["_bulk_docs"][..]),
        ("POST", &["_revs_diff"][..]),
        ("POST", &["_find"][..]),
        ("GET", &["_local", "checkpoint"][..]),
    ] {
        assert_eq!(
            need(Kind::PerDoc, method, segments),
            Need::Member,
            "{method} {segments:?}"
        );
    }
    for (method, segments) in [
        ("GET", &["_design", "app"][..]),
        ("GET", &["_design", "app", "_view", "v"][..]),
        ("GET", &["_design", "app", "_show", "s", "doc"][..]),
        ("POST", &["_design", "app", "_update", "u"][..]),
        ("GET", &["_design_docs"][..]),
        ("GET", &["_local_docs"][..]),
        ("GET", &["_partition", "p", "_all_docs"][..]),
        ("GET", &["_time_seq"][..]),
    ] {
        assert!(
            matches!(need(Kind::PerDoc, method, segments), Need::DbAdmin { .. }),
            "{method} {segments:?}"
        );
    }
    assert_eq!(need(Kind::PerDoc, "PUT", &[]), Need::ServerAdmin);
    assert_eq!(need(Kind::PerDoc, "POST", &["_purge"]), Need::ServerAdmin);
}

#[test]
fn a_refusal_is_answered_by_one_table() {
    let answered = |refusal: Refusal| match refusal.answer() {
        Answer::Refused {
            status,
            error,
            reason,
        } => (status, error, reason),
        other => panic!("not a refusal of the caller: {other:?}"),
    };
    assert_eq!(
        answered(Refusal::Unauthorized("who".into())),
        (401, "unauthorized", "who".into())
    );
    assert_eq!(
        answered(Refusal::Forbidden("no".into())),
        (403, "forbidden", "no".into())
    );
    assert_eq!(
        answered(Refusal::NotFound("missing".into())),
        (404, "not_found", "missing".into())
    );
    assert!(matches!(
        Refusal::Store(StoreError::DocNotFound("missing")).answer(),
        Answer::Store(_)
    ));
}

#[test]
fn every_listed_route_is_found_by_its_name() {
    for endpoint in crate::Endpoint::ALL {
        assert_eq!(crate::Endpoint::of(endpoint.name()), Some(endpoint));
        assert!(endpoint.name().starts_with('_'));
    }
    for function in crate::DesignFunction::ALL {
        assert_eq!(crate::DesignFunction::of(function.name()), Some(function));
    }
    assert_eq!(crate::Endpoint::of("_design"), None);
    assert_eq!(crate::Endpoint::of("_all_docs "), None);
}
