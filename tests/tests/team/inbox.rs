//! Inboxes over the wire: ordered, at-least-once delivery, resume after a
//! dropped stream with nothing lost or duplicated, idempotent sends.

#![allow(clippy::unwrap_used)]

use mesh_tests::{within, Lead, Member};
use shared::pb::{self, envelope::Body};
use tonic::Code;

fn text(envelope: &pb::Envelope) -> String {
    match &envelope.body {
        Some(Body::Text(t)) => t.content.clone(),
        other => panic!("expected a text, got {other:?}"),
    }
}

async fn send(from: &mut Member, to: &str, content: &str, message_id: &str) -> String {
    from.send(to, content, message_id).await.unwrap().message_id
}

#[tokio::test]
async fn a_resumed_inbox_misses_nothing_and_repeats_nothing_acked() {
    let lead = Lead::start(&[]).await;
    let mut alice = lead.join("alice").await;
    let mut bob = lead.join("bob").await;
    for i in 1..=10 {
        send(&mut bob, "alice", &format!("m{i}"), "").await;
    }
    // alice processes five, acks three, and her stream drops.
    alice.open_inbox(0).await;
    let mut seqs = Vec::new();
    for i in 1..=5 {
        let envelope = alice.next().await;
        assert_eq!(text(&envelope), format!("m{i}"), "in seq order");
        assert_eq!(envelope.from, "bob", "from is set by the lead");
        seqs.push(envelope.seq);
    }
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    alice
        .api
        .ack(pb::AckRequest { seq: seqs[2] })
        .await
        .unwrap();
    alice.inbox = None;
    // While she is away, more arrives.
    send(&mut bob, "alice", "m11", "").await;

    // She had processed only three: resuming after them, the two she had
    // received but not processed come again (at least once), then the rest.
    alice.open_inbox(seqs[2]).await;
    let mut last = 0;
    for i in 4..=11 {
        let envelope = alice.next().await;
        assert_eq!(text(&envelope), format!("m{i}"));
        last = envelope.seq;
    }
    // Resuming after the last one she processed: nothing comes twice.
    alice.inbox = None;
    alice.open_inbox(last).await;
    send(&mut bob, "alice", "m12", "").await;
    let next = alice.next().await;
    assert_eq!(text(&next), "m12", "nothing processed is delivered again");
    assert_eq!(next.seq, last + 1, "seq goes on without a gap");
}

#[tokio::test]
async fn a_new_inbox_stream_replaces_the_old_one() {
    let lead = Lead::start(&[]).await;
    let mut alice = lead.join("alice").await;
    let mut bob = lead.join("bob").await;
    alice.open_inbox(0).await;
    let mut old = alice.inbox.take().unwrap();
    alice.open_inbox(0).await;
    send(&mut bob, "alice", "hello", "").await;
    assert_eq!(text(&alice.next().await), "hello");
    // The old stream ends with a status that says why, not a plain end.
    let ended = within("the old stream to end", old.message()).await;
    let status = ended.expect_err("the replaced stream ends with a status");
    assert_eq!(status.code(), Code::Aborted, "{status:?}");
    assert!(status.message().contains("replaced"), "{status:?}");
}

#[tokio::test]
async fn a_retried_send_with_the_same_message_id_delivers_once() {
    let lead = Lead::start(&[]).await;
    let mut alice = lead.join("alice").await;
    let mut bob = lead.join("bob").await;
    let id = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d";
    assert_eq!(send(&mut bob, "alice", "once", id).await, id);
    assert_eq!(send(&mut bob, "alice", "once", id).await, id);
    send(&mut bob, "alice", "after", "").await;
    let first = alice.next().await;
    assert_eq!(
        (text(&first), first.message_id.as_str()),
        ("once".to_owned(), id)
    );
    assert_eq!(
        text(&alice.next().await),
        "after",
        "the retry delivered nothing"
    );
}

#[tokio::test]
async fn a_broadcast_reaches_every_other_active_member() {
    let lead = Lead::start(&[]).await;
    let mut alice = lead.join("alice").await;
    let mut bob = lead.join("bob").await;
    let mut carol = lead.join("carol").await;
    send(&mut alice, "*", "standup", "").await;
    assert_eq!(text(&bob.next().await), "standup");
    assert_eq!(text(&carol.next().await), "standup");
    send(&mut bob, "alice", "only alice", "").await;
    assert_eq!(
        text(&alice.next().await),
        "only alice",
        "the sender does not hear its own broadcast"
    );
}

#[tokio::test]
async fn acking_or_resuming_past_the_newest_envelope_is_out_of_range() {
    let lead = Lead::start(&[]).await;
    let mut alice = lead.join("alice").await;
    let status = alice.api.ack(pb::AckRequest { seq: 5 }).await.unwrap_err();
    assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
    assert!(status.message().contains("seq"));
    let status = alice
        .api
        .inbox(pb::InboxRequest { after_seq: 5 })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
    assert!(status.message().contains("after_seq"));
}

#[tokio::test]
async fn a_member_whose_stream_closes_is_disconnected() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = mesh_tests::Events::open(&mut operator).await;
    let mut alice = lead.join("alice").await;
    alice.open_inbox(0).await;
    events.member_in("alice", pb::MemberStatus::Working).await;
    alice.inbox = None;
    events
        .member_in("alice", pb::MemberStatus::Disconnected)
        .await;
}
