//! The hub: the one task that owns the core's [`Team`] (members, requests,
//! tasks, holds, usage), the inboxes, the watchers and the children. RPC
//! handlers send it a [`Command`] and await the reply, so every event is seen
//! by everyone in one order. Slow work (spawning, model reviews, chain
//! stages) runs off it and comes back as commands.

use std::time::Duration;

pub use mesh_core::team::PendingBudget;
use mesh_core::{
    access::Call,
    effect::{Envelope, Message, Notice},
    members::Members,
    names::{EVERYONE, LEAD},
    op::Op,
    policy::Policy,
    tasks::TaskBoard,
    team::{Approval as CoreApproval, ReviewChain, Rules, Team},
};
use shared::auth::now_unix_ms;
use tokio::sync::{mpsc, oneshot, watch};

use crate::{
    children::{Child, Spawner},
    error::HubError,
    inboxes::{Entry, Inboxes, Payload, SharedBody},
    outbox,
    store::{Change, Store, StoreError},
};

mod chain;
mod commit;
mod effects;
mod landing;
mod lifecycle;
mod members;
mod ops;
pub(crate) use ops::{Answer, Answered, Claim};
mod processes;
mod record;
#[cfg(test)]
mod replay_tests;
mod requests;
mod terminations;
#[cfg(test)]
mod tests;
mod usage;
mod watchers;
mod workers;
use processes::Processes;
use record::Record;
use terminations::Terminations;
use watchers::Watchers;
use workers::Workers;

/// Who decides plan approvals.
#[derive(Debug, Clone)]
pub enum Approval {
    /// Requests wait for an operator.
    Manual,
    /// Every plan is approved at once (for demos).
    Auto,
    /// A policy file's criteria decide.
    Policy(Policy),
    /// A model reviews each plan (`--approval model:FILE`), in tasks of its
    /// own that the hub hands jobs to; it answers as an operator would.
    /// Undecided plans stay pending.
    Model(std::sync::Arc<crate::reviewer::Reviewer>),
    /// A chain of reviewers (`--approval chain:FILE`): stages tried in
    /// order; what they cannot decide waits for an operator.
    Chain(std::sync::Arc<crate::chain::Chain>),
}

/// How the hub behaves.
#[derive(Debug, Clone)]
pub struct HubConfig {
    /// Who decides plan approvals.
    pub approval: Approval,
    /// The deadline of a shutdown request that names none.
    pub shutdown_deadline: Duration,
    /// The most unacknowledged envelopes one inbox holds before `Send` to it fails.
    pub max_inbox: usize,
    /// The most bytes of unacknowledged envelopes one inbox holds.
    pub max_inbox_bytes: usize,
    /// The most bytes of unacknowledged envelopes all inboxes hold together
    /// (a body shared by a fan-out counted once).
    pub max_held_bytes: usize,
    /// How long a member with an open inbox stream may leave an envelope
    /// unacknowledged before it is treated as stuck: its stream is ended and it
    /// is DISCONNECTED (it may reconnect and resume).
    pub ack_timeout: Duration,
    /// How long resolved requests and terminated members are kept.
    pub retention: Duration,
    /// How to start teammates; `None` where the lead cannot (tests of the hub).
    pub spawner: Option<Spawner>,
    /// How long a disconnected member may stay away before it is TERMINATED.
    pub grace: Duration,
    /// When the lead stops: how long spawned teammates have to agree to shut
    /// down before they are stopped by signal.
    pub stop_wait: Duration,
    /// The most members not terminated; a `Join` past it is RESOURCE_EXHAUSTED.
    pub max_members: usize,
    /// `Join` attempts per second, on average ...
    pub join_rate: f64,
    /// ... and at once.
    pub join_burst: u32,
    /// The most bytes one response stream (an inbox, a watcher, the
    /// console's events) holds that its client has not read: an inbox waits
    /// for its reader, a watcher is dropped.
    pub stream_max_bytes: usize,
    /// What the pending requests one member opened may hold ...
    pub pending_per_member: PendingBudget,
    /// ... and what those of every member together may.
    pub pending_total: PendingBudget,
    /// The most bytes of resolved requests kept for the record (within
    /// `retention`); past it the oldest are forgotten first.
    pub retained_max_bytes: usize,
    /// The token budget of a member that joins with none of its own and
    /// none the operator set; 0: none.
    pub token_budget: u64,
    /// The team's repository (`--repo`): results are reviewed and landed.
    pub repo: Option<std::sync::Arc<crate::git::Repo>>,
    /// What a task that names none has reviewed (`--review`).
    pub review: mesh_core::tasks::Review,
}

