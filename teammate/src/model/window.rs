//! Keeping the conversation within the model's context window: how many
//! tokens a request will take (counted by the server where it says, estimated
//! where not), and the mechanical ways to make it smaller: old tool results
//! shortened first, then older turns replaced by a summary (which the driver
//! asks the model for). Pure: no model, no I/O.

use mesh_llm::{Message, Role, Tool};

/// A tool result older than the last turn keeps at most this many bytes once
/// the conversation no longer fits.
pub(crate) const SHORT_RESULT: usize = 240;

/// What every message may keep, as the very last resort.
pub(crate) const LAST_RESORT: usize = 1_000;

/// Tokens kept free beyond the estimate, for the chat template's own markup.
const MARGIN: u64 = 64;

/// Bytes per token assumed before the server has counted anything: low,
/// so that the first requests are over-estimated rather than under.
const FIRST_BYTES_PER_TOKEN: f64 = 3.0;

/// Estimates the tokens of a request from its size, calibrated on what the
/// server counted for the last one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Estimator {
    /// Tokens per byte of the request's JSON (messages and tools).
    ratio: f64,
}

impl Default for Estimator {
    fn default() -> Self {
        Self {
            ratio: 1.0 / FIRST_BYTES_PER_TOKEN,
        }
    }
}

impl Estimator {
    /// The server counted `prompt_tokens` for a request of `bytes`.
    pub(crate) fn learn(&mut self, bytes: usize, prompt_tokens: u64) {
        if bytes > 0 && prompt_tokens > 0 {
            self.ratio = prompt_tokens as f64 / bytes as f64;
        }
    }

    /// The tokens of `bytes` of request, with a tenth to spare.
    pub(crate) fn tokens(&self, bytes: usize) -> u64 {
        (bytes as f64 * self.ratio * 1.1).ceil() as u64 + MARGIN
    }

    /// The bytes that make about `tokens` tokens (the inverse, without the
    /// spare).
    pub(crate) fn bytes_for(&self, tokens: u64) -> usize {
        (tokens as f64 / self.ratio) as usize
    }
}

/// The size of a request's JSON: its messages and the tools on offer, as
/// the chat client sends them.
pub(crate) fn request_bytes(messages: &[Message], tools: &[Tool]) -> usize {
    let messages = serde_json::to_string(messages).map_or(0, |s| s.len());
    let tools = if tools.is_empty() {
        0
    } else {
        mesh_llm::tools_json(tools).to_string().len()
    };
    messages + tools
}

/// Where the last turn begins: the last assistant message (its tool results
/// follow it), or the end when there is none. Everything from here on is
/// kept as it is for as long as possible.
pub(crate) fn last_turn(messages: &[Message]) -> usize {
    messages
        .iter()
        .rposition(|m| m.role == Role::Assistant)
        .unwrap_or(messages.len())
}

/// Cuts every tool result before `before` to [`SHORT_RESULT`] bytes, saying
/// so; whether any was cut.
pub(crate) fn shorten_results(messages: &mut [Message], before: usize) -> bool {
    cut_contents(messages, before, SHORT_RESULT, |m| m.role == Role::Tool)
}

/// Cuts the content of every message before `before` (and matching `which`)
/// to `limit` bytes; whether any was cut.
pub(crate) fn cut_contents(
    messages: &mut [Message],
    before: usize,
    limit: usize,
    which: impl Fn(&Message) -> bool,
) -> bool {
    let mut cut = false;
    for message in messages.iter_mut().take(before) {
        if which(message) && message.content.len() > limit + SHORTENED_NOTE_ROOM {
            message.content = shortened(&message.content, limit);
            cut = true;
        }
    }
    cut
}

/// Room a note of shortening takes: a text only that much over the limit is
/// left whole.
const SHORTENED_NOTE_ROOM: usize = 80;

/// `text` cut to `limit` bytes, with a note of what was left out.
pub(crate) fn shortened(text: &str, limit: usize) -> String {
    format!(
        "{}\n[shortened to save room: {} bytes in all; run the call again to see it whole]",
        crate::tools::truncate(text, limit),
        text.len()
    )
}

/// Which messages a compaction replaces: from the first message after the
/// task (`keep`: the system prompt and the task) up to the last turn. `None`
/// when there are no such messages.
pub(crate) fn compactable(messages: &[Message], keep: usize) -> Option<std::ops::Range<usize>> {
    let end = last_turn(messages);
    (end > keep).then_some(keep..end)
}

