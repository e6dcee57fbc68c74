//! A teammate's life on the mesh: join, read the inbox as a stream, take steps
//! from the driver, run tools through the gate, answer the lead.

use shared::wire::*;
use std::{
    collections::{HashSet, VecDeque},
    future::Future,
    path::PathBuf,
    time::Duration,
};

use shared::{
    auth::BearerToken,
    display::Escaped,
    grant::{Grant, Mode},
    limits,
    pb::{self, envelope::Body, lead_client::LeadClient},
    transport::ClientTls,
};
use tokio::sync::{mpsc, watch};
use tonic::{service::interceptor::InterceptedService, transport::Channel, Code, Status};

use crate::{
    catalog,
    command::CommandLimits,
    driver::{ClaimedTask, Driver, Observation, Step, TaskCall},
    gate::{Clearance, Gate, Writer},
    inbox::{self, Backoff, Incoming},
    tools::{ToolCall, ToolError, Workspace},
};

type Client = LeadClient<InterceptedService<Channel, BearerToken>>;

/// How a teammate is set up.
#[derive(Debug, Clone)]
pub struct Config {
    /// `http://HOST:PORT` of the lead.
    pub lead_url: String,
    /// The member name to join as.
    pub name: String,
    /// The role to join with.
    pub role: String,
    /// Where tools read and write.
    pub workspace: PathBuf,
    /// The lead's join token.
    pub join_token: String,
    /// How long the lead may be unreachable before the teammate gives up.
    pub lead_gone_limit: Duration,
    /// For an `https://` lead: what to trust and which certificate to show.
    pub tls: ClientTls,
    /// How `run_command` runs.
    pub commands: CommandLimits,
}

/// Why a teammate stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// It agreed to a shutdown request.
    Shutdown,
    /// A signal asked it to stop; it finished the tool call in progress.
    Signal,
}

/// Why a teammate failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The lead refused a call.
    #[error("{rpc}: {}: {}", .status.code().description(), .status.message())]
    Rpc { rpc: &'static str, status: Status },
    /// The lead could not be reached for longer than the limit.
    #[error("the lead has been unreachable for longer than the limit: {0}")]
    LeadGone(String),
    /// The setup is wrong (URL, token, workspace, grant).
    #[error("{0}")]
    Setup(String),
    /// The driver cannot go on (the model server refuses every request).
    #[error("{0}")]
    Driver(String),
}

/// A joined teammate.
pub struct Session {
    /// Settings.
    config: Config,
    /// The lead, with the session token attached.
    client: Client,
    /// Envelopes from the inbox reader.
    inbox: mpsc::Receiver<Incoming>,
    /// The last `seq` processed (and acknowledged).
    last_seq: u64,
    /// Message ids processed, so that a redelivery is not acted on twice.
    seen: HashSet<String>,
    /// The same ids, oldest first.
    seen_order: VecDeque<String>,
    /// Where tools work.
    workspace: Workspace,
    /// Plan mode, or the writer a grant created.
    gate: Gate,
    /// The last plan submitted: its id and files.
    last_plan: Option<LastPlan>,
    /// The id of the plan under review, while its decision has not arrived.
    under_review: Option<String>,
    /// The task this teammate claimed and has not completed: its plans
    /// are for it.
    claimed: Option<String>,
    /// What arrived while the driver was busy (messages, a plan's
    /// decision), in the order it arrived.
    messages: VecDeque<Observation>,
    /// Turns true when a signal asks the teammate to stop.
    stop: watch::Receiver<bool>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("name", &self.config.name)
            .field("last_seq", &self.last_seq)
            .finish()
    }
}

/// What an envelope meant for the step in progress.
enum Handled {
    /// Nothing the step waits for.
    Nothing,
    /// Stop: a signal came while nothing ran.
    Exit(Exit),
    /// A shutdown request, to be answered by the driver; its envelope's
    /// `seq` is acknowledged only if the teammate refuses (and goes on).
    Shutdown(pb::ShutdownRequest, u64),
    /// The decision on the plan under review, applied to the gate (and
    /// queued in `messages` for the driver).
    Decided,
    /// The answer to a permission request.
    Permission(pb::PermissionResponse),
    /// Nothing arrived before the deadline.
    TimedOut,
}

/// Leaves the team (`Leave`) for a session whose owner went away.
#[derive(Debug, Clone)]
pub struct Leaver {
    client: Client,
}

impl Leaver {
    /// Tells the lead the member has left, trying for a few seconds at most:
    /// the process is about to end either way.
    pub async fn leave(mut self, reason: &str) -> Result<(), SessionError> {
        let request = pb::LeaveRequest {
            reason: limits::cut(reason, limits::REASON),
        };
        let mut backoff = Backoff::new(Duration::from_secs(3));
        loop {
            match self.client.leave(request.clone()).await {
                Ok(_) => return Ok(()),
                Err(status) if transient(&status) && backoff.wait().await => {}
                Err(status) => {
                    return Err(SessionError::Rpc {
                        rpc: "Leave",
                        status,
                    })
                }
            }
        }
    }
}

