//! The lead's server: `mesh.v1.Lead`, `mesh.v1.Operator`, health and
//! reflection on one port, until a shutdown signal.

use std::{convert::Infallible, future::Future, net::SocketAddr, sync::Arc, time::Duration};

use hyper_util::{
    rt::{TokioIo, TokioTimer},
    server::{conn::auto, graceful::GracefulShutdown},
};
use shared::pb;
use tokio::{
    net::TcpListener,
    sync::{mpsc, oneshot, watch},
};
use tonic::{body::Body, service::Routes, transport::server::Connected};
use tower_service::Service;

use crate::{
    config::Config,
    connections::{self, Calls, CallsLayer, Conn, Speaks},
    hub::{self, HubFailure},
    service::{LeadService, OperatorService},
    store::StoreError,
    tls::ServerTls,
};
pub use crate::{config::Keepalive, connections::ConnLimits};

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

/// Calls one connection may have in progress at once (HTTP/2
/// `SETTINGS_MAX_CONCURRENT_STREAMS`); a teammate needs two or three.
const MAX_STREAMS_PER_CONNECTION: u32 = 256;

/// The connection cap that fits this process: `wanted`, lowered (with a
/// warning) to what the descriptor limit allows once raised to its hard limit.
pub fn connection_cap(flag: &str, wanted: usize) -> anyhow::Result<usize> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if wanted == 0 {
        anyhow::bail!("{flag}: must be at least 1");
    }
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if soft < hard {
        // More descriptors for connections, up to what the system allows.
        if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            tracing::warn!(error = %e, "cannot raise the descriptor limit");
        }
    }
    let (soft, _) = getrlimit(Resource::RLIMIT_NOFILE)?;
    // Room for the listener, the database, logs and children's pipes.
    let fits = usize::try_from(soft.saturating_sub(64))
        .unwrap_or(usize::MAX)
        .max(1);
    if wanted > fits {
        tracing::warn!(
            wanted,
            fits,
            "{flag} is more than the descriptor limit allows; using {fits}"
        );
        return Ok(fits);
    }
    Ok(wanted)
}

