//! `complete_task` with a team repository: the workspace's change is
//! submitted as a result, and the lead's answer waited for. Landed: the
//! worktree moves to the landed commit and the task is done. A conflict: the
//! change is rebased onto the branch's new head and submitted again (twice
//! at most, [`Rounds`]). Rejected otherwise: the driver hears why.

use mesh_core::{display::Escaped, limits};
use opentelemetry::{context::FutureExt as _, KeyValue};
use shared::pb;

use super::{
    incoming::{Handled, ResultAnswer},
    Exit, Session,
};
use crate::{
    catalog,
    client::fatal_status,
    driver::{Driver, Observation},
    error::SessionError,
    results::{GitFailed, TeamRepo},
};

/// The most results submitted for one `complete_task` (the first, and a
/// resubmission after each of two conflicts).
const MAX_ROUNDS: u32 = 3;

/// Where one `complete_task`'s results stand: how many were submitted, and
/// the one the next supersedes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Rounds {
    /// Results submitted so far.
    rounds: u32,
    /// The conflicting result the next one revises (empty: none).
    supersedes: String,
}

/// What to do after the lead's answer to a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    /// It landed.
    Landed,
    /// It conflicts: rebase onto the branch's head and submit again.
    Rebase,
    /// It was rejected, or conflicts once too often.
    Rejected,
}

impl Rounds {
    /// A result is about to be submitted: the one it supersedes.
    pub(super) fn start(&mut self) -> String {
        self.rounds += 1;
        self.supersedes.clone()
    }

    /// The lead's `answer` to the result submitted as `request_id`.
    pub(super) fn answered(&mut self, request_id: &str, answer: &ResultAnswer) -> Verdict {
        if answer.approve {
            return Verdict::Landed;
        }
        if !answer.conflicts.is_empty() && self.rounds < MAX_ROUNDS {
            self.supersedes = request_id.to_owned();
            return Verdict::Rebase;
        }
        Verdict::Rejected
    }
}

/// How one result's submission ended.
enum Submitted {
    /// The lead answered.
    Answer(ResultAnswer),
    /// The lead would not take it (why, as the driver hears it).
    Refused(String),
    /// Stop: a shutdown was agreed, or a signal came while waiting.
    Exit(Exit),
}

impl Session {
    /// `complete_task` with a team repository: submits the workspace's
    /// change, in rounds, until it lands or is rejected.
    pub(super) async fn submit_result<D: Driver>(
        &mut self,
        driver: &mut D,
        task_id: String,
        summary: String,
    ) -> Result<Result<Observation, Exit>, SessionError> {
        let Some(repo) = self.repo.clone() else {
            return Ok(Ok(Observation::ToolResult(
                Err("no team repository".into()),
            )));
        };
        let args = serde_json::json!({ "task_id": task_id, "summary": crate::tools::truncate(&summary, 120) })
            .to_string();
        let mut rounds = Rounds::default();
        let outcome: Result<String, String> = loop {
            let (base, diff) = match change(&repo).await {
                Ok(change) => change,
                Err(problem) => break Err(problem),
            };
            let supersedes = rounds.start();
            let request = pb::ResultRequest {
                request_id: uuid::Uuid::new_v4().to_string(),
                task_id: task_id.clone(),
                base,
                diff,
                summary: limits::cut(&summary, limits::REASON),
                supersedes,
                ..Default::default()
            };
            let id = request.request_id.clone();
            let answer = match self.send_result(driver, request).await? {
                Submitted::Answer(answer) => answer,
                Submitted::Refused(problem) => break Err(problem),
                Submitted::Exit(exit) => return Ok(Err(exit)),
            };
            match rounds.answered(&id, &answer) {
                Verdict::Landed => break Ok(self.landed(&repo, &task_id, &answer.commit).await),
                Verdict::Rebase => {
                    tracing::info!(request_id = %id, conflicts = ?answer.conflicts, "the result conflicts; rebasing onto the team branch");
                    if let Err(e) = repo.rebase(&answer.branch_head).await {
                        break Err(format!(
                            "the result conflicts and cannot be rebased: {}",
                            e.0
                        ));
                    }
                }
                Verdict::Rejected => {
                    break Err(format!("the result was rejected: {}", answer.feedback))
                }
            }
        };
        let allowed = outcome.is_ok();
        let said = match &outcome {
            Ok(text) => crate::tools::truncate(text, 300).to_owned(),
            Err(text) => text.clone(),
        };
        self.lead
            .report(catalog::COMPLETE_TASK, &args, allowed, &said)
            .await?;
        Ok(Ok(Observation::ToolResult(outcome)))
    }

