//! The permission handshake: a teammate asks to run one gated tool call
//! (`RequestPermission`), which the approval mode may answer at once, an
//! operator otherwise (or the owners of its path, see [`super::owners`]);
//! the decision goes back to the teammate.

use super::{plans::told, Team};
use crate::{
    effect::{Effect, Message, Notice},
    grant::Mode,
    names::{RequestId, LEAD},
    protocol::{Decision, Kind, Opening, Party, Request},
    refusal::CoreError,
    team::Approval,
};

impl Team {
    /// `RequestPermission`: a teammate in DEFAULT (or ACCEPT_EDITS, for
    /// commands) asks to run one gated tool call; the approval mode may
    /// answer it at once.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn request_permission_op(
        &mut self,
        sender: &str,
        id: RequestId,
        tool: String,
        args_json: String,
        path: Option<String>,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<RequestId, CoreError> {
        if self
            .members
            .get(sender)
            .is_some_and(|m| m.mode == Mode::Plan)
        {
            return Err(CoreError::Conflict(format!(
                "{sender:?} is in plan mode: gated tools wait for an approved plan, not a permission"
            )));
        }
        let payload = serde_json::json!({ "tool": tool, "args_json": args_json });
        let opening = Opening {
            id: id.clone(),
            kind: Kind::Permission,
            sender: sender.to_owned(),
            target: LEAD.to_owned(),
            payload_json: payload.to_string(),
            deadline_unix_ms: None,
        };
        self.check_pending_room(
            &opening,
            None,
            self.rules.pending_per_member,
            self.rules.pending_total,
        )?;
        let outcome = self.requests.open(opening, now)?;
        if outcome.fresh {
            let verdict = match &self.approval {
                // The model and the chain review plans only; permissions
                // wait for a person.
                Approval::Manual | Approval::Model | Approval::Chain(_) => None,
                Approval::Auto => Some(true),
                Approval::Policy(policy) => policy.allows_call(&tool, path.as_deref()),
            };
            effects.push(Effect::Deliver {
                from: sender.to_owned(),
                to: vec![LEAD.to_owned()],
                message: Message::PermissionRequest {
                    request_id: id.clone(),
                    tool,
                    args_json,
                },
            });
            effects.push(Effect::Notify(Notice::Request(Box::new(outcome.request))));
            if let Some(approve) = verdict {
                let feedback = if approve {
                    "allowed by the approval mode"
                } else {
                    "denied by policy: deny_write"
                };
                let decision = Decision {
                    approve,
                    feedback: feedback.into(),
                    grant: None,
                };
                let mode = self.approval.name();
                if !(approve && self.held_for_owners(&id, (mode, None), now, effects)) {
                    self.decide_permission(&id, decision, now, effects)?;
                }
            }
        }
        Ok(id)
    }

    /// Records a permission decision and, the first time, tells the
    /// teammate.
    pub(super) fn decide_permission(
        &mut self,
        id: &RequestId,
        decision: Decision,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Request, CoreError> {
        let outcome =
            self.requests
                .answer(id, Kind::Permission, &Party::Operator, decision, now)?;
        if outcome.fresh {
            told(
                &outcome.request,
                Message::permission_decided(&outcome.request),
                effects,
            );
        }
        Ok(outcome.request)
    }
}
