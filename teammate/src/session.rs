//! A teammate's life on the mesh: join, read the inbox as a stream, take steps
//! from the driver, run tools through the gate, answer the lead.
//!
//! The session does the I/O: it waits on the driver, the inbox and the stop
//! signal, and calls the lead (`crate::client`). What the protocol has come
//! to (the plan under review, the grant, the envelopes seen, the news for the
//! driver) is kept by a pure `ProtocolState` (`crate::protocol_state`) that
//! the session steps.

use std::future::Future;

use mesh_core::{display::Escaped, limits};
use opentelemetry::{context::FutureExt as _, KeyValue};
use shared::pb;
use tokio::sync::{mpsc, watch};

use crate::{
    catalog,
    client::{fatal_status, Lead},
    driver::{Driver, Observation, Step},
    gate::{Clearance, Gate, Writer},
    inbox::{self, Incoming},
    protocol_state::{ProtocolState, Received, Taken},
    results::TeamRepo,
    tasks,
    tools::{ToolCall, ToolError, Workspace},
};
pub use crate::{client::Leaver, config::Config, error::SessionError};

/// Why a teammate stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// It agreed to a shutdown request.
    Shutdown,
    /// A signal asked it to stop; it finished the tool call in progress.
    Signal,
}

/// A joined teammate.
pub struct Session {
    /// Settings.
    config: Config,
    /// The lead, with the session token attached.
    lead: Lead,
    /// Envelopes from the inbox reader.
    inbox: mpsc::Receiver<Incoming>,
    /// Where tools work.
    workspace: Workspace,
    /// The plan, the grant (the gate), the envelopes seen, the news queued.
    state: ProtocolState,
    /// Turns true when a signal asks the teammate to stop.
    stop: watch::Receiver<bool>,
    /// Names this process in usage reports.
    epoch: String,
    /// Whether the lead takes usage reports (it stops being asked once it
    /// does not).
    counts_usage: bool,
    /// The team's repository (`lead serve --repo`), where the workspace is
    /// a worktree of it: completing a task submits its result.
    repo: Option<TeamRepo>,
    /// The spans kept open, when exporting telemetry.
    traces: crate::traces::Traces,
    /// When the envelope being handled arrived from the lead (unix ms).
    arrived_unix_ms: i64,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("name", &self.config.name)
            .field("last_seq", &self.state.last_seq())
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
    /// queued in the state for the driver).
    Decided,
    /// The answer to a permission request.
    Permission(pb::PermissionResponse),
    /// The answer to a result request.
    Result(pb::ResultResponse),
    /// The answer to an amendment.
    Amendment(pb::AmendmentResponse),
    /// Nothing arrived before the deadline.
    TimedOut,
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

impl Session {
    /// Joins the lead (retrying while it is unreachable) and opens the inbox.
    pub async fn join(
        config: Config,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> Result<Self, SessionError> {
        let workspace = Workspace::open(&config.workspace).map_err(|e| {
            SessionError::Setup(format!("--workspace {}: {e}", config.workspace.display()))
        })?;
        let lead = Lead::join(&config).await?;
        let inbox = inbox::start(lead.client(), 0, config.lead_gone_limit);
        // A lead without a team repository (or an older one) says so.
        let repo_state = lead
            .client()
            .get_repo(pb::GetRepoRequest {})
            .await
            .ok()
            .map(tonic::Response::into_inner);
        let repo = TeamRepo::find(repo_state, &config.workspace).await;
        let (stop_tx, stop_rx) = watch::channel(false);
        tokio::spawn(async move {
            stop.await;
            let _ = stop_tx.send(true);
        });
        Ok(Self {
            config,
            lead,
            inbox,
            workspace,
            state: ProtocolState::new(),
            stop: stop_rx,
            epoch: uuid::Uuid::new_v4().to_string(),
            counts_usage: true,
            repo,
            traces: Default::default(),
            arrived_unix_ms: 0,
        })
    }

    /// What leaves the team for this session, usable after `run` ends.
    pub fn leaver(&self) -> Leaver {
        self.lead.leaver()
    }

    /// Takes the driver's steps until a shutdown is agreed or a signal arrives.
    pub async fn run<D: Driver>(mut self, mut driver: D) -> Result<Exit, SessionError> {
        driver.observe(Observation::Started);
        if let Some(usage) = self.lead.joined_usage() {
            driver.observe(Observation::Usage(usage));
        }
        loop {
            // Between steps, everything that arrived is handled: a shutdown
            // request is answered only after the tool call in progress ended.
            while let Ok(incoming) = self.inbox.try_recv() {
                if let Some(exit) = self.handle(&mut driver, incoming).await? {
                    return Ok(exit);
                }
            }
            while let Some(message) = self.state.next_news() {
                driver.observe(message);
            }
            if *self.stop.borrow() {
                return Ok(Exit::Signal);
            }
            let thought = self.think(&mut driver).await?;
            self.report_usage(&mut driver).await?;
            let step = match thought {
                Thought::Step(step) => step,
                Thought::News => continue,
                Thought::Exit(exit) => return Ok(exit),
            };
            let next = match step {
                Step::Call(call) => self.run_tool(&mut driver, call).await?,
                Step::Submit(plan) => self.submit(&mut driver, plan).await?,
                Step::Send { to, text } => Ok(self.lead.send(to, text).await?),
                Step::Task(crate::driver::TaskCall::Amend { files, steps, why }) => {
                    self.request_amendment(&mut driver, files, steps, why)
                        .await?
                }
                Step::Task(crate::driver::TaskCall::Complete { task_id, summary })
                    if self.repo.is_some() =>
                {
                    self.submit_result(&mut driver, task_id, summary).await?
                }
                Step::Task(call) => {
                    let observation = tasks::call(&self.lead, &mut self.state, call).await?;
                    if let (Observation::TaskClaimed { task, .. }, Some(repo)) =
                        (&observation, &self.repo)
                    {
                        if let Err(e) = repo.start_task(&self.config.name, &task.task_id).await {
                            tracing::warn!(error = %e.0, "cannot move the worktree to the team branch's head");
                        }
                        if !task.needs_plan {
                            self.state
                                .unlock_for_result(
                                    &task.task_id,
                                    &task.files,
                                    &self.workspace,
                                    &self.config.commands,
                                )
                                .map_err(|e| SessionError::Setup(e.to_string()))?;
                            tracing::info!(task_id = %task.task_id, "the task is reviewed by its result: edits may start");
                        }
                    }
                    Ok(observation)
                }
                Step::Invalid {
                    tool,
                    args_json,
                    problem,
                } => {
                    self.lead.report(&tool, &args_json, false, &problem).await?;
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
            let tools = self.state.gate().tools();
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
                        | Handled::Result(_)
                        | Handled::Amendment(_)
                        | Handled::TimedOut => {}
                    }
                    if eager && self.state.has_news() {
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
        let cx = crate::traces::answering_shutdown(
            &request.request_id,
            &request.traceparent,
            &self.config.name,
            self.arrived_unix_ms,
        );
        let mut tools = self.state.gate().tools();
        tools.push(catalog::RESPOND_SHUTDOWN);
        let answer = driver
            .answer_shutdown(&request, &tools)
            .with_context(cx.clone())
            .await;
        self.report_usage(driver).await?;
        tracing::info!(request_id = %Escaped(&request.request_id), approve = answer.approve, reason = %Escaped(&answer.reason), "answering a shutdown request");
        let response = pb::ShutdownResponse {
            request_id: request.request_id,
            approve: answer.approve,
            reason: limits::cut(&answer.reason, limits::REASON),
        };
        let answered = self
            .lead
            .retry("RespondShutdown", |mut client| {
                let request = response.clone();
                async move { client.respond_shutdown(request).await }
            })
            .with_context(cx.clone())
            .await;
        crate::traces::answered_shutdown(
            &cx,
            answer.approve,
            &answer.reason,
            match &answered {
                Ok(_) => Ok(()),
                Err(SessionError::Rpc { status, .. }) => Err(status.message()),
                Err(_) => Err("the lead is gone"),
            },
        );
        match answered {
            Ok(_) => {}
            // The request is over (it expired, or the lead will not take
            // this answer): the teammate is still on the team and goes on.
            Err(SessionError::Rpc { status, .. }) if !fatal_status(&status) => {
                tracing::warn!(error = %Escaped(&status.to_string()), "the lead refused the shutdown answer; carrying on");
                self.lead.ack(seq).await?;
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
        self.lead.ack(seq).await?;
        driver.observe(Observation::ShutdownRefused {
            reason: answer.reason,
        });
        Ok(None)
    }

    /// Reports what the driver's model used, if anything changed, and tells
    /// the driver the lead's answer (its totals and budget).
    async fn report_usage<D: Driver>(&mut self, driver: &mut D) -> Result<(), SessionError> {
        let Some(totals) = driver.take_usage() else {
            return Ok(());
        };
        if !self.counts_usage {
            return Ok(());
        }
        match self.lead.report_usage(&self.epoch, totals).await? {
            Ok(status) => driver.observe(Observation::Usage(status)),
            Err(code) => self.counts_usage = code != tonic::Code::Unimplemented,
        }
        Ok(())
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
            Handled::Nothing
            | Handled::Decided
            | Handled::Permission(_)
            | Handled::Result(_)
            | Handled::Amendment(_)
            | Handled::TimedOut => Ok(None),
        }
    }

    /// Runs one tool through the gate and reports it to the lead; `Err(exit)`
    /// if a stop came while it waited for permission.
    async fn run_tool<D: Driver>(
        &mut self,
        driver: &mut D,
        call: ToolCall,
    ) -> Result<Result<Observation, Exit>, SessionError> {
        // The first gated call under a grant is a span of its plan's trace.
        let mut cx = opentelemetry::Context::new();
        let result = if let Some(result) = self.workspace.run_read(&call) {
            result
        } else {
            cx = self.traces.gated(call.name());
            match self
                .run_gated(driver, &call)
                .with_context(cx.clone())
                .await?
            {
                Ok(result) => result,
                Err(exit) => {
                    crate::traces::end(&cx, Err("stopped"));
                    return Ok(Err(exit));
                }
            }
        };
        // Refused by the gate, the lead or the workspace's rules (a path that
        // leaves it, a FIFO, a hard link): it did not run.
        let allowed = !matches!(result, Err(ToolError::Refused(_) | ToolError::Path { .. }));
        let outcome = match &result {
            Ok(output) => crate::tools::truncate(output, 300).to_owned(),
            Err(e) => e.to_string(),
        };
        crate::traces::end(
            &cx,
            if result.is_ok() {
                Ok(outcome.as_str())
            } else {
                Err(outcome.as_str())
            },
        );
        self.lead
            .report(call.name(), &call.args_json(), allowed, &outcome)
            .await?;
        Ok(Ok(Observation::ToolResult(
            result.map_err(|e| e.to_string()),
        )))
    }

    /// Clears a gated call (asking the lead's permission where the grant
    /// says so) and runs it; `Err(exit)` if a stop came while it waited.
    async fn run_gated<D: Driver>(
        &mut self,
        driver: &mut D,
        call: &ToolCall,
    ) -> Result<Result<Result<String, ToolError>, Exit>, SessionError> {
        let clearance = match self.state.gate() {
            Gate::Plan => Clearance::Refused(format!(
                "{} is not available in plan mode: call submit_plan and wait for its approval",
                call.name()
            )),
            Gate::Unlocked(writer) => writer.clear(call),
        };
        let ran = match clearance {
            Clearance::Run(ticket) => self.writer()?.run(ticket).await,
            Clearance::Refused(reason) => Err(ToolError::Refused(reason)),
            Clearance::NeedsPermission => match self.ask_permission(driver, call).await? {
                Asked::Exit(exit) => return Ok(Err(exit)),
                Asked::Refused(reason) => Err(ToolError::Refused(reason)),
                Asked::Answer(response) => match self.writer()?.permit(call, &response) {
                    Ok(ticket) => self.writer()?.run(ticket).await,
                    Err(reason) => Err(ToolError::Refused(reason)),
                },
            },
        };
        Ok(Ok(ran))
    }

    /// The writer, which exists whenever a gated call was cleared.
    fn writer(&self) -> Result<&Writer, SessionError> {
        match self.state.gate() {
            Gate::Unlocked(writer) => Ok(writer),
            Gate::Plan => Err(SessionError::Setup(
                "internal: a gated call was cleared in plan mode".into(),
            )),
        }
    }

    /// Asks the lead to allow one call ([`Lead::request_permission`]) and
    /// waits for its answer. A call not asked, or refused by the lead, does
    /// not run, and the teammate carries on.
    async fn ask_permission<D: Driver>(
        &mut self,
        driver: &mut D,
        call: &ToolCall,
    ) -> Result<Asked, SessionError> {
        let id = match self.lead.request_permission(call).await? {
            Ok(id) => id,
            Err(reason) => return Ok(Asked::Refused(reason)),
        };
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
        let supersedes = match self.state.prepare_plan(&mut plan) {
            Ok(supersedes) => supersedes,
            Err(problem) => {
                let args = serde_json::json!({ "summary": plan.summary }).to_string();
                self.lead
                    .report(catalog::SUBMIT_PLAN, &args, false, problem)
                    .await?;
                return Ok(Ok(Observation::ToolResult(Err(problem.into()))));
            }
        };
        let request = pb::PlanApprovalRequest {
            request_id: uuid::Uuid::new_v4().to_string(),
            supersedes,
            plan: Some(plan.clone()),
        };
        let id = request.request_id.clone();
        let cx = self
            .traces
            .submitting(&id, &self.config.name, &plan.summary);
        let submitted = self
            .lead
            .retry("SubmitPlan", |mut client| {
                let request = request.clone();
                async move { client.submit_plan(request).await }
            })
            .with_context(cx)
            .await;
        match submitted {
            Ok(_) => {}
            // The lead will not consider this plan (too large, malformed, in
            // the wrong state): the driver hears it as a rejection and may
            // revise. The last plan stays: this one never existed on the lead.
            Err(SessionError::Rpc { status, .. }) if !fatal_status(&status) => {
                self.traces.refused(status.message());
                tracing::warn!(error = %Escaped(&status.to_string()), "the lead refused the plan");
                return Ok(Ok(Observation::PlanRejected {
                    feedback: format!("the lead refused the plan: {}", status.message()),
                }));
            }
            Err(e) => return Err(e),
        }
        tracing::info!(request_id = %id, summary = %Escaped(&plan.summary), "submitted a plan");
        self.state.submitted(id.clone(), plan);
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
            if !self.state.is_under_review() {
                if let Some(decision) = self.state.take_decision() {
                    return Ok(Ok(decision));
                }
            }
        }
    }

    /// `complete_task` with a team repository: submits the workspace's
    /// change as a result and waits for the lead's answer. Landed: the
    /// worktree moves to the landed commit and the task is done. A conflict:
    /// the change is rebased onto the branch's new head and submitted again
    /// (twice at most). Rejected otherwise: the driver hears why.
    async fn submit_result<D: Driver>(
        &mut self,
        driver: &mut D,
        task_id: String,
        summary: String,
    ) -> Result<Result<Observation, Exit>, SessionError> {
        let Some(repo) = self.repo.clone() else {
            return Ok(Ok(Observation::ToolResult(
                Err("no team repository".into()),
            )));
        };
        let args = serde_json::json!({ "task_id": task_id, "summary": crate::tools::truncate(&summary, 120) })
            .to_string();
        let mut supersedes = String::new();
        let mut rounds = 0;
        let outcome: Result<String, String> = loop {
            rounds += 1;
            let prepared = async {
                let base = repo.base().await?;
                let diff = repo.diff(&base).await?;
                Ok::<_, crate::results::GitFailed>((base, diff))
            }
            .await;
            let (base, diff) = match prepared {
                Ok(prepared) => prepared,
                Err(e) => break Err(format!("cannot make the result: {}", e.0)),
            };
            if diff.is_empty() {
                break Err(
                    "nothing to submit: the workspace has no changes against its base".into(),
                );
            }
            let request = pb::ResultRequest {
                request_id: uuid::Uuid::new_v4().to_string(),
                task_id: task_id.clone(),
                base,
                diff,
                summary: limits::cut(&summary, limits::REASON),
                supersedes: supersedes.clone(),
                ..Default::default()
            };
            let id = request.request_id.clone();
            let cx = self.traces.under_grant(
                "submit_result",
                vec![
                    KeyValue::new("mesh.request.id", id.clone()),
                    KeyValue::new("mesh.request.kind", "result"),
                    KeyValue::new("mesh.task.id", task_id.clone()),
                    KeyValue::new("mesh.member", self.config.name.clone()),
                ],
            );
            let submitted = self
                .lead
                .retry("SubmitResult", |mut client| {
                    let request = request.clone();
                    async move { client.submit_result(request).await }
                })
                .with_context(cx.clone())
                .await;
            match submitted {
                Ok(_) => {}
                Err(SessionError::Rpc { status, .. }) if !fatal_status(&status) => {
                    crate::traces::end(&cx, Err(status.message()));
                    break Err(format!("the lead refused the result: {}", status.message()));
                }
                Err(e) => return Err(e),
            }
            tracing::info!(request_id = %id, task_id = %Escaped(&task_id), "submitted a result");
            let answer = loop {
                match self.next_incoming(driver).await? {
                    Handled::Exit(exit) => return Ok(Err(exit)),
                    Handled::Result(answer) if answer.request_id == id => break answer,
                    _ => {}
                }
            };
            crate::traces::end(
                &cx,
                match (answer.approve, answer.conflicts.is_empty()) {
                    (true, _) => Ok("landed"),
                    (false, false) => Err("conflicts"),
                    (false, true) => Err(answer.feedback.as_str()),
                },
            );
            if answer.approve {
                if let Err(e) = repo.landed(&answer.commit).await {
                    tracing::warn!(error = %e.0, "cannot move the worktree to the landed commit");
                }
                let mut text = format!(
                    "landed on {} as {}; task {task_id} is completed",
                    repo.branch, answer.commit
                );
                if self.state.completed(&task_id) {
                    self.traces.task_done();
                    text.push_str(
                        "\nThe grant for this task's plan has ended: you are in plan mode \
                         again. Claim another task and submit a plan for it.",
                    );
                }
                break Ok(text);
            }
            if !answer.conflicts.is_empty() && rounds < 3 {
                tracing::info!(request_id = %id, conflicts = ?answer.conflicts, "the result conflicts; rebasing onto the team branch");
                if let Err(e) = repo.rebase(&answer.branch_head).await {
                    break Err(format!(
                        "the result conflicts and cannot be rebased: {}",
                        e.0
                    ));
                }
                supersedes = id;
                continue;
            }
            break Err(format!("the result was rejected: {}", answer.feedback));
        };
        let allowed = outcome.is_ok();
        let said = match &outcome {
            Ok(text) => crate::tools::truncate(text, 300).to_owned(),
            Err(text) => text.clone(),
        };
        self.lead
            .report(catalog::COMPLETE_TASK, &args, allowed, &said)
            .await?;
        Ok(Ok(Observation::ToolResult(outcome)))
    }

    /// `request_amendment`: asks the lead to add `files` (and `steps`) to
    /// the approved plan and waits for the answer; an approval widens the
    /// gate to the grant it carries.
    async fn request_amendment<D: Driver>(
        &mut self,
        driver: &mut D,
        files: Vec<String>,
        steps: Vec<String>,
        why: String,
    ) -> Result<Result<Observation, Exit>, SessionError> {
        let args = serde_json::json!({ "files": files, "why": crate::tools::truncate(&why, 120) })
            .to_string();
        let request = pb::AmendmentRequest {
            request_id: uuid::Uuid::new_v4().to_string(),
            files,
            steps,
            why: limits::cut(&why, limits::REASON),
            plan_id: String::new(),
        };
        let id = request.request_id.clone();
        let cx = self.traces.under_grant(
            "request_amendment",
            vec![
                KeyValue::new("mesh.request.id", id.clone()),
                KeyValue::new("mesh.request.kind", "amendment"),
                KeyValue::new("mesh.member", self.config.name.clone()),
            ],
        );
        let asked = self
            .lead
            .retry("RequestAmendment", |mut client| {
                let request = request.clone();
                async move { client.request_amendment(request).await }
            })
            .with_context(cx.clone())
            .await;
        let outcome: Result<String, String> = match asked {
            Ok(_) => {
                tracing::info!(request_id = %id, "asked for an amendment");
                let answer = loop {
                    match self.next_incoming(driver).await? {
                        Handled::Exit(exit) => return Ok(Err(exit)),
                        Handled::Amendment(answer) if answer.request_id == id => break answer,
                        _ => {}
                    }
                };
                match (answer.approve, answer.grant) {
                    (true, Some(grant)) => {
                        match self
                            .state
                            .widen(&grant, &self.workspace, &self.config.commands)
                        {
                            Ok(paths) => Ok(format!(
                                "amendment approved: you may now write {}",
                                paths.join(", ")
                            )),
                            Err(e) => Err(e.to_string()),
                        }
                    }
                    (true, None) => Ok("amendment approved".into()),
                    (false, _) => Err(format!("amendment rejected: {}", answer.feedback)),
                }
            }
            Err(SessionError::Rpc { status, .. }) if !fatal_status(&status) => Err(format!(
                "the lead refused the amendment: {}",
                status.message()
            )),
            Err(e) => return Err(e),
        };
        let said = match &outcome {
            Ok(text) => text.clone(),
            Err(text) => text.clone(),
        };
        crate::traces::end(&cx, outcome.as_deref().map_err(String::as_str));
        self.lead
            .report(catalog::REQUEST_AMENDMENT, &args, outcome.is_ok(), &said)
            .await?;
        Ok(Ok(Observation::ToolResult(outcome)))
    }

    /// Reports idle and waits for a message; `Err(exit)` if a stop came first.
    async fn idle<D: Driver>(
        &mut self,
        driver: &mut D,
        reason: String,
    ) -> Result<Result<Observation, Exit>, SessionError> {
        if let Some(seen) = self.state.next_news() {
            return Ok(Ok(seen));
        }
        tracing::info!(member = %Escaped(&self.config.name), reason = %Escaped(&reason), "idle");
        let idle = pb::IdleNotification {
            reason: limits::cut(&reason, limits::REASON),
        };
        self.lead
            .retry("ReportIdle", |mut client| {
                let idle = idle.clone();
                async move { client.report_idle(idle).await }
            })
            .await?;
        loop {
            if let Handled::Exit(exit) = self.next_incoming(driver).await? {
                return Ok(Err(exit));
            }
            if let Some(seen) = self.state.next_news() {
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
            Incoming::Envelope(envelope, arrived) => {
                self.arrived_unix_ms = arrived;
                *envelope
            }
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
        let received = self
            .state
            .receive(envelope, &self.workspace, &self.config.commands)
            .map_err(|e| SessionError::Setup(e.to_string()))?;
        let (seq, taken) = match received {
            Received::Again => return Ok(Handled::Nothing),
            Received::Shutdown(request, seq) => return Ok(Handled::Shutdown(request, seq)),
            Received::Taken(seq, taken) => (seq, taken),
        };
        let handled = match taken {
            Taken::Decided {
                request_id: id,
                decision,
            } => {
                match decision {
                    Observation::PlanRejected { feedback } => {
                        self.traces.decided(&id, false, &feedback);
                        tracing::info!(request_id = %id, feedback = %Escaped(&feedback), "plan rejected; revising");
                    }
                    Observation::PlanApproved { mode, .. } => {
                        self.traces.decided(&id, true, "");
                        tracing::info!(request_id = %id, mode = %mode, "plan approved");
                    }
                    _ => {}
                }
                Handled::Decided
            }
            Taken::Permission(response) => Handled::Permission(response),
            Taken::Queued => Handled::Nothing,
            Taken::Terminated(t) => {
                tracing::info!(member = %Escaped(&t.name), reason = %Escaped(&t.reason), "a teammate terminated");
                Handled::Nothing
            }
            Taken::Ignored(Some(pb::envelope::Body::ResultResponse(response))) => {
                Handled::Result(response)
            }
            Taken::Ignored(Some(pb::envelope::Body::AmendmentResponse(response))) => {
                Handled::Amendment(response)
            }
            Taken::Ignored(other) => {
                tracing::debug!(body = ?other, "envelope with nothing to do");
                Handled::Nothing
            }
        };
        self.lead.ack(seq).await?;
        Ok(handled)
    }
}
