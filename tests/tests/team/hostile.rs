//! What a hostile peer can still try, over the wire against the real lead:
//! connections held without a token, one address taking every slot,
//! response streams whose client stops reading, pending requests without
//! end, a burst of joins past the rate.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use bytes::Bytes;
use mesh_tests::{within, Lead, Member};
use shared::pb;
use tokio::{io::AsyncWriteExt, net::TcpSocket};
use tokio_stream::StreamExt;
use tonic::Code;

/// An HTTP/2 connection to the lead from `source` (a loopback address),
/// its driver on a task of its own: the task ends when the connection does.
async fn h2_from(
    lead: &Lead,
    source: &str,
) -> Result<(h2::client::SendRequest<Bytes>, tokio::task::JoinHandle<()>), String> {
    let socket = TcpSocket::new_v4().map_err(|e| e.to_string())?;
    socket
        .bind(format!("{source}:0").parse().expect("address"))
        .map_err(|e| e.to_string())?;
    let stream = socket
        .connect(lead.addr.parse().expect("lead address"))
        .await
        .map_err(|e| e.to_string())?;
    let (send, connection) = h2::client::handshake(stream)
        .await
        .map_err(|e| e.to_string())?;
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok((send, driver))
}

/// An HTTP/2 connection to the lead whose streams get no flow-control
/// window (SETTINGS_INITIAL_WINDOW_SIZE 0): the lead can send them headers,
/// never data, nor the trailers that wait behind it.
async fn h2_no_window(lead: &Lead) -> h2::client::SendRequest<Bytes> {
    let stream = tokio::net::TcpStream::connect(&lead.addr)
        .await
        .expect("connect");
    let (send, connection) = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake(stream)
        .await
        .expect("handshake");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    send
}

/// Opens the server-streaming call `path` with `token` and an empty
/// request message; the response's body.
async fn open_stream(
    send: &h2::client::SendRequest<Bytes>,
    lead: &Lead,
    path: &str,
    token: &str,
) -> h2::RecvStream {
    let request = http::Request::post(format!("{}{path}", lead.url))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("authorization", format!("Bearer {token}"))
        .body(())
        .expect("request");
    let mut ready = send.clone().ready().await.expect("ready");
    let (response, mut body) = ready.send_request(request, false).expect("sent");
    body.send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), true)
        .expect("the request message");
    let response = within("the response's headers", response)
        .await
        .expect("a response");
    assert_eq!(response.status(), 200);
    response.into_body()
}

#[tokio::test]
async fn a_stream_whose_client_gives_no_window_is_reset_within_seconds() {
    let lead = Lead::start(&["--store", "memory"]).await;
    let send = h2_no_window(&lead).await;
    let bob = lead.join("bob").await;
    let mut watch = open_stream(
        &send,
        &lead,
        "/mesh.v1.Operator/Watch",
        &lead.operator_token,
    )
    .await;
    let mut inbox = open_stream(&send, &lead, "/mesh.v1.Lead/Inbox", &bob.token).await;
    // 4.7 MiB to bob, which the watcher sees too: both streams pass the
    // default --stream-max-bytes (4 MiB). The Watch is ended; the inbox
    // waits for its reader. Neither client can take a byte.
    let mut alice = lead.join("alice").await;
    let text = "w".repeat(4096);
    for i in 0..1_200 {
        alice
            .send("bob", &text, &format!("m{i}"))
            .await
            .expect("sent");
    }
    // bob's inbox is full and waits for its reader; a newer stream of his
    // replaces it, and it is ended.
    let mut again = bob
        .api
        .clone()
        .inbox(pb::InboxRequest { after_seq: 0 })
        .await
        .expect("a new inbox")
        .into_inner();
    let passed = std::time::Instant::now();
    // On the landed main neither was ever ended: their trailers waited
    // behind data no window admitted, for as long as the client liked.
    for (what, stream) in [("the Watch", &mut watch), ("bob's old Inbox", &mut inbox)] {
        let ended = within(&format!("{what} to be reset"), stream.data()).await;
        match ended {
            Some(Err(e)) => assert_eq!(e.reason(), Some(h2::Reason::CANCEL), "{what}: {e:?}"),
            other => panic!("{what}: not reset: {other:?}"),
        }
        println!("{what} was reset {:?} after it was ended", passed.elapsed());
    }
    // Nothing of bob's is lost: the new stream has it all, from the first.
    let first = within("bob's first envelope", again.next())
        .await
        .expect("not ended")
        .expect("an envelope");
    assert_eq!(first.seq, 1);
}

