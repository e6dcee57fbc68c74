//! The plan-approval and permission handshakes as the team applies them:
//! a request opened, the approval mode that may answer it without a person
//! ([`Approval`]), a reviewer's word in its history, the decision told to
//! the teammate; and the reviewer chain stage by stage.

use std::sync::Arc;

use serde::Serialize;

use super::{Signer, Team};
use crate::{
    chain::{self, OnPass, Rule, Verdict},
    effect::{Effect, Message, Notice},
    grant::{Grant, Mode},
    names::{RequestId, LEAD},
    op::PlanVerdict,
    plan::Plan,
    policy::{self, Policy},
    protocol::{Decision, Kind, Opening, Request, ReviewStep, Status},
    refusal::CoreError,
};

/// Who answers plans (and permissions) without a person.
#[derive(Debug, Clone, Default)]
pub enum Approval {
    /// Requests wait for an operator.
    #[default]
    Manual,
    /// Every plan and permission is approved at once (for demos).
    Auto,
    /// A policy's criteria decide plans, and writes it denies.
    Policy(Policy),
    /// A model reviews each plan: the runtime runs it
    /// ([`Effect::ReviewPlan`]), and its verdict comes back as the
    /// operator's `ReviewPlan`. Permissions wait for a person.
    Model,
    /// A chain of stages, tried in order; what they cannot decide waits for
    /// a person. Permissions wait for a person.
    Chain(Arc<ReviewChain>),
}

impl Approval {
    /// How the history names its decisions: `auto`, `policy`, `model`,
    /// `chain`, `operator`.
    pub fn name(&self) -> &'static str {
        match self {
            Approval::Manual => "operator",
            Approval::Auto => "auto",
            Approval::Policy(_) => "policy",
            Approval::Model => "model",
            Approval::Chain(_) => "chain",
        }
    }
}

/// A chain of reviewer stages, as the team runs it (shared: each step of a
/// plan's review reads it while the team changes).
#[derive(Debug)]
pub struct ReviewChain {
    /// What each stage is.
    pub stages: Vec<StageKind>,
    /// What follows each verdict.
    pub rule: Rule,
    /// The chain results go through (`lead serve --repo`); none: results
    /// wait for a person.
    pub results: Option<Arc<ReviewChain>>,
}

/// What a stage of a chain is, as far as the team runs it.
#[derive(Debug, Clone)]
pub enum StageKind {
    /// An operator decides.
    Human,
    /// A policy's criteria, checked at once.
    Policy {
        /// The criteria.
        policy: Policy,
        /// What a plan that meets them gets.
        on_pass: OnPass,
    },
    /// Work the runtime runs off the team (a program, a model): it asks
    /// with [`Effect::RunStage`], and the verdict comes back as
    /// `op::StageVerdict`.
    Worker,
}

/// A plan request's payload as stored (`payload_json`). The fields are in
/// the order of their names, as the `json!` object that wrote it before had
/// them, so a retry matches a payload an earlier version stored.
#[derive(Serialize)]
struct PlanPayload<'a> {
    overlaps: Vec<OverlapOut<'a>>,
    plan: PlanOut<'a>,
    supersedes: &'a str,
}

#[derive(Serialize)]
struct PlanOut<'a> {
    body: &'a str,
    files: &'a [String],
    steps: &'a [String],
    summary: &'a str,
    task_id: &'a str,
    tests: &'a [String],
}

#[derive(Serialize)]
struct OverlapOut<'a> {
    files: &'a [String],
    member: &'a str,
}

