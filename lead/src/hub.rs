//! The hub: the one task that owns the roster, the inboxes, the protocol
//! tracker, the watchers and the children. RPC handlers send it a [`Command`]
//! and await the reply, so every event is seen by everyone in one order.

use std::{collections::HashMap, time::Duration};

use shared::{
    auth::now_unix_ms,
    names::{Name, LEAD},
    pb::{self, envelope::Body},
    policy::Policy,
    protocol::Tracker,
};
use tokio::sync::{mpsc, oneshot, watch};

use crate::{
    children::{Child, Spawner},
    error::HubError,
    roster::{InboxSink, Roster},
};

mod members;
mod requests;

/// Who decides plan approvals.
#[derive(Debug, Clone)]
pub enum Approval {
    /// Requests wait for an operator.
    Manual,
    /// Every plan is approved at once (for demos).
    Auto,
    /// A policy file's criteria decide.
    Policy(Policy),
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
    /// How to start teammates; `None` where the lead cannot (tests of the hub).
    pub spawner: Option<Spawner>,
}

impl Default for HubConfig {
    fn default() -> Self {
        Self {
            approval: Approval::Manual,
            shutdown_deadline: Duration::from_secs(30),
            max_inbox: 10_000,
            spawner: None,
        }
    }
}

/// The reply channel of one command.
pub(crate) type Reply<T> = oneshot::Sender<Result<T, HubError>>;

/// Where a watcher receives events.
pub(crate) type EventSink = mpsc::Sender<Result<pb::Event, tonic::Status>>;

