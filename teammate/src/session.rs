//! A teammate's life on the mesh: join, read the inbox as a stream, take steps
//! from the driver, run tools through the gate, answer the lead.
//!
//! The session does the I/O: it waits on the driver, the inbox and the stop
//! signal, and calls the lead (`crate::client`). What the protocol has come
//! to (the plan under review, the grant, the envelopes seen, the news for the
//! driver) is kept by a pure `ProtocolState` (`crate::protocol_state`) that
//! the session steps.
//!
//! The session ties together parts that each own their state: the
//! [`mailbox::Mailbox`] (the inbox and the stop signal), the protocol state,
//! the [`usage::UsageReports`], and per `complete_task` the
//! [`result::Rounds`]. Each kind of step is handled in a child module:
//! [`gated`] (tool calls), [`plans`] (plans and idling), [`result`],
//! [`amend`], [`shutdown`], and what each envelope means, [`incoming`].

mod amend;
mod gated;
mod incoming;
mod mailbox;
mod plans;
mod result;
mod shutdown;
mod usage;

use std::future::Future;

use shared::pb;
use tokio::sync::watch;

use self::{
    incoming::Handled,
    mailbox::{Mailbox, Next},
    usage::UsageReports,
};
use crate::{
    client::Lead,
    driver::{Driver, Observation, Step, TaskCall},
    inbox,
    protocol_state::ProtocolState,
    results::TeamRepo,
    tasks,
    tools::Workspace,
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
    /// The envelopes from the inbox reader, and the stop signal.
    mailbox: Mailbox,
    /// Where tools work.
    workspace: Workspace,
    /// The plan, the grant (the gate), the envelopes seen, the news queued.
    state: ProtocolState,
    /// The epoch of usage reports, and whether the lead takes them.
    usage: UsageReports,
    /// The team's repository (`lead serve --repo`), where the workspace is
    /// a worktree of it: completing a task submits its result.
    repo: Option<TeamRepo>,
    /// The spans kept open, when exporting telemetry.
    traces: crate::traces::Traces,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("name", &self.config.name)
            .field("last_seq", &self.state.last_seq())
            .finish()
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
        let mailbox = Mailbox::new(inbox, stop_rx, config.leads.to_string());
        Ok(Self {
            config,
            lead,
            mailbox,
            workspace,
            state: ProtocolState::new(),
            usage: UsageReports::new(),
            repo,
            traces: Default::default(),
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
            while let Some(envelope) = self.mailbox.try_next()? {
                if let Some(exit) = self.handle(&mut driver, envelope).await? {
                    return Ok(exit);
                }
            }
            while let Some(message) = self.state.next_news() {
                driver.observe(message);
            }
            if self.mailbox.stopped() {
                return Ok(Exit::Signal);
            }
            let thought = self.think(&mut driver).await?;
            self.report_usage(&mut driver).await?;
            let step = match thought {
                Thought::Step(step) => step,
                Thought::News => continue,
                Thought::Exit(exit) => return Ok(exit),
            };
            match self.take_step(&mut driver, step).await? {
                Ok(observation) => driver.observe(observation),
                Err(exit) => return Ok(exit),
            }
            if self.mailbox.stopped() {
                return Ok(Exit::Signal);
            }
        }
    }

    /// Takes one step of the driver: what came of it, or `Err(exit)` if a
    /// stop came first.
    async fn take_step<D: Driver>(
        &mut self,
        driver: &mut D,
        step: Step,
    ) -> Result<Result<Observation, Exit>, SessionError> {
        Ok(match step {
            Step::Call(call) => self.run_tool(driver, call).await?,
            Step::Submit(plan) => self.submit(driver, plan).await?,
            Step::Send { to, text } => Ok(self.lead.send(to, text).await?),
            Step::Task(TaskCall::Amend { files, steps, why }) => {
                self.request_amendment(driver, files, steps, why).await?
            }
            Step::Task(TaskCall::Complete { task_id, summary }) if self.repo.is_some() => {
                self.submit_result(driver, task_id, summary).await?
            }
            Step::Task(call) => Ok(self.task_call(call).await?),
            Step::Invalid {
                tool,
                args_json,
                problem,
            } => {
                self.lead.report(&tool, &args_json, false, &problem).await?;
                Ok(Observation::ToolResult(Err(problem)))
            }
            Step::PutBack { tool, note } => {
                tracing::info!(tool = %tool, note = %mesh_core::display::Escaped(&note), "a call was put back to the model");
                Ok(Observation::ToolResult(Ok(note)))
            }
            Step::Idle(reason) => self.idle(driver, reason).await?,
        })
    }

    /// A call on the shared task list ([`tasks::call`]). With a team
    /// repository, a claim moves the worktree to the branch's head, and a
    /// task reviewed by its result alone opens the gate for edits.
    async fn task_call(&mut self, call: TaskCall) -> Result<Observation, SessionError> {
        let observation = tasks::call(&self.lead, &mut self.state, call).await?;
        let (Observation::TaskClaimed { task, .. }, Some(repo)) = (&observation, &self.repo) else {
            return Ok(observation);
        };
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
        Ok(observation)
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
                    let next = tokio::select! {
                        step = &mut step => {
                            return step.map(Thought::Step).map_err(|e| SessionError::Driver(e.0));
                        }
                        next = self.mailbox.next(None) => next?,
                    };
                    let envelope = match next {
                        Next::Envelope(envelope) => *envelope,
                        Next::Stop => return Ok(Thought::Exit(Exit::Signal)),
                        Next::TimedOut => continue,
                    };
                    match self.on_incoming(envelope).await? {
                        Handled::Shutdown(request, seq) => break (request, seq),
                        Handled::Exit(exit) => return Ok(Thought::Exit(exit)),
                        Handled::Nothing
                        | Handled::Decided
                        | Handled::Permission(..)
                        | Handled::Result(_)
                        | Handled::Amendment(..)
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
}
