//! Node statistics seen from outside: `/_node/{node}/_stats` (whole, or one
//! group or metric by sub-path) and `/_node/{node}/_prometheus` move with
//! the requests made, read as CouchDB 3.5's (names, types, descriptions,
//! shapes), and are for server admins and `_metrics` users only.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::{BTreeMap, BTreeSet};

use recliner_tests::couchdb::couchdb;
use recliner_tests::{Client, TempDir, TestServer, eventually};
use serde_json::{Value, json};

async fn stats(c: &Client) -> Value {
    let reply = c.get("/_node/_local/_stats").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()
}

/// A counter's value by its path (`couchdb/httpd_request_methods/GET`).
fn value(stats: &Value, path: &str) -> u64 {
    stats
        .pointer(&format!("/{path}/value"))
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("no counter {path}"))
}

/// How much a counter grew between two readings.
fn grew(before: &Value, after: &Value, path: &str) -> u64 {
    value(after, path) - value(before, path)
}

/// Prometheus text as `(series, type, value)`: every line must be a
/// comment or `name{labels} value`, every series declared by `# TYPE`
/// before it (unless `lenient`: CouchDB's own text, which puts some `# TYPE`
/// lines after a carriage return, hence the split on both line ends, and
/// writes a few series, such as its Erlang message queues, before theirs).
fn parse_prometheus_with(text: &str, lenient: bool) -> Vec<(String, String, f64)> {
    let mut declared = BTreeMap::new();
    let mut samples = Vec::new();
    for line in text.split(['\n', '\r']).filter(|l| !l.trim().is_empty()) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (family, kind) = rest.split_once(' ').unwrap();
            declared.insert(family.to_string(), kind.to_string());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        assert!(!line.starts_with('#'), "an unknown comment: {line}");
        let (series, number) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("not `series value`: {line}"));
        let number: f64 = number
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {line}"));
        let name = match series.split_once('{') {
            Some((name, labels)) => {
                let labels = labels.strip_suffix('}').unwrap();
                for label in labels.split(", ").flat_map(|l| l.split(',')) {
                    let (key, quoted) = label.split_once('=').unwrap();
                    assert!(key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
                    assert!(quoted.starts_with('"') && quoted.ends_with('"'), "{line}");
                }
                name
            }
            None => series,
        };
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{line}"
        );
        let family = ["_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| declared.contains_key(*f)))
            .unwrap_or(name);
        let kind = match declared.get(family) {
            Some(kind) => kind.clone(),
            None if lenient => "untyped".to_string(),
            None => panic!("{line} comes before its # TYPE"),
        };
        samples.push((series.to_string(), kind, number));
    }
    samples
}

fn parse_prometheus(text: &str) -> Vec<(String, String, f64)> {
    parse_prometheus_with(text, false)
}

fn sample(samples: &[(String, String, f64)], series: &str) -> (String, f64) {
    samples
        .iter()
        .find(|(s, ..)| s == series)
        .map(|(_, kind, v)| (kind.clone(), *v))
        .unwrap_or_else(|| panic!("no {series}"))
}

