//! One state machine for every protocol: plan approval, shutdown, permission.
//!
//! ```text
//!                 answer(approve)        +----------+
//!            +-------------------------->| APPROVED |
//!            |                           +----------+
//!  open  +---------+  answer(reject)     +----------+
//! ------>| PENDING |-------------------->| REJECTED |
//!        +---------+                     +----------+
//!            |  expire (deadline passed, +----------+
//!            +-------------------------->| EXPIRED  |
//!               or the answering party left)  +-----+
//! ```
//!
//! Terminal states never change. Every answer is checked in the contract's
//! order: unknown id, wrong type, wrong party, already resolved (a retry of the
//! same answer is `Ok` with `fresh == false`: the caller sends nothing twice).
//!
//! The [`Tracker`] is a pure type: no I/O, no clock (`now` comes in as an
//! argument), no async. The lead's hub owns one.

mod request;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::names::RequestId;

pub use request::{Decision, Kind, Opening, Party, Request, ReviewStep, Status};

/// A transition the contract forbids.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// No request has this id.
    #[error("request_id: no request {0}")]
    NotFound(RequestId),
    /// The answer's protocol is not the request's.
    #[error("request {id} is a {request} request; a {answer} answer does not apply to it")]
    WrongType {
        /// The request.
        id: RequestId,
        /// Its protocol.
        request: Kind,
        /// The answer's protocol.
        answer: Kind,
    },
    /// Someone other than the answering party answered.
    #[error("request {id} must be answered by {answerer}, not by {caller}")]
    NotTheAnswerer {
        /// The request.
        id: RequestId,
        /// Who must answer.
        answerer: Party,
        /// Who tried.
        caller: Party,
    },
    /// The request is resolved and this answer differs from the one it has.
    #[error("request {id} is already {status}; a different answer cannot change it")]
    AlreadyResolved {
        /// The request.
        id: RequestId,
        /// Its terminal status.
        status: Status,
    },
    /// A client-chosen id was reused for a different request.
    #[error("request_id: {0} is already used by a different request")]
    IdReused(RequestId),
}

/// What an accepted event did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The request as it now stands.
    pub request: Request,
    /// `false` for a retry that changed nothing: send nothing again.
    pub fresh: bool,
}

/// What pending requests hold: how many, and their bytes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    /// Pending requests.
    pub count: usize,
    /// Their bytes ([`Opening::bytes`]).
    pub bytes: usize,
}

impl Load {
    fn add(&mut self, bytes: usize) {
        self.count += 1;
        self.bytes += bytes;
    }

    fn remove(&mut self, bytes: usize) {
        self.count = self.count.saturating_sub(1);
        self.bytes = self.bytes.saturating_sub(bytes);
    }
}

/// Every protocol request the lead knows, by id.
#[derive(Debug, Default, Clone)]
pub struct Tracker {
    /// The requests by the order they were opened in (a number that only
    /// grows, so that a page of a list can continue after one).
    requests: BTreeMap<u64, Request>,
    /// The next order number.
    next_ord: u64,
    /// Order number by id.
    by_id: HashMap<RequestId, u64>,
    /// Order numbers of pending requests, oldest first.
    pending: BTreeSet<u64>,
    /// Pending requests with a deadline, soonest first.
    deadlines: BTreeSet<(i64, RequestId)>,
    /// Ids changed since the last [`Tracker::take_touched`], for persistence.
    touched: Vec<RequestId>,
    /// What pending requests hold, by sender.
    pending_by_sender: HashMap<String, Load>,
    /// What pending requests hold, in all.
    pending_total: Load,
    /// What resolved requests (kept for the record) hold.
    resolved: Load,
}

