//! The reviewer chain's workers on the hub (`--approval chain:FILE`): the
//! core runs the chain (its quick stages, and what follows each verdict:
//! [`shared::team::Team::apply`]) and asks for a slow stage (a program, a
//! model) with [`shared::effect::Effect::RunStage`]; here it is handed to
//! the stage runner ([`crate::chain::stages`]), whose verdict comes back as
//! `Op::StageVerdict`, the lead's own.

use serde_json::json;
use shared::{
    access::Caller, chain::Verdict, names::RequestId, op::Op, protocol::Status, team::StageKind,
};
use tokio::sync::mpsc;

use super::{Approval, Hub};
use crate::chain::{
    stages::{StageJob, Work},
    Chain, Stage,
};

/// What the core runs of `chain`'s stages, in order.
pub(super) fn stage_kinds(chain: &Chain) -> Vec<StageKind> {
    (0..chain.rule().len())
        .map(|at| match chain.stage(at) {
            None | Some(Stage::Human) => StageKind::Human,
            Some(Stage::Policy { policy, on_pass }) => StageKind::Policy {
                policy: policy.clone(),
                on_pass: *on_pass,
            },
            Some(Stage::Program { .. } | Stage::Model(_)) => StageKind::Worker,
        })
        .collect()
}

impl Hub {
    /// Hands stage `at` of the chain (a program or a model) to the stage
    /// runner for plan `id`, if the plan still waits; a runner that cannot
    /// take it is the stage failing.
    pub(super) fn run_stage(&mut self, id: &RequestId, at: usize) {
        let Approval::Chain(chain) = &self.config.approval else {
            return;
        };
        let Some(request) = self
            .team
            .requests
            .get(id)
            .filter(|r| r.status == Status::Pending)
            .cloned()
        else {
            return;
        };
        let work = match chain.stage(at) {
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
                Work::Program {
                    command: command.clone(),
                    timeout: *timeout,
                    input,
                }
            }
            Some(Stage::Model(reviewer)) => Work::Model {
                reviewer: reviewer.clone(),
                job: Box::new(self.review_job(id, &request.plan())),
            },
            None | Some(Stage::Human | Stage::Policy { .. }) => return,
        };
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
            let verdict = Verdict::Error { words: why.into() };
            self.stage_verdict(id.clone(), at, verdict);
        }
    }

    /// Stage `at` said `verdict` of plan `id`: the core records it and
    /// decides what follows.
    pub(super) fn stage_verdict(&mut self, request_id: RequestId, stage: usize, verdict: Verdict) {
        let op = Op::StageVerdict {
            request_id,
            stage,
            verdict,
        };
        if let Err(e) = self.apply_in_core(&Caller::Lead, op) {
            tracing::warn!(error = %e, "a stage's verdict was not recorded");
        }
    }
}
