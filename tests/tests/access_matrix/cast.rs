//! The cast of one run (a user and a client per role), how it prepares a
//! database for the table, and how it runs the table's rows.

use recliner_tests::Client;
use serde_json::{Value, json};

use crate::rows::Row;

/// The roles, in the order of each row's answers.
const ROLES: [&str; 5] = ["anonymous", "outsider", "member", "dbadmin", "server"];

/// The users of one run (names prefixed so that runs on a shared CouchDB
/// never meet) and a client per role.
pub(crate) struct Cast {
    prefix: String,
    pub(crate) clients: Vec<Client>,
}

impl Cast {
    pub(crate) fn name(&self, role: &str) -> String {
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
    pub(crate) async fn create(admin: &Client, base: &str, prefix: &str) -> Cast {
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
    pub(crate) async fn prepare(&self, admin: &Client, db: &str, ddoc: Value) {
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
    pub(crate) async fn run(&self, db: &str, rows: &[Row], only_couchdb: bool) -> Vec<String> {
        self.run_as(db, rows, &ROLES, &self.clients, only_couchdb)
            .await
    }

    /// [`Cast::run`] with roles of its own, a client for each.
    pub(crate) async fn run_as<const N: usize>(
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

pub(crate) fn design_doc() -> Value {
    json!({
        "views": {"all": {"map": "function(d) { emit(d._id, d); }"}},
        "shows": {"whole": "function(d) { return JSON.stringify(d); }"},
        "lists": {"rows": "function() { var r; while ((r = getRow())) { send(JSON.stringify(r)); } }"},
        "nouveau": {"all": {"index": "function(d) { index('string', 'id', d._id); }"}},
        "updates": {"stamp": "function(d, req) { return [{_id: req.id, v: 1}, 'ok']; }"}
    })
}
