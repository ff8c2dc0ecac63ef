//! Two nodes on one PostgreSQL database follow each other, with `NOTIFY`
//! and, as on engines without it, by polling: a commit on one wakes the
//! other's feeds, and its cached `_security` and design documents follow.
//! Without advisory locks, nodes still migrate one at a time, under a row
//! lock. Run when `RECLINER_TEST_POSTGRES` holds a server's URL; skipped
//! otherwise.

#![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failed test

mod backend;

use std::time::{Duration, Instant};

use serde_json::json;
use store_conformance::common::{TempStore, put};
use store_postgres::{PostgresOptions, PostgresStore};

const URL_VAR: &str = "RECLINER_TEST_POSTGRES";

/// The longest a node may take to see another's change: generous for a
/// loaded test machine, many times the polling interval.
const BOUND: Duration = Duration::from_secs(5);

fn polling() -> PostgresOptions {
    PostgresOptions {
        notify: false,
        advisory_locks: false,
        poll_interval: Duration::from_millis(100),
    }
}

/// Waits until `check` holds, up to [`BOUND`].
async fn within_bound(what: &str, check: impl AsyncFnMut() -> bool) {
    within(BOUND, what, check).await;
}

async fn within(bound: Duration, what: &str, mut check: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !check().await {
        assert!(start.elapsed() < bound, "{what}: not seen within {bound:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `sql` on a connection of its own (the client blocks on a runtime of
/// its own, so off the test's) and returns the first column of each row.
fn sql(url: &str, statement: &str) -> Vec<String> {
    let (url, statement) = (url.to_string(), statement.to_string());
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client
            .simple_query(&statement)
            .unwrap()
            .into_iter()
            .filter_map(|m| match m {
                postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
                _ => None,
            })
            .collect()
    })
    .join()
    .unwrap()
}

async fn follow_each_other(options: PostgresOptions) {
    let Some(backend) = backend::postgres_with(options) else {
        return;
    };
    let url = std::env::var(URL_VAR).unwrap();
    let a = TempStore::new(&backend);
    let b = a.reopen(Default::default());
    let on_a = a.db("shared").await;
    let on_b = b.db("shared").await.unwrap();

    // Whether commits are announced at all: a session of ours listens on
    // the servers' channel while node A writes.
    let channel = format!("recliner_{}", a.store.server_uuid());
    let heard = {
        let (url, channel) = (url.clone(), channel.clone());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let listening = std::thread::spawn(move || {
            let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            client.batch_execute(&format!("LISTEN {channel}")).unwrap();
            ready_tx.send(()).unwrap();
            let mut heard = 0;
            let mut notifications = client.notifications();
            let mut waiting = notifications.timeout_iter(Duration::from_secs(2));
            while let Ok(Some(_)) =
                postgres::fallible_iterator::FallibleIterator::next(&mut waiting)
            {
                heard += 1;
            }
            heard
        });
        ready_rx.recv().unwrap();
        listening
    };

    // A commit on A wakes a feed on B.
    let mut feed = on_b.subscribe();
    put(&on_a, json!({"_id": "x"})).await;
    tokio::time::timeout(BOUND, feed.wait_for(|seq| *seq >= 1))
        .await
        .expect("B's feed did not wake")
        .unwrap();

    // `_security` replaced on A is what B enforces next (B had it cached).
    let locked = json!({"admins": {}, "members": {"names": ["alice"], "roles": []}});
    assert_ne!(*on_b.security().await.unwrap(), locked);
    on_a.set_security(locked.clone()).await.unwrap();
    within_bound("_security replaced on A", async || {
        *on_b.security().await.unwrap() == locked
    })
    .await;

    // A design document saved on A drops what B derived from the old ones.
    let generation = on_b.design_generation();
    put(
        &on_a,
        json!({"_id": "_design/d", "validate_doc_update": "function(){}"}),
    )
    .await;
    within_bound("a design document saved on A", async || {
        on_b.design_generation() != generation
    })
    .await;

    let heard = heard.join().unwrap();
    if options.notify {
        assert!(heard >= 3, "{heard} notifications for three commits");
    } else {
        assert_eq!(heard, 0, "NOTIFY sent with notifications off");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_follow_each_other_by_notification() {
    follow_each_other(PostgresOptions::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_follow_each_other_by_polling_without_notify() {
    follow_each_other(polling()).await;
}

/// A node that listens still sees the commits of a node that never
/// notifies (a cluster switching modes), by the rarer poll every listening
/// node also runs: a feed wakes and `_security` follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listening_node_still_follows_one_that_does_not_notify() {
    let Ok(url) = std::env::var(URL_VAR) else {
        eprintln!("{URL_VAR} is not set: no nodes to run");
        return;
    };
    let schema = format!("mixed_{}", uuid::Uuid::new_v4().simple());
    let dir = std::env::temp_dir().join(format!("recliner-{schema}"));
    let node = |name: &str, options: PostgresOptions| {
        let dir = dir.join(name);
        PostgresStore::connect_in_schema(&url, &schema, dir.clone(), options)
            .unwrap()
            .into_store(dir, Default::default())
    };
    let quiet = node("quiet", polling());
    let listening = node("listening", PostgresOptions::default());
    let on_quiet = quiet.create_db("shared").await.unwrap();
    let on_listening = listening.db("shared").await.unwrap();
    let mut feed = on_listening.subscribe();
    put(&on_quiet, json!({"_id": "x"})).await;
    let net = Duration::from_secs(15);
    tokio::time::timeout(net, feed.wait_for(|seq| *seq >= 1))
        .await
        .expect("the listening node's feed did not wake")
        .unwrap();
    let locked = json!({"admins": {}, "members": {"names": ["alice"], "roles": []}});
    assert_ne!(*on_listening.security().await.unwrap(), locked);
    on_quiet.set_security(locked.clone()).await.unwrap();
    within(net, "_security replaced on the quiet node", async || {
        *on_listening.security().await.unwrap() == locked
    })
    .await;
    drop((on_quiet, on_listening, quiet, listening));
    let _ = std::fs::remove_dir_all(&dir);
    store_postgres::drop_schema(&url, &schema).unwrap();
}

/// The advisory lock a migrating node takes (`"recliner"` in ASCII).
const MIGRATION_LOCK: i64 = 0x7265_636c_696e_6572;

/// Nodes started together on new tables with advisory locks off: none
/// waits for the advisory lock (held elsewhere all along), they migrate one
/// at a time under the row lock, and every one starts.
#[test]
fn without_advisory_locks_nodes_migrate_one_at_a_time_under_a_row_lock() {
    let Ok(url) = std::env::var(URL_VAR) else {
        eprintln!("{URL_VAR} is not set: nothing to migrate on");
        return;
    };
    let schema = format!("mig_{}", uuid::Uuid::new_v4().simple());
    store_postgres::create_schema(&url, &schema).unwrap();
    let in_schema = format!("SET search_path = \"{schema}\";");

    // Another program holds the advisory lock for the whole test.
    let (hold_tx, hold_rx) = std::sync::mpsc::channel::<()>();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let holder = {
        let url = url.clone();
        std::thread::spawn(move || {
            let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            client
                .batch_execute(&format!("SELECT pg_advisory_lock({MIGRATION_LOCK})"))
                .unwrap();
            held_tx.send(()).unwrap();
            let _ = hold_rx.recv();
        })
    };
    held_rx.recv().unwrap();

    let dirs: Vec<_> = (0..4)
        .map(|i| std::env::temp_dir().join(format!("recliner-{schema}-{i}")))
        .collect();
    let started = Instant::now();
    let nodes: Vec<_> = dirs
        .iter()
        .map(|dir| {
            let (url, schema, dir) = (url.clone(), schema.clone(), dir.clone());
            std::thread::spawn(move || {
                PostgresStore::connect_in_schema(&url, &schema, dir, polling()).map(drop)
            })
        })
        .collect();
    for node in nodes {
        node.join().unwrap().expect("a node started");
    }
    assert!(started.elapsed() < Duration::from_secs(30));
    let version = sql(
        &url,
        &format!("{in_schema} SELECT version FROM recliner_schema"),
    );
    let columns = sql(
        &url,
        &format!(
            "SELECT count(*) FROM information_schema.columns
             WHERE table_schema = '{schema}' AND table_name = 'recliner_dbs'
             AND column_name IN ('design_gen', 'security_gen')"
        ),
    );
    assert_eq!(columns, ["2"], "the migrations ran once, all of them");
    assert_eq!(version.len(), 1, "one version row: {version:?}");

    // While another node holds the row lock, a starting node waits for it.
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let locker = {
        let (url, in_schema) = (url.clone(), in_schema.clone());
        std::thread::spawn(move || {
            let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            client
                .batch_execute(&format!(
                    "{in_schema} BEGIN; SELECT id FROM recliner_migration_lock WHERE id = 1 FOR UPDATE"
                ))
                .unwrap();
            locked_tx.send(()).unwrap();
            let _ = release_rx.recv();
            client.batch_execute("COMMIT").unwrap();
        })
    };
    locked_rx.recv().unwrap();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let late = {
        let (url, schema, dir) = (url.clone(), schema.clone(), dirs[0].clone());
        std::thread::spawn(move || {
            let result = PostgresStore::connect_in_schema(&url, &schema, dir, polling()).map(drop);
            done_tx.send(()).unwrap();
            result
        })
    };
    assert!(
        done_rx.recv_timeout(Duration::from_millis(700)).is_err(),
        "a node migrated while another held the migration lock"
    );
    release_tx.send(()).unwrap();
    locker.join().unwrap();
    done_rx.recv_timeout(Duration::from_secs(20)).unwrap();
    late.join().unwrap().expect("the waiting node started");

    drop(hold_tx);
    holder.join().unwrap();
    for dir in dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
    store_postgres::drop_schema(&url, &schema).unwrap();
}
