//! Any call at all, with any text and any time: errors are values and
//! nothing panics.

use std::panic::{catch_unwind, AssertUnwindSafe};

use mesh_core::{
    grant::Grant,
    names::RequestId,
    protocol::{Decision, Opening, Party, Request, ReviewStep, Tracker},
};
use proptest::prelude::*;

use crate::{
    config,
    events::{kind, Call, Effect},
    machine::{check_invariants, perform},
    request_id, IDS, NAMES,
};

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
            person: None,
            owner_rules: Vec::new(),
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

    /// Errors are values: with any text for ids, names, payloads and feedback
    /// and any time from `i64::MIN` to `i64::MAX`, no call panics, every
    /// refusal is an error that names the request id and changes nothing, and
    /// the tracker's invariants hold after every call.
    #[test]
    fn errors_are_values_and_nothing_panics(calls in calls()) {
        refuses_without_panicking(&calls)?;
    }
}
