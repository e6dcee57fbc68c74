//! `teammate mcp`: the teammate as an MCP server on stdio, so that any agent
//! that speaks the Model Context Protocol takes the driver's seat.
//!
//! The agent's calls become the session's steps through [`McpDriver`]: every
//! call runs through the same [`crate::session::Session`] as the script and
//! model drivers, with the same gate and workspace confinement. The server
//! ([`McpServer`]) only lists the tools the session offers, hands calls to
//! the driver and waits for their results, and answers `check_inbox` from
//! what the driver has heard.
//!
//! ```text
//! MCP client --tools/call--> McpServer --Call--> McpDriver::step --Step--> Session (gate, lead)
//!            <--result------           <--reply-- McpDriver::observe <--Observation--
//! ```

use std::{
    borrow::Cow,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use rmcp::{
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
        ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    },
    service::{Peer, RequestContext},
    ErrorData, RoleServer, ServerHandler,
};
use serde_json::{json, Value};
use shared::auth::now_unix_ms;
use tokio::sync::{mpsc, oneshot};

use crate::{
    catalog::{self, Request},
    driver::{Driver, DriverError, Observation, ShutdownAnswer, Step},
};

/// `check_inbox()`: what arrived since the last call (MCP only: the other
/// drivers hear the inbox without asking).
pub const CHECK_INBOX: &str = "check_inbox";

/// The most bytes of arguments one call may carry; more is refused before
/// it is parsed (the largest file a teammate writes is well below).
pub const MAX_ARGUMENTS: usize = 8 << 20;

/// The most news items kept between two `check_inbox` calls; the oldest
/// go first, and the next `check_inbox` says how many were dropped.
const MAX_NEWS: usize = 1_000;

/// What the server and the driver share.
#[derive(Debug, Default)]
struct Board {
    /// The tools the session offers now (without `check_inbox`).
    tools: Vec<&'static str>,
    /// What arrived since the last `check_inbox`, oldest first.
    news: Vec<String>,
    /// News dropped for lack of room since the last `check_inbox`.
    dropped: usize,
    /// The shutdown request waiting for `respond_shutdown`.
    shutdown: Option<String>,
    /// Why the member is no longer on the team, once it is not.
    left: Option<String>,
}

impl Board {
    fn hear(&mut self, news: String) {
        if self.news.len() >= MAX_NEWS {
            self.news.remove(0);
            self.dropped += 1;
        }
        self.news.push(news);
    }
}

/// The board, locked; a poisoned lock still holds a usable board.
fn lock(board: &Mutex<Board>) -> MutexGuard<'_, Board> {
    board
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A call's result: text, or an error text (`isError: true`).
type Outcome = Result<String, String>;

/// Where a call's result goes.
type Reply = oneshot::Sender<Outcome>;

/// A call from the agent, waiting for its result.
#[derive(Debug)]
struct Call {
    /// The tool's name.
    name: String,
    /// Its arguments, as JSON text.
    args_json: String,
    /// Where the result goes.
    reply: Reply,
}

/// The MCP side: serves `tools/list` and `tools/call`.
#[derive(Debug, Clone)]
pub struct McpServer {
    board: Arc<Mutex<Board>>,
    calls: mpsc::Sender<Call>,
}

/// The session side: turns the agent's calls into steps.
#[derive(Debug)]
pub struct McpDriver {
    board: Arc<Mutex<Board>>,
    calls: mpsc::Receiver<Call>,
    /// Where `notifications/tools/list_changed` go; set once the client
    /// has connected.
    peer: Option<Peer<RoleServer>>,
    /// The tool list the client was last told of.
    announced: Vec<&'static str>,
    /// The call in progress in the session: its tool and where its result goes.
    current: Option<(String, Reply)>,
    /// A result waiting to be handed over once the tool list is announced.
    finished: Option<(Reply, Outcome)>,
    /// How long `submit_plan` waits for the review.
    review_wait: Duration,
}

