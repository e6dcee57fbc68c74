//! The chain of reviewers on the hub (`--approval chain:FILE`): the hub runs
//! the quick stages (policy, human) itself and hands the slow ones (program,
//! model) to the stage runner ([`crate::chain::stages`]), whose verdicts come
//! back as commands.
//! Each verdict goes into the request's history before the chain's rule
//! ([`shared::chain::Rule::after`], in the core) says what follows.

use std::sync::Arc;

use serde_json::json;
use shared::{
    chain,
    names::RequestId,
    protocol::{Request, Status},
};
use tokio::sync::mpsc;

use super::{Approval, Hub};
use crate::chain::{
    stages::{StageJob, Work},
    Chain, Next, Stage, Verdict,
};

impl Hub {
    /// With `--approval chain:FILE`, the chain and plan request `id`, if
    /// the plan still waits for a decision (an operator may have decided
    /// while a stage ran).
    fn waiting(&self, id: &RequestId) -> Option<(Arc<Chain>, Request)> {
        let Approval::Chain(chain) = &self.config.approval else {
            return None;
        };
        let request = self.team.requests.get(id)?;
        (request.status == Status::Pending).then(|| (chain.clone(), request.clone()))
    }

    /// Runs stage `at` of the chain on plan `id`, if the plan still waits.
    pub(super) fn run_stage(&mut self, id: &RequestId, at: usize) {
        let Some((chain, request)) = self.waiting(id) else {
            return;
        };
        let plan = request.plan();
        match chain.stage(at) {
            None | Some(Stage::Human) => {
                self.record_review(id, "human", "waits", "waiting for an operator".into());
            }
            Some(Stage::Policy { policy, on_pass }) => {
                let verdict =
                    chain::policy_verdict(policy, *on_pass, &plan, &self.team.overlaps_of(id));
                self.stage_verdict(id, at, verdict);
            }
            Some(Stage::Program { command, timeout }) => {
                let payload: serde_json::Value =
                    serde_json::from_str(&request.opening.payload_json).unwrap_or_default();
                let role = self
                    .team
                    .members
                    .get(&request.opening.sender)
                    .map(|m| m.role.clone())
                    .unwrap_or_default();
                let input = json!({
                    "request_id": id.as_str(),
                    "sender": request.opening.sender,
                    "role": role,
                    "plan": payload["plan"],
                    "supersedes": payload["supersedes"],
                    "overlaps": payload["overlaps"],
                })
                .to_string();
                let work = Work::Program {
                    command: command.clone(),
                    timeout: *timeout,
                    input,
                };
                self.send_stage(id, at, work);
            }
            Some(Stage::Model(reviewer)) => {
                let work = Work::Model {
                    reviewer: reviewer.clone(),
                    job: Box::new(self.review_job(id, &plan)),
                };
                self.send_stage(id, at, work);
            }
        }
    }

    /// Hands a slow stage to the runner; a runner that cannot take it is
    /// the stage failing.
    fn send_stage(&mut self, id: &RequestId, at: usize, work: Work) {
        let job = StageJob {
            request_id: id.clone(),
            stage: at,
            work,
        };
        let sent = match &self.stage_jobs {
            Some(jobs) => jobs.try_send(job).map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => "too many stages are queued",
                mpsc::error::TrySendError::Closed(_) => "the stage runner has stopped",
            }),
            None => Err("the stage runner is not running"),
        };
        if let Err(why) = sent {
            self.stage_verdict(id, at, Verdict::Error { words: why.into() });
        }
    }

    /// Stage `at` said `verdict` of plan `id`: it goes into the history, and
    /// the chain decides, runs the next stage, or leaves it to a person.
    pub(super) fn stage_verdict(&mut self, id: &RequestId, at: usize, verdict: Verdict) {
        let Some((chain, request)) = self.waiting(id) else {
            return;
        };
        let rule = chain.rule();
        let escalated = rule.escalates(&request.plan().files);
        let name = rule.name(at).to_owned();
        self.record_review(id, &name, verdict.label(), verdict.words().to_owned());
        let decision = match rule.after(at, &verdict, escalated) {
            Next::Run(next) => return self.run_stage(id, next),
            Next::Person(reason) => {
                return self.record_review(
                    id,
                    "chain",
                    "waits",
                    format!("{reason}; waiting for an operator"),
                );
            }
            Next::Decide(verdict) => rule.decision(at, verdict),
        };
        if let Err(e) = self.decide_plan(id, decision) {
            tracing::warn!(request_id = %id, error = %e, "the chain's decision was not recorded");
        }
    }
}