impl Team {
    /// `SubmitPlan`: opens a plan-approval request from `sender` (expiring
    /// the pending plan it revises), then lets the approval mode answer it
    /// if it can.
    pub(super) fn submit_plan_op(
        &mut self,
        sender: &str,
        id: RequestId,
        plan: Plan,
        supersedes: Option<RequestId>,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<RequestId, CoreError> {
        let superseded = self.check_supersedes(sender, supersedes.as_ref())?;
        if !plan.task_id.is_empty() && self.requests.get(&id).is_none() {
            self.check_plan_task(sender, &plan.task_id)?;
        }
        let supersedes = supersedes.as_ref().map_or("", RequestId::as_str);
        let overlaps = self.holds.overlaps(sender, &plan.files);
        let payload = PlanPayload {
            overlaps: overlaps
                .iter()
                .map(|o| OverlapOut {
                    files: &o.files,
                    member: &o.member,
                })
                .collect(),
            plan: PlanOut {
                body: &plan.body,
                files: &plan.files,
                steps: &plan.steps,
                summary: &plan.summary,
                task_id: &plan.task_id,
                tests: &plan.tests,
            },
            supersedes,
        };
        let payload = serde_json::to_string(&payload).map_err(|e| {
            CoreError::Conflict(format!("could not encode the plan's payload: {e}"))
        })?;
        let opening = Opening {
            id: id.clone(),
            kind: Kind::PlanApproval,
            sender: sender.to_owned(),
            target: LEAD.to_owned(),
            payload_json: payload,
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
            effects.push(Effect::Deliver {
                from: sender.to_owned(),
                to: vec![LEAD.to_owned()],
                message: Message::PlanApprovalRequest {
                    request_id: id.clone(),
                    plan: plan.clone(),
                    supersedes: supersedes.to_owned(),
                },
            });
            effects.push(Effect::Notify(Notice::Request(Box::new(outcome.request))));
            self.auto_review_plan(&id, &plan, now, effects)?;
        }
        Ok(id)
    }

    /// Answers a fresh plan request when the approval mode decides on its
    /// own, or starts its review.
    fn auto_review_plan(
        &mut self,
        id: &RequestId,
        plan: &Plan,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<(), CoreError> {
        let decision = match &self.approval {
            Approval::Manual => return Ok(()),
            Approval::Chain(_) => {
                self.run_stage(id, 0, now, effects);
                return Ok(());
            }
            Approval::Model => {
                effects.push(Effect::ReviewPlan(id.clone()));
                return Ok(());
            }
            Approval::Auto => Decision {
                approve: true,
                feedback: "approved automatically (--approval auto)".into(),
                grant: Some(Grant::of_plan(Mode::AcceptEdits)),
            },
            Approval::Policy(policy) => match policy.review(plan, &self.overlaps_of(id)) {
                policy::Verdict::Approve(grant) => Decision {
                    approve: true,
                    feedback: format!(
                        "approved by policy: every criterion holds{}",
                        overlap_note(&self.overlaps_of(id))
                    ),
                    grant: Some(grant),
                },
                policy::Verdict::Reject(unmet) => Decision {
                    approve: false,
                    feedback: format!("rejected by policy: {}", unmet.join("; ")),
                    grant: None,
                },
            },
        };
        if decision.approve && self.held_for_owners(id, (self.approval.name(), None), now, effects)
        {
            return Ok(());
        }
        self.decide_plan(id, decision, now, effects).map(|_| ())
    }

    /// `ReviewPlan`: the operator (or the model reviewer, as one) approves
    /// with a grant or rejects with feedback; `by` says who, for the
    /// request's history.
    pub(super) fn review_plan_op(
        &mut self,
        id: RequestId,
        verdict: PlanVerdict,
        by: Signer<'_>,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Request, CoreError> {
        let was_pending = self
            .requests
            .get(&id)
            .is_some_and(|r| r.status == Status::Pending);
        let decision = match verdict {
            PlanVerdict::Approve {
                grant,
                feedback,
                allow_overlap,
            } => {
                self.check_overlap(&id, allow_overlap)?;
                if self.held_for_owners(&id, by, now, effects) {
                    return self.held_reply(&id);
                }
                Decision {
                    approve: true,
                    feedback,
                    grant: Some(grant),
                }
            }
            PlanVerdict::Reject { feedback } => Decision {
                approve: false,
                feedback,
                grant: None,
            },
        };
        let verdict = if decision.approve {
            "approve"
        } else {
            "reject"
        };
        let words = decision.feedback.clone();
        let decided = self.decide_plan(&id, decision, now, effects)?;
        if was_pending {
            self.record_signed(&id, by, verdict, words, now, effects);
        }
        Ok(self.requests.get(&id).cloned().unwrap_or(decided))
    }

    /// Adds a reviewer's word to request `id`'s history and shows it.
    pub(super) fn record_review(
        &mut self,
        id: &RequestId,
        by: &str,
        verdict: &str,
        words: String,
        now: i64,
        effects: &mut Vec<Effect>,
    ) {
        self.record_signed(id, (by, None), verdict, words, now, effects);
    }

    /// Adds a reviewer's word to request `id`'s history and shows it,
    /// signed by the operator who said it, if one did.
    pub(super) fn record_signed(
        &mut self,
        id: &RequestId,
        (by, person): Signer<'_>,
        verdict: &str,
        words: String,
        now: i64,
        effects: &mut Vec<Effect>,
    ) {
        // An owner's approval says which owners rules it counts for.
        let owner_rules = match (verdict, person) {
            ("approve", Some(person)) => self.owners_counted(id, person),
            _ => Vec::new(),
        };
        let step = ReviewStep {
            reviewer: by.to_owned(),
            verdict: verdict.to_owned(),
            words: crate::limits::cut(&words, crate::limits::REASON),
            at_unix_ms: now,
            person: person.cloned(),
            owner_rules,
        };
        if let Some(request) = self.requests.review(id, step) {
            effects.push(Effect::Notify(Notice::Request(Box::new(request))));
        }
    }

    /// Records a plan decision and, the first time, tells the teammate (an
    /// approval's grant sets its mode).
    fn decide_plan(
        &mut self,
        id: &RequestId,
        decision: Decision,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Request, CoreError> {
        let decision = self.sandbox_rule(id, decision);
        let outcome = self.answer_plan(id, decision, now)?;
        if outcome.fresh {
            let teammate = outcome.request.opening.sender.clone();
            if let Some(grant) = outcome
                .request
                .decision
                .as_ref()
                .and_then(|d| d.grant.as_ref())
            {
                self.members.set_mode(&teammate, grant.mode);
                self.notify_member(&teammate, effects);
            }
            told(
                &outcome.request,
                Message::plan_decided(&outcome.request),
                effects,
            );
        }
        Ok(outcome.request)
    }

    /// An approval turned into a rejection where the lead (or its policy)
    /// requires a sandbox and the plan's sender runs its commands unconfined
    /// or did not say how: the grant would let those commands run.
    fn sandbox_rule(&self, id: &RequestId, decision: Decision) -> Decision {
        let required = self.rules.require_sandbox
            || matches!(&self.approval, Approval::Policy(p) if p.require_sandbox());
        if !decision.approve || !required {
            return decision;
        }
        let Some(sender) = self.requests.get(id).map(|r| r.opening.sender.clone()) else {
            return decision;
        };
        let sandbox = self.members.get(&sender).and_then(|m| m.sandbox.as_ref());
        match crate::sandbox::unconfined_reason(&sender, sandbox) {
            Some(reason) => Decision {
                approve: false,
                feedback: format!("require_sandbox: {reason}"),
                grant: None,
            },
            None => decision,
        }
    }

    /// With a chain, its stages and rule, if plan `id` still waits for a
    /// decision (an operator may have decided while a stage ran).
    fn waiting(&self, id: &RequestId) -> Option<(Arc<ReviewChain>, Plan)> {
        let Approval::Chain(chain) = &self.approval else {
            return None;
        };
        let request = self.requests.get(id)?;
        (request.status == Status::Pending).then(|| (chain.clone(), request.plan()))
    }

    /// Runs stage `at` of the chain on plan `id`, if the plan still waits: a
    /// policy at once, a person by waiting, a worker by asking the runtime.
    fn run_stage(&mut self, id: &RequestId, at: usize, now: i64, effects: &mut Vec<Effect>) {
        let Some((chain, plan)) = self.waiting(id) else {
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
                let verdict = chain::policy_verdict(policy, *on_pass, &plan, &self.overlaps_of(id));
                self.stage_verdict(id, at, verdict, now, effects);
            }
            Some(StageKind::Worker) => effects.push(Effect::RunStage {
                request_id: id.clone(),
                stage: at,
            }),
        }
    }

    /// Stage `at` said `verdict` of plan `id`: it goes into the history,
    /// and the chain's rule decides, runs the next stage, or leaves it to a
    /// person.
    pub(super) fn stage_verdict(
        &mut self,
        id: &RequestId,
        at: usize,
        verdict: Verdict,
        now: i64,
        effects: &mut Vec<Effect>,
    ) {
        if self
            .requests
            .get(id)
            .is_some_and(|r| r.opening.kind == Kind::Result)
        {
            return self.result_stage_verdict(id, at, verdict, now, effects);
        }
        let Some((chain, plan)) = self.waiting(id) else {
            return;
        };
        let rule = &chain.rule;
        let escalated = rule.escalates(&plan.files);
        let name = rule.name(at).to_owned();
        self.record_review(
            id,
            &name,
            verdict.label(),
            verdict.words().to_owned(),
            now,
            effects,
        );
        let decision = match rule.after(at, &verdict, escalated) {
            chain::Next::Run(next) => return self.run_stage(id, next, now, effects),
            chain::Next::Person(reason) => {
                return self.record_review(
                    id,
                    "chain",
                    "waits",
                    format!("{reason}; waiting for an operator"),
                    now,
                    effects,
                );
            }
            chain::Next::Decide(verdict) => rule.decision(at, verdict),
        };
        if decision.approve && self.held_for_owners(id, ("chain", None), now, effects) {
            return;
        }
        // A pending plan takes a decision; nothing else can refuse it.
        let _ = self.decide_plan(id, decision, now, effects);
    }
}

/// A decision on `request`: its sender hears `decision`, and the watchers
/// see the request as it stands.
pub(super) fn told(request: &Request, decision: Message, effects: &mut Vec<Effect>) {
    effects.push(Effect::Deliver {
        from: LEAD.to_owned(),
        to: vec![request.opening.sender.clone()],
        message: decision,
    });
    effects.push(Effect::Notify(Notice::Request(Box::new(request.clone()))));
}

/// What an approval says of files another member holds, when the policy
/// lets plans overlap (no `deny_overlap`): the teammate hears it at plan
/// time, before either result lands and the later one conflicts.
fn overlap_note(overlaps: &[crate::holds::Overlap]) -> String {
    if overlaps.is_empty() {
        return String::new();
    }
    let held: Vec<String> = overlaps
        .iter()
        .map(|o| format!("{} holds {}", o.member, o.files.join(", ")))
        .collect();
    format!(
        "; overlap: {} under an approved plan, so the later of your two results \
         to land may have to rebase",
        held.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Tracker;
    use serde_json::json;

    /// The typed payload is byte for byte what the `json!` object wrote
    /// before it, so stored payloads still match a retry.
    #[test]
    fn a_plan_payload_is_written_as_before_and_read_back() {
        let files = vec!["src/a.rs".to_owned()];
        let steps = vec!["one".to_owned(), "two \"quoted\"".to_owned()];
        let tests = vec!["t".to_owned()];
        let held = vec!["src/**".to_owned()];
        let typed = serde_json::to_string(&PlanPayload {
            overlaps: vec![OverlapOut {
                files: &held,
                member: "bob",
            }],
            plan: PlanOut {
                body: "b",
                files: &files,
                steps: &steps,
                summary: "s",
                task_id: "",
                tests: &tests,
            },
            supersedes: "x",
        })
        .expect("encodes");
        let before = json!({
            "plan": {
                "summary": "s", "steps": steps, "files": files, "tests": tests,
                "body": "b", "task_id": "",
            },
            "supersedes": "x",
            "overlaps": [json!({ "member": "bob", "files": held })],
        })
        .to_string();
        assert_eq!(typed, before);
        let request = Tracker::new()
            .open(
                Opening {
                    id: RequestId::existing("id", "0b6f3c1e-1d2a-4f5b-8c9d-0e1f2a3b4c5d")
                        .expect("id"),
                    kind: Kind::PlanApproval,
                    sender: "alice".into(),
                    target: LEAD.into(),
                    payload_json: typed,
                    deadline_unix_ms: None,
                },
                0,
            )
            .expect("opens")
            .request;
        let plan = request.plan();
        assert_eq!(plan.files, files);
        assert_eq!(plan.steps, steps);
        assert_eq!(plan.summary, "s");
    }
}
