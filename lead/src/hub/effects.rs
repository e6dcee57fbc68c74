//! The ops the core applies ([`mesh_core::team::Team::apply`]), and carrying
//! out what they ask of the runtime ([`Effect`]): their changes join the
//! forming batch, and what they deliver, announce and stop goes out with it
//! once it is durable.

use mesh_core::{
    access::Admitted,
    display::Escaped,
    effect::{Effect, Ended, Notice},
    team::Op,
};

use super::Hub;
use crate::{error::HubError, store::Change};

impl Hub {
    /// Hands `op`, which the core owns, to [`mesh_core::team::Team::apply`]
    /// for `caller`, admitted already: its changes join the forming batch
    /// and its effects are carried out.
    pub(super) fn in_core<O: Op>(
        &mut self,
        caller: &Admitted,
        op: O,
    ) -> Result<O::Reply, HubError> {
        let applied = self.team.apply(self.now(), caller, op)?;
        self.changes
            .extend(applied.changes.into_iter().map(Change::Team));
        self.carry_out(applied.effects);
        Ok(applied.reply)
    }

    /// Carries out `effects`, in order: each envelope, event and notice
    /// joins the forming batch, so none goes out before the batch's changes
    /// are durable.
    pub(super) fn carry_out(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            match effect {
                Effect::Deliver { from, to, message } => match to.as_slice() {
                    [] => {}
                    [one] => self.deliver(&from, one, None, message),
                    _ => self.fan_out(&from, &to, uuid::Uuid::new_v4().to_string(), message),
                },
                Effect::Notify(notice) => {
                    match &notice {
                        Notice::Task(task) => tracing::info!(
                            task_id = %task.task_id,
                            status = ?task.status,
                            owner = %task.owner,
                            "task changed"
                        ),
                        Notice::Request(request) => tracing::info!(
                            request_id = %request.id(),
                            kind = request.opening.kind.as_str(),
                            sender = %request.opening.sender,
                            status = request.status.as_str(),
                            "request changed"
                        ),
                        Notice::ToolCall {
                            member,
                            tool,
                            allowed,
                            outcome,
                            ..
                        } => tracing::info!(
                            member = %member,
                            tool = %Escaped(tool),
                            allowed,
                            outcome = %Escaped(mesh_core::limits::cut(outcome, 300).as_str()),
                            "tool call"
                        ),
                        _ => {}
                    }
                    let now = self.now();
                    if self.watchers.is_empty() {
                        self.changes.extend(self.record.notice(now, notice));
                    } else {
                        if let Some(kept) = crate::history::kept(&notice) {
                            self.changes.extend(self.record.notice(now, kept));
                        }
                        self.emit(notice);
                    }
                }
                Effect::OpenInbox { name, reused } => {
                    if reused {
                        // A terminated member's name is reused: its old inbox goes.
                        self.changes.push(Change::ClearInbox {
                            member: name.clone(),
                        });
                    }
                    self.inboxes.open(&name);
                }
                Effect::Ack { name, seq } => {
                    self.inboxes.ack(&name, seq);
                    self.changes.push(Change::Ack { member: name, seq });
                }
                Effect::CloseInbox(name) => {
                    self.inboxes.clear(&name);
                    self.changes.push(Change::ClearInbox { member: name });
                }
                Effect::Announce { name, reason } => {
                    tracing::info!(member = %name, reason = %Escaped(&reason), "terminated");
                    self.terminations.push(Ended { name, reason });
                }
                Effect::ReviewPlan(id) => self.start_model_review(&id),
                Effect::RunStage { request_id, stage } => self.run_stage(&request_id, stage),
                Effect::Land(request_id) => self.land(&request_id),
                Effect::StopChild(name) => {
                    if let Some(child) = self.processes.get(&name) {
                        tracing::warn!(member = %name, pid = child.pid, "shutdown deadline passed; stopping the process");
                        child.stop();
                    }
                }
            }
        }
    }
}
