//! Turns what a chat-completions server sent (streamed chunks, or one whole
//! completion) into one [`Reply`], tolerating the ways local servers differ
//! from OpenAI's:
//!
//! - tool-call deltas without an `index`, or with every call at index 0:
//!   calls are keyed by `id` first, then by index, and a delta that brings a
//!   new function name to a call that already has one starts a new call;
//! - a first delta without an `id` (a later one carries it), or no ids at
//!   all: missing ids are made up, unique within the reply;
//! - `arguments` sent as a JSON object instead of a string;
//! - tool calls written as text in `content` (a model whose calls the server
//!   could not parse), found by [`written`]: any number of them, in order, as
//!   `{"name": .., "arguments": {..}}` (or `"parameters"`),
//!   `{"function": {..}}`, a list of those or `{"tool_calls": [..]}`; one per
//!   line, one after another, in ```` ```json ````/```` ``` ````/
//!   ```` ```tool_call ```` fences or in `<tool_call>` tags, with prose
//!   around them. The calls are taken out and the prose stays the reply's
//!   content; a JSON object that is not a call stays text. Structured
//!   `tool_calls`, when the server sent any, win: the content is then text.
//!
//! It also keeps the last `finish_reason` of `choices[0]` and the server's
//! `usage` (in a last chunk with no choices when streamed with
//! `stream_options.include_usage`, at the top of a whole completion). A reply
//! cut at the token limit (`length`) never yields half a call: a structured
//! call whose arguments are not JSON is dropped, and an unfinished call at
//! the end of the content is dropped from the text.

mod written;

#[cfg(test)]
mod fixtures;

use serde_json::Value;

use super::{FunctionCall, Reply, ToolCall, Usage};

/// A call being put together from deltas.
#[derive(Debug, Default)]
struct Partial {
    index: Option<u64>,
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Collects the deltas of one reply.
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    /// The text, joined from its deltas.
    content: String,
    /// The structured tool calls, in the order they began.
    calls: Vec<Partial>,
    /// Why the reply ended: the last `finish_reason` seen.
    finish_reason: Option<String>,
    /// What the call used, where the server said.
    usage: Option<Usage>,
}

impl Assembler {
    /// One streamed chunk (`{"choices": [{"delta": {..}, "finish_reason"}]}`);
    /// a chunk without choices may carry the usage; keep-alives are skipped.
    pub(crate) fn push_chunk(&mut self, chunk: &Value) {
        self.note_usage(chunk);
        if let Some(choice) = first_choice(chunk) {
            self.note_finish(choice);
            if let Some(delta) = choice.get("delta") {
                self.push_delta(delta);
            }
        }
    }

    /// A whole completion that was not streamed: its `choices[0].message`,
    /// `finish_reason` and `usage`.
    pub(crate) fn push_completion(&mut self, completion: &Value) {
        self.note_usage(completion);
        if let Some(choice) = first_choice(completion) {
            self.note_finish(choice);
            if let Some(message) = choice.get("message") {
                self.push_message(message);
            }
        }
    }

