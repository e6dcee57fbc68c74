//! Table tests: every (state, event) pair for every protocol.

use super::*;

const ALL_KINDS: [Kind; 5] = [
    Kind::PlanApproval,
    Kind::Shutdown,
    Kind::Permission,
    Kind::Result,
    Kind::Amendment,
];
const ALL_STATES: [Status; 4] = [
    Status::Pending,
    Status::Approved,
    Status::Rejected,
    Status::Expired,
];
const T0: i64 = 1_000;
const T1: i64 = 2_000;

fn id() -> RequestId {
    RequestId::existing("request_id", "7c0e6a39-8d1f-4b5e-9d7a-2b1c3d4e5f60").expect("valid id")
}

fn opening(kind: Kind) -> Opening {
    let (sender, target) = match kind {
        Kind::PlanApproval | Kind::Permission | Kind::Result | Kind::Amendment => ("alice", "lead"),
        Kind::Shutdown => ("lead", "alice"),
    };
    Opening {
        id: id(),
        kind,
        sender: sender.into(),
        target: target.into(),
        payload_json: r#"{"summary":"x"}"#.into(),
        deadline_unix_ms: (kind == Kind::Shutdown).then_some(5_000),
    }
}

/// The party that must answer `kind`, and one that must not.
fn parties(kind: Kind) -> (Party, Party) {
    match kind {
        Kind::PlanApproval | Kind::Permission | Kind::Result | Kind::Amendment => {
            (Party::Operator, Party::Member("alice".into()))
        }
        Kind::Shutdown => (Party::Member("alice".into()), Party::Member("bob".into())),
    }
}

fn approve() -> Decision {
    Decision {
        approve: true,
        feedback: String::new(),
        grant: None,
    }
}

fn reject(feedback: &str) -> Decision {
    Decision {
        approve: false,
        feedback: feedback.into(),
        grant: None,
    }
}

/// A tracker holding one request of `kind` in `state`.
fn tracker_in(kind: Kind, state: Status) -> Tracker {
    let mut tracker = Tracker::new();
    tracker.open(opening(kind), T0).expect("opens");
    let (answerer, _) = parties(kind);
    match state {
        Status::Pending => {}
        Status::Approved => {
            tracker
                .answer(&id(), kind, &answerer, approve(), T0)
                .expect("approves");
        }
        Status::Rejected => {
            tracker
                .answer(&id(), kind, &answerer, reject("no"), T0)
                .expect("rejects");
        }
        Status::Expired => {
            tracker
                .expire(&id(), "deadline passed", T0)
                .expect("expires");
        }
    }
    assert_eq!(tracker.get(&id()).map(|r| r.status), Some(state));
    tracker
}

fn other_kind(kind: Kind) -> Kind {
    match kind {
        Kind::PlanApproval => Kind::Shutdown,
        Kind::Shutdown => Kind::Permission,
        Kind::Permission => Kind::Result,
        Kind::Result => Kind::Amendment,
        Kind::Amendment => Kind::PlanApproval,
    }
}

#[test]
fn answering_an_unknown_id_is_not_found() {
    for kind in ALL_KINDS {
        for state in ALL_STATES {
            let mut tracker = tracker_in(kind, state);
            let unknown = RequestId::existing("request_id", "nope").expect("valid");
            let (answerer, _) = parties(kind);
            assert_eq!(
                tracker.answer(&unknown, kind, &answerer, approve(), T1),
                Err(TransitionError::NotFound(unknown.clone()))
            );
        }
    }
}

#[test]
fn an_answer_of_another_type_is_refused_in_every_state() {
    for kind in ALL_KINDS {
        for state in ALL_STATES {
            let mut tracker = tracker_in(kind, state);
            let before = tracker.get(&id()).cloned();
            let wrong = other_kind(kind);
            let (answerer, _) = parties(kind);
            let err = tracker
                .answer(&id(), wrong, &answerer, approve(), T1)
                .expect_err("wrong type");
            assert_eq!(
                err,
                TransitionError::WrongType {
                    id: id(),
                    request: kind,
                    answer: wrong
                }
            );
            let message = err.to_string();
            assert!(message.contains(kind.as_str()), "{message}");
            assert!(message.contains(wrong.as_str()), "{message}");
            assert_eq!(tracker.get(&id()).cloned(), before, "nothing changes");
        }
    }
}

#[test]
fn an_answer_from_the_wrong_party_is_refused_in_every_state() {
    for kind in ALL_KINDS {
        for state in ALL_STATES {
            let mut tracker = tracker_in(kind, state);
            let before = tracker.get(&id()).cloned();
            let (answerer, intruder) = parties(kind);
            assert_eq!(
                tracker.answer(&id(), kind, &intruder, approve(), T1),
                Err(TransitionError::NotTheAnswerer {
                    id: id(),
                    answerer,
                    caller: intruder
                })
            );
            assert_eq!(tracker.get(&id()).cloned(), before, "nothing changes");
        }
    }
}

