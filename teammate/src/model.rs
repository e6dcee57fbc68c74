//! The model driver: a language model behind any chat-completions server
//! decides the steps. It sees exactly the tools of the current mode as
//! function schemas; each tool call of its reply becomes one step, run in
//! order through the session (and so through the gate), and its result goes
//! back as that call's answer. What happens meanwhile (a review, a message)
//! is told to it as a user message once every call of its reply is answered.
//! A reply with no tool call ends its turn: the teammate reports idle with
//! the reply's text and waits for a message.

use std::{collections::VecDeque, time::Duration};

use shared::{
    auth::now_unix_ms,
    chat::{self, ChatClient, Message},
    limits, pb,
};

use crate::{
    catalog::{self, Request},
    driver::{Driver, DriverError, Observation, ShutdownAnswer, Step},
};

/// The most bytes of one tool result the model sees.
pub const MAX_RESULT: usize = 16 * 1024;

/// How long a shutdown answer may take when the request names no deadline.
const DEFAULT_SHUTDOWN_WAIT: Duration = Duration::from_secs(30);

/// What the teammate is told about itself.
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
}

/// Drives a teammate with a language model.
#[derive(Debug)]
pub struct ModelDriver {
    chat: ChatClient,
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
}

impl ModelDriver {
    /// A driver for `brief`, talking to the model through `chat`.
    pub fn new(chat: ChatClient, brief: Brief) -> Self {
        let system = brief
            .system_prompt
            .unwrap_or_else(|| default_system_prompt(&brief.name, &brief.role));
        Self {
            chat,
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
        }
    }

    /// The conversation so far.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Answers the running call.
    fn answer(&mut self, text: &str) {
        if let Some(id) = self.running.take() {
            self.messages.push(Message::tool(&id, capped(text)));
        }
    }

    /// Tells the model what it has not heard, once no call is open.
    fn tell(&mut self) {
        if self.queue.is_empty() && self.running.is_none() && !self.unheard.is_empty() {
            let text = std::mem::take(&mut self.unheard).join("\n\n");
            self.messages.push(Message::user(text));
        }
    }