    /// Submits one result and waits for the lead's answer, in a span of the
    /// grant's trace.
    async fn send_result<D: Driver>(
        &mut self,
        driver: &mut D,
        request: pb::ResultRequest,
    ) -> Result<Submitted, SessionError> {
        let id = request.request_id.clone();
        let task_id = request.task_id.clone();
        let cx = self.traces.under_grant(
            "submit_result",
            vec![
                KeyValue::new("mesh.request.id", id.clone()),
                KeyValue::new("mesh.request.kind", "result"),
                KeyValue::new("mesh.task.id", task_id.clone()),
                KeyValue::new("mesh.member", self.config.name.clone()),
            ],
        );
        let submitted = self
            .lead
            .retry("SubmitResult", |mut client| {
                let request = request.clone();
                async move { client.submit_result(request).await }
            })
            .with_context(cx.clone())
            .await;
        match submitted {
            Ok(_) => {}
            Err(SessionError::Rpc { status, .. }) if !fatal_status(&status) => {
                crate::traces::end(&cx, Err(status.message()));
                return Ok(Submitted::Refused(format!(
                    "the lead refused the result: {}",
                    status.message()
                )));
            }
            Err(e) => return Err(e),
        }
        tracing::info!(request_id = %id, task_id = %Escaped(&task_id), "submitted a result");
        let answer = loop {
            match self.next_incoming(driver).await? {
                Handled::Exit(exit) => return Ok(Submitted::Exit(exit)),
                Handled::Result(answer) if answer.request_id == id => break answer,
                _ => {}
            }
        };
        crate::traces::end(
            &cx,
            match (answer.approve, answer.conflicts.is_empty()) {
                (true, _) => Ok("landed"),
                (false, false) => Err("conflicts"),
                (false, true) => Err(answer.feedback.as_str()),
            },
        );
        Ok(Submitted::Answer(answer))
    }

    /// The result of `task_id` landed as `commit`: the worktree moves to it,
    /// and the task is completed (ending its plan's grant). What the driver
    /// hears.
    async fn landed(&mut self, repo: &TeamRepo, task_id: &str, commit: &str) -> String {
        if let Err(e) = repo.landed(commit).await {
            tracing::warn!(error = %e.0, "cannot move the worktree to the landed commit");
        }
        let mut text = format!(
            "landed on {} as {commit}; task {task_id} is completed",
            repo.branch
        );
        if self.state.completed(task_id) {
            self.traces.task_done();
            text.push_str(
                "\nThe grant for this task's plan has ended: you are in plan mode \
                 again. Claim another task and submit a plan for it.",
            );
        }
        text
    }
}

/// The workspace's change against its base: the base, and the diff; why
/// there is none to submit.
async fn change(repo: &TeamRepo) -> Result<(String, String), String> {
    let prepared = async {
        let base = repo.base().await?;
        let diff = repo.diff(&base).await?;
        Ok::<_, GitFailed>((base, diff))
    }
    .await;
    let (base, diff) = prepared.map_err(|e| format!("cannot make the result: {}", e.0))?;
    if diff.is_empty() {
        return Err("nothing to submit: the workspace has no changes against its base".into());
    }
    Ok((base, diff))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(approve: bool, conflicts: &[&str]) -> ResultAnswer {
        ResultAnswer {
            request_id: String::new(),
            approve,
            feedback: "no".into(),
            commit: "c1".into(),
            conflicts: conflicts.iter().map(|c| (*c).to_owned()).collect(),
            branch_head: "h1".into(),
        }
    }

    #[test]
    fn a_conflict_is_rebased_twice_and_each_round_supersedes_the_last() {
        let mut rounds = Rounds::default();
        assert_eq!(rounds.start(), "");
        assert_eq!(
            rounds.answered("r1", &answer(false, &["a"])),
            Verdict::Rebase
        );
        assert_eq!(rounds.start(), "r1");
        assert_eq!(
            rounds.answered("r2", &answer(false, &["a"])),
            Verdict::Rebase
        );
        assert_eq!(rounds.start(), "r2");
        assert_eq!(
            rounds.answered("r3", &answer(false, &["a"])),
            Verdict::Rejected,
            "a third conflict is the end"
        );
    }

    #[test]
    fn a_landing_or_a_plain_rejection_ends_the_rounds() {
        let mut rounds = Rounds::default();
        rounds.start();
        assert_eq!(
            rounds.answered("r1", &answer(true, &["a"])),
            Verdict::Landed
        );
        let mut rounds = Rounds::default();
        rounds.start();
        assert_eq!(
            rounds.answered("r1", &answer(false, &[])),
            Verdict::Rejected
        );
        assert_eq!(rounds.start(), "", "a rejection supersedes nothing");
    }
}
