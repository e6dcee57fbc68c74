//! The reviewer chain's workers on the hub (`--approval chain:FILE`): the
//! core runs the chain (its quick stages, and what follows each verdict:
//! [`mesh_core::team::Team::apply`]) and asks for a slow stage (a program, a
//! model) with [`mesh_core::effect::Effect::RunStage`]; here it is handed to
//! the stage runner ([`crate::chain::stages`]), whose verdict comes back as
//! `StageVerdict`, the lead's own.

use mesh_core::{
    access::{Call, Caller},
    chain::Verdict,
    names::RequestId,
    op::StageVerdict,
    protocol::Status,
    team::StageKind,
};
use serde_json::json;

use super::{Approval, Claim, Hub};
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
        if request.opening.kind == mesh_core::protocol::Kind::Result {
            return self.run_result_stage(&request, at);
        }
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
        let sent = self.workers.stage(job);
        if let Err(why) = sent {
            let verdict = Verdict::Error { words: why.into() };
            self.stage_verdict(id.clone(), at, verdict);
        }
    }

    /// Hands stage `at` of the results' chain to the stage runner for
    /// result `request`: a program runs in a scratch worktree of the
    /// result's commit; a model reviews the diff.
    fn run_result_stage(&mut self, request: &mesh_core::protocol::Request, at: usize) {
        let Approval::Chain(chain) = &self.config.approval else {
            return;
        };
        let id = request.id().clone();
        let payload = request.result_payload();
        let work = match (chain.results().and_then(|c| c.stage(at)), &self.config.repo) {
            (Some(Stage::Program { command, timeout }), Some(repo)) => {
                let input = json!({
                    "request_id": id.as_str(),
                    "sender": request.opening.sender,
                    "task_id": payload.result.task_id,
                    "summary": payload.result.summary,
                    "base": payload.result.base,
                    "commit": payload.result.commit,
                    "files": payload.result.files,
                })
                .to_string();
                Work::ResultProgram {
                    command: command.clone(),
                    timeout: *timeout,
                    input,
                    repo: repo.clone(),
                    commit: payload.result.commit.clone(),
                }
            }
            (Some(Stage::Model(reviewer)), _) => {
                let mut job = self.review_job(&id, &shared::plan::Plan::default());
                job.result = Some(crate::reviewer::ResultView {
                    task: self
                        .team
                        .tasks
                        .get(&payload.result.task_id)
                        .map(|t| format!("{}: {}", t.subject, t.description))
                        .unwrap_or_default(),
                    summary: payload.result.summary.clone(),
                    files: payload.result.paths(),
                    outside_grant: payload.outside_grant.clone(),
                    diff: payload.result.diff.clone(),
                });
                Work::Model {
                    reviewer: reviewer.clone(),
                    job: Box::new(job),
                }
            }
            _ => return,
        };
        let job = StageJob {
            request_id: id.clone(),
            stage: at,
            work,
        };
        let sent = self.workers.stage(job);
        if let Err(why) = sent {
            let verdict = Verdict::Error { words: why.into() };
            self.stage_verdict(id, at, verdict);
        }
    }

    /// Stage `at` said `verdict` of plan `id`: the core records it and
    /// decides what follows.
    pub(super) fn stage_verdict(&mut self, request_id: RequestId, stage: usize, verdict: Verdict) {
        let op = StageVerdict {
            request_id,
            stage,
            verdict,
        };
        if let Err(e) = self.apply(Claim::Known(Caller::Lead), Call::Lead, Ok(op)) {
            tracing::warn!(error = %e, "a stage's verdict was not recorded");
        }
    }
}
