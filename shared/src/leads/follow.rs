//! [`Follow`]: the transport a client's calls go through, to whichever lead
//! is active. It keeps the channel to the lead it found. A call a standby
//! answered (UNAVAILABLE before any message: it did nothing) goes again to
//! the lead it names, a few times at most. A call that could not reach the
//! lead fails UNAVAILABLE (it may have been done: the caller retries it as
//! it always has, every call being safe to repeat with the ids it chose),
//! and the next call searches again.

use std::{
    net::SocketAddr,
    sync::Arc,
    task::{Context, Poll},
};

use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tonic::{
    body::Body,
    codegen::{http, BoxFuture, Service, StdError},
    transport::{Channel, Uri},
};

use super::{Candidate, Leads, NoLeader, LEADER_KEY};

/// The transport to the active lead among [`Leads`]; cheap to clone (the
/// clones share what they found).
#[derive(Debug, Clone)]
pub struct Follow {
    leads: Arc<Leads>,
    state: Arc<tokio::sync::Mutex<State>>,
}

/// What a [`Follow`] found.
#[derive(Debug, Default)]
struct State {
    /// The lead calls go to, and the channel to it; none until found, or
    /// after a call failed there.
    current: Option<(Candidate, Channel)>,
    /// Counts the leads found, so a failure forgets only the one it met.
    generation: u64,
    /// The lead to ask first in the next search: the last one found, or
    /// the one a standby named.
    first: Option<Candidate>,
}

impl Follow {
    /// Follows the active lead among `leads`, searching at the first call.
    pub fn new(leads: Leads) -> Self {
        Self {
            leads: Arc::new(leads),
            state: Arc::default(),
        }
    }

    /// Follows the active lead among `leads`, found now.
    pub async fn connect(leads: Leads) -> Result<Self, NoLeader> {
        let follow = Self::new(leads);
        follow.channel().await?;
        Ok(follow)
    }

    /// The channel to the active lead (searching for it if there is none)
    /// and the generation it belongs to.
    async fn channel(&self) -> Result<(u64, Channel), NoLeader> {
        let mut state = self.state.lock().await;
        if let Some((_, channel)) = &state.current {
            return Ok((state.generation, channel.clone()));
        }
        let (lead, channel) = self.leads.find(state.first.as_ref()).await?;
        if state.generation > 0 || self.leads.urls().len() > 1 {
            tracing::info!(lead = %lead, "talking to the active lead");
        }
        state.generation += 1;
        state.first = Some(lead.clone());
        state.current = Some((lead, channel.clone()));
        Ok((state.generation, channel))
    }

    /// Forgets the lead of `generation` (a call failed there), unless
    /// another was found since; `named`, a standby's word for where the
    /// active lead is, is asked first next.
    async fn forget(&self, generation: u64, named: Option<Candidate>) {
        let mut state = self.state.lock().await;
        if state.generation == generation {
            state.current = None;
            if named.is_some() {
                state.first = named;
            }
        }
    }
}

impl Service<http::Request<Body>> for Follow {
    type Response = http::Response<Body>;
    type Error = StdError;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Each call waits for its channel in its own future.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let follow = self.clone();
        Box::pin(async move {
            // Every call of the protocol sends one message: kept, so that a
            // call a standby answered (it did nothing) goes again to the
            // lead it names.
            let (parts, body) = request.into_parts();
            let body = http_body_util::BodyExt::collect(body).await?.to_bytes();
            let mut tries = 0;
            loop {
                tries += 1;
                let mut request =
                    http::Request::new(Body::new(http_body_util::Full::new(body.clone())));
                *request.method_mut() = parts.method.clone();
                *request.uri_mut() = parts.uri.clone();
                *request.version_mut() = parts.version;
                *request.headers_mut() = parts.headers.clone();
                let (generation, mut channel) = follow
                    .channel()
                    .await
                    .map_err(|e| Box::new(e.status()) as StdError)?;
                let sent = async {
                    std::future::poll_fn(|cx| channel.poll_ready(cx)).await?;
                    channel.call(request).await
                };
                match sent.await {
                    Ok(response) => match standby_answer(&response) {
                        Some(named) => {
                            follow.forget(generation, named).await;
                            if tries >= MOST_TRIES {
                                return Ok(response);
                            }
                        }
                        None => return Ok(response),
                    },
                    Err(e) => {
                        follow.forget(generation, None).await;
                        let status = tonic::Status::from_error(e.into());
                        return Err(Box::new(crate::transport::unreached(status)) as StdError);
                    }
                }
            }
        })
    }
}

/// How many leads a call is sent to when standbys answer it (each search
/// follows the one a standby names, and waits for one taking over).
const MOST_TRIES: u32 = 3;

/// Whether `response` is UNAVAILABLE before any message (what a standby
/// answers every call): then `Some`, with the lead it names, if it names one.
fn standby_answer(response: &http::Response<Body>) -> Option<Option<Candidate>> {
    let headers = response.headers();
    if headers.get("grpc-status")?.as_bytes() != b"14" {
        return None;
    }
    let named = headers
        .get(LEADER_KEY)
        .and_then(|url| url.to_str().ok())
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(Candidate::at_url);
    Some(named)
}

/// Dials one address, whatever the URL's host (one of the several a name
/// resolved to); TLS, set on the endpoint, still checks the URL's name.
#[derive(Debug, Clone, Copy)]
pub(super) struct Dial(pub(super) SocketAddr);

impl Service<Uri> for Dial {
    type Response = TokioIo<TcpStream>;
    type Error = std::io::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Uri) -> Self::Future {
        let addr = self.0;
        Box::pin(async move {
            let stream = TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            Ok(TokioIo::new(stream))
        })
    }
}
