//! Property tests of the protocol state machine: arbitrary sequences of events
//! (opens with colliding ids, answers by the right and the wrong party, retries,
//! expiry at any `now`, members leaving, reviews, pruning, a restore) applied in
//! order to one [`Tracker`], checked after every step.
//!
//! Ids, names and payloads come from small pools so that collisions are common;
//! times mostly from a small range so that deadlines come due, now and then from
//! the extremes of `i64`.
#![allow(clippy::unwrap_used)]

use std::{
    collections::HashMap,
    panic::{catch_unwind, AssertUnwindSafe},
};

use mesh_core::{
    grant::Grant,
    names::RequestId,
    protocol::{
        Decision, Kind, Opening, Outcome, Party, Request, ReviewStep, Status, Tracker,
        TransitionError,
    },
};
use proptest::prelude::*;

const IDS: [&str; 4] = ["r0", "r1", "r2", "r3"];
const NAMES: [&str; 4] = ["alice", "bob", "carol", "lead"];
const PAYLOADS: [&str; 2] = [r#"{"summary":"x"}"#, r#"{"summary":"y"}"#];
const VERDICTS: [&str; 3] = ["approve", "reject", "pass"];
/// Times at which `due` is asked after every step.
const PROBES: [i64; 6] = [i64::MIN, -1, 50, 100, 200, i64::MAX];

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        // Proptest finds no lib.rs for an integration test to keep regressions
        // beside; a failure prints its shrunk sequence instead.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn request_id(i: usize) -> RequestId {
    RequestId::existing("request_id", IDS[i]).unwrap()
}

/// The four answers: two approvals and two rejections, all different.
fn decision(i: usize) -> Decision {
    let (approve, feedback, grant) = match i {
        0 => (true, "", None),
        1 => (true, "ok", Some(Grant::plan())),
        2 => (false, "no", None),
        _ => (false, "other", None),
    };
    Decision {
        approve,
        feedback: feedback.into(),
        grant,
    }
}

/// One event, with its values drawn from the pools.
#[derive(Debug, Clone)]
enum Op {
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
enum Call {
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
enum Effect {
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

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::PlanApproval),
        Just(Kind::Shutdown),
        Just(Kind::Permission)
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

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 1..40)
}

/// Turns an op into a call, looking at the tracker only to aim retries and
/// answers at what it holds.
fn resolve(op: &Op, tracker: &Tracker) -> Call {
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
            },
        ),
        &Op::Prune { before } => Call::Prune(before),
        Op::Restore => Call::Restore,
        Op::TakeTouched => Call::TakeTouched,
    }
}

/// The API a sequence drives: the tracker's, and the model's beside it.
trait Machine {
    fn open(&mut self, opening: Opening, now: i64) -> Result<Outcome, TransitionError>;
    fn answer(
        &mut self,
        id: &RequestId,
        kind: Kind,
        caller: &Party,
        decision: Decision,
        now: i64,
    ) -> Result<Outcome, TransitionError>;
    fn expire(&mut self, id: &RequestId, reason: &str, now: i64) -> Option<Request>;
    fn due(&self, now: i64) -> Vec<RequestId>;
    fn pending_involving(&self, name: &str) -> Vec<RequestId>;
    fn review(&mut self, id: &RequestId, step: ReviewStep) -> Option<Request>;
    fn prune_resolved(&mut self, before: i64) -> Vec<RequestId>;
    fn restore(&mut self);
    fn take_touched(&mut self) -> Vec<RequestId>;
}

