//! What a connection may hold of the lead: at most `--max-connections` at
//! once, and `--max-connections-per-address` from one address (more are
//! closed on accept), `--handshake-timeout` to finish the TLS handshake (if
//! TLS is on) and again to send the HTTP/2 preface, `--idle-timeout` with no
//! call in progress before it is closed; a call refused UNAUTHENTICATED does
//! not count as one, so a connection without a token cannot stay. The
//! console's port has the same limits, with "idle" meaning no byte either way
//! (its event stream sends a keep-alive every 15 s).
//! Also the one place where the transport's own statuses are put right: a
//! request over the size limit is RESOURCE_EXHAUSTED, one that does not decode
//! INVALID_ARGUMENT.

use std::{
    collections::HashMap,
    future::Future as _,
    io,
    net::IpAddr,
    pin::Pin,
    sync::{
        atomic::{AtomicI64, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::{mpsc, OwnedSemaphorePermit, Semaphore},
    time::Sleep,
};
use tokio_rustls::{server::TlsStream, TlsAcceptor};
use tonic::transport::server::Connected;

/// The limits on connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// The most connections open at once.
    pub max: usize,
    /// How long a new connection has to send the HTTP/2 preface.
    pub handshake: Duration,
    /// How long a connection with no call in progress is kept.
    pub idle: Duration,
    /// The most connections open at once from one address (an IPv6 peer's
    /// /64 is one address: a host is given one, not one address).
    pub per_address: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        Self {
            max: 16_384,
            handshake: Duration::from_secs(10),
            idle: Duration::from_secs(300),
            per_address: 256,
        }
    }
}

/// What one peer counts as for `per_address`: its IPv4 address (an
/// IPv4-mapped IPv6 address is that IPv4 address), or its IPv6 /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Address {
    V4([u8; 4]),
    V6Prefix([u8; 8]),
}

impl From<IpAddr> for Address {
    fn from(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => Address::V4(v4.octets()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Address::V4(v4.octets()),
                None => {
                    let mut prefix = [0; 8];
                    prefix.copy_from_slice(&v6.octets()[..8]);
                    Address::V6Prefix(prefix)
                }
            },
        }
    }
}

/// Connections open per address.
#[derive(Debug, Default)]
struct PerAddress {
    open: Mutex<HashMap<Address, usize>>,
}

impl PerAddress {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Address, usize>> {
        self.open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A slot for `address`, unless it holds `max` already.
    fn take(self: &Arc<Self>, address: Address, max: usize) -> Option<AddressSlot> {
        let mut open = self.lock();
        let count = open.entry(address).or_insert(0);
        if *count >= max {
            return None;
        }
        *count += 1;
        Some(AddressSlot {
            table: self.clone(),
            address,
        })
    }
}

/// One connection's place among its address's, given back when it closes.
#[derive(Debug)]
struct AddressSlot {
    table: Arc<PerAddress>,
    address: Address,
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self.table.lock();
        if let Some(count) = open.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.address);
            }
        }
    }
}

/// What an open connection holds: its place under `--max-connections` and
/// under its address's cap.
#[derive(Debug)]
struct Slot {
    _permit: OwnedSemaphorePermit,
    _address: AddressSlot,
}

/// What a port speaks, which decides when a connection has started and when
/// it is idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaks {
    /// gRPC: started once the HTTP/2 preface arrived; idle with no call.
    Grpc,
    /// The console's HTTP/1.1: started with its first byte; idle with no
    /// byte either way.
    Http1,
}

impl Speaks {
    /// Bytes a connection sends before it has started: the HTTP/2 client
    /// preface's length, or one byte of a request line.
    fn preface_len(self) -> usize {
        match self {
            Speaks::Grpc => 24,
            Speaks::Http1 => 1,
        }
    }
}

/// Accepts connections from `listener` within `limits`, with TLS if
/// `tls` is given, on a task of its own; they arrive on the receiver.
pub fn incoming(
    listener: TcpListener,
    limits: ConnLimits,
    tls: Option<TlsAcceptor>,
    speaks: Speaks,
) -> mpsc::Receiver<io::Result<Conn>> {
    let permits = Arc::new(Semaphore::new(limits.max));
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(accept_loop(listener, permits, limits, tls, speaks, tx));
    rx
}

