//! The lead's server: `mesh.v1.Lead`, `mesh.v1.Operator`, health and
//! reflection on one port, until a shutdown signal.

use std::{future::Future, net::SocketAddr};

use shared::pb;
use tokio::{net::TcpListener, sync::watch};
use tonic::transport::{server::TcpIncoming, Server};

use crate::{
    hub::{self, HubConfig},
    service::{LeadService, OperatorService, Tokens},
};

/// How many connections may wait to be accepted. Tonic's `serve(addr)` uses
/// 128, which a thousand teammates connecting at once overflow.
const LISTEN_BACKLOG: u32 = 4096;

/// Binds `addr` with a listen backlog that suits a large team.
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Why the server stopped other than by request.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The reflection service could not read the descriptor set.
    #[error("server reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// The transport failed.
    #[error("transport: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// Serves on `listener` until `shutdown` completes; then ends every stream,
/// stops every child the lead started, and returns.
pub async fn run(
    listener: TcpListener,
    config: HubConfig,
    tokens: Tokens,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let (hub, hub_task) = hub::start(config, stop_rx);

    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<pb::lead_server::LeadServer<LeadService>>()
        .await;
    health
        .set_serving::<pb::operator_server::OperatorServer<OperatorService>>()
        .await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;

    let lead = LeadService {
        hub: hub.clone(),
        tokens: tokens.clone(),
    };
    let operator = OperatorService { hub, tokens };
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let signal = async {
        shutdown.await;
        tracing::info!("shutting down");
        health
            .set_not_serving::<pb::lead_server::LeadServer<LeadService>>()
            .await;
        // The hub ends every inbox and watch stream, so graceful shutdown can finish.
        let _ = stop_tx.send(true);
    };
    let served = Server::builder()
        .http2_keepalive_interval(Some(std::time::Duration::from_secs(10)))
        .http2_keepalive_timeout(Some(std::time::Duration::from_secs(10)))
        .add_service(health_service)
        .add_service(reflection)
        .add_service(pb::lead_server::LeadServer::new(lead))
        .add_service(pb::operator_server::OperatorServer::new(operator))
        .serve_with_incoming_shutdown(incoming, signal)
        .await;
    let _ = stop_tx.send(true);
    let _ = hub_task.await;
    served?;
    Ok(())
}