/// What came of waiting for the driver's next step.
enum Thought {
    /// The step.
    Step(Step),
    /// News for a driver that hears it while it thinks.
    News,
    /// Stop.
    Exit(Exit),
}

/// How a permission request ended.
enum Asked {
    /// The lead answered.
    Answer(pb::PermissionResponse),
    /// It was not asked (too long), or the lead refused the request itself.
    Refused(String),
    /// Stop: a shutdown was agreed, or a signal came while waiting.
    Exit(Exit),
}

/// The most message ids remembered for deduplication.
const REMEMBERED_IDS: usize = 4_096;

impl Session {
    /// Joins the lead (retrying while it is unreachable) and opens the inbox.
    pub async fn join(
        config: Config,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> Result<Self, SessionError> {
        let workspace = Workspace::open(&config.workspace).map_err(|e| {
            SessionError::Setup(format!("--workspace {}: {e}", config.workspace.display()))
        })?;
        let channel = config
            .tls
            .endpoint(&config.lead_url)
            .map_err(|e| SessionError::Setup(e.to_string()))?
            .connect_timeout(Duration::from_secs(5))
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(10))
            .keep_alive_while_idle(true)
            .connect_lazy();
        let join_token = BearerToken::new(&config.join_token)
            .map_err(|e| SessionError::Setup(e.message().to_owned()))?;
        let mut joiner = LeadClient::with_interceptor(channel.clone(), join_token);
        let request = pb::JoinRequest {
            name: config.name.clone(),
            role: config.role.clone(),
        };
        let mut backoff = Backoff::new(config.lead_gone_limit);
        let joined = loop {
            match joiner.join(request.clone()).await {
                Ok(response) => break response.into_inner(),
                Err(status) if transient(&status) => {
                    // Every attempt says why it failed: a teammate that
                    // cannot join is never silent.
                    let cause = shared::transport::cause(&status);
                    tracing::warn!(lead = %Escaped(&config.lead_url), error = %Escaped(&cause), "cannot reach the lead to join; retrying");
                    if !backoff.wait().await {
                        return Err(SessionError::LeadGone(format!(
                            "{} (the last attempt: {cause})",
                            config.lead_url
                        )));
                    }
                }
                Err(status)
                    if config.lead_url.starts_with("http://")
                        && status.message().contains("h2 protocol error") =>
                {
                    // What plain text gets from a lead that serves TLS.
                    return Err(SessionError::Setup(format!(
                        "--lead {}: the lead did not speak plain HTTP/2 ({}); if it serves TLS, \
                         dial https:// (with --ca)",
                        config.lead_url,
                        status.message()
                    )));
                }
                Err(status) => {
                    return Err(SessionError::Rpc {
                        rpc: "Join",
                        status,
                    })
                }
            }
        };
        tracing::info!(member = %Escaped(&config.name), member_id = %Escaped(&joined.member_id), "joined the team in plan mode");
        let session_token = BearerToken::new(&joined.session_token)
            .map_err(|e| SessionError::Setup(e.message().to_owned()))?;
        let client = LeadClient::with_interceptor(channel, session_token);
        let inbox = inbox::start(client.clone(), 0, config.lead_gone_limit);
        let (stop_tx, stop_rx) = watch::channel(false);
        tokio::spawn(async move {
            stop.await;
            let _ = stop_tx.send(true);
        });
        Ok(Self {
            config,
            client,
            inbox,
            last_seq: 0,
            seen: HashSet::new(),
            seen_order: VecDeque::new(),
            workspace,
            gate: Gate::Plan,
            last_plan: None,
            under_review: None,
            claimed: None,
            messages: VecDeque::new(),
            stop: stop_rx,
        })
    }

    /// What leaves the team for this session, usable after `run` ends.
    pub fn leaver(&self) -> Leaver {
        Leaver {
            client: self.client.clone(),
        }
    }

    /// Takes the driver's steps until a shutdown is agreed or a signal arrives.
    pub async fn run<D: Driver>(mut self, mut driver: D) -> Result<Exit, SessionError> {
        driver.observe(Observation::Started);
        loop {
            // Between steps, everything that arrived is handled: a shutdown
            // request is answered only after the tool call in progress ended.
            while let Ok(incoming) = self.inbox.try_recv() {
                if let Some(exit) = self.handle(&mut driver, incoming).await? {
                    return Ok(exit);
                }
            }
            while let Some(message) = self.messages.pop_front() {
                driver.observe(message);
            }
            if *self.stop.borrow() {
                return Ok(Exit::Signal);
            }
            let step = match self.think(&mut driver).await? {
                Thought::Step(step) => step,
                Thought::News => continue,
                Thought::Exit(exit) => return Ok(exit),
            };
            let next = match step {
                Step::Call(call) => self.run_tool(&mut driver, call).await?,
                Step::Submit(plan) => self.submit(&mut driver, plan).await?,
                Step::Send { to, text } => Ok(self.send(to, text).await?),
                Step::Task(call) => Ok(self.task(call).await?),
                Step::Invalid {
                    tool,
                    args_json,
                    problem,
                } => {
                    self.report(&tool, &args_json, false, &problem).await?;
                    Ok(Observation::ToolResult(Err(problem)))
                }
                Step::Idle(reason) => self.idle(&mut driver, reason).await?,
            };
            match next {
                Ok(observation) => driver.observe(observation),
                Err(exit) => return Ok(exit),
            }
            if *self.stop.borrow() {
                return Ok(Exit::Signal);
            }
        }
    }