    /// The message of a reply that was not streamed: each of its tool calls
    /// is a call of its own, whatever its id.
    fn push_message(&mut self, message: &Value) {
        if let Some(text) = message.get("content").and_then(Value::as_str) {
            self.content.push_str(text);
        }
        if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                self.calls.push(Partial::default());
                self.push_call(call);
            }
        }
    }

    /// A choice's `finish_reason`, when it has one.
    fn note_finish(&mut self, choice: &Value) {
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
        }
    }

    /// `usage`, when it counts both the prompt and the completion.
    fn note_usage(&mut self, value: &Value) {
        let Some(usage) = value.get("usage") else {
            return;
        };
        let count = |key: &str| usage.get(key).and_then(Value::as_u64);
        if let (Some(prompt_tokens), Some(completion_tokens)) =
            (count("prompt_tokens"), count("completion_tokens"))
        {
            // llama.cpp and OpenAI say the cached share here; llama.cpp
            // also in its own `timings.cache_n`.
            let cached_tokens = usage
                .pointer("/prompt_tokens_details/cached_tokens")
                .or_else(|| value.pointer("/timings/cache_n"))
                .and_then(Value::as_u64)
                .unwrap_or(0)
                .min(prompt_tokens);
            self.usage = Some(Usage {
                prompt_tokens,
                completion_tokens,
                cached_tokens,
            });
        }
    }

    /// One streamed delta.
    fn push_delta(&mut self, message: &Value) {
        if let Some(text) = message.get("content").and_then(Value::as_str) {
            self.content.push_str(text);
        }
        if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                self.push_call(call);
            }
        }
    }

    fn push_call(&mut self, call: &Value) {
        let index = call.get("index").and_then(Value::as_u64);
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty());
        let function = call.get("function");
        let name = function
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let arguments = match function.and_then(|f| f.get("arguments")) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        let at = match self.calls.last() {
            // A whole message's call, just started.
            Some(p) if p.index.is_none() && p.id.is_none() && p.name.is_empty() => {
                self.calls.len() - 1
            }
            _ => self.slot(index, id, name),
        };
        let partial = &mut self.calls[at];
        if partial.id.is_none() {
            partial.id = id.map(str::to_owned);
        }
        partial.name.push_str(name);
        partial.arguments.push_str(&arguments);
    }

    /// Which call a delta belongs to, starting a new one where it begins one.
    fn slot(&mut self, index: Option<u64>, id: Option<&str>, name: &str) -> usize {
        if let Some(id) = id {
            if let Some(at) = self.calls.iter().position(|p| p.id.as_deref() == Some(id)) {
                return at;
            }
        }
        let candidate = match index {
            Some(n) => self.calls.iter().rposition(|p| p.index == Some(n)),
            None => self.calls.len().checked_sub(1),
        };
        if let Some(at) = candidate {
            let partial = &self.calls[at];
            // A new id on a call that has one, or a second name: a new call
            // (servers that put every call at index 0).
            let new_id = id.is_some() && partial.id.is_some();
            let new_name = !name.is_empty() && !partial.name.is_empty();
            if !new_id && !new_name {
                return at;
            }
        }
        self.calls.push(Partial {
            index,
            ..Partial::default()
        });
        self.calls.len() - 1
    }

    /// The reply: every call with an id and a name; tool calls written in the
    /// content taken out of it. In a reply cut at the token limit, a
    /// structured call whose arguments are not JSON is dropped.
    pub(crate) fn finish(self) -> Reply {
        let cut = self.finish_reason.as_deref() == Some("length");
        let (content, found): (String, Vec<(String, String, Option<String>)>) =
            if self.calls.is_empty() {
                let written = written::split(&self.content, cut);
                let calls = written.calls.into_iter().map(|(n, a)| (n, a, None));
                (written.text, calls.collect())
            } else {
                let calls = self
                    .calls
                    .into_iter()
                    .filter(|p| !cut || is_json(&p.arguments))
                    .map(|p| (p.name, p.arguments, p.id));
                (self.content, calls.collect())
            };
        let mut tool_calls: Vec<ToolCall> = Vec::with_capacity(found.len());
        for (n, (name, arguments, id)) in found.into_iter().enumerate() {
            let id = match id {
                Some(id) if !tool_calls.iter().any(|c| c.id == id) => id,
                _ => format!(
                    "call_{n}_{}",
                    &uuid::Uuid::new_v4().simple().to_string()[..8]
                ),
            };
            tool_calls.push(ToolCall {
                id,
                kind: "function".into(),
                function: FunctionCall { name, arguments },
            });
        }
        Reply {
            content,
            tool_calls,
            finish_reason: self.finish_reason,
            usage: self.usage,
        }
    }
}