impl Default for HubConfig {
    fn default() -> Self {
        // The core's rules have the same defaults.
        let rules = Rules::default();
        Self {
            approval: Approval::Manual,
            shutdown_deadline: Duration::from_millis(rules.shutdown_deadline_ms.unsigned_abs()),
            max_inbox: 10_000,
            max_inbox_bytes: 16 * 1024 * 1024,
            max_held_bytes: 1024 * 1024 * 1024,
            ack_timeout: Duration::from_secs(120),
            retention: Duration::from_secs(24 * 3600),
            spawner: None,
            grace: Duration::from_millis(rules.grace_ms.unsigned_abs()),
            stop_wait: Duration::from_secs(5),
            max_members: rules.max_members,
            join_rate: 200.0,
            join_burst: 1_000,
            stream_max_bytes: 4 * 1024 * 1024,
            pending_per_member: rules.pending_per_member,
            pending_total: rules.pending_total,
            retained_max_bytes: 256 * 1024 * 1024,
            token_budget: rules.token_budget,
            repo: None,
            review: rules.review,
        }
    }
}

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
    /// An op the edge translated (or why it could not, told only to a
    /// caller who may come in at `door`), for the caller it `claim`s.
    Apply {
        claim: Claim,
        door: Call<'static>,
        op: Result<Op, HubError>,
        reply: Reply<Answer>,
    },
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
    /// Who the caller `claim` names, if it may come in at `door`: for work
    /// an edge does off the hub before the op (a result's git), so that an
    /// unknown caller is refused before it.
    Admit {
        claim: Claim,
        door: Call<'static>,
        reply: Reply<mesh_core::access::Caller>,
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
        request: crate::launch::SpawnAsk,
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

/// A cheap handle RPC handlers use to reach the hub.
#[derive(Debug, Clone)]
pub(crate) struct HubHandle {
    /// The hub's command queue.
    tx: mpsc::Sender<Command>,
}

impl HubHandle {
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

    /// Applies `op` for the caller `claim` names, come in at `door`, and
    /// waits for its answer.
    pub(crate) async fn apply<T: Answered>(
        &self,
        claim: Claim,
        door: Call<'static>,
        op: Result<Op, HubError>,
    ) -> Result<T, HubError> {
        let answer = self
            .call(|reply| Command::Apply {
                claim,
                door,
                op,
                reply,
            })
            .await?;
        T::from_answer(answer)
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

/// The most commands handled before their changes are committed together.
const MAX_BURST: usize = 512;

/// The hub's time: unix milliseconds that advance with tokio's clock, read
/// once from the system clock when the hub starts. Everything the hub
/// decides by time (deadlines, grace periods, retention, stuck streams) reads
/// it, so tests run the hub on tokio's paused clock and advance it instead of
/// waiting.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    /// The unix time at `base`.
    base_unix_ms: i64,
    /// When the clock started.
    base: tokio::time::Instant,
}

impl Clock {
    /// A clock that reads the system's time now.
    pub(crate) fn start() -> Self {
        Self {
            base_unix_ms: now_unix_ms(),
            base: tokio::time::Instant::now(),
        }
    }

    /// The time now, in unix milliseconds.
    pub(crate) fn now(&self) -> i64 {
        self.base_unix_ms + i64::try_from(self.base.elapsed().as_millis()).unwrap_or(i64::MAX / 2)
    }
}

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

/// Loads the hub's state from `store`.
pub(crate) fn load(
    config: HubConfig,
    mut store: Box<dyn Store>,
) -> Result<(Hub, mpsc::Receiver<Command>), StoreError> {
    let mut snapshot = store.load()?;
    let next_body_id = snapshot
        .bodies
        .iter()
        .map(|(id, _)| id + 1)
        .max()
        .unwrap_or(1);
    let clock = Clock::start();
    let now = clock.now();
    let grace_until = now + millis(config.grace);
    // Everyone is disconnected until they come back; the grace period
    // starts now.
    let decode = |detail| StoreError::Decode {
        what: "member",
        detail,
    };
    let mut members = Members::restore(std::mem::take(&mut snapshot.members), now, grace_until)
        .map_err(decode)?;
    let inboxes = Inboxes::restore(&mut snapshot, &mut members).map_err(decode)?;
    let history = crate::history::History::restore(
        std::mem::take(&mut snapshot.history),
        crate::history::MAX_ENTRIES,
    );
    let audit_kept = std::mem::take(&mut snapshot.audit);
    let budgets: Vec<(String, u64)> = snapshot
        .usage
        .iter()
        .filter(|a| a.member)
        .map(|a| (a.name.clone(), a.operator_budget.unwrap_or(0)))
        .collect();
    let team = Team::restore(
        std::mem::take(&mut snapshot.requests),
        std::mem::take(&mut snapshot.tasks),
        TaskBoard::DEFAULT_MAX_TASKS,
        snapshot.holds.take(),
        |name| members.is_active(name),
    )
    .with_usage(std::mem::take(&mut snapshot.usage))
    .with_members(members)
    .with_rules(Rules {
        pending_per_member: config.pending_per_member,
        pending_total: config.pending_total,
        shutdown_deadline_ms: millis(config.shutdown_deadline),
        grace_ms: millis(config.grace),
        max_members: config.max_members,
        token_budget: config.token_budget,
        repo: config.repo.is_some(),
        review: config.review,
    })
    .with_approval(match &config.approval {
        Approval::Manual => CoreApproval::Manual,
        Approval::Auto => CoreApproval::Auto,
        Approval::Policy(policy) => CoreApproval::Policy(policy.clone()),
        Approval::Model(_) => CoreApproval::Model,
        Approval::Chain(chain) => CoreApproval::Chain(std::sync::Arc::new(ReviewChain {
            stages: chain::stage_kinds(chain),
            rule: chain.rule().clone(),
            results: chain.results().map(|results| {
                std::sync::Arc::new(ReviewChain {
                    stages: chain::stage_kinds(results),
                    rule: results.rule().clone(),
                    results: None,
                })
            }),
        })),
    });
    let audit = crate::audit::Trail::restore(audit_kept, team.requests.iter(), budgets.into_iter());
    let (tx, rx) = mpsc::channel(4096);
    let stream_max_bytes = config.stream_max_bytes;
    let joins = mesh_core::rate::TokenBucket::new(config.join_rate, config.join_burst, now);
    let hub = Hub {
        clock,
        config,
        inboxes,
        team,
        committer: crate::committer::Committer::new(store),
        changes: Vec::new(),
        forming: crate::committer::Forming::default(),
        watchers: Watchers::new(stream_max_bytes),
        processes: Processes::default(),
        next_stream_id: 0,
        stopping_until: None,
        next_body_id,
        terminations: Terminations::default(),
        next_sweep: 0,
        handle: HubHandle { tx },
        joins,
        workers: Workers::default(),
        record: Record::restore(history, audit),
    };
    if hub.team.members.iter().next().is_some() {
        tracing::info!(
            members = hub.team.members.iter().count(),
            requests = hub.team.requests.iter().count(),
            "restored state"
        );
    }
    Ok((hub, rx))
}

/// `duration` in milliseconds, as the core counts time.
pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX / 2)
}