/// One unary gRPC call of `Operator.ListTeam` with `token`; its
/// `grpc-status`.
async fn list_team(
    send: &mut h2::client::SendRequest<Bytes>,
    lead: &Lead,
    token: &str,
) -> Result<String, h2::Error> {
    let request = http::Request::post(format!("{}/mesh.v1.Operator/ListTeam", lead.url))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("authorization", format!("Bearer {token}"))
        .body(())
        .expect("request");
    let mut ready = send.clone().ready().await?;
    let (response, mut body) = ready.send_request(request, false)?;
    // An empty ListTeamRequest: no compression, length 0.
    body.send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), true)?;
    let response = response.await?;
    let (parts, mut data) = response.into_parts();
    if let Some(status) = parts.headers.get("grpc-status") {
        return Ok(status.to_str().unwrap_or("?").to_owned());
    }
    while let Some(chunk) = data.data().await {
        let chunk = chunk?;
        let _ = data.flow_control().release_capacity(chunk.len());
    }
    let trailers = data.trailers().await?.unwrap_or_default();
    Ok(trailers
        .get("grpc-status")
        .and_then(|s| s.to_str().ok())
        .unwrap_or("?")
        .to_owned())
}

#[tokio::test]
async fn a_connection_whose_every_call_is_refused_is_closed_when_idle() {
    let lead = Lead::start(&["--idle-timeout", "1", "--keepalive", "30"]).await;
    let (mut send, driver) = h2_from(&lead, "127.0.0.1").await.expect("connect");
    // A call every 200 ms, each refused: on today's main every refusal
    // restarted the idle clock, and the connection stayed for good.
    let mut pace = tokio::time::interval(Duration::from_millis(200));
    let calls = async {
        let mut refused = 0;
        loop {
            pace.tick().await;
            match list_team(&mut send, &lead, "not-a-token").await {
                Ok(status) => {
                    assert_eq!(status, "16", "UNAUTHENTICATED");
                    refused += 1;
                }
                Err(_) => return refused,
            }
        }
    };
    within("the lead to close a connection without a token", async {
        tokio::select! {
            // About five calls fit in the second before the close; far
            // fewer would mean it closed for another cause.
            refused = calls => assert!(refused >= 3, "closed after {refused} calls, before --idle-timeout"),
            _ = driver => {}
        }
    })
    .await;
}

#[tokio::test]
async fn one_address_cannot_take_every_connection_slot() {
    // The probe's attack: 300 connections from one address against a lead
    // with 300 slots, each speaking HTTP/2 and holding on. On today's main
    // they took every slot and every real call was refused.
    let lead = Lead::start(&["--max-connections", "300", "--keepalive", "30"]).await;
    let mut held = Vec::new();
    for _ in 0..300 {
        let mut socket = tokio::net::TcpStream::connect(&lead.addr)
            .await
            .expect("connect");
        let _ = socket
            .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
            .await;
        held.push(socket);
    }
    // Another address still gets in, and a real call is answered.
    let (mut send, _driver) = within("a connection from 127.0.0.2", h2_from(&lead, "127.0.0.2"))
        .await
        .expect("127.0.0.2 connects");
    let status = within(
        "a real call from another address",
        list_team(&mut send, &lead, &lead.operator_token),
    )
    .await
    .expect("answered");
    assert_eq!(status, "0", "OK");
    // And 127.0.0.1 holds no more than --max-connections-per-address.
    let mut open = 0;
    for mut socket in held {
        let mut buf = [0u8; 64];
        let closed = within("each held socket's fate", async {
            match tokio::io::AsyncReadExt::read(&mut socket, &mut buf).await {
                Ok(0) | Err(_) => true,
                // The lead's SETTINGS: this one is open.
                Ok(_) => false,
            }
        })
        .await;
        if !closed {
            open += 1;
        }
    }
    assert_eq!(
        open, 256,
        "the default --max-connections-per-address from one address, the rest closed on accept"
    );
}

