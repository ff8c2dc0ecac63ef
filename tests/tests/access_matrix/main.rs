//! Every route family tried by every role, in a plain database, `_users`,
//! `_replicator` and a database with per-document access: one table of the answers CouchDB 3.5 gives (or the
//! stricter ones Recliner gives where CouchDB leaks). The database with
//! per-document access has roles of its own (members named in a
//! document's `_access`, not named in it, or admitted by a role), and
//! beyond its statuses a member not named sees nothing of the document:
//! every answer about it is byte for byte a missing document's, and no
//! listing or search answer carries its id, its field values or a count
//! that includes it. Every answer of
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

/// The roles of the database with per-document access, in the order of
/// its rows' answers: `named` is the member its document `shared-note`
/// names, `unnamed` a member it does not name, `byrole` a member only by
/// a role (`staff`), which the document names too.
const ACCESS_ROLES: [&str; 7] = [
    "anonymous",
    "outsider",
    "named",
    "unnamed",
    "byrole",
    "dbadmin",
    "server",
];

/// One route: method, path (`{db}`, `{role}`, `{self}` and the users'
/// names are filled in), body, and the status each role gets (`N`
/// roles); `couchdb`: CouchDB gives the same answers.
struct Row<const N: usize = 5> {
    method: &'static str,
    path: String,
    body: Option<Value>,
    expect: [u16; N],
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
fn access_rows() -> Vec<Row<7>> {
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

    /// The user a role logs in as: `named` is the cast's member.
    fn user_of(&self, role: &str) -> String {
        match role {
            "named" => self.name("member"),
            _ => self.name(role),
        }
    }

    fn fill(&self, text: &str, db: &str, role: &str) -> String {
        text.replace("{db}", db)
            .replace("{role}", role)
            .replace("{self}", &self.user_of(role))
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
        self.run_as(db, rows, &ROLES, &self.clients, only_couchdb)
            .await
    }

    /// [`Cast::run`] with roles of its own, a client for each.
    async fn run_as<const N: usize>(
        &self,
        db: &str,
        rows: &[Row<N>],
        roles: &[&str; N],
        clients: &[Client],
        only_couchdb: bool,
    ) -> Vec<String> {
        let mut wrong = Vec::new();
        for row in rows.iter().filter(|r| r.couchdb || !only_couchdb) {
            for (at, role) in roles.iter().enumerate() {
                let path = self.fill(&row.path, db, role);
                let body = row.body.as_ref().map(|b| ejson_fill(self, b, db, role));
                let answer = clients[at].send(row.method, &path, body, &[]).await;
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
    for db in ["plain", "_users", "_replicator"] {
        cast.prepare(&admin, db, design_doc()).await;
    }
    let access_clients = access_database(&admin, &base, &cast, "perdoc").await;
    plain_content(&admin, "plain").await;
    let theirs = json!({"source": "http://x:secret@127.0.0.1:9/a", "target": "http://127.0.0.1:9/b", "owner": "admin"});
    assert_eq!(admin.put("/_replicator/theirs", theirs).await.status, 201);

    let mut wrong = cast.run("plain", &plain_rows(), false).await;
    wrong.extend(cast.run("_users", &users_rows(), false).await);
    wrong.extend(cast.run("_replicator", &replicator_rows(), false).await);
    wrong.extend(
        cast.run_as(
            "perdoc",
            &access_rows(),
            &ACCESS_ROLES,
            &access_clients,
            false,
        )
        .await,
    );
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

/// Makes `db` the database with per-document access of [`access_rows`]:
/// the users `unnamed` and `byrole` (role `staff`) besides the cast's,
/// its members (`member`, `unnamed` and `dbadmin` by name, `staff` by
/// role) and admin (`dbadmin`), the design documents, a search design
/// document `find` and a Mango text index, and three documents:
/// `shared-note` for `member` and `staff`, `unnamed-own` for `unnamed`,
/// `admins-only` for nobody. Answers a client per role of
/// [`ACCESS_ROLES`].
async fn access_database(admin: &Client, base: &str, cast: &Cast, db: &str) -> Vec<Client> {
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

/// What of `shared-note` and `admins-only` may show to someone who may
/// not read them: nothing (their ids and every field value).
const NOT_FOR_UNNAMED: [&str; 7] = [
    "shared-note",
    "quartz",
    "heron",
    "classified",
    "admins-only",
    "falcon",
    "restricted",
];

/// A document id nobody wrote.
const NOTHING: &str = "nothing-here";

/// A request: method, path, body and headers.
type Request = (
    &'static str,
    &'static str,
    Option<Value>,
    Vec<(&'static str, &'static str)>,
);

/// Requests about one document (`{id}`, `{rev}` and `{self}` filled in),
/// each asked of a document the caller may not read and of `NOTHING`.
fn about_one_document() -> Vec<Request> {
    let none = Vec::new;
    vec![
        ("GET", "/perdoc/{id}", None, none()),
        ("HEAD", "/perdoc/{id}", None, none()),
        ("GET", "/perdoc/{id}?open_revs=all", None, none()),
        (
            "GET",
            "/perdoc/{id}?open_revs=all",
            None,
            vec![("accept", "multipart/mixed")],
        ),
        (
            "GET",
            "/perdoc/{id}?open_revs=%5B%22{rev}%22%5D",
            None,
            none(),
        ),
        ("GET", "/perdoc/{id}?rev={rev}", None, none()),
        (
            "GET",
            "/perdoc/{id}?revs=true&revs_info=true&conflicts=true&deleted_conflicts=true&meta=true",
            None,
            none(),
        ),
        ("GET", "/perdoc/{id}?attachments=true", None, none()),
        ("GET", "/perdoc/{id}/a.txt", None, none()),
        ("HEAD", "/perdoc/{id}/a.txt", None, none()),
        ("GET", "/perdoc/{id}/a.txt?rev={rev}", None, none()),
        (
            "POST",
            "/perdoc/_bulk_get",
            Some(json!({"docs": [{"id": "{id}"}]})),
            none(),
        ),
        (
            "POST",
            "/perdoc/_bulk_get?revs=true",
            Some(json!({"docs": [{"id": "{id}", "rev": "{rev}"}]})),
            none(),
        ),
        (
            "POST",
            "/perdoc/_all_docs",
            Some(json!({"keys": ["{id}"]})),
            none(),
        ),
        (
            "POST",
            "/perdoc/_all_docs?include_docs=true&conflicts=true",
            Some(json!({"keys": ["{id}"]})),
            none(),
        ),
        (
            "POST",
            "/perdoc/_revs_diff",
            Some(json!({"{id}": ["{rev}"]})),
            none(),
        ),
        (
            "POST",
            "/perdoc/_missing_revs",
            Some(json!({"{id}": ["{rev}"]})),
            none(),
        ),
        (
            "POST",
            "/perdoc/_changes?filter=_doc_ids&include_docs=true",
            Some(json!({"doc_ids": ["{id}"]})),
            none(),
        ),
        (
            "GET",
            "/perdoc/_changes?filter=_doc_ids&doc_ids=%5B%22{id}%22%5D",
            None,
            none(),
        ),
        // Writes with a revision: refused as for a document nobody wrote.
        (
            "PUT",
            "/perdoc/{id}",
            Some(json!({"_rev": "{rev}", "_access": ["{self}"]})),
            none(),
        ),
        (
            "PUT",
            "/perdoc/{id}/b.txt?rev={rev}",
            Some(json!("b")),
            none(),
        ),
        ("DELETE", "/perdoc/{id}?rev={rev}", None, none()),
        ("DELETE", "/perdoc/{id}/a.txt?rev={rev}", None, none()),
        (
            "POST",
            "/perdoc/_bulk_docs",
            Some(json!({"docs": [{"_id": "{id}", "_rev": "{rev}", "_access": ["{self}"]}]})),
            none(),
        ),
        (
            "COPY",
            "/perdoc/{id}",
            None,
            vec![("destination", "copied-by-a-member")],
        ),
    ]
}

/// The answers of `client` (logged in as `user`) about `other`, a
/// document it may not read, that differ from its answers about a
/// document nobody wrote: status, body (with the id in place),
/// content type, whether it has an ETag, or (for HEAD) length.
async fn unlike_missing(client: &Client, user: &str, other: &str, rev: &str) -> Vec<String> {
    let mut wrong = Vec::new();
    for (method, path, body, headers) in about_one_document() {
        let fill = |text: &str, id: &str| {
            text.replace("{id}", id)
                .replace("{rev}", rev)
                .replace("{self}", user)
        };
        let mut answers = Vec::new();
        for id in [other, NOTHING] {
            let body = body
                .as_ref()
                .map(|b| serde_json::from_str(&fill(&b.to_string(), id)).unwrap_or(Value::Null));
            let answer = client.send(method, &fill(path, id), body, &headers).await;
            // A HEAD answer's length is its GET's.
            let length = (method == "HEAD")
                .then(|| answer.header("content-length").map(str::to_string))
                .flatten();
            answers.push((
                answer.status,
                answer.text.replace(id, NOTHING),
                answer.header("content-type").map(str::to_string),
                // A feed's tag is of its query, which names the id.
                answer.header("etag").is_some(),
                length,
            ));
        }
        if answers[0] != answers[1] {
            wrong.push(format!(
                "LEAK {user}: {method} {} answers {:?}, where a missing document's answer is {:?}",
                fill(path, other),
                answers[0],
                answers[1]
            ));
        }
    }
    wrong
}

/// Listing and search requests of the database with per-document access:
/// the first of each pair is asked before any fresh query, of indexes last
/// built while `unnamed` still read `shared-note`.
fn listings() -> Vec<(&'static str, &'static str, Option<Value>)> {
    vec![
        (
            "GET",
            "/perdoc/_design/find/_nouveau/words?q=*:*&update=false&include_docs=true&counts=%5B%22kind%22%5D",
            None,
        ),
        (
            "GET",
            "/perdoc/_design/find/_search/words?q=*:*&stale=ok&include_docs=true&counts=%5B%22kind%22%5D",
            None,
        ),
        (
            "POST",
            "/perdoc/_find",
            Some(json!({"selector": {"$text": "quartz"}, "update": false})),
        ),
        (
            "GET",
            "/perdoc/_design/find/_nouveau/words?q=*:*&include_docs=true&counts=%5B%22kind%22%5D",
            None,
        ),
        (
            "GET",
            "/perdoc/_design/find/_search/words?q=*:*&include_docs=true&counts=%5B%22kind%22%5D",
            None,
        ),
        (
            "POST",
            "/perdoc/_find",
            Some(json!({"selector": {"$text": "quartz"}})),
        ),
        (
            "POST",
            "/perdoc/_design/find/_nouveau/words",
            Some(json!({"q": "secret:quartz", "counts": ["kind"], "include_docs": true})),
        ),
        (
            "POST",
            "/perdoc/_design/find/_search/words",
            Some(json!({"q": "secret:quartz", "counts": ["kind"], "include_docs": true})),
        ),
        (
            "GET",
            "/perdoc/_design/find/_search/words?q=*:*&group_field=kind",
            None,
        ),
        (
            "GET",
            "/perdoc/_design/find/_search/words?q=*:*&drilldown=%5B%22kind%22%2C%22classified%22%5D",
            None,
        ),
        ("GET", "/perdoc", None),
        ("GET", "/perdoc/_all_docs?include_docs=true", None),
        ("GET", "/perdoc/_changes?include_docs=true", None),
        (
            "GET",
            "/perdoc/_changes?feed=longpoll&include_docs=true",
            None,
        ),
        (
            "POST",
            "/perdoc/_changes?filter=_selector&include_docs=true",
            Some(json!({"selector": {"kind": {"$gt": null}}})),
        ),
        (
            "POST",
            "/perdoc/_find",
            Some(json!({"selector": {"kind": {"$gt": null}}})),
        ),
        (
            "POST",
            "/perdoc/_find",
            Some(json!({"selector": {"secret": {"$regex": "quartz"}}, "execution_stats": true})),
        ),
        (
            "POST",
            "/perdoc/_explain",
            Some(json!({"selector": {"kind": {"$gt": null}}})),
        ),
    ]
}

#[tokio::test]
async fn a_member_not_named_sees_nothing_of_the_document() {
    let data = TempDir::new("access-matrix-unnamed");
    let server = TestServer::start_with_env(data.path(), &[], &[TEST_ADMIN]);
    let admin = Client::new(&server);
    let base = server
        .plain_url
        .replacen("http://", "http://admin:test-secret@", 1);
    let cast = Cast::create(&admin, &base, "").await;
    let clients = access_database(&admin, &base, &cast, "perdoc").await;
    let (named, unnamed, byrole) = (&clients[2], &clients[3], &clients[4]);
    let rev_of = |id: &'static str| {
        let admin = admin.clone();
        async move {
            admin.get(&format!("/perdoc/{id}")).await.json()["_rev"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };

    // The indexes are last built while `unnamed` read `was-shared`; then
    // `unnamed` is taken off it (its feed shows that as a deletion of
    // its own, and nothing else shows it).
    let was_shared = json!({"_access": [cast.name("member"), cast.name("unnamed")],
                            "v": 1, "kind": "bygone", "secret": "quartz osprey"});
    let made = admin.put("/perdoc/was-shared", was_shared).await;
    assert_eq!(made.status, 201, "{}", made.text);
    for (method, path, body) in [
        ("GET", "/perdoc/_design/find/_nouveau/words?q=*:*", None),
        ("GET", "/perdoc/_design/find/_search/words?q=*:*", None),
        (
            "POST",
            "/perdoc/_find",
            Some(json!({"selector": {"$text": "quartz"}})),
        ),
    ] {
        let built = admin.send(method, path, body, &[]).await;
        assert_eq!(built.status, 200, "{method} {path}: {}", built.text);
        assert!(built.text.contains("was-shared"), "{}", built.text);
    }
    let mut taken = admin.get("/perdoc/was-shared").await.json();
    taken["_access"] = json!([cast.name("member")]);
    assert_eq!(admin.put("/perdoc/was-shared", taken).await.status, 201);

    // Listings and searches, stale ones first: nothing of the document,
    // and counts of `unnamed-own` alone.
    let mut wrong = Vec::new();
    for (method, path, body) in listings() {
        let answer = unnamed.send(method, path, body.clone(), &[]).await;
        if answer.status != 200 {
            wrong.push(format!(
                "unnamed: {method} {path}: {} {}",
                answer.status, answer.text
            ));
        }
        // Its feed shows `was-shared` taken from it, as a deletion.
        let feed = path.contains("_changes") && !path.contains("_selector");
        let secrets = NOT_FOR_UNNAMED
            .iter()
            .chain((!feed).then_some(&"was-shared"))
            .chain(&["osprey", "bygone"]);
        for secret in secrets {
            if answer.text.contains(secret) {
                wrong.push(format!(
                    "LEAK unnamed: {method} {path} shows {secret:?}: {}",
                    answer.text
                ));
            }
        }
        let found = serde_json::from_str::<Value>(&answer.text).unwrap_or(Value::Null);
        let own = if path.contains("quartz")
            || body
                .as_ref()
                .is_some_and(|b| b.to_string().contains("quartz"))
            || path.contains("drilldown")
        {
            0
        } else {
            1
        };
        let own_counts = if own == 0 {
            json!({"kind": {}})
        } else {
            json!({"kind": {"ordinary": 1}})
        };
        for (figure, expected) in [
            ("total_hits", json!(own)),
            ("total_rows", json!(own)),
            ("doc_count", json!(own)),
            ("counts", own_counts),
        ] {
            if let Some(got) = found.get(figure)
                && !(figure == "counts" && got.is_null())
                && *got != expected
            {
                wrong.push(format!(
                    "LEAK unnamed: {method} {path}: {figure} {got}, expected {expected} (of its own documents)"
                ));
            }
        }
        // What a query examined is of its own one document.
        let stats = &found["execution_stats"];
        for figure in ["total_keys_examined", "total_docs_examined"] {
            if stats.get(figure).is_some_and(|n| n.as_u64() > Some(1)) {
                wrong.push(format!(
                    "LEAK unnamed: {method} {path}: {figure} {}, of one document of its own",
                    stats[figure]
                ));
            }
        }
        // Those the document names find it where it is asked for (the
        // check above can see a leak).
        if path.contains("*:*") && path.contains("include_docs") {
            for reader in [named, byrole] {
                let answer = reader.send(method, path, body.clone(), &[]).await;
                assert!(
                    answer.text.contains("shared-note") && answer.text.contains("quartz"),
                    "{method} {path}: {}",
                    answer.text
                );
            }
        }
    }

    // Every answer about another's document is a missing document's.
    let note_rev = rev_of("shared-note").await;
    let hidden_rev = rev_of("admins-only").await;
    let own_rev = rev_of("unnamed-own").await;
    let unnamed_name = cast.name("unnamed");
    let member_name = cast.name("member");
    let byrole_name = cast.name("byrole");
    for (client, user, other, rev) in [
        (unnamed, unnamed_name.as_str(), "shared-note", &note_rev),
        (unnamed, unnamed_name.as_str(), "admins-only", &hidden_rev),
        (named, member_name.as_str(), "admins-only", &hidden_rev),
        (named, member_name.as_str(), "unnamed-own", &own_rev),
        (byrole, byrole_name.as_str(), "unnamed-own", &own_rev),
    ] {
        wrong.extend(unlike_missing(client, user, other, rev).await);
    }
    assert!(
        wrong.is_empty(),
        "{} answers show what they should not:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    // Nothing was written by those refusals.
    assert_eq!(rev_of("shared-note").await, note_rev);
    assert_eq!(admin.get("/perdoc/copied-by-a-member").await.status, 404);
    let listed = unnamed.get("/perdoc/_all_docs").await.json();
    assert_eq!(listed["total_rows"], 1, "{listed}");
}

/// The same local replication run by different users of a database with
/// per-document access copies what each may read: one user's checkpoint
/// (which records how far *their* feed was read) is not another's.
#[tokio::test]
async fn a_replications_checkpoint_is_its_users_own() {
    let data = TempDir::new("access-matrix-checkpoints");
    let server = TestServer::start_with_env(data.path(), &[], &[TEST_ADMIN]);
    let admin = Client::new(&server);
    let base = server
        .plain_url
        .replacen("http://", "http://admin:test-secret@", 1);
    let cast = Cast::create(&admin, &base, "").await;
    let clients = access_database(&admin, &base, &cast, "perdoc").await;
    let (named, unnamed) = (&clients[2], &clients[3]);
    let members = json!({"members": {"names": [cast.name("member"), cast.name("unnamed")]}});
    for target in ["copy", "copy-with-access"] {
        let query = if target == "copy" { "" } else { "?access=true" };
        let made = admin.put(&format!("/{target}{query}"), json!(null)).await;
        assert_eq!(made.status, 201, "{}", made.text);
        let set = admin
            .put(&format!("/{target}/_security"), members.clone())
            .await;
        assert_eq!(set.status, 200, "{}", set.text);
    }
    let mut wrong = Vec::new();
    let ids = |reply: Value| -> Vec<String> {
        reply["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["id"].as_str())
            .filter(|id| !id.starts_with("_design/"))
            .map(str::to_string)
            .collect()
    };

    // `named` copies theirs first; then the server admin runs the same
    // replication, which must copy every document.
    let spec = json!({"source": "perdoc", "target": "copy"});
    let first = named.post("/_replicate", spec.clone()).await;
    assert_eq!(first.status, 200, "{}", first.text);
    assert_eq!(
        ids(admin.get("/copy/_all_docs").await.json()),
        ["shared-note"]
    );
    let all = admin.post("/_replicate", spec).await;
    assert_eq!(all.status, 200, "{}", all.text);
    let copied = ids(admin.get("/copy/_all_docs").await.json());
    if copied != ["admins-only", "shared-note", "unnamed-own"] {
        wrong.push(format!(
            "POST /_replicate {{\"source\": \"perdoc\", \"target\": \"copy\"}} as the server admin, \
             after the same as a member, copied only {copied:?}: it resumed from the member's \
             checkpoint (the replication id of local peers does not include the user): {}",
            all.text
        ));
    }

    // Into a database with per-document access: `named` first, then
    // `unnamed`, whose replication must copy theirs too.
    let spec = json!({"source": "perdoc", "target": "copy-with-access"});
    let first = named.post("/_replicate", spec.clone()).await;
    assert_eq!(first.status, 200, "{}", first.text);
    let second = unnamed.post("/_replicate", spec).await;
    let copied = ids(admin.get("/copy-with-access/_all_docs").await.json());
    if second.status != 200 || copied != ["shared-note", "unnamed-own"] {
        wrong.push(format!(
            "POST /_replicate {{\"source\": \"perdoc\", \"target\": \"copy-with-access\"}} as a \
             second member answered {} {} and the target holds {copied:?}: the checkpoint the \
             first member wrote is theirs, and refused to the second",
            second.status, second.text
        ));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
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