impl Machine for Tracker {
    fn open(&mut self, opening: Opening, now: i64) -> Result<Outcome, TransitionError> {
        Tracker::open(self, opening, now)
    }
    fn answer(
        &mut self,
        id: &RequestId,
        kind: Kind,
        caller: &Party,
        decision: Decision,
        now: i64,
    ) -> Result<Outcome, TransitionError> {
        Tracker::answer(self, id, kind, caller, decision, now)
    }
    fn expire(&mut self, id: &RequestId, reason: &str, now: i64) -> Option<Request> {
        Tracker::expire(self, id, reason, now)
    }
    fn due(&self, now: i64) -> Vec<RequestId> {
        Tracker::due(self, now)
    }
    fn pending_involving(&self, name: &str) -> Vec<RequestId> {
        Tracker::pending_involving(self, name)
    }
    fn review(&mut self, id: &RequestId, step: ReviewStep) -> Option<Request> {
        Tracker::review(self, id, step)
    }
    fn prune_resolved(&mut self, before: i64) -> Vec<RequestId> {
        Tracker::prune_resolved(self, before)
    }
    fn restore(&mut self) {
        *self = Tracker::restore(self.iter().cloned().collect());
    }
    fn take_touched(&mut self) -> Vec<RequestId> {
        Tracker::take_touched(self)
    }
}

/// Makes a call the way the hub does, and records what came back. The lists
/// of ids are sorted (and touched ids deduplicated), so that no order the docs
/// leave open is pinned down here; `check_invariants` checks that `due` comes
/// soonest first.
fn perform(machine: &mut impl Machine, call: &Call) -> Vec<Effect> {
    match call {
        Call::Open(opening, now) => vec![Effect::Opened(machine.open(opening.clone(), *now))],
        Call::Answer {
            id,
            kind,
            caller,
            decision,
            now,
        } => vec![Effect::Answered(machine.answer(
            id,
            *kind,
            caller,
            decision.clone(),
            *now,
        ))],
        Call::Expire(id, now) => vec![Effect::Expired(
            id.clone(),
            machine.expire(id, "gave up", *now),
        )],
        Call::ExpireDue(now) => {
            let due = sorted(machine.due(*now));
            let mut effects = vec![Effect::Due(due.clone())];
            for id in due {
                let expired = machine.expire(&id, "deadline passed", *now);
                effects.push(Effect::Expired(id, expired));
            }
            effects
        }
        Call::Leave(name, now) => {
            let involving = sorted(machine.pending_involving(name));
            let mut effects = vec![Effect::Involving(involving.clone())];
            for id in involving {
                let expired = machine.expire(&id, "member left", *now);
                effects.push(Effect::Expired(id, expired));
            }
            effects
        }
        Call::Review(id, step) => vec![Effect::Reviewed(machine.review(id, step.clone()))],
        Call::Prune(before) => vec![Effect::Pruned(sorted(machine.prune_resolved(*before)))],
        Call::Restore => {
            machine.restore();
            vec![Effect::Restored]
        }
        Call::TakeTouched => {
            let mut touched = sorted(machine.take_touched());
            touched.dedup();
            vec![Effect::Touched(touched)]
        }
    }
}

/// Whether a reopening is the same request: all but the deadline agree (the
/// deadline is derived from the payload and the clock).
fn same_request(a: &Opening, b: &Opening) -> bool {
    let key = |o: &Opening| (o.id.clone(), o.kind, o.sender.clone(), o.target.clone());
    key(a) == key(b) && a.payload_json == b.payload_json
}

fn sorted(mut ids: Vec<RequestId>) -> Vec<RequestId> {
    ids.sort();
    ids
}

/// The contract written plainly: a list of requests, searched front to back.
#[derive(Debug, Default)]
struct Model {
    /// The requests with their order numbers, oldest first.
    requests: Vec<(u64, Request)>,
    /// The next order number.
    next_ord: u64,
    /// Ids opened or changed since the last take.
    touched: Vec<RequestId>,
}

impl Model {
    fn get(&self, id: &RequestId) -> Option<&Request> {
        self.requests.iter().map(|(_, r)| r).find(|r| r.id() == id)
    }

    fn get_mut(&mut self, id: &RequestId) -> Option<&mut Request> {
        self.requests
            .iter_mut()
            .map(|(_, r)| r)
            .find(|r| r.id() == id)
    }

    fn pending(&self) -> impl Iterator<Item = &Request> {
        self.requests
            .iter()
            .map(|(_, r)| r)
            .filter(|r| r.status == Status::Pending)
    }
}

