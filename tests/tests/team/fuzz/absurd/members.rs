//! What members say of themselves, and how they go: RequestShutdown and
//! RespondShutdown, ReportIdle, ReportToolCall, ReportUsage, SetBudget, Leave.

use mesh_core::limits;
use shared::pb;

use super::{throwaway, Absurd};
use crate::fuzz::pools::{around, names, times, weird, weird_some};

/// A shutdown request for `target`.
fn shutdown(target: &str) -> pb::ShutdownRequest {
    pb::ShutdownRequest {
        request_id: String::new(),
        target: target.into(),
        reason: "absurd".into(),
        deadline_unix_ms: 0,
        ..Default::default()
    }
}

impl Absurd {
    /// RequestShutdown (of bob, who never answers) with absurd targets,
    /// reasons, deadlines and ids; RespondShutdown by throwaway members, and
    /// by alice to what is not hers to answer.
    pub(super) async fn request_and_respond_shutdown(&mut self) {
        for target in names() {
            call!(
                self.report,
                "RequestShutdown",
                self.op,
                request_shutdown,
                shutdown(&target)
            );
        }
        for reason in weird().into_iter().chain(around(limits::REASON)) {
            let request = pb::ShutdownRequest {
                reason,
                ..shutdown("bob")
            };
            call!(
                self.report,
                "RequestShutdown",
                self.op,
                request_shutdown,
                request
            );
        }
        for deadline_unix_ms in times() {
            let request = pb::ShutdownRequest {
                deadline_unix_ms,
                ..shutdown("bob")
            };
            call!(
                self.report,
                "RequestShutdown",
                self.op,
                request_shutdown,
                request
            );
        }
        let mut bob_tickets = Vec::new();
        for request_id in weird().into_iter().chain(around(limits::ID)) {
            let request = pb::ShutdownRequest {
                request_id,
                ..shutdown("bob")
            };
            if let Some(ticket) = call!(
                self.report,
                "RequestShutdown",
                self.op,
                request_shutdown,
                request
            ) {
                bob_tickets.push(ticket.request_id);
            }
        }
        for (i, reason) in weird_some()
            .into_iter()
            .chain(around(limits::REASON))
            .enumerate()
        {
            let mut member = throwaway(&self.lead, &mut self.tmp).await;
            let Some(ticket) = call!(
                self.report,
                "RequestShutdown",
                self.op,
                request_shutdown,
                shutdown(&member.name)
            ) else {
                continue;
            };
            let response = pb::ShutdownResponse {
                request_id: ticket.request_id,
                approve: i % 2 == 0,
                reason,
            };
            call!(
                self.report,
                "RespondShutdown",
                member.api,
                respond_shutdown,
                response
            );
        }
        for request_id in weird()
            .into_iter()
            .chain(around(limits::ID))
            .chain(bob_tickets.iter().take(3).cloned())
            .chain(self.plans.iter().take(3).cloned())
        {
            // Alice answering: unknown ids, bob's requests, her own plans.
            let response = pb::ShutdownResponse {
                request_id,
                approve: false,
                reason: "no".into(),
            };
            call!(
                self.report,
                "RespondShutdown",
                self.alice.api,
                respond_shutdown,
                response
            );
        }
        self.report.section("RequestShutdown, RespondShutdown");
    }

    /// ReportIdle, ReportToolCall and Leave (of throwaway members), with
    /// absurd reasons and reports.
    pub(super) async fn report_idle_tool_call_and_leave(&mut self) {
        for reason in weird().into_iter().chain(around(limits::REASON)) {
            call!(
                self.report,
                "ReportIdle",
                self.alice.api,
                report_idle,
                pb::IdleNotification { reason }
            );
        }
        let mut reports = Vec::new();
        for (i, value) in weird()
            .into_iter()
            .chain(around(limits::TOOL))
            .chain(around(limits::REPORT_ARGS_JSON))
            .chain(std::iter::once("r".repeat(1 << 20)))
            .enumerate()
        {
            reports.push(pb::ToolCallReport {
                tool: value.clone(),
                args_json: value.clone(),
                allowed: i % 2 == 0,
                outcome: value.clone(),
                member: value,
            });
        }
        for report_ in reports {
            call!(
                self.report,
                "ReportToolCall",
                self.alice.api,
                report_tool_call,
                report_
            );
        }
        for epoch in weird()
            .into_iter()
            .chain(around(mesh_core::usage::EPOCH_MAX))
        {
            let totals = pb::Usage {
                prompt_tokens: u64::MAX,
                completion_tokens: u64::MAX,
                calls: u64::MAX,
                model_ms: u64::MAX,
            };
            call!(
                self.report,
                "ReportUsage",
                self.alice.api,
                report_usage,
                pb::UsageReport {
                    epoch,
                    totals: Some(totals),
                }
            );
        }
        for name in weird().into_iter().chain(names()) {
            call!(
                self.report,
                "SetBudget",
                self.op,
                set_budget,
                pb::SetBudgetRequest {
                    name,
                    token_budget: u64::MAX,
                }
            );
        }
        for reason in weird_some().into_iter().chain(around(limits::REASON)) {
            let mut member = throwaway(&self.lead, &mut self.tmp).await;
            call!(
                self.report,
                "Leave",
                member.api,
                leave,
                pb::LeaveRequest { reason }
            );
        }
        self.report
            .section("ReportIdle, ReportToolCall, ReportUsage, SetBudget, Leave");
    }
}