#[tokio::test]
async fn requests_documents_and_status_codes_move_their_counters() {
    let data = TempDir::new("stats-counters");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    assert_eq!(c.put("/db", json!({})).await.status, 201);
    let before = stats(&c).await;

    for _ in 0..5 {
        assert_eq!(c.get("/").await.status, 200);
    }
    assert_eq!(c.get("/db/missing").await.status, 404);
    for i in 0..3 {
        assert_eq!(
            c.put(&format!("/db/doc{i}"), json!({"i": i})).await.status,
            201
        );
    }
    assert_eq!(c.get("/db/doc0").await.status, 200);
    assert_eq!(c.send("HEAD", "/db/doc1", None, &[]).await.status, 200);
    // A conflict changes nothing: no write.
    assert_eq!(c.put("/db/doc0", json!({"i": 9})).await.status, 409);
    let bulk = c
        .post(
            "/db/_bulk_docs",
            json!({"docs": [{"_id": "b1"}, {"_id": "b2"}]}),
        )
        .await;
    assert_eq!(bulk.status, 201);
    let got = c
        .post("/db/_bulk_get", json!({"docs": [{"id": "b1"}]}))
        .await;
    assert_eq!(got.status, 200);
    assert_eq!(c.get("/db").await.status, 200);
    // System databases stay out of the document counters, as in CouchDB.
    let user = json!({"name": "u", "password": "p", "roles": [], "type": "user"});
    assert_eq!(c.put("/_users/org.couchdb.user:u", user).await.status, 201);
    assert_eq!(c.get("/_users/org.couchdb.user:u").await.status, 200);

    let after = stats(&c).await;
    let methods = "couchdb/httpd_request_methods";
    let codes = "couchdb/httpd_status_codes";
    // Its own method counts as the stats request arrives, as in CouchDB.
    assert!(grew(&before, &after, &format!("{methods}/GET")) >= 10);
    assert!(grew(&before, &after, &format!("{methods}/HEAD")) >= 1);
    assert!(grew(&before, &after, &format!("{methods}/PUT")) >= 5);
    assert!(grew(&before, &after, &format!("{methods}/POST")) >= 2);
    assert!(grew(&before, &after, &format!("{codes}/200")) >= 9);
    assert!(grew(&before, &after, &format!("{codes}/201")) >= 5);
    assert!(grew(&before, &after, &format!("{codes}/404")) >= 1);
    assert!(grew(&before, &after, &format!("{codes}/409")) >= 1);
    assert!(grew(&before, &after, "couchdb/httpd/requests") >= 17);
    assert_eq!(grew(&before, &after, "couchdb/httpd/bulk_requests"), 2);
    // Two documents served (GET and HEAD; not the missing one), four
    // changes (three PUTs and one batch; not the conflict).
    assert_eq!(grew(&before, &after, "couchdb/database_reads"), 2);
    assert_eq!(grew(&before, &after, "couchdb/database_writes"), 4);
    assert!(value(&after, "couchdb/open_databases") >= 1);
    assert_eq!(after["couchdb"]["open_databases"]["type"], "counter");

    let time = &after["couchdb"]["request_time"];
    assert_eq!(time["type"], "histogram");
    assert_eq!(
        time["desc"],
        "length of a request inside CouchDB without MochiWeb"
    );
    assert!(time["value"]["n"].as_u64().unwrap() >= 17, "{time}");
    let min = time["value"]["min"].as_f64().unwrap();
    let max = time["value"]["max"].as_f64().unwrap();
    let median = time["value"]["median"].as_f64().unwrap();
    assert!(0.0 < min && min <= median && median <= max, "{time}");
    assert!(after["couchdb"]["dbinfo"]["value"]["n"].as_u64().unwrap() >= 1);
}

