//! The API a sequence drives, on the tracker; the invariants any tracker
//! keeps; and the runner that checks them after every step.

use std::collections::HashMap;

use mesh_core::{
    names::RequestId,
    protocol::{
        Decision, Kind, Opening, Outcome, Party, Request, ReviewStep, Status, Tracker,
        TransitionError,
    },
};
use proptest::prelude::*;

use crate::events::{resolve, Call, Effect, Op};

/// The API a sequence drives: the tracker's, and the model's beside it.
pub(crate) trait Machine {
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
pub(crate) fn perform(machine: &mut impl Machine, call: &Call) -> Vec<Effect> {
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
pub(crate) fn same_request(a: &Opening, b: &Opening) -> bool {
    let key = |o: &Opening| (o.id.clone(), o.kind, o.sender.clone(), o.target.clone());
    key(a) == key(b) && a.payload_json == b.payload_json
}

pub(crate) fn sorted(mut ids: Vec<RequestId>) -> Vec<RequestId> {
    ids.sort();
    ids
}

/// What must hold of any tracker, whatever happened to it: one request per
/// id, pending exactly when unresolved, an answer exactly when approved or
/// rejected, and the deadline index matching the pending requests.
pub(crate) fn check_invariants(tracker: &Tracker) -> Result<(), TestCaseError> {
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

/// Runs `ops` on one tracker, with `check(before, call, effects, after)`
/// after every step, and the invariants.
pub(crate) fn run(
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