/// An operator client on a channel of its own with small HTTP/2 windows, so
/// that a stream it does not read stops the lead from sending at once.
async fn small_window_channel(lead: &Lead) -> tonic::transport::Channel {
    within(
        "connecting",
        lead.tls
            .endpoint(&lead.url)
            .expect("endpoint")
            .initial_stream_window_size(Some(64 * 1024))
            .initial_connection_window_size(Some(64 * 1024))
            .connect(),
    )
    .await
    .expect("connect")
}

#[tokio::test]
async fn a_watcher_that_stops_reading_is_ended_and_the_lead_holds_little() {
    // The default --stream-max-bytes.
    const BUDGET: usize = 4 * 1024 * 1024;
    let lead = Lead::start(&["--store", "memory"]).await;
    let mut watcher = pb::operator_client::OperatorClient::with_interceptor(
        small_window_channel(&lead).await,
        shared::auth::BearerToken::new(&lead.operator_token).expect("token"),
    );
    let mut events = watcher
        .watch(pb::WatchRequest::default())
        .await
        .expect("watch")
        .into_inner();
    // 16 MiB of events while the watcher reads nothing. On today's main the
    // lead held them all for it (up to 16,384 events, whatever their size).
    let mut alice = lead.join("alice").await;
    let text = "x".repeat(4096);
    for i in 0..4_000 {
        alice
            .send("lead", &text, &format!("m{i}"))
            .await
            .expect("sent");
    }
    // Now it reads: what the lead held for it, then the end: the
    // RESOURCE_EXHAUSTED naming the flag if it came back to read in time,
    // else the reset (CANCELLED) of a stream that took nothing for two
    // seconds after it was ended.
    let mut bytes = 0;
    let status = within("the watcher's stream to end", async {
        loop {
            match events.next().await {
                Some(Ok(event)) => bytes += prost_len(&event),
                Some(Err(status)) => return status,
                None => panic!("the stream ended without a status after {bytes} bytes"),
            }
        }
    })
    .await;
    match status.code() {
        Code::ResourceExhausted => assert!(
            status.message().contains("--stream-max-bytes"),
            "{status:?}"
        ),
        Code::Cancelled => println!("the watcher's stream was reset: {status:?}"),
        _ => panic!("{status:?}"),
    }
    // The budget, what the client's window and the transport's buffer took,
    // and some room: far from the 16 MiB sent.
    assert!(
        bytes < BUDGET + 1024 * 1024,
        "the watcher got {bytes} bytes before its end"
    );
}

fn prost_len(event: &pb::Event) -> usize {
    prost::Message::encoded_len(event)
}