/// Runs the hub until `stop` turns true and every child it started has
/// stopped; then ends every stream and returns.
pub(crate) fn start(
    mut hub: Hub,
    mut rx: mpsc::Receiver<Command>,
    mut stop: watch::Receiver<bool>,
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
                    if let Err(e) = hub.committed(result, rx.is_empty()) {
                        tracing::error!(error = %e, "cannot persist state; stopping the lead");
                        break Err(HubFailure::from(e));
                    }
                }
                command = rx.recv() => {
                    let Some(command) = command else { break Ok(()) };
                    hub.handle(command);
                    for _ in 1..MAX_BURST {
                        match rx.try_recv() {
                            Ok(command) => hub.handle(command),
                            Err(_) => break,
                        }
                    }
                }
                () = sleep => hub.on_timer(),
                _ = stop.wait_for(|s| *s), if hub.stopping_until.is_none() => hub.begin_stop(),
            }
            hub.send_due_notices();
            if let Err(e) = hub.advance(rx.is_empty()) {
                tracing::error!(error = %e, "cannot persist state; stopping the lead");
                break Err(HubFailure::from(e));
            }
            if hub.stop_done() {
                break Ok(());
            }
        };
        hub.finish().await;
        result
    });
    (handle, task)
}

impl Hub {
    /// The time now, in unix milliseconds.
    fn now(&self) -> i64 {
        self.clock.now()
    }

