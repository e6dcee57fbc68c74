//! Nothing lost: the lead killed at the worst moments and started again on
//! the same state dir, teammates killed mid-write or vanishing, the lead
//! stopping with children, and a damaged database.

#![allow(clippy::unwrap_used)]

use mesh_tests::{bin, is, process_running, signal, within, Events, Lead};
use nix::sys::signal::Signal;
use shared::pb::{self, envelope::Body, RequestStatus};
use tokio::process::Command;
use tonic::Code;

const ONE_PLAN: &str = r#"
[[plans]]
summary = "Add the auth module"
files = ["src/auth.rs"]

[[actions]]
phase = "work"
tool = "write_file"
path = "src/auth.rs"
content = "pub fn login() {}\n"
"#;

fn plan_of(name: &str, status: RequestStatus) -> impl FnMut(&pb::ProtocolState) -> bool + '_ {
    move |r| {
        r.sender == name && is(r.status, status) && r.r#type == pb::RequestType::PlanApproval as i32
    }
}

#[tokio::test]
async fn a_lead_killed_between_submit_and_review_still_has_the_plan_and_the_teammate_carries_on_on_sqlite(
) {
    a_lead_killed_between_submit_and_review_still_has_the_plan_and_the_teammate_carries_on().await;
}

#[tokio::test]
async fn a_lead_killed_between_submit_and_review_still_has_the_plan_and_the_teammate_carries_on_on_postgres(
) {
    mesh_tests::on_postgres(
        a_lead_killed_between_submit_and_review_still_has_the_plan_and_the_teammate_carries_on(),
    )
    .await;
}

