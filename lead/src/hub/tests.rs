//! The hub's time logic, in process on tokio's paused clock: grace periods
//! and shutdown deadlines end when the clock says so, not after real waits.
//! (The process tests show the same over the wire; these pin the edges.)

use std::time::Duration;

use mesh_core::{
    access::{Call, Caller},
    effect::Message,
    lifecycle::Status,
    names::{Name, RequestId},
    op::{GetRequest, Join, ListTeam, PageAsk, ReportIdle, RequestShutdown},
    protocol::Status as RequestStatus,
};
use tokio::sync::watch;
use tokio_stream::StreamExt as _;

use super::{load_inline, start, Claim, Command, HubConfig, HubHandle};
use crate::{error::HubError, store::MemoryStore};

/// A hub on a memory store, with `grace` and `shutdown_deadline`.
fn hub(
    grace: Duration,
    shutdown_deadline: Duration,
) -> (HubHandle, watch::Sender<Option<super::Stop>>) {
    let config = HubConfig {
        grace,
        shutdown_deadline,
        ..HubConfig::default()
    };
    let (hub, commands) = load_inline(config, Box::new(MemoryStore)).expect("a memory store loads");
    let (stop, stop_rx) = watch::channel(None);
    let (handle, _task) = start(hub, commands, stop_rx);
    (handle, stop)
}

/// Joins `name`; its session token.
async fn join(hub: &HubHandle, name: &str) -> String {
    let op = Join {
        name: Name::parse("name", name).expect("valid name"),
        role: "coder".into(),
        token_budget: 0,
        member_id: uuid::Uuid::new_v4().to_string(),
        session_token: shared::auth::new_token(),
        sandbox: None,
        decoding: None,
    };
    let joined: mesh_core::op::Joined = hub
        .apply(Claim::Known(Caller::Joiner), Call::Join, Ok(op))
        .await
        .expect("joins");
    joined.session_token
}

/// An open inbox stream: the envelopes it receives, and the handle that
/// keeps it open (dropping the receiver closes it).
struct Stream {
    envelopes: crate::outbox::Receiver<crate::inboxes::Entry>,
    name: String,
    id: u64,
}

async fn open_inbox(hub: &HubHandle, token: &str) -> Stream {
    let (name, id, envelopes) = hub
        .call(|reply| Command::Inbox {
            claim: Claim::Session(token.to_owned()),
            after_seq: 0,
            reply,
        })
        .await
        .expect("opens");
    Stream {
        envelopes,
        name,
        id,
    }
}

/// `name`'s status.
async fn status(hub: &HubHandle, name: &str) -> Status {
    let op = ListTeam {
        page: PageAsk {
            after: None,
            size: 100,
        },
    };
    let team: mesh_core::team::TeamPage =
        hub.operate(Claim::operator(), Ok(op)).await.expect("lists");
    team.members
        .entries
        .into_iter()
        .find(|(_, m)| m.member.name.as_str() == name)
        .map(|(_, m)| m.member.life.status())
        .expect("on the team")
}

/// Asks `name` to shut down (by the hub's default deadline); the request id.
async fn ask_to_shut_down(hub: &HubHandle, name: &str) -> String {
    let op = RequestShutdown {
        request_id: RequestId::generate(),
        target: Name::parse("target", name).expect("a valid name"),
        reason: "done".into(),
        deadline_unix_ms: None,
        asked_by: "operator".into(),
    };
    let ticket: RequestId = hub.operate(Claim::operator(), Ok(op)).await.expect("asks");
    ticket.to_string()
}

/// The request's status.
async fn request_status(hub: &HubHandle, id: &str) -> RequestStatus {
    let op = GetRequest {
        request_id: RequestId::existing("request_id", id).expect("a request id"),
    };
    let state: mesh_core::protocol::Request = hub
        .operate(Claim::operator(), Ok(op))
        .await
        .expect("exists");
    state.status
}

const GRACE: Duration = Duration::from_secs(30);
const DEADLINE: Duration = Duration::from_secs(20);

#[tokio::test(start_paused = true)]
async fn a_member_that_never_opens_its_inbox_is_terminated_when_its_grace_ends() {
    let (hub, _stop) = hub(GRACE, DEADLINE);
    join(&hub, "alice").await;
    let bob = join(&hub, "bob").await;
    let mut bobs = open_inbox(&hub, &bob).await;
    assert_eq!(status(&hub, "alice").await, Status::Disconnected);

    tokio::time::sleep(GRACE - Duration::from_secs(1)).await;
    assert_eq!(status(&hub, "alice").await, Status::Disconnected);

    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(status(&hub, "alice").await, Status::Terminated);
    let notice = bobs.envelopes.next().await.expect("bob hears").expect("ok");
    assert!(
        matches!(notice.payload.body(), Message::Terminated(ended)
            if ended.iter().any(|t| t.name == "alice" && t.reason.contains("grace period"))),
        "{notice:?}"
    );
    assert_eq!(status(&hub, "bob").await, Status::Working);
}

