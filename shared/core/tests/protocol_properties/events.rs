//! The events a sequence is made of, the tracker calls they resolve to and
//! what the calls return, and the strategies that draw them from the pools.

use mesh_core::{
    names::RequestId,
    protocol::{
        Decision, Kind, Opening, Outcome, Party, Request, ReviewStep, Tracker, TransitionError,
    },
};
use proptest::prelude::*;

use crate::{decision, request_id, IDS, NAMES, PAYLOADS, VERDICTS};

/// One event, with its values drawn from the pools.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// A new request (or a reused id).
    Open {
        id: usize,
        kind: Kind,
        sender: usize,
        target: usize,
        payload: usize,
        deadline: Option<i64>,
        now: i64,
    },
    /// The request holding `id` sent again as it is, its deadline perhaps not.
    Reopen {
        id: usize,
        deadline: Option<i64>,
        now: i64,
    },
    /// An answer: of the request's own kind unless `kind`, by its answerer
    /// unless `caller`; the answer it already has unless `decision`.
    Answer {
        id: usize,
        kind: Option<Kind>,
        caller: Option<Party>,
        decision: Option<usize>,
        now: i64,
    },
    /// One request expires.
    Expire { id: usize, now: i64 },
    /// Every request due at `now` expires, as the hub's timer does it.
    ExpireDue { now: i64 },
    /// A member leaves: what it sends or must answer expires, as the hub does it.
    Leave { name: usize, now: i64 },
    /// A reviewer's word.
    Review { id: usize, verdict: usize, now: i64 },
    /// Requests resolved at or before `before` are forgotten.
    Prune { before: i64 },
    /// The requests are persisted and a new tracker restored from them.
    Restore,
    /// The touched ids are collected, as the hub's commit does it.
    TakeTouched,
}

/// One call of the tracker's API (or a hub-like loop of them), fully resolved.
#[derive(Debug, Clone)]
pub(crate) enum Call {
    Open(Opening, i64),
    Answer {
        id: RequestId,
        kind: Kind,
        caller: Party,
        decision: Decision,
        now: i64,
    },
    Expire(RequestId, i64),
    ExpireDue(i64),
    Leave(String, i64),
    Review(RequestId, ReviewStep),
    Prune(i64),
    Restore,
    TakeTouched,
}

/// What a call returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Effect {
    Opened(Result<Outcome, TransitionError>),
    Answered(Result<Outcome, TransitionError>),
    Due(Vec<RequestId>),
    Involving(Vec<RequestId>),
    Expired(RequestId, Option<Request>),
    Reviewed(Option<Request>),
    Pruned(Vec<RequestId>),
    Restored,
    Touched(Vec<RequestId>),
}

fn time() -> impl Strategy<Value = i64> {
    prop_oneof![
        // A coarse grid, so that deadlines, answers and prunes often meet.
        12 => (-1i64..20).prop_map(|t| t * 10),
        1 => prop_oneof![Just(i64::MIN), Just(i64::MAX), any::<i64>()],
    ]
}

pub(crate) fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::PlanApproval),
        Just(Kind::Shutdown),
        Just(Kind::Permission),
        Just(Kind::Result),
        Just(Kind::Amendment)
    ]
}

fn party() -> impl Strategy<Value = Party> {
    prop_oneof![
        Just(Party::Operator),
        (0..NAMES.len()).prop_map(|i| Party::Member(NAMES[i].into())),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let id = || 0..IDS.len();
    let name = || 0..NAMES.len();
    let deadline = || prop::option::of(time());
    let open = (
        id(),
        kind(),
        name(),
        name(),
        0..PAYLOADS.len(),
        deadline(),
        time(),
    )
        .prop_map(
            |(id, kind, sender, target, payload, deadline, now)| Op::Open {
                id,
                kind,
                sender,
                target,
                payload,
                deadline,
                now,
            },
        );
    let reopen =
        (id(), deadline(), time()).prop_map(|(id, deadline, now)| Op::Reopen { id, deadline, now });
    // Mostly aimed at the request's own kind and answerer, to reach its states.
    let answer = (
        id(),
        prop::option::weighted(0.2, kind()),
        prop::option::weighted(0.2, party()),
        prop::option::weighted(0.7, 0..4usize),
        time(),
    )
        .prop_map(|(id, kind, caller, decision, now)| Op::Answer {
            id,
            kind,
            caller,
            decision,
            now,
        });
    let review = (id(), 0..VERDICTS.len(), time()).prop_map(|(id, verdict, now)| Op::Review {
        id,
        verdict,
        now,
    });
    prop_oneof![
        4 => open,
        2 => reopen,
        6 => answer,
        1 => (id(), time()).prop_map(|(id, now)| Op::Expire { id, now }),
        1 => time().prop_map(|now| Op::ExpireDue { now }),
        1 => (name(), time()).prop_map(|(name, now)| Op::Leave { name, now }),
        1 => review,
        1 => time().prop_map(|before| Op::Prune { before }),
        1 => Just(Op::Restore),
        1 => Just(Op::TakeTouched),
    ]
}

pub(crate) fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 1..40)
}

/// Turns an op into a call, looking at the tracker only to aim retries and
/// answers at what it holds.
pub(crate) fn resolve(op: &Op, tracker: &Tracker) -> Call {
    match op {
        &Op::Open {
            id,
            kind,
            sender,
            target,
            payload,
            deadline,
            now,
        } => Call::Open(
            Opening {
                id: request_id(id),
                kind,
                sender: NAMES[sender].into(),
                target: NAMES[target].into(),
                payload_json: PAYLOADS[payload].into(),
                deadline_unix_ms: deadline,
            },
            now,
        ),
        &Op::Reopen { id, deadline, now } => {
            let mut opening = match tracker.get(&request_id(id)) {
                Some(request) => request.opening.clone(),
                None => Opening {
                    id: request_id(id),
                    kind: Kind::PlanApproval,
                    sender: NAMES[0].into(),
                    target: "lead".into(),
                    payload_json: PAYLOADS[0].into(),
                    deadline_unix_ms: None,
                },
            };
            opening.deadline_unix_ms = deadline;
            Call::Open(opening, now)
        }
        Op::Answer {
            id,
            kind,
            caller,
            decision: which,
            now,
        } => {
            let id = request_id(*id);
            let request = tracker.get(&id);
            Call::Answer {
                kind: kind
                    .or(request.map(|r| r.opening.kind))
                    .unwrap_or(Kind::PlanApproval),
                caller: caller
                    .clone()
                    .or(request.map(Request::answerer))
                    .unwrap_or(Party::Operator),
                id,
                decision: which
                    .map(decision)
                    .or(request.and_then(|r| r.decision.clone()))
                    .unwrap_or_else(|| decision(0)),
                now: *now,
            }
        }
        &Op::Expire { id, now } => Call::Expire(request_id(id), now),
        &Op::ExpireDue { now } => Call::ExpireDue(now),
        &Op::Leave { name, now } => Call::Leave(NAMES[name].into(), now),
        &Op::Review { id, verdict, now } => Call::Review(
            request_id(id),
            ReviewStep {
                reviewer: "policy".into(),
                verdict: VERDICTS[verdict].into(),
                words: format!("step at {now}"),
                at_unix_ms: now,
                person: None,
                owner_rules: Vec::new(),
            },
        ),
        &Op::Prune { before } => Call::Prune(before),
        Op::Restore => Call::Restore,
        Op::TakeTouched => Call::TakeTouched,
    }
}
