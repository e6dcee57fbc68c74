//! The model driver: a language model behind any chat-completions server
//! decides the steps. It sees exactly the tools of the current mode as
//! function schemas; each tool call of its reply becomes one step, run in
//! order through the session (and so through the gate), and its result goes
//! back as that call's answer. What happens meanwhile (a review, a message)
//! is told to it as a user message once every call of its reply is answered.
//!
//! Every call is bounded: a reply by `--max-tokens` (one cut at the limit
//! has its unfinished call dropped, and the model is told), the request by
//! the context window (old tool results shortened first, then older turns
//! summarized by the model, [`window`]), the member's tokens by its budget
//! ([`usage`]). A reply without a tool call ends the turn, unless the
//! teammate still owes something (a plan in plan mode, a claimed task's
//! completion): then the model is reminded a few times, naming the tool,
//! before the teammate reports idle saying what it owes.
//!
//! Where the server can enforce it, each reply is held to one call of the
//! tools that may be called now ([`offer`]): the mode's tools narrowed by
//! the state, and `done` (the end of a turn) only once nothing is owed. The
//! tools the model is told of stay the mode's, so that the request's prefix
//! stays the same from turn to turn and the server's prompt cache serves it.

mod compact;
mod offer;
mod owed;
mod usage;
mod window;

use std::{
    collections::VecDeque,
    path::PathBuf,
    time::{Duration, Instant},
};

use mesh_core::limits;
use mesh_llm::{
    self as chat, ChatClient, ChatError, Constrain, Message, Penalties, Role, ServerKind, Tool,
};
use shared::auth::now_unix_ms;

pub use self::usage::Meter;
use self::{
    compact::Pinned,
    offer::{Known, Tree},
    owed::Owed,
    window::Estimator,
};
use crate::{
    catalog::{self, Request},
    driver::{Driver, DriverError, Observation, ShutdownAnswer, ShutdownRequest, Step, TaskCall},
};

/// The most bytes of one tool result the model sees (less where the
/// context window is small).
pub const MAX_RESULT: usize = 16 * 1024;

/// How long a shutdown answer may take when the request names no deadline.
const DEFAULT_SHUTDOWN_WAIT: Duration = Duration::from_secs(30);

/// The longest reply by default (less where the window is small: a
/// quarter of it, but never less than [`MIN_DEFAULT_MAX_TOKENS`]).
pub const DEFAULT_MAX_TOKENS: u32 = 2_048;

/// The shortest default reply bound, however small the window.
pub const MIN_DEFAULT_MAX_TOKENS: u32 = 256;

/// Windows up to this many tokens are a small model's: llama.cpp's
/// repetition controls are on by default.
pub const SMALL_WINDOW: u32 = 32_768;

/// The repetition controls a small model gets on llama.cpp by default.
pub const SMALL_MODEL_PENALTIES: Penalties = Penalties {
    repeat_penalty: None,
    dry_multiplier: Some(0.8),
};

/// The context window assumed when neither `--context-window` nor the
/// server says.
pub const DEFAULT_CONTEXT_WINDOW: u32 = 8_192;

/// How many times a reply in prose is answered with a reminder of what the
/// teammate owes before it reports idle.
pub const MAX_NUDGES: u32 = 2;

/// The most bytes of a file read while planning that the approval says
/// again ([`ModelDriver::read_again`]).
const READ_AGAIN: usize = 1024;

/// The most files of a workspace named in the first message.
const SHOWN_FILES: usize = 50;

/// The first messages that are never compacted: the system prompt and the task.
const KEPT: usize = 2;

/// What the teammate is told about itself, and how far it may go.
#[derive(Debug, Clone)]
pub struct Brief {
    /// Its member name.
    pub name: String,
    /// Its role.
    pub role: String,
    /// The task, as the first user message.
    pub task: String,
    /// Replaces the default system prompt.
    pub system_prompt: Option<String>,
    /// The most model replies in a row without a message from outside.
    pub max_turns: u32,
    /// The longest reply, in tokens; `None`: [`DEFAULT_MAX_TOKENS`].
    pub max_tokens: Option<u32>,
    /// The model's context window; `None`: what the server says, else
    /// [`DEFAULT_CONTEXT_WINDOW`].
    pub context_window: Option<u32>,
    /// Tokens the member may use (`--token-budget`); the lead's word wins.
    pub token_budget: Option<u64>,
    /// The workspace, whose files narrow what may be read and written.
    pub workspace: Option<PathBuf>,
    /// `--repeat-penalty` and `--dry-multiplier` as given; what is not
    /// given is [`SMALL_MODEL_PENALTIES`] on llama.cpp with a small window.
    pub penalties: Penalties,
}

/// The model's window and the longest reply, once known.
#[derive(Debug, Clone, Copy)]
struct Limits {
    window: u64,
    max_tokens: u32,
}

