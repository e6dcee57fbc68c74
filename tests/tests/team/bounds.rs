//! Bounded under abuse: what a hostile or broken peer can make the lead hold
//! or do, each finding of the probe over the wire with the real lead.

#![allow(clippy::unwrap_used)]

use std::{os::unix::fs::PermissionsExt, time::Duration};

use mesh_tests::{within, Events, Lead, Member};
use shared::pb::{self, envelope::Body};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Code;

/// `Send` of `content` from `from` to `to`.
async fn send(
    from: &mut Member,
    to: &str,
    content: &str,
    message_id: &str,
) -> Result<pb::SendResponse, tonic::Status> {
    from.send(to, content, message_id).await
}

/// The names a termination notice tells of.
fn terminated(envelope: &pb::Envelope) -> Vec<String> {
    match &envelope.body {
        Some(Body::TeammateTerminated(t)) => std::iter::once(t.name.clone())
            .chain(t.more.iter().map(|m| m.name.clone()))
            .collect(),
        _ => Vec::new(),
    }
}

/// Joins `n` members named `{prefix}{i}` that never open their inbox.
async fn join_silent(lead: &Lead, prefix: &str, n: usize) {
    // 16 joins in flight on one channel: the members join within a short
    // span, so that they end within one too, however busy the machine.
    let joiner = lead.lead_api(&lead.join_token).await;
    let mut joining: tokio::task::JoinSet<Result<(), tonic::Status>> = tokio::task::JoinSet::new();
    for i in 0..n {
        if joining.len() >= 16 {
            joining
                .join_next()
                .await
                .expect("a join")
                .expect("a join's task")
                .expect("join");
        }
        let mut joiner = joiner.clone();
        let name = format!("{prefix}{i}");
        joining.spawn(async move {
            joiner
                .join(pb::JoinRequest {
                    name,
                    role: "silent".into(),
                    ..Default::default()
                })
                .await
                .map(|_| ())
        });
    }
    while let Some(joined) = joining.join_next().await {
        joined.expect("a join's task").expect("join");
    }
}

/// Reads `watcher`'s termination notices until they named `n` members;
/// returns how many notices that took.
async fn notices_until(watcher: &mut Member, n: usize) -> usize {
    let mut names = std::collections::BTreeSet::new();
    let mut notices = 0;
    while names.len() < n {
        let envelope = watcher
            .next_matching(|e| matches!(e.body, Some(Body::TeammateTerminated(_))))
            .await;
        notices += 1;
        names.extend(terminated(&envelope));
    }
    notices
}

#[tokio::test]
async fn members_ending_together_are_told_in_a_few_notices_not_one_each() {
    let lead = Lead::start(&["--grace", "1"]).await;
    let mut watcher = lead.join("watcher").await;
    watcher.open_inbox(0).await;
    join_silent(&lead, "s", 300).await;
    let notices = notices_until(&mut watcher, 300).await;
    // Today's main sent one notice per member, to every member: 300 here,
    // and 300 x 300 / 2 stored envelopes.
    assert!(notices <= 20, "{notices} notices for 300 members");
}

#[tokio::test]
async fn a_team_that_does_not_come_back_after_a_restart_is_told_in_one_notice_on_sqlite() {
    a_team_that_does_not_come_back_after_a_restart_is_told_in_one_notice().await;
}

#[tokio::test]
async fn a_team_that_does_not_come_back_after_a_restart_is_told_in_one_notice_on_postgres() {
    mesh_tests::on_postgres(a_team_that_does_not_come_back_after_a_restart_is_told_in_one_notice())
        .await;
}

async fn a_team_that_does_not_come_back_after_a_restart_is_told_in_one_notice() {
    let lead = Lead::start(&["--grace", "2"]).await;
    let mut watcher = lead.join("watcher").await;
    join_silent(&lead, "gone", 200).await;
    let token = watcher.token.clone();
    let lead = lead.crash_and_restart(&["--grace", "2"]).await;
    watcher.api = lead.lead_api(&token).await;
    watcher.open_inbox(0).await;
    let notices = notices_until(&mut watcher, 200).await;
    assert_eq!(notices, 1, "the 200 graces ended together");
}