/// The lead's resident memory, in KiB.
fn rss_kib(lead: &Lead) -> u64 {
    let pid = lead.child.id().expect("running");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

#[tokio::test]
async fn an_inbox_whose_reader_stops_holds_its_budget_and_loses_nothing() {
    // The last stream holds at most the default --stream-max-bytes (4 MiB).
    let lead = Lead::start(&["--store", "memory"]).await;
    let mut alice = lead.join("alice").await;
    let bob = lead.join("bob").await;
    let text = "y".repeat(4096);
    // 12 MiB for bob.
    for i in 0..3_000 {
        alice
            .send("bob", &text, &format!("m{i}"))
            .await
            .expect("sent");
    }
    let before = rss_kib(&lead);
    // Bob opens his inbox eight times and reads none of them: each new
    // stream replaces the last. On today's main each one kept its copy of
    // the whole inbox (96 MiB) until its client read or went away.
    let channel = small_window_channel(&lead).await;
    let mut api = pb::lead_client::LeadClient::with_interceptor(
        channel,
        shared::auth::BearerToken::new(&bob.token).expect("token"),
    );
    let mut streams = Vec::new();
    for _ in 0..8 {
        streams.push(
            api.inbox(pb::InboxRequest { after_seq: 0 })
                .await
                .expect("inbox")
                .into_inner(),
        );
    }
    // A call answered after the last Inbox: the hub has filled its stream.
    let mut operator = lead.operator().await;
    operator
        .list_team(pb::ListTeamRequest::default())
        .await
        .expect("listed");
    let grown_mib = rss_kib(&lead).saturating_sub(before) / 1024;
    println!("the lead grew {grown_mib} MiB holding eight unread inbox streams");
    assert!(
        grown_mib < 24,
        "eight unread streams of a 12 MiB inbox grew the lead {grown_mib} MiB"
    );
    // The last stream delivers everything, in order, as it is read: the
    // lead feeds it as the reader takes what it holds.
    let mut last = streams.pop().expect("a stream");
    drop(streams);
    let mut seq = 0;
    within("every envelope on the last stream", async {
        while seq < 3_000 {
            let envelope = last.next().await.expect("not ended").expect("an envelope");
            assert_eq!(envelope.seq, seq + 1, "in order, without a gap");
            seq = envelope.seq;
        }
    })
    .await;
}

/// A plan of `size` bytes of body.
fn plan(summary: &str, size: usize) -> pb::Plan {
    pb::Plan {
        summary: summary.into(),
        body: "p".repeat(size),
        ..Default::default()
    }
}

async fn submit(
    member: &mut Member,
    request_id: &str,
    plan: pb::Plan,
    supersedes: &str,
) -> Result<String, tonic::Status> {
    member
        .api
        .submit_plan(pb::PlanApprovalRequest {
            request_id: request_id.into(),
            plan: Some(plan),
            supersedes: supersedes.into(),
        })
        .await
        .map(|r| r.into_inner().request_id)
}

#[tokio::test]
async fn pending_requests_are_bounded_per_member_and_in_all_in_count_and_bytes() {
    let lead = Lead::start(&[
        "--pending-max-per-member",
        "3",
        "--pending-max-bytes-per-member",
        "150000",
        "--pending-max",
        "5",
        "--pending-max-bytes",
        "250000",
    ])
    .await;
    let id = |n: u128| uuid::Uuid::from_u128(n).to_string();
    let mut alice = lead.join("alice").await;
    for n in 1..=3 {
        submit(&mut alice, &id(n), plan(&format!("plan {n}"), 10), "")
            .await
            .expect("within the budget");
    }
    let refused = submit(&mut alice, &id(4), plan("plan 4", 10), "")
        .await
        .expect_err("a fourth pending plan");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused.message().contains("--pending-max-per-member 3"),
        "{refused:?}"
    );
    // A retry of an open request is answered, and a revision that
    // supersedes a pending plan takes its place rather than counting twice.
    assert_eq!(
        submit(&mut alice, &id(3), plan("plan 3", 10), "")
            .await
            .expect("a retry"),
        id(3)
    );
    submit(&mut alice, &id(5), plan("plan 3, revised", 10), &id(3))
        .await
        .expect("a revision in place of a pending plan");

    // Bytes, per member: bob's third 60 KB plan would pass 150,000.
    let mut bob = lead.join("bob").await;
    for n in 11..=12 {
        submit(&mut bob, &id(n), plan("big", 60_000), "")
            .await
            .expect("within the budget");
    }
    let refused = submit(&mut bob, &id(13), plan("big", 60_000), "")
        .await
        .expect_err("past the bytes");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused
            .message()
            .contains("--pending-max-bytes-per-member 150000"),
        "{refused:?}"
    );

    // In all: alice holds 3, bob 2; carol's first is the sixth.
    let mut carol = lead.join("carol").await;
    let refused = submit(&mut carol, &id(21), plan("small", 10), "")
        .await
        .expect_err("past the total");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("--pending-max 5"), "{refused:?}");

    // An answer makes room.
    let mut operator = lead.operator().await;
    operator
        .review_plan(pb::PlanReview {
            request_id: id(1),
            approve: false,
            feedback: "no".into(),
            ..Default::default()
        })
        .await
        .expect("rejected");
    submit(&mut carol, &id(21), plan("small", 10), "")
        .await
        .expect("room again");
}

#[tokio::test]
async fn the_join_burst_follows_a_low_join_rate() {
    // --join-rate 2 with no --join-burst: ten at once (five seconds' worth),
    // where today's main let a thousand through.
    let lead = Lead::start(&["--join-rate", "2"]).await;
    let mut joiner = lead.lead_api(&lead.join_token).await;
    let mut admitted = 0;
    let mut refusal = None;
    for i in 0..20 {
        match joiner
            .join(pb::JoinRequest {
                name: format!("m{i}"),
                role: "tester".into(),
                ..Default::default()
            })
            .await
        {
            Ok(_) => admitted += 1,
            Err(status) => {
                refusal = Some(status);
                break;
            }
        }
    }
    let refusal = refusal.expect("a join past the burst is refused");
    assert_eq!(refusal.code(), Code::ResourceExhausted, "{refusal:?}");
    assert!(refusal.message().contains("--join-burst 10"), "{refusal:?}");
    assert!(
        (10..=11).contains(&admitted),
        "{admitted} joins admitted at once"
    );
}