/// Drives a teammate with a language model.
#[derive(Debug)]
pub struct ModelDriver {
    chat: ChatClient,
    /// The member name (for the budget's message).
    name: String,
    /// The conversation so far.
    messages: Vec<Message>,
    /// Calls of the last reply not yet run, in order.
    queue: VecDeque<chat::ToolCall>,
    /// The call whose result is awaited.
    running: Option<String>,
    /// What the model has yet to hear; said once every call is answered.
    unheard: Vec<String>,
    /// Model replies since the last message from outside.
    turns: u32,
    max_turns: u32,
    /// Something happened since the model's last reply without tool calls.
    news: bool,
    /// `--max-tokens` and `--context-window` as given.
    asked: (Option<u32>, Option<u32>),
    /// The window and reply limit, found at the first step.
    limits: Option<Limits>,
    /// Tokens per byte of request, as the server counts.
    estimate: Estimator,
    /// Tokens used and the budget.
    meter: Meter,
    /// Reminders given since the model last called a tool.
    nudges: u32,
    /// The task the teammate claimed and has not completed.
    claimed: Option<String>,
    /// A `complete_task` call whose result is awaited.
    completing: Option<String>,
    /// The paths of an approved plan of which nothing was written yet.
    unwritten: Option<Vec<String>>,
    /// Whether the call whose result is awaited writes (a gated tool).
    writing: bool,
    /// Kept through compactions.
    pinned: Pinned,
    /// How many times the conversation was compacted.
    compactions: u32,
    /// The workspace (`None`: nothing is narrowed by its files).
    workspace: Option<PathBuf>,
    /// `--repeat-penalty` and `--dry-multiplier` as given.
    penalties: Penalties,
    /// What narrows the calls the model may make.
    known: Known,
    /// What the running call does to [`Known`] if it succeeds.
    effect: Option<Effect>,
    /// The files of the last plan submitted.
    planned: Vec<String>,
    /// Replies cut at the bound, and calls refused as invalid.
    tally: Tally,
    /// The task, said again with the approval (a small model loses it).
    task: String,
    /// The calls made since the last news or write, to refuse a repeat.
    made: std::collections::HashSet<(String, String)>,
    /// Whether a plan was approved in this process (then plan mode after
    /// its task was completed owes no new plan).
    approved: bool,
    /// The tool of the call whose result is awaited.
    calling: Option<String>,
    /// Whether the workspace's files were shown ([`ModelDriver::show_workspace`]).
    workspace_shown: bool,
    /// The tools told in the conversation (a schema-constrained request
    /// carries none: see [`ModelDriver::tell_tools`]).
    told_tools: std::collections::BTreeSet<&'static str>,
}

/// What a call changes in what the driver knows, once it succeeds.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Effect {
    Read(String),
    Listed(String),
    Wrote(String),
    /// A command ran (its output says how it went).
    Ran,
}

/// What went wrong with the model's replies, for the log.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    /// Replies cut at the bound.
    cut: u32,
    /// Calls that were not valid (unknown tool, bad arguments, an end
    /// while something is owed).
    invalid: u32,
}

impl ModelDriver {
    /// A driver for `brief`, talking to the model through `chat`.
    pub fn new(chat: ChatClient, brief: Brief) -> Self {
        let task = brief.task.clone();
        let system = brief
            .system_prompt
            .unwrap_or_else(|| default_system_prompt(&brief.name, &brief.role));
        Self {
            chat,
            name: brief.name,
            messages: vec![
                Message::system(system),
                Message::user(format!("Your task:\n{}", brief.task)),
            ],
            queue: VecDeque::new(),
            running: None,
            unheard: Vec::new(),
            turns: 0,
            max_turns: brief.max_turns.max(1),
            news: true,
            asked: (brief.max_tokens, brief.context_window),
            limits: None,
            estimate: Estimator::default(),
            meter: Meter::new(brief.token_budget),
            nudges: 0,
            claimed: None,
            completing: None,
            unwritten: None,
            writing: false,
            pinned: Pinned::default(),
            compactions: 0,
            workspace: brief.workspace,
            penalties: brief.penalties,
            known: Known::default(),
            effect: None,
            planned: Vec::new(),
            tally: Tally::default(),
            task,
            made: Default::default(),
            approved: false,
            told_tools: Default::default(),
            calling: None,
            workspace_shown: false,
        }
    }

    /// The conversation so far.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Answers the running call.
    fn answer(&mut self, text: &str) {
        if let Some(id) = self.running.take() {
            let cap = self.result_cap();
            self.messages.push(Message::tool(&id, capped(text, cap)));
        }
    }