/// Whether `text` is one whole JSON value.
fn is_json(text: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

/// `choices[0]` of a chunk or a completion.
pub(crate) fn first_choice(value: &Value) -> Option<&Value> {
    value.get("choices")?.as_array()?.first()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn assemble(chunks: &[Value]) -> Reply {
        let mut a = Assembler::default();
        for chunk in chunks {
            a.push_chunk(chunk);
        }
        a.finish()
    }

    fn delta(calls: Value) -> Value {
        json!({"choices": [{"delta": {"tool_calls": calls}}]})
    }

    fn names_and_args(reply: &Reply) -> Vec<(&str, &str)> {
        reply
            .tool_calls
            .iter()
            .map(|c| (c.function.name.as_str(), c.function.arguments.as_str()))
            .collect()
    }

    #[test]
    fn openai_deltas_are_joined_by_index() {
        let reply = assemble(&[
            json!({"choices": [{"delta": {"role": "assistant", "content": "Let me "}}]}),
            json!({"choices": [{"delta": {"content": "look."}}]}),
            delta(
                json!([{"index": 0, "id": "a", "function": {"name": "read_file", "arguments": ""}}]),
            ),
            delta(json!([{"index": 0, "function": {"arguments": "{\"path\":"}}])),
            delta(
                json!([{"index": 1, "id": "b", "function": {"name": "list_dir", "arguments": "{}"}}]),
            ),
            delta(json!([{"index": 0, "function": {"arguments": "\"a.rs\"}"}}])),
            json!({"choices": [], "usage": {"total_tokens": 3}}),
        ]);
        assert_eq!(reply.content, "Let me look.");
        assert_eq!(
            names_and_args(&reply),
            [("read_file", "{\"path\":\"a.rs\"}"), ("list_dir", "{}")]
        );
        assert_eq!(reply.tool_calls[0].id, "a");
        assert_eq!(reply.tool_calls[1].id, "b");
    }

    #[test]
    fn every_call_at_index_zero_is_split_by_id_or_name() {
        let by_id = assemble(&[
            delta(
                json!([{"index": 0, "id": "a", "function": {"name": "read_file", "arguments": "{\"path\":\"x\"}"}}]),
            ),
            delta(
                json!([{"index": 0, "id": "b", "function": {"name": "read_file", "arguments": "{\"path\":\"y\"}"}}]),
            ),
        ]);
        assert_eq!(by_id.tool_calls.len(), 2);
        assert_eq!(by_id.tool_calls[1].function.arguments, "{\"path\":\"y\"}");
        let by_name = assemble(&[
            delta(json!([{"function": {"name": "read_file", "arguments": "{\"path\":"}}])),
            delta(json!([{"function": {"arguments": "\"x\"}"}}])),
            delta(json!([{"function": {"name": "list_dir", "arguments": "{}"}}])),
        ]);
        assert_eq!(
            names_and_args(&by_name),
            [("read_file", "{\"path\":\"x\"}"), ("list_dir", "{}")]
        );
        assert_ne!(by_name.tool_calls[0].id, by_name.tool_calls[1].id);
        assert!(by_name.tool_calls.iter().all(|c| !c.id.is_empty()));
    }

    #[test]
    fn an_id_that_comes_late_is_kept_and_missing_ids_are_made_up() {
        let reply = assemble(&[
            delta(
                json!([{"index": 0, "function": {"name": "search", "arguments": "{\"pattern\""}}]),
            ),
            delta(json!([{"index": 0, "id": "late", "function": {"arguments": ":\"fn\"}"}}])),
        ]);
        assert_eq!(reply.tool_calls.len(), 1);
        assert_eq!(reply.tool_calls[0].id, "late");
        assert_eq!(
            reply.tool_calls[0].function.arguments,
            "{\"pattern\":\"fn\"}"
        );
    }

    #[test]
    fn a_whole_message_with_object_arguments() {
        let mut a = Assembler::default();
        a.push_message(&json!({"content": null, "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": "write_file", "arguments": {"path": "a", "content": "b"}}},
            {"id": "x", "type": "function", "function": {"name": "list_dir", "arguments": "{}"}}
        ]}));
        let reply = a.finish();
        assert_eq!(reply.tool_calls.len(), 2);
        assert_eq!(reply.tool_calls[0].id, "x");
        assert_ne!(reply.tool_calls[1].id, "x", "duplicate ids are made unique");
        let args: Value =
            serde_json::from_str(&reply.tool_calls[0].function.arguments).expect("json");
        assert_eq!(args, json!({"path": "a", "content": "b"}));
    }

    #[test]
    fn tool_calls_written_as_content_become_calls() {
        for content in [
            r#"{"name": "read_file", "arguments": {"path": "a.rs"}}"#,
            "```json\n{\"name\": \"read_file\", \"parameters\": {\"path\": \"a.rs\"}}\n```",
            "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.rs\"}}\n</tool_call>",
            r#"{"tool_calls": [{"function": {"name": "read_file", "arguments": "{\"path\": \"a.rs\"}"}}]}"#,
        ] {
            let mut a = Assembler::default();
            a.push_message(&json!({ "content": content }));
            let reply = a.finish();
            assert_eq!(reply.content, "", "{content}");
            assert_eq!(reply.tool_calls.len(), 1, "{content}");
            assert_eq!(reply.tool_calls[0].function.name, "read_file");
            let args: Value =
                serde_json::from_str(&reply.tool_calls[0].function.arguments).expect("json");
            assert_eq!(args, json!({"path": "a.rs"}), "{content}");
        }
        for text in [
            "Done: I wrote the file.",
            "{\"answer\": 42}",
            "[1, 2]",
            "<tool_call>oops",
        ] {
            let mut a = Assembler::default();
            a.push_message(&json!({ "content": text }));
            let reply = a.finish();
            assert_eq!(reply.content, text);
            assert!(reply.tool_calls.is_empty(), "{text}");
        }
    }

    #[test]
    fn finish_reason_and_usage_are_kept() {
        let streamed = assemble(&[
            json!({"choices": [{"delta": {"content": "Hi"}, "finish_reason": null}]}),
            json!({"choices": [{"delta": {}, "finish_reason": "stop"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}}),
        ]);
        assert_eq!(streamed.content, "Hi");
        assert_eq!(streamed.finish_reason.as_deref(), Some("stop"));
        assert_eq!(
            streamed.usage,
            Some(Usage {
                prompt_tokens: 12,
                completion_tokens: 3,
                cached_tokens: 0,
            })
        );
        let mut a = Assembler::default();
        a.push_completion(&json!({
            "choices": [{"message": {"content": "Hello"}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 1}
        }));
        let whole = a.finish();
        assert_eq!(whole.content, "Hello");
        assert!(whole.cut());
        assert_eq!(whole.usage.map(|u| u.prompt_tokens), Some(7));
        // A usage that does not count both is not a usage.
        let partial = assemble(&[json!({"choices": [], "usage": {"total_tokens": 3}})]);
        assert_eq!(partial.usage, None);
    }

    #[test]
    fn a_cut_reply_drops_a_structured_call_whose_arguments_are_not_json() {
        let chunks = [
            json!({"choices": [{"delta": {"content": "{\"name\": \"list_dir\", \"arguments\": {}}"}}]}),
            delta(
                json!([{"index": 0, "id": "a", "function": {"name": "read_file", "arguments": "{\"path\": \"a\"}"}}]),
            ),
            delta(
                json!([{"index": 1, "id": "b", "function": {"name": "write_file", "arguments": "{\"path\": \"b\", \"con"}}]),
            ),
        ];
        let mut cut = chunks.to_vec();
        cut.push(json!({"choices": [{"delta": {}, "finish_reason": "length"}]}));
        let reply = assemble(&cut);
        assert_eq!(names_and_args(&reply), [("read_file", "{\"path\": \"a\"}")]);
        // Structured calls win: the content stays text.
        assert_eq!(reply.content, "{\"name\": \"list_dir\", \"arguments\": {}}");
        // Not cut, the call is passed on as the model wrote it.
        assert_eq!(assemble(&chunks).tool_calls.len(), 2);
    }

    #[test]
    fn calls_written_in_a_streamed_content_with_words_around_them() {
        let reply = assemble(&[
            json!({"choices": [{"delta": {"content": "Reading both.\n{\"name\": \"read_file\", "}}]}),
            json!({"choices": [{"delta": {"content": "\"arguments\": {\"path\": \"a\"}}\n{\"name\": \"read_"}}]}),
            json!({"choices": [{"delta": {"content": "file\", \"arguments\": {\"path\": \"b\"}}\nDone."}}]}),
            json!({"choices": [{"delta": {}, "finish_reason": "stop"}]}),
        ]);
        assert_eq!(
            names_and_args(&reply),
            [
                ("read_file", "{\"path\":\"a\"}"),
                ("read_file", "{\"path\":\"b\"}")
            ]
        );
        assert_eq!(reply.content, "Reading both.\n\nDone.");
        assert_ne!(reply.tool_calls[0].id, reply.tool_calls[1].id);
    }
}
