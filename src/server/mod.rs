//! The HTTP server: accept connections up to a cap, serve each with hyper under the transport's
//! timeouts (`phases`), settle every request body so a refusal never costs the client its
//! connection (`connection`, `body`), and shut down gracefully.

mod body;
mod connection;
mod phases;

use std::{future::Future, io, pin::pin, sync::Arc, sync::LazyLock, time::Duration};

use axum::{Router, http::StatusCode};
use tokio::{
    io::AsyncWriteExt,
    net::{TcpListener, TcpStream},
    sync::{Semaphore, watch},
};

pub use body::{BodyTimedOut, is_body_timeout};

/// In every request's extensions: resolves when the server starts shutting down, so answers
/// that never end by themselves (the event stream) end then instead of holding the shutdown
/// until its deadline. Clients resume elsewhere with `Last-Event-ID`.
#[derive(Clone)]
pub struct Stopping(watch::Receiver<bool>);

impl Stopping {
    pub async fn wait(&mut self) {
        if self.0.wait_for(|stop| *stop).await.is_err() {
            // The server is gone without saying so: nothing left to wait for.
        }
    }
}

use crate::{
    app,
    config::{AppConfig, Transport},
    db::Db,
    error::{PROBLEM_JSON, Problem},
};

/// Refusals (past the connection cap) answered at once; past this many, a new connection is
/// closed without an answer.
const REFUSALS_AT_ONCE: usize = 64;

/// What a connection needs to know of the configuration.
struct Settings {
    transport: Transport,
    /// For the request body limits of each route ([`AppConfig::body_limit_for`]).
    config: AppConfig,
}

/// Serves until SIGINT/SIGTERM; requests in flight are allowed to finish.
pub async fn serve(listener: TcpListener, db: Db, config: AppConfig) -> anyhow::Result<()> {
    let router = app::build(db.clone(), config.clone());
    run(listener, router, &config, shutdown_signal()).await?;
    db.close().await;
    Ok(())
}

/// Serves `router` on `listener` until `shutdown` completes; then stops accepting, closes idle
/// connections, and waits for requests in flight (at most the request deadline and a second).
pub async fn run(listener: TcpListener, router: Router, config: &AppConfig, shutdown: impl Future<Output = ()>) -> io::Result<()> {
    let settings = Arc::new(Settings { transport: config.transport.clone(), config: config.clone() });
    let cap = settings.transport.max_connections.max(1);
    let slots = Arc::new(Semaphore::new(cap));
    let refusals = Arc::new(Semaphore::new(REFUSALS_AT_ONCE));
    let (stop, stopped) = watch::channel(false);
    let mut shutdown = pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                accept_failed(e).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            refuse(stream, &refusals, settings.transport.discard_timeout);
            continue;
        };
        let (router, settings, stopped) = (router.clone(), settings.clone(), stopped.clone());
        tokio::spawn(async move {
            metrics::gauge!("http_connections_open").increment(1.0);
            connection::serve(stream, router, settings, stopped).await;
            metrics::gauge!("http_connections_open").decrement(1.0);
            drop(slot);
        });
    }
    drop(listener);
    let _ = stop.send(true);
    let all_closed = slots.acquire_many(cap as u32);
    if tokio::time::timeout(config.request_timeout + Duration::from_secs(1), all_closed).await.is_err() {
        tracing::warn!("stopping with connections still open (long-lived streams)");
    }
    Ok(())
}

/// Errors about one connection are that connection's; others (out of file descriptors) pause
/// accepting for a moment, as `axum::serve` does, rather than spin.
async fn accept_failed(e: io::Error) {
    use io::ErrorKind::*;
    if matches!(e.kind(), ConnectionRefused | ConnectionAborted | ConnectionReset) {
        return;
    }
    tracing::error!(error = %e, "accepting a connection failed");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// The answer past the connection cap: it costs the server one short write, and tells the client
/// to come back rather than leaving it to guess.
static OVERLOADED: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let problem = Problem::new(StatusCode::SERVICE_UNAVAILABLE, "The server has too many open connections; retry shortly.");
    let body = serde_json::to_vec(&problem).unwrap_or_default();
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: {PROBLEM_JSON}\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    [head.into_bytes(), body].concat()
});

/// Answers a connection past the cap with a 503 and closes it, without reading its request.
fn refuse(mut stream: TcpStream, refusals: &Arc<Semaphore>, linger: Duration) {
    metrics::counter!("http_connections_refused_total").increment(1);
    let Ok(permit) = refusals.clone().try_acquire_owned() else {
        return;
    };
    tokio::spawn(async move {
        if let Ok(Ok(())) = tokio::time::timeout(linger, stream.write_all(&OVERLOADED)).await {
            connection::close(stream, linger).await;
        }
        drop(permit);
    });
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
    tracing::info!("shutting down: finishing requests in flight");
}