    /// The step a tool call of the model asks for.
    fn step_for(&mut self, call: chat::ToolCall, tools: &[&'static str]) -> Step {
        self.running = Some(call.id.clone());
        let name = call.function.name;
        let arguments = call.function.arguments;
        match catalog::parse(&name, &arguments, tools) {
            Ok(Request::Tool(call)) => Step::Call(call),
            Ok(Request::Submit(plan)) => Step::Submit(plan),
            Ok(Request::Send { to, text }) => Step::Send { to, text },
            Ok(Request::Task(call)) => Step::Task(call),
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
}

impl Driver for ModelDriver {
    fn observe(&mut self, seen: Observation) {
        match seen {
            Observation::Started => {}
            Observation::ToolResult(Ok(output)) => self.answer(&output),
            Observation::TaskClaimed { text, .. } => self.answer(&text),
            Observation::ToolResult(Err(error)) => self.answer(&format!("error: {error}")),
            Observation::PlanRejected { feedback } => {
                self.answer("the plan was reviewed: rejected");
                self.unheard.push(format!(
                    "Your plan was rejected. The reviewer's feedback:\n{feedback}\n\nRevise the \
                     plan to answer it and call submit_plan again. You are still in plan mode."
                ));
            }
            Observation::PlanApproved { mode, write_paths } => {
                self.answer("the plan was reviewed: approved");
                self.unheard.push(format!(
                    "Your plan was approved with mode {mode}. You may write: {}. The tools \
                     write_file, edit_file and run_command are now available. Carry out the \
                     plan, then reply with a short summary and no tool call.",
                    if write_paths.is_empty() {
                        "the files your plan names".to_owned()
                    } else {
                        write_paths.join(", ")
                    }
                ));
            }
            Observation::Message { from, text } => {
                self.unheard.push(format!("Message from {from}:\n{text}"));
                self.turns = 0;
            }
            Observation::TaskClaimable { task_id, subject } => {
                self.unheard.push(format!(
                    "Task {task_id} of the shared list can be claimed now: {subject}. \
                     Call claim_task to take it if you are free."
                ));
                self.turns = 0;
            }
            Observation::ShutdownRefused { reason } => self.unheard.push(format!(
                "You refused the lead's shutdown request ({reason}); carry on."
            )),
            // It waits for every decision and ends at an agreed shutdown.
            Observation::PlanPending { .. } | Observation::ShutdownAgreed => {}
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
            return Ok(Step::Idle("waiting for a message".into()));
        }
        if self.turns >= self.max_turns {
            self.news = false;
            return Ok(Step::Idle(format!(
                "stopped after {} model replies (--max-turns); a message starts it again",
                self.max_turns
            )));
        }
        let schemas: Vec<_> = tools.iter().filter_map(|t| catalog::tool(t)).collect();
        let reply = self
            .chat
            .complete(&self.messages, &schemas)
            .await
            .map_err(|e| DriverError(e.to_string()))?;
        // Nothing above changed the conversation in a way a retry would
        // repeat: a step cancelled while the model thinks is asked again.
        self.turns += 1;
        self.messages.push(Message::assistant(&reply));
        tracing::debug!(calls = reply.tool_calls.len(), "model replied");
        self.queue.extend(reply.tool_calls);
        match self.queue.pop_front() {
            Some(call) => Ok(self.step_for(call, tools)),
            None => {
                self.news = false;
                let text = reply.content.trim();
                Ok(Step::Idle(if text.is_empty() {
                    "done (the model replied with no text and no tool call)".into()
                } else {
                    text.to_owned()
                }))
            }
        }
    }

    async fn answer_shutdown(
        &mut self,
        request: &pb::ShutdownRequest,
        tools: &[&'static str],
    ) -> ShutdownAnswer {
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
        conversation.push(Message::user(format!(
            "The lead asks you to shut down.{why} Call respond_shutdown now: approve=true to \
             stop (your work so far is kept), or approve=false with a reason to keep working."
        )));
        let schemas: Vec<_> = tools.iter().filter_map(|t| catalog::tool(t)).collect();
        let wait = match request.deadline_unix_ms {
            0 => DEFAULT_SHUTDOWN_WAIT,
            at => {
                Duration::from_millis(u64::try_from(at - now_unix_ms() - 1_000).unwrap_or_default())
            }
        }
        .max(Duration::from_millis(500));
        let reply = tokio::time::timeout(wait, self.chat.complete(&conversation, &schemas)).await;
        let answered = match reply {
            Ok(Ok(reply)) => reply.tool_calls.into_iter().find_map(|c| {
                match catalog::parse(&c.function.name, &c.function.arguments, tools) {
                    Ok(Request::RespondShutdown { approve, reason }) => Some((approve, reason)),
                    _ => None,
                }
            }),
            Ok(Err(e)) => {
                tracing::warn!(error = %shared::display::Escaped(&e.to_string()), "the model could not answer the shutdown request; agreeing");
                None
            }
            Err(_) => {
                tracing::warn!(
                    wait_ms = wait.as_millis() as u64,
                    "the model did not answer the shutdown request in time; agreeing"
                );
                None
            }
        };
        match answered {
            Some((approve, reason)) => ShutdownAnswer { approve, reason },
            None => ShutdownAnswer {
                approve: true,
                reason: "agreed (the model did not call respond_shutdown)".into(),
            },
        }
    }
}

/// A tool result cut to [`MAX_RESULT`] bytes, saying so.
fn capped(text: &str) -> String {
    if text.len() <= MAX_RESULT {
        return text.to_owned();
    }
    format!(
        "{}\n[cut: the result is {} bytes; only the first {MAX_RESULT} are shown]",
        crate::tools::truncate(text, MAX_RESULT),
        text.len()
    )
}

/// What the model is told about its situation unless `--system-prompt-file`
/// says otherwise.
fn default_system_prompt(name: &str, role: &str) -> String {
    let name = limits::cut(name, 128);
    let role = limits::cut(role, 256);
    format!(
        "You are {name}, a teammate with the role {role:?} in a team coordinated by a lead. \
         You work in a workspace directory; every path is relative to it.\n\
         You start in plan mode: you can read_file, list_dir and search, and send_message to \
         other members, but you cannot write or run commands. Study what you need, then call \
         submit_plan with a summary, the steps, the files you will write and the tests that \
         will check the work. A reviewer approves or rejects it; after a rejection, revise the \
         plan against the feedback and submit it again.\n\
         Once a plan is approved, write_file, edit_file and run_command become available, \
         within the files the approval names. When the task is done, reply with a short \
         summary and no tool call; you will then wait for messages."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_results_are_cut_with_a_note() {
        let text = "x".repeat(MAX_RESULT + 10);
        let cut = capped(&text);
        assert!(cut.len() < MAX_RESULT + 100);
        assert!(cut.ends_with(&format!(
            "[cut: the result is {} bytes; only the first {MAX_RESULT} are shown]",
            MAX_RESULT + 10
        )));
        assert_eq!(capped("short"), "short");
    }
}
