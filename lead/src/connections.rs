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
    io,
    sync::Arc,
    time::{Duration, Instant},
};

use tokio::{
    net::TcpListener,
    sync::{mpsc, Semaphore},
};
use tokio_rustls::TlsAcceptor;

mod address;
mod calls;
mod conn;
mod stream;

use address::{PerAddress, Slot};
pub use calls::{Calls, CallsLayer};
pub use conn::{Conn, ConnInfo, ConnState};
pub use stream::Io;

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
/// `tls` is given, on a task of its own; they arrive on the receiver. The
/// listener is shared: once the receiver is dropped the task stops
/// accepting, and whoever serves next (a lead that stepped down, standing
/// by) accepts from the same socket.
pub fn incoming(
    listener: Arc<TcpListener>,
    limits: ConnLimits,
    tls: Option<TlsAcceptor>,
    speaks: Speaks,
) -> mpsc::Receiver<io::Result<Conn>> {
    let permits = Arc::new(Semaphore::new(limits.max));
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(accept_loop(listener, permits, limits, tls, speaks, tx));
    rx
}

/// Accepts connections while the server takes them (until the receiver is
/// dropped); a connection past the
/// cap is closed at once. Errors accepting one connection (the peer reset
/// it, the process is out of descriptors) are logged and skipped.
async fn accept_loop(
    listener: Arc<TcpListener>,
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
        // Once the server takes no more, this stops accepting at once: a
        // connection accepted now would only be reset, where in the backlog
        // it waits for whoever accepts next (the same lead, stepped down and
        // standing by).
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = tx.closed() => return,
        };
        let (stream, peer) = match accepted {
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