impl Machine for Model {
    fn open(&mut self, opening: Opening, now: i64) -> Result<Outcome, TransitionError> {
        if let Some(existing) = self.get(&opening.id) {
            return if same_request(&existing.opening, &opening) {
                Ok(Outcome {
                    request: existing.clone(),
                    fresh: false,
                })
            } else {
                Err(TransitionError::IdReused(opening.id))
            };
        }
        let request = Request {
            opening,
            status: Status::Pending,
            decision: None,
            feedback: String::new(),
            created_at_unix_ms: now,
            resolved_at_unix_ms: None,
            reviews: Vec::new(),
        };
        self.touched.push(request.id().clone());
        self.requests.push((self.next_ord, request.clone()));
        self.next_ord += 1;
        Ok(Outcome {
            request,
            fresh: true,
        })
    }

    fn answer(
        &mut self,
        id: &RequestId,
        kind: Kind,
        caller: &Party,
        decision: Decision,
        now: i64,
    ) -> Result<Outcome, TransitionError> {
        let Some(request) = self.get_mut(id) else {
            return Err(TransitionError::NotFound(id.clone()));
        };
        if request.opening.kind != kind {
            return Err(TransitionError::WrongType {
                id: id.clone(),
                request: request.opening.kind,
                answer: kind,
            });
        }
        // Plans and permissions go to the operator, a shutdown to its target.
        let answerer = match kind {
            Kind::PlanApproval | Kind::Permission => Party::Operator,
            Kind::Shutdown => Party::Member(request.opening.target.clone()),
        };
        if caller != &answerer {
            return Err(TransitionError::NotTheAnswerer {
                id: id.clone(),
                answerer,
                caller: caller.clone(),
            });
        }
        if request.status != Status::Pending {
            return if request.decision.as_ref() == Some(&decision) {
                Ok(Outcome {
                    request: request.clone(),
                    fresh: false,
                })
            } else {
                Err(TransitionError::AlreadyResolved {
                    id: id.clone(),
                    status: request.status,
                })
            };
        }
        request.status = if decision.approve {
            Status::Approved
        } else {
            Status::Rejected
        };
        request.feedback = decision.feedback.clone();
        request.decision = Some(decision);
        request.resolved_at_unix_ms = Some(now);
        let request = request.clone();
        self.touched.push(id.clone());
        Ok(Outcome {
            request,
            fresh: true,
        })
    }

    fn expire(&mut self, id: &RequestId, reason: &str, now: i64) -> Option<Request> {
        let request = self.get_mut(id)?;
        if request.status != Status::Pending {
            return None;
        }
        request.status = Status::Expired;
        request.feedback = reason.to_owned();
        request.resolved_at_unix_ms = Some(now);
        let request = request.clone();
        self.touched.push(id.clone());
        Some(request)
    }

    fn due(&self, now: i64) -> Vec<RequestId> {
        let mut due: Vec<(i64, RequestId)> = self
            .pending()
            .filter_map(|r| r.opening.deadline_unix_ms.map(|d| (d, r.id().clone())))
            .filter(|(deadline, _)| *deadline <= now)
            .collect();
        due.sort();
        due.into_iter().map(|(_, id)| id).collect()
    }

    fn pending_involving(&self, name: &str) -> Vec<RequestId> {
        self.pending()
            .filter(|r| r.opening.sender == name || r.opening.target == name)
            .map(|r| r.id().clone())
            .collect()
    }

    fn review(&mut self, id: &RequestId, step: ReviewStep) -> Option<Request> {
        let request = self.get_mut(id)?;
        request.reviews.push(step);
        let request = request.clone();
        self.touched.push(id.clone());
        Some(request)
    }

    fn prune_resolved(&mut self, before: i64) -> Vec<RequestId> {
        let old = |r: &Request| r.resolved_at_unix_ms.is_some_and(|at| at <= before);
        let ids = self
            .requests
            .iter()
            .filter(|(_, r)| old(r))
            .map(|(_, r)| r.id().clone())
            .collect();
        self.requests.retain(|(_, r)| !old(r));
        ids
    }

