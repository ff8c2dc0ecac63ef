//! Several `recliner` nodes on one PostgreSQL (`--store postgres://...`):
//! writes to every node at once, one database for all of them, feeds and
//! `_security` that follow other nodes' writes, a `_replicator` job that
//! runs on exactly one node and moves to another when that node is killed,
//! and no acknowledged write lost. All of it twice: with PostgreSQL's
//! `NOTIFY` and advisory locks, and without them, as on the compatible
//! engines that lack them.
//!
//! Runs in the PostgreSQL pass of `cargo xtask test` (it needs
//! `RECLINER_TEST_POSTGRES`); the SQLite pass has nothing to run it on.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use recliner_tests::{Client, TempDir, TestServer, eventually_within};
use serde_json::{Value, json};

/// Documents each writer sends per request.
const BATCH: usize = 10;

/// Three nodes on one PostgreSQL schema, and a fourth server on SQLite.
struct Cluster {
    nodes: Vec<Option<TestServer>>,
    _dirs: Vec<TempDir>,
}

/// How the nodes coordinate: the settings of one of the two modes.
type Mode = &'static [(&'static str, &'static str)];

/// PostgreSQL's own features: `NOTIFY` and advisory locks.
const WITH_NOTIFY: Mode = &[];

/// As on engines without `LISTEN`/`NOTIFY` or advisory locks.
const WITHOUT_NOTIFY: Mode = &[
    ("RECLINER_STORE_NOTIFY", "false"),
    ("RECLINER_STORE_ADVISORY_LOCKS", "false"),
];

/// The longest a node may take to see another node's write: generous for
/// a loaded test machine, many times the polling interval.
const FOLLOW_BOUND: Duration = Duration::from_secs(5);

fn start_cluster(store: &str, mode: Mode) -> Cluster {
    let dirs: Vec<TempDir> = (0..3).map(|i| TempDir::new(&format!("node{i}"))).collect();
    let nodes = dirs
        .iter()
        .map(|dir| {
            let mut env = vec![
                ("RECLINER_STORE", store),
                ("RECLINER_REPLICATOR_CHECKPOINT_INTERVAL_MS", "300"),
            ];
            env.extend_from_slice(mode);
            Some(TestServer::start_with_env(dir.path(), &[], &env))
        })
        .collect();
    Cluster { nodes, _dirs: dirs }
}

/// Writes batches through one node until told to stop or the node dies;
/// every acknowledged document goes into `acked` (id → revision).
async fn writer(
    url: String,
    name: String,
    acked: Arc<Mutex<BTreeMap<String, String>>>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let http = recliner_tests::http_client_builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    for round in 0u64.. {
        if *stop.borrow() {
            return;
        }
        let docs: Vec<Value> = (0..BATCH)
            .map(|i| json!({"_id": format!("{name}-{round:05}-{i}"), "by": name, "round": round}))
            .collect();
        let sent = http
            .post(format!("{url}/shared/_bulk_docs"))
            .json(&json!({"docs": docs}))
            .send()
            .await;
        let Ok(response) = sent else {
            // The node is gone: what it acknowledged before stays counted.
            return;
        };
        if response.status() != 201 {
            continue;
        }
        let Ok(rows) = response.json::<Value>().await else {
            return;
        };
        let mut acked = acked.lock().unwrap();
        for row in rows.as_array().into_iter().flatten() {
            if let (Some(id), Some(rev)) = (row["id"].as_str(), row["rev"].as_str()) {
                acked.insert(id.to_string(), rev.to_string());
            }
        }
    }
}

