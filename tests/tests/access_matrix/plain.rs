//! The plain database's rows, and its document with an attachment.

use recliner_tests::Client;
use serde_json::json;

use crate::rows::{CREATED, OPEN, Row, SERVER_ADMIN, beyond_reference, row, stricter};

pub(crate) fn plain_rows() -> Vec<Row> {
    vec![
        row("GET", "/{db}", None, OPEN),
        row("GET", "/{db}/doc", None, OPEN),
        row("GET", "/{db}/doc?open_revs=all", None, OPEN),
        row("GET", "/{db}/doc/a.txt", None, OPEN),
        row("PUT", "/{db}/new-{role}", Some(json!({"v": 1})), CREATED),
        row(
            "POST",
            "/{db}/_bulk_docs",
            Some(json!({"docs": [{"v": 2}]})),
            CREATED,
        ),
        row(
            "POST",
            "/{db}/_bulk_get",
            Some(json!({"docs": [{"id": "doc"}]})),
            OPEN,
        ),
        row("GET", "/{db}/_all_docs", None, OPEN),
        row(
            "POST",
            "/{db}/_all_docs/queries",
            Some(json!({"queries": [{"keys": ["doc"]}, {"limit": 1}]})),
            OPEN,
        ),
        row("GET", "/{db}/_changes", None, OPEN),
        row(
            "GET",
            "/{db}/_changes?feed=longpoll&since=now&timeout=100",
            None,
            OPEN,
        ),
        row(
            "GET",
            "/{db}/_changes?feed=continuous&timeout=100",
            None,
            OPEN,
        ),
        row(
            "GET",
            "/{db}/_changes?feed=eventsource&timeout=100",
            None,
            OPEN,
        ),
        row(
            "POST",
            "/{db}/_changes?filter=_doc_ids",
            Some(json!({"doc_ids": ["doc"]})),
            OPEN,
        ),
        row("GET", "/{db}/_design/app/_view/all", None, OPEN),
        row(
            "POST",
            "/{db}/_design/app/_view/all",
            Some(json!({"keys": ["doc"]})),
            OPEN,
        ),
        row("GET", "/{db}/_design/app/_show/whole/doc", None, OPEN),
        row("GET", "/{db}/_design/app/_list/rows/all", None, OPEN),
        beyond_reference("GET", "/{db}/_design/app/_nouveau/all?q=*:*", None, OPEN),
        row(
            "POST",
            "/{db}/_design/app/_update/stamp/upd-{role}",
            Some(json!({})),
            CREATED,
        ),
        row(
            "POST",
            "/{db}/_find",
            Some(json!({"selector": {"v": 1}})),
            OPEN,
        ),
        row("GET", "/{db}/_index", None, OPEN),
        row(
            "PUT",
            "/{db}/_local/l-{role}",
            Some(json!({"v": 1})),
            CREATED,
        ),
        row("GET", "/{db}/_security", None, OPEN),
        row(
            "POST",
            "/{db}/_revs_diff",
            Some(json!({"doc": ["1-abc"]})),
            OPEN,
        ),
        row(
            "PUT",
            "/{db}/_design/new-{role}",
            Some(json!({"language": "javascript"})),
            [401, 403, 403, 201, 201],
        ),
        row(
            "POST",
            "/{db}/_compact",
            Some(json!({})),
            [401, 403, 401, 202, 202],
        ),
        row(
            "POST",
            "/{db}/_view_cleanup",
            Some(json!({})),
            [401, 403, 401, 202, 202],
        ),
        row(
            "POST",
            "/{db}/_purge",
            Some(json!({"nothing": []})),
            [401, 401, 401, 401, 201],
        ),
        // CouchDB answers a member's `_revs_limit`, `_index` and
        // `_security` writes with 500s.
        stricter(
            "PUT",
            "/{db}/_revs_limit",
            Some(json!(1000)),
            [401, 403, 403, 200, 200],
        ),
        stricter(
            "POST",
            "/{db}/_index",
            Some(json!({"index": {"fields": ["v"]}})),
            [401, 403, 401, 200, 200],
        ),
        stricter(
            "PUT",
            "/{db}/_security",
            Some(
                json!({"members": {"names": ["{member}", "{dbadmin}"]}, "admins": {"names": ["{dbadmin}"]}}),
            ),
            [401, 403, 403, 200, 200],
        ),
        // Replication in and out: CouchDB 3 refuses local names.
        stricter(
            "POST",
            "/_replicate",
            Some(json!({"source": "{db}", "target": "{db}"})),
            [401, 403, 200, 200, 200],
        ),
        // The node's configuration is the server admins', and so is
        // Recliner's list of the settings that wait for the next start
        // (the console's Server page reads both).
        row("GET", "/_node/_local/_config", None, SERVER_ADMIN),
        beyond_reference(
            "GET",
            "/_node/_local/_config/_applied_at_start",
            None,
            SERVER_ADMIN,
        ),
    ]
}

/// The plain database's document with an attachment.
pub(crate) async fn plain_content(admin: &Client, db: &str) {
    let doc =
        json!({"v": 1, "_attachments": {"a.txt": {"content_type": "text/plain", "data": "aGk="}}});
    let made = admin.put(&format!("/{db}/doc"), doc).await;
    assert_eq!(made.status, 201, "{}", made.text);
}
