//! Answering the lead's shutdown request: the driver decides (offered
//! `respond_shutdown`), the session tells the lead, and a refusal (or an
//! answer the lead no longer takes) lets the teammate go on.

use mesh_core::{display::Escaped, limits};
use opentelemetry::context::FutureExt as _;
use shared::pb;

use super::{Exit, Session};
use crate::{
    catalog,
    client::fatal_status,
    driver::{Driver, Observation, ShutdownRequest},
    error::SessionError,
};

impl Session {
    /// Asks the driver to answer a shutdown request (offering it
    /// `respond_shutdown`) and tells the lead; `Some` if it agreed.
    pub(super) async fn answer_shutdown<D: Driver>(
        &mut self,
        driver: &mut D,
        request: ShutdownRequest,
        seq: u64,
    ) -> Result<Option<Exit>, SessionError> {
        let arrival = self.mailbox.arrival();
        let cx = crate::traces::answering_shutdown(
            &request.request_id,
            &arrival.traceparent,
            &self.config.name,
            arrival.at_unix_ms,
        );
        let mut tools = self.state.gate().tools();
        tools.push(catalog::RESPOND_SHUTDOWN);
        let answer = driver
            .answer_shutdown(&request, &tools)
            .with_context(cx.clone())
            .await;
        self.report_usage(driver).await?;
        tracing::info!(request_id = %Escaped(&request.request_id), approve = answer.approve, reason = %Escaped(&answer.reason), "answering a shutdown request");
        let response = pb::ShutdownResponse {
            request_id: request.request_id,
            approve: answer.approve,
            reason: limits::cut(&answer.reason, limits::REASON),
        };
        let answered = self
            .lead
            .retry("RespondShutdown", |mut client| {
                let request = response.clone();
                async move { client.respond_shutdown(request).await }
            })
            .with_context(cx.clone())
            .await;
        crate::traces::answered_shutdown(
            &cx,
            answer.approve,
            &answer.reason,
            match &answered {
                Ok(_) => Ok(()),
                Err(SessionError::Rpc { status, .. }) => Err(status.message()),
                Err(_) => Err("the lead is gone"),
            },
        );
        match answered {
            Ok(_) => {}
            // The request is over (it expired, or the lead will not take
            // this answer): the teammate is still on the team and goes on.
            Err(SessionError::Rpc { status, .. }) if !fatal_status(&status) => {
                tracing::warn!(error = %Escaped(&status.to_string()), "the lead refused the shutdown answer; carrying on");
                self.lead.ack(seq).await?;
                driver.observe(Observation::ShutdownRefused {
                    reason: format!("the lead did not take the answer: {}", status.message()),
                });
                return Ok(None);
            }
            Err(e) => return Err(e),
        }
        if answer.approve {
            driver.observe(Observation::ShutdownAgreed);
            return Ok(Some(Exit::Shutdown));
        }
        self.lead.ack(seq).await?;
        driver.observe(Observation::ShutdownRefused {
            reason: answer.reason,
        });
        Ok(None)
    }
}
