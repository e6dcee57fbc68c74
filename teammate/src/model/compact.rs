//! Fitting the conversation into the model's context window, the driver's
//! side of it: the mechanical steps of [`super::window`] in order, and the
//! compaction that asks the model to summarize older turns, keeping the
//! plan, the grant and the latest feedback word for word.

use std::time::Instant;

use mesh_llm::{Message, Role, Tool};

use super::{window, Limits, ModelDriver, KEPT};
use crate::driver::DriverError;

/// What is kept word for word through a compaction.
#[derive(Debug, Clone, Default)]
pub(super) struct Pinned {
    /// The last plan submitted, as the model wrote it.
    pub(super) plan: Option<String>,
    /// What the approval said.
    pub(super) grant: Option<String>,
    /// The latest rejection's feedback.
    pub(super) feedback: Option<String>,
}

/// What the model is asked when older turns must be summarized.
const SUMMARIZER_PROMPT: &str = "You compress the work log of a coding agent so that it can go \
on with its task in less room. Write at most 200 words: what was looked at and found, which \
files were written or changed, what was decided, and what remains to do. Plain sentences, no \
tool calls.";

impl ModelDriver {
    /// Makes the conversation fit the window with room for a reply and for
    /// `last_words` bytes said after it (the task in view): old tool results
    /// shortened, then older turns compacted (summarized by the model), then,
    /// as a last resort, every long message cut.
    pub(super) async fn fit(
        &mut self,
        tools: &[Tool],
        last_words: usize,
    ) -> Result<(), DriverError> {
        let limits = self.limits().await;
        let room = limits
            .window
            .saturating_sub(u64::from(limits.max_tokens))
            .saturating_sub(self.estimate.tokens(last_words));
        let fits = |me: &Self| me.tokens_of(&me.messages, tools) <= room;
        if fits(self) {
            return Ok(());
        }
        let last = window::last_turn(&self.messages);
        if window::shorten_results(&mut self.messages, last) {
            tracing::info!("old tool results shortened to fit the context window");
        }
        if fits(self) {
            return Ok(());
        }
        self.compact(limits).await;
        if fits(self) {
            return Ok(());
        }
        let all = self.messages.len();
        let rest = &mut self.messages[KEPT.min(all)..];
        window::cut_contents(rest, all, window::SHORT_RESULT, |m| m.role == Role::Tool);
        if fits(self) {
            return Ok(());
        }
        let rest = &mut self.messages[KEPT.min(all)..];
        window::cut_contents(rest, all, window::LAST_RESORT, |_| true);
        if fits(self) {
            tracing::warn!("every long message cut to fit the context window");
            return Ok(());
        }
        Err(DriverError(format!(
            "the conversation cannot fit the model's context window of {} tokens with {} kept \
             for the reply: the system prompt, the task and the tool schemas alone take about \
             {} tokens. Raise --context-window (and the server's), or lower --max-tokens",
            limits.window,
            limits.max_tokens,
            self.tokens_of(&self.messages[..KEPT.min(all)], tools)
        )))
    }

    /// Replaces the turns between the task and the last turn with a
    /// summary the model writes (or, if it cannot, a list of the calls
    /// made), followed by the plan, the grant and the latest feedback word
    /// for word.
    async fn compact(&mut self, limits: Limits) {
        let Some(range) = window::compactable(&self.messages, KEPT) else {
            return;
        };
        let old = self.messages[range.clone()].to_vec();
        let old = old.as_slice();
        let summary_max = u32::try_from(limits.window / 8)
            .unwrap_or(u32::MAX)
            .clamp(64, 512);
        let summarizer = Message::system(SUMMARIZER_PROMPT);
        let fixed = self.tokens_of(std::slice::from_ref(&summarizer), &[]);
        let transcript_tokens = limits
            .window
            .saturating_sub(u64::from(summary_max) + fixed + 128);
        let transcript = window::transcript(
            old,
            1_000,
            self.estimate.bytes_for(transcript_tokens) * 8 / 10,
        );
        let summary = if self.meter.spent() {
            None
        } else {
            let request = [summarizer, Message::user(transcript)];
            let started = Instant::now();
            let reply = self
                .chat
                .complete_within(&request, &[], Some(summary_max))
                .await;
            let sent = window::request_bytes(&request, &[]);
            match reply {
                Ok(reply) => {
                    self.account(sent, &reply, started.elapsed());
                    Some(reply.content.trim().to_owned()).filter(|s| !s.is_empty())
                }
                Err(e) => {
                    self.meter
                        .add(self.estimate.tokens(sent), 0, started.elapsed());
                    tracing::warn!(error = %mesh_core::display::Escaped(&e.to_string()), "the model could not summarize; listing the calls instead");
                    None
                }
            }
        };
        let summary = summary.unwrap_or_else(|| window::mechanical_summary(old, 2_000));
        let mut note = format!(
            "Earlier turns were compacted to fit the model's context window. What was done \
             so far:\n{summary}"
        );
        if let Some(plan) = &self.pinned.plan {
            note.push_str(&format!("\n\nThe plan you submitted last:\n{plan}"));
        }
        if let Some(grant) = &self.pinned.grant {
            note.push_str(&format!("\n\n{grant}"));
        }
        if let Some(feedback) = &self.pinned.feedback {
            note.push_str(&format!(
                "\n\nThe latest feedback on your plan:\n{feedback}"
            ));
        }
        let replaced = range.len();
        self.messages.splice(range, [Message::user(note)]);
        self.compactions += 1;
        // Told again after the note: the list told last may be gone.
        self.told_tools.clear();
        tracing::info!(
            replaced,
            compactions = self.compactions,
            "the conversation was compacted to fit the context window"
        );
    }
}