impl Tracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// A tracker holding requests as they were persisted, oldest first.
    pub fn restore(requests: Vec<Request>) -> Self {
        let mut tracker = Self::new();
        for request in requests {
            let ord = tracker.next_ord;
            tracker.next_ord += 1;
            if request.status == Status::Pending {
                tracker.pending.insert(ord);
                tracker.count_pending(&request.opening);
                if let Some(deadline) = request.opening.deadline_unix_ms {
                    tracker.deadlines.insert((deadline, request.id().clone()));
                }
            } else {
                tracker.resolved.add(request.opening.bytes());
            }
            tracker.by_id.insert(request.id().clone(), ord);
            tracker.requests.insert(ord, request);
        }
        tracker
    }

    /// What the pending requests `sender` opened hold.
    pub fn pending_load(&self, sender: &str) -> Load {
        self.pending_by_sender
            .get(sender)
            .copied()
            .unwrap_or_default()
    }

    /// What every pending request holds.
    pub fn pending_total(&self) -> Load {
        self.pending_total
    }

    fn count_pending(&mut self, opening: &Opening) {
        let bytes = opening.bytes();
        self.pending_total.add(bytes);
        self.pending_by_sender
            .entry(opening.sender.clone())
            .or_default()
            .add(bytes);
    }

    fn uncount_pending(&mut self, opening: &Opening) {
        let bytes = opening.bytes();
        self.pending_total.remove(bytes);
        if let Some(load) = self.pending_by_sender.get_mut(&opening.sender) {
            load.remove(bytes);
            if load.count == 0 {
                self.pending_by_sender.remove(&opening.sender);
            }
        }
    }

    /// The ids of requests opened or changed since the last call.
    pub fn take_touched(&mut self) -> Vec<RequestId> {
        std::mem::take(&mut self.touched)
    }

    /// The requests opened or changed since the last call, each once, in
    /// the tracker's order (oldest first), as the store must write them so
    /// that a tracker restored from it keeps that order; those forgotten
    /// since are not among them.
    pub fn take_changed(&mut self) -> Vec<Request> {
        let mut ords: Vec<u64> = self
            .take_touched()
            .iter()
            .filter_map(|id| self.by_id.get(id).copied())
            .collect();
        ords.sort_unstable();
        ords.dedup();
        ords.iter()
            .filter_map(|ord| self.requests.get(ord).cloned())
            .collect()
    }

    /// A request by id.
    pub fn get(&self, id: &RequestId) -> Option<&Request> {
        self.by_id.get(id).and_then(|ord| self.requests.get(ord))
    }

    /// Every request, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Request> {
        self.requests.values()
    }

    /// Every request opened after the one with order number `after` (all for
    /// `None`), oldest first, with its order number.
    pub fn iter_after(&self, after: Option<u64>) -> impl Iterator<Item = (u64, &Request)> {
        let start = after.map_or(0, |after| after.saturating_add(1));
        self.requests.range(start..).map(|(ord, r)| (*ord, r))
    }

    /// Forgets every request resolved at or before `before`; returns their ids.
    pub fn prune_resolved(&mut self, before: i64) -> Vec<RequestId> {
        let old: Vec<(u64, RequestId)> = self
            .requests
            .iter()
            .filter(|(_, r)| r.resolved_at_unix_ms.is_some_and(|at| at <= before))
            .map(|(ord, r)| (*ord, r.id().clone()))
            .collect();
        self.forget(old)
    }

    /// Forgets the oldest resolved requests until those kept hold at most
    /// `max_bytes`; returns their ids.
    pub fn prune_resolved_over(&mut self, max_bytes: usize) -> Vec<RequestId> {
        let mut over = self.resolved.bytes.saturating_sub(max_bytes);
        if over == 0 {
            return Vec::new();
        }
        let mut old = Vec::new();
        for (ord, request) in &self.requests {
            if over == 0 {
                break;
            }
            if request.status != Status::Pending {
                over = over.saturating_sub(request.opening.bytes());
                old.push((*ord, request.id().clone()));
            }
        }
        self.forget(old)
    }

    /// What resolved requests, kept for the record, hold.
    pub fn resolved_load(&self) -> Load {
        self.resolved
    }

    fn forget(&mut self, old: Vec<(u64, RequestId)>) -> Vec<RequestId> {
        for (ord, id) in &old {
            if let Some(request) = self.requests.remove(ord) {
                self.resolved.remove(request.opening.bytes());
            }
            self.by_id.remove(id);
        }
        old.into_iter().map(|(_, id)| id).collect()
    }

    /// A new request arrives. The same id with the same request again is a
    /// retry (`fresh == false`); with a different one, `IdReused`.
    pub fn open(&mut self, opening: Opening, now: i64) -> Result<Outcome, TransitionError> {
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
        let request = Request::pending(opening, now);
        if let Some(deadline) = request.opening.deadline_unix_ms {
            self.deadlines.insert((deadline, request.id().clone()));
        }
        let ord = self.next_ord;
        self.next_ord += 1;
        self.by_id.insert(request.id().clone(), ord);
        self.pending.insert(ord);
        self.count_pending(&request.opening);
        self.requests.insert(ord, request.clone());
        self.touched.push(request.id().clone());
        Ok(Outcome {
            request,
            fresh: true,
        })
    }

    /// `caller` answers request `id` with a `kind` answer.
    pub fn answer(
        &mut self,
        id: &RequestId,
        kind: Kind,
        caller: &Party,
        decision: Decision,
        now: i64,
    ) -> Result<Outcome, TransitionError> {
        let index = *self
            .by_id
            .get(id)
            .ok_or_else(|| TransitionError::NotFound(id.clone()))?;
        let request = self
            .requests
            .get_mut(&index)
            .ok_or_else(|| TransitionError::NotFound(id.clone()))?;
        if request.opening.kind != kind {
            return Err(TransitionError::WrongType {
                id: id.clone(),
                request: request.opening.kind,
                answer: kind,
            });
        }
        let answerer = request.answerer();
        if &answerer != caller {
            return Err(TransitionError::NotTheAnswerer {
                id: id.clone(),
                answerer,
                caller: caller.clone(),
            });
        }
        match request.status {
            Status::Pending => {
                request.status = if decision.approve {
                    Status::Approved
                } else {
                    Status::Rejected
                };
                request.feedback = decision.feedback.clone();
                request.decision = Some(decision);
                request.resolved_at_unix_ms = Some(now);
                if let Some(deadline) = request.opening.deadline_unix_ms {
                    self.deadlines.remove(&(deadline, id.clone()));
                }
                self.pending.remove(&index);
                self.touched.push(id.clone());
                let request = request.clone();
                self.uncount_pending(&request.opening);
                self.resolved.add(request.opening.bytes());
                Ok(Outcome {
                    request,
                    fresh: true,
                })
            }
            status if request.decision.as_ref() == Some(&decision) => {
                debug_assert!(status.is_terminal());
                Ok(Outcome {
                    request: request.clone(),
                    fresh: false,
                })
            }
            status => Err(TransitionError::AlreadyResolved {
                id: id.clone(),
                status,
            }),
        }
    }

    /// Records a reviewer's word on request `id`; the request as it now
    /// stands (`None` if there is no such request).
    pub fn review(&mut self, id: &RequestId, step: ReviewStep) -> Option<Request> {
        let ord = *self.by_id.get(id)?;
        let request = self.requests.get_mut(&ord)?;
        request.reviews.push(step);
        self.touched.push(id.clone());
        Some(request.clone())
    }

    /// Request `id` expires, if it is still pending; `None` otherwise.
    pub fn expire(&mut self, id: &RequestId, reason: &str, now: i64) -> Option<Request> {
        let index = *self.by_id.get(id)?;
        let request = self.requests.get_mut(&index)?;
        if request.status != Status::Pending {
            return None;
        }
        request.status = Status::Expired;
        request.feedback = reason.to_owned();
        request.resolved_at_unix_ms = Some(now);
        if let Some(deadline) = request.opening.deadline_unix_ms {
            self.deadlines.remove(&(deadline, id.clone()));
        }
        self.pending.remove(&index);
        self.touched.push(id.clone());
        let request = request.clone();
        self.uncount_pending(&request.opening);
        self.resolved.add(request.opening.bytes());
        Some(request)
    }

    /// The pending requests whose deadline is at or before `now`.
    pub fn due(&self, now: i64) -> Vec<RequestId> {
        self.deadlines
            .iter()
            .take_while(|(deadline, _)| *deadline <= now)
            .map(|(_, id)| id.clone())
            .collect()
    }

    /// The earliest deadline of a pending request.
    pub fn next_deadline(&self) -> Option<i64> {
        self.deadlines.first().map(|(deadline, _)| *deadline)
    }

    /// The pending requests that `name` sends or must answer.
    pub fn pending_involving(&self, name: &str) -> Vec<RequestId> {
        self.pending()
            .filter(|r| r.opening.sender == name || r.opening.target == name)
            .map(|r| r.id().clone())
            .collect()
    }

    /// Requests still waiting, oldest first.
    fn pending(&self) -> impl Iterator<Item = &Request> {
        self.pending.iter().filter_map(|i| self.requests.get(i))
    }
}

/// Whether two openings are the same request. The deadline is left out: it is
/// derived from the payload and the clock (a shutdown retried without a
/// deadline of its own gets a new default one, and is still the same request).
fn same_request(a: &Opening, b: &Opening) -> bool {
    a.id == b.id
        && a.kind == b.kind
        && a.sender == b.sender
        && a.target == b.target
        && a.payload_json == b.payload_json
}

#[cfg(test)]
mod tests;