/// The server and the driver for one session, plan mode's tools listed.
pub fn pair(plan_tools: Vec<&'static str>, review_wait: Duration) -> (McpServer, McpDriver) {
    let board = Arc::new(Mutex::new(Board {
        tools: plan_tools.clone(),
        ..Board::default()
    }));
    let (calls_tx, calls_rx) = mpsc::channel(64);
    (
        McpServer {
            board: Arc::clone(&board),
            calls: calls_tx,
        },
        McpDriver {
            board,
            calls: calls_rx,
            peer: None,
            announced: plan_tools,
            current: None,
            finished: None,
            review_wait,
        },
    )
}

impl McpServer {
    /// Records that the member is no longer on the team (the lead went
    /// away, or the session failed): only `check_inbox` stays, and says why.
    pub fn end(&self, why: String) {
        let mut board = lock(&self.board);
        board.tools.clear();
        board.shutdown = None;
        board.hear(format!("you are no longer on the team: {why}"));
        board.left.get_or_insert(why);
    }

    /// The tools on offer now, `check_inbox` included.
    fn offered(&self) -> Vec<&'static str> {
        let board = lock(&self.board);
        let mut names = board.tools.clone();
        // After the read tools and send_message, before the mode's own.
        let at = names
            .iter()
            .position(|n| *n == catalog::SEND_MESSAGE)
            .map_or(names.len(), |i| i + 1);
        names.insert(at, CHECK_INBOX);
        names
    }

    /// `check_inbox`: everything heard since the last call, and what waits.
    fn check_inbox(&self) -> String {
        let mut board = lock(&self.board);
        let news = std::mem::take(&mut board.news);
        let dropped = std::mem::take(&mut board.dropped);
        let mut text = String::new();
        if dropped > 0 {
            text.push_str(&format!(
                "({dropped} older items were dropped: more than {MAX_NEWS} arrived between two check_inbox calls)\n"
            ));
        }
        if news.is_empty() {
            text.push_str("nothing new\n");
        }
        for item in &news {
            text.push_str("- ");
            text.push_str(item);
            text.push('\n');
        }
        if let Some(id) = &board.shutdown {
            text.push_str(&format!(
                "waiting for your answer: shutdown request {id}; call respond_shutdown(approve, reason)\n"
            ));
        }
        if let Some(why) = &board.left {
            text.push_str(&format!(
                "you have left the team ({why}); only check_inbox remains\n"
            ));
        }
        text
    }

    /// Runs one call through the driver; `Err` is an error result.
    async fn call(&self, name: &str, arguments: Option<serde_json::Map<String, Value>>) -> Outcome {
        if name == CHECK_INBOX {
            return Ok(self.check_inbox());
        }
        if let Some(why) = &lock(&self.board).left {
            return Err(format!(
                "{name} is not available: you have left the team ({why}); only check_inbox remains"
            ));
        }
        let args_json = Value::Object(arguments.unwrap_or_default()).to_string();
        if args_json.len() > MAX_ARGUMENTS {
            return Err(format!(
                "the arguments of {name} are {} bytes, more than the {MAX_ARGUMENTS} a call may carry; not run",
                args_json.len()
            ));
        }
        let (reply, result) = oneshot::channel();
        let call = Call {
            name: name.to_owned(),
            args_json,
            reply,
        };
        let gone = || "the teammate's session has ended; only check_inbox remains".to_owned();
        self.calls.send(call).await.map_err(|_| gone())?;
        result.await.map_err(|_| gone())?
    }
}