#[tokio::test(start_paused = true)]
async fn coming_back_within_the_grace_period_keeps_the_member_and_its_idleness() {
    let (hub, _stop) = hub(GRACE, DEADLINE);
    let alice = join(&hub, "alice").await;
    let stream = open_inbox(&hub, &alice).await;
    let op = ReportIdle {
        reason: String::new(),
    };
    let () = hub
        .apply(
            Claim::Session(alice.clone()),
            Call::Teammate("ReportIdle"),
            Ok(op),
        )
        .await
        .expect("idle");
    assert_eq!(status(&hub, "alice").await, Status::Idle);

    let (name, stream_id) = (stream.name.clone(), stream.id);
    drop(stream);
    hub.notify(Command::StreamClosed { name, stream_id });
    tokio::time::sleep(GRACE - Duration::from_secs(1)).await;
    assert_eq!(status(&hub, "alice").await, Status::Disconnected);
    let _back = open_inbox(&hub, &alice).await;
    assert_eq!(status(&hub, "alice").await, Status::Idle);

    // The old grace period's end passes without effect.
    tokio::time::sleep(GRACE).await;
    assert_eq!(status(&hub, "alice").await, Status::Idle);
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_shutdown_expires_at_its_deadline_and_the_member_works_on() {
    let (hub, _stop) = hub(GRACE, DEADLINE);
    let alice = join(&hub, "alice").await;
    let mut stream = open_inbox(&hub, &alice).await;
    let request_id = ask_to_shut_down(&hub, "alice").await;
    let asked = stream
        .envelopes
        .next()
        .await
        .expect("delivered")
        .expect("ok");
    assert!(matches!(
        asked.payload.body(),
        Message::ShutdownRequest { .. }
    ));
    assert_eq!(status(&hub, "alice").await, Status::ShuttingDown);

    tokio::time::sleep(DEADLINE - Duration::from_secs(1)).await;
    assert_eq!(
        request_status(&hub, &request_id).await,
        RequestStatus::Pending
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        request_status(&hub, &request_id).await,
        RequestStatus::Expired
    );
    assert_eq!(status(&hub, "alice").await, Status::Working);
}

#[tokio::test(start_paused = true)]
async fn a_disconnected_member_asked_to_shut_down_still_ends_with_its_grace() {
    let (hub, _stop) = hub(GRACE, Duration::from_secs(600));
    join(&hub, "alice").await;
    ask_to_shut_down(&hub, "alice").await;
    assert_eq!(status(&hub, "alice").await, Status::ShuttingDown);
    tokio::time::sleep(GRACE + Duration::from_secs(1)).await;
    assert_eq!(status(&hub, "alice").await, Status::Terminated);
}

#[tokio::test(start_paused = true)]
async fn a_hub_told_to_step_down_ends_every_stream_unavailable_and_answers_no_more() {
    let (hub, stop) = hub(GRACE, DEADLINE);
    let alice = join(&hub, "alice").await;
    let mut inbox = open_inbox(&hub, &alice).await;
    stop.send_replace(Some(super::Stop::StepDown(
        "another lead took the lease".into(),
    )));
    let end = inbox
        .envelopes
        .next()
        .await
        .expect("the stream says why it ends")
        .expect_err("an end, not an envelope");
    assert!(
        matches!(&end, crate::outbox::StreamEnd::Gone(why)
            if why.contains("the lead stepped down (another lead took the lease)")),
        "{end:?}"
    );
    assert!(inbox.envelopes.next().await.is_none(), "and then nothing");
    // The hub is gone: a call is refused, not answered.
    assert!(hub
        .apply(
            Claim::Known(Caller::Joiner),
            Call::Join,
            Ok(Join {
                name: Name::parse("name", "bob").expect("valid name"),
                role: "coder".into(),
                token_budget: 0,
                member_id: uuid::Uuid::new_v4().to_string(),
                session_token: shared::auth::new_token(),
                sandbox: None,
                decoding: None,
            }),
        )
        .await
        .is_err());
}

#[tokio::test(start_paused = true)]
async fn a_caller_is_admitted_once_before_its_op_is_looked_at() {
    let (hub, _stop) = hub(GRACE, DEADLINE);
    let alice = join(&hub, "alice").await;
    let _stream = open_inbox(&hub, &alice).await;
    // A stranger learns nothing from validation: refused as a stranger.
    let invalid: Result<ReportIdle, HubError> = Err(HubError::Invalid(
        mesh_core::error::FieldError::new("reason", "too long"),
    ));
    let refused = hub
        .apply(
            Claim::Session("nobody's".into()),
            Call::Teammate("ReportIdle"),
            invalid,
        )
        .await;
    assert!(
        matches!(refused, Err(HubError::Unauthenticated(_))),
        "{refused:?}"
    );
    // The operator's token at a member's door is refused there.
    let refused = hub
        .apply(
            Claim::operator(),
            Call::Teammate("ReportIdle"),
            Ok(ReportIdle {
                reason: String::new(),
            }),
        )
        .await;
    assert!(
        matches!(refused, Err(HubError::PermissionDenied(_))),
        "{refused:?}"
    );
    // What the hub admitted before the op (a result's git) is taken as it is.
    let admitted = hub
        .call(|reply| Command::Admit {
            claim: Claim::Session(alice),
            door: Call::Teammate("ReportIdle"),
            reply,
        })
        .await
        .expect("alice is let in");
    let () = hub
        .apply(
            Claim::Admitted(admitted),
            Call::Teammate("ReportIdle"),
            Ok(ReportIdle {
                reason: String::new(),
            }),
        )
        .await
        .expect("idle");
    assert_eq!(status(&hub, "alice").await, Status::Idle);
}