#[tokio::test]
async fn an_inbox_is_bounded_in_bytes_and_the_error_names_the_flag() {
    let lead = Lead::start(&["--inbox-max-bytes", "200000"]).await;
    let mut alice = lead.join("alice").await;
    let _bob = lead.join("bob").await;
    let big = "x".repeat(60 * 1024);
    for _ in 0..3 {
        send(&mut alice, "bob", &big, "").await.expect("room");
    }
    let status = send(&mut alice, "bob", &big, "").await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("--inbox-max-bytes"), "{status:?}");
}

#[tokio::test]
async fn a_broadcast_skips_full_inboxes_and_says_which() {
    let lead = Lead::start(&["--inbox-max-envelopes", "2"]).await;
    let mut alice = lead.join("alice").await;
    let mut bob = lead.join("bob").await;
    let _carol = lead.join("carol").await;
    for _ in 0..2 {
        send(&mut alice, "carol", "fill", "").await.expect("room");
    }
    let status = send(&mut alice, "carol", "one more", "").await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains("--inbox-max-envelopes"),
        "{status:?}"
    );
    // Today's main failed the broadcast for everyone.
    let response = send(&mut alice, "*", "standup", "").await.expect("sent");
    assert_eq!(response.skipped, vec!["carol".to_owned()]);
    let heard = bob.next().await;
    assert!(matches!(heard.body, Some(Body::Text(t)) if t.content == "standup"));
}

#[tokio::test]
async fn the_lead_bounds_what_all_inboxes_hold_together() {
    let lead = Lead::start(&["--held-max-bytes", "300000"]).await;
    let mut alice = lead.join("alice").await;
    let big = "x".repeat(60 * 1024);
    let mut refused = None;
    for i in 0..10 {
        let _ = lead.join(&format!("r{i}")).await;
        if let Err(status) = send(&mut alice, &format!("r{i}"), &big, "").await {
            refused = Some((i, status));
            break;
        }
    }
    let (i, status) = refused.expect("the lead-wide budget refuses at some point");
    assert_eq!(i, 4, "300,000 bytes hold four 60 KiB messages");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("--held-max-bytes"), "{status:?}");
}

#[tokio::test]
async fn a_broadcast_body_is_held_once_however_many_get_it() {
    // Ten 60 KiB broadcasts to 40 members fit in 1 MB only if each body is
    // held once: one per member would be 24 MB.
    let lead = Lead::start(&["--held-max-bytes", "1000000"]).await;
    let mut alice = lead.join("alice").await;
    join_silent(&lead, "m", 40).await;
    let big = "x".repeat(60 * 1024);
    for _ in 0..10 {
        let sent = send(&mut alice, "*", &big, "").await.expect("fits");
        assert!(sent.skipped.is_empty());
    }
}