/// Accepts connections while the server takes them; a connection past the
/// cap is closed at once. Errors accepting one connection (the peer reset
/// it, the process is out of descriptors) are logged and skipped.
async fn accept_loop(
    listener: TcpListener,
    permits: Arc<Semaphore>,
    limits: ConnLimits,
    tls: Option<TlsAcceptor>,
    speaks: Speaks,
    tx: mpsc::Sender<io::Result<Conn>>,
) {
    let mut last_refusal_log: Option<Instant> = None;
    let mut last_address_log: Option<Instant> = None;
    let per_address = Arc::new(PerAddress::default());
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "cannot accept a connection");
                // Out of descriptors, say: let some close before trying again.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            if last_refusal_log.is_none_or(|at| at.elapsed() > Duration::from_secs(10)) {
                tracing::warn!(
                    %peer,
                    max = limits.max,
                    "connection refused: --max-connections are open"
                );
                last_refusal_log = Some(Instant::now());
            }
            drop(stream);
            continue;
        };
        let Some(address) = per_address.take(peer.ip().into(), limits.per_address) else {
            if last_address_log.is_none_or(|at| at.elapsed() > Duration::from_secs(10)) {
                tracing::warn!(
                    %peer,
                    max = limits.per_address,
                    "connection refused: --max-connections-per-address are open from this address"
                );
                last_address_log = Some(Instant::now());
            }
            drop(stream);
            continue;
        };
        let permit = Slot {
            _permit: permit,
            _address: address,
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY");
        }
        let Some(acceptor) = &tls else {
            let conn = Conn::new(Io::Plain(stream), limits, speaks, permit);
            if tx.send(Ok(conn)).await.is_err() {
                return;
            }
            continue;
        };
        // The handshake runs on its own task, so a slow client holds only
        // its own connection slot, and for at most --handshake-timeout.
        let handshake = acceptor.accept(stream);
        let tx = tx.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(limits.handshake, handshake).await {
                Ok(Ok(stream)) => {
                    let conn = Conn::new(Io::Tls(Box::new(stream)), limits, speaks, permit);
                    let _ = tx.send(Ok(conn)).await;
                }
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "no TLS handshake within --handshake-timeout"),
            }
        });
    }
}

/// A connection's bytes: plain TCP, or TLS over it.
#[derive(Debug)]
pub enum Io {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(io) => Pin::new(io).poll_read(cx, buf),
            Io::Tls(io) => Pin::new(io).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(io) => Pin::new(io).poll_write(cx, buf),
            Io::Tls(io) => Pin::new(io).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(io) => Pin::new(io).poll_flush(cx),
            Io::Tls(io) => Pin::new(io).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(io) => Pin::new(io).poll_shutdown(cx),
            Io::Tls(io) => Pin::new(io).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(io) => Pin::new(io).poll_write_vectored(cx, bufs),
            Io::Tls(io) => Pin::new(io).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Io::Plain(io) => io.is_write_vectored(),
            Io::Tls(io) => io.is_write_vectored(),
        }
    }
}

/// What the calls on one connection share with it: how many are in progress
/// and since when none has been.
#[derive(Debug)]
pub struct ConnState {
    /// Calls in progress (a stream counts until its response ends).
    calls: AtomicUsize,
    /// When the last call ended, in ms since the connection opened.
    idle_since_ms: AtomicI64,
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

