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

use super::{requests::check_text, Hub};
use crate::error::HubError;

impl Hub {
    /// `RequestShutdown`: asks a teammate to shut down by a deadline.
    pub(super) fn request_shutdown(
        &mut self,
        request: pb::ShutdownRequest,
    ) -> Result<pb::ShutdownTicket, HubError> {
        let target = Name::parse("target", &request.target)?;
        check_text("reason", &request.reason)?;
        match self.roster.get(target.as_str()) {
            None => return Err(FieldError::new("target", format!("no member {target:?}")).into()),
            Some(m) if m.terminated() => {
                return Err(HubError::FailedPrecondition(format!(
                    "target: {target:?} has already terminated"
                )))
            }
            Some(_) => {}
        }
        let now = self.now();
        let deadline = match request.deadline_unix_ms {
            0 => {
                now + i64::try_from(self.config.shutdown_deadline.as_millis())
                    .unwrap_or(i64::MAX / 2)
            }
            d if d <= now => {
                return Err(FieldError::new(
                    "deadline_unix_ms",
                    format!("{d} is in the past (now is {now})"),
                )
                .into())
            }
            d => d,
        };
        let id = RequestId::for_new("request_id", &request.request_id)?;
        let payload = json!({
            "target": request.target,
            "reason": request.reason,
            "deadline_unix_ms": request.deadline_unix_ms,
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
                reason: request.reason,
                deadline_unix_ms: deadline,
            };
            self.deliver(LEAD, target.as_str(), None, Body::ShutdownRequest(body));
            self.emit(pb::event::Kind::Request(outcome.request.to_pb()));
            self.emit_member(target.as_str());
        }
        Ok(pb::ShutdownTicket {
            request_id: id.to_string(),
        })
    }

    /// `RespondShutdown`: the target agrees (and is TERMINATED) or refuses.
    pub(super) fn respond_shutdown(
        &mut self,
        token: &str,
        response: pb::ShutdownResponse,
    ) -> Result<(), HubError> {
        let id = RequestId::existing("request_id", &response.request_id)?;
        check_text("reason", &response.reason)?;
        let name = match self.caller(token) {
            Ok(name) => name,
            // A member that agreed is gone, but its retry of that answer (the
            // reply to the first was lost) gets the first answer's result.
            Err(e) => match self.roster.by_retired_token(token) {
                Some(name)
                    if self
                        .team
                        .requests
                        .get(&id)
                        .is_some_and(|r| r.status.is_terminal()) =>
                {
                    name.to_owned()
                }
                _ => return Err(e),
            },
        };
        let decision = Decision {
            approve: response.approve,
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

    /// Expires every pending request `name` sends or must answer.
    pub(super) fn expire_involving(&mut self, name: &str, reason: &str) {
        let now = self.now();
        for id in self.team.requests.pending_involving(name) {
            if let Some(request) = self.team.requests.expire(&id, reason, now) {
                self.emit(pb::event::Kind::Request(request.to_pb()));
            }
        }
    }

    /// SHUTTING_DOWN holds while a shutdown request for the member is pending.
    pub(super) fn refresh_shutting_down(&mut self, name: &str) {
        let pending = self
            .team
            .requests
            .pending_involving(name)
            .iter()
            .filter_map(|id| self.team.requests.get(id))
            .any(|r| r.opening.kind == Kind::Shutdown && r.opening.target == name);
        let event = if pending {
            Event::ShutdownRequested
        } else {
            Event::ShutdownSettled
        };
        self.life(name, event);
        self.emit_member(name);
    }
}
