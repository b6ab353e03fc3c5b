//! One connection: hyper's HTTP/1 over a timed socket, and the application behind a service that
//! settles each request's body before the connection takes the next request.

use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use axum::{
    Router,
    http::{HeaderValue, Request, Response, StatusCode, header},
};
use hyper::{body::Incoming, server::conn::http1};
use hyper_util::rt::TokioIo;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    sync::{oneshot, watch},
};
use tower::ServiceExt;

use super::{
    Settings,
    body::{self, Ending},
    phases::{Phases, ResponseBody, TimedIo},
};

/// Serves one accepted connection until it closes, or until `stop` says the server is stopping
/// and its request in flight (if any) is answered.
pub(super) async fn serve(stream: TcpStream, router: Router, settings: Arc<Settings>, mut stop: watch::Receiver<bool>) {
    let transport = &settings.transport;
    let phases = Phases::new(transport.header_timeout, transport.idle_timeout);
    let io = TokioIo::new(TimedIo::new(stream, phases.clone(), transport.write_timeout));
    let closing = Arc::new(AtomicBool::new(false));
    let service = AppService { router, settings: settings.clone(), phases, closing: closing.clone(), stop: stop.clone() };
    // The header timeout is the socket's (see `phases`): hyper's would also cut idle connections.
    let mut conn = http1::Builder::new().header_read_timeout(None).serve_connection(io, service);
    let mut stopping = false;
    let finished = loop {
        tokio::select! {
            finished = std::future::poll_fn(|cx| conn.poll_without_shutdown(cx)) => break finished,
            _ = stop.wait_for(|stop| *stop), if !stopping => {
                stopping = true;
                Pin::new(&mut conn).graceful_shutdown();
            }
        }
    };
    match finished {
        Ok(()) => {
            let stream = conn.into_parts().io.into_inner().into_inner();
            let linger = if closing.load(Ordering::Relaxed) { settings.transport.discard_timeout } else { Duration::ZERO };
            close(stream, linger).await;
        }
        // Timeouts, resets, malformed requests: nothing more to say to this client.
        Err(e) => tracing::debug!(error = %e, "connection ended"),
    }
}

/// Closes our side of the connection, then reads and drops what the client still sends until it
/// closes too or `linger` passes: closing a socket with unread data resets the connection, and a
/// reset can destroy the answer before the client has read it.
pub(super) async fn close(mut stream: TcpStream, linger: Duration) {
    let _ = tokio::time::timeout(linger.max(Duration::from_millis(100)), stream.shutdown()).await;
    if linger.is_zero() {
        return;
    }
    let drain = async {
        let mut sink = [0u8; 4096];
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
    };
    let _ = tokio::time::timeout(linger, drain).await;
}

#[derive(Clone)]
struct AppService {
    router: Router,
    settings: Arc<Settings>,
    phases: Arc<Phases>,
    /// Set when an answer said `Connection: close` with part of its request unread.
    closing: Arc<AtomicBool>,
    /// Handed to every request as [`super::Stopping`], so long-lived answers can end.
    stop: watch::Receiver<bool>,
}

type Answer = Response<ResponseBody<axum::body::Body>>;

impl hyper::service::Service<Request<Incoming>> for AppService {
    type Response = Answer;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Answer, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        self.phases.request_started();
        let service = self.clone();
        let expects_continue = request.headers().get(header::EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        let limit = self.settings.config.body_limit_for(request.uri().path());
        let (parts, incoming) = request.into_parts();
        let (body, ending) = body::wrap(incoming, self.settings.transport.body_timeout);
        let mut request = Request::from_parts(parts, body);
        request.extensions_mut().insert(super::Stopping(self.stop.clone()));
        Box::pin(async move {
            let Ok(mut response) = service.router.clone().oneshot(request).await;
            let reusable = match ending {
                None => true,
                Some(ending) => service.settle(ending, expects_continue, response.status(), limit).await,
            };
            if !reusable || response.status() == StatusCode::PAYLOAD_TOO_LARGE {
                service.closing.store(true, Ordering::Relaxed);
                response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok(response.map(|body| ResponseBody::new(body, service.phases.clone())))
        })
    }
}

impl AppService {
    /// Once the application has answered: whether the connection can take another request, after
    /// discarding what the application left of the request body (at most the route's `limit`).
    async fn settle(&self, mut ending: oneshot::Receiver<Ending>, expects_continue: bool, status: StatusCode, limit: usize) -> bool {
        // The application has answered; if it still holds the body somewhere, where the request
        // ends is unknown (`Err`).
        match ending.try_recv() {
            Ok(Ending::Complete) => true,
            Ok(Ending::Unread(leftover)) => {
                // A client waiting for `100 Continue` was never asked for its body: it need not
                // send it, so there is nothing to wait for; and a 413's body is not worth reading.
                let unsolicited = expects_continue && !leftover.started;
                if unsolicited || status == StatusCode::PAYLOAD_TOO_LARGE {
                    return false;
                }
                let transport = &self.settings.transport;
                let discarded = body::discard(leftover, limit, transport.discard_timeout).await;
                if !discarded {
                    tracing::debug!("request body not discarded in time or over the limit: closing the connection");
                }
                discarded
            }
            Ok(Ending::Failed) | Err(_) => false,
        }
    }
}