/// Which node runs the replication now: the one listing it as a running task.
async fn runner(cluster: &Cluster) -> Option<usize> {
    for (i, node) in cluster.nodes.iter().enumerate() {
        let Some(node) = node else { continue };
        let tasks = Client::new(node).get("/_active_tasks").await.json();
        if tasks.as_array().is_some_and(|t| !t.is_empty()) {
            return Some(i);
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_on_one_postgres_share_writes_and_hand_over_a_killed_nodes_replication() {
    three_nodes(WITH_NOTIFY).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_without_notify_or_advisory_locks_do_the_same() {
    three_nodes(WITHOUT_NOTIFY).await;
}

async fn three_nodes(mode: Mode) {
    let Ok(url) = std::env::var(recliner_tests::POSTGRES_VAR) else {
        eprintln!("no PostgreSQL (RECLINER_TEST_POSTGRES): nothing to run the nodes on");
        return;
    };
    if url.is_empty() {
        return;
    }
    let schema = format!("scale_{}", uuid::Uuid::new_v4().simple());
    store_postgres::create_schema(&url, &schema).unwrap();
    let joiner = if url.contains('?') { '&' } else { '?' };
    let store = format!("{url}{joiner}options=-csearch_path%3D{schema}");
    let mut cluster = start_cluster(&store, mode);
    let clients: Vec<Client> = cluster
        .nodes
        .iter()
        .map(|n| Client::new(n.as_ref().unwrap()))
        .collect();
    // The SQLite-backed server the replication delivers to.
    let sink_dir = TempDir::new("sink");
    let sink = TestServer::start_with_env(sink_dir.path(), &[], &[("RECLINER_STORE", "")]);
    let sink_client = Client::new(&sink);
    assert_eq!(sink_client.put("/copy", json!({})).await.status, 201);

    // One database for all three: created on one node, seen by the others.
    assert_eq!(clients[0].put("/shared", json!({})).await.status, 201);
    for c in &clients[1..] {
        assert_eq!(c.put("/shared", json!({})).await.status, 412);
        assert_eq!(c.get("/shared").await.status, 200);
    }
    let same_uuid: Vec<Value> = futures_util::future::join_all(
        clients
            .iter()
            .map(|c| async { c.get("/").await.json()["uuid"].clone() }),
    )
    .await;
    assert!(same_uuid.windows(2).all(|w| w[0] == w[1]), "{same_uuid:?}");

    // An admin added on one node logs in on the others.
    let added = clients[0]
        .put("/_node/_local/_config/admins/ops", json!("ops-password"))
        .await;
    assert_eq!(added.status, 200, "{}", added.text);
    for node in cluster.nodes.iter().skip(1) {
        let node = node.as_ref().unwrap();
        let ops = Client::at(
            &node
                .plain_url
                .replacen("http://", "http://ops:ops-password@", 1),
        );
        assert!(
            eventually_within(Duration::from_secs(15), async || {
                ops.get("/_all_dbs").await.status == 200
            })
            .await,
            "the admin added on node 0 cannot log in on {}",
            node.plain_url
        );
    }

    // Two edits of one document on two nodes at once: one wins, one is refused.
    let first = clients[0]
        .put("/shared/contested", json!({"v": 0}))
        .await
        .json();
    let rev = first["rev"].as_str().unwrap().to_string();
    let path = format!("/shared/contested?rev={rev}");
    let (a, b) = tokio::join!(
        clients[1].put(&path, json!({"v": 1})),
        clients[2].put(&path, json!({"v": 2}))
    );
    let mut statuses = [a.status, b.status];
    statuses.sort();
    assert_eq!(statuses, [201, 409], "{} / {}", a.text, b.text);

    follow_other_nodes(&cluster).await;

    // A continuous replication, written on node 0, into the SQLite server.
    let job = json!({
        "_id": "to-sink",
        "source": "shared",
        "target": format!("{}/copy", sink.url),
        "continuous": true
    });
    assert_eq!(clients[0].post("/_replicator", job).await.status, 201);

    // Clients write to all three nodes at once.
    let acked = Arc::new(Mutex::new(BTreeMap::new()));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let writers: Vec<_> = cluster
        .nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            tokio::spawn(writer(
                node.as_ref().unwrap().url.clone(),
                format!("w{i}"),
                acked.clone(),
                stop_rx.clone(),
            ))
        })
        .collect();

    // Exactly one node runs the job; it has checkpointed some of the load.
    let mut holder = None;
    assert!(
        eventually_within(Duration::from_secs(30), async || {
            holder = runner(&cluster).await;
            holder.is_some() && acked.lock().unwrap().len() >= 300
        })
        .await,
        "no node runs the replication"
    );
    let holder = holder.unwrap();
    let running: usize = futures_util::future::join_all(clients.iter().map(|c| async {
        c.get("/_active_tasks")
            .await
            .json()
            .as_array()
            .map_or(0, Vec::len)
    }))
    .await
    .iter()
    .sum();
    assert_eq!(running, 1, "the job runs on one node only");
    // Every node lists the job, whichever runs it.
    for c in &clients {
        let jobs = c.get("/_scheduler/jobs").await.json();
        assert!(
            eventually_within(Duration::from_secs(15), async || {
                c.get("/_scheduler/jobs").await.json()["total_rows"] == 1
            })
            .await,
            "{jobs}"
        );
        let docs = c.get("/_scheduler/docs/_replicator/to-sink").await.json();
        assert_eq!(docs["state"], "running", "{docs}");
    }
    // The first session's checkpoint is on the target.
    let job_id = clients[holder].get("/_scheduler/jobs").await.json()["jobs"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let base = job_id.split('+').next().unwrap().to_string();
    assert!(
        eventually_within(Duration::from_secs(20), async || {
            sink_client
                .get(&format!("/copy/_local/{base}"))
                .await
                .status
                == 200
        })
        .await,
        "no checkpoint written"
    );

    // The runner dies mid-load.
    let killed = cluster.nodes[holder].take().unwrap();
    std::process::Command::new("kill")
        .args(["-KILL", &killed.pid().to_string()])
        .status()
        .unwrap();
    drop(killed);
    let survivors: Vec<usize> = (0..3).filter(|i| *i != holder).collect();

    // Another node takes the job over within 30 s, from the checkpoint.
    let mut taken_by = None;
    assert!(
        eventually_within(Duration::from_secs(30), async || {
            taken_by = runner(&cluster).await;
            taken_by.is_some()
        })
        .await,
        "no node took the killed node's replication over"
    );
    assert!(survivors.contains(&taken_by.unwrap()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _ = stop_tx.send(true);
    for w in writers {
        w.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= 300, "{}", acked.len());
    eprintln!(
        "scale_out: node {holder} ran the job and was killed; node {} took it over; {} writes acknowledged",
        taken_by.unwrap(),
        acked.len()
    );

    // No acknowledged write is lost: every one is in the shared database
    // (read through a survivor) and reaches the SQLite server.
    let survivor = &clients[survivors[0]];
    let all = survivor.get("/shared/_all_docs").await.json();
    let stored: BTreeMap<String, String> = all["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_string(),
                r["value"]["rev"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (id, rev) in &acked {
        assert_eq!(
            stored.get(id),
            Some(rev),
            "{id} lost in the shared database"
        );
    }
    let delivered = eventually_within(Duration::from_secs(60), async || {
        let copy = sink_client.get("/copy/_all_docs").await.json();
        let ids: std::collections::BTreeSet<String> = copy["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["id"].as_str().map(str::to_string))
            .collect();
        acked.keys().all(|id| ids.contains(id))
    })
    .await;
    assert!(
        delivered,
        "some acknowledged writes never reached the SQLite server"
    );
    // Resumed from the checkpoint: the new session started past zero.
    let log = sink_client
        .get(&format!("/copy/_local/{base}"))
        .await
        .json();
    let sessions = log["history"].as_array().cloned().unwrap_or_default();
    eprintln!("scale_out: replication log on the target: {log}");
    assert!(
        sessions.iter().any(|s| s["start_last_seq"] != json!(0)
            && s["start_last_seq"] != json!("0")
            && !s["start_last_seq"].is_null()),
        "the job started over instead of resuming: {log}"
    );
    drop(cluster);
    let _ = store_postgres::drop_schema(&url, &schema);
}

/// A feed on one node wakes for a write on another, and `_security`
/// replaced on one node is what the others enforce next, within
/// [`FOLLOW_BOUND`].
async fn follow_other_nodes(cluster: &Cluster) {
    let node = |i: usize| cluster.nodes[i].as_ref().unwrap();
    let clients: Vec<Client> = (0..3).map(|i| Client::new(node(i))).collect();
    let since = clients[1].get("/shared").await.json()["update_seq"].clone();
    let since = since
        .as_str()
        .map_or_else(|| since.to_string(), str::to_string);
    let feed = {
        let feed = Client::new(node(1));
        let path = format!("/shared/_changes?feed=longpoll&since={since}&timeout=20000");
        tokio::spawn(async move { (feed.get(&path).await, std::time::Instant::now()) })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let written = clients[0].put("/shared/wakes-the-feed", json!({})).await;
    assert_eq!(written.status, 201, "{}", written.text);
    let at = std::time::Instant::now();
    let (woken, when) = feed.await.unwrap();
    let ids: Vec<Value> = woken.json()["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|row| row["id"].clone())
        .collect();
    assert!(ids.contains(&json!("wakes-the-feed")), "{}", woken.text);
    let waited = when.duration_since(at);
    assert!(
        waited < FOLLOW_BOUND,
        "node 1's feed woke {waited:?} after node 0's write"
    );

    // A member of `shared` reads it through node 2, until node 0 replaces
    // the members.
    let user = json!({"name": "reader", "password": "pw", "roles": [], "type": "user"});
    let made = clients[0]
        .put("/_users/org.couchdb.user:reader", user)
        .await;
    assert_eq!(made.status, 201, "{}", made.text);
    let members = |name: &str| json!({"admins": {}, "members": {"names": [name], "roles": []}});
    let set = clients[0].put("/shared/_security", members("reader")).await;
    assert_eq!(set.status, 200, "{}", set.text);
    let reader = Client::at(&node(2).plain_url.replacen("://", "://reader:pw@", 1));
    assert!(
        eventually_within(FOLLOW_BOUND, async || reader.get("/shared").await.status
            == 200)
        .await,
        "the member cannot read through node 2"
    );
    let set = clients[0]
        .put("/shared/_security", members("somebody-else"))
        .await;
    assert_eq!(set.status, 200, "{}", set.text);
    assert!(
        eventually_within(FOLLOW_BOUND, async || reader.get("/shared").await.status
            == 403)
        .await,
        "node 2 still lets a removed member read"
    );
}

/// PostgreSQL's `text` refuses U+0000, which CouchDB accepts in an id: a
/// node on PostgreSQL keeps such a document, reads it back by id and lists
/// it in `_all_docs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_on_postgres_keeps_an_id_holding_nul() {
    let Ok(url) = std::env::var(recliner_tests::POSTGRES_VAR) else {
        eprintln!("no PostgreSQL (RECLINER_TEST_POSTGRES): nothing to run the node on");
        return;
    };
    if url.is_empty() {
        return;
    }
    let schema = format!("nul_{}", uuid::Uuid::new_v4().simple());
    store_postgres::create_schema(&url, &schema).unwrap();
    let joiner = if url.contains('?') { '&' } else { '?' };
    let store = format!("{url}{joiner}options=-csearch_path%3D{schema}");
    let dir = TempDir::new("nul");
    let node = TestServer::start_with_env(dir.path(), &[], &[("RECLINER_STORE", &store)]);
    let client = Client::new(&node);
    assert_eq!(client.put("/z", json!({})).await.status, 201);
    let created = client.post("/z", json!({"_id": "a\u{0}b", "v": 1})).await;
    assert_eq!(created.status, 201, "{}", created.json());
    let got = client.get("/z/a%00b").await;
    assert_eq!(got.status, 200);
    assert_eq!(got.json()["_id"], json!("a\u{0}b"));
    let listed = client.get("/z/_all_docs").await.json();
    assert_eq!(listed["rows"][0]["id"], json!("a\u{0}b"), "{listed}");
    drop(node);
    let _ = store_postgres::drop_schema(&url, &schema);
}
