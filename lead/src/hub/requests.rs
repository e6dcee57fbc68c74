//! The hub's protocol commands: plans, shutdowns and permissions, each one a
//! request in the [`Tracker`](shared::protocol::Tracker), and the approval mode
//! that may answer plans and permissions without a person.

use serde_json::json;
use shared::wire::*;
use shared::{
    grant::{Grant, Mode},
    limits,
    names::{RequestId, LEAD},
    op::{PageAsk, PlanVerdict},
    pb::{self, envelope::Body},
    plan::Plan,
    policy::Verdict,
    protocol::{Decision, Kind, Opening, Party, Request, Status},
};

use tokio::sync::mpsc;

use super::{Approval, Hub};
use crate::error::HubError;

impl Hub {
    /// `SubmitPlan`: opens a plan-approval request, then lets the approval mode
    /// answer it if it can.
    pub(super) fn submit_plan(
        &mut self,
        sender: &str,
        id: RequestId,
        plan: Plan,
        supersedes: Option<RequestId>,
    ) -> Result<RequestId, HubError> {
        let superseded = self.team.check_supersedes(sender, supersedes.as_ref())?;
        if !plan.task_id.is_empty() && self.team.requests.get(&id).is_none() {
            self.team.check_plan_task(sender, &plan.task_id)?;
        }
        let supersedes = supersedes.as_ref().map_or("", RequestId::as_str);
        let overlaps = self.team.holds.overlaps(sender, &plan.files);
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
        let payload = serde_json::to_string(&payload)
            .map_err(|e| HubError::Internal(format!("could not encode the plan's payload: {e}")))?;
        let opening = Opening {
            id: id.clone(),
            kind: Kind::PlanApproval,
            sender: sender.to_owned(),
            target: LEAD.to_owned(),
            payload_json: payload,
            deadline_unix_ms: None,
        };
        self.team.check_pending_room(
            &opening,
            superseded.as_ref(),
            self.config.pending_per_member,
            self.config.pending_total,
        )?;
        let outcome = self.team.requests.open(opening, self.now())?;
        if outcome.fresh {
            tracing::info!(request_id = %id, member = %sender, "plan submitted");
            if let Some(old) = superseded {
                if let Some(expired) =
                    self.team
                        .requests
                        .expire(&old, &format!("superseded by {id}"), self.now())
                {
                    self.emit(pb::event::Kind::Request(expired.to_pb()));
                }
            }
            self.mark_busy(sender);
            let body = pb::PlanApprovalRequest {
                request_id: id.to_string(),
                plan: Some(plan.to_pb()),
                supersedes: supersedes.to_owned(),
            };
            self.deliver(sender, LEAD, None, Body::PlanApprovalRequest(body));
            self.emit(pb::event::Kind::Request(outcome.request.to_pb()));
            self.auto_review_plan(&id, &plan)?;
        }
        Ok(id)
    }

    /// Answers a fresh plan request when the approval mode decides on its own.
    fn auto_review_plan(&mut self, id: &RequestId, plan: &Plan) -> Result<(), HubError> {
        let decision = match &self.config.approval {
            Approval::Manual => return Ok(()),
            Approval::Chain(_) => {
                self.run_stage(id, 0);
                return Ok(());
            }
            Approval::Model(reviewer) => {
                let job = self.review_job(id, plan);
                let sent = match &self.review_jobs {
                    Some(jobs) => jobs.try_send(job).map_err(|e| match e {
                        mpsc::error::TrySendError::Full(_) => {
                            "the reviewer has too many plans queued"
                        }
                        mpsc::error::TrySendError::Closed(_) => "the reviewer has stopped",
                    }),
                    None => Err("the reviewer is not running"),
                };
                if let Err(why) = sent {
                    tracing::warn!(request_id = %id, why, "plan left for an operator");
                    let note = pb::ReviewNote {
                        request_id: id.to_string(),
                        reviewer: reviewer.name(),
                        note: format!("no decision, left for an operator: {why}"),
                    };
                    self.emit(pb::event::Kind::ReviewNote(note));
                }
                return Ok(());
            }
            Approval::Auto => Decision {
                approve: true,
                feedback: "approved automatically (--approval auto)".into(),
                grant: Some(Grant::of_plan(Mode::AcceptEdits)),
            },
            Approval::Policy(policy) => match policy.review(plan, &self.team.overlaps_of(id)) {
                Verdict::Approve(grant) => Decision {
                    approve: true,
                    feedback: "approved by policy: every criterion holds".into(),
                    grant: Some(grant),
                },
                Verdict::Reject(unmet) => Decision {
                    approve: false,
                    feedback: format!("rejected by policy: {}", unmet.join("; ")),
                    grant: None,
                },
            },
        };
        self.decide_plan(id, decision).map(|_| ())
    }

