//! The shutdown handshake: the operator asks, the teammate agrees (and is
//! TERMINATED) or refuses; no answer by the deadline expires the request and
//! stops a spawned teammate by signal.

use serde_json::json;
use shared::wire::*;
use shared::{
    error::FieldError,
    lifecycle::Event,
    names::{Name, RequestId, LEAD},
    pb::{self, envelope::Body},
    protocol::{Decision, Kind, Opening, Party},
};

use super::Hub;
use crate::{error::HubError, store::token_hash};

impl Hub {
    /// `RequestShutdown`: asks a teammate to shut down by a deadline.
    pub(super) fn request_shutdown(
        &mut self,
        id: RequestId,
        target: Name,
        reason: String,
        deadline: Option<i64>,
    ) -> Result<RequestId, HubError> {
        match self.team.members.get(target.as_str()) {
            None => return Err(FieldError::new("target", format!("no member {target:?}")).into()),
            Some(m) if m.terminated() => {
                return Err(HubError::FailedPrecondition(format!(
                    "target: {target:?} has already terminated"
                )))
            }
            Some(_) => {}
        }
        let now = self.now();
        let asked = deadline.unwrap_or(0);
        let deadline = match deadline {
            None => {
                now + i64::try_from(self.config.shutdown_deadline.as_millis())
                    .unwrap_or(i64::MAX / 2)
            }
            Some(d) if d <= now => {
                return Err(FieldError::new(
                    "deadline_unix_ms",
                    format!("{d} is in the past (now is {now})"),
                )
                .into())
            }
            Some(d) => d,
        };
        let payload = json!({
            "target": target.as_str(),
            "reason": reason,
            "deadline_unix_ms": asked,
        });
        let outcome = self.team.requests.open(
            Opening {
                id: id.clone(),
                kind: Kind::Shutdown,
                sender: LEAD.to_owned(),
                target: target.to_string(),
                payload_json: payload.to_string(),
                deadline_unix_ms: Some(deadline),
            },
            now,
        )?;
        if outcome.fresh {
            tracing::info!(request_id = %id, member = %target, deadline, "shutdown requested");
            self.life(target.as_str(), Event::ShutdownRequested);
            let body = pb::ShutdownRequest {
                request_id: id.to_string(),
                target: target.to_string(),
                reason,
                deadline_unix_ms: deadline,
            };
            self.deliver(LEAD, target.as_str(), None, Body::ShutdownRequest(body));
            self.emit(pb::event::Kind::Request(outcome.request.to_pb()));
            self.emit_member(target.as_str());
        }
        Ok(id)
    }

    /// `RespondShutdown`: the target agrees (and is TERMINATED) or refuses.
    pub(super) fn respond_shutdown(
        &mut self,
        name: &str,
        id: RequestId,
        approve: bool,
        reason: String,
    ) -> Result<(), HubError> {
        let name = name.to_owned();
        let response = pb::ShutdownResponse {
            request_id: id.to_string(),
            approve,
            reason,
        };
        let decision = Decision {
            approve,
            feedback: response.reason.clone(),
            grant: None,
        };
        let outcome = self.team.requests.answer(
            &id,
            Kind::Shutdown,
            &Party::Member(name.clone()),
            decision,
            self.now(),
        )?;
        if outcome.fresh {
            tracing::info!(request_id = %id, member = %name, approve = response.approve, reason = %shared::display::Escaped(&response.reason), "shutdown answered");
            self.deliver(&name, LEAD, None, Body::ShutdownResponse(response.clone()));
            self.emit(pb::event::Kind::Request(outcome.request.to_pb()));
            if response.approve {
                let why = if response.reason.is_empty() {
                    "shut down on request".to_owned()
                } else {
                    format!("shut down on request: {}", response.reason)
                };
                self.terminate(&name, &why);
            } else {
                self.refresh_shutting_down(&name);
            }
        }
        Ok(())
    }

    /// Who answers shutdown request `id` with session `token` no active
    /// member holds: a member that agreed is gone, but its retry of that
    /// answer (the reply to the first was lost) gets the first answer's
    /// result.
    pub(super) fn retired_answerer(&self, token: &str, id: &RequestId) -> Option<String> {
        let name = self.team.members.by_retired_hash(&token_hash(token))?;
        self.team
            .requests
            .get(id)
            .is_some_and(|r| r.status.is_terminal())
            .then(|| name.to_owned())
    }

    /// Expires every request whose deadline passed; a spawned teammate that
    /// let its shutdown deadline pass is stopped by signal.
    pub(super) fn expire_due(&mut self) {
        let now = self.now();
        for id in self.team.requests.due(now) {
            let Some(request) =
                self.team
                    .requests
                    .expire(&id, "deadline passed with no answer", now)
            else {
                continue;
            };
            tracing::info!(request_id = %id, "request expired");
            self.emit(pb::event::Kind::Request(request.to_pb()));
            if request.opening.kind == Kind::Shutdown {
                let target = request.opening.target;
                self.refresh_shutting_down(&target);
                if let Some(child) = self.children.get(&target) {
                    tracing::warn!(member = %target, pid = child.pid, "shutdown deadline passed; stopping the process");
                    child.stop();
                }
            }
        }
    }

    /// SHUTTING_DOWN holds while a shutdown request for the member is
    /// pending (the core's rule); the watchers hear how it stands.
    pub(super) fn refresh_shutting_down(&mut self, name: &str) {
        self.team.refresh_shutting_down(name);
        self.emit_member(name);
    }
}