async fn a_lead_killed_between_submit_and_review_still_has_the_plan_and_the_teammate_carries_on() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut alice = lead.teammate("alice", ONE_PLAN);
    let plan = events
        .request("alice's plan", plan_of("alice", RequestStatus::Pending))
        .await;

    let lead = lead.crash_and_restart(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let pending = operator
        .list_requests(pb::ListRequestsRequest {
            status: RequestStatus::Pending as i32,
            r#type: 0,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .requests;
    assert_eq!(pending.len(), 1, "the pending plan survived");
    assert_eq!(pending[0].request_id, plan.request_id);

    let (ok, out, err) = lead.cli(&["approve", &plan.request_id]).await;
    assert!(ok, "{out}{err}");
    // alice reconnects on her own, reads the answer and works.
    let wrote = events
        .tool_call("alice's write after the restart", |t| {
            t.member == "alice" && t.tool == "write_file"
        })
        .await;
    assert!(wrote.allowed, "{wrote:?}");
    assert!(alice.workspace.join("src/auth.rs").exists());
    let team = mesh_tests::team(&mut operator).await;
    assert_eq!(team.len(), 1);
    assert_eq!(team[0].mode, pb::PermissionMode::AcceptEdits as i32);
    assert!(
        alice.child.try_wait().unwrap().is_none(),
        "alice carried on"
    );
}

#[tokio::test]
async fn a_lead_killed_after_the_review_delivers_the_answer_once_and_keeps_it_on_sqlite() {
    a_lead_killed_after_the_review_delivers_the_answer_once_and_keeps_it().await;
}

#[tokio::test]
async fn a_lead_killed_after_the_review_delivers_the_answer_once_and_keeps_it_on_postgres() {
    mesh_tests::on_postgres(a_lead_killed_after_the_review_delivers_the_answer_once_and_keeps_it())
        .await;
}

async fn a_lead_killed_after_the_review_delivers_the_answer_once_and_keeps_it() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut alice = lead.join("alice").await;
    let mut bob = lead.join("bob").await;
    let id = alice.submit("", "a plan", &["a.rs"]).await.unwrap();
    let review = pb::PlanReview {
        request_id: id.clone(),
        approve: true,
        ..Default::default()
    };
    let answered = operator
        .review_plan(review.clone())
        .await
        .unwrap()
        .into_inner();

    let lead = lead.crash_and_restart(&[]).await;
    let mut operator = lead.operator().await;
    // The session token still works; the answer waits in the inbox.
    alice.api = lead.lead_api(&alice.token).await;
    bob.api = lead.lead_api(&bob.token).await;
    let envelope = alice.next().await;
    assert_eq!(envelope.seq, 1);
    match envelope.body {
        Some(Body::PlanApprovalResponse(r)) => assert!(r.approve && r.request_id == id),
        other => panic!("expected the plan's answer, got {other:?}"),
    }
    let state = operator
        .get_request(pb::GetRequestRequest {
            request_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(is(state.status, RequestStatus::Approved));
    let alice_now = mesh_tests::member_named(&mut operator, "alice").await;
    assert_eq!(
        alice_now.mode,
        pb::PermissionMode::AcceptEdits as i32,
        "the grant survived"
    );
    assert_eq!(
        operator.review_plan(review).await.unwrap().into_inner(),
        answered,
        "a retry gets the original result"
    );
    let reject = pb::PlanReview {
        request_id: id,
        approve: false,
        feedback: "no".into(),
        grant: None,
        refuse_overlap: false,
    };
    assert_eq!(
        operator.review_plan(reject).await.unwrap_err().code(),
        Code::FailedPrecondition
    );

    // seq goes on; nothing is delivered twice.
    alice.api.ack(pb::AckRequest { seq: 1 }).await.unwrap();
    bob.api
        .send(pb::SendRequest {
            to: "alice".into(),
            text: Some(pb::Text {
                content: "hi".into(),
            }),
            message_id: String::new(),
        })
        .await
        .unwrap();
    let next = alice.next().await;
    assert_eq!(next.seq, 2);
    assert!(matches!(next.body, Some(Body::Text(_))));
}

#[tokio::test]
async fn unacked_envelopes_survive_a_crash_and_acked_ones_do_not_return_on_sqlite() {
    unacked_envelopes_survive_a_crash_and_acked_ones_do_not_return().await;
}

#[tokio::test]
async fn unacked_envelopes_survive_a_crash_and_acked_ones_do_not_return_on_postgres() {
    mesh_tests::on_postgres(unacked_envelopes_survive_a_crash_and_acked_ones_do_not_return()).await;
}

async fn unacked_envelopes_survive_a_crash_and_acked_ones_do_not_return() {
    let lead = Lead::start(&[]).await;
    let mut alice = lead.join("alice").await;
    let mut bob = lead.join("bob").await;
    for i in 1..=5 {
        let text = Some(pb::Text {
            content: format!("m{i}"),
        });
        bob.api
            .send(pb::SendRequest {
                to: "alice".into(),
                text,
                message_id: String::new(),
            })
            .await
            .unwrap();
    }
    alice.api.ack(pb::AckRequest { seq: 2 }).await.unwrap();
    let lead = lead.crash_and_restart(&[]).await;
    alice.api = lead.lead_api(&alice.token).await;
    alice.open_inbox(0).await;
    for i in 3..=5 {
        let envelope = alice.next().await;
        assert_eq!(envelope.seq, i);
        assert!(matches!(envelope.body, Some(Body::Text(ref t)) if t.content == format!("m{i}")));
    }
}

/// Seqs keep growing across a restart, whether the member's envelopes are
/// still held or all acknowledged: a resuming client never skips a new one
/// as already seen.
#[tokio::test]
async fn seqs_keep_growing_across_a_crash_on_sqlite() {
    seqs_keep_growing_across_a_crash().await;
}

#[tokio::test]
async fn seqs_keep_growing_across_a_crash_on_postgres() {
    mesh_tests::on_postgres(seqs_keep_growing_across_a_crash()).await;
}

async fn seqs_keep_growing_across_a_crash() {
    let lead = Lead::start(&[]).await;
    let mut alice = lead.join("alice").await;
    let mut carol = lead.join("carol").await;
    let mut bob = lead.join("bob").await;
    for (to, n) in [("alice", 3), ("carol", 3)] {
        for i in 1..=n {
            bob.send(to, &format!("m{i}"), "").await.unwrap();
        }
    }
    // alice acknowledges everything; carol nothing.
    alice.api.ack(pb::AckRequest { seq: 3 }).await.unwrap();
    let lead = lead.crash_and_restart(&[]).await;
    bob.api = lead.lead_api(&bob.token).await;
    alice.api = lead.lead_api(&alice.token).await;
    carol.api = lead.lead_api(&carol.token).await;
    bob.send("alice", "after", "").await.unwrap();
    bob.send("carol", "after", "").await.unwrap();
    alice.open_inbox(3).await;
    assert_eq!(alice.next().await.seq, 4, "alice's next envelope after 3");
    carol.open_inbox(0).await;
    let seqs: Vec<u64> = [
        carol.next().await.seq,
        carol.next().await.seq,
        carol.next().await.seq,
        carol.next().await.seq,
    ]
    .to_vec();
    assert_eq!(
        seqs,
        [1, 2, 3, 4],
        "carol's held envelopes, then the new one"
    );
}

#[tokio::test]
async fn a_teammate_killed_during_writes_leaves_the_old_or_the_new_file_never_a_part() {
    let lead = Lead::start(&["--approval", "auto"]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    const SIZE: usize = 256 * 1024;
    let mut script = String::from("[[plans]]\nsummary = \"big writes\"\nfiles = [\"big.txt\"]\n");
    for i in 0..40 {
        let fill = if i % 2 == 0 { "a" } else { "b" };
        script.push_str(&format!("\n[[actions]]\nphase = \"work\"\ntool = \"write_file\"\npath = \"big.txt\"\ncontent = \"{}\"\n", fill.repeat(SIZE)));
    }
    let mut writer = lead.teammate("writer", &script);
    for _ in 0..3 {
        events
            .tool_call("a big write", |t| {
                t.member == "writer" && t.tool == "write_file"
            })
            .await;
    }
    signal(&writer.child, Signal::SIGKILL);
    writer.exit().await;
    let content = std::fs::read(writer.workspace.join("big.txt")).unwrap();
    assert_eq!(content.len(), SIZE, "the file is whole");
    assert!(
        content.iter().all(|&b| b == content[0]),
        "the file is one version, not a mix"
    );
}

#[tokio::test]
async fn a_vanished_teammate_is_disconnected_then_terminated_and_its_requests_expire() {
    let lead = Lead::start(&["--grace", "1"]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut observer = lead.join("observer").await;
    observer.open_inbox(0).await;
    let mut alice = lead.teammate("alice", ONE_PLAN);
    // Her plan pending and her inbox open, in whichever order they come: a
    // teammate killed before its inbox opened was never connected, and is
    // not disconnected by dying.
    let (mut plan, mut connected) = (None, false);
    let mut pending = plan_of("alice", RequestStatus::Pending);
    let plan = events
        .find("alice's plan, her inbox open", |kind| {
            match kind {
                pb::event::Kind::Request(r) if pending(r) => plan = Some(r.clone()),
                pb::event::Kind::Member(m) if m.name == "alice" => {
                    connected = m.status != pb::MemberStatus::Disconnected as i32;
                }
                _ => {}
            }
            plan.clone().filter(|_| connected)
        })
        .await;

    signal(&alice.child, Signal::SIGKILL);
    alice.exit().await;
    events
        .member_in("alice", pb::MemberStatus::Disconnected)
        .await;
    let expired = events
        .request("alice's plan expired", |r| {
            r.request_id == plan.request_id && is(r.status, RequestStatus::Expired)
        })
        .await;
    assert!(
        expired.feedback.contains("alice terminated"),
        "{}",
        expired.feedback
    );
    let notice = observer
        .next_matching(|e| matches!(e.body, Some(Body::TeammateTerminated(_))))
        .await;
    match notice.body {
        Some(Body::TeammateTerminated(t)) => {
            assert_eq!(t.name, "alice");
            assert!(t.reason.contains("grace"), "{}", t.reason);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_teammate_back_within_the_grace_period_carries_on() {
    let lead = Lead::start(&["--grace", "2"]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut alice = lead.join("alice").await;
    let _clock = lead.join("clock").await;
    alice.open_inbox(0).await;
    events.member_in("alice", pb::MemberStatus::Working).await;
    alice.inbox = None;
    events
        .member_in("alice", pb::MemberStatus::Disconnected)
        .await;
    alice.open_inbox(0).await;
    events.member_in("alice", pb::MemberStatus::Working).await;

    // A shutdown nobody answers expires after 3 s: by then alice's grace
    // period would have run out, had it not ended when she came back.
    let deadline = shared::auth::now_unix_ms() + 3_000;
    let request = pb::ShutdownRequest {
        target: "clock".into(),
        deadline_unix_ms: deadline,
        ..Default::default()
    };
    let ticket = operator
        .request_shutdown(request)
        .await
        .unwrap()
        .into_inner();
    events
        .request("the clock's deadline", |r| {
            r.request_id == ticket.request_id && is(r.status, RequestStatus::Expired)
        })
        .await;
    let alice_now = mesh_tests::member_named(&mut operator, "alice").await;
    assert_eq!(
        alice_now.status,
        pb::MemberStatus::Working as i32,
        "alice carried on"
    );
}

#[tokio::test]
async fn a_stopping_lead_asks_its_children_to_shut_down_and_leaves_no_process() {
    let mut lead = Lead::start(&[
        "--approval",
        "auto",
        "--stop-wait",
        "2",
        "--kill-grace",
        "1",
    ])
    .await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let polite = lead.script("polite", "[shutdown]\napprove = true\nreason = \"bye\"\n");
    let stubborn = lead.script("stubborn", "[shutdown]\napprove = false\nreason = \"no\"\n");
    for (name, script) in [("polite", &polite), ("stubborn", &stubborn)] {
        let (ok, out, err) = lead
            .cli(&[
                "spawn",
                name,
                "--role",
                "r",
                "--script",
                script.to_str().unwrap(),
            ])
            .await;
        assert!(ok, "{out}{err}");
        events.member_in(name, pb::MemberStatus::Idle).await;
    }
    let state = lead.state_dir();
    let status = lead.terminate().await;
    assert!(status.success(), "{status:?}");
    for script in [&polite, &stubborn] {
        assert!(
            !process_running(script.to_str().unwrap()),
            "{} is gone",
            script.display()
        );
    }
    // What each child answered is in the state the lead left.
    let Lead {
        dir,
        join_token,
        operator_token,
        ..
    } = lead;
    let lead = Lead::start_in(dir, "127.0.0.1:0", join_token, operator_token, &[]).await;
    let mut operator = lead.operator().await;
    let shutdowns = operator
        .list_requests(pb::ListRequestsRequest {
            status: 0,
            r#type: pb::RequestType::Shutdown as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .requests;
    let answer = |name: &str| {
        shutdowns
            .iter()
            .find(|r| r.target == name)
            .map(|r| (r.status, r.feedback.clone()))
    };
    assert_eq!(
        answer("polite"),
        Some((RequestStatus::Approved as i32, "bye".to_owned())),
        "{shutdowns:?}"
    );
    assert_eq!(
        answer("stubborn"),
        Some((RequestStatus::Rejected as i32, "no".to_owned())),
        "{shutdowns:?}"
    );
    let team = mesh_tests::team(&mut operator).await;
    assert!(
        team.iter()
            .all(|m| m.status == pb::MemberStatus::Terminated as i32),
        "{team:?}"
    );
    drop(state);
}

#[tokio::test]
async fn a_damaged_or_missing_database_stops_the_lead_with_a_clear_message() {
    let mut lead = Lead::start(&[]).await;
    lead.join("alice").await;
    let state = lead.state_dir();
    let status = lead.terminate().await;
    assert!(status.success(), "{status:?}");

    let start = |state: std::path::PathBuf| async move {
        let output = Command::new(bin("lead"))
            .args(["serve", "--listen", "127.0.0.1:0", "--state-dir"])
            .arg(&state)
            .output();
        let output = within("lead serve to refuse", output).await.unwrap();
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let db = state.join("mesh.db");
    let mut bytes = std::fs::read(&db).unwrap();
    for b in bytes.iter_mut().take(100) {
        *b = b'x';
    }
    std::fs::write(&db, &bytes).unwrap();
    let (ok, err) = start(state.clone()).await;
    assert!(!ok);
    assert!(
        err.contains("corrupt") && err.contains("refusing to start"),
        "{err}"
    );

    std::fs::remove_file(&db).unwrap();
    let _ = std::fs::remove_file(state.join("mesh.db-wal"));
    let (ok, err) = start(state.clone()).await;
    assert!(!ok);
    assert!(
        err.contains("missing") && err.contains("refusing to start empty"),
        "{err}"
    );
}

#[tokio::test]
async fn a_teammate_whose_lead_is_gone_for_good_exits_after_its_limit_on_sqlite() {
    a_teammate_whose_lead_is_gone_for_good_exits_after_its_limit().await;
}

#[tokio::test]
async fn a_teammate_whose_lead_is_gone_for_good_exits_after_its_limit_on_postgres() {
    mesh_tests::on_postgres(a_teammate_whose_lead_is_gone_for_good_exits_after_its_limit()).await;
}

async fn a_teammate_whose_lead_is_gone_for_good_exits_after_its_limit() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut alice = lead.teammate_with("alice", ONE_PLAN, &["--lead-gone-limit", "1"]);
    events
        .request("alice's plan", plan_of("alice", RequestStatus::Pending))
        .await;
    signal(&lead.child, Signal::SIGKILL);
    let status = alice.exit().await;
    assert_eq!(status.code(), Some(1), "{status:?}");
    assert!(!alice.workspace.join("src/auth.rs").exists());
}

#[tokio::test]
async fn a_teammate_behind_a_vanished_network_is_noticed_by_keepalive() {
    let lead = Lead::start(&["--keepalive", "1"]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let proxy = mesh_tests::FreezingProxy::start(lead.addr.parse().unwrap()).await;
    // alice reaches the lead only through the proxy.
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", proxy.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let auth = |token: &str| shared::auth::BearerToken::new(token).unwrap();
    let mut joiner =
        pb::lead_client::LeadClient::with_interceptor(channel.clone(), auth(&lead.join_token));
    let joined = joiner
        .join(pb::JoinRequest {
            name: "alice".into(),
            role: "r".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut alice =
        pb::lead_client::LeadClient::with_interceptor(channel, auth(&joined.session_token));
    let _inbox = alice
        .inbox(pb::InboxRequest { after_seq: 0 })
        .await
        .unwrap()
        .into_inner();
    events.member_in("alice", pb::MemberStatus::Working).await;

    proxy.freeze();
    let frozen_at = std::time::Instant::now();
    // Without keepalive the lead would never hear of it: the socket stays open.
    events
        .member_in("alice", pb::MemberStatus::Disconnected)
        .await;
    println!("noticed {:?} after the network froze", frozen_at.elapsed());
}

#[tokio::test]
async fn a_second_lead_on_the_same_state_dir_is_refused() {
    let lead = Lead::start(&[]).await;
    let output = Command::new(bin("lead"))
        .args(["serve", "--listen", "127.0.0.1:0", "--state-dir"])
        .arg(lead.state_dir())
        .output();
    let output = within("the second lead to refuse", output).await.unwrap();
    assert!(!output.status.success());
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("in use by another lead"), "{err}");
    // The first one is unharmed.
    let mut operator = lead.operator().await;
    operator
        .list_team(pb::ListTeamRequest::default())
        .await
        .unwrap();
}

/// The lead is killed while senders keep many calls, and so several group
/// commits, in flight. After the restart every answered `Send` is there; a
/// broadcast is in every inbox it was for or in none (nothing half-applied);
/// and each inbox's seqs run 1, 2, 3... with no gap, so no batch was stored
/// without the ones before it.
#[tokio::test]
async fn killed_with_batches_in_flight_it_keeps_every_answer_and_no_half_on_sqlite() {
    killed_with_batches_in_flight_it_keeps_every_answer_and_no_half().await;
}

#[tokio::test]
async fn killed_with_batches_in_flight_it_keeps_every_answer_and_no_half_on_postgres() {
    mesh_tests::on_postgres(killed_with_batches_in_flight_it_keeps_every_answer_and_no_half())
        .await;
}

async fn killed_with_batches_in_flight_it_keeps_every_answer_and_no_half() {
    use std::{
        collections::{BTreeMap, BTreeSet},
        sync::{
            atomic::{AtomicBool, AtomicUsize, Ordering},
            Arc, Mutex,
        },
    };

    const SENDERS: usize = 8;
    const RECIPIENTS: usize = 3;
    let lead = Lead::start(&[]).await;
    let mut recipients = Vec::new();
    for r in 0..RECIPIENTS {
        recipients.push(lead.join(&format!("r{r}")).await);
    }
    let mut senders = Vec::new();
    for s in 0..SENDERS {
        senders.push(lead.join(&format!("s{s}")).await);
    }
    let names: Vec<String> = recipients
        .iter()
        .chain(senders.iter())
        .map(|m| m.name.clone())
        .collect();
    let answered = Arc::new(Mutex::new(Vec::<(String, String)>::new()));
    let count = Arc::new(AtomicUsize::new(0));
    let enough = Arc::new(tokio::sync::Notify::new());
    let killed = Arc::new(AtomicBool::new(false));
    let mut tasks = tokio::task::JoinSet::new();
    for (s, sender) in senders.iter().enumerate() {
        let mut api = sender.api.clone();
        let (answered, count, enough, killed) = (
            answered.clone(),
            count.clone(),
            enough.clone(),
            killed.clone(),
        );
        tasks.spawn(async move {
            for i in 0.. {
                if killed.load(Ordering::SeqCst) {
                    return;
                }
                let to = if i % 2 == 0 {
                    format!("r{}", i % RECIPIENTS)
                } else {
                    "*".to_owned()
                };
                let content = format!("s{s}-{i}");
                let sent = api
                    .send(pb::SendRequest {
                        to: to.clone(),
                        text: Some(pb::Text {
                            content: content.clone(),
                        }),
                        message_id: String::new(),
                    })
                    .await;
                if sent.is_err() {
                    return;
                }
                answered.lock().unwrap().push((to, content));
                if count.fetch_add(1, Ordering::SeqCst) + 1 == 400 {
                    enough.notify_one();
                }
            }
        });
    }
    within("400 answered sends", enough.notified()).await;
    killed.store(true, Ordering::SeqCst);
    let lead = lead.crash_and_restart(&[]).await;
    while tasks.join_next().await.is_some() {}

    // Read every inbox to a marker sent after the restart.
    let mut marker = lead.join("marker").await;
    let mut inboxes: BTreeMap<String, Vec<pb::Envelope>> = BTreeMap::new();
    for (member, token) in recipients
        .iter()
        .chain(senders.iter())
        .map(|m| (m.name.clone(), m.token.clone()))
    {
        marker.send(&member, "end", "").await.unwrap();
        let mut reader = mesh_tests::Member {
            name: member.clone(),
            token: token.clone(),
            api: lead.lead_api(&token).await,
            inbox: None,
        };
        let mut got = Vec::new();
        loop {
            let envelope = reader.next().await;
            if envelope.from == "marker" {
                break;
            }
            got.push(envelope);
        }
        inboxes.insert(member, got);
    }
    for (member, envelopes) in &inboxes {
        let seqs: Vec<u64> = envelopes.iter().map(|e| e.seq).collect();
        let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
        assert_eq!(seqs, expected, "{member}'s seqs run on with no gap");
    }
    let text = |e: &pb::Envelope| match &e.body {
        Some(Body::Text(t)) => t.content.clone(),
        _ => String::new(),
    };
    let held: BTreeMap<&String, BTreeSet<String>> = inboxes
        .iter()
        .map(|(member, envelopes)| (member, envelopes.iter().map(text).collect()))
        .collect();
    let answered = answered.lock().unwrap().clone();
    assert!(answered.len() >= 400);
    for (to, content) in &answered {
        if to == "*" {
            continue;
        }
        assert!(
            held[to].contains(content),
            "answered {content} to {to} survived"
        );
    }
    // Every broadcast any inbox holds, answered or not: in all or in none.
    let broadcasts: BTreeSet<String> = answered
        .iter()
        .filter(|(to, _)| to == "*")
        .map(|(_, c)| c.clone())
        .chain(
            held.values()
                .flatten()
                .filter(|c| {
                    c.split('-')
                        .nth(1)
                        .and_then(|i| i.parse::<usize>().ok())
                        .is_some_and(|i| i % 2 == 1)
                })
                .cloned(),
        )
        .collect();
    let mut whole = 0;
    for content in &broadcasts {
        let from = content.split('-').next().unwrap();
        let holders: Vec<&String> = names
            .iter()
            .filter(|n| n.as_str() != from && held[n].contains(content))
            .collect();
        let was_answered = answered.iter().any(|(to, c)| to == "*" && c == content);
        assert!(
            holders.len() == names.len() - 1 || (holders.is_empty() && !was_answered),
            "broadcast {content} (answered: {was_answered}) is held by {holders:?} only"
        );
        whole += usize::from(!holders.is_empty());
    }
    assert!(whole > 0, "some broadcasts survived");
}