    /// What the model reviewer needs for the plan `id`: who sent it, and the
    /// other members' plans that are approved or still pending.
    pub(super) fn review_job(&self, id: &RequestId, plan: &Plan) -> crate::reviewer::Job {
        let sender = self
            .team
            .requests
            .get(id)
            .map(|r| r.opening.sender.clone())
            .unwrap_or_default();
        let role = self
            .team
            .members
            .get(&sender)
            .map(|m| m.role.clone())
            .unwrap_or_default();
        let others = self
            .team
            .requests
            .iter()
            .filter(|r| r.opening.kind == Kind::PlanApproval && r.opening.sender != sender)
            .filter_map(|r| {
                let status = match r.status {
                    Status::Approved => "approved",
                    Status::Pending => "pending",
                    Status::Rejected | Status::Expired => return None,
                };
                let plan = r.plan();
                Some(crate::reviewer::OtherPlan {
                    member: r.opening.sender.clone(),
                    status,
                    summary: plan.summary,
                    files: plan.files,
                })
            })
            .collect();
        let overlaps = self
            .team
            .overlaps_of(id)
            .iter()
            .map(ToString::to_string)
            .collect();
        crate::reviewer::Job {
            overlaps,
            request_id: id.to_string(),
            sender,
            role,
            plan: plan.to_pb(),
            others,
        }
    }

    /// What the model reviewer made of a plan: its decision recorded as an
    /// operator's review would be, and a note for the watchers either way.
    pub(super) fn model_review(&mut self, outcome: crate::reviewer::Outcome) {
        let (request_id, reviewer, text) = match outcome {
            crate::reviewer::Outcome::Note {
                request_id,
                reviewer,
                text,
            } => (request_id, reviewer, text),
            crate::reviewer::Outcome::Decided {
                request_id,
                verdict,
                by,
                said,
            } => {
                let decided = RequestId::existing("request_id", &request_id)
                    .and_then(|id| Ok((id, verdict?)))
                    .map_err(HubError::from)
                    .and_then(|(id, verdict)| self.review_plan(id, verdict, &by));
                let text = match decided {
                    Ok(_) => said,
                    Err(e) => format!("decided ({said}) but could not record it: {e}"),
                };
                (request_id, by, text)
            }
            crate::reviewer::Outcome::Used { reviewer, used } => {
                return self.reviewer_used(&reviewer, used);
            }
        };
        self.emit(pb::event::Kind::ReviewNote(pb::ReviewNote {
            request_id,
            reviewer,
            note: limits::cut(&text, limits::REASON),
        }));
    }