    fn now_ms(&self) -> i64 {
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
    fn new(io: Io, limits: ConnLimits, speaks: Speaks, permit: Slot) -> Self {
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

/// Counts a call in progress on its connection until dropped; then the
/// connection's idle clock starts again, unless the call was refused for
/// want of a token.
#[derive(Debug)]
struct CallGuard {
    state: Option<Arc<ConnState>>,
    /// The call was refused UNAUTHENTICATED: it is not activity.
    refused: bool,
}

impl CallGuard {
    fn new(state: Option<Arc<ConnState>>) -> Self {
        if let Some(state) = &state {
            state.calls.fetch_add(1, Ordering::AcqRel);
        }
        Self {
            state,
            refused: false,
        }
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if let Some(state) = &self.state {
            if !self.refused {
                state.idle_since_ms.store(state.now_ms(), Ordering::Release);
            }
            state.calls.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// A response body that keeps its call counted until it ends.
struct GuardedBody {
    inner: tonic::body::Body,
    _guard: CallGuard,
}

impl http_body::Body for GuardedBody {
    type Data = bytes::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The layer that counts calls per connection and puts the transport's
/// statuses right.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallsLayer;

impl<S> tower_layer::Layer<S> for CallsLayer {
    type Service = Calls<S>;

    fn layer(&self, inner: S) -> Calls<S> {
        Calls { inner }
    }
}

/// See [`CallsLayer`].
#[derive(Debug, Clone)]
pub struct Calls<S> {
    inner: S,
}

type BoxFuture<T> = Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl<S, B> tower_service::Service<http::Request<B>> for Calls<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>
        + Send,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let state = request
            .extensions()
            .get::<ConnInfo>()
            .map(|info| info.state.clone());
        let guard = CallGuard::new(state);
        let future = self.inner.call(request);
        Box::pin(async move {
            let mut guard = guard;
            let response = future.await?;
            let (mut parts, body) = response.into_parts();
            fix_status(&mut parts.headers);
            if tonic::Status::from_header_map(&parts.headers)
                .is_some_and(|status| status.code() == tonic::Code::Unauthenticated)
            {
                guard.refused = true;
            }
            let body = tonic::body::Body::new(GuardedBody {
                inner: body,
                _guard: guard,
            });
            Ok(http::Response::from_parts(parts, body))
        })
    }
}

/// The longest status message sent.
const STATUS_MESSAGE_MAX: usize = 2048;

/// The transport answers a request over the size limit with OUT_OF_RANGE and
/// one that does not decode with INTERNAL; gRPC's cores answer the first with
/// RESOURCE_EXHAUSTED, and the second is the caller's error: INVALID_ARGUMENT.
/// Also cuts any status message past [`STATUS_MESSAGE_MAX`] bytes: clients
/// bound the header it travels in (tonic's resets the stream past 16 KiB),
/// and no message of the lead's needs more.
fn fix_status(headers: &mut http::HeaderMap) {
    let Some(status) = tonic::Status::from_header_map(headers) else {
        return;
    };
    if status.message().len() > STATUS_MESSAGE_MAX {
        let cut = tonic::Status::new(
            status.code(),
            mesh_core::limits::cut(status.message(), STATUS_MESSAGE_MAX),
        );
        if cut.add_header(headers).is_err() {
            tracing::debug!("could not cut a status message");
        }
        return fix_status(headers);
    }
    let code = match status.code() {
        tonic::Code::OutOfRange
            if status
                .message()
                .starts_with("Error, decoded message length too large") =>
        {
            tonic::Code::ResourceExhausted
        }
        tonic::Code::Internal
            if status
                .message()
                .starts_with("failed to decode Protobuf message") =>
        {
            tonic::Code::InvalidArgument
        }
        _ => return,
    };
    let fixed = tonic::Status::new(code, status.message());
    if fixed.add_header(headers).is_err() {
        tracing::debug!("could not rewrite a transport status");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_statuses_are_put_right_and_others_left_alone() {
        let fixed = |status: tonic::Status| {
            let mut headers = http::HeaderMap::new();
            status.add_header(&mut headers).expect("header");
            fix_status(&mut headers);
            tonic::Status::from_header_map(&headers).expect("status")
        };
        let big = fixed(tonic::Status::out_of_range(
            "Error, decoded message length too large: found 9 bytes",
        ));
        assert_eq!(big.code(), tonic::Code::ResourceExhausted);
        assert!(big.message().starts_with("Error, decoded message length"));
        let garbled = fixed(tonic::Status::internal(
            "failed to decode Protobuf message: invalid wire type",
        ));
        assert_eq!(garbled.code(), tonic::Code::InvalidArgument);
        let ours = fixed(tonic::Status::out_of_range("seq: 5 is past the newest"));
        assert_eq!(ours.code(), tonic::Code::OutOfRange);
        let long = fixed(tonic::Status::not_found("x".repeat(100_000)));
        assert_eq!(long.code(), tonic::Code::NotFound);
        assert!(
            long.message().len() <= STATUS_MESSAGE_MAX,
            "{}",
            long.message().len()
        );
        assert!(long.message().ends_with("[cut: 100000 bytes in all]"));
    }
}
