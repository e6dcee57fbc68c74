//! Each family of ops applied: [`Team::apply`](super::Team::apply) routes
//! an op to the function of its family (the task list, the members, the
//! plan and permission handshakes, results and amendments), which calls the
//! op's own method.

use super::{Reply, Team};
use crate::{
    access::Caller,
    effect::{Effect, Notice},
    op::Op,
    protocol::Decision,
    refusal::CoreError,
};

impl Team {
    /// The task list's ops.
    pub(super) fn tasks_op(
        &mut self,
        now: i64,
        caller: &Caller,
        op: Op,
        effects: &mut Vec<Effect>,
    ) -> Result<Reply, CoreError> {
        Ok(match op {
            Op::CreateTask { task_id, task } => {
                Reply::Task(self.create_task_op(task_id, task, now, effects)?)
            }
            Op::ClaimTask { task_id } => Reply::Task(self.claim_task_op(
                &member_of(caller)?,
                task_id.as_deref(),
                now,
                effects,
            )?),
            Op::CompleteTask { .. } if self.rules.repo => {
                return Err(CoreError::Conflict(
                    "CompleteTask: with a team repository (lead serve --repo) a task is \
                     completed when its result lands; call SubmitResult"
                        .into(),
                ))
            }
            Op::CompleteTask {
                task_id,
                completion,
            } => Reply::Task(self.complete_task_op(
                &member_of(caller)?,
                &task_id,
                completion,
                now,
                effects,
            )?),
            Op::WithdrawTask {
                task_id,
                reason,
                by,
            } => Reply::Task(self.withdraw_task_op(&task_id, &reason, &by, now, effects)?),
            Op::ListTasks { status, page } => Reply::Tasks(self.list_tasks(status, page)),
            _ => return Err(misrouted()),
        })
    }

    /// The members' ops: joining, leaving, usage, idling, acknowledging, shutting down, the team's list.
    pub(super) fn members_op(
        &mut self,
        now: i64,
        caller: &Caller,
        op: Op,
        effects: &mut Vec<Effect>,
    ) -> Result<Reply, CoreError> {
        Ok(match op {
            Op::ReportUsage { epoch, totals } => {
                Reply::Standing(self.report_usage_op(&member_of(caller)?, &epoch, totals, effects))
            }
            Op::SetBudget { name, token_budget } => {
                Reply::Standing(self.set_budget_op(&name, token_budget, effects)?)
            }
            Op::ReportIdle { reason } => {
                self.report_idle_op(&member_of(caller)?, reason, effects);
                Reply::Done
            }
            Op::Leave { reason } => {
                let why = if reason.is_empty() {
                    "left the team".to_owned()
                } else {
                    format!("left the team: {reason}")
                };
                effects.extend(self.end_member(&member_of(caller)?, &why, now));
                Reply::Done
            }
            Op::Join {
                name,
                role,
                token_budget,
                member_id,
                session_token,
                sandbox,
                decoding,
            } => {
                let named = name.to_string();
                let joined = self.join_op(
                    name,
                    role,
                    token_budget,
                    member_id,
                    session_token,
                    now,
                    effects,
                )?;
                self.members.set_sandbox(&named, sandbox);
                self.members.set_decoding(&named, decoding);
                Reply::Joined(joined)
            }
            Op::Ack { seq } => {
                let name = member_of(caller)?;
                let last_seq = self.members.get(&name).map_or(0, |m| m.last_seq);
                if seq > last_seq {
                    return Err(CoreError::OutOfRange(format!(
                        "seq: {seq} is past the newest envelope ({last_seq}) of {name:?}"
                    )));
                }
                effects.push(Effect::Ack { name, seq });
                Reply::Done
            }
            Op::ReportToolCall {
                tool,
                args_json,
                allowed,
                outcome,
            } => {
                let name = member_of(caller)?;
                effects.extend(self.show_work(&name));
                effects.push(Effect::Notify(Notice::ToolCall {
                    member: name,
                    tool,
                    args_json,
                    allowed,
                    outcome,
                }));
                Reply::Done
            }
            Op::ListTeam { page } => Reply::Team(Box::new(self.list_team(page))),
            Op::RequestShutdown {
                request_id,
                target,
                reason,
                deadline_unix_ms,
            } => Reply::Opened(self.request_shutdown_op(
                request_id,
                &target,
                reason,
                deadline_unix_ms,
                now,
                effects,
            )?),
            Op::RespondShutdown {
                request_id,
                approve,
                reason,
            } => {
                self.respond_shutdown_op(
                    &member_of(caller)?,
                    &request_id,
                    approve,
                    reason,
                    now,
                    effects,
                )?;
                Reply::Done
            }
            _ => return Err(misrouted()),
        })
    }