#[tokio::test]
async fn sub_paths_answer_one_group_or_metric_and_null_for_unknown_ones() {
    let data = TempDir::new("stats-paths");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    let get = c
        .get("/_node/_local/_stats/couchdb/httpd_request_methods/GET")
        .await;
    assert_eq!(get.status, 200);
    let get = get.json();
    assert_eq!(
        (get["type"].clone(), get["desc"].clone()),
        (json!("counter"), json!("number of HTTP GET requests"))
    );
    assert!(get["value"].as_u64().unwrap() >= 1);
    // The node's own name works as `_local` does; a trailing slash is ignored.
    let node = c.get("/_node/_local").await.json()["name"]
        .as_str()
        .unwrap()
        .to_string();
    let time = c
        .get(&format!("/_node/{node}/_stats/couchdb/request_time/"))
        .await
        .json();
    let keys: BTreeSet<&str> = time["value"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let couchdb_keys = [
        "n",
        "min",
        "max",
        "arithmetic_mean",
        "geometric_mean",
        "harmonic_mean",
        "median",
        "variance",
        "standard_deviation",
        "skewness",
        "kurtosis",
        "percentile",
        "histogram",
    ];
    assert_eq!(keys, BTreeSet::from(couchdb_keys));
    let ranks: Vec<u64> = time["value"]["percentile"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[0].as_u64().unwrap())
        .collect();
    assert_eq!(ranks, [50, 75, 90, 95, 99, 999]);
    let n = c
        .get("/_node/_local/_stats/couchdb/request_time/value/n")
        .await;
    assert!(n.json().is_u64(), "{}", n.text);
    let jobs = c
        .get("/_node/_local/_stats/couch_replicator/jobs")
        .await
        .json();
    assert_eq!(jobs["total"]["type"], "gauge");

    let unknown = c.get("/_node/_local/_stats/couchdb/no_such_metric").await;
    assert_eq!((unknown.status, unknown.json()), (200, Value::Null));
    let other = c.get("/_node/other@10.0.0.9/_stats").await;
    assert_eq!(other.status, 404);
    assert_eq!(
        other.json(),
        json!({"error": "not_found", "reason": "no such node: other@10.0.0.9"})
    );
    let post = c.post("/_node/_local/_stats", json!({})).await;
    assert_eq!(post.status, 405);
    assert_eq!(post.json()["reason"], "Only GET allowed");
    assert_eq!(post.header("allow"), Some("GET"));
    assert_eq!(
        c.post("/_node/_local/_prometheus", json!({})).await.status,
        405
    );
}

#[tokio::test]
async fn the_prometheus_text_parses_and_counts_under_couchdbs_names() {
    let data = TempDir::new("stats-prometheus");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    let first = c.get("/_node/_local/_prometheus").await;
    assert_eq!(first.status, 200);
    assert_eq!(
        first.header("content-type"),
        Some("text/plain; version=0.0.4")
    );
    let before = parse_prometheus(&first.text);
    assert_eq!(c.put("/db", json!({})).await.status, 201);
    for i in 0..4 {
        assert_eq!(c.put(&format!("/db/d{i}"), json!({})).await.status, 201);
        assert_eq!(c.get(&format!("/db/d{i}")).await.status, 200);
    }
    assert_eq!(c.get("/db/nothing").await.status, 404);
    let after = parse_prometheus(&c.get("/_node/_local/_prometheus").await.text);

    let grew = |series: &str| {
        let (kind, old) = sample(&before, series);
        let (_, new) = sample(&after, series);
        (kind, new - old)
    };
    let (kind, gets) = grew("couchdb_httpd_request_methods{method=\"GET\"}");
    assert_eq!(kind, "counter");
    assert!(gets >= 6.0, "{gets}");
    assert!(grew("couchdb_httpd_request_methods{method=\"PUT\"}").1 >= 5.0);
    assert!(grew("couchdb_httpd_status_codes{code=\"201\"}").1 >= 5.0);
    assert!(grew("couchdb_httpd_status_codes{code=\"404\"}").1 >= 1.0);
    assert!(grew("couchdb_httpd_requests_total").1 >= 10.0);
    assert_eq!(
        grew("couchdb_database_reads_total"),
        ("counter".into(), 4.0)
    );
    assert_eq!(
        grew("couchdb_database_writes_total"),
        ("counter".into(), 4.0)
    );
    let (kind, open) = sample(&after, "couchdb_open_databases");
    assert_eq!(kind, "gauge");
    assert!(open >= 1.0);
    assert_eq!(sample(&after, "couchdb_uptime_seconds").0, "counter");
    assert_eq!(
        sample(&after, "couchdb_couch_replicator_jobs_running"),
        ("gauge".into(), 0.0)
    );
    let (kind, median) = sample(&after, "couchdb_request_time_seconds{quantile=\"0.5\"}");
    assert_eq!(kind, "summary");
    assert!(median > 0.0 && median < 10.0, "{median} seconds");
    assert!(sample(&after, "couchdb_request_time_seconds_count").1 >= 10.0);
    assert!(sample(&after, "couchdb_request_time_seconds_sum").1 > 0.0);
}

#[tokio::test]
async fn only_admins_and_metrics_users_read_the_statistics() {
    let data = TempDir::new("stats-access");
    let server = TestServer::start(data.path(), &[]);
    let admin = Client::new(&server);
    let anonymous = Client::anonymous(&server);
    for path in [
        "/_node/_local/_stats",
        "/_node/_local/_stats/couchdb/httpd",
        "/_node/_local/_prometheus",
    ] {
        let refused = anonymous.get(path).await;
        assert_eq!(refused.status, 401, "{path}");
        assert_eq!(
            refused.json(),
            json!({"error": "unauthorized",
                   "reason": "You are not a server admin or read-only metrics user"})
        );
    }
    for (name, roles) in [("watcher", json!(["_metrics"])), ("plain", json!([]))] {
        let user = json!({"name": name, "password": "pw", "roles": roles, "type": "user"});
        let path = format!("/_users/org.couchdb.user:{name}");
        assert_eq!(admin.put(&path, user).await.status, 201);
    }
    let as_user = |name: &str| {
        Client::at(
            &server
                .plain_url
                .replacen("http://", &format!("http://{name}:pw@"), 1),
        )
    };
    let watcher = as_user("watcher");
    assert_eq!(watcher.get("/_node/_local/_stats").await.status, 200);
    let prometheus = watcher.get("/_node/_local/_prometheus").await;
    assert_eq!(prometheus.status, 200);
    assert!(!parse_prometheus(&prometheus.text).is_empty());
    assert_eq!(
        watcher
            .get("/_node/_local/_stats/couchdb/open_databases")
            .await
            .status,
        200
    );
    // The role opens the statistics, nothing else.
    assert_eq!(watcher.get("/_node/_local/_config").await.status, 401);
    let plain = as_user("plain");
    assert_eq!(plain.get("/_node/_local/_stats").await.status, 401);
    assert_eq!(plain.get("/_node/_local/_prometheus").await.status, 401);
}

#[tokio::test]
async fn the_replicator_gauges_count_running_pending_and_crashed_jobs() {
    let data = TempDir::new("stats-jobs");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[
            ("RECLINER_REPLICATOR_MAX_JOBS", "1"),
            ("RECLINER_REPLICATOR_INTERVAL_MS", "600000"),
        ],
    );
    let c = Client::new(&server);
    let jobs = async |c: &Client| {
        let jobs = c
            .get("/_node/_local/_stats/couch_replicator/jobs")
            .await
            .json();
        ["running", "pending", "crashed", "total"].map(|k| jobs[k]["value"].as_u64().unwrap())
    };
    assert_eq!(jobs(&c).await, [0, 0, 0, 0]);
    // A source nobody serves: the job crashes and waits out its backoff.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let bad = json!({"source": format!("http://127.0.0.1:{dead}/nowhere"), "target": "t0",
                     "create_target": true, "continuous": true});
    assert_eq!(c.put("/_replicator/bad", bad).await.status, 201);
    assert!(
        eventually(20, async || jobs(&c).await == [0, 0, 1, 1]).await,
        "{:?}",
        jobs(&c).await
    );
    // A source that accepts connections and never answers keeps its job
    // running (a caught-up job would park and free the slot).
    let silent_port = recliner_tests::silent_peer();
    let hung = json!({"source": format!("http://127.0.0.1:{silent_port}/silent"), "target": "t1",
                      "create_target": true, "continuous": true});
    assert_eq!(c.put("/_replicator/r0", hung).await.status, 201);
    assert!(
        eventually(20, async || jobs(&c).await == [1, 0, 1, 2]).await,
        "{:?}",
        jobs(&c).await
    );
    c.put("/s2", json!({})).await;
    let local = json!({"source": "s2", "target": "t2", "create_target": true, "continuous": true});
    assert_eq!(c.put("/_replicator/r1", local).await.status, 201);
    // One slot: one runs, one waits.
    assert!(
        eventually(20, async || jobs(&c).await == [1, 1, 1, 3]).await,
        "{:?}",
        jobs(&c).await
    );
    // The same figures as `_scheduler/jobs` shows.
    let listed = c.get("/_scheduler/jobs").await.json();
    assert_eq!(listed["total_rows"], 3);
}

