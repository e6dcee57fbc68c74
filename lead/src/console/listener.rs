//! The console's listener: connections accepted within the port's limits
//! (and with TLS, if it is on), handed to axum.

use tokio::sync::mpsc;

use crate::connections::{Conn, ConnInfo};

/// The console's connections, accepted within the port's limits (and with
/// TLS, if it is on) by [`crate::connections::incoming`].
#[derive(Debug)]
pub(crate) struct Accepted {
    connections: mpsc::Receiver<std::io::Result<Conn>>,
    addr: std::net::SocketAddr,
}

impl Accepted {
    /// Connections from `connections`, for a listener bound to `addr`.
    pub(crate) fn new(
        connections: mpsc::Receiver<std::io::Result<Conn>>,
        addr: std::net::SocketAddr,
    ) -> Self {
        Self { connections, addr }
    }
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, Accepted>>
    for ConnInfo
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, Accepted>) -> Self {
        tonic::transport::server::Connected::connect_info(stream.io())
    }
}

impl axum::serve::Listener for Accepted {
    type Io = Conn;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Conn, std::net::SocketAddr) {
        loop {
            match self.connections.recv().await {
                Some(Ok(conn)) => return (conn, self.addr),
                Some(Err(e)) => tracing::debug!(error = %e, "console connection"),
                // The accepting task ended: nothing more will come.
                None => std::future::pending::<()>().await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        Ok(self.addr)
    }
}