    fn restore(&mut self) {
        let requests = std::mem::take(&mut self.requests);
        *self = Model::default();
        for (_, request) in requests {
            self.requests.push((self.next_ord, request));
            self.next_ord += 1;
        }
    }

    fn take_touched(&mut self) -> Vec<RequestId> {
        std::mem::take(&mut self.touched)
    }
}

/// What must hold of any tracker, whatever happened to it: one request per
/// id, pending exactly when unresolved, an answer exactly when approved or
/// rejected, and the deadline index matching the pending requests.
fn check_invariants(tracker: &Tracker) -> Result<(), TestCaseError> {
    let mut seen = HashMap::new();
    let mut last_ord = None;
    for (ord, request) in tracker.iter_after(None) {
        prop_assert!(last_ord < Some(ord), "order numbers only grow");
        last_ord = Some(ord);
        let earlier = seen.insert(request.id().clone(), ord);
        prop_assert_eq!(earlier, None, "one request per id");
        prop_assert_eq!(tracker.get(request.id()), Some(request));
        let (status, decision) = (request.status, request.decision.as_ref());
        prop_assert_eq!(request.resolved_at_unix_ms.is_some(), status.is_terminal());
        match status {
            Status::Pending | Status::Expired => prop_assert_eq!(decision, None),
            Status::Approved | Status::Rejected => {
                let decision = decision.ok_or_else(|| TestCaseError::fail("no answer"))?;
                prop_assert_eq!(decision.approve, status == Status::Approved);
                prop_assert_eq!(&request.feedback, &decision.feedback);
            }
        }
    }
    prop_assert_eq!(
        tracker.iter_after(last_ord).count(),
        0,
        "none after the last"
    );
    let mut with_deadline: Vec<(i64, RequestId)> = tracker
        .iter()
        .filter(|r| r.status == Status::Pending)
        .filter_map(|r| r.opening.deadline_unix_ms.map(|d| (d, r.id().clone())))
        .collect();
    with_deadline.sort();
    prop_assert_eq!(tracker.next_deadline(), with_deadline.first().map(|d| d.0));
    let due = tracker.due(i64::MAX);
    let deadlines: Vec<Option<i64>> = due
        .iter()
        .map(|id| tracker.get(id).and_then(|r| r.opening.deadline_unix_ms))
        .collect();
    prop_assert!(deadlines.is_sorted(), "soonest first: {:?}", deadlines);
    let pending: Vec<RequestId> = with_deadline.into_iter().map(|(_, id)| id).collect();
    prop_assert_eq!(sorted(due), sorted(pending));
    Ok(())
}

/// The state a terminal request must keep: everything but its reviews (a
/// reviewer's word may still be recorded after the answer, as the hub does).
fn resolution(request: &Request) -> (Status, Option<Decision>, String, Option<i64>, &Opening) {
    (
        request.status,
        request.decision.clone(),
        request.feedback.clone(),
        request.resolved_at_unix_ms,
        &request.opening,
    )
}

/// Runs `ops` on one tracker, with `check(before, call, effects, after)`
/// after every step, and the invariants.
fn run(
    ops: &[Op],
    mut check: impl FnMut(&Tracker, &Call, &[Effect], &Tracker) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    let mut tracker = Tracker::new();
    for op in ops {
        let call = resolve(op, &tracker);
        let before = tracker.clone();
        let effects = perform(&mut tracker, &call);
        check(&before, &call, &effects, &tracker)?;
        check_invariants(&tracker)?;
    }
    Ok(())
}

fn wild_text() -> impl Strategy<Value = String> {
    prop_oneof![
        (0..NAMES.len()).prop_map(|i| NAMES[i].to_owned()),
        Just(String::new()),
        "\\PC{0,12}",
    ]
}