/// Why the server stopped other than by request.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The reflection service could not read the descriptor set.
    #[error("server reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// The console's listener failed.
    #[error("console: {0}")]
    Console(std::io::Error),
    /// The console's sign-in at the identity provider could not be set up.
    #[error("console: the sign-in at the identity provider: {0}")]
    SignIn(String),
    /// The state could not be loaded.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The hub stopped on a failure.
    #[error(transparent)]
    Hub(#[from] HubFailure),
    /// The HTTP client for A2A push notifications could not be made.
    #[error("--a2a-push-allow: the HTTP client for webhooks: {0}")]
    Push(#[from] reqwest::Error),
}

/// Where the lead listens.
#[derive(Debug, Clone)]
pub struct Listeners {
    /// gRPC (HTTP/2).
    pub grpc: Arc<TcpListener>,
    /// The web console (HTTP/1.1), if it is on.
    pub console: Option<Arc<TcpListener>>,
    /// TLS for both, if it is on.
    pub tls: Option<ServerTls>,
}

/// Serves on `listeners` until `shutdown` completes, saying how to stop:
/// for good (every child the lead started is asked to shut down and stopped
/// by signal if it does not in time; then every stream ends), or stepping
/// down (every stream ends UNAVAILABLE at once, the children keep running).
/// Then it returns once the connections are done.
pub async fn run(
    listeners: Listeners,
    config: Config,
    shutdown: impl Future<Output = hub::Stop>,
) -> Result<(), ServeError> {
    let Config {
        hub: hub_config,
        store,
        tokens,
        keepalive,
        connections,
        standing,
        a2a_card,
        a2a_push_allow,
        console_sign_in,
    } = config;
    let repo = hub_config.repo.clone();
    let card = std::sync::Arc::new(crate::a2a::card::CardBase {
        lead_url: standing.borrow().url.clone(),
        open: tokens.a2a_open.is_some(),
        own: a2a_card,
        push: !a2a_push_allow.is_empty(),
    });
    let push = (!a2a_push_allow.is_empty())
        .then(|| crate::a2a::push::Push::new(&a2a_push_allow))
        .transpose()?;
    let (hub, commands) = hub::load(hub_config, store).await?;
    let (stop_tx, stop_rx) = watch::channel(None);
    let console_stop = stop_rx.clone();
    let (hub, hub_task) = hub::start(hub, commands, stop_rx);
    let Listeners {
        grpc: listener,
        console,
        tls,
    } = listeners;
    let a2a = crate::a2a::A2a::new(hub.clone(), tokens.clone(), push);
    if let Some(listener) = console {
        // The adapters on the console's port, side by side.
        let app =
            crate::console::router(hub.clone(), tokens.clone(), tls.is_some(), console_sign_in)
                .map_err(ServeError::SignIn)?
                .merge(crate::a2a::card::router(card, hub.clone(), tls.is_some()))
                .merge(crate::a2a::jsonrpc::router(a2a.clone()))
                .merge(crate::a2a::rest::router(a2a.clone()));
        serve_console(listener, app, connections, tls.as_ref(), console_stop)?;
    }
    let (ended_tx, ended_rx) = oneshot::channel::<Result<(), HubFailure>>();
    tokio::spawn(async move {
        let result = hub_task.await.unwrap_or(Ok(()));
        let _ = ended_tx.send(result);
    });

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
        .register_encoded_file_descriptor_set(mesh_a2a::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;

    let lead = LeadService {
        hub: hub.clone(),
        tokens: tokens.clone(),
        repo: repo.clone(),
    };
    let operator = OperatorService {
        hub,
        tokens,
        standing,
    };
    let incoming =
        connections::incoming(listener, connections, tls.map(|tls| tls.grpc), Speaks::Grpc);
    let mut hub_result = Ok(());
    let signal = async {
        // The server keeps serving while the hub stops its children (they
        // answer over their open connections); it stops once the hub is done.
        let mut ended_rx = ended_rx;
        tokio::select! {
            stop = shutdown => {
                tracing::info!("shutting down");
                health
                    .set_not_serving::<pb::lead_server::LeadServer<LeadService>>()
                    .await;
                let _ = stop_tx.send(Some(stop));
                hub_result = (&mut ended_rx).await.unwrap_or(Ok(()));
            }
            result = &mut ended_rx => hub_result = result.unwrap_or(Ok(())),
        }
    };
    let routes = Routes::new(health_service)
        .add_service(reflection)
        .add_service(pb::lead_server::LeadServer::new(lead))
        .add_service(pb::operator_server::OperatorServer::new(operator))
        .add_service(mesh_a2a::pb::a2a_service_server::A2aServiceServer::new(a2a))
        .prepare();
    let calls = tower_layer::Layer::layer(&CallsLayer, routes);
    serve_grpc(incoming, calls, keepalive, signal).await;
    hub_result?;
    Ok(())
}

/// Serves `app` (the console and the adapters beside it) on `listener`, in
/// a task of its own, until `stop` says the lead stops.
fn serve_console(
    listener: Arc<TcpListener>,
    app: axum::Router,
    connections: ConnLimits,
    tls: Option<&ServerTls>,
    mut stop: watch::Receiver<Option<hub::Stop>>,
) -> Result<(), ServeError> {
    let stop = async move {
        let _ = stop.wait_for(Option::is_some).await;
    };
    let addr = listener.local_addr().map_err(ServeError::Console)?;
    let accepted = connections::incoming(
        listener,
        connections,
        tls.map(|tls| tls.console.clone()),
        Speaks::Http1,
    );
    let served = crate::console::serve(crate::console::Accepted::new(accepted, addr), app, stop);
    tokio::spawn(async move {
        if let Err(e) = served.await {
            tracing::error!(error = %e, "the console stopped");
        }
    });
    Ok(())
}

/// Serves gRPC on every connection `incoming` yields until `signal`
/// completes; then stops accepting and waits for the connections to finish
/// what they were doing. tonic's own server does this too, but runs each
/// HTTP/2 stream on an executor nobody else can reach; here each stream's
/// task can be reset ([`crate::reset`]), so that a stream whose client
/// stopped reading is ended with RST_STREAM.
async fn serve_grpc(
    mut incoming: mpsc::Receiver<std::io::Result<Conn>>,
    calls: Calls<Routes>,
    keepalive: Keepalive,
    signal: impl Future<Output = ()>,
) {
    let mut builder = auto::Builder::new(crate::reset::Executor).http2_only();
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(keepalive.interval)
        .keep_alive_timeout(keepalive.timeout)
        .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION);
    let graceful = GracefulShutdown::new();
    let mut signal = std::pin::pin!(signal);
    loop {
        let conn = tokio::select! {
            () = &mut signal => break,
            conn = incoming.recv() => conn,
        };
        let conn = match conn {
            Some(Ok(conn)) => conn,
            Some(Err(e)) => {
                tracing::debug!(error = %e, "a connection was not accepted");
                continue;
            }
            None => break,
        };
        let info = conn.connect_info();
        let calls = calls.clone();
        let service =
            hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
                let mut request = request.map(Body::new);
                request.extensions_mut().insert(info.clone());
                call(calls.clone(), request)
            });
        let connection = builder
            .serve_connection(TokioIo::new(conn), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "a connection ended");
            }
        });
    }
    // No more connections; those open finish their calls (the hub has
    // ended every stream by now).
    drop(incoming);
    graceful.shutdown().await;
}

/// One call, within the deadline its client set (`grpc-timeout`), as
/// tonic's server keeps it: past it, DEADLINE_EXCEEDED.
async fn call(
    mut calls: Calls<Routes>,
    request: http::Request<Body>,
) -> Result<http::Response<Body>, Infallible> {
    let deadline = grpc_timeout(request.headers());
    std::future::poll_fn(|cx| Service::<http::Request<Body>>::poll_ready(&mut calls, cx)).await?;
    let answer = calls.call(request);
    match deadline {
        None => answer.await,
        Some(deadline) => match tokio::time::timeout(deadline, answer).await {
            Ok(answered) => answered,
            Err(_) => Ok(tonic::Status::deadline_exceeded(
                "the call's deadline (grpc-timeout) passed before the lead answered",
            )
            .into_http()),
        },
    }
}

/// A call's `grpc-timeout`: up to 8 digits and a unit (H, M, S, m, u, n);
/// none if absent or malformed.
fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.to_str().ok()?;
    if !(2..=9).contains(&value.len()) || !value.is_ascii() {
        return None;
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_are_read_as_the_spec_writes_them() {
        let of = |v: &str| {
            let mut headers = http::HeaderMap::new();
            headers.insert("grpc-timeout", v.parse().expect("header"));
            grpc_timeout(&headers)
        };
        assert_eq!(of("100m"), Some(Duration::from_millis(100)));
        assert_eq!(of("2S"), Some(Duration::from_secs(2)));
        assert_eq!(of("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(of("99999999n"), Some(Duration::from_nanos(99_999_999)));
        for bad in ["", "m", "100", "100x", "123456789m", "-1S", "1.5S"] {
            assert_eq!(of(bad), None, "{bad:?}");
        }
        assert_eq!(grpc_timeout(&http::HeaderMap::new()), None);
    }
}
