//! The rows of `_users` and `_replicator`: those they share, and each
//! one's own.

use serde_json::json;

use crate::rows::{OPEN, Row, SERVER_ADMIN, row, stricter};

/// The rows `_users` and `_replicator` share: only routes that filter per
/// document are open to members; listings, every changes feed and
/// replication out are for admins; replication in (last: it writes) is
/// judged document by document. `other` is a document of another user.
fn special_rows(other: &str) -> Vec<Row> {
    let admins_listing = [401, 403, 401, 200, 200];
    let mut rows = vec![row("GET", "/{db}", None, OPEN)];
    for feed in [
        "",
        "?feed=continuous&timeout=100",
        "?feed=longpoll&since=now&timeout=100",
        "?feed=eventsource&timeout=100",
    ] {
        let path = format!("/{{db}}/_changes{feed}");
        rows.push(stricter("GET", path, None, SERVER_ADMIN));
    }
    rows.extend([
        stricter("GET", "/{db}/_all_docs", None, SERVER_ADMIN),
        stricter(
            "POST",
            "/{db}/_all_docs/queries",
            Some(json!({"queries": [{}]})),
            SERVER_ADMIN,
        ),
        stricter(
            "POST",
            "/{db}/_find",
            Some(json!({"selector": {}})),
            admins_listing,
        ),
        stricter(
            "POST",
            "/{db}/_bulk_get",
            Some(json!({"docs": [{"id": other}]})),
            admins_listing,
        ),
        stricter("GET", "/{db}/_design_docs", None, admins_listing),
        stricter(
            "PUT",
            "/{db}/_revs_limit",
            Some(json!(1000)),
            [401, 403, 403, 200, 200],
        ),
        // CouchDB's next release: changing these is an admin's (an
        // automatic purge loses data).
        stricter(
            "PUT",
            "/{db}/_auto_purge",
            Some(json!({"deleted_document_ttl": "3_mon"})),
            [401, 403, 403, 201, 201],
        ),
        stricter("DELETE", "/{db}/_time_seq", None, [401, 403, 403, 200, 200]),
        stricter("GET", "/_reshard", None, SERVER_ADMIN),
        stricter(
            "PUT",
            "/_reshard/state",
            Some(json!({"state": "running"})),
            SERVER_ADMIN,
        ),
        stricter(
            "POST",
            "/_replicate",
            Some(json!({"source": "{db}", "target": "plain"})),
            SERVER_ADMIN,
        ),
        stricter(
            "POST",
            "/_replicate",
            Some(json!({"source": "plain", "target": "{db}"})),
            [401, 403, 200, 200, 200],
        ),
    ]);
    rows
}

pub(crate) fn users_rows() -> Vec<Row> {
    let design_only = [401, 403, 403, 200, 200];
    let mut rows = vec![
        stricter("GET", "/{db}/org.couchdb.user:{member}", None, OPEN),
        // Another user's document does not exist for a member.
        stricter(
            "GET",
            "/{db}/org.couchdb.user:{dbadmin}",
            None,
            [401, 403, 404, 200, 200],
        ),
        stricter("GET", "/{db}/_design/peek", None, design_only),
        stricter("GET", "/{db}/_design/peek/_view/all", None, design_only),
        stricter(
            "POST",
            "/{db}/_design/peek/_view/all",
            Some(json!({})),
            design_only,
        ),
        stricter(
            "GET",
            "/{db}/_design/peek/_show/whole/org.couchdb.user:{dbadmin}",
            None,
            design_only,
        ),
        stricter(
            "GET",
            "/{db}/_design/peek/_list/rows/all",
            None,
            design_only,
        ),
    ];
    rows.extend(special_rows("org.couchdb.user:{dbadmin}"));
    rows
}

pub(crate) fn replicator_rows() -> Vec<Row> {
    let functions = [401, 403, 403, 200, 200];
    let mut rows = vec![
        stricter("GET", "/{db}/theirs", None, OPEN),
        stricter(
            "PUT",
            "/{db}/rep-{role}",
            Some(json!({"source": "http://127.0.0.1:9/a", "target": "http://127.0.0.1:9/b"})),
            [401, 403, 201, 201, 201],
        ),
        stricter("GET", "/{db}/_design/peek", None, OPEN),
        stricter("GET", "/{db}/_design/peek/_view/all", None, functions),
        stricter(
            "GET",
            "/{db}/_design/peek/_show/whole/theirs",
            None,
            functions,
        ),
        stricter("GET", "/{db}/_design/peek/_list/rows/all", None, functions),
    ];
    rows.extend(special_rows("theirs"));
    rows
}