fn wild_id() -> impl Strategy<Value = RequestId> {
    prop_oneof![
        (0..IDS.len()).prop_map(request_id),
        "\\PC{1,40}".prop_filter_map("a valid id", |s| RequestId::existing("id", &s).ok()),
    ]
}

/// Any call at all: any text for names, payloads and feedback, any time.
fn wild_call() -> impl Strategy<Value = Call> {
    let party = prop_oneof![Just(Party::Operator), wild_text().prop_map(Party::Member)];
    let decision = (any::<bool>(), wild_text(), prop::option::of(any::<i64>())).prop_map(
        |(approve, feedback, lapses)| Decision {
            approve,
            feedback,
            grant: lapses.map(|at| Grant {
                expires_at_unix_ms: Some(at),
                ..Grant::plan()
            }),
        },
    );
    let opening = (wild_id(), kind(), wild_text(), wild_text(), wild_text()).prop_map(
        |(id, kind, sender, target, payload_json)| Opening {
            id,
            kind,
            sender,
            target,
            payload_json,
            deadline_unix_ms: None,
        },
    );
    let t = any::<i64>;
    let open = (opening, prop::option::of(t()), t()).prop_map(|(mut opening, deadline, now)| {
        opening.deadline_unix_ms = deadline;
        Call::Open(opening, now)
    });
    let answer =
        (wild_id(), kind(), party, decision, t()).prop_map(|(id, kind, caller, decision, now)| {
            Call::Answer {
                id,
                kind,
                caller,
                decision,
                now,
            }
        });
    let review = (wild_id(), wild_text(), t()).prop_map(|(id, words, at_unix_ms)| {
        let step = ReviewStep {
            reviewer: "human".into(),
            verdict: "pass".into(),
            words,
            at_unix_ms,
        };
        Call::Review(id, step)
    });
    prop_oneof![
        3 => open,
        3 => answer,
        1 => (wild_id(), t()).prop_map(|(id, now)| Call::Expire(id, now)),
        1 => t().prop_map(Call::ExpireDue),
        1 => (wild_text(), t()).prop_map(|(name, now)| Call::Leave(name, now)),
        1 => review,
        1 => t().prop_map(Call::Prune),
        1 => Just(Call::Restore),
        1 => Just(Call::TakeTouched),
    ]
}

/// The steps of `the_tracker_does_what_its_model_does`.
fn agrees_with_the_model(ops: &[Op]) -> Result<(), TestCaseError> {
    let mut model = Model::default();
    run(ops, |_, call, effects, after| {
        let expected = perform(&mut model, call);
        prop_assert_eq!(effects, &expected[..], "{:?}", call);
        let held: Vec<(u64, &Request)> = after.iter_after(None).collect();
        let modelled: Vec<(u64, &Request)> =
            model.requests.iter().map(|(ord, r)| (*ord, r)).collect();
        prop_assert_eq!(&held, &modelled);
        for (i, (ord, _)) in modelled.iter().enumerate() {
            let tail: Vec<(u64, &Request)> = after.iter_after(Some(*ord)).collect();
            prop_assert_eq!(&tail[..], &modelled[i + 1..]);
        }
        for i in 0..IDS.len() {
            prop_assert_eq!(after.get(&request_id(i)), model.get(&request_id(i)));
        }
        for now in PROBES {
            prop_assert_eq!(
                sorted(after.due(now)),
                sorted(model.due(now)),
                "due at {}",
                now
            );
        }
        for name in NAMES {
            let (held, modelled) = (after.pending_involving(name), model.pending_involving(name));
            prop_assert_eq!(sorted(held), sorted(modelled));
        }
        Ok(())
    })
}

