//! `request_amendment`: the driver asks to add to its approved plan; an
//! approval widens the gate to the grant it carries.

use mesh_core::limits;
use opentelemetry::{context::FutureExt as _, KeyValue};
use shared::pb;

use super::{incoming::Handled, Exit, Session};
use crate::{
    catalog,
    client::fatal_status,
    driver::{Driver, Observation},
    error::SessionError,
};

impl Session {
    /// `request_amendment`: asks the lead to add `files` (and `steps`) to
    /// the approved plan and waits for the answer; an approval widens the
    /// gate to the grant it carries.
    pub(super) async fn request_amendment<D: Driver>(
        &mut self,
        driver: &mut D,
        files: Vec<String>,
        steps: Vec<String>,
        why: String,
    ) -> Result<Result<Observation, Exit>, SessionError> {
        let args = serde_json::json!({ "files": files, "why": crate::tools::truncate(&why, 120) })
            .to_string();
        let request = pb::AmendmentRequest {
            request_id: uuid::Uuid::new_v4().to_string(),
            files,
            steps,
            why: limits::cut(&why, limits::REASON),
            plan_id: String::new(),
        };
        let id = request.request_id.clone();
        let cx = self.traces.under_grant(
            "request_amendment",
            vec![
                KeyValue::new("mesh.request.id", id.clone()),
                KeyValue::new("mesh.request.kind", "amendment"),
                KeyValue::new("mesh.member", self.config.name.clone()),
            ],
        );
        let asked = self
            .lead
            .retry("RequestAmendment", |mut client| {
                let request = request.clone();
                async move { client.request_amendment(request).await }
            })
            .with_context(cx.clone())
            .await;
        let outcome: Result<String, String> = match asked {
            Ok(_) => {
                tracing::info!(request_id = %id, "asked for an amendment");
                let answer = loop {
                    match self.next_incoming(driver).await? {
                        Handled::Exit(exit) => return Ok(Err(exit)),
                        Handled::Amendment(request_id, answer) if request_id == id => break answer,
                        _ => {}
                    }
                };
                match (answer.approve, answer.grant) {
                    (true, Some(grant)) => {
                        match self
                            .state
                            .widen(grant, &self.workspace, &self.config.commands)
                        {
                            Ok(paths) => Ok(format!(
                                "amendment approved: you may now write {}",
                                paths.join(", ")
                            )),
                            Err(e) => Err(e.to_string()),
                        }
                    }
                    (true, None) => Ok("amendment approved".into()),
                    (false, _) => Err(format!("amendment rejected: {}", answer.feedback)),
                }
            }
            Err(SessionError::Rpc { status, .. }) if !fatal_status(&status) => Err(format!(
                "the lead refused the amendment: {}",
                status.message()
            )),
            Err(e) => return Err(e),
        };
        let said = match &outcome {
            Ok(text) => text.clone(),
            Err(text) => text.clone(),
        };
        crate::traces::end(&cx, outcome.as_deref().map_err(String::as_str));
        self.lead
            .report(catalog::REQUEST_AMENDMENT, &args, outcome.is_ok(), &said)
            .await?;
        Ok(Ok(Observation::ToolResult(outcome)))
    }
}
