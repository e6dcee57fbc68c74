//! A standby: it answers every gRPC call UNAVAILABLE, naming the active
//! lead in the `mesh-leader` metadata so a client moves there at once; its
//! console says it is a standby and links to the active lead's; it waits
//! for the lease (polling it, and woken when the active lead resigns).

use std::convert::Infallible;

use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::{conn::auto, graceful::GracefulShutdown},
};
use tokio::{net::TcpListener, sync::watch};

use super::{
    keeper::Keeper, Answering, Leading, Plan, Role, Standing, EPOCH_KEY, EXPIRES_KEY, LEADER_KEY,
    ROLE_KEY,
};
use crate::store::{Lease, Resignations, StoreError};

mod page;

/// Answers calls and page loads where `at` says until `stop` turns true;
/// then the connections it took are told to go (GOAWAY, or a closed
/// keep-alive) and it returns.
pub(super) async fn answer(
    at: &Answering<'_>,
    standing: watch::Receiver<Standing>,
    mut stop: watch::Receiver<bool>,
) {
    let graceful = GracefulShutdown::new();
    loop {
        let (accepted, speaks) = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => break,
            accepted = at.grpc.accept() => (accepted, Speaks::Grpc),
            accepted = accept(at.console) => (accepted, Speaks::Http1),
        };
        let Ok((stream, _)) = accepted else { continue };
        let _ = stream.set_nodelay(true);
        let standing = standing.clone();
        let service =
            hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
                let now = standing.borrow().clone();
                let answer = match speaks {
                    Speaks::Grpc => unavailable(&now).into_http::<tonic::body::Body>(),
                    Speaks::Http1 => page::answer(request.uri().path(), &now),
                };
                async move { Ok::<_, Infallible>(answer) }
            });
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder = match speaks {
            Speaks::Grpc => builder.http2_only(),
            Speaks::Http1 => builder.http1_only(),
        };
        let tls = at.tls.map(|tls| match speaks {
            Speaks::Grpc => tls.grpc.clone(),
            Speaks::Http1 => tls.console.clone(),
        });
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            match tls {
                None => {
                    let connection = builder.serve_connection(TokioIo::new(stream), service);
                    let _ = watcher.watch(connection.into_owned()).await;
                }
                Some(tls) => {
                    let Ok(stream) = tls.accept(stream).await else {
                        return;
                    };
                    let connection = builder.serve_connection(TokioIo::new(stream), service);
                    let _ = watcher.watch(connection.into_owned()).await;
                }
            }
        });
    }
    // Told to go (GOAWAY), the callers move on; one that holds on is not
    // waited for long.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), graceful.shutdown()).await;
}

/// What a connection speaks.
#[derive(Debug, Clone, Copy)]
enum Speaks {
    Grpc,
    Http1,
}

/// The next connection on `console`; never, without one.
async fn accept(
    console: Option<&TcpListener>,
) -> std::io::Result<(tokio::net::TcpStream, std::net::SocketAddr)> {
    match console {
        Some(listener) => listener.accept().await,
        None => std::future::pending().await,
    }
}

/// What a standby answers: UNAVAILABLE, where the active lead is
/// (`mesh-leader`), and this lead's role and the lease's epoch and expiry.
fn unavailable(now: &Standing) -> tonic::Status {
    let leader = now.leader_url.as_str();
    let mut status = if leader.is_empty() {
        tonic::Status::unavailable(
            "this lead is a standby and no lead is active yet; try again shortly",
        )
    } else {
        tonic::Status::unavailable(format!(
            "this lead is a standby; the active lead is at {leader} (metadata {LEADER_KEY})"
        ))
    };
    let metadata = status.metadata_mut();
    if !leader.is_empty() {
        if let Ok(value) = leader.parse() {
            metadata.insert(LEADER_KEY, value);
        }
    }
    metadata.insert(
        ROLE_KEY,
        tonic::metadata::MetadataValue::from_static("standby"),
    );
    metadata.insert(EPOCH_KEY, now.epoch.into());
    metadata.insert(EXPIRES_KEY, now.lease_expires_unix_ms.into());
    status
}

/// Connects to the database and waits for the lease, telling `standing`
/// who holds it meanwhile; `said` is the last thing said, to say each once.
pub(super) async fn wait_for_lease(
    plan: &Plan,
    standing: &watch::Sender<Standing>,
    said: &mut String,
) -> Result<Leading, StoreError> {
    let lease = Lease::connect(&plan.target, &plan.holder, &plan.url, plan.ttl)
        .await?
        .with_console(&plan.console);
    let mut resignations = Resignations::listen(&plan.target).await?;
    loop {
        if let Some(epoch) = lease.try_acquire().await? {
            return took(plan, lease, epoch, standing).await;
        }
        let now = lease.leader().await?;
        seen(standing, &now);
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

/// One look at the lease, before this lead says it listens: `Some` when it
/// was free and this lead took it; `None` when another lead holds it
/// (`standing` says which) or the database cannot be reached yet.
pub(super) async fn first_look(plan: &Plan, standing: &watch::Sender<Standing>) -> Option<Leading> {
    let lease = Lease::connect(&plan.target, &plan.holder, &plan.url, plan.ttl)
        .await
        .ok()?
        .with_console(&plan.console);
    match lease.try_acquire().await {
        Ok(Some(epoch)) => took(plan, lease, epoch, standing).await.ok(),
        _ => {
            if let Ok(now) = lease.leader().await {
                seen(standing, &now);
            }
            None
        }
    }
}

/// The lease, taken at `epoch` on `lease`: what this lead says of itself
/// now.
async fn took(
    plan: &Plan,
    lease: Lease,
    epoch: i64,
    standing: &watch::Sender<Standing>,
) -> Result<Leading, StoreError> {
    let held = lease.leader().await?;
    standing.send_modify(|s| {
        s.role = Role::Active;
        s.epoch = epoch;
        s.lease_expires_unix_ms = held.expires_unix_ms;
        s.leader_url.clone_from(&plan.url);
        s.leader_console.clone_from(&plan.console);
    });
    // The keeper renews on a connection of its own; this one goes.
    drop(lease);
    let keeper = Keeper::start(plan.clone(), epoch, standing.clone())
        .map_err(|e| StoreError::Postgres(format!("cannot start the lease keeper: {e}")))?;
    Ok(Leading {
        plan: plan.clone(),
        epoch,
        keeper,
        standing: standing.clone(),
    })
}

/// A standby's standing, once it saw `now` hold the lease.
fn seen(standing: &watch::Sender<Standing>, now: &crate::store::Leader) {
    standing.send_if_modified(|s| {
        let seen = Standing {
            role: Role::Standby,
            epoch: now.epoch,
            lease_expires_unix_ms: now.expires_unix_ms,
            leader_url: now.url.clone(),
            leader_console: now.console.clone(),
            ..s.clone()
        };
        let changed = *s != seen;
        *s = seen;
        changed
    });
}