/// The steps of `terminal_states_never_change`.
fn keeps_terminal_states(ops: &[Op]) -> Result<(), TestCaseError> {
    let mut terminal: HashMap<RequestId, Request> = HashMap::new();
    run(ops, |_, call, effects, after| {
        for effect in effects {
            if let Effect::Pruned(ids) = effect {
                for id in ids {
                    let gone = terminal.remove(id);
                    prop_assert!(gone.is_some(), "{} pruned while pending", id);
                }
            }
        }
        for (id, was) in &terminal {
            let now = after.get(id);
            prop_assert!(now.is_some(), "{} vanished without pruning", id);
            let now = now.ok_or_else(|| TestCaseError::fail("vanished"))?;
            prop_assert_eq!(resolution(now), resolution(was), "{:?} changed it", call);
            prop_assert!(now.reviews.starts_with(&was.reviews));
        }
        for request in after.iter().filter(|r| r.status.is_terminal()) {
            terminal
                .entry(request.id().clone())
                .or_insert_with(|| request.clone());
        }
        Ok(())
    })
}

/// The steps of `one_answer_wins`.
fn takes_one_answer(ops: &[Op]) -> Result<(), TestCaseError> {
    let mut resolutions: HashMap<RequestId, usize> = HashMap::new();
    run(ops, |before, call, effects, after| {
        for effect in effects {
            let id = match effect {
                Effect::Pruned(ids) => {
                    ids.iter().for_each(|id| {
                        resolutions.remove(id);
                    });
                    continue;
                }
                Effect::Answered(Ok(Outcome {
                    request,
                    fresh: true,
                })) => request.id(),
                Effect::Expired(id, Some(_)) => id,
                _ => continue,
            };
            let count = resolutions.entry(id.clone()).or_default();
            *count += 1;
            prop_assert_eq!(*count, 1, "{} resolved twice, by {:?}", id, call);
        }
        let Call::Answer {
            id,
            kind,
            caller,
            decision,
            now,
        } = call
        else {
            return Ok(());
        };
        let [Effect::Answered(result)] = effects else {
            return Err(TestCaseError::fail("an answer has one result"));
        };
        let Some(prior) = before.get(id) else {
            prop_assert_eq!(result, &Err(TransitionError::NotFound(id.clone())));
            return Ok(());
        };
        if prior.opening.kind != *kind || &prior.answerer() != caller {
            prop_assert!(result.is_err(), "wrong type or party accepted");
            prop_assert_eq!(after.get(id), Some(prior));
            return Ok(());
        }
        match prior.status {
            Status::Pending => {
                let outcome = result
                    .as_ref()
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert!(outcome.fresh);
                let want = if decision.approve {
                    Status::Approved
                } else {
                    Status::Rejected
                };
                prop_assert_eq!(outcome.request.status, want);
                prop_assert_eq!(outcome.request.decision.as_ref(), Some(decision));
                prop_assert_eq!(outcome.request.resolved_at_unix_ms, Some(*now));
                prop_assert_eq!(after.get(id), Some(&outcome.request));
            }
            _ if prior.decision.as_ref() == Some(decision) => {
                let retry = Outcome {
                    request: prior.clone(),
                    fresh: false,
                };
                prop_assert_eq!(result, &Ok(retry));
                prop_assert_eq!(after.get(id), Some(prior));
            }
            status => {
                let refused = TransitionError::AlreadyResolved {
                    id: id.clone(),
                    status,
                };
                prop_assert_eq!(result, &Err(refused));
                prop_assert_eq!(after.get(id), Some(prior));
            }
        }
        Ok(())
    })
}

/// The steps of `ids_are_unique`.
fn keeps_ids_unique(ops: &[Op]) -> Result<(), TestCaseError> {
    run(ops, |before, call, effects, after| {
        let Call::Open(opening, now) = call else {
            return Ok(());
        };
        let [Effect::Opened(result)] = effects else {
            return Err(TestCaseError::fail("an open has one result"));
        };
        let count = after.iter().count();
        match before.get(&opening.id) {
            Some(prior) => {
                prop_assert_eq!(count, before.iter().count());
                prop_assert_eq!(after.get(&opening.id), Some(prior));
                if same_request(&prior.opening, opening) {
                    let retry = Outcome {
                        request: prior.clone(),
                        fresh: false,
                    };
                    prop_assert_eq!(result, &Ok(retry));
                } else {
                    prop_assert_eq!(result, &Err(TransitionError::IdReused(opening.id.clone())));
                }
            }
            None => {
                prop_assert_eq!(count, before.iter().count() + 1);
                let outcome = result
                    .as_ref()
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert!(outcome.fresh);
                let request = &outcome.request;
                prop_assert_eq!(&request.opening, opening);
                prop_assert_eq!(request.status, Status::Pending);
                prop_assert_eq!(request.created_at_unix_ms, *now);
                prop_assert!(request.decision.is_none() && request.reviews.is_empty());
                prop_assert_eq!(after.get(&opening.id), Some(request));
            }
        }
        Ok(())
    })
}

