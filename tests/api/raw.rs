//! A bare HTTP/1.1 client over one TCP socket, for tests that decide byte by byte what the
//! server receives and when (reqwest hides both, and retries on a fresh connection).

use std::time::Duration;

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

/// Longest wait for any answer: a test fails rather than hangs.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

pub struct Conn {
    stream: TcpStream,
    /// Bytes read past the last response (the start of the next one).
    pending: Vec<u8>,
}

#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Asserts a problem+json answer with this status.
    #[track_caller]
    pub fn problem(&self, status: u16) {
        let body = String::from_utf8_lossy(&self.body);
        assert_eq!(self.status, status, "{body}");
        assert_eq!(self.header("content-type"), Some("application/problem+json"), "{body}");
        let json: serde_json::Value = serde_json::from_slice(&self.body).expect("a JSON body");
        assert_eq!(json["status"], status);
    }

    /// Whether the server said it closes the connection after this answer.
    pub fn closes(&self) -> bool {
        self.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
}

/// A request's head: `method path`, the headers given, and `Host`.
pub fn head(method: &str, path: &str, headers: &[(&str, &str)]) -> Vec<u8> {
    let mut out = format!("{method} {path} HTTP/1.1\r\nhost: test\r\n");
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    out.into_bytes()
}

impl Conn {
    /// Connects to `base` (`http://127.0.0.1:PORT`).
    pub async fn open(base: &str) -> Conn {
        let addr = base.trim_start_matches("http://");
        let stream = TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).unwrap();
        Conn { stream, pending: Vec::new() }
    }

    pub async fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await
    }

    /// Reads one response (bodies with `Content-Length` only, which is all this server sends
    /// outside the event stream). An error is what a client library calls a network error.
    pub async fn answer(&mut self) -> std::io::Result<Answer> {
        tokio::time::timeout(ANSWER_WITHIN, self.read_answer())
            .await
            .unwrap_or_else(|_| Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer within 10 s")))
    }

    async fn read_answer(&mut self) -> std::io::Result<Answer> {
        let head_end = loop {
            if let Some(i) = self.pending.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            self.fill().await?;
        };
        let head = String::from_utf8_lossy(&self.pending[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let status = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|s| s.parse().ok()).ok_or_else(|| bad(&head))?;
        let headers: Vec<(String, String)> = lines
            .filter(|l| !l.is_empty())
            .map(|l| l.split_once(':').map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned())).ok_or_else(|| bad(l)))
            .collect::<Result<_, _>>()?;
        let answer = Answer { status, headers, body: Vec::new() };
        let length: usize = answer.header("content-length").and_then(|v| v.parse().ok()).ok_or_else(|| bad(&head))?;
        while self.pending.len() < head_end + length {
            self.fill().await?;
        }
        let body = self.pending[head_end..head_end + length].to_vec();
        self.pending.drain(..head_end + length);
        Ok(Answer { body, ..answer })
    }

    async fn fill(&mut self) -> std::io::Result<()> {
        let mut chunk = [0u8; 8192];
        let n = self.stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "server closed the connection"));
        }
        self.pending.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    /// Sends a request and reads its answer.
    pub async fn exchange(&mut self, request: &[u8]) -> std::io::Result<Answer> {
        self.send(request).await?;
        self.answer().await
    }

    /// Waits up to `within` for the server to close the connection, discarding what it sends.
    pub async fn closed_within(&mut self, within: Duration) -> bool {
        let mut chunk = [0u8; 8192];
        let read_to_end = async {
            loop {
                match self.stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        };
        tokio::time::timeout(within, read_to_end).await.is_ok()
    }
}

fn bad(text: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not an HTTP response: {text:?}"))
}