/// The tool as the agent sees it; `check_inbox` is known here only.
fn described(name: &'static str) -> Option<Tool> {
    let (description, parameters) = if name == CHECK_INBOX {
        (
            Cow::Borrowed(
                "What arrived since the last call: messages, the decision on your plan, a \
                 shutdown request (answer it with respond_shutdown). Call it while you wait \
                 for a review, and between steps of your work.",
            ),
            json!({"type": "object", "properties": {}}),
        )
    } else {
        let tool = catalog::tool(name)?;
        (Cow::Borrowed(tool.description), tool.parameters)
    };
    let Value::Object(schema) = parameters else {
        return None;
    };
    Some(Tool::new(name, description, Arc::new(schema)))
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            "mesh-teammate",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(
            "You are a teammate on a mesh team. You start in plan mode: read the workspace, \
             then call submit_plan. Write tools appear once the lead approves your plan, and \
             only within its write paths. Call check_inbox for messages, decisions and \
             shutdown requests.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.offered().into_iter().filter_map(described).collect();
        // The list changes with the mode: nothing may cache it.
        Ok(ListToolsResult::with_all_items(tools).with_ttl_ms(0))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let result = match self.call(&request.name, request.arguments).await {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(text) => CallToolResult::error(vec![ContentBlock::text(text)]),
        };
        Ok(result.into())
    }
}

impl McpDriver {
    /// Sets where tool-list changes are announced, once the client connected.
    pub fn connect(&mut self, peer: Peer<RoleServer>) {
        self.peer = Some(peer);
    }

    /// Publishes the tools on offer, tells the client if they changed, then
    /// hands over the last call's result: an agent told of new tools by a
    /// result finds them listed. Cancel-safe: an announcement cut short is
    /// made again.
    async fn announce(&mut self, tools: &[&'static str]) {
        if self.announced != tools {
            lock(&self.board).tools = tools.to_vec();
            if let Some(peer) = &self.peer {
                if let Err(e) = peer.notify_tool_list_changed().await {
                    tracing::warn!(error = %e, "could not send notifications/tools/list_changed");
                }
            }
            self.announced = tools.to_vec();
        }
        if let Some((reply, result)) = self.finished.take() {
            let _ = reply.send(result);
        }
    }

    /// The result of the call in progress.
    fn finish(&mut self, result: Outcome) {
        if let Some((_, reply)) = self.current.take() {
            self.finished = Some((reply, result));
        }
    }

    /// Whether the call in progress is a `submit_plan`.
    fn submitting(&self) -> bool {
        self.current
            .as_ref()
            .is_some_and(|(tool, _)| tool == catalog::SUBMIT_PLAN)
    }

    /// A plan's decision: the result of the `submit_plan` in progress, or news.
    fn decided(&mut self, text: String) {
        if self.submitting() {
            self.finish(Ok(text));
        } else {
            lock(&self.board).hear(text);
        }
    }
}

impl Driver for McpDriver {
    fn observe(&mut self, seen: Observation) {
        match seen {
            Observation::Started => {}
            Observation::ToolResult(result) => self.finish(result),
            Observation::TaskClaimed { text, .. } => self.finish(Ok(text)),
            Observation::PlanApproved { mode, write_paths } => self.decided(format!(
                "plan approved: mode {mode}; you may write {}. write_file, edit_file and \
                 run_command are now listed; carry out the plan.",
                if write_paths.is_empty() {
                    "the files your plan names".to_owned()
                } else {
                    write_paths.join(", ")
                }
            )),
            Observation::PlanRejected { feedback } => self.decided(format!(
                "plan rejected. Feedback: {feedback}\nRevise the plan and call submit_plan \
                 again: it supersedes the rejected one. You are still in plan mode."
            )),
            Observation::PlanPending { request_id } => self.finish(Ok(format!(
                "plan {request_id} is still pending after {} s of review. Call check_inbox \
                 later: the decision will be there, and the write tools are listed once it is \
                 approved.",
                self.review_wait.as_secs()
            ))),
            Observation::Message { from, text } => {
                lock(&self.board).hear(format!("message from {from}: {text}"));
            }
            // An agent's model is its own: usage is not the teammate's to count.
            Observation::Usage(_) | Observation::BudgetChanged { .. } => {}
            Observation::TaskClaimable { task_id, subject } => {
                lock(&self.board).hear(format!(
                    "task {task_id} can be claimed now: {subject} (claim_task)"
                ));
            }
            Observation::ShutdownRefused { reason } => self.finish(Ok(format!(
                "you refused the shutdown request ({reason}); you stay on the team and carry on"
            ))),
            Observation::ShutdownAgreed => {
                {
                    let mut board = lock(&self.board);
                    board.tools.clear();
                    board.shutdown = None;
                    board.left = Some("you agreed to shut down".into());
                }
                self.announced.clear();
                if let Some((_, reply)) = self.current.take() {
                    let _ = reply.send(Ok("agreed: you have left the team. Only check_inbox \
                                           remains; you may end this session."
                        .into()));
                }
                if let Some(peer) = self.peer.clone() {
                    tokio::spawn(async move {
                        let _ = peer.notify_tool_list_changed().await;
                    });
                }
            }
        }
    }

