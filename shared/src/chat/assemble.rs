//! Turns what a chat-completions server sent (streamed deltas, or one whole
//! message) into one [`Reply`], tolerating the ways local servers differ from
//! OpenAI's:
//!
//! - tool-call deltas without an `index`, or with every call at index 0:
//!   calls are keyed by `id` first, then by index, and a delta that brings a
//!   new function name to a call that already has one starts a new call;
//! - a first delta without an `id` (a later one carries it), or no ids at
//!   all: missing ids are made up, unique within the reply;
//! - `arguments` sent as a JSON object instead of a string;
//! - tool-call JSON in `content` (a model the server could not parse):
//!   `{"name": .., "arguments": {..}}`, a list of those, `{"tool_calls": [..]}`,
//!   in a ```` ```json ```` fence or in `<tool_call>` tags, becomes calls.

use serde_json::Value;

use super::{FunctionCall, Reply, ToolCall};

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
    content: String,
    calls: Vec<Partial>,
}

impl Assembler {
    /// One streamed chunk (`{"choices": [{"delta": {..}}]}`); chunks without
    /// choices (usage, keep-alives) are skipped.
    pub(crate) fn push_chunk(&mut self, chunk: &Value) {
        if let Some(delta) = first_choice(chunk).and_then(|c| c.get("delta")) {
            self.push_delta(delta);
        }
    }

    /// The message of a reply that was not streamed: each of its tool calls
    /// is a call of its own, whatever its id.
    pub(crate) fn push_message(&mut self, message: &Value) {
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

    /// The reply: every call with an id and a name; tool calls found in the
    /// content taken out of it.
    pub(crate) fn finish(self) -> Reply {
        let mut content = self.content;
        let mut found: Vec<(String, String, Option<String>)> = self
            .calls
            .into_iter()
            .map(|p| (p.name, p.arguments, p.id))
            .collect();
        if found.is_empty() {
            if let Some(calls) = calls_in_content(&content) {
                found = calls.into_iter().map(|(n, a)| (n, a, None)).collect();
                content.clear();
            }
        }
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
            finish_reason: None,
            usage: None,
        }
    }
}

/// `choices[0]` of a chunk or a completion.
pub(crate) fn first_choice(value: &Value) -> Option<&Value> {
    value.get("choices")?.as_array()?.first()
}

/// Tool calls a model wrote as text, as (name, arguments JSON); `None` when
/// the content is anything else.
fn calls_in_content(content: &str) -> Option<Vec<(String, String)>> {
    let text = content.trim();
    if text.is_empty() {
        return None;
    }
    // <tool_call>{..}</tool_call>, one or more (Hermes and Qwen templates).
    if text.starts_with("<tool_call>") {
        let mut calls = Vec::new();
        for part in text.split("<tool_call>").filter(|p| !p.trim().is_empty()) {
            let inner = part.trim().strip_suffix("</tool_call>")?.trim();
            calls.extend(calls_in_json(&serde_json::from_str(inner).ok()?)?);
        }
        return (!calls.is_empty()).then_some(calls);
    }
    let unfenced = text
        .strip_prefix("```json")
        .or_else(|| text.strip_prefix("```"))
        .and_then(|t| t.strip_suffix("```"))
        .unwrap_or(text)
        .trim();
    calls_in_json(&serde_json::from_str(unfenced).ok()?)
}

/// `{"name", "arguments"}` (or `"parameters"`), `{"function": {..}}`, a list
/// of those, or `{"tool_calls": [..]}`.
fn calls_in_json(value: &Value) -> Option<Vec<(String, String)>> {
    match value {
        Value::Array(items) if !items.is_empty() => {
            let mut calls = Vec::new();
            for item in items {
                calls.extend(calls_in_json(item)?);
            }
            Some(calls)
        }
        Value::Object(map) => {
            if let Some(calls) = map.get("tool_calls") {
                return calls_in_json(calls);
            }
            if let Some(function) = map.get("function").filter(|f| f.is_object()) {
                return calls_in_json(function);
            }
            let name = map.get("name")?.as_str()?.to_owned();
            let arguments = match map.get("arguments").or_else(|| map.get("parameters")) {
                Some(Value::String(s)) => s.clone(),
                Some(args @ Value::Object(_)) => args.to_string(),
                None => "{}".into(),
                Some(_) => return None,
            };
            Some(vec![(name, arguments)])
        }
        _ => None,
    }
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
}
