//! Every route family tried by every role, in a plain database, `_users`,
//! `_replicator` and a database with per-document access: one table of the answers CouchDB 3.5 gives (or the
//! stricter ones Recliner gives where CouchDB leaks). Every answer of
//! Recliner's carries the sandbox policy and `nosniff`, stored content and
//! function answers included. With the reference
//! CouchDB at hand (`COUCHDB_URL`), the plain database's rows marked as
//! CouchDB's are asked of it too and must agree. The special databases are
//! Recliner's only: opening the shared reference's `_users` to test users
//! would change what its other tests see.

use recliner_tests::couchdb::{couchdb, unique_db};
use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Value, json};

const TEST_ADMIN: (&str, &str) = ("RECLINER_ADMIN", "admin:test-secret");

/// The roles, in the order of each row's answers.
const ROLES: [&str; 5] = ["anonymous", "outsider", "member", "dbadmin", "server"];

/// One route: method, path (`{db}` and `{role}` are filled in), body, and
/// the status each role gets; `couchdb`: CouchDB gives the same answers.
struct Row {
    method: &'static str,
    path: String,
    body: Option<Value>,
    expect: [u16; 5],
    couchdb: bool,
}

fn row(
    method: &'static str,
    path: impl Into<String>,
    body: Option<Value>,
    expect: [u16; 5],
) -> Row {
    Row {
        method,
        path: path.into(),
        body,
        expect,
        couchdb: true,
    }
}

/// A row whose answers differ on CouchDB (which leaks, or answers 500).
fn stricter(
    method: &'static str,
    path: impl Into<String>,
    body: Option<Value>,
    expect: [u16; 5],
) -> Row {
    Row {
        couchdb: false,
        ..row(method, path, body, expect)
    }
}

/// A row for a feature the reference CouchDB runs without (its Nouveau needs a
/// separate Java service, so its search routes answer 404 there).
fn beyond_reference(
    method: &'static str,
    path: impl Into<String>,
    body: Option<Value>,
    expect: [u16; 5],
) -> Row {
    // Left out of the comparison as a stricter row is, for another reason.
    stricter(method, path, body, expect)
}

const OPEN: [u16; 5] = [401, 403, 200, 200, 200];
const CREATED: [u16; 5] = [401, 403, 201, 201, 201];
const SERVER_ADMIN: [u16; 5] = [401, 401, 401, 401, 200];

fn plain_rows() -> Vec<Row> {
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

/// A database with per-document access (`?access=true`): `doc` names the
/// member, `hidden` nobody (admins only). A member reaches documents and
/// the routes that show them one user's way; design documents, their
/// functions and listings of design or local documents are for admins.
fn per_doc_rows() -> Vec<Row> {
    const HIDDEN: [u16; 5] = [401, 403, 404, 200, 200];
    const ADMINS: [u16; 5] = [401, 403, 403, 200, 200];
    let rows = vec![
        row("GET", "/{db}", None, OPEN),
        row("GET", "/{db}/doc", None, OPEN),
        row("GET", "/{db}/doc?open_revs=all", None, OPEN),
        row("GET", "/{db}/hidden", None, HIDDEN),
        row("GET", "/{db}/hidden?open_revs=all", None, HIDDEN),
        row("GET", "/{db}/hidden/a.txt", None, HIDDEN),
        row(
            "PUT",
            "/{db}/new-{role}",
            Some(json!({"_access": ["{member}"]})),
            CREATED,
        ),
        row(
            "PUT",
            "/{db}/theirs-{role}",
            Some(json!({"_access": ["{dbadmin}"]})),
            [401, 403, 403, 201, 201],
        ),
        row(
            "POST",
            "/{db}/_bulk_docs",
            Some(json!({"docs": [{"_access": ["{member}"]}]})),
            CREATED,
        ),
        row(
            "POST",
            "/{db}/_bulk_get",
            Some(json!({"docs": [{"id": "hidden"}]})),
            OPEN,
        ),
        row("GET", "/{db}/_all_docs", None, OPEN),
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
            Some(json!({"hidden": ["1-abc"]})),
            OPEN,
        ),
        row("GET", "/{db}/_design/app", None, ADMINS),
        row("GET", "/{db}/_design/app/_view/all", None, ADMINS),
        row("GET", "/{db}/_design/app/_show/whole/doc", None, ADMINS),
        row("GET", "/{db}/_design/app/_list/rows/all", None, ADMINS),
        // A member searches their own documents; the index's info is for admins.
        row("GET", "/{db}/_design/app/_nouveau/all?q=*:*", None, OPEN),
        row("GET", "/{db}/_design/app/_nouveau_info/all", None, ADMINS),
        row(
            "POST",
            "/{db}/_design/app/_update/stamp/upd-{role}",
            Some(json!({})),
            [401, 403, 403, 201, 201],
        ),
        row("GET", "/{db}/_design_docs", None, ADMINS),
        row("GET", "/{db}/_local_docs", None, ADMINS),
        row(
            "PUT",
            "/{db}/_design/new-{role}",
            Some(json!({"language": "javascript"})),
            [401, 403, 403, 201, 201],
        ),
        row(
            "POST",
            "/{db}/_purge",
            Some(json!({"nothing": []})),
            [401, 401, 401, 401, 201],
        ),
        row(
            "POST",
            "/_replicate",
            Some(json!({"source": "{db}", "target": "{db}"})),
            [401, 403, 200, 200, 200],
        ),
    ];
    // CouchDB 3.5 has no per-document access: these rows are Recliner's.
    rows.into_iter()
        .map(|r| Row {
            couchdb: false,
            ..r
        })
        .collect()
}

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