#[tokio::test]
async fn a_member_that_never_acknowledges_is_disconnected_as_stuck() {
    let lead = Lead::start(&["--ack-timeout", "1"]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut alice = lead.join("alice").await;
    let mut bob = lead.join("bob").await;
    bob.open_inbox(0).await;
    events.member_in("bob", pb::MemberStatus::Working).await;
    send(&mut alice, "bob", "please ack", "")
        .await
        .expect("sent");
    let envelope = bob.next().await;
    assert_eq!(envelope.seq, 1);
    // Bob reads but never acks: his stream is ended with a status that says
    // why, and he is DISCONNECTED (today's main kept him WORKING forever).
    events
        .member_in("bob", pb::MemberStatus::Disconnected)
        .await;
    let stream = bob.inbox.as_mut().expect("stream");
    let ended = within("bob's stream to end", stream.message()).await;
    let status = ended.expect_err("ended with a status");
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(status.message().contains("--ack-timeout"), "{status:?}");
    // He resumes, acks, and carries on.
    bob.open_inbox(1).await;
    events.member_in("bob", pb::MemberStatus::Working).await;
}

/// Reads from a raw TCP connection until the lead closes it.
async fn closed_by_lead(mut socket: tokio::net::TcpStream) {
    let mut buf = [0u8; 1024];
    within("the lead to close the connection", async {
        loop {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
}

#[tokio::test]
async fn a_connection_that_never_speaks_http2_is_closed() {
    let lead = Lead::start(&["--handshake-timeout", "1"]).await;
    let socket = tokio::net::TcpStream::connect(&lead.addr)
        .await
        .expect("connect");
    closed_by_lead(socket).await;
}

#[tokio::test]
async fn an_idle_connection_is_closed() {
    let lead = Lead::start(&["--idle-timeout", "1", "--keepalive", "30"]).await;
    let mut socket = tokio::net::TcpStream::connect(&lead.addr)
        .await
        .expect("connect");
    // The HTTP/2 preface and an empty SETTINGS frame, then nothing.
    socket
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .expect("preface");
    closed_by_lead(socket).await;
}

#[tokio::test]
async fn silent_connections_cannot_starve_real_calls_under_a_low_descriptor_limit() {
    // The lead runs with 128 descriptors; 200 silent connections fill them
    // on today's main, and real calls time out.
    let dir = tempfile::tempdir().expect("tempdir");
    let join_token = shared::auth::new_token();
    let operator_token = shared::auth::new_token();
    let mut command = tokio::process::Command::new("prlimit");
    command
        .args(["--nofile=128:128", "--"])
        .arg(mesh_tests::bin("lead"))
        .args(["serve", "--listen", "127.0.0.1:0", "--state-dir"])
        .arg(dir.path().join("state"))
        .args(["--join-token", &join_token])
        .args(["--operator-token", &operator_token])
        .args(["--handshake-timeout", "1"])
        .env("RUST_LOG", "warn");
    let lead = Lead::spawn(command, dir, join_token, operator_token).await;
    let mut silent = Vec::new();
    for _ in 0..200 {
        if let Ok(socket) = tokio::net::TcpStream::connect(&lead.addr).await {
            silent.push(socket);
        }
    }
    within("a real call to succeed", async {
        loop {
            let attempt = async {
                let channel = tonic::transport::Channel::from_shared(lead.url.clone())
                    .expect("url")
                    .connect_timeout(Duration::from_secs(2))
                    .timeout(Duration::from_secs(2))
                    .connect()
                    .await
                    .ok()?;
                let mut operator = pb::operator_client::OperatorClient::with_interceptor(
                    channel,
                    shared::auth::BearerToken::new(&lead.operator_token).expect("token"),
                );
                operator
                    .list_team(pb::ListTeamRequest::default())
                    .await
                    .ok()
            };
            if attempt.await.is_some() {
                return;
            }
        }
    })
    .await;
    drop(silent);
}

#[tokio::test]
async fn requests_come_in_pages_that_a_client_can_decode() {
    // One member holds all 70 pending: past the default pending budgets.
    let lead = Lead::start(&[
        "--pending-max-per-member",
        "100",
        "--pending-max-bytes-per-member",
        "8000000",
    ])
    .await;
    let mut alice = lead.join("alice").await;
    // 70 plans of 60 KiB: 4.2 MB in all, more than a gRPC client decodes
    // in one message by default (today's main answered in one).
    for i in 0..70 {
        let plan = pb::Plan {
            summary: format!("plan {i}"),
            body: "p".repeat(60 * 1024),
            ..Default::default()
        };
        alice
            .api
            .submit_plan(pb::PlanApprovalRequest {
                plan: Some(plan),
                ..Default::default()
            })
            .await
            .expect("submitted");
    }
    let mut operator = lead.operator().await;
    let mut seen = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let page = operator
            .list_requests(pb::ListRequestsRequest {
                page_token: token,
                ..Default::default()
            })
            .await
            .expect("a page decodes")
            .into_inner();
        pages += 1;
        seen.extend(page.requests.into_iter().map(|r| r.request_id));
        token = page.next_page_token;
        if token.is_empty() {
            break;
        }
    }
    assert!(pages >= 5, "{pages} pages of at most 1 MiB");
    assert_eq!(seen.len(), 70);
    let unique: std::collections::BTreeSet<_> = seen.iter().collect();
    assert_eq!(unique.len(), 70, "no request twice");
    // The CLI pages through them all.
    let (ok, out, err) = lead.cli(&["requests", "--json"]).await;
    assert!(ok, "{err}");
    let listed: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(listed.as_array().map(Vec::len), Some(70));
    // Small pages, and a token from another list.
    let first = operator
        .list_team(pb::ListTeamRequest {
            page_size: 1,
            ..Default::default()
        })
        .await
        .expect("page")
        .into_inner();
    assert_eq!(first.members.len(), 1);
    assert!(first.next_page_token.is_empty(), "alice is the only member");
    let status = operator
        .list_requests(pb::ListRequestsRequest {
            page_token: "m1".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("page_token"), "{status:?}");
}

#[tokio::test]
async fn resolved_requests_and_terminated_members_go_after_the_retention_window() {
    let lead = Lead::start(&["--retention", "1", "--grace", "1"]).await;
    let mut operator = lead.operator().await;
    let mut alice = lead.join("alice").await;
    let id = alice.submit("", "a plan", &["a.rs"]).await.expect("submit");
    operator
        .review_plan(pb::PlanReview {
            request_id: id.clone(),
            approve: false,
            feedback: "no".into(),
            grant: None,
            refuse_overlap: false,
        })
        .await
        .expect("rejected");
    let _gone = lead.join("gone").await;
    within("the request and the member to be forgotten", async {
        loop {
            let request = operator
                .get_request(pb::GetRequestRequest {
                    request_id: id.clone(),
                })
                .await;
            let team = mesh_tests::team(&mut operator).await;
            if matches!(&request, Err(s) if s.code() == Code::NotFound)
                && team.iter().all(|m| m.name != "gone")
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn every_string_a_peer_sends_is_bounded_and_reports_are_cut_not_refused() {
    let lead = Lead::start(&["--approval", "auto"]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut alice = lead.join("alice").await;
    let huge = "t".repeat(3 * 1024 * 1024);
    // A tool call report with a 4 MiB tool name and 70 KB of arguments is
    // taken, cut, and shown (today's main refused the second and logged the
    // first whole).
    alice
        .api
        .report_tool_call(pb::ToolCallReport {
            tool: huge.clone(),
            args_json: format!("{{\"command\":\"{}\"}}", "c".repeat(70_000)),
            allowed: true,
            outcome: "ran".into(),
            member: String::new(),
        })
        .await
        .expect("a long report is cut, not refused");
    let report = events.tool_call("alice", |_| true).await;
    assert!(
        report.tool.len() <= mesh_core::limits::TOOL,
        "{}",
        report.tool.len()
    );
    assert!(
        report.args_json.contains("[cut: "),
        "{}",
        &report.args_json[..100]
    );
    assert!(report.args_json.len() <= mesh_core::limits::REPORT_ARGS_JSON);
    // A permission request's tool name is refused past its limit.
    alice.submit("", "plan", &["a.rs"]).await.expect("plan");
    alice
        .next_matching(|e| matches!(e.body, Some(Body::PlanApprovalResponse(_))))
        .await;
    let status = alice
        .api
        .request_permission(pb::PermissionRequest {
            tool: "x".repeat(mesh_core::limits::TOOL + 1),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().starts_with("tool: "), "{status:?}");
}

#[tokio::test]
async fn a_retried_agreement_to_shut_down_gets_ok_after_the_member_is_gone() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut alice = lead.join("alice").await;
    let ticket = operator
        .request_shutdown(pb::ShutdownRequest {
            target: "alice".into(),
            reason: "done".into(),
            ..Default::default()
        })
        .await
        .expect("asked")
        .into_inner();
    let answer = pb::ShutdownResponse {
        request_id: ticket.request_id.clone(),
        approve: true,
        reason: "bye".into(),
    };
    alice
        .api
        .respond_shutdown(answer.clone())
        .await
        .expect("agreed");
    // The reply was lost, say: the retry is answered as the first was.
    alice
        .api
        .respond_shutdown(answer.clone())
        .await
        .expect("a retry of the same answer is OK");
    let status = alice
        .api
        .respond_shutdown(pb::ShutdownResponse {
            approve: false,
            ..answer
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    // Nothing else works with the token any more.
    let status = send(&mut alice, "lead", "hi", "").await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
}

#[tokio::test]
async fn send_retries_are_idempotent_and_a_reused_id_is_already_exists() {
    let lead = Lead::start(&["--inbox-max-envelopes", "1"]).await;
    let mut alice = lead.join("alice").await;
    let _bob = lead.join("bob").await;
    let id = "0b6f7a4e-2c1d-4e5f-8a9b-0c1d2e3f4a5b";
    send(&mut alice, "bob", "hello", id).await.expect("sent");
    // Bob's inbox is full now; the retry still gets OK (it was delivered).
    let retry = send(&mut alice, "bob", "hello", id).await.expect("retry");
    assert_eq!(retry.message_id, id);
    for (to, text) in [("bob", "other text"), ("lead", "hello")] {
        let status = send(&mut alice, to, text, id).await.unwrap_err();
        assert_eq!(status.code(), Code::AlreadyExists, "{status:?}");
        assert!(status.message().contains("message_id"), "{status:?}");
    }
}

#[tokio::test]
async fn spellings_of_one_uuid_are_one_request() {
    let lead = Lead::start(&[]).await;
    let mut alice = lead.join("alice").await;
    let id = "5d8e2a1b-3c4f-4d6e-9f0a-1b2c3d4e5f60";
    let upper = id.to_uppercase();
    for spelling in [
        upper.clone(),
        format!("{{{id}}}"),
        format!("urn:uuid:{id}"),
        id.replace('-', ""),
        id.to_owned(),
    ] {
        let answered = alice.submit(&spelling, "one plan", &["a.rs"]).await;
        assert_eq!(answered.expect("accepted"), id, "{spelling}");
    }
    let mut operator = lead.operator().await;
    let requests = operator
        .list_requests(pb::ListRequestsRequest::default())
        .await
        .expect("list")
        .into_inner()
        .requests;
    assert_eq!(requests.len(), 1);
    let found = operator
        .get_request(pb::GetRequestRequest { request_id: upper })
        .await
        .expect("found by another spelling");
    assert_eq!(found.into_inner().request_id, id);
}

#[tokio::test]
async fn state_files_are_private_and_an_existing_state_dir_keeps_its_mode() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("mkdir");
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o750)).expect("chmod");
    let lead = Lead::start_in(
        dir,
        "127.0.0.1:0",
        shared::auth::new_token(),
        shared::auth::new_token(),
        &[],
    )
    .await;
    let mode = |name: &str| {
        std::fs::metadata(lead.state_dir().join(name))
            .expect(name)
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode(""), 0o750, "the owner's choice is kept");
    assert_eq!(mode("mesh.db"), 0o600);
    let fresh = tempfile::tempdir().expect("tempdir");
    let fresh_lead = Lead::start_in(
        fresh,
        "127.0.0.1:0",
        shared::auth::new_token(),
        shared::auth::new_token(),
        &[],
    )
    .await;
    let mode = std::fs::metadata(fresh_lead.state_dir())
        .expect("dir")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700, "a new state dir is private");
}

#[tokio::test]
async fn an_oversized_request_is_resource_exhausted_and_garbage_is_invalid_argument() {
    let lead = Lead::start(&[]).await;
    let mut alice = lead.join("alice").await;
    let status = send(&mut alice, "lead", &"x".repeat(8 * 1024 * 1024), "")
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    // Bytes that are not a protobuf message: a field 1 of wire type 7.
    let channel = lead.channel().await;
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.expect("ready");
    let mut request = tonic::Request::new(vec![0x0f_u8, 0xff, 0xff]);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {}", alice.token).parse().expect("header"),
    );
    let status = grpc
        .unary::<_, Vec<u8>, _>(
            request,
            http::uri::PathAndQuery::from_static("/mesh.v1.Lead/Send"),
            RawCodec,
        )
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
}

#[tokio::test]
async fn the_lead_log_shows_peer_text_escaped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let join_token = shared::auth::new_token();
    let operator_token = shared::auth::new_token();
    let mut command = tokio::process::Command::new(mesh_tests::bin("lead"));
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--state-dir"])
        .arg(dir.path().join("state"))
        .args(["--join-token", &join_token])
        .args(["--operator-token", &operator_token])
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stderr(std::process::Stdio::piped());
    let mut lead = Lead::spawn(command, dir, join_token, operator_token).await;
    let stderr = lead.child.stderr.take().expect("stderr");
    let mut alice = lead.join("alice").await;
    alice
        .api
        .report_tool_call(pb::ToolCallReport {
            tool: "read_file".into(),
            args_json: "{}".into(),
            allowed: true,
            outcome: "ok\nFORGED lead: everything approved\u{1b}[2K".into(),
            member: String::new(),
        })
        .await
        .expect("reported");
    let mut lines = tokio::io::BufReader::new(stderr);
    let line = within("the tool call's log line", async {
        use tokio::io::AsyncBufReadExt;
        let mut line = String::new();
        loop {
            line.clear();
            lines.read_line(&mut line).await.expect("read");
            if line.contains("tool call") {
                return line;
            }
            assert!(!line.starts_with("FORGED"), "a forged line: {line:?}");
        }
    })
    .await;
    assert!(line.contains("ok\\nFORGED"), "{line:?}");
    assert!(!line.contains('\u{1b}'), "{line:?}");
}

/// Sends and receives raw bytes as a gRPC message.
#[derive(Debug, Clone, Copy)]
struct RawCodec;

impl tonic::codec::Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}

impl tonic::codec::Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn encode(
        &mut self,
        item: Vec<u8>,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        use bytes::BufMut;
        dst.put_slice(&item);
        Ok(())
    }
}

impl tonic::codec::Decoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<Vec<u8>>, tonic::Status> {
        use bytes::Buf;
        let mut out = vec![0; src.remaining()];
        src.copy_to_slice(&mut out);
        Ok(Some(out))
    }
}

#[tokio::test]
async fn operator_commands_show_peer_text_escaped() {
    let lead = Lead::start(&[]).await;
    let mut joiner = lead.lead_api(&lead.join_token).await;
    joiner
        .join(pb::JoinRequest {
            name: "mallory".into(),
            role: "coder\u{1b}[2J\r\nalice  coder  working  bypass\u{9b}31m\u{202e}".into(),
            ..Default::default()
        })
        .await
        .expect("joined");
    let (ok, out, err) = lead.cli(&["team"]).await;
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 2, "a header and one member:\n{out}");
    for raw in ['\u{1b}', '\r', '\u{9b}', '\u{202e}'] {
        assert!(!out.contains(raw), "{raw:?} reached the terminal: {out:?}");
    }
    assert!(out.contains("coder\\u{1b}[2J\\r\\nalice"), "{out}");
    let (ok, out, err) = lead.cli(&["team", "--json"]).await;
    assert!(ok, "{err}");
    assert!(
        !out.contains('\u{9b}') && !out.contains('\u{202e}'),
        "{out:?}"
    );
    let team: serde_json::Value = serde_json::from_str(&out).expect("still JSON");
    assert!(team[0]["role"]
        .as_str()
        .is_some_and(|r| r.contains('\u{202e}')));
}

/// A leaked join token cannot fill the host: the team has a maximum size
/// (terminated members do not count), and Join attempts, failed ones too,
/// are rate limited.
#[tokio::test]
async fn team_size_and_join_attempts_are_bounded() {
    let lead = Lead::start(&["--max-members", "3"]).await;
    let mut joiner = lead.lead_api(&lead.join_token).await;
    let join = |name: &str| pb::JoinRequest {
        name: name.into(),
        role: "r".into(),
        ..Default::default()
    };
    let mut first = lead.join("m0").await;
    lead.join("m1").await;
    lead.join("m2").await;
    let full = joiner.join(join("m3")).await.unwrap_err();
    assert_eq!(full.code(), Code::ResourceExhausted, "{full:?}");
    assert!(full.message().contains("--max-members"), "{full:?}");
    first
        .api
        .leave(pb::LeaveRequest {
            reason: "making room".into(),
        })
        .await
        .unwrap();
    joiner.join(join("m3")).await.expect("room again");
    drop(lead);

    let lead = Lead::start(&["--join-rate", "0", "--join-burst", "4"]).await;
    let mut joiner = lead.lead_api(&lead.join_token).await;
    joiner.join(join("a")).await.expect("1");
    let taken = joiner.join(join("a")).await.unwrap_err();
    assert_eq!(
        taken.code(),
        Code::AlreadyExists,
        "a failed attempt still counts"
    );
    joiner.join(join("b")).await.expect("3");
    joiner.join(join("c")).await.expect("4");
    let limited = joiner.join(join("d")).await.unwrap_err();
    assert_eq!(limited.code(), Code::ResourceExhausted, "{limited:?}");
    assert!(limited.message().contains("--join-rate"), "{limited:?}");
    let bad = within(
        "lead serve with a bad rate",
        tokio::process::Command::new(mesh_tests::bin("lead"))
            .args(["serve", "--listen", "127.0.0.1:0", "--join-rate=-1"])
            .arg("--state-dir")
            .arg(lead.dir.path().join("other"))
            .output(),
    )
    .await
    .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--join-rate"));
}

#[tokio::test]
async fn spawn_starts_only_the_configured_teammate_with_paths_inside_the_spawn_root() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let script = lead.script("ok", "[[plans]]\nsummary = \"s\"\nfiles = [\"a\"]\n");
    let script = script.display().to_string();
    let outside = tempfile::tempdir().unwrap();
    let outside_script = outside.path().join("evil.toml");
    std::fs::write(&outside_script, "[[plans]]\nsummary = \"s\"\n").unwrap();
    let request = |f: &dyn Fn(&mut pb::SpawnTeammateRequest)| {
        let mut request = pb::SpawnTeammateRequest {
            name: "spawned".into(),
            role: "coder".into(),
            script_path: script.clone(),
            ..Default::default()
        };
        f(&mut request);
        request
    };
    let refused = [
        (
            "a foreign binary",
            request(&|r| r.teammate_bin = "/bin/sh".into()),
            Code::PermissionDenied,
            "teammate_bin",
        ),
        (
            "a script outside the root",
            request(&|r| r.script_path = outside_script.display().to_string()),
            Code::PermissionDenied,
            "script_path",
        ),
        // The same answer whether or not the file exists: no oracle.
        (
            "a missing file outside the root",
            request(&|r| r.script_path = "/etc/no-such-file".into()),
            Code::PermissionDenied,
            "script_path",
        ),
        (
            "a workspace outside the root",
            request(&|r| r.workspace = outside.path().join("ws").display().to_string()),
            Code::PermissionDenied,
            "workspace",
        ),
        (
            "a way out with ..",
            request(&|r| r.workspace = format!("{}/../../tmp/x", lead.dir.path().display())),
            Code::InvalidArgument,
            "workspace",
        ),
        (
            "the lead's own secrets as an API key",
            request(&|r| {
                r.script_path = String::new();
                r.model = "m".into();
                r.task = "t".into();
                r.api_key_env = "MESH_OPERATOR_TOKEN".into();
            }),
            Code::PermissionDenied,
            "api_key_env",
        ),
    ];
    for (what, request, code, field) in refused {
        let status = operator.spawn_teammate(request).await.expect_err(what);
        assert_eq!(status.code(), code, "{what}: {status:?}");
        assert!(status.message().starts_with(field), "{what}: {status:?}");
    }
    assert!(
        mesh_tests::team(&mut operator).await.is_empty(),
        "nothing was started"
    );
    let missing = operator
        .spawn_teammate(request(&|_| {}))
        .await
        .map(|r| r.into_inner().pid);
    assert!(
        missing.is_ok_and(|pid| pid > 0),
        "inside the root it starts"
    );
    // The configured binary named explicitly is fine too.
    let own = mesh_tests::bin("teammate").display().to_string();
    let again = operator
        .spawn_teammate(request(&|r| {
            r.name = "again".into();
            r.teammate_bin = own.clone();
        }))
        .await;
    assert!(again.is_ok(), "{again:?}");
}

