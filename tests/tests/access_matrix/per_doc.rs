//! The database with per-document access: its roles, its rows, and the
//! database itself (users, members, design documents, indexes and three
//! documents named for different readers).

use recliner_tests::Client;
use serde_json::{Value, json};

use crate::cast::{Cast, design_doc};
use crate::rows::Row;

/// The roles of the database with per-document access, in the order of
/// its rows' answers: `named` is the member its document `shared-note`
/// names, `unnamed` a member it does not name, `byrole` a member only by
/// a role (`staff`), which the document names too.
pub(crate) const ACCESS_ROLES: [&str; 7] = [
    "anonymous",
    "outsider",
    "named",
    "unnamed",
    "byrole",
    "dbadmin",
    "server",
];

/// A row of the database with per-document access (Recliner's only:
/// CouchDB 3.5 has no per-document access).
fn access_row(
    method: &'static str,
    path: impl Into<String>,
    body: Option<Value>,
    expect: [u16; 7],
) -> Row<7> {
    Row {
        method,
        path: path.into(),
        body,
        expect,
        couchdb: false,
    }
}

/// The database with per-document access (`?access=true`): `shared-note`
/// names `named` and the role `staff`, `unnamed-own` names `unnamed`,
/// `admins-only` nobody. A member reaches documents and the routes that
/// show them one user's way (searches included); design documents, their
/// functions, index figures and listings of design or local documents
/// are for admins.
pub(crate) fn access_rows() -> Vec<Row<7>> {
    const OPEN: [u16; 7] = [401, 403, 200, 200, 200, 200, 200];
    const CREATED: [u16; 7] = [401, 403, 201, 201, 201, 201, 201];
    // The document naming `named` and `staff`: not `unnamed`'s.
    const READERS: [u16; 7] = [401, 403, 200, 404, 200, 200, 200];
    const UNNAMEDS: [u16; 7] = [401, 403, 404, 200, 404, 200, 200];
    const HIDDEN: [u16; 7] = [401, 403, 404, 404, 404, 200, 200];
    const ADMINS: [u16; 7] = [401, 403, 403, 403, 403, 200, 200];
    const ADMINS_WRITE: [u16; 7] = [401, 403, 403, 403, 403, 201, 201];
    const ADMINS_ACCEPTED: [u16; 7] = [401, 403, 403, 403, 403, 202, 202];
    let search = "/{db}/_design/find";
    vec![
        access_row("GET", "/{db}", None, OPEN),
        access_row("GET", "/{db}/shared-note", None, READERS),
        access_row("HEAD", "/{db}/shared-note", None, READERS),
        access_row("GET", "/{db}/shared-note?open_revs=all", None, READERS),
        access_row("GET", "/{db}/shared-note/a.txt", None, READERS),
        access_row("GET", "/{db}/unnamed-own", None, UNNAMEDS),
        access_row("GET", "/{db}/admins-only", None, HIDDEN),
        access_row("GET", "/{db}/admins-only?open_revs=all", None, HIDDEN),
        access_row("GET", "/{db}/admins-only/a.txt", None, HIDDEN),
        access_row(
            "PUT",
            "/{db}/new-{role}",
            Some(json!({"_access": ["{self}"]})),
            CREATED,
        ),
        access_row(
            "PUT",
            "/{db}/theirs-{role}",
            Some(json!({"_access": ["{dbadmin}"]})),
            ADMINS_WRITE,
        ),
        access_row(
            "POST",
            "/{db}/_bulk_docs",
            Some(json!({"docs": [{"_access": ["{self}"]}]})),
            CREATED,
        ),
        access_row(
            "POST",
            "/{db}/_bulk_get",
            Some(json!({"docs": [{"id": "shared-note"}, {"id": "admins-only"}]})),
            OPEN,
        ),
        access_row("GET", "/{db}/_all_docs", None, OPEN),
        access_row(
            "POST",
            "/{db}/_all_docs/queries",
            Some(json!({"queries": [{"keys": ["shared-note", "admins-only"]}, {}]})),
            OPEN,
        ),
        access_row(
            "POST",
            "/{db}/_all_docs",
            Some(json!({"keys": ["shared-note", "admins-only"]})),
            OPEN,
        ),
        access_row("GET", "/{db}/_changes", None, OPEN),
        access_row(
            "GET",
            "/{db}/_changes?feed=longpoll&since=now&timeout=100",
            None,
            OPEN,
        ),
        access_row(
            "GET",
            "/{db}/_changes?feed=continuous&timeout=100",
            None,
            OPEN,
        ),
        access_row(
            "GET",
            "/{db}/_changes?feed=eventsource&timeout=100",
            None,
            OPEN,
        ),
        access_row(
            "POST",
            "/{db}/_changes?filter=_doc_ids",
            Some(json!({"doc_ids": ["shared-note"]})),
            OPEN,
        ),
        access_row(
            "POST",
            "/{db}/_changes?filter=_selector",
            Some(json!({"selector": {"kind": "classified"}})),
            OPEN,
        ),
        access_row(
            "POST",
            "/{db}/_find",
            Some(json!({"selector": {"v": 1}})),
            OPEN,
        ),
        access_row(
            "POST",
            "/{db}/_find",
            Some(json!({"selector": {"$text": "quartz"}})),
            OPEN,
        ),
        access_row(
            "POST",
            "/{db}/_explain",
            Some(json!({"selector": {"v": 1}})),
            OPEN,
        ),
        access_row("GET", "/{db}/_index", None, OPEN),
        access_row(
            "PUT",
            "/{db}/_local/l-{role}",
            Some(json!({"v": 1})),
            CREATED,
        ),
        access_row("GET", "/{db}/_security", None, OPEN),
        access_row(
            "POST",
            "/{db}/_revs_diff",
            Some(json!({"admins-only": ["1-abc"]})),
            OPEN,
        ),
        access_row("GET", "/{db}/_design/app", None, ADMINS),
        access_row("GET", "/{db}/_design/app/_view/all", None, ADMINS),
        access_row(
            "GET",
            "/{db}/_design/app/_show/whole/shared-note",
            None,
            ADMINS,
        ),
        access_row("GET", "/{db}/_design/app/_list/rows/all", None, ADMINS),
        access_row(
            "POST",
            "/{db}/_design/app/_update/stamp/upd-{role}",
            Some(json!({})),
            ADMINS_WRITE,
        ),
        // Searches answer from the reader's own documents, fresh or
        // stale; an index's figures and cleanup are for admins.
        access_row("GET", format!("{search}/_nouveau/words?q=*:*"), None, OPEN),
        access_row(
            "GET",
            format!("{search}/_nouveau/words?q=*:*&update=false"),
            None,
            OPEN,
        ),
        access_row(
            "POST",
            format!("{search}/_nouveau/words"),
            Some(json!({"q": "secret:quartz", "counts": ["kind"]})),
            OPEN,
        ),
        access_row("GET", format!("{search}/_search/words?q=*:*"), None, OPEN),
        access_row(
            "GET",
            format!("{search}/_search/words?q=*:*&stale=ok"),
            None,
            OPEN,
        ),
        access_row(
            "POST",
            format!("{search}/_search/words"),
            Some(json!({"q": "secret:quartz", "counts": ["kind"]})),
            OPEN,
        ),
        access_row("GET", format!("{search}/_nouveau_info/words"), None, ADMINS),
        access_row("GET", format!("{search}/_search_info/words"), None, ADMINS),
        access_row(
            "POST",
            "/{db}/_nouveau_cleanup",
            Some(json!({})),
            ADMINS_ACCEPTED,
        ),
        access_row(
            "POST",
            "/{db}/_search_cleanup",
            Some(json!({})),
            ADMINS_ACCEPTED,
        ),
        access_row("GET", "/{db}/_design_docs", None, ADMINS),
        access_row("GET", "/{db}/_local_docs", None, ADMINS),
        access_row(
            "PUT",
            "/{db}/_design/new-{role}",
            Some(json!({"language": "javascript"})),
            ADMINS_WRITE,
        ),
        access_row(
            "POST",
            "/{db}/_purge",
            Some(json!({"nothing": []})),
            [401, 401, 401, 401, 401, 401, 201],
        ),
        // Each member replicates their own documents. (Fails for
        // `unnamed` and `byrole` while a local replication's checkpoint
        // is shared by every user: `named`'s, written first, is refused
        // to them; see `a_replications_checkpoint_is_its_users_own`.)
        access_row(
            "POST",
            "/_replicate",
            Some(json!({"source": "{db}", "target": "{db}"})),
            [401, 403, 200, 200, 200, 200, 200],
        ),
    ]
}

