//! The request body as the application reads it: a pause longer than the body timeout fails the
//! read, small chunks are copied, and a body the handler leaves unread goes back to the
//! connection, which discards the rest of it (or closes) before the next request.

use std::{
    error::Error,
    fmt,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use axum::body::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::sync::oneshot;

use super::phases::Timer;

/// Chunks smaller than this are copied out of hyper's read buffer. A chunk is a view into the
/// buffer it was read into, so a body trickled a few bytes per read and buffered whole (`Json`
/// does) would keep one buffer alive per chunk: kilobytes of memory per byte received. Measured:
/// 200 bodies trickled at 20 bytes/s took the server from 43 to 353 MiB in 20 s without the
/// copy, from 44 to 48 MiB with it.
const COPY_BELOW: usize = 4096;

/// The error a body read ends with when the client pauses longer than the body timeout.
#[derive(Debug)]
pub struct BodyTimedOut(Duration);

impl fmt::Display for BodyTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the request body paused for more than {} s", self.0.as_secs_f64())
    }
}

impl Error for BodyTimedOut {}

/// Whether `err`, or an error that caused it, is a [`BodyTimedOut`].
pub fn is_body_timeout(err: &(dyn Error + 'static)) -> bool {
    std::iter::successors(Some(err), |&e| e.source()).any(|e| e.is::<BodyTimedOut>())
}

/// How the application left a request body, reported when it drops the body.
pub(super) enum Ending {
    /// Read to its end.
    Complete,
    /// Partly unread: the rest may be discarded.
    Unread(Leftover),
    /// Failed (timed out, broken): the connection cannot serve another request.
    Failed,
}

pub(super) struct Leftover {
    body: Incoming,
    read: u64,
    /// Whether anyone asked for the body (which is when hyper sends `100 Continue`).
    pub(super) started: bool,
}

pub(super) struct RequestBody {
    inner: Option<Incoming>,
    pause_limit: Duration,
    pause: Timer,
    read: u64,
    started: bool,
    failed: bool,
    ending: Option<oneshot::Sender<Ending>>,
}

/// Wraps a request's body; the receiver learns how it ended (none for a request without body).
pub(super) fn wrap(body: Incoming, pause_limit: Duration) -> (RequestBody, Option<oneshot::Receiver<Ending>>) {
    let (sender, receiver) = if body.is_end_stream() {
        (None, None)
    } else {
        let (tx, rx) = oneshot::channel();
        (Some(tx), Some(rx))
    };
    let body = RequestBody { inner: Some(body), pause_limit, pause: Timer::default(), read: 0, started: false, failed: false, ending: sender };
    (body, receiver)
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = Box<dyn Error + Send + Sync>;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let Some(inner) = this.inner.as_mut().filter(|_| !this.failed) else {
            return Poll::Ready(None);
        };
        this.started = true;
        match Pin::new(inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                this.pause.disarm();
                let frame = frame.map_data(|data| {
                    this.read += data.len() as u64;
                    if data.len() < COPY_BELOW { Bytes::copy_from_slice(&data) } else { data }
                });
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.failed = true;
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending if this.pause.waited_longer_than(this.pause_limit, cx) => {
                this.failed = true;
                Poll::Ready(Some(Err(BodyTimedOut(this.pause_limit).into())))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.as_ref().is_none_or(|b| b.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.as_ref().map(|b| b.size_hint()).unwrap_or_default()
    }
}

impl Drop for RequestBody {
    fn drop(&mut self) {
        let Some(sender) = self.ending.take() else { return };
        let ending = match self.inner.take() {
            _ if self.failed => Ending::Failed,
            Some(body) if !body.is_end_stream() => Ending::Unread(Leftover { body, read: self.read, started: self.started }),
            _ => Ending::Complete,
        };
        let _ = sender.send(ending);
    }
}

/// Reads and drops the rest of a body, keeping none of it, for at most `within`: whether it ended
/// before the whole body passed `limit` bytes.
pub(super) async fn discard(leftover: Leftover, limit: usize, within: Duration) -> bool {
    let Leftover { mut body, read, .. } = leftover;
    let mut budget = (limit as u64).saturating_sub(read);
    if body.size_hint().lower() > budget {
        return false;
    }
    let drain = async {
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            let Ok(frame) = frame else { return false };
            let n = frame.data_ref().map_or(0, |d| d.len() as u64);
            if n > budget {
                return false;
            }
            budget -= n;
        }
        true
    };
    tokio::time::timeout(within, drain).await.unwrap_or(false)
}