    /// The driver's next step. While it thinks (a model call, or an agent's
    /// next call), the inbox is still heard: a shutdown request cancels the
    /// step and is answered within its deadline, and a refusal lets the
    /// driver think again. A driver that hears news while it thinks gets the
    /// step cancelled for news too ([`Thought::News`]).
    async fn think<D: Driver>(&mut self, driver: &mut D) -> Result<Thought, SessionError> {
        let eager = driver.hears_while_thinking();
        loop {
            let tools = self.gate.tools();
            let (request, seq) = {
                let step = driver.step(&tools);
                tokio::pin!(step);
                loop {
                    let incoming = tokio::select! {
                        step = &mut step => {
                            return step.map(Thought::Step).map_err(|e| SessionError::Driver(e.0));
                        }
                        incoming = self.inbox.recv() => incoming,
                        _ = self.stop.wait_for(|s| *s) => return Ok(Thought::Exit(Exit::Signal)),
                    };
                    let Some(incoming) = incoming else {
                        return Err(SessionError::LeadGone(self.config.lead_url.clone()));
                    };
                    match self.on_incoming(incoming).await? {
                        Handled::Shutdown(request, seq) => break (request, seq),
                        Handled::Exit(exit) => return Ok(Thought::Exit(exit)),
                        Handled::Nothing
                        | Handled::Decided
                        | Handled::Permission(_)
                        | Handled::TimedOut => {}
                    }
                    if eager && !self.messages.is_empty() {
                        return Ok(Thought::News);
                    }
                }
            };
            if let Some(exit) = self.answer_shutdown(driver, request, seq).await? {
                return Ok(Thought::Exit(exit));
            }
        }
    }

    /// Asks the driver to answer a shutdown request (offering it
    /// `respond_shutdown`) and tells the lead; `Some` if it agreed.
    async fn answer_shutdown<D: Driver>(
        &mut self,
        driver: &mut D,
        request: pb::ShutdownRequest,
        seq: u64,
    ) -> Result<Option<Exit>, SessionError> {
        let mut tools = self.gate.tools();
        tools.push(catalog::RESPOND_SHUTDOWN);
        let answer = driver.answer_shutdown(&request, &tools).await;
        tracing::info!(request_id = %Escaped(&request.request_id), approve = answer.approve, reason = %Escaped(&answer.reason), "answering a shutdown request");
        let response = pb::ShutdownResponse {
            request_id: request.request_id,
            approve: answer.approve,
            reason: limits::cut(&answer.reason, limits::REASON),
        };
        let answered = self
            .retry("RespondShutdown", |mut client| {
                let request = response.clone();
                async move { client.respond_shutdown(request).await }
            })
            .await;
        match answered {
            Ok(_) => {}
            // The request is over (it expired, or the lead will not take
            // this answer): the teammate is still on the team and goes on.
            Err(SessionError::Rpc { status, .. }) if !fatal_status(&status) => {
                tracing::warn!(error = %Escaped(&status.to_string()), "the lead refused the shutdown answer; carrying on");
                self.ack(seq).await?;
                driver.observe(Observation::ShutdownRefused {
                    reason: format!("the lead did not take the answer: {}", status.message()),
                });
                return Ok(None);
            }
            Err(e) => return Err(e),
        }
        if answer.approve {
            driver.observe(Observation::ShutdownAgreed);
            return Ok(Some(Exit::Shutdown));
        }
        self.ack(seq).await?;
        driver.observe(Observation::ShutdownRefused {
            reason: answer.reason,
        });
        Ok(None)
    }

    /// Handles one item from the inbox reader, answering a shutdown request
    /// through the driver; `Some` to stop.
    async fn handle<D: Driver>(
        &mut self,
        driver: &mut D,
        incoming: Incoming,
    ) -> Result<Option<Exit>, SessionError> {
        match self.on_incoming(incoming).await? {
            Handled::Exit(exit) => Ok(Some(exit)),
            Handled::Shutdown(request, seq) => self.answer_shutdown(driver, request, seq).await,
            Handled::Nothing | Handled::Decided | Handled::Permission(_) | Handled::TimedOut => {
                Ok(None)
            }
        }
    }

