//! The server starts, answers the server routes, and stops cleanly.

use recliner_tests::{TempDir, TestServer, http_client};
use reqwest::StatusCode;
use serde_json::Value;

async fn get(url: &str) -> (StatusCode, Option<String>, Value) {
    let response = http_client().get(url).send().await.expect("request");
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = response.json().await.expect("a JSON body");
    (status, content_type, body)
}

#[tokio::test]
async fn the_server_welcomes_reports_up_and_answers_json_404s() {
    let data = TempDir::new("basics");
    let server = TestServer::start(data.path(), &[]);

    let (status, content_type, welcome) = get(&server.url("/")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type.as_deref(), Some("application/json"));
    assert_eq!(welcome["couchdb"], "Welcome");
    assert_eq!(welcome["vendor"]["name"], "Recliner");
    assert!(welcome["version"].is_string());

    let (status, _, up) = get(&server.url("/_up")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(up["status"], "ok");

    let (status, content_type, missing) = get(&server.url("/no/such/path")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(content_type.as_deref(), Some("application/json"));
    assert_eq!(missing["error"], "not_found");
    assert!(missing["reason"].is_string());

    let status = server.stop();
    assert!(
        status.success(),
        "recliner should exit cleanly on SIGTERM, got {status}"
    );
}

#[tokio::test]
async fn the_server_uuid_survives_a_restart() {
    let data = TempDir::new("uuid");
    let first = TestServer::start(data.path(), &[]);
    let (_, _, welcome) = get(&first.url("/")).await;
    let uuid = welcome["uuid"].as_str().expect("uuid").to_string();
    assert_eq!(uuid.len(), 32);
    first.stop();

    let second = TestServer::start(data.path(), &[]);
    let (_, _, again) = get(&second.url("/")).await;
    assert_eq!(again["uuid"], uuid.as_str());

    let other = TempDir::new("uuid-other");
    let third = TestServer::start(other.path(), &[]);
    let (_, _, other_welcome) = get(&third.url("/")).await;
    assert_ne!(
        other_welcome["uuid"],
        uuid.as_str(),
        "each data folder has its own identity"
    );
}

#[test]
fn a_bad_setting_stops_startup_with_one_clear_line() {
    let data = TempDir::new("badcfg");
    let output = std::process::Command::new(recliner_tests::recliner_bin())
        .args(["--data-dir"])
        .arg(data.path())
        .env("RECLINER_PORT", "not-a-port")
        .output()
        .expect("run recliner");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("`port`"),
        "stderr should name the setting: {stderr}"
    );
}
