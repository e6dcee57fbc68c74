//! Random absurd calls: fields from the pools, ids from what exists.

use shared::pb;

use super::{text, Absurd};
use crate::fuzz::{
    pools::{absurd_text, times, ENUMS, PAGE_SIZES, SEQS},
    RANDOM_TYPED,
};

impl Absurd {
    /// [`RANDOM_TYPED`] calls of any RPC, each field absurd: from the pools,
    /// or an id of a plan, permission or task made so far.
    pub(super) async fn random_calls(&mut self) {
        let mut known: Vec<String> = self.plans.clone();
        known.extend(self.permissions.iter().cloned());
        known.extend(self.tasks.iter().cloned());
        known.extend(["alice", "bob", "carol", "*", "lead"].map(String::from));
        for _ in 0..RANDOM_TYPED {
            let which = self.rng.below(16);
            if which < 6 {
                self.random_plan_or_permission_call(which, &known).await;
            } else {
                self.random_task_request_or_member_call(which, &mut known)
                    .await;
            }
        }
        self.report.section("random");
    }

    /// Call `which` (0 to 5): Send, SubmitPlan, ReviewPlan, RequestPermission,
    /// ReviewPermission, ReportToolCall.
    async fn random_plan_or_permission_call(&mut self, which: usize, known: &[String]) {
        macro_rules! s {
            () => {
                absurd_text(&mut self.rng, known)
            };
        }
        match which {
            0 => {
                let request = pb::SendRequest {
                    to: s!(),
                    text: text(&s!()),
                    message_id: s!(),
                };
                call!(self.report, "Send", self.alice.api, send, request);
            }
            1 => {
                let request = pb::PlanApprovalRequest {
                    request_id: s!(),
                    plan: Some(pb::Plan {
                        summary: s!(),
                        steps: vec![s!(), s!()],
                        files: vec![s!()],
                        tests: vec![s!()],
                        body: s!(),
                        task_id: s!(),
                    }),
                    supersedes: s!(),
                };
                call!(
                    self.report,
                    "SubmitPlan",
                    self.alice.api,
                    submit_plan,
                    request
                );
            }
            2 => {
                let request = pb::PlanReview {
                    request_id: s!(),
                    approve: self.rng.chance(50),
                    feedback: s!(),
                    grant: Some(pb::PermissionGrant {
                        mode: *self.rng.pick(ENUMS),
                        write_paths: vec![s!()],
                        expires_at_unix_ms: *self.rng.pick(&times()),
                    }),
                    refuse_overlap: self.rng.chance(50),
                };
                call!(self.report, "ReviewPlan", self.op, review_plan, request);
            }
            3 => {
                let request = pb::PermissionRequest {
                    request_id: s!(),
                    tool: s!(),
                    args_json: s!(),
                };
                call!(
                    self.report,
                    "RequestPermission",
                    self.alice.api,
                    request_permission,
                    request
                );
            }
            4 => {
                let request = pb::PermissionReview {
                    request_id: s!(),
                    approve: self.rng.chance(50),
                    feedback: s!(),
                };
                call!(
                    self.report,
                    "ReviewPermission",
                    self.op,
                    review_permission,
                    request
                );
            }
            _ => {
                let request = pb::ToolCallReport {
                    tool: s!(),
                    args_json: s!(),
                    allowed: self.rng.chance(50),
                    outcome: s!(),
                    member: s!(),
                };
                call!(
                    self.report,
                    "ReportToolCall",
                    self.alice.api,
                    report_tool_call,
                    request
                );
            }
        }
    }

    /// Call `which` (6 to 15): CreateTask (its id then known), ClaimTask,
    /// CompleteTask, ListRequests, GetRequest, RequestShutdown, ReportIdle,
    /// Join, ReportUsage, SetBudget.
    async fn random_task_request_or_member_call(&mut self, which: usize, known: &mut Vec<String>) {
        macro_rules! s {
            () => {
                absurd_text(&mut self.rng, known)
            };
        }
        match which {
            6 => {
                let request = pb::CreateTaskRequest {
                    subject: s!(),
                    description: s!(),
                    blocked_by: vec![s!()],
                    files: vec![s!()],
                    review: 0,
                };
                if let Some(created) =
                    call!(self.report, "CreateTask", self.op, create_task, request)
                {
                    known.push(created.task_id);
                }
            }
            7 => {
                let request = pb::ClaimTaskRequest { task_id: s!() };
                call!(
                    self.report,
                    "ClaimTask",
                    self.alice.api,
                    claim_task,
                    request
                );
            }
            8 => {
                let request = pb::CompleteTaskRequest {
                    task_id: s!(),
                    summary: s!(),
                    ..Default::default()
                };
                call!(
                    self.report,
                    "CompleteTask",
                    self.alice.api,
                    complete_task,
                    request
                );
            }
            9 => {
                let request = pb::ListRequestsRequest {
                    status: *self.rng.pick(ENUMS),
                    r#type: *self.rng.pick(ENUMS),
                    page_size: *self.rng.pick(PAGE_SIZES),
                    page_token: s!(),
                };
                call!(self.report, "ListRequests", self.op, list_requests, request);
            }
            10 => {
                let request = pb::GetRequestRequest { request_id: s!() };
                call!(self.report, "GetRequest", self.op, get_request, request);
            }
            11 => {
                let request = pb::ShutdownRequest {
                    request_id: s!(),
                    target: if self.rng.chance(50) {
                        "bob".into()
                    } else {
                        s!()
                    },
                    reason: s!(),
                    deadline_unix_ms: *self.rng.pick(&times()),
                    ..Default::default()
                };
                call!(
                    self.report,
                    "RequestShutdown",
                    self.op,
                    request_shutdown,
                    request
                );
            }
            12 => {
                let request = pb::IdleNotification { reason: s!() };
                call!(
                    self.report,
                    "ReportIdle",
                    self.alice.api,
                    report_idle,
                    request
                );
            }
            13 => {
                let request = pb::JoinRequest {
                    name: s!(),
                    role: s!(),
                    token_budget: *self.rng.pick(SEQS),
                    sandbox: Some(pb::Sandbox {
                        kind: s!(),
                        confines: vec![s!()],
                        detail: s!(),
                    }),
                    decoding: Some(pb::Decoding {
                        model: s!(),
                        server: s!(),
                        constrain: s!(),
                        why: s!(),
                    }),
                };
                call!(self.report, "Join", self.joiner, join, request);
            }
            14 => {
                let totals = self.rng.chance(90).then(|| pb::Usage {
                    prompt_tokens: *self.rng.pick(SEQS),
                    completion_tokens: *self.rng.pick(SEQS),
                    calls: *self.rng.pick(SEQS),
                    model_ms: *self.rng.pick(SEQS),
                });
                let request = pb::UsageReport {
                    epoch: s!(),
                    totals,
                };
                call!(
                    self.report,
                    "ReportUsage",
                    self.alice.api,
                    report_usage,
                    request
                );
            }
            _ => {
                let request = pb::SetBudgetRequest {
                    name: s!(),
                    token_budget: *self.rng.pick(SEQS),
                };
                call!(self.report, "SetBudget", self.op, set_budget, request);
            }
        }
    }
}
