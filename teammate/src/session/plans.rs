//! The driver's plans and its idling: a plan submitted for review, waited
//! for as long as the driver waits; idle reported, and the next message
//! waited for.

use mesh_core::{display::Escaped, limits, plan::Plan};
use opentelemetry::context::FutureExt as _;
use shared::{pb, wire::ToPb};

use super::{incoming::Handled, Exit, Session};
use crate::{
    catalog,
    client::fatal_status,
    driver::{Driver, Observation},
    error::SessionError,
};

impl Session {
    /// Submits a plan (superseding the last, rejected one) and waits for the
    /// review, as long as the driver waits ([`Driver::review_wait`]): a
    /// decision after that reaches the driver later. `Err(exit)` if a stop
    /// came first.
    pub(super) async fn submit<D: Driver>(
        &mut self,
        driver: &mut D,
        mut plan: Plan,
    ) -> Result<Result<Observation, Exit>, SessionError> {
        let supersedes = match self.state.prepare_plan(&mut plan) {
            Ok(supersedes) => supersedes,
            Err(problem) => {
                let args = serde_json::json!({ "summary": plan.summary }).to_string();
                self.lead
                    .report(catalog::SUBMIT_PLAN, &args, false, problem)
                    .await?;
                return Ok(Ok(Observation::ToolResult(Err(problem.into()))));
            }
        };
        let request = pb::PlanApprovalRequest {
            request_id: uuid::Uuid::new_v4().to_string(),
            supersedes,
            plan: Some(plan.to_pb()),
        };
        let id = request.request_id.clone();
        let cx = self
            .traces
            .submitting(&id, &self.config.name, &plan.summary);
        let submitted = self
            .lead
            .retry("SubmitPlan", |mut client| {
                let request = request.clone();
                async move { client.submit_plan(request).await }
            })
            .with_context(cx)
            .await;
        match submitted {
            Ok(_) => {}
            // The lead will not consider this plan (too large, malformed, in
            // the wrong state): the driver hears it as a rejection and may
            // revise. The last plan stays: this one never existed on the lead.
            Err(SessionError::Rpc { status, .. }) if !fatal_status(&status) => {
                self.traces.refused(status.message());
                tracing::warn!(error = %Escaped(&status.to_string()), "the lead refused the plan");
                return Ok(Ok(Observation::PlanRejected {
                    feedback: format!("the lead refused the plan: {}", status.message()),
                }));
            }
            Err(e) => return Err(e),
        }
        tracing::info!(request_id = %id, summary = %Escaped(&plan.summary), "submitted a plan");
        self.state.submitted(id.clone(), plan);
        // Only the wait is bounded: an envelope, once received, is handled
        // to the end (a shutdown request answered) before the wait can end.
        let until = driver
            .review_wait()
            .map(|wait| tokio::time::Instant::now() + wait);
        loop {
            match self.next_incoming_until(driver, until).await? {
                Handled::Exit(exit) => return Ok(Err(exit)),
                Handled::TimedOut => {
                    return Ok(Ok(Observation::PlanPending { request_id: id }));
                }
                _ => {}
            }
            if !self.state.is_under_review() {
                if let Some(decision) = self.state.take_decision() {
                    return Ok(Ok(decision));
                }
            }
        }
    }

    /// Reports idle and waits for a message; `Err(exit)` if a stop came first.
    pub(super) async fn idle<D: Driver>(
        &mut self,
        driver: &mut D,
        reason: String,
    ) -> Result<Result<Observation, Exit>, SessionError> {
        if let Some(seen) = self.state.next_news() {
            return Ok(Ok(seen));
        }
        tracing::info!(member = %Escaped(&self.config.name), reason = %Escaped(&reason), "idle");
        let idle = pb::IdleNotification {
            reason: limits::cut(&reason, limits::REASON),
        };
        self.lead
            .retry("ReportIdle", |mut client| {
                let idle = idle.clone();
                async move { client.report_idle(idle).await }
            })
            .await?;
        loop {
            if let Handled::Exit(exit) = self.next_incoming(driver).await? {
                return Ok(Err(exit));
            }
            if let Some(seen) = self.state.next_news() {
                return Ok(Ok(seen));
            }
        }
    }
}