/// The replaced messages as a transcript for the summarizer, each message cut
/// to `per_message` bytes, the whole to `total` bytes (the newest end kept).
pub(crate) fn transcript(messages: &[Message], per_message: usize, total: usize) -> String {
    let mut lines = Vec::with_capacity(messages.len());
    for message in messages {
        let who = match message.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "you",
            Role::Tool => "tool result",
        };
        let mut line = format!("[{who}] {}", clip(&message.content, per_message));
        for call in &message.tool_calls {
            line.push_str(&format!(
                "\n[you called] {}({})",
                call.function.name,
                clip(&call.function.arguments, per_message)
            ));
        }
        lines.push(line);
    }
    let text = lines.join("\n");
    if text.len() <= total {
        return text;
    }
    // The newest end matters most: keep it.
    let mut start = text.len() - total;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("[...]{}", &text[start..])
}

/// `text` cut to `limit` bytes, marked with `…` where cut.
fn clip(text: &str, limit: usize) -> String {
    let kept = crate::tools::truncate(text, limit);
    if kept.len() < text.len() {
        format!("{kept}…")
    } else {
        kept.to_owned()
    }
}

/// A summary made without the model: the calls made, in order. For when the
/// model could not summarize.
pub(crate) fn mechanical_summary(messages: &[Message], total: usize) -> String {
    let mut lines = Vec::new();
    for message in messages {
        for call in &message.tool_calls {
            lines.push(format!(
                "- called {}({})",
                call.function.name,
                mesh_core::limits::cut(&call.function.arguments, 120)
            ));
        }
    }
    if lines.is_empty() {
        return "(no tool calls were made in the compacted turns)".into();
    }
    let text = lines.join("\n");
    mesh_core::limits::cut(&text, total)
}

#[cfg(test)]
mod tests {
    use mesh_llm::{FunctionCall, Reply, ToolCall};

    use super::*;

    fn call(name: &str, args: &str) -> Message {
        Message::assistant(&Reply {
            tool_calls: vec![ToolCall {
                id: format!("c-{name}"),
                kind: "function".into(),
                function: FunctionCall {
                    name: name.into(),
                    arguments: args.into(),
                },
            }],
            ..Reply::default()
        })
    }

    fn conversation(turns: usize, result: usize) -> Vec<Message> {
        let mut messages = vec![Message::system("sys"), Message::user("Your task:\nx")];
        for n in 0..turns {
            messages.push(call("read_file", &format!("{{\"path\":\"f{n}\"}}")));
            messages.push(Message::tool("c-read_file", "r".repeat(result)));
        }
        messages
    }

    #[test]
    fn the_estimate_learns_from_the_server_and_errs_high() {
        let mut estimate = Estimator::default();
        assert!(estimate.tokens(3_000) >= 1_000);
        estimate.learn(4_000, 1_000);
        let tokens = estimate.tokens(4_000);
        assert!((1_000..=1_200).contains(&tokens), "{tokens}");
        assert_eq!(estimate.bytes_for(1_000), 4_000);
        // Nothing counted teaches nothing.
        estimate.learn(0, 10);
        estimate.learn(10, 0);
        assert_eq!(estimate.tokens(4_000), tokens);
    }

    #[test]
    fn old_results_are_shortened_and_the_last_turn_is_not() {
        let mut messages = conversation(3, 2_000);
        let before = last_turn(&messages);
        assert_eq!(before, messages.len() - 2);
        assert!(shorten_results(&mut messages, before));
        for m in &messages[..before] {
            if m.role == Role::Tool {
                assert!(m.content.len() < SHORT_RESULT + 200);
                assert!(m.content.contains("2000 bytes in all"));
            }
        }
        assert_eq!(messages[messages.len() - 1].content.len(), 2_000);
        // Again: nothing more to cut.
        assert!(!shorten_results(&mut messages, before));
    }

    #[test]
    fn compaction_takes_what_lies_between_the_task_and_the_last_turn() {
        let messages = conversation(3, 10);
        assert_eq!(compactable(&messages, 2), Some(2..6));
        assert_eq!(compactable(&conversation(1, 10), 2), None);
        assert_eq!(compactable(&conversation(0, 10), 2), None);
    }

    #[test]
    fn a_transcript_keeps_its_newest_end() {
        let messages = conversation(50, 100);
        let text = transcript(&messages[2..], 50, 1_000);
        assert!(text.len() <= 1_010);
        assert!(text.starts_with("[...]"));
        assert!(text.contains("f49"), "{text}");
        let whole = transcript(&messages[2..4], 500, 10_000);
        assert!(whole.contains("[you called] read_file({\"path\":\"f0\"})"));
        assert!(whole.contains("[tool result] rrrr"));
    }

    #[test]
    fn a_mechanical_summary_lists_the_calls() {
        let messages = conversation(2, 10);
        let summary = mechanical_summary(&messages, 1_000);
        assert_eq!(
            summary,
            "- called read_file({\"path\":\"f0\"})\n- called read_file({\"path\":\"f1\"})"
        );
    }
}