    /// The most bytes of one tool result: [`MAX_RESULT`], or a third of the
    /// room for requests where the window is small.
    fn result_cap(&self) -> usize {
        match self.limits {
            Some(l) => MAX_RESULT.min(
                self.estimate
                    .bytes_for(l.window.saturating_sub(u64::from(l.max_tokens)) / 3),
            ),
            None => MAX_RESULT,
        }
        .max(window::SHORT_RESULT * 2)
    }

    /// Tells the model what it has not heard, once no call is open.
    fn tell(&mut self) {
        if self.queue.is_empty() && self.running.is_none() && !self.unheard.is_empty() {
            let text = std::mem::take(&mut self.unheard).join("\n\n");
            self.messages.push(Message::user(text));
        }
    }

    /// The files read before the plan was approved, as they are now, where
    /// each is at most [`READ_AGAIN`] bytes and all of them twice that; `None`
    /// if none was read or they are bigger.
    fn read_again(&self) -> Option<String> {
        let root = self.workspace.as_deref()?;
        let mut text = String::from("The files you read:");
        for path in &self.known.read {
            let content = std::fs::read_to_string(root.join(path)).ok()?;
            if content.len() > READ_AGAIN {
                return None;
            }
            text.push_str(&format!("\n{path}:\n```\n{content}\n```"));
        }
        (!self.known.read.is_empty() && text.len() <= 2 * READ_AGAIN).then_some(text)
    }

    /// Once, where replies are held to a schema and the workspace is small:
    /// what it holds, with the task, so that the model need not list it
    /// (its directories count as listed).
    fn show_workspace(&mut self) {
        if self.workspace_shown || self.chat.constraint() != Constrain::Schema {
            return;
        }
        self.workspace_shown = true;
        let Some(tree) = self.workspace.as_deref().and_then(Tree::of) else {
            return;
        };
        if tree.files.len() > SHOWN_FILES {
            return;
        }
        let text = if tree.files.is_empty() {
            "Your workspace has no files yet.".to_owned()
        } else {
            let files: Vec<&str> = tree.files.iter().map(String::as_str).collect();
            format!("Files in your workspace: {}.", files.join(", "))
        };
        self.known.listed.extend(tree.dirs.iter().cloned());
        if let Some(last) = self.messages.last_mut().filter(|m| m.role == Role::User) {
            last.content.push_str("\n\n");
            last.content.push_str(&text);
        }
    }

    /// Where replies are held to a schema, the request carries no tools:
    /// the model is told in the conversation of what it may call, all of it
    /// at first and then each tool that becomes callable, in the last
    /// message (the user's, where it is: some chat templates refuse two
    /// user turns in a row), so that what the server cached stays the
    /// prefix. A tool no longer callable is not told again: the
    /// grammar leaves it out.
    fn tell_tools(&mut self, callable: &[Tool]) {
        if self.chat.constraint() != Constrain::Schema {
            return;
        }
        let new: Vec<Tool> = callable
            .iter()
            .filter(|t| !self.told_tools.contains(&t.name))
            .cloned()
            .collect();
        if new.is_empty() {
            return;
        }
        let first = self.told_tools.is_empty();
        self.told_tools.extend(new.iter().map(|t| t.name));
        let tools = chat::describe_tools(&new);
        match self.messages.last_mut() {
            // With the task: after it.
            Some(last) if first && last.role == Role::User => {
                last.content.push_str(&format!(
                    "\n\nReply with one tool call as JSON: {{\"name\": \"<tool>\", \
                     \"arguments\": {{...}}}}. Your tools:\n{tools}"
                ));
            }
            // With the news that brought them: before it, so that what the
            // model reads last is what to do (told after it, the tools'
            // descriptions came back in a small model's file as text).
            Some(last) if last.role == Role::User => {
                last.content = format!("You may call now too:\n{tools}\n\n{}", last.content);
            }
            _ => self
                .messages
                .push(Message::user(format!("You may call now too:\n{tools}"))),
        }
    }

