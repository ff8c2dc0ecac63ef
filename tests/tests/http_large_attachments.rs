//! A 50 MiB attachment goes in and out without the server holding it in memory.

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::json;

/// Resident memory of a process: (current, peak) in KiB.
fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("a Linux /proc");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("the field is there")
    };
    (field("VmRSS:"), field("VmHWM:"))
}

const SIZE: usize = 50 << 20;

#[tokio::test]
async fn a_50_mib_attachment_streams_through_with_flat_memory() {
    let data = TempDir::new("bigatt");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    // Warm up the paths once with something small, then take the baseline.
    c.send_bytes(
        "PUT",
        "/db/warm/a",
        vec![1; 1024],
        "application/octet-stream",
    )
    .await;
    let _ = c.get("/db/warm/a").await;
    let (idle, _) = rss_kib(server.pid());

    // Upload from a stream: 50 MiB of patterned bytes in 1 MiB pieces.
    let pieces =
        (0..SIZE / (1 << 20)).map(|i| Ok::<_, std::io::Error>(vec![(i % 251) as u8; 1 << 20]));
    let body = reqwest::Body::wrap_stream(futures_util::stream::iter(pieces));
    let put = c
        .http()
        .put(c.url("/db/big/blob.bin"))
        .header("content-type", "application/octet-stream")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);

    let mut response = c
        .http()
        .get(c.url("/db/big/blob.bin"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers()["content-length"],
        SIZE.to_string().as_str()
    );
    let mut received = 0usize;
    while let Some(chunk) = response.chunk().await.unwrap() {
        let mib = received >> 20;
        assert!(
            chunk
                .iter()
                .enumerate()
                .all(|(k, &b)| b == (((received + k) >> 20) % 251) as u8),
            "bytes in MiB {mib}"
        );
        received += chunk.len();
    }
    assert_eq!(received, SIZE);

    let (_, peak) = rss_kib(server.pid());
    let growth_mib = peak.saturating_sub(idle) / 1024;
    assert!(
        growth_mib < 25,
        "peak memory grew {growth_mib} MiB above idle for a 50 MiB attachment"
    );
}