#[tokio::test]
async fn resolved_requests_kept_for_the_record_are_bounded_in_bytes() {
    // A member that revises its plan again and again leaves a superseded
    // (expired) plan behind each time; on today's main every one was kept
    // for --retention (a day), whatever their number.
    let lead = Lead::start(&["--retained-max-bytes", "300000"]).await;
    let id = |n: u128| uuid::Uuid::from_u128(n).to_string();
    let mut alice = lead.join("alice").await;
    let mut last = String::new();
    for n in 1..=20 {
        submit(&mut alice, &id(n), plan("revised", 60_000), &last)
            .await
            .expect("a revision");
        last = id(n);
    }
    let operator = lead.operator().await;
    let get = |request_id: String| {
        let mut operator = operator.clone();
        async move {
            operator
                .get_request(pb::GetRequestRequest { request_id })
                .await
        }
    };
    // The sweep (every second) forgets the oldest first.
    within("the oldest superseded plan to be forgotten", async {
        loop {
            match get(id(1)).await {
                Err(status) if status.code() == Code::NotFound => return,
                Ok(_) => tokio::task::yield_now().await,
                Err(status) => panic!("{status:?}"),
            }
        }
    })
    .await;
    // What is kept: the newest superseded plans, within the bytes, and the
    // pending one.
    let pending = get(id(20)).await.expect("the pending plan").into_inner();
    assert_eq!(pending.status, pb::RequestStatus::Pending as i32);
    get(id(19))
        .await
        .expect("the newest superseded plan is kept");
    let mut kept = 0;
    for n in 1..20 {
        if get(id(n)).await.is_ok() {
            kept += 1;
        }
    }
    assert!((1..=5).contains(&kept), "{kept} superseded plans kept");
}

#[tokio::test]
async fn a_console_event_stream_that_stops_reading_is_ended_too() {
    // The default --stream-max-bytes.
    const BUDGET: usize = 4 * 1024 * 1024;
    let lead = Lead::start(&["--store", "memory"]).await;
    let console = lead.console.clone().expect("a console");
    let host = console
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    // A client with a small receive buffer, so that what it does not read
    // stays with the lead rather than in this host's socket buffers.
    let socket = TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
    let mut stream = socket
        .connect(host.parse().expect("console address"))
        .await
        .expect("connect");
    stream
        .write_all(
            format!(
                "GET /api/events HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {}\r\n\r\n",
                lead.operator_token
            )
            .as_bytes(),
        )
        .await
        .expect("request");
    // The events stream is open once the hub answers a later call.
    let mut alice = lead.join("alice").await;
    let text = "z".repeat(4096);
    // 24 MiB of events while the console reads nothing. On today's main
    // the lead held up to 16,384 events for it, whatever their size.
    for i in 0..6_000 {
        alice
            .send("lead", &text, &format!("m{i}"))
            .await
            .expect("sent");
    }
    // Now it reads: what the lead held, then the end: the connection
    // closes, whether the error event came first (it read in time) or the
    // lead closed it, after --stream-max-bytes and two seconds in which the
    // client took nothing. On the landed main the connection stayed open,
    // and a client that never read kept it for as long as it liked.
    let mut body = Vec::new();
    within("the console's connection to close", async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match tokio::io::AsyncReadExt::read(&mut stream, &mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => body.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    let text = String::from_utf8_lossy(&body);
    println!(
        "the console's stream ended {} the error event naming --stream-max-bytes",
        if text.contains("--stream-max-bytes") {
            "with"
        } else {
            "(closed by the lead) without"
        }
    );
    // The budget counts events as the lead holds them; the console sends
    // them as JSON (a little longer), and this host's socket buffers take
    // some: still far from the 24 MiB sent.
    println!("the console got {} bytes before its end", body.len());
    assert!(
        body.len() < 2 * BUDGET + 2 * 1024 * 1024,
        "the console got {} bytes before its end",
        body.len()
    );
}
