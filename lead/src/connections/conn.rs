//! One accepted connection: its bytes, with the handshake and idle
//! deadlines enforced as it reads and writes, and the state its calls share
//! with it.

use std::{
    future::Future as _,
    io,
    pin::Pin,
    sync::{
        atomic::{AtomicI64, AtomicUsize, Ordering},
        Arc,
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    time::Sleep,
};
use tonic::transport::server::Connected;

use super::{ConnLimits, Io, Slot, Speaks};

/// What the calls on one connection share with it: how many are in progress
/// and since when none has been.
#[derive(Debug)]
pub struct ConnState {
    /// Calls in progress (a stream counts until its response ends).
    pub(super) calls: AtomicUsize,
    /// When the last call ended, in ms since the connection opened.
    pub(super) idle_since_ms: AtomicI64,
    /// When the connection opened.
    opened: Instant,
    /// The lead closed it (an HTTP/1.1 response stream it ended whose
    /// client reads nothing): every read and write fails from now on.
    closed: std::sync::atomic::AtomicBool,
    /// The connection's task, to wake when it is closed.
    waker: std::sync::Mutex<Option<std::task::Waker>>,
}

impl ConnState {
    /// Closes the connection: its task wakes and its next read or write
    /// fails, so the server drops it (and the socket).
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let waker = self
            .waker
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// `Err` once closed; otherwise remembers `cx`'s task to wake.
    fn check_closed(&self, cx: &mut Context<'_>) -> io::Result<()> {
        let closed = || {
            io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "closed by the lead: a response it ended was not read",
            )
        };
        if self.closed.load(Ordering::Acquire) {
            return Err(closed());
        }
        let mut waker = self
            .waker
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *waker = Some(cx.waker().clone());
        }
        drop(waker);
        if self.closed.load(Ordering::Acquire) {
            return Err(closed());
        }
        Ok(())
    }

    pub(super) fn now_ms(&self) -> i64 {
        i64::try_from(self.opened.elapsed().as_millis()).unwrap_or(i64::MAX)
    }
}

/// Request extension: the connection a call came on.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// Its shared state.
    pub state: Arc<ConnState>,
}

/// One accepted connection, within its limits.
#[derive(Debug)]
pub struct Conn {
    io: Io,
    /// Bytes of the preface still to come.
    preface_left: usize,
    limits: ConnLimits,
    speaks: Speaks,
    state: Arc<ConnState>,
    timer: Pin<Box<Sleep>>,
    /// Held while the connection is open.
    _permit: Slot,
}

impl Conn {
    pub(super) fn new(io: Io, limits: ConnLimits, speaks: Speaks, permit: Slot) -> Self {
        Self {
            io,
            preface_left: speaks.preface_len(),
            limits,
            speaks,
            state: Arc::new(ConnState {
                calls: AtomicUsize::new(0),
                idle_since_ms: AtomicI64::new(0),
                opened: Instant::now(),
                closed: std::sync::atomic::AtomicBool::new(false),
                waker: std::sync::Mutex::new(None),
            }),
            timer: Box::pin(tokio::time::sleep(limits.handshake)),
            _permit: permit,
        }
    }

    /// Bytes moved: on a port where idle means no byte, the idle clock
    /// starts again.
    fn moved(&self) {
        if self.speaks == Speaks::Http1 {
            self.state
                .idle_since_ms
                .store(self.state.now_ms(), Ordering::Release);
        }
    }

    /// When the connection must be closed unless something happens first.
    fn deadline(&self) -> Option<Instant> {
        if self.preface_left > 0 {
            return Some(self.state.opened + self.limits.handshake);
        }
        if self.state.calls.load(Ordering::Acquire) > 0 {
            return None;
        }
        let idle_since = self.state.idle_since_ms.load(Ordering::Acquire);
        let idle_since = Duration::from_millis(u64::try_from(idle_since).unwrap_or(0));
        Some(self.state.opened + idle_since + self.limits.idle)
    }

    /// After a write: bytes moved, or a write that waits fails once the
    /// lead closed the connection.
    fn wrote(
        &self,
        cx: &mut Context<'_>,
        written: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match written {
            Poll::Ready(Ok(n)) if n > 0 => self.moved(),
            Poll::Pending => {
                if let Err(e) = self.check_open(cx) {
                    return Poll::Ready(Err(e));
                }
            }
            _ => {}
        }
        written
    }

    /// `Err` once the lead closed it; only an HTTP/1.1 connection (one
    /// response at a time) is closed so.
    fn check_open(&self, cx: &mut Context<'_>) -> io::Result<()> {
        if self.speaks == Speaks::Http1 {
            self.state.check_closed(cx)
        } else {
            Ok(())
        }
    }

    /// `Err(TimedOut)` once the deadline passed; otherwise arms the timer so
    /// the connection's task wakes at the deadline.
    fn check_deadline(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        let Some(deadline) = self.deadline() else {
            return Ok(());
        };
        let deadline = tokio::time::Instant::from_std(deadline);
        if self.timer.deadline() != deadline {
            self.timer.as_mut().reset(deadline);
        }
        if self.timer.as_mut().poll(cx).is_ready() {
            let why = match (self.preface_left > 0, self.speaks) {
                (true, Speaks::Grpc) => "no HTTP/2 preface within --handshake-timeout",
                (true, Speaks::Http1) => "no request within --handshake-timeout",
                (false, Speaks::Grpc) => "no call within --idle-timeout",
                (false, Speaks::Http1) => "no byte within --idle-timeout",
            };
            return Err(io::Error::new(io::ErrorKind::TimedOut, why));
        }
        Ok(())
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let read = buf.filled().len() - before;
                self.preface_left = self.preface_left.saturating_sub(read);
                if read > 0 {
                    self.moved();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match self.check_deadline(cx).and_then(|()| self.check_open(cx)) {
                Ok(()) => Poll::Pending,
                Err(e) => Poll::Ready(Err(e)),
            },
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.io).poll_write(cx, buf);
        self.wrote(cx, written)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.wrote(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

impl Connected for Conn {
    type ConnectInfo = ConnInfo;

    fn connect_info(&self) -> ConnInfo {
        ConnInfo {
            state: self.state.clone(),
        }
    }
}
