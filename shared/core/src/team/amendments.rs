//! Amendments: a teammate whose plan is approved asks to add to it (more
//! files and steps, and why), reviewed as a delta against that plan. The
//! approval mode may answer: `auto` approves; a policy approves a small one
//! (`amend_max_files`, none of its files held by another teammate, none
//! under `deny_write`) and leaves the rest to a person, never rejecting on
//! its own. An approval widens the teammate's grant and its hold.

use serde::{Deserialize, Serialize};

use super::{Signer, Team};
use crate::{
    effect::{Effect, Message, Notice},
    error::FieldError,
    grant::{Grant, PathSet},
    names::{RequestId, LEAD},
    protocol::{Decision, Kind, Opening, Party, Request, Status},
    refusal::CoreError,
};

use super::plans::Approval;

/// An amendment's payload as stored (`payload_json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AmendmentPayload {
    /// The approved plan it amends.
    pub plan_id: String,
    /// The task that plan is for.
    pub task_id: String,
    /// What the grant lets the teammate write now.
    pub holds: Vec<String>,
    /// The files to add (those it already holds left out).
    pub files: Vec<String>,
    /// The steps to add.
    pub steps: Vec<String>,
    /// Why.
    pub why: String,
    /// Which of the files other teammates hold.
    pub held_by_others: Vec<String>,
}

impl Request {
    /// An amendment's payload (empty for any other request).
    pub fn amendment(&self) -> AmendmentPayload {
        serde_json::from_str(&self.opening.payload_json).unwrap_or_default()
    }
}

impl Team {
    /// `RequestAmendment`: `sender`, holding an approved plan, asks to add
    /// `files` and `steps` to it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn request_amendment_op(
        &mut self,
        sender: &str,
        id: RequestId,
        files: Vec<String>,
        steps: Vec<String>,
        why: String,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<RequestId, CoreError> {
        if files.is_empty() {
            return Err(
                FieldError::new("files", "is required: the files the plan must add").into(),
            );
        }
        PathSet::new("files", &files)?;
        if why.trim().is_empty() {
            return Err(FieldError::new("why", "is required: say why the plan must grow").into());
        }
        let hold = self.holds.get(sender).cloned().ok_or_else(|| {
            CoreError::Conflict(format!(
                "{sender:?} holds no approved plan to amend; submit a plan (SubmitPlan)"
            ))
        })?;
        let plan_id = self
            .requests
            .iter()
            .filter(|r| r.opening.kind == Kind::PlanApproval && r.status == Status::Approved)
            .filter(|r| r.opening.sender == sender && r.plan().task_id == hold.task_id)
            .last()
            .map(|r| r.id().to_string())
            .unwrap_or_default();
        let files: Vec<String> = files
            .into_iter()
            .filter(|f| !hold.paths.contains(f))
            .collect();
        let overlaps = self.holds.overlaps(sender, &files);
        let payload = AmendmentPayload {
            plan_id: plan_id.clone(),
            task_id: hold.task_id.clone(),
            holds: hold.paths.clone(),
            files: files.clone(),
            steps: steps.clone(),
            why: why.clone(),
            held_by_others: overlaps
                .iter()
                .map(|o| format!("{}: {}", o.member, o.files.join(", ")))
                .collect(),
        };
        let opening = Opening {
            id: id.clone(),
            kind: Kind::Amendment,
            sender: sender.to_owned(),
            target: LEAD.to_owned(),
            payload_json: serde_json::to_string(&payload)
                .map_err(|e| CoreError::Conflict(format!("could not encode the amendment: {e}")))?,
            deadline_unix_ms: None,
        };
        self.check_pending_room(
            &opening,
            None,
            self.rules.pending_per_member,
            self.rules.pending_total,
        )?;
        let outcome = self.requests.open(opening, now)?;
        if outcome.fresh {
            effects.push(Effect::Deliver {
                from: sender.to_owned(),
                to: vec![LEAD.to_owned()],
                message: Message::AmendmentRequest {
                    request_id: id.clone(),
                    plan_id,
                    files: files.clone(),
                    steps,
                    why,
                },
            });
            effects.push(Effect::Notify(Notice::Request(Box::new(outcome.request))));
            let verdict = match &self.approval {
                Approval::Auto => Some(Ok("approved automatically (--approval auto)".to_owned())),
                Approval::Policy(policy) => Some(
                    policy
                        .review_amendment(&files, &overlaps)
                        .map(|()| "approved by policy: a small amendment (amend_max_files), nothing held, nothing denied".to_owned()),
                ),
                Approval::Manual | Approval::Model | Approval::Chain(_) => None,
            };
            match verdict {
                Some(Ok(words)) => {
                    let by = if matches!(self.approval, Approval::Auto) {
                        "auto"
                    } else {
                        "policy"
                    };
                    self.decide_amendment(&id, true, words, (by, None), now, effects)?;
                }
                Some(Err(why)) => self.record_review(
                    &id,
                    "policy",
                    "waits",
                    format!("{why}; waiting for an operator"),
                    now,
                    effects,
                ),
                None => {}
            }
        }
        Ok(id)
    }

    /// `ReviewAmendment`, or the approval mode's word: an approval widens
    /// the sender's hold and grant by the amendment's files.
    pub(super) fn decide_amendment(
        &mut self,
        id: &RequestId,
        approve: bool,
        feedback: String,
        by: Signer<'_>,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Request, CoreError> {
        if approve && self.held_for_owners(id, by, now, effects) {
            return self.held_reply(id);
        }
        let was_pending = self
            .requests
            .get(id)
            .is_some_and(|r| r.status == Status::Pending);
        let decision = Decision {
            approve,
            feedback: feedback.clone(),
            grant: None,
        };
        let outcome = self
            .requests
            .answer(id, Kind::Amendment, &Party::Operator, decision, now)?;
        if outcome.fresh {
            let request = outcome.request.clone();
            let sender = request.opening.sender.clone();
            let payload = request.amendment();
            let mut grant = None;
            if approve {
                if let Some(hold) = self.holds.get(&sender).cloned() {
                    let mut paths = hold.paths;
                    for file in payload.files {
                        if !paths.contains(&file) {
                            paths.push(file);
                        }
                    }
                    self.holds.hold(&sender, paths.clone(), hold.task_id);
                    let mode = self
                        .members
                        .get(&sender)
                        .map(|m| m.mode)
                        .unwrap_or(crate::grant::Mode::AcceptEdits);
                    grant = Some(Grant {
                        mode,
                        write_paths: paths,
                        expires_at_unix_ms: None,
                    });
                    self.notify_member(&sender, effects);
                }
            }
            effects.push(Effect::Deliver {
                from: LEAD.to_owned(),
                to: vec![sender],
                message: Message::AmendmentDecided {
                    request_id: id.clone(),
                    approve: request.status == Status::Approved,
                    feedback: request.feedback.clone(),
                    grant,
                },
            });
            effects.push(Effect::Notify(Notice::Request(Box::new(request))));
        }
        if was_pending {
            let verdict = if approve { "approve" } else { "reject" };
            self.record_signed(id, by, verdict, feedback, now, effects);
        }
        self.requests
            .get(id)
            .cloned()
            .ok_or_else(|| CoreError::NotFound(format!("request_id: no request {id}")))
    }
}
