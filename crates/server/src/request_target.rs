//! Request targets as CouchDB accepts them.
//!
//! curl and many scripts send `GET /db/_all_docs?key="x"` with the quotes
//! unencoded. CouchDB answers it; the HTTP stack under axum refuses any
//! target its URI type rejects with an empty 400 before a handler runs. This
//! adapter sits on each connection's bytes: it follows HTTP/1.1 framing
//! (heads, `Content-Length` and chunked bodies) and, only in a request line
//! whose target the URI type would refuse, percent-encodes the bytes that
//! made it refuse (`%22` decodes to the same `"`, so handlers see what
//! CouchDB's would). Bodies pass through untouched and uncopied; anything it
//! cannot follow (a head it cannot parse, one over [`HEAD_LIMIT`]) makes it
//! step aside for the rest of the connection, so the HTTP stack answers as
//! it would have.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Heads longer than this are not inspected (a connection holds at most
/// this much of one): the HTTP stack refuses a head past about 408 KiB
/// anyway, so this holds no more than it would.
const HEAD_LIMIT: usize = 416 * 1024;

/// Wraps every connection a listener accepts in [`LenientTarget`].
pub struct LenientListener<L>(pub L);

impl<L> axum::serve::Listener for LenientListener<L>
where
    L: axum::serve::Listener<Addr = SocketAddr>,
{
    type Io = LenientTarget<L::Io>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (io, addr) = self.0.accept().await;
        (LenientTarget::new(io), addr)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

/// A connection whose request lines are made acceptable (see the module).
pub struct LenientTarget<S> {
    inner: S,
    framing: Framing,
    /// Bytes already processed and waiting for room in the reader's buffer.
    pending: Vec<u8>,
    pending_from: usize,
}

impl<S> LenientTarget<S> {
    pub fn new(inner: S) -> LenientTarget<S> {
        LenientTarget {
            inner,
            framing: Framing::default(),
            pending: Vec::new(),
            pending_from: 0,
        }
    }

    /// The connection underneath.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Serves bytes left over from an earlier read first.
    fn drain_pending(&mut self, buf: &mut ReadBuf<'_>) -> bool {
        if self.pending_from >= self.pending.len() {
            return false;
        }
        let rest = &self.pending[self.pending_from..];
        let n = rest.len().min(buf.remaining());
        buf.put_slice(&rest[..n]);
        self.pending_from += n;
        if self.pending_from == self.pending.len() {
            self.pending.clear();
            self.pending_from = 0;
        }
        true
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for LenientTarget<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.drain_pending(buf) {
            return Poll::Ready(Ok(()));
        }
        loop {
            let start = buf.filled().len();
            match Pin::new(&mut this.inner).poll_read(cx, buf) {
                Poll::Ready(Ok(())) => {}
                other => return other,
            }
            let read = buf.filled().len() - start;
            if read == 0 {
                // End of stream: a head cut short goes out as it came.
                let rest = this.framing.take_partial_head();
                if rest.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                this.pending = rest;
                this.drain_pending(buf);
                return Poll::Ready(Ok(()));
            }
            match this.framing.process(&buf.filled()[start..]) {
                Processed::Unchanged => return Poll::Ready(Ok(())),
                Processed::Replaced(out) => {
                    buf.set_filled(start);
                    if out.is_empty() {
                        // Only part of a head so far: read on.
                        continue;
                    }
                    this.pending = out;
                    this.pending_from = 0;
                    this.drain_pending(buf);
                    return Poll::Ready(Ok(()));
                }
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for LenientTarget<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, data)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// What one read became.
#[derive(Debug, PartialEq)]
enum Processed {
    /// Pass the bytes on as read.
    Unchanged,
    /// Pass these instead (empty: hold everything back for now).
    Replaced(Vec<u8>),
}

/// Where the connection is in the request stream.
#[derive(Debug, Default)]
enum State {
    /// Collecting a request head.
    #[default]
    Head,
    /// Inside a body of known length: this many bytes are left.
    Body(u64),
    /// Chunked body: reading a chunk-size line.
    ChunkSize,
    /// Chunked body: this many data bytes, then the chunk's line end.
    ChunkData(u64),
    /// Chunked body: the line end after a chunk's data.
    ChunkEnd,
    /// Chunked body: trailer lines, up to an empty one.
    Trailers,
    /// Not followed any more: everything passes as it comes.
    Aside,
}

/// Follows the request stream's framing across reads.
#[derive(Debug, Default)]
struct Framing {
    state: State,
    /// The head, or the chunk-size or trailer line, read so far.
    line: Vec<u8>,
}

impl Framing {
    fn take_partial_head(&mut self) -> Vec<u8> {
        match self.state {
            State::Head => std::mem::take(&mut self.line),
            _ => Vec::new(),
        }
    }

    fn process(&mut self, data: &[u8]) -> Processed {
        // The common case, kept copy-free: the whole read is body.
        match &mut self.state {
            State::Aside => return Processed::Unchanged,
            State::Body(left) if *left >= data.len() as u64 => {
                *left -= data.len() as u64;
                if *left == 0 {
                    self.state = State::Head;
                }
                return Processed::Unchanged;
            }
            State::ChunkData(left) if *left >= data.len() as u64 => {
                *left -= data.len() as u64;
                if *left == 0 {
                    self.state = State::ChunkEnd;
                }
                return Processed::Unchanged;
            }
            _ => {}
        }
        let mut out = Vec::with_capacity(data.len() + 16);
        let mut rest = data;
        let mut changed = false;
        while !rest.is_empty() {
            let used = match &mut self.state {
                State::Aside => {
                    out.extend_from_slice(rest);
                    rest.len()
                }
                State::Body(left) | State::ChunkData(left) => {
                    let n = (*left).min(rest.len() as u64) as usize;
                    out.extend_from_slice(&rest[..n]);
                    *left -= n as u64;
                    if *left == 0 {
                        self.state = match self.state {
                            State::ChunkData(_) => State::ChunkEnd,
                            _ => State::Head,
                        };
                    }
                    n
                }
                State::Head => {
                    changed = true;
                    self.head_bytes(rest, &mut out)
                }
                State::ChunkSize | State::ChunkEnd | State::Trailers => {
                    self.chunk_line(rest, &mut out)
                }
            };
            rest = &rest[used..];
        }
        if changed || out.len() != data.len() {
            Processed::Replaced(out)
        } else {
            Processed::Unchanged
        }
    }

    /// Collects head bytes; when the head is complete, writes it (its
    /// target made acceptable) to `out` and moves to its body.
    fn head_bytes(&mut self, rest: &[u8], out: &mut Vec<u8>) -> usize {
        let before = self.line.len();
        self.line.extend_from_slice(rest);
        // Search from a little before the new bytes: the blank line may
        // straddle two reads.
        let from = before.saturating_sub(3);
        let Some(end) = find(&self.line[from..], b"\r\n\r\n").map(|i| from + i + 4) else {
            if self.line.len() > HEAD_LIMIT {
                out.append(&mut self.line);
                self.state = State::Aside;
            }
            return rest.len();
        };
        let used = end - before;
        self.line.truncate(end);
        let head = std::mem::take(&mut self.line);
        match parse_head(&head) {
            Some((rewritten, next)) => {
                out.extend_from_slice(rewritten.as_deref().unwrap_or(&head));
                self.state = next;
            }
            None => {
                out.extend_from_slice(&head);
                self.state = State::Aside;
            }
        }
        used
    }

    /// Passes chunk framing through, following it.
    fn chunk_line(&mut self, rest: &[u8], out: &mut Vec<u8>) -> usize {
        let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
            self.line.extend_from_slice(rest);
            out.extend_from_slice(rest);
            if self.line.len() > HEAD_LIMIT {
                self.line.clear();
                self.state = State::Aside;
            }
            return rest.len();
        };
        self.line.extend_from_slice(&rest[..nl]);
        out.extend_from_slice(&rest[..=nl]);
        let line = std::mem::take(&mut self.line);
        let line = line.strip_suffix(b"\r").unwrap_or(&line);
        self.state = match self.state {
            State::ChunkSize => match chunk_size(line) {
                Some(0) => State::Trailers,
                Some(n) => State::ChunkData(n),
                None => State::Aside,
            },
            State::ChunkEnd if line.is_empty() => State::ChunkSize,
            State::Trailers if line.is_empty() => State::Head,
            State::Trailers => State::Trailers,
            _ => State::Aside,
        };
        nl + 1
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn chunk_size(line: &[u8]) -> Option<u64> {
    let digits = line.split(|&b| b == b';').next()?;
    let digits = std::str::from_utf8(digits).ok()?.trim();
    u64::from_str_radix(digits, 16).ok()
}

/// Parses a complete head: the head with its target made acceptable (if it
/// had to change) and the state its body starts in. `None` when it is not a
/// request this adapter can follow.
fn parse_head(head: &[u8]) -> Option<(Option<Vec<u8>>, State)> {
    // Blank lines before a request line are allowed and skipped.
    let start = head.iter().position(|&b| b != b'\r' && b != b'\n')?;
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(&head[start..]) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return None,
    }
    let mut chunked = false;
    let mut length: Option<u64> = None;
    for header in request.headers.iter() {
        if header.name.eq_ignore_ascii_case("transfer-encoding") {
            let value = std::str::from_utf8(header.value).ok()?;
            chunked = value
                .rsplit(',')
                .next()
                .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
            if !chunked {
                return None;
            }
        } else if header.name.eq_ignore_ascii_case("content-length") {
            let value: u64 = std::str::from_utf8(header.value)
                .ok()?
                .trim()
                .parse()
                .ok()?;
            if length.is_some_and(|l| l != value) {
                return None;
            }
            length = Some(value);
        } else if header.name.eq_ignore_ascii_case("upgrade") {
            return None;
        }
    }
    let next = match (chunked, length) {
        (true, _) => State::ChunkSize,
        (false, Some(0) | None) => State::Head,
        (false, Some(n)) => State::Body(n),
    };
    let target = request.path?;
    Some((acceptable_head(head, target), next))
}

/// The head with its target percent-encoded where the URI type would
/// refuse it, or `None` when it is acceptable as it is.
fn acceptable_head(head: &[u8], target: &str) -> Option<Vec<u8>> {
    if target.starts_with('/') && http::uri::PathAndQuery::try_from(target).is_ok() {
        return None;
    }
    if !target.starts_with('/') && http::Uri::try_from(target).is_ok() {
        return None;
    }
    let mut encoded = String::with_capacity(target.len() + 8);
    for c in target.chars() {
        match c {
            '"' | '<' | '>' | '`' | '{' | '}' | '|' | '\\' | '^' => {
                encoded.push_str(&format!("%{:02X}", c as u32));
            }
            _ => encoded.push(c),
        }
    }
    if encoded == target {
        return None;
    }
    let at = find(head, target.as_bytes())?;
    let mut out = Vec::with_capacity(head.len() + encoded.len());
    out.extend_from_slice(&head[..at]);
    out.extend_from_slice(encoded.as_bytes());
    out.extend_from_slice(&head[at + target.len()..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

    use super::*;
    use proptest::prelude::*;
    use tokio::io::AsyncReadExt;

    /// Runs `input` through the adapter in reads of the given sizes.
    fn through(input: &[u8], cuts: &[usize]) -> Vec<u8> {
        let mut framing = Framing::default();
        let mut out = Vec::new();
        let mut rest = input;
        let mut i = 0;
        while !rest.is_empty() {
            let n = cuts.get(i).copied().unwrap_or(7).clamp(1, rest.len());
            i += 1;
            match framing.process(&rest[..n]) {
                Processed::Unchanged => out.extend_from_slice(&rest[..n]),
                Processed::Replaced(bytes) => out.extend_from_slice(&bytes),
            }
            rest = &rest[n..];
        }
        out.extend(framing.take_partial_head());
        out
    }

    #[test]
    fn quotes_in_a_query_are_encoded() {
        let input = b"GET /db/_all_docs?key=\"x\" HTTP/1.1\r\nHost: a\r\n\r\n";
        let out = through(input, &[1000]);
        assert_eq!(
            out,
            b"GET /db/_all_docs?key=%22x%22 HTTP/1.1\r\nHost: a\r\n\r\n".to_vec()
        );
    }

    #[test]
    fn acceptable_targets_and_bodies_are_untouched() {
        let body = "GET /db?key=\"x\" HTTP/1.1\r\n\r\n";
        let input = format!(
            "PUT /db/doc HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}GET /x?a=%22 HTTP/1.1\r\n\r\n",
            body.len()
        );
        assert_eq!(through(input.as_bytes(), &[3, 50, 2]), input.as_bytes());
    }

    #[test]
    fn chunked_bodies_are_followed() {
        let input = b"POST /db HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
            5;x=y\r\nGET /\r\n4\r\n\"a\" \r\n0\r\nT: 1\r\n\r\n\
            GET /a?k=\"v\" HTTP/1.1\r\n\r\n";
        let expected = b"POST /db HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
            5;x=y\r\nGET /\r\n4\r\n\"a\" \r\n0\r\nT: 1\r\n\r\n\
            GET /a?k=%22v%22 HTTP/1.1\r\n\r\n";
        for cut in 1..20 {
            assert_eq!(
                through(input, &[cut; 200]),
                expected.to_vec(),
                "reads of {cut}"
            );
        }
    }

    #[test]
    fn what_cannot_be_followed_passes_unchanged() {
        let input = b"NOT HTTP\r\n\r\nGET /a?k=\"v\" HTTP/1.1\r\n\r\n";
        assert_eq!(through(input, &[4; 100]), input.to_vec());
    }

    #[tokio::test]
    async fn reads_through_the_adapter_match() {
        let input = b"GET /db?key=\"x\" HTTP/1.1\r\n\r\n".to_vec();
        let mut adapter = LenientTarget::new(&input[..]);
        let mut out = Vec::new();
        let mut small = [0u8; 5];
        loop {
            let n = adapter.read(&mut small).await.unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&small[..n]);
        }
        assert_eq!(out, b"GET /db?key=%22x%22 HTTP/1.1\r\n\r\n".to_vec());
    }

    /// A request: its target, its body, and whether the body is chunked.
    fn request() -> impl Strategy<Value = (String, Vec<u8>, bool)> {
        (
            "/[a-z\"<>{}|^`%/]{0,12}(\\?[a-z=\"&<>]{0,10})?",
            proptest::collection::vec(any::<u8>(), 0..300),
            any::<bool>(),
        )
    }

    fn encode(requests: &[(String, Vec<u8>, bool)], fixed: bool) -> Vec<u8> {
        let mut out = Vec::new();
        for (target, body, chunked) in requests {
            let target = if fixed {
                acceptable_head(target.as_bytes(), target)
                    .map(|t| String::from_utf8(t).unwrap())
                    .unwrap_or_else(|| target.clone())
            } else {
                target.clone()
            };
            out.extend_from_slice(format!("POST {target} HTTP/1.1\r\nHost: h\r\n").as_bytes());
            if *chunked {
                out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
                for piece in body.chunks(37) {
                    out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                    out.extend_from_slice(piece);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"0\r\n\r\n");
            } else {
                out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
                out.extend_from_slice(body);
            }
        }
        out
    }

    proptest! {
        /// Any stream of requests, cut into reads anywhere, comes out with
        /// its targets made acceptable and every other byte as it was.
        #[test]
        fn only_targets_change(
            requests in proptest::collection::vec(request(), 1..6),
            cuts in proptest::collection::vec(1usize..400, 1..60),
        ) {
            let input = encode(&requests, false);
            let expected = encode(&requests, true);
            let out = through(&input, &cuts);
            prop_assert_eq!(out, expected);
        }
    }
}