/// The server's first SETTINGS frame on a fresh HTTP/2 connection, as
/// (identifier, value) pairs.
async fn server_settings(addr: &str) -> Vec<(u16, u32)> {
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    socket
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    // An empty SETTINGS frame: length 0, type 4, no flags, stream 0.
    socket
        .write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0])
        .await
        .unwrap();
    within("the server's SETTINGS", async {
        loop {
            let mut header = [0u8; 9];
            socket.read_exact(&mut header).await.unwrap();
            let len =
                usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
            let mut payload = vec![0u8; len];
            socket.read_exact(&mut payload).await.unwrap();
            let (kind, flags) = (header[3], header[4]);
            if kind == 4 && flags & 1 == 0 {
                return payload
                    .chunks_exact(6)
                    .map(|s| {
                        (
                            u16::from_be_bytes([s[0], s[1]]),
                            u32::from_be_bytes([s[2], s[3], s[4], s[5]]),
                        )
                    })
                    .collect();
            }
        }
    })
    .await
}

#[tokio::test]
async fn a_connection_may_have_at_most_256_calls_in_progress() {
    let lead = Lead::start(&[]).await;
    // SETTINGS_MAX_CONCURRENT_STREAMS (0x3): h2 refuses streams past it.
    let settings = server_settings(&lead.addr).await;
    assert!(settings.contains(&(3, 256)), "{settings:?}");
    // 256 calls in progress on one connection are served (a 257th would
    // wait on that connection for one to end); other connections go on.
    let mut saturated = lead.operator().await;
    let mut streams = Vec::new();
    for _ in 0..256 {
        streams.push(
            saturated
                .watch(pb::WatchRequest {})
                .await
                .unwrap()
                .into_inner(),
        );
    }
    let mut other = lead.operator().await;
    assert_eq!(mesh_tests::team(&mut other).await.len(), 0);
}
