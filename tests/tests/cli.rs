//! The `recliner` command line beyond serving: `recliner replicate` between
//! two running servers, and the configuration layers as `--print-config`
//! shows them (defaults < file < environment < flags), with one clear line
//! for a bad value.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::process::{Command, Output};

use recliner_tests::{Client, TempDir, TestServer, compare_dbs, recliner_bin};
use serde_json::json;

/// Runs `recliner` with these arguments and environment, no inherited settings.
fn recliner(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(recliner_bin());
    command.args(args);
    for (key, _) in std::env::vars() {
        if key.starts_with("RECLINER_") {
            command.env_remove(key);
        }
    }
    command.envs(env.iter().copied()).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn recliner_replicate_copies_between_two_servers_and_prints_a_summary() {
    let (da, db, cli_dir) = (
        TempDir::new("cli-a"),
        TempDir::new("cli-b"),
        TempDir::new("cli-run"),
    );
    let a = TestServer::start(da.path(), &[]);
    let b = TestServer::start(db.path(), &[]);
    let (ca, cb) = (Client::new(&a), Client::new(&b));
    ca.put("/src", json!({})).await;
    for i in 0..25 {
        ca.put(&format!("/src/d{i:02}"), json!({"i": i})).await;
    }
    let data_dir = cli_dir.path().to_str().unwrap();
    let source = a.url("/src");
    let target = b.url("/dst");

    let run = tokio::task::spawn_blocking({
        let (source, target, data_dir) = (source.clone(), target.clone(), data_dir.to_string());
        move || {
            recliner(
                &[
                    "replicate",
                    &source,
                    &target,
                    "--create-target",
                    "--data-dir",
                    &data_dir,
                ],
                &[],
            )
        }
    })
    .await
    .unwrap();
    assert!(run.status.success(), "{}", text(&run.stderr));
    let out = text(&run.stdout);
    assert!(out.contains("25 docs read, 25 written, 0 failed"), "{out}");
    compare_dbs(&ca, "src", &cb, "dst").await;

    // A second run resumes from the checkpoint: nothing new to write.
    ca.put("/src/late", json!({})).await;
    let again = recliner(
        &["replicate", &source, &target, "--data-dir", data_dir],
        &[],
    );
    assert!(again.status.success(), "{}", text(&again.stderr));
    let out = text(&again.stdout);
    assert!(out.contains("26 written"), "counters carry on: {out}");
    assert_eq!(cb.get("/dst/late").await.status, 200);

    // Filters: only the named documents.
    let some = recliner(
        &[
            "replicate",
            &source,
            &b.url("/some"),
            "--create-target",
            "--doc-ids",
            "d01,d02",
            "--data-dir",
            data_dir,
        ],
        &[],
    );
    assert!(some.status.success(), "{}", text(&some.stderr));
    assert_eq!(cb.get("/some").await.json()["doc_count"], 2);

    // Failures exit non-zero and name the database, never the password.
    let missing = a.url("/nope").replace("http://", "http://u:topsecret@");
    let failed = recliner(
        &["replicate", &missing, &target, "--data-dir", data_dir],
        &[],
    );
    assert!(!failed.status.success());
    let err = text(&failed.stderr);
    assert!(err.contains("nope"), "{err}");
    assert!(!err.contains("topsecret") && !text(&failed.stdout).contains("topsecret"));
    let usage = recliner(&["replicate", "localname", &target], &[]);
    assert_eq!(usage.status.code(), Some(2));
    assert!(text(&usage.stderr).contains("SOURCE must be a database URL"));
}

#[test]
fn settings_come_from_defaults_then_file_then_environment_then_flags() {
    let dir = TempDir::new("cli-config");
    let file = dir.path().join("custom.toml");
    std::fs::write(
        &file,
        "port = 1111\nlog_level = \"debug\"\nreplicator_max_jobs = 7\nmax_document_size = 1234\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let print = |args: &[&str], env: &[(&str, &str)]| -> toml::Table {
        let out = recliner(args, env);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout).parse().unwrap()
    };

    let defaults = print(&["--print-config"], &[]);
    assert_eq!(defaults["port"].as_integer(), Some(5984));
    assert_eq!(defaults["replicator_max_jobs"].as_integer(), Some(500));
    assert_eq!(
        defaults["replicator_interval_ms"].as_integer(),
        Some(60_000)
    );
    assert_eq!(defaults["replicator_max_churn"].as_integer(), Some(20));

    let from_file = print(&["--print-config", "--config", file], &[]);
    assert_eq!(from_file["port"].as_integer(), Some(1111));
    assert_eq!(from_file["replicator_max_jobs"].as_integer(), Some(7));

    let env = [
        ("RECLINER_PORT", "2222"),
        ("RECLINER_REPLICATOR_MAX_JOBS", "9"),
    ];
    let from_env = print(&["--print-config", "--config", file], &env);
    assert_eq!(from_env["port"].as_integer(), Some(2222));
    assert_eq!(from_env["replicator_max_jobs"].as_integer(), Some(9));
    assert_eq!(
        from_env["log_level"].as_str(),
        Some("debug"),
        "file still applies"
    );
    assert_eq!(from_env["max_document_size"].as_integer(), Some(1234));

    let from_flag = print(
        &["--print-config", "--config", file, "--port", "3333"],
        &env,
    );
    assert_eq!(from_flag["port"].as_integer(), Some(3333));
    assert_eq!(from_flag["replicator_max_jobs"].as_integer(), Some(9));

    // The file in the data folder is read when --config is not given.
    let data = TempDir::new("cli-config-data");
    std::fs::write(data.path().join("recliner.toml"), "port = 4444\n").unwrap();
    let in_data = print(
        &[
            "--print-config",
            "--data-dir",
            data.path().to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(in_data["port"].as_integer(), Some(4444));

    // Bad values stop startup with one line naming the setting.
    for (env, setting) in [
        (("RECLINER_PORT", "not-a-port"), "port"),
        (("RECLINER_REPLICATOR_MAX_JOBS", "0"), "replicator_max_jobs"),
        (("RECLINER_DURABILITY", "sometimes"), "durability"),
    ] {
        let out = recliner(&["--print-config"], &[env]);
        assert_eq!(out.status.code(), Some(2), "{env:?}");
        let err = text(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(&format!("`{setting}`")), "{err}");
    }
}
