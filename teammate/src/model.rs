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

mod calls;
mod compact;
mod content;
mod in_view;
mod observe;
mod offer;
mod owed;
mod shutdown;
mod task_check;
mod tell;
mod turn;
mod usage;
mod window;

use std::{collections::VecDeque, path::PathBuf, time::Duration};

use mesh_core::{limits, usage::Usage};
use mesh_llm::{self as chat, ChatClient, Message, Penalties, ServerKind, Tool};

pub use self::usage::Meter;
use self::{
    calls::Effect,
    compact::Pinned,
    offer::{Known, Tree},
    owed::Owed,
    window::Estimator,
};
use crate::{
    catalog,
    driver::{Driver, DriverError, Observation, ShutdownAnswer, ShutdownRequest, Step},
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
    /// Whether a plan was put back to the model since the last approval
    /// ([`task_check`]).
    plan_put_back: bool,
    /// The tools told in the conversation (a schema-constrained request
    /// carries none: see [`ModelDriver::tell_tools`]).
    told_tools: std::collections::BTreeSet<&'static str>,
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
            plan_put_back: false,
        }
    }

    /// Asks the model server what it is, once, and how replies are held to
    /// one call there ([`ChatClient::decide`]); logs it with the window.
    pub async fn decide(&mut self) -> chat::Decoding {
        self.limits().await;
        self.chat.decide().await
    }

    /// The model's name, as its server knows it.
    pub fn model(&self) -> &str {
        self.chat.model()
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
        self.known.worth_reading = match (&self.known.tree, self.chat.constraint()) {
            (Some(tree), chat::Constrain::Schema) if self.claimed.is_none() => {
                let named = task_check::named_paths(&self.task, &tree.files);
                (!named.is_empty()).then(|| {
                    named
                        .into_iter()
                        .filter(|p| tree.files.contains(p))
                        .collect()
                })
            }
            _ => None,
        };
        self.known.owes = self.owed(tools).is_some();
        self.known.lines = match (&self.workspace, self.chat.constraint()) {
            (Some(root), chat::Constrain::Schema) => {
                // Only the workspace's own files: not hidden, not reached
                // through a link.
                let files = self.known.tree.as_ref().map(|t| &t.files);
                let mut lines = offer::lines_of(
                    root,
                    self.known
                        .granted
                        .iter()
                        .filter(|p| files.is_some_and(|f| f.contains(*p))),
                );
                for lines in lines.values_mut() {
                    task_check::keep_lines_for_task(&self.task, lines);
                }
                lines
            }
            _ => Default::default(),
        };
        offer::narrow(offered, &self.known)
    }

    /// says, else the defaults.
    async fn limits(&mut self) -> Limits {
        if let Some(limits) = self.limits {
            return limits;
        }
        let (max_tokens, window) = self.asked;
        let decoding = self.chat.decide().await;
        let server = &decoding.server;
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
            server = server.kind.as_str(),
            constrain = %self.chat.constraint(),
            why = %decoding.why,
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
        self.take_in(seen);
    }

    async fn step(&mut self, tools: &[&'static str]) -> Result<Step, DriverError> {
        self.next_step(tools).await
    }

    fn take_usage(&mut self) -> Option<Usage> {
        self.meter.take_report()
    }

    async fn answer_shutdown(
        &mut self,
        request: &ShutdownRequest,
        tools: &[&'static str],
    ) -> ShutdownAnswer {
        self.answer_shutdown_request(request, tools).await
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
