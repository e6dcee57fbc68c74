//! A standby: it answers every gRPC call UNAVAILABLE, naming the active
//! lead in the `mesh-leader` metadata so a client moves there at once, and
//! waits for the lease (polling it, and woken when the active lead resigns).

use std::convert::Infallible;

use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::{conn::auto, graceful::GracefulShutdown},
};
use tokio::{net::TcpListener, sync::watch};

use super::{Leading, Plan, LEADER_KEY};
use crate::store::{Lease, Resignations, StoreError};

/// Answers calls on `listener` until `stop` turns true; then the
/// connections it took are told to go (GOAWAY) and it returns.
pub(super) async fn answer(
    listener: &TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    leader: watch::Receiver<String>,
    mut stop: watch::Receiver<bool>,
) {
    let graceful = GracefulShutdown::new();
    loop {
        let accepted = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => break,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else { continue };
        let leader = leader.clone();
        let service = hyper::service::service_fn(move |_: http::Request<hyper::body::Incoming>| {
            let status = unavailable(&leader.borrow());
            async move { Ok::<_, Infallible>(status.into_http::<tonic::body::Body>()) }
        });
        let builder = auto::Builder::new(TokioExecutor::new()).http2_only();
        match &tls {
            None => {
                let connection = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .into_owned();
                let connection = graceful.watch(connection);
                tokio::spawn(async move {
                    let _ = connection.await;
                });
            }
            Some(tls) => {
                let tls = tls.clone();
                let watcher = graceful.watcher();
                tokio::spawn(async move {
                    let Ok(stream) = tls.accept(stream).await else {
                        return;
                    };
                    let connection = builder
                        .serve_connection(TokioIo::new(stream), service)
                        .into_owned();
                    let _ = watcher.watch(connection).await;
                });
            }
        }
    }
    // Told to go (GOAWAY), the callers move on; one that holds on is not
    // waited for long.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), graceful.shutdown()).await;
}

/// What a standby answers: UNAVAILABLE, and where the active lead is.
fn unavailable(leader: &str) -> tonic::Status {
    if leader.is_empty() {
        return tonic::Status::unavailable(
            "this lead is a standby and no lead is active yet; try again shortly",
        );
    }
    let mut status = tonic::Status::unavailable(format!(
        "this lead is a standby; the active lead is at {leader} (metadata {LEADER_KEY})"
    ));
    if let Ok(value) = leader.parse() {
        status.metadata_mut().insert(LEADER_KEY, value);
    }
    status
}

/// Connects to the database and waits for the lease, telling `leader` who
/// holds it meanwhile; `said` is the last thing said, to say each once.
pub(super) async fn wait_for_lease(
    plan: &Plan,
    leader: &watch::Sender<String>,
    said: &mut String,
) -> Result<Leading, StoreError> {
    let lease = Lease::connect(&plan.target, &plan.holder, &plan.url, plan.ttl).await?;
    let mut resignations = Resignations::listen(&plan.target).await?;
    loop {
        if let Some(epoch) = lease.try_acquire().await? {
            leader.send_replace(plan.url.clone());
            return Ok(Leading {
                plan: plan.clone(),
                lease: std::sync::Arc::new(lease),
                epoch,
            });
        }
        let now = lease.leader().await?;
        leader.send_if_modified(|url| {
            let changed = *url != now.url;
            url.clone_from(&now.url);
            changed
        });
        let line = format!(
            "standby: {} leads at {} (epoch {}); taking over if its lease lapses",
            now.holder, now.url, now.epoch
        );
        if *said != line {
            println!("{line}");
            said.clone_from(&line);
        }
        tokio::select! {
            () = tokio::time::sleep(plan.poll_every()) => {}
            woken = resignations.next() => {
                if woken.is_none() {
                    // The connection is gone: start over (and find out why).
                    return Err(StoreError::Postgres("the database connection closed".into()));
                }
            }
        }
    }
}