/// Each figure Recliner shows is CouchDB's: the same path, type and
/// description in `_stats`, the same series and type in `_prometheus`.
/// Needs `COUCHDB_URL`.
#[tokio::test]
async fn every_figure_is_one_couchdb_shows_under_the_same_name() {
    let Some(reference) = couchdb("every_figure_is_one_couchdb_shows_under_the_same_name") else {
        return;
    };
    let couch = reference.client();
    let data = TempDir::new("stats-differential");
    let server = TestServer::start(data.path(), &[]);
    let ours = Client::new(&server);

    fn leaves(value: &Value, path: String, out: &mut BTreeMap<String, (Value, Value)>) {
        let Some(map) = value.as_object() else { return };
        if map.contains_key("type") && map.contains_key("desc") {
            out.insert(path, (map["type"].clone(), map["desc"].clone()));
            return;
        }
        for (key, child) in map {
            leaves(child, format!("{path}/{key}"), out);
        }
    }
    let mut theirs = BTreeMap::new();
    leaves(&stats(&couch).await, String::new(), &mut theirs);
    let mut mine = BTreeMap::new();
    leaves(&stats(&ours).await, String::new(), &mut mine);
    assert!(mine.len() > 40);
    for (path, figure) in &mine {
        assert_eq!(theirs.get(path), Some(figure), "{path}");
    }
    // The same shapes: a histogram's keys, a counter's number.
    for path in ["couchdb/request_time", "couchdb/httpd_status_codes/200"] {
        let url = format!("/_node/_local/_stats/{path}");
        let (a, b) = (couch.get(&url).await.json(), ours.get(&url).await.json());
        let keys = |v: &Value| {
            v.as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect::<BTreeSet<_>>()
        };
        assert_eq!(keys(&a), keys(&b), "{path}");
        if let Some(value) = a["value"].as_object() {
            let ours: BTreeSet<_> = b["value"].as_object().unwrap().keys().collect();
            assert_eq!(value.keys().collect::<BTreeSet<_>>(), ours, "{path}");
        }
    }
    // (A name with `@` CouchDB takes for a cluster node that is down: 412.)
    for url in ["/_node/_local/_stats/couchdb/nope", "/_node/nonode/_stats"] {
        let (a, b) = (couch.get(url).await, ours.get(url).await);
        assert_eq!((a.status, a.json()), (b.status, b.json()), "{url}");
    }

    let series = |text: &str, lenient: bool| -> BTreeMap<String, String> {
        parse_prometheus_with(text, lenient)
            .into_iter()
            .map(|(series, kind, _)| (series, kind))
            .collect()
    };
    let theirs = series(&couch.get("/_node/_local/_prometheus").await.text, true);
    let mine = series(&ours.get("/_node/_local/_prometheus").await.text, false);
    for (name, kind) in &mine {
        assert_eq!(theirs.get(name), Some(kind), "{name}");
    }
}
