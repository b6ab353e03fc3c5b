//! Slow clients for the soak: connections that trickle their bytes (slowloris) or send nothing,
//! reconnecting whenever the server closes them, to show they cost the other clients nothing.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    task::JoinHandle,
};

/// One byte a second: far slower than any real client, far faster than the timeouts, which must
/// cut them anyway (a head by its deadline, a body by the request deadline).
const TRICKLE: Duration = Duration::from_secs(1);

#[derive(Default)]
pub struct Stats {
    pub connections: AtomicU64,
    /// Connections the server closed (a timeout) or answered (408, 503).
    pub ended_by_server: AtomicU64,
}

/// Running slow clients; dropping this disconnects them.
pub struct SlowClients {
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for SlowClients {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// What each kind sends before trickling, and the byte it trickles (none: it sends nothing).
fn kind(i: usize, key: &str) -> (String, Option<u8>) {
    match i % 3 {
        // A head that never ends.
        0 => ("GET /api/v1/bays HTTP/1.1\r\nhost: soak\r\nx-slow: ".into(), Some(b'a')),
        // A connection that never says anything.
        1 => (String::new(), None),
        // A body that never ends (JSON may start with any amount of whitespace).
        _ => (
            format!(
                "POST /api/v1/appointments HTTP/1.1\r\nhost: soak\r\nauthorization: Bearer {key}\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n"
            ),
            Some(b' '),
        ),
    }
}

/// Starts `count` slow clients against `addr` (`127.0.0.1:PORT`), spread over a second.
pub fn start(addr: &str, key: &str, count: usize, stats: Arc<Stats>) -> SlowClients {
    let tasks = (0..count)
        .map(|i| {
            let (addr, (prefix, byte), stats) = (addr.to_owned(), kind(i, key), stats.clone());
            let offset = TRICKLE * i as u32 / count.max(1) as u32;
            tokio::spawn(async move {
                tokio::time::sleep(offset).await;
                loop {
                    let Ok(stream) = TcpStream::connect(&addr).await else {
                        tokio::time::sleep(TRICKLE).await;
                        continue;
                    };
                    stats.connections.fetch_add(1, Ordering::Relaxed);
                    trickle(stream, prefix.as_bytes(), byte).await;
                    stats.ended_by_server.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    SlowClients { tasks }
}

/// Sends `prefix`, then `byte` once a second, until the server answers or closes.
async fn trickle(mut stream: TcpStream, prefix: &[u8], byte: Option<u8>) {
    if stream.write_all(prefix).await.is_err() {
        return;
    }
    let mut answer = [0u8; 1024];
    loop {
        tokio::select! {
            // Any answer (408, 503) or the close ends this connection.
            _ = stream.read(&mut answer) => return,
            _ = tokio::time::sleep(TRICKLE) => {
                if let Some(b) = byte
                    && stream.write_all(&[b]).await.is_err()
                {
                    return;
                }
            }
        }
    }
}