    /// Sends a text message for the driver (`send_message`), reported like a
    /// tool call; a refusal by the lead is the call's error.
    async fn send(&mut self, to: String, text: String) -> Result<Observation, SessionError> {
        let request = pb::SendRequest {
            to: to.clone(),
            text: Some(pb::Text { content: text }),
            message_id: uuid::Uuid::new_v4().to_string(),
        };
        let args = serde_json::json!({ "to": to, "text": request.text.as_ref().map(|t| crate::tools::truncate(&t.content, 120)) }).to_string();
        let sent = self
            .retry("Send", |mut client| {
                let request = request.clone();
                async move { client.send(request).await }
            })
            .await;
        let result = match sent {
            Ok(response) if response.skipped.is_empty() => Ok(format!("sent to {to}")),
            Ok(response) => Ok(format!(
                "sent to {to}; not delivered to {} (their inbox is full)",
                response.skipped.join(", ")
            )),
            Err(SessionError::Rpc { status, .. }) if !fatal_status(&status) => Err(format!(
                "the lead refused the message: {}",
                status.message()
            )),
            Err(e) => return Err(e),
        };
        let outcome = match &result {
            Ok(text) | Err(text) => text.clone(),
        };
        self.report(catalog::SEND_MESSAGE, &args, result.is_ok(), &outcome)
            .await?;
        Ok(Observation::ToolResult(result))
    }

    /// A call on the shared task list, reported like a tool call; a refusal
    /// by the lead (claimed, blocked, not the owner) is the call's error.
    async fn task(&mut self, call: TaskCall) -> Result<Observation, SessionError> {
        let (tool, args) = match &call {
            TaskCall::List => (catalog::LIST_TASKS, serde_json::json!({})),
            TaskCall::Claim(id) => (catalog::CLAIM_TASK, serde_json::json!({ "task_id": id })),
            TaskCall::Complete { task_id, summary } => (
                catalog::COMPLETE_TASK,
                serde_json::json!({ "task_id": task_id, "summary": crate::tools::truncate(summary, 120) }),
            ),
        };
        let mut claimed = None;
        let answered = match call {
            TaskCall::List => self
                .retry("ListTasks", |mut client| async move {
                    client.list_tasks(pb::ListTasksRequest::default()).await
                })
                .await
                .map(|list| {
                    if list.tasks.is_empty() {
                        return "the task list is empty".to_owned();
                    }
                    let mut text = list
                        .tasks
                        .iter()
                        .map(describe_task)
                        .collect::<Vec<_>>()
                        .join("\n");
                    if !list.next_page_token.is_empty() {
                        text.push_str(&format!(
                            "\n(the first {} tasks; claim_task() with no id takes the oldest claimable one)",
                            list.tasks.len()
                        ));
                    }
                    text
                }),
            TaskCall::Claim(id) => {
                let request = pb::ClaimTaskRequest {
                    task_id: id.unwrap_or_default(),
                };
                self.retry("ClaimTask", |mut client| {
                    let request = request.clone();
                    async move { client.claim_task(request).await }
                })
                .await
                .map(|task| {
                    self.claimed = Some(task.task_id.clone());
                    claimed = Some(ClaimedTask {
                        task_id: task.task_id.clone(),
                        subject: task.subject.clone(),
                        description: task.description.clone(),
                        files: task.files.clone(),
                    });
                    format!(
                        "claimed: {}\nYour next plan is for this task.",
                        describe_task(&task)
                    )
                })
            }
            TaskCall::Complete { task_id, summary } => {
                let request = pb::CompleteTaskRequest { task_id, summary };
                self.retry("CompleteTask", |mut client| {
                    let request = request.clone();
                    async move { client.complete_task(request).await }
                })
                .await
                .map(|task| {
                    if self.claimed.as_deref() == Some(task.task_id.as_str()) {
                        self.claimed = None;
                    }
                    let mut text = format!("completed: {}", describe_task(&task));
                    if self.end_grant_of(&task.task_id) {
                        text.push_str(
                            "\nThe grant for this task's plan has ended: you are in plan mode \
                             again. Claim another task and submit a plan for it.",
                        );
                    }
                    text
                })
            }
        };
        let result = match answered {
            Ok(text) => Ok(text),
            Err(SessionError::Rpc { status, .. }) if !fatal_status(&status) => {
                Err(format!("the lead refused: {}", status.message()))
            }
            Err(e) => return Err(e),
        };
        let outcome = match &result {
            Ok(text) => crate::tools::truncate(text, 300).to_owned(),
            Err(text) => text.clone(),
        };
        self.report(tool, &args.to_string(), result.is_ok(), &outcome)
            .await?;
        Ok(match (result, claimed) {
            (Ok(text), Some(task)) => Observation::TaskClaimed { task, text },
            (result, _) => Observation::ToolResult(result),
        })
    }

