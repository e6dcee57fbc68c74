//! The contract written plainly, and the tracker held to it.

use mesh_core::{
    names::RequestId,
    protocol::{
        Decision, Kind, Opening, Outcome, Party, Request, ReviewStep, Status, TransitionError,
    },
};
use proptest::prelude::*;

use crate::{
    config,
    events::{ops, Op},
    machine::{perform, run, same_request, sorted, Machine},
    request_id, IDS, NAMES, PROBES,
};

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
            waits_for: Vec::new(),
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
            Kind::PlanApproval | Kind::Permission | Kind::Result | Kind::Amendment => {
                Party::Operator
            }
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
}
