//! The model driver's next step ([`crate::driver::Driver::step`]): the next
//! call of the last reply, or a new reply of the model (each pass one reply;
//! a pass that only adds a note for the model asks again), or idle when
//! there is nothing to do, the turns are used up, or the budget is spent.

use std::time::Instant;

use mesh_core::limits;
use mesh_llm::{self as chat, ChatError, Message, Tool};

use super::{calls::dedupe, window, ModelDriver, MAX_NUDGES};
use crate::driver::{DriverError, Step};

impl ModelDriver {
    /// The next step, given the tools of the current mode.
    pub(super) async fn next_step(&mut self, tools: &[&'static str]) -> Result<Step, DriverError> {
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
            if let Some(idle) = self.out_of_turns() {
                return Ok(idle);
            }
            while let Some(path) = self.next_to_write(tools) {
                if let Some(step) = self.write_whole(path, tools).await? {
                    return Ok(step);
                }
                if let Some(idle) = self.out_of_turns() {
                    return Ok(idle);
                }
            }
            let Some((reply, max_tokens)) = self.reply(&schemas, tools).await? else {
                continue;
            };
            if let Some(step) = self.take_reply(reply, max_tokens, tools) {
                return Ok(step);
            }
        }
    }

    /// Idle if the model may not reply again: `--max-turns` replies since
    /// the last message from outside, or the budget spent.
    fn out_of_turns(&mut self) -> Option<Step> {
        if self.turns >= self.max_turns {
            self.news = false;
            return Some(Step::Idle(format!(
                "stopped after {} model replies (--max-turns); a message starts it again",
                self.max_turns
            )));
        }
        if self.meter.spent() {
            self.news = false;
            return Some(Step::Idle(self.budget_reason()));
        }
        None
    }

    /// One reply of the model to the conversation, fitted to the window,
    /// with the longest reply allowed; `None` if the server could not read
    /// the model's reply (the model is told, and asked again).
    async fn reply(
        &mut self,
        schemas: &[Tool],
        tools: &[&'static str],
    ) -> Result<Option<(chat::Reply, u32)>, DriverError> {
        // What the server is decides how the tools are told.
        let limits = self.limits().await;
        self.show_workspace();
        let callable = self.callable(schemas, tools);
        self.tell_tools(&callable);
        let note = self.task_in_view(tools);
        self.fit(schemas, note.len()).await?;
        // A compaction may have taken what was told.
        self.tell_tools(&callable);
        let messages = self.with_in_view(&note);
        let sent = window::request_bytes(&messages, schemas);
        let started = Instant::now();
        let result = self
            .chat
            .complete_call(&messages, schemas, Some(&callable), Some(limits.max_tokens))
            .await;
        let reply = match result {
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
                return Ok(None);
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
        Ok(Some((reply, limits.max_tokens)))
    }

    /// What the model's `reply` (bounded by `max_tokens`) comes to: its
    /// first call's step, or idle at its end; `None` to ask again (a cut
    /// reply, a reminder of what is owed).
    pub(super) fn take_reply(
        &mut self,
        mut reply: chat::Reply,
        max_tokens: u32,
        tools: &[&'static str],
    ) -> Option<Step> {
        let cut_note = reply.cut().then(|| {
            let repeated = dedupe(&mut reply.tool_calls);
            let mut note = format!(
                "Your last reply was cut at the limit of {max_tokens} tokens; whatever it \
                 left unfinished at its end was not run."
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
            let call = self.queue.pop_front()?;
            return Some(self.step_for(call, tools));
        }
        if let Some(note) = cut_note {
            self.messages.push(Message::user(note));
            return None;
        }
        self.after_prose(reply.content.trim(), tools)
    }

    /// The model replied with `text` and no call: the turn ends, unless
    /// something is owed (then it is reminded, [`MAX_NUDGES`] times at most).
    fn after_prose(&mut self, text: &str, tools: &[&'static str]) -> Option<Step> {
        if let Some(owed) = self.owed(tools) {
            if self.nudges < MAX_NUDGES {
                self.nudges += 1;
                self.messages.push(Message::user(owed.reminder()));
                return None;
            }
            self.nudges = 0;
            self.news = false;
            self.log_use();
            return Some(Step::Idle(format!(
                "still owes {}; the model replied without it after {MAX_NUDGES} reminders: \
                 {}",
                owed.what(),
                limits::cut(text, 300)
            )));
        }
        self.news = false;
        self.log_use();
        Some(Step::Idle(if text.is_empty() {
            "done (the model replied with no text and no tool call)".into()
        } else {
            text.to_owned()
        }))
    }
}
