//! The hub: the one task that owns the core's [`Team`] (members, requests,
//! tasks, holds, usage), the inboxes, the watchers and the children. RPC
//! handlers send it a [`Command`] and await the reply, so every event is seen
//! by everyone in one order. Slow work (spawning, model reviews, chain
//! stages) runs off it and comes back as commands.

use std::time::Duration;

pub use mesh_core::team::PendingBudget;
use mesh_core::{
    access::{Call, Role},
    team::Team,
};
use tokio::sync::{mpsc, watch};

use crate::{
    inboxes::Inboxes,
    store::{Change, StoreError},
};

mod chain;
mod clock;
mod command;
mod commit;
mod config;
mod delivery;
mod effects;
mod landing;
mod lifecycle;
mod members;
mod ops;
pub(crate) use ops::{Claim, HubOp, SendText};
mod processes;
mod record;
#[cfg(test)]
mod replay_tests;
mod requests;
mod restore;
mod terminations;
#[cfg(test)]
mod tests;
mod usage;
mod watchers;
mod workers;
pub(crate) use clock::Clock;
pub(crate) use command::{Command, EventSink, HubHandle, OpenedInbox, Reply, Watched};
pub use config::{Approval, HubConfig};
use processes::Processes;
use record::Record;
pub(crate) use restore::load;
#[cfg(test)]
pub(crate) use restore::load_inline;
use terminations::Terminations;
use watchers::Watchers;
use workers::Workers;

/// The most commands handled before their changes are committed together.
const MAX_BURST: usize = 512;

/// The state the hub owns.
pub(crate) struct Hub {
    /// What time it is.
    clock: Clock,
    /// How it behaves.
    config: HubConfig,
    /// Every member's inbox and stream.
    inboxes: Inboxes,
    /// The members, every protocol request, the task list, who holds which
    /// files and the usage: the core's, which says what of them the store
    /// must keep.
    team: Team,
    /// Who writes to the store.
    committer: crate::committer::Committer,
    /// Changes not yet committed (members and requests are added at commit).
    changes: Vec<Change>,
    /// Replies, events and envelopes held until their changes are committed.
    forming: crate::committer::Forming,
    /// Open `Watch` streams.
    watchers: Watchers,
    /// The processes the lead started or is starting.
    processes: Processes,
    /// Ids for inbox streams, so that a stale close is ignored.
    next_stream_id: u64,
    /// Set once the lead is stopping: when to give up on children agreeing.
    stopping_until: Option<i64>,
    /// The id of the next body a fan-out shares.
    next_body_id: u64,
    /// Terminations not yet told to the team.
    terminations: Terminations,
    /// When the next sweep (stuck streams, retention) is due.
    next_sweep: i64,
    /// For children's exit notices.
    handle: HubHandle,
    /// `Join` attempts, limited.
    joins: mesh_core::rate::TokenBucket,
    /// The queues of the work off the hub: reviews, stages, landings.
    workers: Workers,
    /// The history, the audit trail and the tracer.
    record: Record,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("committer", &self.committer)
            .finish_non_exhaustive()
    }
}

/// Why the hub stopped other than by request.
#[derive(Debug, thiserror::Error)]
pub enum HubFailure {
    /// The store could not commit: nothing after the last commit was answered.
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// How the lead is asked to stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// For good: its children are asked to shut down, then stopped.
    Stop,
    /// Another lead goes on with the team (why): every stream ends
    /// UNAVAILABLE at once, nothing more is written, and the children are
    /// left running to rejoin whoever leads.
    StepDown(String),
}

