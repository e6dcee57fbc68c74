//! The hub's side of the requests: what the model reviewer is given, what
//! it made of a plan, and the request list's pages (the core applies the
//! handshakes: see [`mesh_core::team::Team::apply`]).

use mesh_core::{
    effect::Notice,
    limits,
    names::RequestId,
    op::ReviewPlan,
    protocol::{Kind, Status},
};
use shared::plan::Plan;

use super::{Approval, Claim, Hub};
use crate::error::HubError;

impl Hub {
    /// Hands plan `id` to the model reviewer (`--approval model:FILE`);
    /// one it cannot take is left for an operator, which the watchers hear.
    pub(super) fn start_model_review(&mut self, id: &RequestId) {
        let Approval::Model(reviewer) = &self.config.approval else {
            return;
        };
        let reviewer = reviewer.name();
        let Some(plan) = self.team.requests.get(id).map(|r| r.plan()) else {
            return;
        };
        let job = self.review_job(id, &plan);
        let sent = self.workers.review(job);
        if let Err(why) = sent {
            tracing::warn!(request_id = %id, why, "plan left for an operator");
            self.emit(Notice::ReviewNote {
                request_id: id.clone(),
                reviewer,
                note: format!("no decision, left for an operator: {why}"),
            });
        }
    }

    /// What the model reviewer needs for the plan `id`: who sent it, and the
    /// other members' plans that are approved or still pending.
    pub(super) fn review_job(&self, id: &RequestId, plan: &Plan) -> crate::reviewer::Job {
        let sender = self
            .team
            .requests
            .get(id)
            .map(|r| r.opening.sender.clone())
            .unwrap_or_default();
        let role = self
            .team
            .members
            .get(&sender)
            .map(|m| m.role.clone())
            .unwrap_or_default();
        let others = self
            .team
            .requests
            .iter()
            .filter(|r| r.opening.kind == Kind::PlanApproval && r.opening.sender != sender)
            .filter_map(|r| {
                let status = match r.status {
                    Status::Approved => "approved",
                    Status::Pending => "pending",
                    Status::Rejected | Status::Expired => return None,
                };
                let plan = r.plan();
                Some(crate::reviewer::OtherPlan {
                    member: r.opening.sender.clone(),
                    status,
                    summary: plan.summary,
                    files: plan.files,
                })
            })
            .collect();
        let overlaps = self
            .team
            .overlaps_of(id)
            .iter()
            .map(ToString::to_string)
            .collect();
        crate::reviewer::Job {
            overlaps,
            result: None,
            request_id: id.clone(),
            sender,
            role,
            plan: plan.clone(),
            others,
        }
    }

    /// What the model reviewer made of a plan: its decision recorded as an
    /// operator's review would be, and a note for the watchers either way.
    pub(super) fn model_review(&mut self, outcome: crate::reviewer::Outcome) {
        let (request_id, reviewer, text) = match outcome {
            crate::reviewer::Outcome::Note {
                request_id,
                reviewer,
                text,
            } => (request_id, reviewer, text),
            crate::reviewer::Outcome::Decided {
                request_id,
                verdict,
                by,
                said,
            } => {
                let decided = verdict.map_err(HubError::from).and_then(|verdict| {
                    let review = ReviewPlan {
                        request_id: request_id.clone(),
                        verdict,
                        by: by.clone(),
                    };
                    self.operate(Claim::operator(), Ok(review))
                });
                let text = match decided {
                    Ok(_) => said,
                    Err(e) => format!("decided ({said}) but could not record it: {e}"),
                };
                (request_id, by, text)
            }
            crate::reviewer::Outcome::Used { reviewer, used } => {
                return self.reviewer_used(&reviewer, used);
            }
        };
        self.emit(Notice::ReviewNote {
            request_id,
            reviewer,
            note: limits::cut(&text, limits::REASON),
        });
    }
}