    /// Reports one tool call to the lead, cut to the report's limits so that
    /// the lead never refuses a report for its size: every call shows in the
    /// record. Only the lead refusing the session itself is an error.
    async fn report(
        &self,
        tool: &str,
        args_json: &str,
        allowed: bool,
        outcome: &str,
    ) -> Result<(), SessionError> {
        let report = pb::ToolCallReport {
            tool: limits::cut(tool, limits::TOOL),
            args_json: limits::cut(args_json, limits::REPORT_ARGS_JSON),
            allowed,
            outcome: limits::cut(outcome, limits::REPORT_OUTCOME),
            member: String::new(),
        };
        tracing::info!(member = %Escaped(&self.config.name), tool = %Escaped(&report.tool), args = %Escaped(&report.args_json), allowed, outcome = %Escaped(&report.outcome), "tool call");
        let reported = self
            .retry("ReportToolCall", |mut client| {
                let report = report.clone();
                async move { client.report_tool_call(report).await }
            })
            .await;
        match reported {
            Ok(_) => Ok(()),
            Err(e) if session_refused(&e) => Err(e),
            Err(e) => {
                tracing::warn!(error = %Escaped(&e.to_string()), "could not report a tool call");
                Ok(())
            }
        }
    }

    /// Runs one tool through the gate and reports it to the lead; `Err(exit)`
    /// if a stop came while it waited for permission.
    async fn run_tool<D: Driver>(
        &mut self,
        driver: &mut D,
        call: ToolCall,
    ) -> Result<Result<Observation, Exit>, SessionError> {
        let result = if let Some(result) = self.workspace.run_read(&call) {
            result
        } else {
            let clearance = match &self.gate {
                Gate::Plan => Clearance::Refused(format!(
                    "{} is not available in plan mode: call submit_plan and wait for its approval",
                    call.name()
                )),
                Gate::Unlocked(writer) => writer.clear(&call),
            };
            match clearance {
                Clearance::Run(ticket) => self.writer()?.run(ticket).await,
                Clearance::Refused(reason) => Err(ToolError::Refused(reason)),
                Clearance::NeedsPermission => match self.ask_permission(driver, &call).await? {
                    Asked::Exit(exit) => return Ok(Err(exit)),
                    Asked::Refused(reason) => Err(ToolError::Refused(reason)),
                    Asked::Answer(response) => match self.writer()?.permit(&call, &response) {
                        Ok(ticket) => self.writer()?.run(ticket).await,
                        Err(reason) => Err(ToolError::Refused(reason)),
                    },
                },
            }
        };
        // Refused by the gate, the lead or the workspace's rules (a path that
        // leaves it, a FIFO, a hard link): it did not run.
        let allowed = !matches!(result, Err(ToolError::Refused(_) | ToolError::Path { .. }));
        let outcome = match &result {
            Ok(output) => crate::tools::truncate(output, 300).to_owned(),
            Err(e) => e.to_string(),
        };
        self.report(call.name(), &call.args_json(), allowed, &outcome)
            .await?;
        Ok(Ok(Observation::ToolResult(
            result.map_err(|e| e.to_string()),
        )))
    }

    /// The writer, which exists whenever a gated call was cleared.
    fn writer(&self) -> Result<&Writer, SessionError> {
        match &self.gate {
            Gate::Unlocked(writer) => Ok(writer),
            Gate::Plan => Err(SessionError::Setup(
                "internal: a gated call was cleared in plan mode".into(),
            )),
        }
    }

    /// Asks the lead to allow one call, showing the whole call. A call too
    /// long for a permission request is refused here, and one the lead
    /// refuses to consider (a status other than an unreachable lead or a bad
    /// token) is refused with the lead's message: neither runs, and the
    /// teammate carries on.
    async fn ask_permission<D: Driver>(
        &mut self,
        driver: &mut D,
        call: &ToolCall,
    ) -> Result<Asked, SessionError> {
        let request = pb::PermissionRequest {
            request_id: uuid::Uuid::new_v4().to_string(),
            tool: call.name().to_owned(),
            args_json: call.full_args_json(),
        };
        for (field, value, limit) in [
            ("tool", &request.tool, limits::TOOL),
            ("args_json", &request.args_json, limits::ARGS_JSON),
        ] {
            if value.len() > limit {
                let reason = format!(
                    "{}: the permission request's {field} would be {} bytes, more than the \
                     {limit} the lead accepts; not asked, not run",
                    call.name(),
                    value.len()
                );
                tracing::warn!(tool = call.name(), reason = %reason, "permission not asked");
                return Ok(Asked::Refused(reason));
            }
        }
        let id = request.request_id.clone();
        let asked = self
            .retry("RequestPermission", |mut client| {
                let request = request.clone();
                async move { client.request_permission(request).await }
            })
            .await;
        match asked {
            Ok(_) => {}
            Err(SessionError::Rpc { status, .. }) if !fatal_status(&status) => {
                tracing::warn!(tool = call.name(), error = %Escaped(&status.to_string()), "the lead refused the permission request");
                return Ok(Asked::Refused(format!(
                    "the lead refused the permission request: {}",
                    status.message()
                )));
            }
            Err(e) => return Err(e),
        }
        tracing::info!(request_id = %id, tool = call.name(), "asked the lead for permission");
        loop {
            match self.next_incoming(driver).await? {
                Handled::Exit(exit) => return Ok(Asked::Exit(exit)),
                Handled::Permission(response) if response.request_id == id => {
                    return Ok(Asked::Answer(response))
                }
                _ => {}
            }
        }
    }

