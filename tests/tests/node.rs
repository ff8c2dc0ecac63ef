//! The node endpoints CouchDB 3 tooling calls first: it finds the node
//! through `/_membership` and reads `/_node/{node}/...`.

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::json;

#[tokio::test]
async fn tooling_finds_the_node_and_reads_its_versions_and_system() {
    let data = TempDir::new("node");
    let server =
        TestServer::start_with_env(data.path(), &[], &[("RECLINER_NODE_NAME", "one@10.0.0.1")]);
    let admin = Client::new(&server);
    let members = admin.get("/_membership").await;
    assert_eq!(members.status, 200);
    assert_eq!(
        members.json(),
        json!({"all_nodes": ["one@10.0.0.1"], "cluster_nodes": ["one@10.0.0.1"]})
    );
    for node in ["_local", "one@10.0.0.1"] {
        assert_eq!(
            admin.get(&format!("/_node/{node}")).await.json(),
            json!({"name": "one@10.0.0.1"})
        );
        let versions = admin.get(&format!("/_node/{node}/_versions")).await.json();
        assert!(versions["recliner"]["version"].is_string(), "{versions}");
        let system = admin.get(&format!("/_node/{node}/_system")).await.json();
        assert!(
            system["memory"]["processes"].as_u64().unwrap() > 1 << 20,
            "{system}"
        );
        assert!(system["uptime"].is_u64(), "{system}");
    }
    let other = admin.get("/_node/two@10.0.0.2/_versions").await;
    assert_eq!(other.status, 404);
    assert_eq!(other.json()["reason"], "no such node: two@10.0.0.2");
    // For server admins only, as in CouchDB; the system figures also for
    // a read-only `_metrics` user.
    let anonymous = Client::anonymous(&server);
    let refused = anonymous.get("/_membership").await;
    assert_eq!(refused.status, 401);
    assert_eq!(refused.json()["reason"], "You are not a server admin.");
    let refused = anonymous.get("/_node/_local/_system").await;
    assert_eq!(refused.status, 401);
    assert_eq!(
        refused.json()["reason"],
        "You are not a server admin or read-only metrics user"
    );
    let watcher =
        json!({"name": "watcher", "password": "w", "roles": ["_metrics"], "type": "user"});
    assert_eq!(
        admin
            .put("/_users/org.couchdb.user:watcher", watcher)
            .await
            .status,
        201
    );
    let plain = server.plain_url.replacen("http://", "http://watcher:w@", 1);
    let metrics = Client::at(&plain);
    assert_eq!(metrics.get("/_node/_local/_system").await.status, 200);
    assert_eq!(metrics.get("/_membership").await.status, 401);
}

#[tokio::test]
async fn a_clients_request_id_is_echoed_and_a_bad_one_replaced() {
    let data = TempDir::new("request-id");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    let echoed = c
        .send("GET", "/", None, &[("x-couch-request-id", "trace-42.a_b")])
        .await;
    assert_eq!(echoed.header("x-couch-request-id"), Some("trace-42.a_b"));
    let replaced = c
        .send("GET", "/", None, &[("x-couch-request-id", "bad id; x")])
        .await;
    let id = replaced.header("x-couch-request-id").unwrap();
    assert_ne!(id, "bad id; x");
    assert_eq!(id.len(), 10);
}

#[tokio::test]
async fn uuids_follow_the_configured_algorithm() {
    let data = TempDir::new("uuids-sequential");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    let reply = c.get("/_uuids?count=5").await;
    assert_eq!(reply.header("cache-control"), Some("no-cache"));
    let ids: Vec<String> = serde_json::from_value(reply.json()["uuids"].clone()).unwrap();
    for pair in ids.windows(2) {
        assert_eq!(
            pair[0][..26],
            pair[1][..26],
            "sequential by default, as CouchDB 3.5"
        );
        assert!(pair[0] < pair[1]);
    }
    // A document posted without an id gets the next one.
    c.put("/db", json!(null)).await;
    let posted = c.post("/db", json!({"a": 1})).await.json();
    let id = posted["id"].as_str().unwrap();
    assert_eq!(id[..26], ids[0][..26]);
    assert!(id > ids[4].as_str());

    let data = TempDir::new("uuids-utc-id");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[
            ("RECLINER_UUIDS_ALGORITHM", "utc_id"),
            ("RECLINER_UTC_ID_SUFFIX", "-east"),
        ],
    );
    let ids = Client::new(&server).get("/_uuids?count=2").await.json()["uuids"].clone();
    let (a, b) = (ids[0].as_str().unwrap(), ids[1].as_str().unwrap());
    assert!(a.ends_with("-east") && a.len() == 19 && a < b, "{a} {b}");

    // CouchDB 3.5.x's uuid_v7, switched on through the configuration API.
    let c = Client::new(&server);
    let set = c
        .put("/_node/_local/_config/uuids/algorithm", json!("uuid_v7"))
        .await;
    assert_eq!(set.status, 200, "{:?}", set.json());
    let ids = c.get("/_uuids?count=3").await.json()["uuids"].clone();
    let ids: Vec<&str> = ids
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert!(ids.windows(2).all(|p| p[0] < p[1]), "{ids:?}");
    assert!(
        ids.iter().all(|id| id.len() == 32 && &id[12..13] == "7"),
        "{ids:?}"
    );
}

