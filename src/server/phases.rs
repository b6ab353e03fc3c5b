//! Where a connection is in its exchange, and the read and write deadlines that follow.
//!
//! hyper's own `header_read_timeout` starts the moment a keep-alive connection goes idle, so it
//! would also be the idle timeout (10 s, shorter than any load balancer's). The socket is wrapped
//! instead: a read that waits is given the deadline of the phase the connection is in.
//!
//! | phase | read deadline |
//! |---|---|
//! | new connection, nothing received | accepted + header timeout |
//! | idle after a response | response end + idle timeout |
//! | receiving a head | its first byte + header timeout (the first request: accepted + header timeout) |
//! | in a request | none here: the body's pauses are timed by [`super::body`], the handler by the request deadline |
//!
//! A write that makes no progress for the write timeout fails in any phase.

use std::{
    io,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll, Waker},
    time::Duration,
};

use axum::body::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    time::{Instant, Sleep},
};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Waiting for the first byte of a request; `fresh` until the first request has started.
    Waiting { deadline: Instant, fresh: bool },
    Head { deadline: Instant },
    Request,
}

#[derive(Debug)]
struct State {
    phase: Phase,
    /// The read that waits without a deadline (in a request), to wake when the request ends and
    /// its wait gets one.
    reader: Option<Waker>,
}

/// One connection's phase, shared by its socket, its service and its response bodies.
#[derive(Debug)]
pub(super) struct Phases {
    state: Mutex<State>,
    header_timeout: Duration,
    idle_timeout: Duration,
}

impl Phases {
    pub(super) fn new(header_timeout: Duration, idle_timeout: Duration) -> Arc<Phases> {
        let deadline = Instant::now() + header_timeout;
        let state = State { phase: Phase::Waiting { deadline, fresh: true }, reader: None };
        Arc::new(Phases { state: Mutex::new(state), header_timeout, idle_timeout })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set(&self, update: impl FnOnce(Phase) -> Phase) {
        let mut state = self.lock();
        state.phase = update(state.phase);
        if let (Some(waker), Phase::Waiting { .. }) = (state.reader.take(), state.phase) {
            waker.wake();
        }
    }

    /// Bytes arrived: a waiting connection is now receiving a head.
    fn bytes_arrived(&self) {
        let header_timeout = self.header_timeout;
        self.set(|phase| match phase {
            Phase::Waiting { deadline, fresh: true } => Phase::Head { deadline },
            Phase::Waiting { fresh: false, .. } => Phase::Head { deadline: Instant::now() + header_timeout },
            other => other,
        });
    }

    /// hyper parsed a head and called the service.
    pub(super) fn request_started(&self) {
        self.set(|_| Phase::Request);
    }

    /// The response's body has been handed to hyper in full: the connection idles until the next
    /// request.
    pub(super) fn response_finished(&self) {
        let deadline = Instant::now() + self.idle_timeout;
        self.set(|_| Phase::Waiting { deadline, fresh: false });
    }

    /// The deadline of a read that waits now; without one, `cx` is woken when there is one.
    fn read_deadline(&self, cx: &Context<'_>) -> Option<Instant> {
        let mut state = self.lock();
        match state.phase {
            Phase::Waiting { deadline, .. } | Phase::Head { deadline } => Some(deadline),
            Phase::Request => {
                if !state.reader.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    state.reader = Some(cx.waker().clone());
                }
                None
            }
        }
    }
}

/// A socket whose reads and writes fail with `TimedOut` past the deadlines above; hyper then
/// drops the connection.
pub(super) struct TimedIo<T> {
    io: T,
    phases: Arc<Phases>,
    write_timeout: Duration,
    read_timer: Timer,
    write_timer: Timer,
}

/// A sleep armed for one deadline at a time, allocated on first use.
#[derive(Default)]
pub(super) struct Timer {
    sleep: Option<Pin<Box<Sleep>>>,
    armed: Option<Instant>,
}

impl Timer {
    /// Whether `deadline` has passed; registers for a wake-up at it otherwise.
    fn expired(&mut self, deadline: Instant, cx: &mut Context<'_>) -> bool {
        if self.armed != Some(deadline) {
            match &mut self.sleep {
                Some(sleep) => sleep.as_mut().reset(deadline),
                None => self.sleep = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
            self.armed = Some(deadline);
        }
        self.sleep.as_mut().is_some_and(|sleep| sleep.as_mut().poll(cx).is_ready())
    }

    /// Whether `limit` has passed since this wait began (the first call after [`Timer::disarm`]).
    pub(super) fn waited_longer_than(&mut self, limit: Duration, cx: &mut Context<'_>) -> bool {
        let deadline = self.armed.unwrap_or_else(|| Instant::now() + limit);
        self.expired(deadline, cx)
    }

    /// The wait is over (progress was made).
    pub(super) fn disarm(&mut self) {
        self.armed = None;
    }
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, what.to_owned())
}

impl<T> TimedIo<T> {
    pub(super) fn new(io: T, phases: Arc<Phases>, write_timeout: Duration) -> Self {
        TimedIo { io, phases, write_timeout, read_timer: Timer::default(), write_timer: Timer::default() }
    }

    pub(super) fn into_inner(self) -> T {
        self.io
    }

    /// Runs one write-side operation; a wait longer than the write timeout fails it.
    fn write_op<R>(&mut self, cx: &mut Context<'_>, op: impl FnOnce(&mut T, &mut Context<'_>) -> Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        match op(&mut self.io, cx) {
            Poll::Ready(result) => {
                self.write_timer.disarm();
                Poll::Ready(result)
            }
            Poll::Pending if self.write_timer.waited_longer_than(self.write_timeout, cx) => {
                Poll::Ready(Err(timed_out("the client did not read the response in time")))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for TimedIo<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                this.read_timer.disarm();
                if buf.filled().len() > before {
                    this.phases.bytes_arrived();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match this.phases.read_deadline(cx) {
                Some(deadline) if this.read_timer.expired(deadline, cx) => {
                    Poll::Ready(Err(timed_out("no request, or no complete request head, in time")))
                }
                _ => Poll::Pending,
            },
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for TimedIo<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut().write_op(cx, |io, cx| Pin::new(io).poll_write(cx, buf))
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        self.get_mut().write_op(cx, |io, cx| Pin::new(io).poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().write_op(cx, |io, cx| Pin::new(io).poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().write_op(cx, |io, cx| Pin::new(io).poll_shutdown(cx))
    }
}

/// A response body that marks the connection idle once hyper has taken all of it (or dropped it).
pub(super) struct ResponseBody<B> {
    inner: B,
    phases: Arc<Phases>,
}

impl<B> ResponseBody<B> {
    pub(super) fn new(inner: B, phases: Arc<Phases>) -> Self {
        ResponseBody { inner, phases }
    }
}

impl<B> Drop for ResponseBody<B> {
    fn drop(&mut self) {
        self.phases.response_finished();
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for ResponseBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