/// (state, decision) → expected: `Ok((status, fresh))` or the terminal status named in the error.
#[test]
fn answers_by_the_right_party_follow_the_status_table() {
    type Row = (Status, fn() -> Decision, Result<(Status, bool), Status>);
    let table: [Row; 12] = [
        (Status::Pending, approve, Ok((Status::Approved, true))),
        (
            Status::Pending,
            || reject("no"),
            Ok((Status::Rejected, true)),
        ),
        (
            Status::Pending,
            || reject("other"),
            Ok((Status::Rejected, true)),
        ),
        (Status::Approved, approve, Ok((Status::Approved, false))),
        (Status::Approved, || reject("no"), Err(Status::Approved)),
        (Status::Approved, || reject("other"), Err(Status::Approved)),
        (Status::Rejected, approve, Err(Status::Rejected)),
        (
            Status::Rejected,
            || reject("no"),
            Ok((Status::Rejected, false)),
        ),
        (Status::Rejected, || reject("other"), Err(Status::Rejected)),
        (Status::Expired, approve, Err(Status::Expired)),
        (Status::Expired, || reject("no"), Err(Status::Expired)),
        (Status::Expired, || reject("other"), Err(Status::Expired)),
    ];
    for kind in ALL_KINDS {
        for (state, decision, expected) in &table {
            let mut tracker = tracker_in(kind, *state);
            let before = tracker.get(&id()).cloned().expect("present");
            let (answerer, _) = parties(kind);
            let got = tracker.answer(&id(), kind, &answerer, decision(), T1);
            let context = format!("{kind} in {state} answered {:?}", decision());
            match expected {
                Ok((status, fresh)) => {
                    let outcome = got.expect(&context);
                    assert_eq!(outcome.request.status, *status, "{context}");
                    assert_eq!(outcome.fresh, *fresh, "{context}");
                    if *fresh {
                        assert_eq!(outcome.request.resolved_at_unix_ms, Some(T1), "{context}");
                        assert_eq!(outcome.request.feedback, decision().feedback, "{context}");
                    } else {
                        assert_eq!(
                            outcome.request, before,
                            "a retry changes nothing: {context}"
                        );
                    }
                }
                Err(status) => {
                    let err = got.expect_err(&context);
                    assert_eq!(
                        err,
                        TransitionError::AlreadyResolved {
                            id: id(),
                            status: *status
                        },
                        "{context}"
                    );
                    assert!(err.to_string().contains(status.as_str()), "{context}");
                    assert_eq!(
                        tracker.get(&id()).cloned(),
                        Some(before),
                        "terminal states never change"
                    );
                }
            }
        }
    }
}

#[test]
fn only_pending_requests_expire() {
    for kind in ALL_KINDS {
        for state in ALL_STATES {
            let mut tracker = tracker_in(kind, state);
            let before = tracker.get(&id()).cloned();
            let expired = tracker.expire(&id(), "gone", T1);
            if state == Status::Pending {
                let request = expired.expect("pending expires");
                assert_eq!(request.status, Status::Expired);
                assert_eq!(request.feedback, "gone");
                assert_eq!(request.resolved_at_unix_ms, Some(T1));
            } else {
                assert_eq!(expired, None);
                assert_eq!(tracker.get(&id()).cloned(), before);
            }
        }
    }
}

#[test]
fn reopening_an_id_is_a_retry_or_a_conflict_in_every_state() {
    for kind in ALL_KINDS {
        for state in ALL_STATES {
            let mut tracker = tracker_in(kind, state);
            let before = tracker.get(&id()).cloned().expect("present");

            let retry = tracker
                .open(opening(kind), T1)
                .expect("same request again is a retry");
            assert!(!retry.fresh);
            assert_eq!(retry.request, before);

            let mut later_deadline = opening(kind);
            later_deadline.deadline_unix_ms = later_deadline.deadline_unix_ms.map(|d| d + 1);
            assert!(
                !tracker
                    .open(later_deadline, T1)
                    .expect("deadline is derived")
                    .fresh
            );

            let mut different = opening(kind);
            different.payload_json = r#"{"summary":"y"}"#.into();
            assert_eq!(
                tracker.open(different, T1),
                Err(TransitionError::IdReused(id()))
            );

            let mut other_type = opening(other_kind(kind));
            other_type.payload_json = before.opening.payload_json.clone();
            assert_eq!(
                tracker.open(other_type, T1),
                Err(TransitionError::IdReused(id()))
            );
            assert_eq!(tracker.get(&id()).cloned(), Some(before));
        }
    }
}

