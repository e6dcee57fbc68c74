//! What RPC handlers ask of the hub ([`Command`]) and the handle they ask it
//! through ([`HubHandle`]): each command carries its reply channel, answered
//! once the batch it belongs to is durable.

use mesh_core::{access::Call, effect::Notice};
use tokio::sync::{mpsc, oneshot};

use super::{Claim, Hub, HubOp};
use crate::{children::Child, error::HubError, outbox};

/// The reply channel of one command.
pub(crate) type Reply<T> = oneshot::Sender<Result<T, HubError>>;

/// An inbox stream the hub opened: the member's name, the stream's id and
/// where its envelopes come out.
pub(crate) type OpenedInbox = (String, u64, outbox::Receiver<crate::inboxes::Entry>);

/// Where a watcher receives events.
pub(crate) type EventSink = outbox::Sender<Watched>;

/// What a watcher is sent: a notice and when it happened, shared by every
/// watcher (each edge encodes it for its wire: `Watch`'s `Event` in
/// `service.rs`, JSON in the console).
pub(crate) type Watched = std::sync::Arc<(i64, Notice)>;

/// What RPC handlers ask of the hub. Teammate commands carry the caller's
/// session token; the hub resolves it to a member.
#[derive(Debug)]
pub(crate) enum Command {
    /// An op the edge translated, to be applied and answered in its own
    /// type ([`HubHandle::apply`] makes it).
    Apply(Applying),
    /// `Inbox`: opens the caller's stream.
    Inbox {
        claim: Claim,
        after_seq: u64,
        reply: Reply<OpenedInbox>,
    },
    /// An inbox stream's reader took half of what waited for it: it has
    /// room for more.
    InboxRoom {
        name: String,
        stream_id: u64,
    },
    StreamClosed {
        name: String,
        stream_id: u64,
    },
    /// The caller `claim` names, admitted if it may come in at `door`: for
    /// work an edge does off the hub before the op (a result's git), so that
    /// an unknown caller is refused before it; the op then carries what was
    /// admitted ([`Claim::Admitted`]) and is not admitted again.
    Admit {
        claim: Claim,
        door: Call<'static>,
        reply: Reply<mesh_core::access::Admitted>,
    },
    /// Where the file a pending `write_file` permission request would
    /// write is on the lead's host: its sender's workspace (a teammate this
    /// lead spawned) and the path in it (the console shows the change).
    WriteTarget {
        request_id: mesh_core::names::RequestId,
        reply: Reply<Option<(std::path::PathBuf, String)>>,
    },
    /// A page of the audit trail (`Operator.ListAudit`).
    Audit {
        claim: Claim,
        since: i64,
        after_seq: u64,
        limit: usize,
        reply: Reply<Vec<crate::audit::Entry>>,
    },
    /// A page of the event history (the console).
    History {
        query: crate::history::Query,
        reply: Reply<crate::history::Page>,
    },
    /// How landing a result came out (`--repo`).
    Landed {
        request_id: mesh_core::names::RequestId,
        landing: mesh_core::result::Landing,
    },
    /// A chain stage's verdict on a plan (`--approval chain:FILE`).
    StageVerdict(crate::chain::stages::StageDone),
    /// `Watch`: the operator's event stream.
    Watch {
        claim: Claim,
        reply: Reply<outbox::Receiver<Watched>>,
    },
    /// `SpawnTeammate`: answered once the process started (or could not).
    Spawn {
        claim: Claim,
        request: Box<crate::launch::SpawnAsk>,
        reply: Reply<crate::launch::Spawned>,
    },
    /// A spawn's outcome, from the task that started the process: `armed`
    /// lets its exit be told once the hub holds the child.
    Launched {
        name: String,
        result: Result<Child, HubError>,
        armed: oneshot::Sender<()>,
        reply: Reply<crate::launch::Spawned>,
    },
    ChildExited {
        name: String,
        pid: u32,
        how: String,
        log_tail: String,
    },
    /// What the model reviewer made of a plan (`--approval model:FILE`).
    ModelReview(crate::reviewer::Outcome),
}

/// An op and its reply channel, typed where [`HubHandle::apply`] made
/// them: the hub runs it once, and the answer goes back as it came out.
pub(crate) struct Applying(Box<dyn FnOnce(&mut Hub) + Send>);

impl Applying {
    /// Applies the op on `hub` and answers it.
    pub(super) fn run(self, hub: &mut Hub) {
        (self.0)(hub);
    }
}

impl std::fmt::Debug for Applying {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Applying(..)")
    }
}

/// A cheap handle RPC handlers use to reach the hub.
#[derive(Debug, Clone)]
pub(crate) struct HubHandle {
    /// The hub's command queue.
    tx: mpsc::Sender<Command>,
}

impl HubHandle {
    /// The handle that sends to `tx`.
    pub(super) fn new(tx: mpsc::Sender<Command>) -> Self {
        Self { tx }
    }

    /// Sends the command `make` builds and waits for its reply.
    pub(crate) async fn call<T>(
        &self,
        make: impl FnOnce(Reply<T>) -> Command,
    ) -> Result<T, HubError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(make(reply))
            .await
            .map_err(|_| HubError::ShuttingDown)?;
        rx.await.map_err(|_| HubError::ShuttingDown)?
    }

    /// Applies `op` (or why the edge could not translate it, told only to
    /// a caller who may come in at `door`) for the caller `claim` names,
    /// come in at `door`, and waits for its answer.
    pub(crate) async fn apply<O: HubOp>(
        &self,
        claim: Claim,
        door: Call<'static>,
        op: Result<O, HubError>,
    ) -> Result<O::Reply, HubError> {
        self.call(|reply| Command::Apply(applying(claim, door, op, reply)))
            .await
    }

    /// Applies `op` for the operator `claim` names, at the Operator door
    /// with the role the op needs, and waits for its answer.
    pub(crate) async fn operate<O: HubOp>(
        &self,
        claim: Claim,
        op: Result<O, HubError>,
    ) -> Result<O::Reply, HubError> {
        self.apply(claim, O::DOORS.operator(), op).await
    }

    /// Sends a command from a thread outside the runtime (a blocking
    /// task), waiting for room; the command back if the hub is gone.
    pub(crate) fn send_blocking(&self, command: Command) -> Option<Command> {
        self.tx.blocking_send(command).err().map(|e| e.0)
    }

    /// Sends a command that has no reply, without waiting (safe in `Drop`).
    pub(crate) fn notify(&self, command: Command) {
        if let Err(mpsc::error::TrySendError::Full(command)) = self.tx.try_send(command) {
            let tx = self.tx.clone();
            tokio::spawn(async move {
                let _ = tx.send(command).await;
            });
        }
    }
}

/// [`Command::Apply`]'s op: `op` applied for `claim` at `door`, its answer
/// sent to `reply`.
pub(super) fn applying<O: HubOp>(
    claim: Claim,
    door: Call<'static>,
    op: Result<O, HubError>,
    reply: Reply<O::Reply>,
) -> Applying {
    Applying(Box::new(move |hub: &mut Hub| {
        let result = hub.apply(claim, door, op);
        hub.reply(reply, result);
    }))
}