    /// Submits a plan (superseding the last, rejected one) and waits for the
    /// review, as long as the driver waits ([`Driver::review_wait`]): a
    /// decision after that reaches the driver later. `Err(exit)` if a stop
    /// came first.
    async fn submit<D: Driver>(
        &mut self,
        driver: &mut D,
        mut plan: pb::Plan,
    ) -> Result<Result<Observation, Exit>, SessionError> {
        if plan.task_id.is_empty() {
            if let Some(task_id) = &self.claimed {
                plan.task_id = task_id.clone();
            }
        }
        let busy = if let Gate::Unlocked(_) = self.gate {
            // Not on offer once a plan is approved: a driver that asks
            // anyway meets the gate like any other call.
            Some("submit_plan is not available: your plan is already approved")
        } else if self.under_review.is_some() {
            Some("submit_plan is not available: your plan is still under review; wait for the decision")
        } else {
            None
        };
        if let Some(problem) = busy {
            let args = serde_json::json!({ "summary": plan.summary }).to_string();
            self.report(catalog::SUBMIT_PLAN, &args, false, problem)
                .await?;
            return Ok(Ok(Observation::ToolResult(Err(problem.into()))));
        }
        let request = pb::PlanApprovalRequest {
            request_id: uuid::Uuid::new_v4().to_string(),
            supersedes: self
                .last_plan
                .as_ref()
                .filter(|last| !last.approved)
                .map(|last| last.request_id.clone())
                .unwrap_or_default(),
            plan: Some(plan.clone()),
        };
        let id = request.request_id.clone();
        let submitted = self
            .retry("SubmitPlan", |mut client| {
                let request = request.clone();
                async move { client.submit_plan(request).await }
            })
            .await;
        match submitted {
            Ok(_) => {}
            // The lead will not consider this plan (too large, malformed, in
            // the wrong state): the driver hears it as a rejection and may
            // revise. `last_plan` stays: this one never existed on the lead.
            Err(SessionError::Rpc { status, .. }) if !fatal_status(&status) => {
                tracing::warn!(error = %Escaped(&status.to_string()), "the lead refused the plan");
                return Ok(Ok(Observation::PlanRejected {
                    feedback: format!("the lead refused the plan: {}", status.message()),
                }));
            }
            Err(e) => return Err(e),
        }
        tracing::info!(request_id = %id, summary = %Escaped(&plan.summary), "submitted a plan");
        self.last_plan = Some(LastPlan {
            request_id: id.clone(),
            files: plan.files,
            task_id: plan.task_id,
            approved: false,
        });
        self.under_review = Some(id.clone());
        // Only the wait is bounded: an envelope, once received, is handled
        // to the end (a shutdown request answered) before the wait can end.
        let until = driver
            .review_wait()
            .map(|wait| tokio::time::Instant::now() + wait);
        loop {
            match self.next_incoming_until(driver, until).await? {
                Handled::Exit(exit) => return Ok(Err(exit)),
                Handled::TimedOut => {
                    return Ok(Ok(Observation::PlanPending { request_id: id }));
                }
                _ => {}
            }
            if self.under_review.is_none() {
                if let Some(decision) = self.take_decision() {
                    return Ok(Ok(decision));
                }
            }
        }
    }

    /// The teammate completed `task_id`: if the grant it works under came
    /// from a plan for that task, the grant ends with it (as it does on the
    /// lead) and the gate is back in plan mode. `true` if it did.
    fn end_grant_of(&mut self, task_id: &str) -> bool {
        let ends = matches!(self.gate, Gate::Unlocked(_))
            && self
                .last_plan
                .as_ref()
                .is_some_and(|last| last.approved && last.task_id == task_id);
        if ends {
            tracing::info!(task_id = %task_id, "task completed; back in plan mode");
            self.gate = Gate::Plan;
            self.last_plan = None;
        }
        ends
    }

    /// Takes the decision on the last plan out of the queue (it is the
    /// result of the `submit_plan` that waited for it; anything queued
    /// before it is observed after).
    fn take_decision(&mut self) -> Option<Observation> {
        let at = self.messages.iter().position(|seen| {
            matches!(
                seen,
                Observation::PlanApproved { .. } | Observation::PlanRejected { .. }
            )
        })?;
        self.messages.remove(at)
    }