    async fn step(&mut self, tools: &[&'static str]) -> Result<Step, DriverError> {
        self.announce(tools).await;
        let Some(call) = self.calls.recv().await else {
            // The client went away: nothing will ever be asked again, and
            // the session stops on the signal that follows.
            return std::future::pending().await;
        };
        let offered: Vec<&str> = tools.iter().copied().chain([CHECK_INBOX]).collect();
        let step = match catalog::parse(&call.name, &call.args_json, &offered) {
            Ok(Request::Tool(tool)) => Step::Call(tool),
            Ok(Request::Send { to, text }) => Step::Send { to, text },
            Ok(Request::Submit(plan)) => Step::Submit(plan),
            Ok(Request::Task(call)) => Step::Task(call),
            Ok(Request::RespondShutdown { .. }) => Step::Invalid {
                tool: call.name.clone(),
                args_json: call.args_json.clone(),
                problem: "no shutdown request is waiting: respond_shutdown is listed only while \
                          one is"
                    .into(),
            },
            Err(problem) => Step::Invalid {
                tool: call.name.clone(),
                args_json: call.args_json.clone(),
                problem,
            },
        };
        self.current = Some((call.name, call.reply));
        Ok(step)
    }

    async fn answer_shutdown(
        &mut self,
        request: &crate::driver::ShutdownRequest,
        tools: &[&'static str],
    ) -> ShutdownAnswer {
        {
            let mut board = lock(&self.board);
            board.shutdown = Some(request.request_id.clone());
            board.hear(format!(
                "shutdown request {} from the lead{}. Finish what you are doing, then call \
                 respond_shutdown: approve=true to stop (you leave the team), or approve=false \
                 with a reason to keep working.",
                request.request_id,
                if request.reason.is_empty() {
                    String::new()
                } else {
                    format!(": {}", request.reason)
                }
            ));
        }
        self.announce(tools).await;
        // Answered before the lead's deadline, or refused just before it.
        let left = (request.deadline_unix_ms > 0).then(|| {
            let ms = request.deadline_unix_ms - now_unix_ms() - 1_000;
            Duration::from_millis(u64::try_from(ms).unwrap_or(0))
        });
        let answer = loop {
            let next = match left {
                Some(left) => match tokio::time::timeout(left, self.calls.recv()).await {
                    Ok(next) => next,
                    Err(_) => {
                        break ShutdownAnswer {
                            approve: false,
                            reason: "the agent did not answer before the deadline".into(),
                        }
                    }
                },
                None => self.calls.recv().await,
            };
            let Some(call) = next else {
                break ShutdownAnswer {
                    approve: true,
                    reason: "the MCP client closed the session".into(),
                };
            };
            match catalog::parse(&call.name, &call.args_json, tools) {
                Ok(Request::RespondShutdown { approve, reason }) => {
                    self.current = Some((call.name, call.reply));
                    break ShutdownAnswer { approve, reason };
                }
                Err(problem) if call.name == catalog::RESPOND_SHUTDOWN => {
                    let _ = call.reply.send(Err(problem));
                }
                _ => {
                    let _ = call.reply.send(Err(format!(
                        "{} not run: a shutdown request waits for your answer; call \
                         respond_shutdown(approve, reason) first (check_inbox shows the request)",
                        call.name
                    )));
                }
            }
        };
        lock(&self.board).shutdown = None;
        answer
    }

    fn review_wait(&self) -> Option<Duration> {
        Some(self.review_wait)
    }

    fn hears_while_thinking(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::Gate;

    fn call(name: &str, args: Value) -> (Call, oneshot::Receiver<Outcome>) {
        let (reply, result) = oneshot::channel();
        let args_json = args.to_string();
        (
            Call {
                name: name.into(),
                args_json,
                reply,
            },
            result,
        )
    }

    #[test]
    fn check_inbox_is_listed_after_send_message_in_every_mode() {
        let (server, _driver) = pair(Gate::Plan.tools(), Duration::from_secs(1));
        assert_eq!(
            server.offered(),
            [
                "read_file",
                "list_dir",
                "search",
                "send_message",
                CHECK_INBOX,
                "list_tasks",
                "claim_task",
                "complete_task",
                "submit_plan"
            ]
        );
        server.end("the lead is gone".into());
        assert_eq!(server.offered(), [CHECK_INBOX]);
        let text = server.check_inbox();
        assert!(text.contains("the lead is gone"), "{text}");
    }

    #[test]
    fn news_is_capped_and_says_what_it_dropped() {
        let (server, _driver) = pair(Gate::Plan.tools(), Duration::from_secs(1));
        for i in 0..MAX_NEWS + 5 {
            lock(&server.board).hear(format!("n{i}"));
        }
        let text = server.check_inbox();
        assert!(text.starts_with("(5 older items were dropped"), "{text}");
        assert!(
            !text.contains("- n4\n") && text.contains("- n5\n"),
            "{text}"
        );
        assert!(server.check_inbox().starts_with("nothing new"));
    }

    #[tokio::test]
    async fn calls_become_steps_and_results_wait_for_the_tool_list() {
        let (server, mut driver) = pair(Gate::Plan.tools(), Duration::from_secs(1));
        let (c, mut result) = call("respond_shutdown", json!({"approve": true}));
        server.calls.send(c).await.expect("send");
        let step = driver.step(&Gate::Plan.tools()).await.expect("step");
        assert!(
            matches!(&step, Step::Invalid { problem, .. } if problem.contains("no shutdown request")),
            "{step:?}"
        );
        driver.observe(Observation::ToolResult(Err("refused".into())));
        // Handed over only when the next step has published the tools.
        assert!(result.try_recv().is_err());
        let (c, _r) = call("read_file", json!({"path": "a"}));
        server.calls.send(c).await.expect("send");
        let step = driver.step(&Gate::Plan.tools()).await.expect("step");
        assert!(matches!(step, Step::Call(_)), "{step:?}");
        assert_eq!(result.await.expect("result"), Err("refused".into()));
    }

    #[tokio::test]
    async fn an_agreed_shutdown_leaves_only_check_inbox() {
        let (server, mut driver) = pair(Gate::Plan.tools(), Duration::from_secs(1));
        let (c, result) = call(
            "respond_shutdown",
            json!({"approve": true, "reason": "done"}),
        );
        let mut tools = Gate::Plan.tools();
        tools.push(catalog::RESPOND_SHUTDOWN);
        let request = crate::driver::ShutdownRequest {
            request_id: "r1".into(),
            reason: "over".into(),
            ..Default::default()
        };
        server.calls.send(c).await.expect("send");
        let answer = driver.answer_shutdown(&request, &tools).await;
        assert!(answer.approve && answer.reason == "done", "{answer:?}");
        driver.observe(Observation::ShutdownAgreed);
        assert!(result
            .await
            .expect("result")
            .expect("ok")
            .starts_with("agreed"));
        assert_eq!(server.offered(), [CHECK_INBOX]);
        let refused = server.call("read_file", None).await;
        assert!(refused.is_err_and(|e| e.contains("left the team")));
    }
}