/// What RPC handlers ask of the hub. Teammate commands carry the caller's
/// session token; the hub resolves it to a member.
#[derive(Debug)]
pub(crate) enum Command {
    Join {
        name: Name,
        role: String,
        reply: Reply<pb::JoinResponse>,
    },
    Identify {
        token: String,
        reply: Reply<Option<String>>,
    },
    Inbox {
        token: String,
        after_seq: u64,
        sink: InboxSink,
        reply: Reply<(String, u64)>,
    },
    StreamClosed {
        name: String,
        stream_id: u64,
    },
    Ack {
        token: String,
        seq: u64,
        reply: Reply<()>,
    },
    Send {
        token: String,
        request: pb::SendRequest,
        reply: Reply<pb::SendResponse>,
    },
    SubmitPlan {
        token: String,
        request: pb::PlanApprovalRequest,
        reply: Reply<pb::SubmitPlanResponse>,
    },
    RespondShutdown {
        token: String,
        response: pb::ShutdownResponse,
        reply: Reply<()>,
    },
    RequestPermission {
        token: String,
        request: pb::PermissionRequest,
        reply: Reply<pb::RequestPermissionResponse>,
    },
    ReportIdle {
        token: String,
        idle: pb::IdleNotification,
        reply: Reply<()>,
    },
    ReportToolCall {
        token: String,
        report: pb::ToolCallReport,
        reply: Reply<()>,
    },
    ReviewPlan {
        review: pb::PlanReview,
        reply: Reply<pb::PlanApprovalResponse>,
    },
    RequestShutdown {
        request: pb::ShutdownRequest,
        reply: Reply<pb::ShutdownTicket>,
    },
    ReviewPermission {
        review: pb::PermissionReview,
        reply: Reply<pb::PermissionResponse>,
    },
    ListTeam {
        reply: Reply<pb::ListTeamResponse>,
    },
    ListRequests {
        filter: pb::ListRequestsRequest,
        reply: Reply<pb::ListRequestsResponse>,
    },
    GetRequest {
        request_id: String,
        reply: Reply<pb::ProtocolState>,
    },
    Watch {
        sink: EventSink,
        reply: Reply<()>,
    },
    Spawn {
        request: pb::SpawnTeammateRequest,
        reply: Reply<pb::SpawnTeammateResponse>,
    },
    ChildExited {
        name: String,
        pid: u32,
        how: String,
    },
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

/// The state the hub owns.
#[derive(Debug)]
pub(crate) struct Hub {
    /// How it behaves.
    config: HubConfig,
    /// Every member and inbox.
    roster: Roster,
    /// Every protocol request.
    tracker: Tracker,
    /// Open `Watch` streams.
    watchers: Vec<EventSink>,
    /// Processes the lead started, by member name.
    children: HashMap<String, Child>,
    /// Ids for inbox streams, so that a stale close is ignored.
    next_stream_id: u64,
    /// For children's exit notices.
    handle: HubHandle,
}

/// Starts the hub; it runs until `stop` turns true, then ends every stream,
/// stops every child it started and returns.
pub(crate) fn start(
    config: HubConfig,
    mut stop: watch::Receiver<bool>,
) -> (HubHandle, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = mpsc::channel(1024);
    let handle = HubHandle { tx };
    let mut hub = Hub {
        config,
        roster: Roster::default(),
        tracker: Tracker::new(),
        watchers: Vec::new(),
        children: HashMap::new(),
        next_stream_id: 0,
        handle: handle.clone(),
    };
    let task = tokio::spawn(async move {
        loop {
            let deadline = hub.tracker.next_deadline();
            let sleep = async {
                match deadline {
                    Some(at) => {
                        let wait = u64::try_from(at - now_unix_ms()).unwrap_or(0);
                        tokio::time::sleep(Duration::from_millis(wait)).await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                command = rx.recv() => match command {
                    Some(command) => hub.handle(command),
                    None => break,
                },
                () = sleep => hub.expire_due(),
                _ = stop.wait_for(|s| *s) => break,
            }
        }
        hub.stop().await;
    });
    (handle, task)
}

impl Hub {
    /// Runs one command.
    fn handle(&mut self, command: Command) {
        match command {
            Command::Join { name, role, reply } => {
                let _ = reply.send(self.join(name, role));
            }
            Command::Identify { token, reply } => {
                let _ = reply.send(Ok(self.roster.by_token(&token).map(str::to_owned)));
            }
            Command::Inbox {
                token,
                after_seq,
                sink,
                reply,
            } => {
                let _ = reply.send(self.open_inbox(&token, after_seq, sink));
            }
            Command::StreamClosed { name, stream_id } => self.stream_closed(&name, stream_id),
            Command::Ack { token, seq, reply } => {
                let _ = reply.send(self.ack(&token, seq));
            }
            Command::Send {
                token,
                request,
                reply,
            } => {
                let _ = reply.send(self.send_text(&token, request));
            }
            Command::SubmitPlan {
                token,
                request,
                reply,
            } => {
                let _ = reply.send(self.submit_plan(&token, request));
            }
            Command::RespondShutdown {
                token,
                response,
                reply,
            } => {
                let _ = reply.send(self.respond_shutdown(&token, response));
            }
            Command::RequestPermission {
                token,
                request,
                reply,
            } => {
                let _ = reply.send(self.request_permission(&token, request));
            }
            Command::ReportIdle { token, idle, reply } => {
                let _ = reply.send(self.report_idle(&token, idle));
            }
            Command::ReportToolCall {
                token,
                report,
                reply,
            } => {
                let _ = reply.send(self.report_tool_call(&token, report));
            }
            Command::ReviewPlan { review, reply } => {
                let _ = reply.send(self.review_plan(review));
            }
            Command::RequestShutdown { request, reply } => {
                let _ = reply.send(self.request_shutdown(request));
            }
            Command::ReviewPermission { review, reply } => {
                let _ = reply.send(self.review_permission(review));
            }
            Command::ListTeam { reply } => {
                let members = self.roster.iter().map(|m| m.to_pb()).collect();
                let _ = reply.send(Ok(pb::ListTeamResponse { members }));
            }
            Command::ListRequests { filter, reply } => {
                let _ = reply.send(self.list_requests(&filter));
            }
            Command::GetRequest { request_id, reply } => {
                let _ = reply.send(self.get_request(&request_id));
            }
            Command::Watch { sink, reply } => {
                self.watchers.push(sink);
                let _ = reply.send(Ok(()));
            }
            Command::Spawn { request, reply } => {
                let _ = reply.send(self.spawn(request));
            }
            Command::ChildExited { name, pid, how } => self.child_exited(&name, pid, &how),
        }
    }

    /// Sends `event` to every watcher; a watcher that cannot keep up is dropped.
    fn emit(&mut self, kind: pb::event::Kind) {
        if self.watchers.is_empty() {
            return;
        }
        let event = pb::Event {
            at_unix_ms: now_unix_ms(),
            kind: Some(kind),
        };
        self.watchers
            .retain(|w| w.try_send(Ok(event.clone())).is_ok());
    }

    /// Puts an envelope from `from` to `to` in `to`'s inbox (or, for `lead`,
    /// only in the event stream) and tells the watchers.
    fn deliver(
        &mut self,
        from: &str,
        to: &str,
        message_id: Option<String>,
        body: Body,
    ) -> pb::Envelope {
        let envelope = pb::Envelope {
            seq: 0,
            message_id: message_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
            from: from.to_owned(),
            to: to.to_owned(),
            sent_at_unix_ms: now_unix_ms(),
            body: Some(body),
        };
        let envelope = match self.roster.get_mut(to) {
            Some(member) if to != LEAD => member.push(envelope),
            _ => envelope,
        };
        self.emit(pb::event::Kind::Envelope(envelope.clone()));
        envelope
    }

    /// Tells the watchers how `name` stands now.
    fn emit_member(&mut self, name: &str) {
        if let Some(member) = self.roster.get(name).map(|m| m.to_pb()) {
            self.emit(pb::event::Kind::Member(member));
        }
    }

    /// The member a session token belongs to; terminated members have none.
    fn caller(&self, token: &str) -> Result<String, HubError> {
        self.roster
            .by_token(token)
            .map(str::to_owned)
            .ok_or_else(|| {
                HubError::Unauthenticated(
                    "authorization: unknown session token; call Join first".into(),
                )
            })
    }

    /// Ends every stream and stops every child, waiting for them to be reaped.
    async fn stop(mut self) {
        for member in self.roster.iter_mut() {
            member.stream = None;
        }
        self.watchers.clear();
        let children: Vec<Child> = self.children.drain().map(|(_, c)| c).collect();
        for child in &children {
            child.stop();
        }
        for child in children {
            let _ = child.task.await;
        }
    }
}