/// Makes `db` the database with per-document access of [`access_rows`]:
/// the users `unnamed` and `byrole` (role `staff`) besides the cast's,
/// its members (`member`, `unnamed` and `dbadmin` by name, `staff` by
/// role) and admin (`dbadmin`), the design documents, a search design
/// document `find` and a Mango text index, and three documents:
/// `shared-note` for `member` and `staff`, `unnamed-own` for `unnamed`,
/// `admins-only` for nobody. Answers a client per role of
/// [`ACCESS_ROLES`].
pub(crate) async fn access_database(
    admin: &Client,
    base: &str,
    cast: &Cast,
    db: &str,
) -> Vec<Client> {
    let made = admin.put(&format!("/{db}?access=true"), json!(null)).await;
    assert_eq!(made.status, 201, "{}", made.text);
    cast.prepare(admin, db, design_doc()).await;
    let plain_base = recliner_tests::without_credentials(base);
    let mut extra = Vec::new();
    for (role, roles) in [("unnamed", json!([])), ("byrole", json!(["staff"]))] {
        let name = cast.name(role);
        let user = json!({"name": name, "password": "pw", "roles": roles, "type": "user"});
        let made = admin
            .put(&format!("/_users/org.couchdb.user:{name}"), user)
            .await;
        assert_eq!(made.status, 201, "{}", made.text);
        extra.push(Client::at(&plain_base.replacen(
            "://",
            &format!("://{name}:pw@"),
            1,
        )));
    }
    let security = json!({
        "members": {
            "names": [cast.name("member"), cast.name("unnamed"), cast.name("dbadmin")],
            "roles": ["staff"],
        },
        "admins": {"names": [cast.name("dbadmin")]},
    });
    let set = admin.put(&format!("/{db}/_security"), security).await;
    assert_eq!(set.status, 200, "{}", set.text);
    let find = json!({
        "nouveau": {"words": {"index": "function (d) {
            index('string', 'kind', d.kind || 'none', {store: true});
            index('text', 'secret', d.secret || '', {store: true});
        }"}},
        "indexes": {"words": {"index": "function (d) {
            index('kind', d.kind || 'none', {store: true, facet: true});
            index('secret', d.secret || '', {store: true});
        }"}},
    });
    let made = admin.put(&format!("/{db}/_design/find"), find).await;
    assert_eq!(made.status, 201, "{}", made.text);
    let index = json!({"type": "nouveau", "name": "secrets", "ddoc": "secrets",
                       "index": {"fields": [{"name": "secret", "type": "text"}]}});
    let made = admin.post(&format!("/{db}/_index"), index).await;
    assert_eq!(made.status, 200, "{}", made.text);
    let attachment = json!({"a.txt": {"content_type": "text/plain", "data": "aGk="}});
    for (id, doc) in [
        (
            "shared-note",
            json!({"_access": [cast.name("member"), "staff"], "v": 1, "kind": "classified",
                   "secret": "quartz heron", "_attachments": attachment}),
        ),
        (
            "unnamed-own",
            json!({"_access": [cast.name("unnamed")], "v": 1, "kind": "ordinary",
                   "secret": "plain words"}),
        ),
        (
            "admins-only",
            json!({"v": 1, "kind": "restricted", "secret": "falcon", "_attachments": attachment}),
        ),
    ] {
        let made = admin.put(&format!("/{db}/{id}"), doc).await;
        assert_eq!(made.status, 201, "{}", made.text);
    }
    let c = &cast.clients;
    vec![
        c[0].clone(),
        c[1].clone(),
        c[2].clone(),
        extra[0].clone(),
        extra[1].clone(),
        c[3].clone(),
        c[4].clone(),
    ]
}
