//! Running the driver's tool calls: a read runs in the workspace; a gated
//! call is cleared by the gate (asking the lead's permission where the grant
//! says so) and runs through the writer; each is reported to the lead.

use mesh_core::protocol::Decision;
use opentelemetry::context::FutureExt as _;

use super::{incoming::Handled, Exit, Session};
use crate::{
    driver::{Driver, Observation},
    error::SessionError,
    gate::{Clearance, Gate, Writer},
    tools::{ToolCall, ToolError},
};

/// How a permission request ended.
enum Asked {
    /// The lead answered.
    Answer(Decision),
    /// It was not asked (too long), or the lead refused the request itself.
    Refused(String),
    /// Stop: a shutdown was agreed, or a signal came while waiting.
    Exit(Exit),
}

impl Session {
    /// Runs one tool through the gate and reports it to the lead; `Err(exit)`
    /// if a stop came while it waited for permission.
    pub(super) async fn run_tool<D: Driver>(
        &mut self,
        driver: &mut D,
        call: ToolCall,
    ) -> Result<Result<Observation, Exit>, SessionError> {
        // The first gated call under a grant is a span of its plan's trace.
        let mut cx = opentelemetry::Context::new();
        let result = if let Some(result) = self.workspace.run_read(&call) {
            result
        } else {
            cx = self.traces.gated(call.name());
            match self
                .run_gated(driver, &call)
                .with_context(cx.clone())
                .await?
            {
                Ok(result) => result,
                Err(exit) => {
                    crate::traces::end(&cx, Err("stopped"));
                    return Ok(Err(exit));
                }
            }
        };
        // Refused by the gate, the lead or the workspace's rules (a path that
        // leaves it, a FIFO, a hard link): it did not run.
        let allowed = !matches!(result, Err(ToolError::Refused(_) | ToolError::Path { .. }));
        let outcome = match &result {
            Ok(output) => crate::tools::truncate(output, 300).to_owned(),
            Err(e) => e.to_string(),
        };
        crate::traces::end(
            &cx,
            if result.is_ok() {
                Ok(outcome.as_str())
            } else {
                Err(outcome.as_str())
            },
        );
        self.lead
            .report(call.name(), &call.args_json(), allowed, &outcome)
            .await?;
        Ok(Ok(Observation::ToolResult(
            result.map_err(|e| e.to_string()),
        )))
    }

    /// Clears a gated call (asking the lead's permission where the grant
    /// says so) and runs it; `Err(exit)` if a stop came while it waited.
    async fn run_gated<D: Driver>(
        &mut self,
        driver: &mut D,
        call: &ToolCall,
    ) -> Result<Result<Result<String, ToolError>, Exit>, SessionError> {
        let clearance = match self.state.gate() {
            Gate::Plan => Clearance::Refused(format!(
                "{} is not available in plan mode: call submit_plan and wait for its approval",
                call.name()
            )),
            Gate::Unlocked(writer) => writer.clear(call),
        };
        let ran = match clearance {
            Clearance::Run(ticket) => self.writer()?.run(ticket).await,
            Clearance::Refused(reason) => Err(ToolError::Refused(reason)),
            Clearance::NeedsPermission => match self.ask_permission(driver, call).await? {
                Asked::Exit(exit) => return Ok(Err(exit)),
                Asked::Refused(reason) => Err(ToolError::Refused(reason)),
                Asked::Answer(answer) => match self.writer()?.permit(call, &answer) {
                    Ok(ticket) => self.writer()?.run(ticket).await,
                    Err(reason) => Err(ToolError::Refused(reason)),
                },
            },
        };
        Ok(Ok(ran))
    }

    /// The writer, which exists whenever a gated call was cleared.
    fn writer(&self) -> Result<&Writer, SessionError> {
        match self.state.gate() {
            Gate::Unlocked(writer) => Ok(writer),
            Gate::Plan => Err(SessionError::Setup(
                "internal: a gated call was cleared in plan mode".into(),
            )),
        }
    }

    /// Asks the lead to allow one call ([`Lead::request_permission`]) and
    /// waits for its answer. A call not asked, or refused by the lead, does
    /// not run, and the teammate carries on.
    async fn ask_permission<D: Driver>(
        &mut self,
        driver: &mut D,
        call: &ToolCall,
    ) -> Result<Asked, SessionError> {
        let id = match self.lead.request_permission(call).await? {
            Ok(id) => id,
            Err(reason) => return Ok(Asked::Refused(reason)),
        };
        loop {
            match self.next_incoming(driver).await? {
                Handled::Exit(exit) => return Ok(Asked::Exit(exit)),
                Handled::Permission(request_id, answer) if request_id == id => {
                    return Ok(Asked::Answer(answer))
                }
                _ => {}
            }
        }
    }
}