#[test]
fn deadlines_come_due_in_order_and_only_while_pending() {
    let mut tracker = tracker_in(Kind::Shutdown, Status::Pending);
    assert_eq!(tracker.next_deadline(), Some(5_000));
    assert!(tracker.due(4_999).is_empty());
    assert_eq!(tracker.due(5_000), vec![id()]);
    tracker.expire(&id(), "deadline passed", 5_000);
    assert_eq!(tracker.next_deadline(), None);
    assert!(tracker.due(10_000).is_empty());
}

#[test]
fn touched_ids_are_reported_once_and_restore_rebuilds_the_indexes() {
    let mut tracker = tracker_in(Kind::Shutdown, Status::Pending);
    assert_eq!(tracker.take_touched(), vec![id()]);
    assert!(tracker.take_touched().is_empty());
    let retry = tracker.open(opening(Kind::Shutdown), T1).expect("retry");
    assert!(!retry.fresh);
    assert!(tracker.take_touched().is_empty(), "a retry changes nothing");

    let restored = Tracker::restore(tracker.iter().cloned().collect());
    assert_eq!(restored.next_deadline(), Some(5_000));
    assert_eq!(restored.pending_involving("alice"), vec![id()]);
    let mut restored = restored;
    let (answerer, _) = parties(Kind::Shutdown);
    restored
        .answer(&id(), Kind::Shutdown, &answerer, approve(), T1)
        .expect("answers");
    assert_eq!(restored.take_touched(), vec![id()]);
    assert_eq!(restored.next_deadline(), None);
    assert!(restored.pending_involving("alice").is_empty());
}

#[test]
fn pending_requests_involving_a_member_are_found_by_sender_and_target() {
    let mut tracker = Tracker::new();
    tracker.open(opening(Kind::Shutdown), T0).expect("opens");
    assert_eq!(tracker.pending_involving("alice"), vec![id()]);
    assert!(tracker.pending_involving("bob").is_empty());
    tracker.expire(&id(), "left", T1);
    assert!(tracker.pending_involving("alice").is_empty());
}

fn opening_n(n: u128, sender: &str, payload: usize) -> Opening {
    Opening {
        id: RequestId::existing("request_id", &uuid::Uuid::from_u128(n).to_string())
            .expect("valid id"),
        kind: Kind::PlanApproval,
        sender: sender.into(),
        target: "lead".into(),
        payload_json: "p".repeat(payload),
        deadline_unix_ms: None,
    }
}

#[test]
fn pending_and_resolved_loads_follow_every_transition_and_restore() {
    let mut tracker = Tracker::new();
    let a1 = opening_n(1, "alice", 100);
    let per = a1.bytes();
    tracker.open(a1.clone(), T0).expect("opens");
    tracker.open(a1, T0).expect("a retry");
    tracker.open(opening_n(2, "alice", 100), T0).expect("opens");
    let bobs = opening_n(3, "bob", 100).bytes();
    tracker.open(opening_n(3, "bob", 100), T0).expect("opens");
    assert_eq!(
        tracker.pending_load("alice"),
        Load {
            count: 2,
            bytes: 2 * per
        }
    );
    assert_eq!(
        tracker.pending_total(),
        Load {
            count: 3,
            bytes: 2 * per + bobs
        }
    );
    let first = opening_n(1, "alice", 100).id;
    tracker
        .answer(&first, Kind::PlanApproval, &Party::Operator, approve(), T1)
        .expect("approves");
    tracker.expire(&opening_n(3, "bob", 100).id, "gone", T1);
    assert_eq!(
        tracker.pending_load("alice"),
        Load {
            count: 1,
            bytes: per
        }
    );
    assert_eq!(tracker.pending_load("bob"), Load::default());
    assert_eq!(
        tracker.resolved_load(),
        Load {
            count: 2,
            bytes: per + bobs
        }
    );
    let restored = Tracker::restore(tracker.iter().cloned().collect());
    assert_eq!(restored.pending_total(), tracker.pending_total());
    assert_eq!(restored.resolved_load(), tracker.resolved_load());
    // Over a budget of bob's request's bytes: the oldest resolved goes.
    let forgotten = tracker.prune_resolved_over(bobs);
    assert_eq!(forgotten, vec![first]);
    assert_eq!(
        tracker.resolved_load(),
        Load {
            count: 1,
            bytes: bobs
        }
    );
    assert!(tracker.prune_resolved_over(bobs).is_empty());
    assert_eq!(tracker.prune_resolved(T1).len(), 1);
    assert_eq!(tracker.resolved_load(), Load::default());
    assert_eq!(
        tracker.pending_total(),
        Load {
            count: 1,
            bytes: per
        }
    );
}
