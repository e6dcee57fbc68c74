//! The result review as the team applies it (`lead serve --repo`): a
//! teammate's finished work opened as a request, reviewed under the same
//! approval modes as plans, landed by the runtime, and only then APPROVED
//! (the task completed with it); a rejection, or a merge that conflicts,
//! goes back to the teammate with the reason. See [`crate::result`].

use super::{
    landing::{is_landing, Landed, LANDING},
    Signer, Team,
};
use crate::{
    effect::{Effect, Message, Notice},
    names::{RequestId, LEAD},
    policy,
    protocol::{Decision, Kind, Opening, Party, Request, Status, TransitionError},
    refusal::CoreError,
    result::{ResultPayload, WorkResult},
    tasks::TaskStatus,
};

use std::sync::Arc;

use super::plans::{Approval, ReviewChain, StageKind};
use crate::chain::{self, OnPass, Verdict};

impl Team {
    /// `SubmitResult`: opens a result request for `sender`'s claimed task
    /// (expiring the pending result it revises), then lets the approval
    /// mode answer it if it can.
    pub(super) fn submit_result_op(
        &mut self,
        sender: &str,
        id: RequestId,
        result: WorkResult,
        supersedes: Option<RequestId>,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<RequestId, CoreError> {
        if !self.rules.repo {
            return Err(CoreError::Conflict(
                "SubmitResult: the lead has no team repository (lead serve --repo); \
                 complete the task with CompleteTask"
                    .into(),
            ));
        }
        if self.requests.get(&id).is_none() {
            self.check_result_task(sender, &result.task_id)?;
        }
        let superseded = self.check_result_supersedes(sender, supersedes.as_ref())?;
        let scope = self
            .holds
            .get(sender)
            .filter(|h| h.task_id == result.task_id)
            .map(|h| h.paths.clone());
        let plan_id = self
            .requests
            .iter()
            .filter(|r| r.opening.kind == Kind::PlanApproval && r.status == Status::Approved)
            .filter(|r| r.opening.sender == sender)
            .filter(|r| r.plan().task_id == result.task_id)
            .last()
            .map(|r| r.id().to_string())
            .unwrap_or_default();
        let outside_grant = policy::outside_scope(&result, scope.as_deref());
        let payload = ResultPayload {
            result,
            supersedes: supersedes
                .as_ref()
                .map_or_else(String::new, ToString::to_string),
            plan_id,
            scope,
            outside_grant,
        };
        let payload_json = serde_json::to_string(&payload).map_err(|e| {
            CoreError::Conflict(format!("could not encode the result's payload: {e}"))
        })?;
        let opening = Opening {
            id: id.clone(),
            kind: Kind::Result,
            sender: sender.to_owned(),
            target: LEAD.to_owned(),
            payload_json,
            deadline_unix_ms: None,
        };
        self.check_pending_room(
            &opening,
            superseded.as_ref(),
            self.rules.pending_per_member,
            self.rules.pending_total,
        )?;
        let outcome = self.requests.open(opening, now)?;
        if outcome.fresh {
            if let Some(old) = superseded {
                if let Some(expired) =
                    self.requests
                        .expire(&old, &format!("superseded by {id}"), now)
                {
                    effects.push(Effect::Notify(Notice::Request(Box::new(expired))));
                }
            }
            effects.extend(self.show_work(sender));
            let result = &payload.result;
            effects.push(Effect::Deliver {
                from: sender.to_owned(),
                to: vec![LEAD.to_owned()],
                message: Message::ResultRequest {
                    request_id: id.clone(),
                    task_id: result.task_id.clone(),
                    base: result.base.clone(),
                    summary: result.summary.clone(),
                    files: result.files.clone(),
                    supersedes: payload.supersedes.clone(),
                },
            });
            effects.push(Effect::Notify(Notice::Request(Box::new(outcome.request))));
            self.auto_review_result(&id, &payload, now, effects)?;
        }
        Ok(id)
    }

    /// Whether `member` has claimed task `task_id`, as a result for it must.
    fn check_result_task(&self, member: &str, task_id: &str) -> Result<(), CoreError> {
        match self.tasks.get(task_id) {
            None => Err(CoreError::Conflict(format!("task_id: no task {task_id:?}"))),
            Some(t) if t.owner == member && t.status == TaskStatus::Claimed => Ok(()),
            Some(t) if t.status == TaskStatus::Completed => Err(CoreError::Conflict(format!(
                "task_id: task {task_id} is completed"
            ))),
            Some(_) => Err(CoreError::Conflict(format!(
                "task_id: task {task_id} is not claimed by {member}; claim it first"
            ))),
        }
    }

    /// What a result of `sender`'s that `supersedes` an earlier one revises:
    /// one of its own results, not approved and not landing. The earlier one
    /// if it is still pending (it expires once the new one is open).
    fn check_result_supersedes(
        &self,
        sender: &str,
        supersedes: Option<&RequestId>,
    ) -> Result<Option<RequestId>, CoreError> {
        let Some(old) = supersedes else {
            return Ok(None);
        };
        let request = self.requests.get(old).ok_or_else(|| {
            crate::error::FieldError::new("supersedes", format!("no request {old}"))
        })?;
        if request.opening.kind != Kind::Result || request.opening.sender != sender {
            return Err(crate::error::FieldError::new(
                "supersedes",
                format!("{old} is not a result of {sender:?}"),
            )
            .into());
        }
        match request.status {
            Status::Approved => Err(CoreError::Conflict(format!(
                "supersedes: {old} is already APPROVED (landed); there is nothing to revise"
            ))),
            Status::Pending if is_landing(request) => Err(CoreError::Conflict(format!(
                "supersedes: {old} is approved and being merged; wait for its answer"
            ))),
            Status::Pending => Ok(Some(old.clone())),
            Status::Rejected | Status::Expired => Ok(None),
        }
    }

    /// Answers a fresh result when the approval mode decides on its own.
    /// A task reviewed by plan alone lands its result without a reviewer,
    /// if its plan was approved and the result stays inside its grant. The
    /// model and the chain review plans; results wait for a person.
    fn auto_review_result(
        &mut self,
        id: &RequestId,
        payload: &ResultPayload,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<(), CoreError> {
        let review = self
            .tasks
            .get(&payload.result.task_id)
            .map(|t| t.review)
            .unwrap_or_default();
        if review == crate::tasks::Review::Plan {
            let verdict = match (&payload.scope, payload.outside_grant.as_slice()) {
                (None, _) => Err(format!(
                    "task {} is reviewed by its plan, and no plan of it was approved; submit one",
                    payload.result.task_id
                )),
                (Some(_), []) => Ok(()),
                (Some(scope), outside) => Err(format!(
                    "grant: the result changes {}, outside what the approved plan lets it write ({})",
                    outside.join(", "),
                    scope.join(", ")
                )),
            };
            return match verdict {
                Ok(()) => self
                    .approve_result(
                        id,
                        ("plan", None),
                        "the task is reviewed by its plan, which was approved; the result stays inside its grant",
                        now,
                        effects,
                    )
                    .map(|_| ()),
                Err(why) => self
                    .reject_result(id, ("plan", None), format!("rejected: {why}"), now, effects)
                    .map(|_| ()),
            };
        }
        match &self.approval {
            Approval::Chain(chain) if chain.results.is_some() => {
                self.run_result_stage(id, 0, now, effects);
                Ok(())
            }
            Approval::Manual | Approval::Model | Approval::Chain(_) => Ok(()),
            Approval::Auto => self
                .approve_result(
                    id,
                    ("auto", None),
                    "approved automatically (--approval auto)",
                    now,
                    effects,
                )
                .map(|_| ()),
            Approval::Policy(policy) => {
                let unmet = policy.review_result(&payload.result, payload.scope.as_deref());
                if unmet.is_empty() {
                    self.approve_result(
                        id,
                        ("policy", None),
                        "approved by policy: every criterion holds",
                        now,
                        effects,
                    )
                    .map(|_| ())
                } else {
                    let feedback = format!("rejected by policy: {}", unmet.join("; "));
                    self.reject_result(id, ("policy", None), feedback, now, effects)
                        .map(|_| ())
                }
            }
        }
    }

    /// `ReviewResult`: the operator approves (the runtime lands it) or
    /// rejects with feedback; `by` says who, for the request's history.
    pub(super) fn review_result_op(
        &mut self,
        id: &RequestId,
        approve: bool,
        feedback: String,
        by: Signer<'_>,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Request, CoreError> {
        if approve {
            let words = if feedback.is_empty() {
                "approved; merging"
            } else {
                &feedback
            };
            self.approve_result(id, by, words, now, effects)
        } else {
            if self.requests.get(id).is_some_and(is_landing) {
                return Err(CoreError::Conflict(format!(
                    "request {id} is approved and being merged; it can no longer be rejected"
                )));
            }
            self.reject_result(id, by, feedback, now, effects)
        }
    }

    /// The request `id`, which must be a result.
    fn result_request(&self, id: &RequestId) -> Result<&Request, CoreError> {
        let request = self
            .requests
            .get(id)
            .ok_or_else(|| TransitionError::NotFound(id.clone()))?;
        if request.opening.kind != Kind::Result {
            return Err(TransitionError::WrongType {
                id: id.clone(),
                request: request.opening.kind,
                answer: Kind::Result,
            }
            .into());
        }
        Ok(request)
    }

    /// An approval: a pending result is noted as approved by `by` and
    /// handed to the runtime to land ([`Effect::Land`]); a retry while it
    /// lands, or once it landed, changes nothing.
    fn approve_result(
        &mut self,
        id: &RequestId,
        by: Signer<'_>,
        words: &str,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Request, CoreError> {
        if !is_landing(self.result_request(id)?) && self.held_for_owners(id, by, now, effects) {
            return self.held_reply(id);
        }
        let request = self.result_request(id)?;
        match request.status {
            Status::Pending if is_landing(request) => Ok(request.clone()),
            Status::Pending => {
                self.record_signed(id, by, LANDING, words.to_owned(), now, effects);
                effects.push(Effect::Land(id.clone()));
                self.result_request(id).cloned()
            }
            Status::Approved => Ok(request.clone()),
            status => Err(TransitionError::AlreadyResolved {
                id: id.clone(),
                status,
            }
            .into()),
        }
    }

    /// A rejection by `by`: the teammate hears the feedback.
    fn reject_result(
        &mut self,
        id: &RequestId,
        by: Signer<'_>,
        feedback: String,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Request, CoreError> {
        let was_pending = self.result_request(id)?.status == Status::Pending;
        let decision = Decision {
            approve: false,
            feedback: feedback.clone(),
            grant: None,
        };
        let request = self.decide_result(id, decision, Landed::default(), now, effects)?;
        if was_pending {
            self.record_signed(id, by, "reject", feedback, now, effects);
        }
        Ok(request)
    }

    /// Records a result decision and, the first time, tells the teammate.
    pub(super) fn decide_result(
        &mut self,
        id: &RequestId,
        decision: Decision,
        landed: Landed,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Request, CoreError> {
        let outcome = self
            .requests
            .answer(id, Kind::Result, &Party::Operator, decision, now)?;
        if outcome.fresh {
            let request = &outcome.request;
            effects.push(Effect::Deliver {
                from: LEAD.to_owned(),
                to: vec![request.opening.sender.clone()],
                message: Message::ResultDecided {
                    request_id: id.clone(),
                    approve: request.status == Status::Approved,
                    feedback: request.feedback.clone(),
                    commit: landed.commit,
                    conflicts: landed.conflicts,
                    branch_head: landed.head,
                },
            });
            effects.push(Effect::Notify(Notice::Request(Box::new(request.clone()))));
        }
        Ok(outcome.request)
    }

    /// With a chain for results, it and the result `id`, if the result
    /// still waits for a decision (not decided, not landing).
    fn result_waiting(&self, id: &RequestId) -> Option<(Arc<ReviewChain>, ResultPayload)> {
        let Approval::Chain(chain) = &self.approval else {
            return None;
        };
        let results = chain.results.clone()?;
        let request = self.requests.get(id)?;
        (request.status == Status::Pending && !is_landing(request))
            .then(|| (results, request.result_payload()))
    }

    /// Runs stage `at` of the results' chain on result `id`, if it still
    /// waits: a policy at once (on what would land), a person by waiting, a
    /// worker (a program in a scratch worktree, a model) by asking the
    /// runtime.
    fn run_result_stage(&mut self, id: &RequestId, at: usize, now: i64, effects: &mut Vec<Effect>) {
        let Some((chain, payload)) = self.result_waiting(id) else {
            return;
        };
        match chain.stages.get(at) {
            None | Some(StageKind::Human) => {
                self.record_review(
                    id,
                    "human",
                    "waits",
                    "waiting for an operator".into(),
                    now,
                    effects,
                );
            }
            Some(StageKind::Policy { policy, on_pass }) => {
                let unmet = policy.review_result(&payload.result, payload.scope.as_deref());
                let verdict = if !unmet.is_empty() {
                    Verdict::Reject {
                        words: unmet.join("; "),
                    }
                } else if *on_pass == OnPass::Approve {
                    Verdict::Approve {
                        grant: None,
                        words: "every criterion holds".into(),
                    }
                } else {
                    Verdict::Pass {
                        words: "every criterion holds".into(),
                    }
                };
                self.result_stage_verdict(id, at, verdict, now, effects);
            }
            Some(StageKind::Worker) => effects.push(Effect::RunStage {
                request_id: id.clone(),
                stage: at,
            }),
        }
    }

    /// Stage `at` of the results' chain said `verdict` of result `id`: the
    /// chain's rule approves it (to land), rejects it, runs the next stage,
    /// or leaves it to a person.
    pub(super) fn result_stage_verdict(
        &mut self,
        id: &RequestId,
        at: usize,
        verdict: Verdict,
        now: i64,
        effects: &mut Vec<Effect>,
    ) {
        let Some((chain, payload)) = self.result_waiting(id) else {
            return;
        };
        let rule = &chain.rule;
        let escalated = rule.escalates(&payload.result.paths());
        let name = rule.name(at).to_owned();
        let next = rule.after(at, &verdict, escalated);
        if let chain::Next::Decide(decided) = next {
            // The deciding stage's word is the decision's step.
            let words = decided.words().to_owned();
            let _ = match decided {
                Verdict::Approve { .. } => {
                    self.approve_result(id, (&name, None), &words, now, effects)
                }
                _ => self.reject_result(
                    id,
                    (&name, None),
                    format!("rejected by {name}: {words}"),
                    now,
                    effects,
                ),
            };
            return;
        }
        self.record_review(
            id,
            &name,
            verdict.label(),
            verdict.words().to_owned(),
            now,
            effects,
        );
        match next {
            chain::Next::Run(following) => self.run_result_stage(id, following, now, effects),
            chain::Next::Person(reason) => self.record_review(
                id,
                "chain",
                "waits",
                format!("{reason}; waiting for an operator"),
                now,
                effects,
            ),
            chain::Next::Decide(_) => {}
        }
    }
}
