//! The shutdown handshake as the team applies it: the operator asks a
//! member to shut down by a deadline; the member agrees (and is
//! TERMINATED) or refuses. Its deadline passing is [`Team::tick`]'s.

use serde_json::json;

use super::Team;
use crate::{
    effect::{Effect, Message, Notice},
    error::FieldError,
    lifecycle::Event,
    names::{RequestId, LEAD},
    op::RequestShutdown,
    protocol::{Decision, Kind, Opening, Party},
    refusal::CoreError,
};

impl Team {
    /// `RequestShutdown`: the operator asks `target` to shut down by a
    /// deadline (the rules' default if it names none).
    pub(super) fn request_shutdown_op(
        &mut self,
        op: RequestShutdown,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<RequestId, CoreError> {
        let RequestShutdown {
            request_id: id,
            target,
            reason,
            deadline_unix_ms: deadline,
            asked_by,
        } = op;
        let target = &target;
        match self.members.get(target.as_str()) {
            None => return Err(FieldError::new("target", format!("no member {target:?}")).into()),
            Some(m) if m.terminated() => {
                return Err(CoreError::Conflict(format!(
                    "target: {target:?} has already terminated"
                )))
            }
            Some(_) => {}
        }
        let asked = deadline.unwrap_or(0);
        let deadline = match deadline {
            None => now.saturating_add(self.rules.shutdown_deadline_ms),
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
            "asked_by": asked_by,
        });
        let outcome = self.requests.open(
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
            self.members
                .on_life(target.as_str(), Event::ShutdownRequested);
            effects.push(Effect::Deliver {
                from: LEAD.to_owned(),
                to: vec![target.to_string()],
                message: Message::ShutdownRequest {
                    request_id: id.clone(),
                    target: target.to_string(),
                    reason,
                    deadline_unix_ms: deadline,
                },
            });
            effects.push(Effect::Notify(Notice::Request(Box::new(outcome.request))));
            self.notify_member(target.as_str(), effects);
        }
        Ok(id)
    }

    /// `RespondShutdown`: `name` agrees (and is TERMINATED) or refuses.
    pub(super) fn respond_shutdown_op(
        &mut self,
        name: &str,
        id: &RequestId,
        approve: bool,
        reason: String,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<(), CoreError> {
        let decision = Decision {
            approve,
            feedback: reason.clone(),
            grant: None,
        };
        let outcome = self.requests.answer(
            id,
            Kind::Shutdown,
            &Party::Member(name.to_owned()),
            decision,
            now,
        )?;
        if outcome.fresh {
            let why = if reason.is_empty() {
                "shut down on request".to_owned()
            } else {
                format!("shut down on request: {reason}")
            };
            effects.push(Effect::Deliver {
                from: name.to_owned(),
                to: vec![LEAD.to_owned()],
                message: Message::ShutdownResponse {
                    request_id: id.clone(),
                    approve,
                    reason,
                },
            });
            effects.push(Effect::Notify(Notice::Request(Box::new(outcome.request))));
            if approve {
                effects.extend(self.end_member(name, &why, now));
            } else {
                self.refresh_shutting_down(name);
                self.notify_member(name, effects);
            }
        }
        Ok(())
    }
}