/// The steps of `errors_are_values_and_nothing_panics`.
fn refuses_without_panicking(calls: &[Call]) -> Result<(), TestCaseError> {
    let mut tracker = Tracker::new();
    for call in calls {
        let before: Vec<Request> = tracker.iter().cloned().collect();
        let effects = catch_unwind(AssertUnwindSafe(|| perform(&mut tracker, call)))
            .map_err(|_| TestCaseError::fail(format!("panicked on {call:?}")))?;
        for effect in &effects {
            let (Effect::Opened(Err(error)) | Effect::Answered(Err(error))) = effect else {
                continue;
            };
            let id = match call {
                Call::Open(opening, _) => &opening.id,
                Call::Answer { id, .. } => id,
                _ => return Err(TestCaseError::fail("only opens and answers fail")),
            };
            prop_assert!(error.to_string().contains(&id.to_string()), "{}", error);
            let after: Vec<Request> = tracker.iter().cloned().collect();
            prop_assert_eq!(&after, &before, "{} changed the tracker", error);
        }
        check_invariants(&tracker)?;
    }
    Ok(())
}

fn calls() -> impl Strategy<Value = Vec<Call>> {
    prop::collection::vec(wild_call(), 1..40)
}

proptest! {
    #![proptest_config(config())]

    /// The tracker does exactly what a plain model of the contract does: every
    /// result of every call (errors included, in the contract's order: unknown
    /// id, wrong type, wrong party, already resolved), every request held, with
    /// its order number, the deadlines due at any time, the pending requests
    /// of each member and the touched ids, after any sequence of events.
    #[test]
    fn the_tracker_does_what_its_model_does(ops in ops()) {
        agrees_with_the_model(&ops)?;
    }

    /// Terminal states never change: once a request is approved, rejected or
    /// expired, no later event (answer, retry, reopen, expiry, a member
    /// leaving, a restore) changes its status, answer, feedback, resolution
    /// time or opening; reviews may only be added; it leaves only by pruning.
    #[test]
    fn terminal_states_never_change(ops in ops()) {
        keeps_terminal_states(&ops)?;
    }

    /// One answer wins: each request is resolved freshly (answered or expired)
    /// at most once; the answerer's first answer to a pending request is taken
    /// as it is; the same answer again is `Ok` with `fresh == false` and the
    /// request unchanged; a different answer afterwards is `AlreadyResolved`
    /// naming the status; an answer of the wrong type or party changes nothing.
    #[test]
    fn one_answer_wins(ops in ops()) {
        takes_one_answer(&ops)?;
    }

    /// Ids are unique: opening an id in use never adds a request or changes
    /// the one there; the same request again (whatever its deadline) is `Ok`
    /// with `fresh == false` and the request as it stands, a different one
    /// (kind, sender, target or payload) is `IdReused`; a new id opens one
    /// pending request, created at `now`.
    #[test]
    fn ids_are_unique(ops in ops()) {
        keeps_ids_unique(&ops)?;
    }

    /// Errors are values: with any text for ids, names, payloads and feedback
    /// and any time from `i64::MIN` to `i64::MAX`, no call panics, every
    /// refusal is an error that names the request id and changes nothing, and
    /// the tracker's invariants hold after every call.
    #[test]
    fn errors_are_values_and_nothing_panics(calls in calls()) {
        refuses_without_panicking(&calls)?;
    }
}