/// `_scheduler/docs` states of the `_replicator` documents.
async fn states(c: &Client) -> Vec<String> {
    let docs = c.get("/_scheduler/docs/_replicator").await.json();
    docs["docs"]
        .as_array()
        .map(|docs| {
            docs.iter()
                .filter_map(|d| d["state"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_couchdb_script_changes_max_jobs_through_the_config_api_and_the_scheduler_obeys() {
    let data = TempDir::new("config-api");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    // What a CouchDB 3 script does: find the node, then its configuration.
    let node = c.get("/_membership").await.json()["all_nodes"][0]
        .as_str()
        .unwrap()
        .to_string();
    let base = format!("/_node/{node}/_config");
    assert_eq!(
        c.get(&format!("{base}/replicator/max_jobs")).await.json(),
        json!("500")
    );
    let all = c.get(&base).await.json();
    assert_eq!(all["chttpd"]["bind_address"], "127.0.0.1");
    assert_eq!(all["uuids"]["algorithm"], "sequential");
    assert!(all["couchdb"]["uuid"].is_string());
    // The file's admins show as hashes, as CouchDB shows them; the
    // command line's admin is not part of the file.
    assert_eq!(all["admins"], json!({}), "{all}");
    let old = c
        .put(&format!("{base}/replicator/max_jobs"), json!("1"))
        .await;
    assert_eq!((old.status, old.json()), (200, json!("500")));

    // Sources that accept connections and never answer keep their jobs
    // running: a caught-up job would park and give its slot away.
    let port = recliner_tests::silent_peer();
    for i in 0..3 {
        let doc = json!({"source": format!("http://127.0.0.1:{port}/src{i}"),
                         "target": format!("dst{i}"), "create_target": true, "continuous": true});
        assert_eq!(c.put(&format!("/_replicator/r{i}"), doc).await.status, 201);
    }
    assert!(
        recliner_tests::eventually(10, async || {
            let s = states(&c).await;
            s.len() == 3 && s.iter().filter(|s| *s == "running").count() == 1
        })
        .await,
        "one job runs at a time: {:?}",
        states(&c).await
    );
    // Raised again, without writing the file: all three run at once.
    let raised = c
        .send(
            "PUT",
            &format!("{base}/replicator/max_jobs"),
            Some(json!("3")),
            &[("x-couch-persist", "false")],
        )
        .await;
    assert_eq!(raised.json(), json!("1"));
    assert!(
        recliner_tests::eventually(10, async || {
            states(&c).await.iter().filter(|s| *s == "running").count() == 3
        })
        .await,
        "{:?}",
        states(&c).await
    );
    let file = std::fs::read_to_string(data.path().join("recliner.toml")).unwrap();
    assert!(
        file.contains("replicator_max_jobs = 1"),
        "persisted: {file}"
    );

    // Errors as CouchDB's.
    let missing = c.get(&format!("{base}/replicator/nope")).await;
    assert_eq!(
        (missing.status, missing.json()["reason"].clone()),
        (404, json!("unknown_config_value"))
    );
    let not_text = c
        .put(&format!("{base}/replicator/max_jobs"), json!(2))
        .await;
    assert_eq!(
        (not_text.status, not_text.json()["reason"].clone()),
        (400, json!("a JSON string expected"))
    );
    let bad = c
        .put(&format!("{base}/replicator/max_jobs"), json!("many"))
        .await;
    assert_eq!(bad.status, 400);
    // A key CouchDB would keep is kept (and shown) though Recliner has no
    // use for it; sections naming code to run are CouchDB's 403.
    let kept = c.put(&format!("{base}/log/writer"), json!("file")).await;
    assert_eq!((kept.status, kept.json()), (200, json!("")));
    assert_eq!(
        c.get(&format!("{base}/log/writer")).await.json(),
        json!("file")
    );
    let blacklisted = c.put(&format!("{base}/query_servers/js"), json!("x")).await;
    assert_eq!(
        (blacklisted.status, blacklisted.json()),
        (
            403,
            json!({"error": "forbidden", "reason": "Config section blacklisted for modification over HTTP API."})
        )
    );
    assert_eq!(
        c.delete(&format!("{base}/log/writer")).await.json(),
        json!("file")
    );
    assert_eq!(c.get(&format!("{base}/log/writer")).await.status, 404);
    assert_eq!(Client::anonymous(&server).get(&base).await.status, 401);

    // A persisted change survives a restart; a deleted one is back to its default.
    assert_eq!(
        c.put(&format!("{base}/recliner/durability"), json!("normal"))
            .await
            .status,
        200
    );
    let port = server
        .plain_url
        .rsplit(':')
        .next()
        .unwrap()
        .parse::<u16>()
        .unwrap();
    server.stop();
    let server = TestServer::start_on_port(data.path(), port, &[]);
    let c = Client::new(&server);
    assert_eq!(
        c.get(&format!("{base}/recliner/durability")).await.json(),
        json!("normal")
    );
    assert_eq!(
        c.get(&format!("{base}/replicator/max_jobs")).await.json(),
        json!("1")
    );
    let reset = c.delete(&format!("{base}/replicator/max_jobs")).await;
    assert_eq!(reset.json(), json!("1"));
    assert_eq!(
        c.get(&format!("{base}/replicator/max_jobs")).await.json(),
        json!("500")
    );
    let file = std::fs::read_to_string(data.path().join("recliner.toml")).unwrap();
    assert!(!file.contains("replicator_max_jobs"), "{file}");
}

#[tokio::test]
async fn if_none_match_gets_a_304_on_every_tagged_answer_weak_tags_too() {
    let data = TempDir::new("not-modified");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/db", json!(null)).await;
    let rev = c.put("/db/doc", json!({"a": 1})).await.json()["rev"]
        .as_str()
        .unwrap()
        .to_string();
    c.put("/db/_local/l", json!({"b": 2})).await;
    for path in ["/_all_dbs", "/db/_local/l", "/db/doc"] {
        let first = c.get(path).await;
        let etag = first
            .header("etag")
            .unwrap_or_else(|| panic!("{path} is tagged"))
            .to_string();
        for sent in [
            etag.clone(),
            format!("W/{etag}"),
            format!("\"other\", {etag}"),
        ] {
            let again = c.send("GET", path, None, &[("if-none-match", &sent)]).await;
            assert_eq!(again.status, 304, "{path} with {sent}");
            assert_eq!(again.header("etag"), Some(etag.as_str()), "{path}");
            assert!(again.text.is_empty());
        }
        let changed = c
            .send("GET", path, None, &[("if-none-match", "\"stale\"")])
            .await;
        assert_eq!(changed.status, 200, "{path}");
    }
    assert_eq!(
        c.get("/db/doc").await.header("etag"),
        Some(format!("\"{rev}\"").as_str())
    );
}

#[tokio::test]
async fn admins_set_through_the_config_api_log_in_at_once_and_only_their_hash_is_kept() {
    let data = TempDir::new("config-admins");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    let base = "/_node/_local/_config/admins";
    let bob = || {
        Client::at(
            &server
                .plain_url
                .replacen("http://", "http://bob:b0b-pass@", 1),
        )
    };
    assert_eq!(bob().get("/_all_dbs").await.status, 401);
    let set = c.put(&format!("{base}/bob"), json!("b0b-pass")).await;
    assert_eq!((set.status, set.json()), (200, json!("")));
    let session = bob().get("/_session").await.json();
    assert_eq!(session["userCtx"]["roles"], json!(["_admin"]), "{session}");
    assert_eq!(bob().get("/_all_dbs").await.status, 200);
    let shown = c.get(&format!("{base}/bob")).await.json();
    let hash = shown.as_str().unwrap().to_string();
    assert!(hash.starts_with("-pbkdf2:sha256-"), "{hash}");
    let file = std::fs::read_to_string(data.path().join("recliner.toml")).unwrap();
    assert!(file.contains(&hash) && !file.contains("b0b-pass"), "{file}");
    // Removed: bob is no admin any more, at once.
    assert_eq!(c.delete(&format!("{base}/bob")).await.json(), json!(hash));
    assert_eq!(bob().get("/_all_dbs").await.status, 401);
    assert_eq!(c.get(&format!("{base}/bob")).await.status, 404);
}

/// Changes a setting of the running server only (`X-Couch-Persist: false`).
async fn set(c: &Client, key: &str, value: &str) {
    let reply = c
        .send(
            "PUT",
            &format!("/_node/_local/_config/{key}"),
            Some(json!(value)),
            &[("x-couch-persist", "false")],
        )
        .await;
    assert_eq!(reply.status, 200, "{key}: {}", reply.text);
}

#[tokio::test]
async fn size_limits_jsonp_and_the_uuid_algorithm_change_while_the_server_runs() {
    let data = TempDir::new("config-live");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    let big = json!({"text": "x".repeat(500)});
    set(&c, "couchdb/max_document_size", "200").await;
    let refused = c.put("/db/big", big.clone()).await;
    assert_eq!(
        (refused.status, refused.json()["error"].clone()),
        (413, json!("document_too_large"))
    );
    set(&c, "couchdb/max_document_size", "8000000").await;
    assert_eq!(c.put("/db/big", big).await.status, 201);

    let plain = c.get("/db/big?callback=cb").await;
    assert_eq!(plain.header("content-type"), Some("application/json"));
    set(&c, "chttpd/allow_jsonp", "true").await;
    let jsonp = c.get("/db/big?callback=cb").await;
    assert_eq!(jsonp.header("content-type"), Some("application/javascript"));
    assert!(
        jsonp.text.starts_with("/* CouchDB */cb({\"_id\":\"big\""),
        "{}",
        jsonp.text
    );
    assert!(jsonp.text.ends_with("});"), "{}", jsonp.text);

    set(&c, "uuids/algorithm", "utc_id").await;
    set(&c, "uuids/utc_id_suffix", "-node1").await;
    let uuids = c.get("/_uuids?count=2").await.json();
    for uuid in uuids["uuids"].as_array().unwrap() {
        assert!(uuid.as_str().unwrap().ends_with("-node1"), "{uuids}");
    }
}

#[tokio::test]
async fn a_restart_answers_then_the_server_comes_back_on_its_port_with_its_data() {
    let data = TempDir::new("restart");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    c.put("/db/kept", json!({"v": 1})).await;
    assert_eq!(
        c.get("/_node/_local/_restart").await.json()["error"],
        "method_not_allowed"
    );
    assert_eq!(
        Client::anonymous(&server)
            .post("/_node/_local/_restart", json!({}))
            .await
            .status,
        401
    );
    // A change kept only in memory is gone after a restart.
    let marker = c
        .send(
            "PUT",
            "/_node/_local/_config/log/marker",
            Some(json!("set")),
            &[("x-couch-persist", "false")],
        )
        .await;
    assert_eq!(marker.status, 200);
    let pid = server.pid();
    let reply = c.post("/_node/_local/_restart", json!({})).await;
    assert_eq!((reply.status, reply.json()), (200, json!({"ok": true})));
    // Down, then up again: the same process, the same port, the same data.
    assert!(
        recliner_tests::eventually(30, async || {
            // Either request may meet the server down: neither may panic.
            let kept = c.http().get(c.url("/db/kept")).send().await;
            let marker = c
                .http()
                .get(c.url("/_node/_local/_config/log/marker"))
                .send()
                .await;
            matches!(kept, Ok(r) if r.status() == 200)
                && matches!(marker, Ok(r) if r.status() == 404)
        })
        .await,
        "the server came back"
    );
    assert_eq!(server.pid(), pid);
    assert_eq!(c.get("/db/kept").await.json()["v"], 1);
    assert_eq!(c.put("/db/after", json!({})).await.status, 201);
}

#[tokio::test]
async fn the_stores_settings_change_while_the_server_runs_for_open_databases_too() {
    let data = TempDir::new("config-store");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    // An open database takes a new attachment limit at once.
    set(&c, "couchdb/max_attachment_size", "10").await;
    let big = c
        .send_bytes(
            "PUT",
            "/db/d/a.bin",
            vec![7u8; 100],
            "application/octet-stream",
        )
        .await;
    assert_eq!(big.status, 413, "{}", big.text);
    set(&c, "couchdb/max_attachment_size", "1000").await;
    let fits = c
        .send_bytes(
            "PUT",
            "/db/d/a.bin",
            vec![7u8; 100],
            "application/octet-stream",
        )
        .await;
    assert_eq!(fits.status, 201, "{}", fits.text);
    // New databases follow the default security of the moment.
    let anonymous = Client::anonymous(&server);
    c.put("/closed", json!({})).await;
    assert_eq!(anonymous.get("/closed").await.status, 401);
    set(&c, "couchdb/default_security", "everyone").await;
    c.put("/open", json!({})).await;
    assert_eq!(anonymous.get("/open").await.status, 200);
    assert_eq!(anonymous.get("/closed").await.status, 401);
}

/// A database is one shard: resharding answers as a node with nothing to
/// split, refuses a split of a real database with CouchDB's per-shard
/// error, and the `q` a database was created with is reported back, also
/// after a restart.
#[tokio::test]
async fn resharding_refuses_to_split_and_q_is_kept() {
    let data = TempDir::new("reshard");
    let server = TestServer::start(data.path(), &[]);
    let admin = Client::new(&server);
    assert_eq!(admin.put("/parts?q=8", json!({})).await.status, 201);
    let split = admin
        .post("/_reshard/jobs", json!({"type": "split", "db": "parts"}))
        .await;
    assert_eq!(split.status, 500, "{:?}", split.json());
    let rows = split.json();
    assert_eq!(rows[0]["shard"], "shards/00000000-ffffffff/parts");
    assert!(
        rows[0]["error"]
            .as_str()
            .unwrap()
            .starts_with("{shard_range_cannot_be_split"),
        "{rows}"
    );
    assert_eq!(
        admin.get("/_reshard/jobs").await.json(),
        json!({"total_rows": 0, "offset": 0, "jobs": []})
    );
    let anonymous = Client::anonymous(&server);
    assert_eq!(anonymous.get("/_reshard").await.status, 401);
    assert_eq!(admin.get("/parts").await.json()["cluster"]["q"], 8);
    // CouchDB's name for where the databases are.
    let dir = admin
        .get("/_node/_local/_config/couchdb/database_dir")
        .await
        .json();
    assert_eq!(dir, json!(data.path().display().to_string()));
    drop(server);
    let server = TestServer::start(data.path(), &[]);
    let admin = Client::new(&server);
    assert_eq!(admin.get("/parts").await.json()["cluster"]["q"], 8);
    assert_eq!(
        admin.get("/").await.json()["features"],
        json!([
            "search",
            "nouveau",
            "quickjs",
            "access-ready",
            "partitioned",
            "scheduler"
        ])
    );
}

/// Recliner's `_config/_applied_at_start`: the keys whose change waits for
/// the next start, by section, so a client (the web console) can say a
/// restart is needed; server admins only, as the rest of `_config`.
#[tokio::test]
async fn the_config_api_names_the_keys_applied_only_at_the_next_start() {
    let data = TempDir::new("config-applied-at-start");
    let server = TestServer::start(data.path(), &[]);
    let admin = Client::new(&server);
    let keys = admin.get("/_node/_local/_config/_applied_at_start").await;
    assert_eq!(keys.status, 200);
    let keys = keys.json();
    let listed = |section: &str, key: &str| {
        keys[section]
            .as_array()
            .is_some_and(|keys| keys.contains(&json!(key)))
    };
    assert!(listed("chttpd", "port"), "{keys}");
    assert!(listed("chttpd", "bind_address"), "{keys}");
    assert!(listed("couchdb", "database_dir"), "{keys}");
    assert!(listed("recliner", "durability"), "{keys}");
    assert!(!listed("replicator", "max_jobs"), "{keys}");
    assert!(!listed("couchdb", "max_document_size"), "{keys}");
    // Every key it names is one the configuration shows.
    let all = admin.get("/_node/_local/_config").await.json();
    for (section, names) in keys.as_object().unwrap() {
        for name in names.as_array().unwrap() {
            let name = name.as_str().unwrap();
            assert!(all[section][name].is_string(), "[{section}] {name}: {all}");
        }
    }
    // The node by its name too; only GET.
    let node = admin.get("/_membership").await.json()["all_nodes"][0]
        .as_str()
        .unwrap()
        .to_string();
    let by_name = admin
        .get(&format!("/_node/{node}/_config/_applied_at_start"))
        .await;
    assert_eq!(by_name.json(), keys);
    let put = admin
        .put("/_node/_local/_config/_applied_at_start", json!({}))
        .await;
    assert_eq!(put.status, 405);
    // Server admins only.
    let anonymous = Client::anonymous(&server);
    let refused = anonymous
        .get("/_node/_local/_config/_applied_at_start")
        .await;
    assert_eq!(refused.status, 401);
    assert_eq!(refused.json()["reason"], "You are not a server admin.");
    let user = json!({"name": "plain", "password": "p", "roles": [], "type": "user"});
    assert_eq!(
        admin
            .put("/_users/org.couchdb.user:plain", user)
            .await
            .status,
        201
    );
    let plain = Client::at(&server.plain_url.replacen("http://", "http://plain:p@", 1));
    let refused = plain.get("/_node/_local/_config/_applied_at_start").await;
    assert_eq!(refused.status, 401);
    assert_eq!(refused.json()["reason"], "You are not a server admin.");
}
