//! Ids: one request per id, whatever is opened again.

use mesh_core::protocol::{Outcome, Status, TransitionError};
use proptest::prelude::*;

use crate::{
    config,
    events::{ops, Call, Effect, Op},
    machine::{run, same_request},
};

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

proptest! {
    #![proptest_config(config())]

    /// Ids are unique: opening an id in use never adds a request or changes
    /// the one there; the same request again (whatever its deadline) is `Ok`
    /// with `fresh == false` and the request as it stands, a different one
    /// (kind, sender, target or payload) is `IdReused`; a new id opens one
    /// pending request, created at `now`.
    #[test]
    fn ids_are_unique(ops in ops()) {
        keeps_ids_unique(&ops)?;
    }
}
