//! Deciding a request by its id alone: the operator says yes or no (and
//! why), and the request's kind says which review that is — a plan's, a
//! permission's, a result's or an amendment's. Every adapter (the CLI, the
//! console, later A2A) makes this one op instead of asking for the kind
//! first and picking the review itself.

use super::{Op, Team};
use crate::{
    access::Admitted,
    effect::Effect,
    error::FieldError,
    grant::{Grant, Mode},
    op::{Decide, PlanVerdict, ReviewAmendment, ReviewPermission, ReviewPlan, ReviewResult},
    protocol::{Kind, Request},
    refusal::CoreError,
};

/// The review a [`Decide`] is, by its request's kind.
pub(super) enum Review {
    /// A plan's.
    Plan(ReviewPlan),
    /// A permission's.
    Permission(ReviewPermission),
    /// A result's.
    Result(ReviewResult),
    /// An amendment's.
    Amendment(ReviewAmendment),
}

impl Review {
    /// Applies the review; each answers the request as it stands.
    pub(super) fn apply(
        self,
        team: &mut Team,
        now: i64,
        caller: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<Request, CoreError> {
        match self {
            Review::Plan(review) => review.apply(team, now, caller, effects),
            Review::Permission(review) => review.apply(team, now, caller, effects),
            Review::Result(review) => review.apply(team, now, caller, effects),
            Review::Amendment(review) => review.apply(team, now, caller, effects),
        }
    }
}

impl Team {
    /// The review that `decision` is, by the kind of its request.
    pub(super) fn review_of(&self, decision: Decide) -> Result<Review, CoreError> {
        let Decide {
            request_id,
            approve,
            feedback,
            grant,
            allow_overlap,
            by,
            kind: expected,
        } = decision;
        let kind = self
            .requests
            .get(&request_id)
            .map(|r| r.opening.kind)
            .ok_or_else(|| CoreError::NotFound(format!("request_id: no request {request_id}")))?;
        if let Some(expected) = expected.filter(|&e| e != kind) {
            return Err(CoreError::Conflict(format!(
                "request_id: {request_id} is a {} request, not a {}",
                word(kind),
                word(expected)
            )));
        }
        if grant.is_some() && kind != Kind::PlanApproval {
            return Err(FieldError::new(
                "grant",
                format!(
                    "only a plan's approval carries a grant; {request_id} is a {} request",
                    word(kind)
                ),
            )
            .into());
        }
        Ok(match kind {
            Kind::PlanApproval => {
                crate::limits::check("feedback", &feedback, crate::limits::REASON)?;
                let verdict = if approve {
                    PlanVerdict::Approve {
                        grant: grant.unwrap_or_else(|| Grant::of_plan(Mode::AcceptEdits)),
                        feedback,
                        allow_overlap,
                    }
                } else {
                    PlanVerdict::reject(feedback)?
                };
                Review::Plan(ReviewPlan {
                    request_id,
                    verdict,
                    by,
                })
            }
            Kind::Permission => {
                crate::limits::check("feedback", &feedback, crate::limits::REASON)?;
                Review::Permission(ReviewPermission {
                    request_id,
                    approve,
                    feedback,
                    by,
                })
            }
            Kind::Result => Review::Result(ReviewResult::new(request_id, approve, feedback, &by)?),
            Kind::Amendment => {
                Review::Amendment(ReviewAmendment::new(request_id, approve, feedback, &by)?)
            }
            Kind::Shutdown => {
                return Err(CoreError::Conflict(format!(
                    "request_id: {request_id} is a shutdown request, which its member answers \
                     (RespondShutdown); an operator decides plans, permissions, results and \
                     amendments"
                )))
            }
        })
    }
}

/// The kind in a word, as an operator says it.
fn word(kind: Kind) -> &'static str {
    match kind {
        Kind::PlanApproval => "plan",
        Kind::Shutdown => "shutdown",
        Kind::Permission => "permission",
        Kind::Result => "result",
        Kind::Amendment => "amendment",
    }
}
