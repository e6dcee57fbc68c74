//! A TCP proxy that cuts every connection after a random short life, between
//! the lead and 20 teammates that exchange 500 messages each. Senders retry a
//! failed `Send` with the same `message_id`; receivers resume their inbox from
//! the last envelope they processed and skip ids they have seen. Every
//! message must be processed exactly once, in order per sender.

#![allow(clippy::unwrap_used)]

use std::{
    net::SocketAddr,
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use mesh_tests::{Lead, LeadApi};
use shared::{
    auth::BearerToken,
    pb::{self, envelope::Body, lead_client::LeadClient},
};
use tokio::{net::TcpListener, task::JoinSet};
use tonic::transport::{Channel, Endpoint};

const TEAMMATES: usize = 20;
const MESSAGES: usize = 500;

/// A small deterministic generator (xorshift), so a failing run can be replayed.
struct Rng(AtomicU64);

impl Rng {
    fn next(&self, below: u64) -> u64 {
        let mut x = self.0.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0.store(x, Ordering::Relaxed);
        x % below
    }
}

/// Forwards connections to `target`, cutting each after 20-250 ms.
async fn cutting_proxy(
    target: SocketAddr,
    seed: u64,
    tasks: &mut JoinSet<()>,
) -> (SocketAddr, std::sync::Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cuts = std::sync::Arc::new(AtomicU64::new(0));
    let counter = cuts.clone();
    tasks.spawn(async move {
        let rng = Rng(AtomicU64::new(seed | 1));
        let mut connections = JoinSet::new();
        while let Ok((mut client, _)) = listener.accept().await {
            let life = Duration::from_millis(20 + rng.next(230));
            let counter = counter.clone();
            connections.spawn(async move {
                let Ok(mut upstream) = tokio::net::TcpStream::connect(target).await else {
                    return;
                };
                let copied = tokio::time::timeout(
                    life,
                    tokio::io::copy_bidirectional(&mut client, &mut upstream),
                )
                .await;
                if copied.is_err() {
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    (addr, cuts)
}

/// A client whose channel goes through the proxy.
fn client(proxy: SocketAddr, token: &str) -> LeadApi {
    let channel: Channel = Endpoint::from_shared(format!("http://{proxy}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(5))
        .connect_lazy();
    LeadClient::with_interceptor(channel, BearerToken::new(token).unwrap())
}

/// Sends `MESSAGES` texts to `to`, retrying each with its own id until it lands.
async fn send_all(mut api: LeadApi, from: usize, to: String) -> u64 {
    let mut retries = 0;
    for k in 0..MESSAGES {
        let message_id = format!("00000000-0000-4000-8000-{from:06}{k:06}");
        let request = pb::SendRequest {
            to: to.clone(),
            text: Some(pb::Text {
                content: format!("{from}:{k}"),
            }),
            message_id,
        };
        loop {
            match api.send(request.clone()).await {
                Ok(_) => break,
                Err(status) => {
                    assert!(
                        matches!(
                            status.code(),
                            tonic::Code::Unavailable
                                | tonic::Code::Unknown
                                | tonic::Code::Cancelled
                                | tonic::Code::DeadlineExceeded
                        ),
                        "a cut connection, not a refusal: {status:?}"
                    );
                    retries += 1;
                    tokio::time::sleep(Duration::from_millis(5)).await; // backoff between retries, not synchronisation
                }
            }
        }
    }
    retries
}

/// Reads `MESSAGES` texts from `from`, resuming after every cut; returns how
/// many redeliveries it skipped.
async fn receive_all(mut api: LeadApi, from: usize) -> u64 {
    let mut last_seq = 0;
    let mut seen = std::collections::HashSet::new();
    let mut next = 0;
    let mut skipped = 0;
    while next < MESSAGES {
        let Ok(stream) = api
            .inbox(pb::InboxRequest {
                after_seq: last_seq,
            })
            .await
        else {
            tokio::time::sleep(Duration::from_millis(5)).await; // backoff before reconnecting
            continue;
        };
        let mut stream = stream.into_inner();
        while let Ok(Some(envelope)) = stream.message().await {
            if !seen.insert(envelope.message_id.clone()) {
                // A redelivery after a resume carries a seq already processed;
                // a second delivery of a retried send would carry a new one.
                assert!(
                    envelope.seq <= last_seq,
                    "the lead delivered {} twice",
                    envelope.message_id
                );
                skipped += 1;
                continue;
            }
            let Some(Body::Text(text)) = envelope.body else {
                panic!("unexpected {envelope:?}")
            };
            assert_eq!(
                text.content,
                format!("{from}:{next}"),
                "in order, each once"
            );
            next += 1;
            last_seq = envelope.seq;
            if next % 50 == 0 || next == MESSAGES {
                let _ = api.ack(pb::AckRequest { seq: last_seq }).await;
            }
            if next == MESSAGES {
                break;
            }
        }
    }
    skipped
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_is_processed_exactly_once_in_order_through_a_cutting_proxy() {
    let lead = Lead::start(&[]).await;
    let seed = u64::from(uuid::Uuid::new_v4().as_u128() as u32);
    println!("proxy seed {seed}");
    let mut tasks = JoinSet::new();
    let (proxy, cuts) = cutting_proxy(lead.addr.parse().unwrap(), seed, &mut tasks).await;

    let mut tokens = Vec::new();
    for i in 0..TEAMMATES {
        tokens.push(lead.join(&format!("t{i}")).await.token);
    }
    let mut work = JoinSet::new();
    for (i, token) in tokens.iter().enumerate() {
        let to = format!("t{}", (i + 1) % TEAMMATES);
        let sender = client(proxy, token);
        work.spawn(async move { (send_all(sender, i, to).await, 0) });
        let from = (i + TEAMMATES - 1) % TEAMMATES;
        let receiver = client(proxy, token);
        work.spawn(async move { (0, receive_all(receiver, from).await) });
    }
    let (mut retries, mut skipped) = (0, 0);
    let all = async {
        while let Some(result) = work.join_next().await {
            let (r, s) = result.unwrap();
            retries += r;
            skipped += s;
        }
    };
    tokio::time::timeout(Duration::from_secs(240), all)
        .await
        .expect("all messages within 4 minutes");
    println!(
        "{} messages; {} connections cut; {retries} sends retried; {skipped} redeliveries skipped",
        TEAMMATES * MESSAGES,
        cuts.load(Ordering::Relaxed)
    );
    assert!(
        cuts.load(Ordering::Relaxed) > 0,
        "the proxy cut connections"
    );
    tasks.abort_all();
}
