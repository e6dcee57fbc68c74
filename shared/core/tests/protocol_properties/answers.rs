//! Answers: terminal states never change, and one answer wins.

use std::collections::HashMap;

use mesh_core::{
    names::RequestId,
    protocol::{Decision, Opening, Outcome, Request, Status, TransitionError},
};
use proptest::prelude::*;

use crate::{
    config,
    events::{ops, Call, Effect, Op},
    machine::run,
};

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

proptest! {
    #![proptest_config(config())]

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
}