    /// `ReviewPlan`: the operator approves (with a grant) or rejects (with
    /// feedback); `by` says who, for the request's history.
    pub(super) fn review_plan(
        &mut self,
        id: RequestId,
        verdict: PlanVerdict,
        by: &str,
    ) -> Result<Request, HubError> {
        let was_pending = self
            .team
            .requests
            .get(&id)
            .is_some_and(|r| r.status == Status::Pending);
        let decision = match verdict {
            PlanVerdict::Approve {
                grant,
                feedback,
                allow_overlap,
            } => {
                self.team.check_overlap(&id, allow_overlap)?;
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
        let decided = self.decide_plan(&id, decision)?;
        if was_pending {
            self.record_review(&id, by, verdict, words);
        }
        Ok(decided)
    }

    /// Adds a reviewer's word to request `id`'s history and shows it.
    pub(super) fn record_review(&mut self, id: &RequestId, by: &str, verdict: &str, words: String) {
        let step = shared::protocol::ReviewStep {
            reviewer: by.to_owned(),
            verdict: verdict.to_owned(),
            words: shared::limits::cut(&words, shared::limits::REASON),
            at_unix_ms: self.now(),
        };
        if let Some(request) = self.team.requests.review(id, step) {
            self.emit(pb::event::Kind::Request(request.to_pb()));
        }
    }

    /// Records a plan decision and, the first time, tells the teammate.
    pub(super) fn decide_plan(
        &mut self,
        id: &RequestId,
        decision: Decision,
    ) -> Result<Request, HubError> {
        let outcome = self.team.answer_plan(id, decision, self.now())?;
        if outcome.fresh {
            let response = plan_response(&outcome.request);
            let teammate = outcome.request.opening.sender.clone();
            tracing::info!(request_id = %id, member = %teammate, approve = response.approve, "plan reviewed");
            if let Some(grant) = outcome
                .request
                .decision
                .as_ref()
                .and_then(|d| d.grant.as_ref())
            {
                self.team.members.set_mode(&teammate, grant.mode);
                self.emit_member(&teammate);
            }
            self.deliver(
                LEAD,
                &teammate,
                None,
                Body::PlanApprovalResponse(response.clone()),
            );
            self.emit(pb::event::Kind::Request(outcome.request.to_pb()));
        }
        Ok(outcome.request)
    }

    /// `RequestPermission`: a teammate in DEFAULT (or ACCEPT_EDITS, for
    /// commands) asks to run one gated tool call.
    pub(super) fn request_permission(
        &mut self,
        sender: &str,
        id: RequestId,
        tool: String,
        args_json: String,
        path: Option<String>,
    ) -> Result<RequestId, HubError> {
        if self
            .team
            .members
            .get(sender)
            .is_some_and(|m| m.mode == Mode::Plan)
        {
            return Err(HubError::FailedPrecondition(format!(
                "{sender:?} is in plan mode: gated tools wait for an approved plan, not a permission"
            )));
        }
        let payload = json!({ "tool": tool, "args_json": args_json });
        let opening = Opening {
            id: id.clone(),
            kind: Kind::Permission,
            sender: sender.to_owned(),
            target: LEAD.to_owned(),
            payload_json: payload.to_string(),
            deadline_unix_ms: None,
        };
        self.team.check_pending_room(
            &opening,
            None,
            self.config.pending_per_member,
            self.config.pending_total,
        )?;
        let outcome = self.team.requests.open(opening, self.now())?;
        if outcome.fresh {
            let verdict = match &self.config.approval {
                // The model and the chain review plans only; permissions
                // wait for a person.
                Approval::Manual | Approval::Model { .. } | Approval::Chain(_) => None,
                Approval::Auto => Some(true),
                Approval::Policy(policy) => policy.allows_call(&tool, path.as_deref()),
            };
            let body = pb::PermissionRequest {
                request_id: id.to_string(),
                tool,
                args_json,
            };
            self.deliver(sender, LEAD, None, Body::PermissionRequest(body));
            self.emit(pb::event::Kind::Request(outcome.request.to_pb()));
            if let Some(approve) = verdict {
                let feedback = if approve {
                    "allowed by the approval mode"
                } else {
                    "denied by policy: deny_write"
                };
                self.decide_permission(
                    &id,
                    Decision {
                        approve,
                        feedback: feedback.into(),
                        grant: None,
                    },
                )?;
            }
        }
        Ok(id)
    }

    /// `ReviewPermission`: the operator answers one permission request.
    pub(super) fn review_permission(
        &mut self,
        id: &RequestId,
        approve: bool,
        feedback: String,
    ) -> Result<Request, HubError> {
        self.decide_permission(
            id,
            Decision {
                approve,
                feedback,
                grant: None,
            },
        )
    }

    /// Records a permission decision and, the first time, tells the teammate.
    fn decide_permission(
        &mut self,
        id: &RequestId,
        decision: Decision,
    ) -> Result<Request, HubError> {
        let outcome = self.team.requests.answer(
            id,
            Kind::Permission,
            &Party::Operator,
            decision,
            self.now(),
        )?;
        if outcome.fresh {
            let teammate = outcome.request.opening.sender.clone();
            let response = permission_response(&outcome.request);
            self.deliver(LEAD, &teammate, None, Body::PermissionResponse(response));
            self.emit(pb::event::Kind::Request(outcome.request.to_pb()));
        }
        Ok(outcome.request)
    }

    /// `ListRequests`, filtered by status and kind, oldest first, one page at a time (see [`super::paging`]).
    pub(super) fn list_requests(
        &self,
        status: Option<Status>,
        kind: Option<Kind>,
        page: PageAsk,
    ) -> pb::ListRequestsResponse {
        let page = super::paging::Page::of(page, super::paging::REQUESTS);
        let (requests, next_page_token) = page.collect(
            self.team
                .requests
                .iter_after(page.after)
                .filter(|(_, r)| {
                    status.is_none_or(|s| r.status == s) && kind.is_none_or(|k| r.opening.kind == k)
                })
                .map(|(ord, r)| (ord, r.to_pb())),
        );
        pb::ListRequestsResponse {
            requests,
            next_page_token,
        }
    }
}

/// A plan request's payload as stored (`payload_json`). The fields are in
/// the order of their names, as the `json!` object that wrote it before had
/// them, so a retry matches a payload an earlier version stored.
#[derive(serde::Serialize)]
struct PlanPayload<'a> {
    overlaps: Vec<OverlapOut<'a>>,
    plan: PlanOut<'a>,
    supersedes: &'a str,
}

#[derive(serde::Serialize)]
struct PlanOut<'a> {
    body: &'a str,
    files: &'a [String],
    steps: &'a [String],
    summary: &'a str,
    task_id: &'a str,
    tests: &'a [String],
}

#[derive(serde::Serialize)]
struct OverlapOut<'a> {
    files: &'a [String],
    member: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let request = shared::protocol::Tracker::new()
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
        let plan = request.plan().to_pb();
        assert_eq!(plan.files, files);
        assert_eq!(plan.steps, steps);
        assert_eq!(plan.summary, "s");
    }
}