    /// Applies the decision on the plan under review: a grant unlocks the
    /// gated tools.
    fn decide(&mut self, response: pb::PlanApprovalResponse) -> Result<Observation, SessionError> {
        self.under_review = None;
        let id = response.request_id.clone();
        let files = self
            .last_plan
            .as_ref()
            .map(|last| last.files.clone())
            .unwrap_or_default();
        if !response.approve {
            tracing::info!(request_id = %id, feedback = %Escaped(&response.feedback), "plan rejected; revising");
            return Ok(Observation::PlanRejected {
                feedback: response.feedback,
            });
        }
        let grant = match &response.grant {
            Some(grant) => Grant::from_pb("grant", grant, Mode::AcceptEdits),
            None => Ok(Grant {
                mode: Mode::AcceptEdits,
                write_paths: Vec::new(),
                expires_at_unix_ms: None,
            }),
        }
        .map_err(|e| SessionError::Setup(format!("the lead sent a bad grant: {e}")))?;
        let writer = Writer::unlock(&grant, &files, &self.workspace, &self.config.commands)
            .map_err(|e| SessionError::Setup(format!("the lead sent a bad grant: {e}")))?;
        self.gate = writer.map_or(Gate::Plan, Gate::Unlocked);
        if let Some(last) = &mut self.last_plan {
            last.approved = true;
        }
        tracing::info!(request_id = %id, mode = %grant.mode, "plan approved");
        let write_paths = if grant.write_paths.is_empty() {
            files
        } else {
            grant.write_paths
        };
        Ok(Observation::PlanApproved {
            mode: grant.mode,
            write_paths,
        })
    }

    /// Reports idle and waits for a message; `Err(exit)` if a stop came first.
    async fn idle<D: Driver>(
        &mut self,
        driver: &mut D,
        reason: String,
    ) -> Result<Result<Observation, Exit>, SessionError> {
        if let Some(seen) = self.messages.pop_front() {
            return Ok(Ok(seen));
        }
        tracing::info!(member = %Escaped(&self.config.name), reason = %Escaped(&reason), "idle");
        let idle = pb::IdleNotification {
            reason: limits::cut(&reason, limits::REASON),
        };
        self.retry("ReportIdle", |mut client| {
            let idle = idle.clone();
            async move { client.report_idle(idle).await }
        })
        .await?;
        loop {
            if let Handled::Exit(exit) = self.next_incoming(driver).await? {
                return Ok(Err(exit));
            }
            if let Some(seen) = self.messages.pop_front() {
                return Ok(Ok(seen));
            }
        }
    }

    /// Waits for the next envelope and handles it, a shutdown request
    /// through the driver. A signal while waiting counts as agreeing to
    /// stop: there is no tool call in progress.
    async fn next_incoming<D: Driver>(&mut self, driver: &mut D) -> Result<Handled, SessionError> {
        self.next_incoming_until(driver, None).await
    }