    /// Runs one command.
    fn handle(&mut self, command: Command) {
        match command {
            Command::Apply {
                claim,
                door,
                op,
                reply,
            } => {
                let result = self.apply(claim, door, op);
                self.reply(reply, result);
            }
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
                    .admit(claim, Call::Operator, None)
                    .map(|_| self.watchers.add());
                self.reply(reply, result);
            }
            Command::Spawn {
                claim,
                request,
                reply,
            } => match self.admit(claim, Call::Operator, None) {
                Ok(_) => self.spawn(request, reply),
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
                    .admit(claim, Call::Operator, None)
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

    /// Tells every watcher `notice` once the batch is durable (see
    /// [`Hub::release`]); a watcher that cannot keep up is dropped.
    fn emit(&mut self, notice: Notice) {
        if self.watchers.is_empty() {
            return;
        }
        self.forming.events.push((self.now(), notice));
    }

    /// Puts an envelope from `from` to `to` in `to`'s inbox (or, for `lead`,
    /// only in the event stream) and tells the watchers.
    fn deliver(&mut self, from: &str, to: &str, message_id: Option<String>, body: Message) {
        let message_id = message_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        if to == LEAD {
            if !self.watchers.is_empty() {
                self.emit(Notice::Envelope(Box::new(Envelope {
                    seq: 0,
                    message_id,
                    from: from.to_owned(),
                    to: LEAD.to_owned(),
                    sent_at_unix_ms: self.now(),
                    message: body,
                })));
            }
            return;
        }
        let entry = Entry {
            seq: 0,
            message_id,
            from: from.to_owned(),
            sent_at_unix_ms: self.now(),
            payload: Payload::own(body),
        };
        let Some(seq) = self.team.members.next_seq(to) else {
            return;
        };
        let Some(stored) = self.inboxes.push(to, Entry { seq, ..entry }) else {
            return;
        };
        let record = stored.record(to);
        let event = (!self.watchers.is_empty()).then(|| stored.notice(to));
        self.changes.push(Change::Envelope(record));
        self.forming.streams.insert(to.to_owned());
        if let Some(envelope) = event {
            self.emit(Notice::Envelope(Box::new(envelope)));
        }
    }

    /// Tells the watchers, if any, of an envelope to `to`.
    fn emit_envelope(&mut self, entry: &Entry, to: &str) {
        if !self.watchers.is_empty() {
            self.emit(Notice::Envelope(Box::new(entry.notice(to))));
        }
    }

    /// Puts one envelope from `from` in the inbox of each of `recipients`,
    /// its body stored and held once for them all, and tells the watchers once
    /// (an envelope to `*`, with no `seq`).
    fn fan_out(&mut self, from: &str, recipients: &[String], message_id: String, body: Message) {
        let id = self.next_body_id;
        self.next_body_id += 1;
        let shared = SharedBody::new(id, body);
        self.changes.push(Change::SharedBody {
            id,
            body: shared.body.clone(),
        });
        let entry = Entry {
            seq: 0,
            message_id,
            from: from.to_owned(),
            sent_at_unix_ms: self.now(),
            payload: Payload::Shared(shared),
        };
        for to in recipients {
            let Some(seq) = self.team.members.next_seq(to) else {
                continue;
            };
            if let Some(stored) = self.inboxes.push(
                to,
                Entry {
                    seq,
                    ..entry.clone()
                },
            ) {
                self.changes.push(Change::Envelope(stored.record(to)));
                self.forming.streams.insert(to.clone());
            }
        }
        self.emit_envelope(&entry, EVERYONE);
    }

    /// Tells the watchers how `name` stands now.
    fn emit_member(&mut self, name: &str) {
        if self.watchers.is_empty() {
            return;
        }
        if let Some(view) = self.team.member_view(name) {
            self.emit(Notice::Member(Box::new(view)));
        }
    }
}