    /// What the teammate owes, given the tools of its mode.
    fn owed(&self, tools: &[&'static str]) -> Option<Owed> {
        // Back in plan mode after a task's plan was carried out, no new
        // plan is owed unless another task was claimed.
        if tools.contains(&catalog::SUBMIT_PLAN) && (!self.approved || self.claimed.is_some()) {
            return Some(Owed::Plan);
        }
        if let Some(task) = &self.claimed {
            return Some(Owed::Task(task.clone()));
        }
        self.unwritten.clone().map(Owed::Work)
    }

    /// The tools on offer: the mode's, and `done`.
    fn offered(tools: &[&'static str]) -> Vec<Tool> {
        tools
            .iter()
            .chain(&[catalog::DONE])
            .filter_map(|t| catalog::tool(t))
            .collect()
    }

    /// Of `offered`, what may be called now.
    fn callable(&mut self, offered: &[Tool], tools: &[&'static str]) -> Vec<Tool> {
        self.known.tree = self.workspace.as_deref().and_then(Tree::of);
        self.known.claimed = self.claimed.clone();
        self.known.owes = self.owed(tools).is_some();
        offer::narrow(offered, &self.known)
    }

    /// The step a tool call of the model asks for.
    fn step_for(&mut self, call: chat::ToolCall, tools: &[&'static str]) -> Step {
        self.running = Some(call.id.clone());
        let name = call.function.name;
        self.calling = Some(name.clone());
        let arguments = call.function.arguments;
        self.writing = false;
        self.effect = None;
        if name == catalog::DONE {
            return self.end(arguments, tools);
        }
        // A read again is only a wasted turn (and the grammar offers none);
        // a call with an effect again, while nothing changed, is a loop.
        let reads = crate::tools::READ_TOOLS.contains(&name.as_str());
        let step = if reads || self.made.insert((name.clone(), arguments.clone())) {
            self.step_of(name, arguments, tools)
        } else {
            Step::Invalid {
                tool: name,
                args_json: arguments,
                problem: "you made this very call already and nothing changed since: its result \
                          stands. Do something else, or call done if the work is done."
                    .into(),
            }
        };
        if let Step::Invalid { tool, .. } = &step {
            self.tally.invalid += 1;
            self.known.spurn(tool);
        }
        step
    }

    /// `done`: the turn ends (the rest of the reply is not run), unless
    /// something is owed.
    fn end(&mut self, arguments: String, tools: &[&'static str]) -> Step {
        if let Some(owed) = self.owed(tools) {
            self.tally.invalid += 1;
            return Step::Invalid {
                tool: catalog::DONE.into(),
                args_json: arguments,
                problem: format!("you cannot end yet: you still owe {}", owed.what()),
            };
        }
        let summary = serde_json::from_str::<serde_json::Value>(&arguments)
            .ok()
            .and_then(|v| v.get("summary").and_then(|s| s.as_str()).map(str::to_owned))
            .unwrap_or_default();
        self.answer("your turn ended; you will be told when something happens");
        while let Some(call) = self.queue.pop_front() {
            self.messages
                .push(Message::tool(&call.id, "not run: done came before it"));
        }
        self.news = false;
        self.log_use();
        let summary = summary.trim();
        Step::Idle(if summary.is_empty() {
            "done".into()
        } else {
            format!("done: {}", limits::cut(summary, 1_000))
        })
    }

    /// What the model used so far and what went wrong, in the log.
    fn log_use(&self) {
        let used = self.meter.mine();
        tracing::info!(
            calls = used.calls,
            prompt_tokens = used.prompt_tokens,
            completion_tokens = used.completion_tokens,
            cached_tokens = self.meter.cached(),
            model_ms = used.model_ms,
            cut_replies = self.tally.cut,
            invalid_calls = self.tally.invalid,
            "model use"
        );
    }

    /// The step a call of a tool of the catalog asks for.
    fn step_of(&mut self, name: String, arguments: String, tools: &[&'static str]) -> Step {
        match catalog::parse(&name, &arguments, tools) {
            Ok(Request::Tool(crate::tools::ToolCall::EditFile { old, new, .. })) if old == new => {
                Step::Invalid {
                    tool: name,
                    args_json: arguments,
                    problem: "`old` and `new` are the same: that edit changes nothing".into(),
                }
            }
            Ok(Request::Tool(call)) => {
                self.writing = call.is_gated();
                self.effect = effect_of(&call);
                Step::Call(call)
            }
            // A plan that names no file can never be carried out: the
            // grant would allow no write.
            Ok(Request::Submit(plan)) if plan.files.is_empty() => Step::Invalid {
                tool: name,
                args_json: arguments,
                problem: "submit_plan needs `files`: the paths you will write (e.g. \
                          [\"hello.txt\"]); the approval allows writing only those"
                    .into(),
            },
            Ok(Request::Submit(plan)) => {
                self.pinned.plan = Some(limits::cut(&arguments, 4 * 1024));
                self.planned = plan.files.clone();
                Step::Submit(plan)
            }
            Ok(Request::Send { to, text }) => Step::Send { to, text },
            Ok(Request::Task(TaskCall::Amend { files, .. }))
                if !files.is_empty() && files.iter().all(|f| self.known.granted.contains(f)) =>
            {
                Step::Invalid {
                    tool: name,
                    args_json: arguments,
                    problem: format!(
                        "nothing to amend: you may already write {}",
                        files.join(", ")
                    ),
                }
            }
            Ok(Request::Task(call)) => {
                if let TaskCall::Complete { task_id, .. } = &call {
                    self.completing = Some(task_id.clone());
                }
                Step::Task(call)
            }
            Ok(Request::RespondShutdown { .. }) => Step::Invalid {
                tool: name,
                args_json: arguments,
                problem: "no shutdown request is waiting for an answer".into(),
            },
            Err(problem) => Step::Invalid {
                tool: name,
                args_json: arguments,
                problem,
            },
        }
    }

    /// The window and the longest reply: as given, else what the server
    /// says, else the defaults.
    async fn limits(&mut self) -> Limits {
        if let Some(limits) = self.limits {
            return limits;
        }
        let (max_tokens, window) = self.asked;
        let server = self.chat.server().await;
        let (window, source) = match (window, server.window) {
            (Some(w), _) => (w, "--context-window"),
            (None, Some(w)) => (w, "the model server"),
            (None, None) => (DEFAULT_CONTEXT_WINDOW, "the default (set --context-window)"),
        };
        let window = window.max(512);
        let max_tokens = max_tokens
            .unwrap_or((window / 4).clamp(MIN_DEFAULT_MAX_TOKENS, DEFAULT_MAX_TOKENS))
            .clamp(16, window / 2);
        let defaults = if server.kind == ServerKind::LlamaCpp && window <= SMALL_WINDOW {
            SMALL_MODEL_PENALTIES
        } else {
            Penalties::default()
        };
        let penalties = Penalties {
            repeat_penalty: self.penalties.repeat_penalty.or(defaults.repeat_penalty),
            dry_multiplier: self.penalties.dry_multiplier.or(defaults.dry_multiplier),
        };
        self.chat.set_penalties(penalties);
        tracing::info!(
            window,
            source,
            max_tokens,
            server = ?server.kind,
            constrain = %self.chat.constraint(),
            repeat_penalty = ?penalties.repeat_penalty,
            dry_multiplier = ?penalties.dry_multiplier,
            "the model's context window, the longest reply, and how replies are constrained"
        );
        let limits = Limits {
            window: u64::from(window),
            max_tokens,
        };
        self.limits = Some(limits);
        limits
    }

    /// The estimated tokens of a request of `messages` with `tools`.
    fn tokens_of(&self, messages: &[Message], tools: &[Tool]) -> u64 {
        self.estimate.tokens(window::request_bytes(messages, tools))
    }

    /// Counts what a call used: the server's figures where it gave them,
    /// else estimates; and learns the server's ratio of tokens to bytes.
    fn account(&mut self, sent: usize, reply: &chat::Reply, took: Duration) {
        let (prompt, completion) = match reply.usage {
            Some(u) => {
                self.estimate.learn(sent, u.prompt_tokens);
                self.meter.add_cached(u.cached_tokens);
                (u.prompt_tokens, u.completion_tokens)
            }
            None => {
                let written = reply.content.len()
                    + reply
                        .tool_calls
                        .iter()
                        .map(|c| c.function.name.len() + c.function.arguments.len())
                        .sum::<usize>();
                (self.estimate.tokens(sent), (written / 3) as u64)
            }
        };
        self.meter.add(prompt, completion, took);
    }

    /// Why the teammate waits, said when it reports idle with no news.
    fn budget_reason(&self) -> String {
        format!(
            "token budget spent: {} of {} tokens used; `lead budget {} TOKENS` raises it",
            self.meter.used(),
            self.meter.budget().unwrap_or_default(),
            self.name
        )
    }
}

impl Driver for ModelDriver {
    fn observe(&mut self, seen: Observation) {
        // News from outside (not a call's result) may make a refused call
        // worth making again.
        let news = !matches!(seen, Observation::ToolResult(_));
        match seen {
            Observation::Started => {}
            Observation::ToolResult(Ok(output)) => {
                self.calling = None;
                if self.completing.take().is_some() {
                    self.claimed = None;
                }
                if std::mem::take(&mut self.writing) {
                    self.unwritten = None;
                }
                let mut output = output;
                match self.effect.take() {
                    Some(Effect::Read(path)) => {
                        self.known.read.insert(path);
                    }
                    Some(Effect::Listed(path)) => {
                        self.known.listed.insert(path);
                    }
                    Some(Effect::Wrote(path)) => {
                        // The model knows what it wrote.
                        self.known.read.insert(path.clone());
                        let first = self.known.written.insert(path);
                        // A change is worth checking again.
                        self.made.retain(|(tool, _)| tool != "run_command");
                        self.known.spurned.remove("run_command");
                        self.known.check_failed = false;
                        if first && self.known.all_written() {
                            output.push_str(
                                "\nEvery file of your plan is written now. When the work is \
                                 done, call done with a short summary.",
                            );
                        }
                    }
                    Some(Effect::Ran) => {
                        // Nothing changed until a write: the same check
                        // would say the same.
                        self.known.spurned.insert("run_command".into());
                        self.known.check_failed = !output.starts_with("exit status: 0;");
                    }
                    None => {}
                }
                self.answer(&output)
            }
            Observation::TaskClaimed { task, text } => {
                self.claimed = Some(task.task_id);
                self.answer(&text)
            }
            Observation::ToolResult(Err(error)) => {
                self.completing = None;
                self.writing = false;
                self.effect = None;
                // At temperature 0 the same call would fail the same way.
                if let Some(tool) = self.calling.take() {
                    self.known.spurn(&tool);
                }
                self.answer(&format!("error: {error}"))
            }
            Observation::PlanRejected { feedback } => {
                self.answer("the plan was reviewed: rejected");
                self.pinned.feedback = Some(limits::cut(&feedback, 4 * 1024));
                self.unheard.push(format!(
                    "Your plan was rejected. The reviewer's feedback:\n{feedback}\n\nRevise the \
                     plan to answer it and call submit_plan again. You are still in plan mode."
                ));
            }
            Observation::PlanApproved { mode, write_paths } => {
                self.answer("the plan was reviewed: approved");
                let told = format!(
                    "Your plan was approved with mode {mode}. You may write: {paths}. The \
                     tools write_file, edit_file and run_command are now available, and \
                     submit_plan is not. Carry out the plan now for your task ({task}): call \
                     write_file with `path` and `content` for each file. When the work is \
                     done, call done with a short summary.",
                    task = limits::cut(&self.task, 1_000),
                    paths = if write_paths.is_empty() {
                        "the files your plan names".to_owned()
                    } else {
                        write_paths.join(", ")
                    }
                );
                self.pinned.grant = Some(told.clone());
                // What the plan was made from, said again where it is small:
                // a small model loses what it read before it planned.
                let told = match self.read_again() {
                    Some(read) => format!("{told}\n\n{read}"),
                    None => told,
                };
                self.known.granted = if write_paths.is_empty() {
                    self.planned.clone()
                } else {
                    write_paths.clone()
                };
                self.known.written.clear();
                self.approved = true;
                self.unwritten = Some(write_paths);
                self.pinned.feedback = None;
                self.unheard.push(told);
            }
            Observation::Message { from, text } => {
                self.unheard.push(format!("Message from {from}:\n{text}"));
                self.known.correspondents.insert(from);
                self.turns = 0;
            }
            Observation::TaskClaimable { task_id, subject } => {
                self.known.tasks_heard = true;
                self.unheard.push(format!(
                    "Task {task_id} of the shared list can be claimed now: {subject}. \
                     Call claim_task to take it if you are free."
                ));
                self.turns = 0;
            }
            Observation::ShutdownRefused { reason } => self.unheard.push(format!(
                "You refused the lead's shutdown request ({reason}); carry on."
            )),
            Observation::Usage(status) => {
                let was_spent = self.meter.spent();
                self.meter.heard(&status);
                if was_spent && !self.meter.spent() {
                    self.turns = 0;
                } else {
                    // Not news: the model has nothing new to hear.
                    return;
                }
            }
            Observation::BudgetChanged { token_budget } => {
                let was_spent = self.meter.spent();
                self.meter.set_budget(token_budget);
                if was_spent && !self.meter.spent() {
                    self.turns = 0;
                } else {
                    return;
                }
            }
            // It waits for every decision and ends at an agreed shutdown.
            Observation::PlanPending { .. } | Observation::ShutdownAgreed => {}
        }
        if news {
            self.known.spurned.clear();
            self.made.clear();
        }
        self.news = true;
    }

    async fn step(&mut self, tools: &[&'static str]) -> Result<Step, DriverError> {
        if let Some(call) = self.queue.pop_front() {
            return Ok(self.step_for(call, tools));
        }
        // A call whose result never came (it cannot happen in a session,
        // but the conversation must stay well formed).
        if self.running.is_some() {
            self.answer("error: no result");
        }
        self.tell();
        if !self.news {
            return Ok(Step::Idle(if self.meter.spent() {
                self.budget_reason()
            } else {
                "waiting for a message".into()
            }));
        }
        let schemas = Self::offered(tools);
        // Each pass is one model reply; a pass that only adds a note for
        // the model (a reminder, a cut reply, the server's error) asks again.
        // A step cancelled while the model thinks leaves at most such a
        // note behind, which the next step sends as it would have.
        loop {
            if self.turns >= self.max_turns {
                self.news = false;
                return Ok(Step::Idle(format!(
                    "stopped after {} model replies (--max-turns); a message starts it again",
                    self.max_turns
                )));
            }
            if self.meter.spent() {
                self.news = false;
                return Ok(Step::Idle(self.budget_reason()));
            }
            self.show_workspace();
            let callable = self.callable(&schemas, tools);
            self.tell_tools(&callable);
            self.fit(&schemas).await?;
            // A compaction may have taken what was told.
            self.tell_tools(&callable);
            let limits = self.limits().await;
            let sent = window::request_bytes(&self.messages, &schemas);
            let started = Instant::now();
            let result = self
                .chat
                .complete_call(
                    &self.messages,
                    &schemas,
                    Some(&callable),
                    Some(limits.max_tokens),
                )
                .await;
            let mut reply = match result {
                Ok(reply) => reply,
                Err(ChatError::Format { message, .. }) => {
                    self.meter
                        .add(self.estimate.tokens(sent), 0, started.elapsed());
                    self.turns += 1;
                    self.messages.push(Message::user(format!(
                        "The model server could not read your last reply: {message}. Reply \
                         again. To call a tool, write one JSON object per call: {{\"name\": \
                         \"<tool>\", \"arguments\": {{...}}}}."
                    )));
                    continue;
                }
                Err(e) => return Err(DriverError(e.to_string())),
            };
            self.account(sent, &reply, started.elapsed());
            self.turns += 1;
            tracing::debug!(
                calls = reply.tool_calls.len(),
                finish = ?reply.finish_reason,
                content = %mesh_core::display::Escaped(&limits::cut(&reply.content, 4_096)),
                "model replied"
            );
            if reply.cut() {
                self.tally.cut += 1;
                tracing::info!(
                    max_tokens = limits.max_tokens,
                    "a reply was cut at its bound"
                );
            }
            let cut_note = reply.cut().then(|| {
                let repeated = dedupe(&mut reply.tool_calls);
                let mut note = format!(
                    "Your last reply was cut at the limit of {} tokens; whatever it left \
                     unfinished at its end was not run.",
                    limits.max_tokens
                );
                if repeated > 0 {
                    note.push_str(&format!(
                        " It repeated itself: {repeated} repeated calls were dropped."
                    ));
                }
                note.push_str(" Keep replies short: a few tool calls, no repetition.");
                note
            });
            self.messages.push(Message::assistant(&reply));
            if !reply.tool_calls.is_empty() {
                self.nudges = 0;
                self.unheard.extend(cut_note);
                self.queue.extend(reply.tool_calls);
                return match self.queue.pop_front() {
                    Some(call) => Ok(self.step_for(call, tools)),
                    None => continue,
                };
            }
            if let Some(note) = cut_note {
                self.messages.push(Message::user(note));
                continue;
            }
            let text = reply.content.trim();
            if let Some(owed) = self.owed(tools) {
                if self.nudges < MAX_NUDGES {
                    self.nudges += 1;
                    self.messages.push(Message::user(owed.reminder()));
                    continue;
                }
                self.nudges = 0;
                self.news = false;
                self.log_use();
                return Ok(Step::Idle(format!(
                    "still owes {}; the model replied without it after {MAX_NUDGES} reminders: \
                     {}",
                    owed.what(),
                    limits::cut(text, 300)
                )));
            }
            self.news = false;
            self.log_use();
            return Ok(Step::Idle(if text.is_empty() {
                "done (the model replied with no text and no tool call)".into()
            } else {
                text.to_owned()
            }));
        }
    }

    fn take_usage(&mut self) -> Option<mesh_core::usage::Usage> {
        self.meter.take_report()
    }

    async fn answer_shutdown(
        &mut self,
        request: &ShutdownRequest,
        tools: &[&'static str],
    ) -> ShutdownAnswer {
        if self.meter.spent() {
            return ShutdownAnswer {
                approve: true,
                reason: "agreed (the token budget is spent: the model was not asked)".into(),
            };
        }
        // Asked on a copy of the conversation in which every open call is
        // answered, so that a refusal leaves the real one as it was.
        let mut conversation = self.messages.clone();
        let open = self.running.iter().chain(self.queue.iter().map(|c| &c.id));
        for id in open {
            conversation.push(Message::tool(
                id,
                "not finished yet: the lead's shutdown request came first",
            ));
        }
        let why = if request.reason.is_empty() {
            String::new()
        } else {
            format!(" Reason: {}.", request.reason)
        };
        let ask = format!(
            "The lead asks you to shut down.{why} Call respond_shutdown now: approve=true to \
             stop (your work so far is kept), or approve=false with a reason to keep working."
        );
        let schemas = Self::offered(tools);
        let respond: Vec<Tool> = catalog::tool(catalog::RESPOND_SHUTDOWN)
            .into_iter()
            .collect();
        let told = if self.chat.constraint() == Constrain::Schema {
            format!("\n\nAs JSON:\n{}", chat::describe_tools(&respond))
        } else {
            String::new()
        };
        conversation.push(Message::user(format!("{ask}{told}")));
        let wait = match request.deadline_unix_ms {
            0 => DEFAULT_SHUTDOWN_WAIT,
            at => {
                Duration::from_millis(u64::try_from(at - now_unix_ms() - 1_000).unwrap_or_default())
            }
        }
        .max(Duration::from_millis(500));
        let until = tokio::time::Instant::now() + wait;
        let limits = self.limits().await;
        let room = limits.window.saturating_sub(u64::from(limits.max_tokens));
        // Only mechanical fitting: there is no time to summarize.
        for limit in [window::SHORT_RESULT, window::LAST_RESORT] {
            if self.tokens_of(&conversation, &schemas) <= room {
                break;
            }
            let all = conversation.len();
            window::cut_contents(&mut conversation[KEPT.min(all)..], all, limit, |m| {
                m.role == Role::Tool || limit == window::LAST_RESORT
            });
        }
        // Asked once, and reminded once if it answers without the call.
        let mut answered = None;
        for _ in 0..2 {
            let sent = window::request_bytes(&conversation, &schemas);
            let started = Instant::now();
            let reply = tokio::time::timeout_at(
                until,
                self.chat.complete_call(
                    &conversation,
                    &schemas,
                    Some(&respond),
                    Some(limits.max_tokens),
                ),
            )
            .await;
            match reply {
                Ok(Ok(reply)) => {
                    self.account(sent, &reply, started.elapsed());
                    answered = reply.tool_calls.iter().find_map(|c| {
                        match catalog::parse(&c.function.name, &c.function.arguments, tools) {
                            Ok(Request::RespondShutdown { approve, reason }) => {
                                Some((approve, reason))
                            }
                            _ => None,
                        }
                    });
                    if answered.is_some() {
                        break;
                    }
                    conversation.push(Message::assistant(&chat::Reply {
                        content: reply.content,
                        ..chat::Reply::default()
                    }));
                    conversation.push(Message::user(format!(
                        "You did not call respond_shutdown. {ask}"
                    )));
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %mesh_core::display::Escaped(&e.to_string()), "the model could not answer the shutdown request; agreeing");
                    break;
                }
                Err(_) => {
                    tracing::warn!(
                        wait_ms = wait.as_millis() as u64,
                        "the model did not answer the shutdown request in time; agreeing"
                    );
                    break;
                }
            }
        }
        match answered {
            Some((approve, reason)) => ShutdownAnswer { approve, reason },
            None => ShutdownAnswer {
                approve: true,
                reason: "agreed (the model did not call respond_shutdown)".into(),
            },
        }
    }
}

/// Drops the calls that repeat an earlier one of the same reply word for
/// word (a model looping until its reply is cut); how many were dropped.
fn dedupe(calls: &mut Vec<chat::ToolCall>) -> usize {
    let before = calls.len();
    let mut seen = std::collections::HashSet::new();
    calls.retain(|c| seen.insert((c.function.name.clone(), c.function.arguments.clone())));
    before - calls.len()
}

/// What a read or write call changes in what the driver knows.
fn effect_of(call: &crate::tools::ToolCall) -> Option<Effect> {
    use crate::tools::ToolCall as T;
    let clean = |path: &str| {
        let path = path.trim_start_matches("./").trim_end_matches('/');
        if path.is_empty() {
            ".".to_owned()
        } else {
            path.to_owned()
        }
    };
    match call {
        T::ReadFile { path } => Some(Effect::Read(clean(path))),
        T::ListDir { path } => Some(Effect::Listed(clean(path))),
        T::WriteFile { path, .. } | T::EditFile { path, .. } => Some(Effect::Wrote(clean(path))),
        T::RunCommand { .. } => Some(Effect::Ran),
        _ => None,
    }
}

/// A tool result cut to `cap` bytes, saying so.
fn capped(text: &str, cap: usize) -> String {
    if text.len() <= cap {
        return text.to_owned();
    }
    format!(
        "{}\n[cut: the result is {} bytes; only the first {cap} are shown]",
        crate::tools::truncate(text, cap),
        text.len()
    )
}

/// What the model is told about its situation unless `--system-prompt-file`
/// says otherwise.
pub fn default_system_prompt(name: &str, role: &str) -> String {
    let name = limits::cut(name, 128);
    let role = limits::cut(role, 256);
    format!(
        "You are {name}, a teammate with the role {role:?} in a team led by a lead. Paths are \
         relative to your workspace.\n\
         You start in plan mode: you may read and search, not write. Call submit_plan with a \
         summary, the steps, the files you will write and the tests. If it is rejected, revise \
         it against the feedback and submit again.\n\
         Once approved, write_file, edit_file and run_command are available for those files. \
         When the work is done, call done with a short summary."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_results_are_cut_with_a_note() {
        let text = "x".repeat(MAX_RESULT + 10);
        let cut = capped(&text, MAX_RESULT);
        assert!(cut.len() < MAX_RESULT + 100);
        assert!(cut.ends_with(&format!(
            "[cut: the result is {} bytes; only the first {MAX_RESULT} are shown]",
            MAX_RESULT + 10
        )));
        assert_eq!(capped("short", MAX_RESULT), "short");
    }
}