fn users_rows() -> Vec<Row> {
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

fn replicator_rows() -> Vec<Row> {
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

/// The users of one run (names prefixed so that runs on a shared CouchDB
/// never meet) and a client per role.
struct Cast {
    prefix: String,
    clients: Vec<Client>,
}

impl Cast {
    fn name(&self, role: &str) -> String {
        format!("{}{role}", self.prefix)
    }

    fn fill(&self, text: &str, db: &str, role: &str) -> String {
        text.replace("{db}", db)
            .replace("{role}", role)
            .replace("{member}", &self.name("member"))
            .replace("{dbadmin}", &self.name("dbadmin"))
    }

    /// Creates the users and the clients; `base` holds the admin's credentials.
    async fn create(admin: &Client, base: &str, prefix: &str) -> Cast {
        let cast = Cast {
            prefix: prefix.to_string(),
            clients: Vec::new(),
        };
        let mut clients = Vec::new();
        let plain_base = recliner_tests::without_credentials(base);
        for role in ROLES {
            let name = cast.name(role);
            let client = match role {
                "anonymous" => Client::at(&plain_base),
                "server" => Client::at(base),
                _ => {
                    let user = json!({"name": name, "password": "pw", "roles": [], "type": "user"});
                    let made = admin
                        .put(&format!("/_users/org.couchdb.user:{name}"), user)
                        .await;
                    assert_eq!(made.status, 201, "{}", made.text);
                    Client::at(&plain_base.replacen("://", &format!("://{name}:pw@"), 1))
                }
            };
            clients.push(client);
        }
        Cast { clients, ..cast }
    }

    /// Makes `db` (existing or not) the matrix's: members and admins set,
    /// a document, a design document and what the rows read.
    async fn prepare(&self, admin: &Client, db: &str, ddoc: Value) {
        let _ = admin.put(&format!("/{db}"), json!(null)).await;
        let security = json!({
            "members": {"names": [self.name("member"), self.name("dbadmin")]},
            "admins": {"names": [self.name("dbadmin")]},
        });
        let set = admin.put(&format!("/{db}/_security"), security).await;
        assert_eq!(set.status, 200, "{db}: {}", set.text);
        let made = admin.put(&format!("/{db}/_design/app"), ddoc.clone()).await;
        assert_eq!(made.status, 201, "{}", made.text);
        let made = admin.put(&format!("/{db}/_design/peek"), ddoc).await;
        assert_eq!(made.status, 201, "{}", made.text);
    }

    /// Each row by each role: the mismatches, described.
    async fn run(&self, db: &str, rows: &[Row], only_couchdb: bool) -> Vec<String> {
        let mut wrong = Vec::new();
        for row in rows.iter().filter(|r| r.couchdb || !only_couchdb) {
            for (at, role) in ROLES.iter().enumerate() {
                let path = self.fill(&row.path, db, role);
                let body = row.body.as_ref().map(|b| ejson_fill(self, b, db, role));
                let answer = self.clients[at].send(row.method, &path, body, &[]).await;
                // Recliner's answers, every one, keep what they carry from
                // running in a browser as the server (CouchDB's do not all).
                let sandboxed = answer
                    .headers
                    .get_all("content-security-policy")
                    .iter()
                    .any(|v| v == "sandbox")
                    && answer.header("x-content-type-options") == Some("nosniff");
                if !only_couchdb && !sandboxed {
                    wrong.push(format!(
                        "{} {path} as {role}: no sandbox policy or nosniff",
                        row.method
                    ));
                }
                if answer.status != row.expect[at] {
                    wrong.push(format!(
                        "{} {path} as {role}: {} (expected {}): {}",
                        row.method,
                        answer.status,
                        row.expect[at],
                        answer.text.chars().take(200).collect::<String>()
                    ));
                }
            }
        }
        wrong
    }
}

fn ejson_fill(cast: &Cast, body: &Value, db: &str, role: &str) -> Value {
    let text = cast.fill(&body.to_string(), db, role);
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

fn design_doc() -> Value {
    json!({
        "views": {"all": {"map": "function(d) { emit(d._id, d); }"}},
        "shows": {"whole": "function(d) { return JSON.stringify(d); }"},
        "lists": {"rows": "function() { var r; while ((r = getRow())) { send(JSON.stringify(r)); } }"},
        "nouveau": {"all": {"index": "function(d) { index('string', 'id', d._id); }"}},
        "updates": {"stamp": "function(d, req) { return [{_id: req.id, v: 1}, 'ok']; }"}
    })
}

/// The plain database's document with an attachment.
async fn plain_content(admin: &Client, db: &str) {
    let doc =
        json!({"v": 1, "_attachments": {"a.txt": {"content_type": "text/plain", "data": "aGk="}}});
    let made = admin.put(&format!("/{db}/doc"), doc).await;
    assert_eq!(made.status, 201, "{}", made.text);
}

#[tokio::test]
async fn every_route_answers_every_role_as_the_table_says() {
    let data = TempDir::new("access-matrix");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[("RECLINER_USERS_DB_SECURITY_EDITABLE", "true"), TEST_ADMIN],
    );
    let admin = Client::new(&server);
    let base = server
        .plain_url
        .replacen("http://", "http://admin:test-secret@", 1);
    let cast = Cast::create(&admin, &base, "").await;
    assert_eq!(
        admin.put("/perdoc?access=true", json!(null)).await.status,
        201
    );
    for db in ["plain", "_users", "_replicator", "perdoc"] {
        cast.prepare(&admin, db, design_doc()).await;
    }
    plain_content(&admin, "plain").await;
    let named = json!({"_access": [cast.name("member")], "v": 1});
    assert_eq!(admin.put("/perdoc/doc", named).await.status, 201);
    let hidden =
        json!({"v": 1, "_attachments": {"a.txt": {"content_type": "text/plain", "data": "aGk="}}});
    assert_eq!(admin.put("/perdoc/hidden", hidden).await.status, 201);
    let theirs = json!({"source": "http://x:secret@127.0.0.1:9/a", "target": "http://127.0.0.1:9/b", "owner": "admin"});
    assert_eq!(admin.put("/_replicator/theirs", theirs).await.status, 201);

    let mut wrong = cast.run("plain", &plain_rows(), false).await;
    wrong.extend(cast.run("_users", &users_rows(), false).await);
    wrong.extend(cast.run("_replicator", &replicator_rows(), false).await);
    wrong.extend(cast.run("perdoc", &per_doc_rows(), false).await);
    assert!(
        wrong.is_empty(),
        "{} answers differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );

    // What a member sees of another's replication is without credentials.
    let member = &cast.clients[2];
    let seen = member.get("/_replicator/theirs").await;
    assert!(!seen.text.contains("secret"), "{}", seen.text);
}

#[tokio::test]
async fn couchdb_answers_the_plain_database_rows_the_same() {
    let Some(reference) = couchdb("couchdb_answers_the_plain_database_rows_the_same") else {
        return;
    };
    let admin = reference.client();
    let prefix = format!("{}-", unique_db("m"));
    let cast = Cast::create(&admin, reference.url(), &prefix).await;
    let db = unique_db("matrix");
    cast.prepare(&admin, &db, design_doc()).await;
    plain_content(&admin, &db).await;
    let wrong = cast.run(&db, &plain_rows(), true).await;
    let _ = admin.delete(&format!("/{db}")).await;
    assert!(
        wrong.is_empty(),
        "CouchDB answers differently:\n{}",
        wrong.join("\n")
    );
}