    /// The plan and permission handshakes, and the requests' lists.
    pub(super) fn plans_op(
        &mut self,
        now: i64,
        caller: &Caller,
        op: Op,
        effects: &mut Vec<Effect>,
    ) -> Result<Reply, CoreError> {
        Ok(match op {
            Op::SubmitPlan {
                request_id,
                plan,
                supersedes,
            } => Reply::Opened(self.submit_plan_op(
                &member_of(caller)?,
                request_id,
                plan,
                supersedes,
                now,
                effects,
            )?),
            Op::ReviewPlan {
                request_id,
                verdict,
                by,
            } => Reply::Request(Box::new(
                self.review_plan_op(request_id, verdict, &by, now, effects)?,
            )),
            Op::StageVerdict {
                request_id,
                stage,
                verdict,
            } => {
                self.stage_verdict(&request_id, stage, verdict, now, effects);
                Reply::Done
            }
            Op::RequestPermission {
                request_id,
                tool,
                args_json,
                path,
            } => Reply::Opened(self.request_permission_op(
                &member_of(caller)?,
                request_id,
                tool,
                args_json,
                path,
                now,
                effects,
            )?),
            Op::ReviewPermission {
                request_id,
                approve,
                feedback,
                by,
            } => {
                let was_pending = self
                    .requests
                    .get(&request_id)
                    .is_some_and(|r| r.status == crate::protocol::Status::Pending);
                let decision = Decision {
                    approve,
                    feedback: feedback.clone(),
                    grant: None,
                };
                let decided = self.decide_permission(&request_id, decision, now, effects)?;
                if was_pending {
                    let verdict = if approve { "approve" } else { "reject" };
                    self.record_review(&request_id, &by, verdict, feedback, now, effects);
                }
                Reply::Request(Box::new(
                    self.requests.get(&request_id).cloned().unwrap_or(decided),
                ))
            }
            Op::ListRequests { status, kind, page } => {
                Reply::Requests(self.list_requests(status, kind, page))
            }
            Op::GetRequest { request_id } => Reply::Request(Box::new(
                self.requests.get(&request_id).cloned().ok_or_else(|| {
                    CoreError::NotFound(format!("request_id: no request {request_id}"))
                })?,
            )),
            _ => return Err(misrouted()),
        })
    }

    /// Results and amendments, and their landing.
    pub(super) fn results_op(
        &mut self,
        now: i64,
        caller: &Caller,
        op: Op,
        effects: &mut Vec<Effect>,
    ) -> Result<Reply, CoreError> {
        Ok(match op {
            Op::SubmitResult {
                request_id,
                result,
                supersedes,
            } => Reply::Opened(self.submit_result_op(
                &member_of(caller)?,
                request_id,
                *result,
                supersedes,
                now,
                effects,
            )?),
            Op::ReviewResult {
                request_id,
                approve,
                feedback,
                by,
            } => Reply::Request(Box::new(self.review_result_op(
                &request_id,
                approve,
                feedback,
                &by,
                now,
                effects,
            )?)),
            Op::RequestAmendment {
                request_id,
                files,
                steps,
                why,
            } => Reply::Opened(self.request_amendment_op(
                &member_of(caller)?,
                request_id,
                files,
                steps,
                why,
                now,
                effects,
            )?),
            Op::ReviewAmendment {
                request_id,
                approve,
                feedback,
                by,
            } => Reply::Request(Box::new(self.decide_amendment(
                &request_id,
                approve,
                feedback,
                &by,
                now,
                effects,
            )?)),
            Op::Landed {
                request_id,
                landing,
            } => {
                self.landed_op(&request_id, landing, now, effects)?;
                Reply::Done
            }
            _ => return Err(misrouted()),
        })
    }
}

/// The member an op of a member's came from.
fn member_of(caller: &Caller) -> Result<String, CoreError> {
    match caller {
        Caller::Member(name) => Ok(name.clone()),
        _ => Err(CoreError::Conflict(
            "an op of a member's, with no member".into(),
        )),
    }
}

/// An op routed to a family it is not in (`apply` routes each op to its
/// own family): an error, never a silent success.
fn misrouted() -> CoreError {
    CoreError::Conflict("this op is not applied here (routed to the wrong family)".into())
}