    /// [`Session::next_incoming`], giving up waiting (not handling) at `until`.
    async fn next_incoming_until<D: Driver>(
        &mut self,
        driver: &mut D,
        until: Option<tokio::time::Instant>,
    ) -> Result<Handled, SessionError> {
        let deadline = async {
            match until {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let incoming = tokio::select! {
            incoming = self.inbox.recv() => incoming,
            _ = self.stop.wait_for(|s| *s) => return Ok(Handled::Exit(Exit::Signal)),
            () = deadline => return Ok(Handled::TimedOut),
        };
        let Some(incoming) = incoming else {
            return Err(SessionError::LeadGone(self.config.lead_url.clone()));
        };
        match self.on_incoming(incoming).await? {
            Handled::Shutdown(request, seq) => {
                Ok(match self.answer_shutdown(driver, request, seq).await? {
                    Some(exit) => Handled::Exit(exit),
                    None => Handled::Nothing,
                })
            }
            handled => Ok(handled),
        }
    }

    /// Handles one item from the inbox reader.
    async fn on_incoming(&mut self, incoming: Incoming) -> Result<Handled, SessionError> {
        let envelope = match incoming {
            Incoming::Envelope(envelope) => *envelope,
            Incoming::Gone(status) => {
                return Err(match status {
                    Some(status) => SessionError::Rpc {
                        rpc: "Inbox",
                        status,
                    },
                    None => SessionError::LeadGone(self.config.lead_url.clone()),
                })
            }
        };
        if envelope.seq <= self.last_seq || !self.remember(&envelope.message_id) {
            return Ok(Handled::Nothing);
        }
        let handled = match envelope.body {
            Some(Body::ShutdownRequest(request)) => {
                // Acknowledged once answered with a refusal: an agreement
                // ends the member, and a crash before the answer leaves the
                // request to be delivered again.
                self.last_seq = envelope.seq;
                return Ok(Handled::Shutdown(request, envelope.seq));
            }
            Some(Body::PlanApprovalResponse(response))
                if self.under_review.as_deref() == Some(response.request_id.as_str()) =>
            {
                let decision = self.decide(response)?;
                self.messages.push_back(decision);
                Handled::Decided
            }
            Some(Body::PermissionResponse(response)) => Handled::Permission(response),
            Some(Body::Text(text)) => {
                self.messages.push_back(Observation::Message {
                    from: envelope.from.clone(),
                    text: text.content,
                });
                Handled::Nothing
            }
            Some(Body::TaskClaimable(task)) => {
                self.messages.push_back(Observation::TaskClaimable {
                    task_id: task.task_id,
                    subject: task.subject,
                });
                Handled::Nothing
            }
            Some(Body::TeammateTerminated(t)) => {
                tracing::info!(member = %Escaped(&t.name), reason = %Escaped(&t.reason), "a teammate terminated");
                Handled::Nothing
            }
            other => {
                tracing::debug!(body = ?other, "envelope with nothing to do");
                Handled::Nothing
            }
        };
        self.last_seq = envelope.seq;
        self.ack(envelope.seq).await?;
        Ok(handled)
    }

    /// Acknowledges everything up to `seq`.
    async fn ack(&self, seq: u64) -> Result<(), SessionError> {
        self.retry("Ack", |mut client| async move {
            client.ack(pb::AckRequest { seq }).await
        })
        .await
        .map(|_| ())
    }

    /// Calls the lead until the call succeeds, or fails for a reason other
    /// than the lead being unreachable, with capped exponential backoff and
    /// jitter; gives up once the lead has been gone for the limit. Every call
    /// the teammate makes is safe to repeat: ids are chosen by the teammate.
    async fn retry<T, F, Fut>(&self, rpc: &'static str, mut call: F) -> Result<T, SessionError>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let mut backoff = Backoff::new(self.config.lead_gone_limit);
        loop {
            match call(self.client.clone()).await {
                Ok(response) => return Ok(response.into_inner()),
                Err(status) if transient(&status) => {
                    let cause = shared::transport::cause(&status);
                    tracing::warn!(rpc, error = %Escaped(&cause), "the lead is unreachable; retrying");
                    if !backoff.wait().await {
                        return Err(SessionError::LeadGone(format!(
                            "{} (the last attempt: {cause})",
                            self.config.lead_url
                        )));
                    }
                }
                Err(status) => return Err(SessionError::Rpc { rpc, status }),
            }
        }
    }

    /// Records a message id; `false` if it was processed before.
    fn remember(&mut self, id: &str) -> bool {
        if id.is_empty() {
            return true;
        }
        if !self.seen.insert(id.to_owned()) {
            return false;
        }
        self.seen_order.push_back(id.to_owned());
        if self.seen_order.len() > REMEMBERED_IDS {
            if let Some(old) = self.seen_order.pop_front() {
                self.seen.remove(&old);
            }
        }
        true
    }
}

/// The last plan submitted.
#[derive(Debug)]
struct LastPlan {
    /// Its request id (the next plan supersedes it, unless it was approved).
    request_id: String,
    /// The files it named.
    files: Vec<String>,
    /// The task it was for, if any.
    task_id: String,
    /// Whether it was approved (the gate holds its grant).
    approved: bool,
}

/// One task in a line (and its description, if any, on the next).
fn describe_task(task: &pb::Task) -> String {
    let status = match pb::TaskStatus::try_from(task.status) {
        Ok(pb::TaskStatus::Pending) => "pending",
        Ok(pb::TaskStatus::Claimed) => "claimed",
        Ok(pb::TaskStatus::Completed) => "completed",
        _ => "unknown",
    };
    let mut line = format!("task {} [{status}] {}", task.task_id, task.subject);
    if !task.owner.is_empty() {
        line.push_str(&format!("; owner {}", task.owner));
    }
    if !task.blocked_by.is_empty() {
        line.push_str(&format!("; blocked by {}", task.blocked_by.join(", ")));
    }
    if !task.files.is_empty() {
        line.push_str(&format!("; files {}", task.files.join(", ")));
    }
    if !task.summary.is_empty() {
        line.push_str(&format!("; summary: {}", task.summary));
    }
    if !task.description.is_empty() {
        line.push_str(&format!("\n  {}", task.description));
    }
    line
}

/// Whether the lead refused the caller itself (an unknown or wrong token):
/// the session cannot go on. Any other refusal concerns one call.
fn fatal_status(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unauthenticated | Code::PermissionDenied
    )
}

/// Whether the error is the lead refusing the session itself, which ends it
/// even where the failure of one call (a report) would not.
fn session_refused(error: &SessionError) -> bool {
    match error {
        SessionError::Rpc { status, .. } => fatal_status(status),
        SessionError::LeadGone(_) | SessionError::Setup(_) | SessionError::Driver(_) => false,
    }
}

/// Whether a failed call may succeed if repeated: the lead was unreachable,
/// or the connection broke under the call.
fn transient(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable | Code::Unknown | Code::Cancelled | Code::DeadlineExceeded
    )
}
