//! A peer that lies or never stops talking, for the replicator's tests: a
//! small HTTP/1.1 server whose every answer a test decides, including
//! answers that never end.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the peer answers to one request.
#[derive(Debug)]
pub enum Answer {
    /// A whole answer: status, JSON text.
    Json(u16, String),
    /// An answer that starts with `prefix`, then repeats `repeat` until the
    /// client goes away (no length: the body would end at the close).
    Endless { prefix: Vec<u8>, repeat: Vec<u8> },
}

impl Answer {
    pub fn json(status: u16, body: serde_json::Value) -> Answer {
        Answer::Json(status, body.to_string())
    }
}

/// One request the peer received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub body: String,
}

type Handler = dyn Fn(&Received) -> Answer + Send + Sync;

/// A running hostile peer on a loopback port.
#[derive(Debug)]
pub struct HostilePeer {
    pub port: u16,
    received: Arc<Mutex<Vec<Received>>>,
}

impl HostilePeer {
    /// Starts a peer that answers each request as `handler` says.
    pub async fn start(
        handler: impl Fn(&Received) -> Answer + Send + Sync + 'static,
    ) -> HostilePeer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let port = listener.local_addr().expect("a bound address").port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let log = received.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, handler.clone(), log.clone()));
            }
        });
        HostilePeer { port, received }
    }

    /// `http://127.0.0.1:PORT/{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.port)
    }

    /// Every request received so far.
    pub fn received(&self) -> Vec<Received> {
        self.received
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

async fn serve(mut stream: TcpStream, handler: Arc<Handler>, log: Arc<Mutex<Vec<Received>>>) {
    let mut buffer = Vec::new();
    loop {
        let Some(request) = read_request(&mut stream, &mut buffer).await else {
            return;
        };
        let answer = handler(&request);
        log.lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(request);
        match answer {
            Answer::Json(status, body) => {
                let head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    body.len()
                );
                if stream.write_all(head.as_bytes()).await.is_err()
                    || stream.write_all(body.as_bytes()).await.is_err()
                {
                    return;
                }
            }
            Answer::Endless { prefix, repeat } => {
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n";
                if stream.write_all(head.as_bytes()).await.is_err()
                    || stream.write_all(&prefix).await.is_err()
                {
                    return;
                }
                while stream.write_all(&repeat).await.is_ok() {}
                return;
            }
        }
    }
}

/// Reads one request (head and a `content-length` body); `None` at the end.
async fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<Received> {
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let mut chunk = [0u8; 8192];
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.lines();
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let path = first.next()?.to_string();
    let length: usize = lines
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse().ok())
        .unwrap_or(0);
    while buffer.len() < head_end + length {
        let mut chunk = [0u8; 8192];
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    let body = String::from_utf8_lossy(&buffer[head_end..head_end + length]).into_owned();
    buffer.drain(..head_end + length);
    Some(Received { method, path, body })
}