/// Runs the hub until `stop` turns true and every child it started has
/// stopped; then ends every stream and returns.
pub(crate) fn start(
    mut hub: Hub,
    mut rx: mpsc::Receiver<Command>,
    mut stop: watch::Receiver<Option<Stop>>,
) -> (HubHandle, tokio::task::JoinHandle<Result<(), HubFailure>>) {
    let handle = hub.handle.clone();
    match &hub.config.approval {
        Approval::Model(reviewer) => {
            let hub_handle = handle.clone();
            hub.workers.reviews = Some(crate::reviewer::start(
                reviewer.clone(),
                std::sync::Arc::new(move |outcome| {
                    hub_handle.notify(Command::ModelReview(outcome));
                }),
            ));
        }
        Approval::Chain(_) => {
            let hub_handle = handle.clone();
            hub.workers.stages = Some(crate::chain::stages::start(std::sync::Arc::new(
                move |done| hub_handle.notify(Command::StageVerdict(done)),
            )));
        }
        Approval::Manual | Approval::Auto | Approval::Policy(_) => {}
    }
    hub.start_lander();
    let task = tokio::spawn(async move {
        // Set when the lead is dropped without being stopped: nothing more
        // is asked of its children.
        let mut abandoned = false;
        // Set when another lead goes on with the team (this one stepped
        // down, or its shared store failed): its children are left running,
        // to rejoin whoever leads next.
        let mut leave = None;
        let result = loop {
            let wait = hub
                .next_wakeup()
                .map(|at| Duration::from_millis(u64::try_from(at - hub.now()).unwrap_or(0)));
            let sleep = async {
                match wait {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                result = hub.committer.durable(), if hub.committer.busy() => {
                    if let Err(e) = hub.committed(result) {
                        tracing::error!(error = %e, "cannot persist state; stopping the lead");
                        leave = hub.config.shared_store.then(|| e.to_string());
                        break Err(HubFailure::from(e));
                    }
                    // What came in during the commit goes in the next batch.
                    hub.handle_waiting(&mut rx, MAX_BURST);
                }
                command = rx.recv() => {
                    let Some(command) = command else { break Ok(()) };
                    hub.handle(command);
                    hub.handle_waiting(&mut rx, MAX_BURST - 1);
                }
                () = sleep => hub.on_timer(),
                stopped = stop.wait_for(Option::is_some), if hub.stopping_until.is_none() && !abandoned => {
                    let stopped = stopped.map(|s| s.clone());
                    match stopped {
                        Ok(Some(Stop::StepDown(why))) => {
                            leave = Some(why);
                            break Ok(());
                        }
                        Ok(_) => hub.begin_stop(),
                        Err(_) => abandoned = true,
                    }
                }
            }
            hub.send_due_notices();
            if let Err(e) = hub.advance() {
                tracing::error!(error = %e, "cannot persist state; stopping the lead");
                leave = hub.config.shared_store.then(|| e.to_string());
                break Err(HubFailure::from(e));
            }
            if hub.stop_done() {
                break Ok(());
            }
        };
        match leave {
            Some(why) => hub.leave(&why).await,
            None => hub.finish().await,
        }
        result
    });
    (handle, task)
}

impl Hub {
    /// The time now, in unix milliseconds.
    fn now(&self) -> i64 {
        self.clock.now()
    }

    /// Runs the commands waiting in `rx`, at most `most`.
    fn handle_waiting(&mut self, rx: &mut mpsc::Receiver<Command>, most: usize) {
        for _ in 0..most {
            match rx.try_recv() {
                Ok(command) => self.handle(command),
                Err(_) => break,
            }
        }
    }

    /// Runs one command.
    fn handle(&mut self, command: Command) {
        match command {
            Command::Apply(applying) => applying.run(self),
            Command::Inbox {
                claim,
                after_seq,
                reply,
            } => {
                let result = self
                    .admit_member(claim, "Inbox")
                    .and_then(|name| self.open_inbox(&name, after_seq));
                self.reply(reply, result);
            }
            Command::InboxRoom { name, stream_id } => self.inbox_room(name, stream_id),
            Command::StreamClosed { name, stream_id } => self.stream_closed(&name, stream_id),
            Command::StageVerdict(done) => {
                if let Some((reviewer, used)) = done.used {
                    self.reviewer_used(&reviewer, used);
                }
                self.stage_verdict(done.request_id, done.stage, done.verdict)
            }
            Command::ModelReview(outcome) => self.model_review(outcome),
            Command::Watch { claim, reply } => {
                let result = self
                    .admit(claim, Call::Operator(Role::Viewer), None)
                    .map(|_| self.watchers.add());
                self.reply(reply, result);
            }
            Command::Spawn {
                claim,
                request,
                reply,
            } => match self.admit(claim, Call::Operator(Role::Admin), None) {
                Ok(_) => self.spawn(*request, reply),
                Err(e) => self.reply(reply, Err(e)),
            },
            Command::Launched {
                name,
                result,
                armed,
                reply,
            } => self.launched(name, result, armed, reply),
            Command::ChildExited {
                name,
                pid,
                how,
                log_tail,
            } => self.child_exited(&name, pid, &how, log_tail),
            Command::Landed {
                request_id,
                landing,
            } => self.landed(request_id, landing),
            Command::WriteTarget { request_id, reply } => {
                let target = self.team.requests.get(&request_id).and_then(|r| {
                    let args: serde_json::Value =
                        serde_json::from_str(&r.permission_args()).ok()?;
                    let path = args.get("path")?.as_str()?.to_owned();
                    let child = self.processes.get(&r.opening.sender)?;
                    Some((child.workspace.clone(), path))
                });
                self.reply(reply, Ok(target));
            }
            Command::Audit {
                claim,
                since,
                after_seq,
                limit,
                reply,
            } => {
                let result = self
                    .admit(claim, Call::Operator(Role::Viewer), None)
                    .map(|_| self.record.audit_page(since, after_seq, limit));
                self.reply(reply, result);
            }
            Command::History { query, reply } => {
                let page = self.record.history(&query);
                self.reply(reply, Ok(page));
            }
            Command::Admit { claim, door, reply } => {
                let result = self.admit(claim, door, None);
                self.reply(reply, result);
            }
        }
    }
}
