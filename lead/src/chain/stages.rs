//! The chain's slow stages (program, model), run in tasks of their own, a
//! few at a time: whoever starts the runner hands it [`StageJob`]s and hears
//! each stage's [`Verdict`] through the report function it gave, so the
//! runner knows nothing of the hub.

use std::{sync::Arc, time::Duration};

use mesh_core::names::RequestId;
use tokio::{
    sync::{mpsc, Semaphore},
    task::JoinSet,
};

use super::Verdict;
use crate::reviewer::{self, Reviewer};

/// Stages run at once.
const CONCURRENT_STAGES: usize = 4;
/// Stages waiting to run before new ones are refused (the stage fails, to a
/// person).
pub(crate) const QUEUE: usize = 256;

/// A stage to run.
#[derive(Debug)]
pub(crate) struct StageJob {
    /// The plan request under review.
    pub(crate) request_id: RequestId,
    /// The stage's place in the chain.
    pub(crate) stage: usize,
    /// What to run.
    pub(crate) work: Work,
}

/// What a slow stage does.
#[derive(Debug)]
pub(crate) enum Work {
    /// Runs `command` with the request as JSON (`input`) on its stdin.
    Program {
        command: Vec<String>,
        timeout: Duration,
        input: String,
    },
    /// Runs `command` in a scratch worktree of a result's `commit`, the
    /// request as JSON (`input`) on its stdin: exit 0 approves, any other
    /// exit rejects with its output.
    ResultProgram {
        command: Vec<String>,
        timeout: Duration,
        input: String,
        repo: Arc<crate::git::Repo>,
        commit: String,
    },
    /// Asks the model reviewer.
    Model {
        reviewer: Arc<Reviewer>,
        job: Box<reviewer::Job>,
    },
}

/// A stage's verdict, for whoever started the runner.
#[derive(Debug)]
pub(crate) struct StageDone {
    /// The plan request.
    pub(crate) request_id: RequestId,
    /// The stage's place in the chain.
    pub(crate) stage: usize,
    /// What it said.
    pub(crate) verdict: Verdict,
    /// A model stage's call: the reviewer's name and what the call used.
    pub(crate) used: Option<(String, mesh_core::usage::Usage)>,
}

/// Where the runner reports verdicts.
pub(crate) type Report = Arc<dyn Fn(StageDone) + Send + Sync>;

/// Runs the stages sent to it, a few at a time, until the sender goes; then
/// the stages still running are abandoned, and a program's whole session
/// killed with its task.
pub(crate) fn start(report: Report) -> mpsc::Sender<StageJob> {
    let (tx, mut jobs) = mpsc::channel::<StageJob>(QUEUE);
    let slots = Arc::new(Semaphore::new(CONCURRENT_STAGES));
    tokio::spawn(async move {
        let mut running = JoinSet::new();
        loop {
            let job = tokio::select! {
                job = jobs.recv() => job,
                Some(_) = running.join_next(), if !running.is_empty() => continue,
            };
            let Some(job) = job else { break };
            let Ok(slot) = slots.clone().acquire_owned().await else {
                break;
            };
            let report = report.clone();
            // A model's call is a span of the request's trace.
            let cx = crate::telemetry::context(job.request_id.as_str()).unwrap_or_default();
            let stage = async move {
                let (verdict, used) = match &job.work {
                    Work::Program {
                        command,
                        timeout,
                        input,
                    } => (super::run_program(command, *timeout, input).await, None),
                    Work::ResultProgram {
                        command,
                        timeout,
                        input,
                        repo,
                        commit,
                    } => {
                        let verdict = match repo.scratch(commit).await {
                            Ok(scratch) => {
                                let verdict = super::program::run_result_program(
                                    command,
                                    *timeout,
                                    input,
                                    &scratch.path().join("tree"),
                                )
                                .await;
                                repo.drop_scratch(scratch).await;
                                verdict
                            }
                            Err(e) => Verdict::Error {
                                words: format!("cannot make a scratch worktree: {e}"),
                            },
                        };
                        (verdict, None)
                    }
                    Work::Model { reviewer, job } => {
                        let started = tokio::time::Instant::now();
                        let mut tokens = None;
                        let verdict = model_verdict(reviewer, job, &mut tokens).await;
                        let used = reviewer::used(started.elapsed(), tokens);
                        (verdict, Some((reviewer.name(), used)))
                    }
                };
                report(StageDone {
                    request_id: job.request_id,
                    stage: job.stage,
                    verdict,
                    used,
                });
                drop(slot);
            };
            running.spawn(opentelemetry::context::FutureExt::with_context(stage, cx));
        }
        // The lead is stopping.
        running.shutdown().await;
    });
    tx
}

/// The model's verdict as a stage of a chain: a decision, or an error
/// (which never approves) saying why there is none.
async fn model_verdict(
    reviewer: &Reviewer,
    job: &reviewer::Job,
    tokens: &mut Option<mesh_llm::Usage>,
) -> Verdict {
    match tokio::time::timeout(reviewer.timeout(), reviewer.decide(job, tokens)).await {
        Ok(Ok(reviewer::Verdict::Approve {
            feedback,
            write_paths,
        })) => match mesh_core::grant::PathSet::new("write_paths", &write_paths) {
            Ok(_) => Verdict::Approve {
                grant: Some(mesh_core::grant::Grant {
                    mode: mesh_core::grant::Mode::AcceptEdits,
                    write_paths,
                    expires_at_unix_ms: None,
                }),
                words: feedback,
            },
            Err(e) => Verdict::Error {
                words: format!("the model approved with bad write paths: {e}"),
            },
        },
        Ok(Ok(reviewer::Verdict::Reject { feedback })) => Verdict::Reject { words: feedback },
        Ok(Err(why)) => Verdict::Error { words: why },
        Err(_) => Verdict::Error {
            words: format!("no answer within {}s", reviewer.timeout().as_secs()),
        },
    }
}
