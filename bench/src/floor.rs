//! The floor: a bare tonic unary echo and a bidirectional ping-pong, built
//! from the same dependency versions, served by a separate process.

use std::time::{Duration, Instant};

use tokio_stream::StreamExt;
use tonic::{transport::Channel, Request, Response, Status, Streaming};

use crate::stats::Samples;

pub(crate) mod pb {
    #![allow(
        missing_docs,
        unreachable_pub,
        missing_debug_implementations,
        clippy::all
    )]
    tonic::include_proto!("bench.v1");
}

/// The echo service.
#[derive(Debug, Default)]
struct Echo;

#[tonic::async_trait]
impl pb::echo_server::Echo for Echo {
    async fn unary(&self, request: Request<pb::Ping>) -> Result<Response<pb::Ping>, Status> {
        Ok(Response::new(request.into_inner()))
    }

    type PingPongStream =
        std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::Ping, Status>> + Send>>;

    async fn ping_pong(
        &self,
        request: Request<Streaming<pb::Ping>>,
    ) -> Result<Response<Self::PingPongStream>, Status> {
        let mut pings = request.into_inner();
        let pongs = async_stream(move |tx| async move {
            while let Some(Ok(ping)) = pings.next().await {
                if tx.send(Ok(ping)).await.is_err() {
                    break;
                }
            }
        });
        Ok(Response::new(Box::pin(pongs)))
    }
}

/// A stream fed by a task.
fn async_stream<F, Fut>(body: F) -> tokio_stream::wrappers::ReceiverStream<Result<pb::Ping, Status>>
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<pb::Ping, Status>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(body(tx));
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// `bench floor-server`: serves the echo on a free port, with the same
/// listener settings as the lead, until killed.
pub(crate) async fn serve() -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("listening on {}", listener.local_addr()?);
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    tonic::transport::Server::builder()
        .add_service(pb::echo_server::EchoServer::new(Echo))
        .serve_with_incoming(incoming)
        .await?;
    Ok(())
}

/// `n` sequential unary echoes.
pub(crate) async fn unary(addr: &str, n: usize) -> anyhow::Result<Samples> {
    let channel = Channel::from_shared(format!("http://{addr}"))?
        .connect()
        .await?;
    let mut client = pb::echo_client::EchoClient::new(channel);
    let mut samples = Samples::with_capacity(n);
    for i in 0..n + n / 10 {
        let start = Instant::now();
        client
            .unary(pb::Ping {
                n: i as u64,
                payload: vec![0; 64],
            })
            .await?;
        if i >= n / 10 {
            samples.push(start.elapsed());
        }
    }
    Ok(samples)
}

/// `n` sequential ping-pongs on one bidirectional stream.
pub(crate) async fn ping_pong(addr: &str, n: usize) -> anyhow::Result<Samples> {
    let channel = Channel::from_shared(format!("http://{addr}"))?
        .connect()
        .await?;
    let mut client = pb::echo_client::EchoClient::new(channel);
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let mut pongs = client
        .ping_pong(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await?
        .into_inner();
    let mut samples = Samples::with_capacity(n);
    for i in 0..n + n / 10 {
        let start = Instant::now();
        tx.send(pb::Ping {
            n: i as u64,
            payload: vec![0; 64],
        })
        .await?;
        tokio::time::timeout(Duration::from_secs(10), pongs.next())
            .await?
            .ok_or_else(|| anyhow::anyhow!("stream ended"))??;
        if i >= n / 10 {
            samples.push(start.elapsed());
        }
    }
    Ok(samples)
}
