//! Landing an approved result: the runtime merged it into the team's
//! branch, or could not (`Landed`); and the results a restarted lead must
//! still land.

use super::Team;
use crate::{
    effect::Effect,
    names::RequestId,
    protocol::{Decision, Kind, Request, Status},
    refusal::CoreError,
    result::Landing,
};

impl Team {
    /// `Landed`: the runtime merged approved result `id` (it is APPROVED,
    /// and its task completed with its summary), or could not (REJECTED,
    /// with the conflicting paths). Anything else (not landing) is ignored.
    pub(super) fn landed_op(
        &mut self,
        id: &RequestId,
        landing: Landing,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<(), CoreError> {
        // A merge the branch has answers any pending result (a lead that
        // stopped before the approval was durable finds it there); a failed
        // one, only a result being landed.
        let merged = matches!(landing, Landing::Merged { .. });
        let Some(request) = self.requests.get(id).filter(|r| {
            r.opening.kind == Kind::Result
                && r.status == Status::Pending
                && (merged || is_landing(r))
        }) else {
            return Ok(());
        };
        let sender = request.opening.sender.clone();
        let result = request.result_payload().result;
        match landing {
            Landing::Merged { commit } => {
                let decision = Decision {
                    approve: true,
                    feedback: format!("landed on the team branch as {commit}"),
                    grant: None,
                };
                let landed = Landed {
                    commit: commit.clone(),
                    head: commit.clone(),
                    conflicts: Vec::new(),
                };
                self.decide_result(id, decision, landed, now, effects)?;
                self.record_review(
                    id,
                    "merge",
                    "approve",
                    format!("merged as {commit}"),
                    now,
                    effects,
                );
                // The work landed; the task is done with it, if its owner
                // still holds it (a task given back meanwhile stays open).
                let _ = self.complete_task_op(
                    &sender,
                    &result.task_id,
                    crate::tasks::Completion::summary(result.summary),
                    now,
                    effects,
                );
            }
            Landing::Conflict { paths, head } => {
                let feedback = format!(
                    "conflicts with the team branch (now {head}) in: {}; rebase onto {head} \
                     and submit again (supersedes {id})",
                    paths.join(", ")
                );
                let decision = Decision {
                    approve: false,
                    feedback: feedback.clone(),
                    grant: None,
                };
                let landed = Landed {
                    commit: String::new(),
                    head,
                    conflicts: paths,
                };
                self.decide_result(id, decision, landed, now, effects)?;
                self.record_review(id, "merge", "reject", feedback, now, effects);
            }
            Landing::Failed(why) => {
                let feedback = format!("could not be merged: {why}");
                let decision = Decision {
                    approve: false,
                    feedback: feedback.clone(),
                    grant: None,
                };
                self.decide_result(id, decision, Landed::default(), now, effects)?;
                self.record_review(id, "merge", "error", feedback, now, effects);
            }
        }
        Ok(())
    }

    /// The approved results still to land, oldest first: what a lead that
    /// restarted must finish.
    pub fn landings(&self) -> Vec<RequestId> {
        self.requests
            .iter()
            .filter(|r| r.status == Status::Pending && is_landing(r))
            .map(|r| r.id().clone())
            .collect()
    }
}

/// What a result's answer says of its landing.
#[derive(Debug, Default)]
pub(super) struct Landed {
    pub(super) commit: String,
    pub(super) head: String,
    pub(super) conflicts: Vec<String>,
}

/// The verdict a reviewer's approval of a result leaves in its history
/// while the runtime lands it.
pub(super) const LANDING: &str = "approve";

/// Whether result `request` is approved and being landed: pending, and its
/// reviewer's last word an approval.
pub(crate) fn is_landing(request: &Request) -> bool {
    debug_assert_eq!(
        LANDING, "approve",
        "Request::is_landing reads the same word"
    );
    request.is_landing()
}
