//! A granted file written in a call of its own. Where the replies are held
//! to a schema (a local server, a small model), a file of the approved plan
//! is not left to a tool call whose JSON must carry the whole file escaped:
//! the model is asked for the file's new content as plain text, with the
//! task, the files the task names and the file as it is now in view, and
//! what it answers is written through the session (and so the gate) as a
//! `write_file` call, told in the conversation as if the model had made it.
//! Plain text is what a small coding model writes best; the suite
//! (`bench --model-suite`) measured it (docs/models.md).
//!
//! Each file is asked for so once; a reply that is cut, empty or the file
//! unchanged leaves the file to the model's own tool calls, and a reply
//! that calls a tool is taken as any reply.

use std::{path::Path, time::Instant};

use mesh_core::limits;
use mesh_llm::{self as chat, ChatError, Message};

use super::{offer, task_check, window, ModelDriver};
use crate::driver::{DriverError, Step};

/// The largest file (bytes) asked for whole; a larger one is left to the
/// model's edits.
pub(super) const WHOLE_FILE: usize = 4 * 1024;

/// The longest answer for a new file, in tokens.
const NEW_FILE_TOKENS: u32 = 512;

/// The most tokens a whole file's answer may add to it, and the longest
/// answer that is only what a task adds.
const ADDED_TOKENS: u32 = 256;

/// The most bytes of the task's other files shown beside it.
const CONTEXT: usize = 4 * 1024;

/// What the model answered a question asked aside.
enum Aside {
    /// Text (the reply was not cut).
    Text(String),
    /// A tool call: taken as its reply to the conversation.
    Call(chat::Reply),
    /// Nothing usable: cut, or not read by the server.
    Nothing,
}

impl ModelDriver {
    /// The next file of the approved plan to ask for as text: granted, not
    /// yet written nor asked for, new or small, in the plan's order.
    pub(super) fn next_to_write(&self, tools: &[&'static str]) -> Option<String> {
        if self.chat.constraint() != chat::Constrain::Schema
            || !tools.contains(&crate::tools::WRITE_FILE)
            || self.claimed.is_some()
            || !self.queue.is_empty()
        {
            return None;
        }
        let root = self.workspace.as_deref()?;
        let tree = self.known.tree.as_ref()?;
        let order = self
            .planned
            .iter()
            .chain(&self.known.granted)
            .filter(|p| self.known.granted.contains(*p));
        order
            .filter(|p| {
                !self.known.written.contains(*p)
                    && !self.known.asked_whole.contains(*p)
                    && offer::literal(p)
            })
            .find(|p| match std::fs::symlink_metadata(root.join(p)) {
                // Only the workspace's own files (listed: not hidden, not
                // reached through a link), and small.
                Ok(meta) => {
                    tree.files.contains(*p) && meta.is_file() && meta.len() <= WHOLE_FILE as u64
                }
                Err(e) => e.kind() == std::io::ErrorKind::NotFound,
            })
            .cloned()
    }

    /// Asks the model for `path`'s new content; the `write_file` step that
    /// writes it, or `None` to leave the file to the model's tool calls.
    pub(super) async fn write_whole(
        &mut self,
        path: String,
        tools: &[&'static str],
    ) -> Result<Option<Step>, DriverError> {
        self.known.asked_whole.insert(path.clone());
        let Some(root) = self.workspace.clone() else {
            return Ok(None);
        };
        let max_tokens = self.limits().await.max_tokens;
        let named = self
            .known
            .tree
            .as_ref()
            .map(|tree| task_check::named_paths(&self.task, &tree.files))
            .unwrap_or_default();
        let now = read_small(&root, &path);
        let only_read = task_check::read_only(&self.task, &named);
        if now.is_some()
            && (only_read.contains(&path) || (!named.is_empty() && !named.contains(&path)))
        {
            // A file the task only reads, or does not name, planned all the
            // same (the plan was put back once): left as it is.
            tracing::info!(path = %path, "left as it is: the task does not ask to change it");
            self.kept(path);
            return Ok(None);
        }
        let mut shown = String::new();
        for other in named.iter().filter(|p| **p != path) {
            if let Some(text) = read_small(&root, other) {
                if shown.len() + text.len() <= CONTEXT {
                    shown.push_str(&fenced(other, &text));
                }
            }
        }
        let task = limits::cut(&self.task, 600);
        let ask = match &now {
            Some(text) => format!(
                "{shown}{}\n{task}\nReply with the whole new {path} in one ``` block.",
                fenced(&path, text)
            ),
            None => format!("{shown}\n{task}\nReply with the whole {path} in one ``` block."),
        };
        // A whole file is about a token for every three bytes: room for it
        // and what the task adds, no more (a small model may run on).
        let bound = now.as_ref().map_or(NEW_FILE_TOKENS, |t| {
            u32::try_from(t.len() / 2)
                .unwrap_or(u32::MAX)
                .saturating_add(ADDED_TOKENS)
        });
        let mut content = match self.ask_aside(ask, bound.min(max_tokens)).await? {
            Aside::Text(text) => content_of(&text, &path),
            Aside::Call(reply) => return Ok(self.take_reply(reply, max_tokens, tools)),
            Aside::Nothing => None,
        };
        if let (Some(new), Some(old)) = (&mut content, &now) {
            if !task_check::removes(&self.task) {
                *new = with_head_kept(old, new);
            }
        }
        let adds = task_check::adds(&self.task) && !task_check::removes(&self.task);
        let unchanged = content.as_deref().map(str::trim_end) == now.as_deref().map(str::trim_end);
        if let Some(old) = now
            .as_deref()
            .filter(|old| unchanged || (adds && !keeps_most_lines(old, content.as_deref())))
        {
            // The whole file came back as it was, or, where the task adds
            // something, without much of it: only what it adds is asked
            // for, and appended.
            content = None;
            if adds {
                // With the file in view, then (a small model copies a file
                // it is shown) without it.
                for shown in [fenced(&path, old), String::new()] {
                    let ask = format!(
                        "{shown}\n{task}\nReply with only the new text to add to {path}, in \
                         one ``` block."
                    );
                    content = match self.ask_aside(ask, ADDED_TOKENS.min(max_tokens)).await? {
                        Aside::Text(text) => content_of(&text, &path)
                            .filter(|added| !copied(old, added))
                            .map(|added| format!("{}\n\n{added}", old.trim_end())),
                        Aside::Call(reply) => return Ok(self.take_reply(reply, max_tokens, tools)),
                        Aside::Nothing => None,
                    };
                    if content.is_some() {
                        break;
                    }
                }
            }
        }
        tracing::info!(
            path = %path,
            written = content.is_some(),
            "asked the model for a file's content"
        );
        let Some(content) = content else {
            return Ok(None);
        };
        let call = chat::ToolCall {
            id: format!("whole-{}", self.known.asked_whole.len()),
            kind: "function".into(),
            function: chat::FunctionCall {
                name: crate::tools::WRITE_FILE.into(),
                arguments: serde_json::json!({ "path": path, "content": content }).to_string(),
            },
        };
        self.messages.push(Message::assistant(&chat::Reply {
            tool_calls: vec![call.clone()],
            ..Default::default()
        }));
        Ok(Some(self.step_for(call, tools)))
    }

    /// `path` is left as it is: nothing of it is owed.
    fn kept(&mut self, path: String) {
        self.known.written.insert(path);
        if self.known.all_written() {
            self.unwritten = None;
        }
    }

    /// One question asked aside from the conversation, in a conversation
    /// of its own (the server keeps the main one's cached prefix in
    /// another slot): the model's answer.
    async fn ask_aside(&mut self, ask: String, max_tokens: u32) -> Result<Aside, DriverError> {
        let messages = [Message::system(ASIDE_SYSTEM), Message::user(ask)];
        let sent = window::request_bytes(&messages, &[]);
        let started = Instant::now();
        let reply = match self
            .chat
            .complete_call(&messages, &[], None, Some(max_tokens))
            .await
        {
            Ok(reply) => reply,
            Err(ChatError::Format { .. }) => return Ok(Aside::Nothing),
            Err(e) => return Err(DriverError(e.to_string())),
        };
        self.account(sent, &reply, started.elapsed());
        self.turns += 1;
        Ok(if !reply.tool_calls.is_empty() {
            Aside::Call(reply)
        } else if reply.cut() {
            Aside::Nothing
        } else {
            Aside::Text(reply.content)
        })
    }
}

/// The system prompt of a question asked aside: a small coding model
/// writes a file best as the plain assistant it was trained as.
const ASIDE_SYSTEM: &str = "You are a helpful coding assistant.";

/// A file shown to the model: its path, then its text fenced.
fn fenced(path: &str, text: &str) -> String {
    format!("{path}:\n```\n{}\n```\n", text.trim_end())
}

/// Whether `added` is only `old`'s own lines (a copy, not an addition):
/// an addition may well repeat a line such as `}` or `return x;`.
fn copied(old: &str, added: &str) -> bool {
    let old: std::collections::HashSet<&str> = old.lines().map(str::trim).collect();
    added
        .lines()
        .map(str::trim)
        .all(|l| l.is_empty() || old.contains(l))
}

/// Whether `new` holds at least four in five of `old`'s non-blank lines
/// (a task that adds may still change a line, such as an export list).
fn keeps_most_lines(old: &str, new: Option<&str>) -> bool {
    let Some(new) = new else { return false };
    let new: std::collections::HashSet<&str> = new.lines().map(str::trim_end).collect();
    let lines: Vec<&str> = old
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect();
    lines.iter().filter(|l| new.contains(*l)).count() * 5 >= lines.len() * 4
}

/// A small model's whole file often begins partway into the file: the
/// lines above its first line, none of which it wrote elsewhere, are put
/// back.
pub(super) fn with_head_kept(old: &str, new: &str) -> String {
    let old_lines: Vec<&str> = old.lines().collect();
    let Some(first) = new.lines().find(|l| !l.trim().is_empty()) else {
        return new.to_owned();
    };
    let Some(at) = old_lines.iter().position(|l| *l == first) else {
        return new.to_owned();
    };
    let head = &old_lines[..at];
    let new_lines: std::collections::HashSet<&str> = new.lines().collect();
    if head.iter().all(|l| l.trim().is_empty())
        || head
            .iter()
            .any(|l| !l.trim().is_empty() && new_lines.contains(l))
    {
        return new.to_owned();
    }
    format!("{}\n{}", head.join("\n"), new.trim_start_matches('\n'))
}

/// A workspace file's text, where it is a file of its own and small.
fn read_small(root: &Path, path: &str) -> Option<String> {
    let real = root.join(path);
    let meta = std::fs::symlink_metadata(&real).ok()?;
    if !meta.is_file() || meta.len() > WHOLE_FILE as u64 {
        return None;
    }
    std::fs::read_to_string(real).ok()
}

/// The file's content in a reply: the first fenced block (a tool call
/// written instead, writing `path`, gives its `content`), else the whole
/// reply; ending with a newline. `None` if it is empty.
pub(super) fn content_of(reply: &str, path: &str) -> Option<String> {
    let text = reply.trim();
    if let Ok(serde_json::Value::Object(object)) = serde_json::from_str(text) {
        // A call written out (`{"name": "write_file", "arguments": {..}}`)
        // or the file as an object (`{"path"|"name": .., "content": ..}`).
        let args = match object.get("arguments") {
            Some(serde_json::Value::Object(args)) => args,
            _ => &object,
        };
        let named = ["path", "name", "file"]
            .iter()
            .find_map(|k| args.get(*k).and_then(|v| v.as_str()));
        if named.is_some_and(|n| n != path) {
            return None;
        }
        let content = args.get("content").and_then(|c| c.as_str())?;
        return if content.trim_start().starts_with("```") {
            content_of(content, path)
        } else {
            whole(content)
        };
    }
    let body = match text.find("```") {
        Some(start) => {
            let after = &text[start + 3..];
            // The fence's own line (a language's name) is not the file's.
            let (fence, body) = after.split_once('\n').unwrap_or((after, ""));
            // A markdown file may hold fences of its own: to the last.
            let close = if matches!(fence.trim(), "markdown" | "md") {
                body.rfind("\n```")
            } else {
                body.find("\n```")
            };
            match close.or_else(|| body.strip_prefix("```").map(|_| 0)) {
                Some(end) => &body[..end],
                None => body.trim_end_matches('`'),
            }
        }
        None => text,
    };
    whole(body)
}

/// `text` as a file: `None` if blank, else ending with one newline.
fn whole(text: &str) -> Option<String> {
    let text = text.trim_end();
    let text = text.trim_start_matches('\n');
    (!text.trim().is_empty()).then(|| format!("{text}\n"))
}

#[cfg(test)]
mod tests {
    use super::{content_of, copied, keeps_most_lines, with_head_kept};

    #[test]
    fn an_addition_may_repeat_a_line_but_not_be_only_old_lines() {
        let old = "function inc() {\n  count++;\n  return count;\n}\n";
        let added = "function dec() {\n  count--;\n  return count;\n}\n";
        assert!(!copied(old, added));
        assert!(copied(old, "  return count;\n}\n"));
    }

    #[test]
    fn a_whole_file_keeps_most_lines_at_four_in_five() {
        let old = "a\nb\n\nc\nd\ne\n";
        assert!(keeps_most_lines(old, Some("a\nb\nc\nd\nE\nf\n")));
        assert!(!keeps_most_lines(old, Some("a\nb\nc\nf\n")));
        assert!(!keeps_most_lines(old, None));
    }

    #[test]
    fn the_first_fenced_block_is_the_content() {
        let reply = "Here it is:\n```python\ndef f():\n    return 1\n```\nDone.";
        assert_eq!(
            content_of(reply, "a.py").as_deref(),
            Some("def f():\n    return 1\n")
        );
        assert_eq!(
            content_of("```\nhello world\n```", "hello.txt").as_deref(),
            Some("hello world\n")
        );
        // A block never closed (the reply stopped) keeps what it has.
        assert_eq!(
            content_of("```md\n# Title\n", "a.md").as_deref(),
            Some("# Title\n")
        );
    }

    #[test]
    fn a_reply_without_a_fence_is_the_content_and_a_blank_one_is_none() {
        assert_eq!(
            content_of("  hello world  \n", "h.txt").as_deref(),
            Some("hello world\n")
        );
        assert_eq!(content_of(" \n ", "h.txt"), None);
        assert_eq!(content_of("```\n```", "h.txt"), None);
    }

    #[test]
    fn a_tool_call_written_instead_gives_its_content_for_the_same_path() {
        let call = r#"{"name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}"#;
        assert_eq!(content_of(call, "a.txt").as_deref(), Some("x\n"));
        assert_eq!(content_of(call, "b.txt"), None);
        let bare = r#"{"path": "a.txt", "content": ""}"#;
        assert_eq!(content_of(bare, "a.txt"), None);
        // The small model's own shape: the file's name and a fenced content.
        let object = r#"{"name": "a.toml", "content": "```\n[package]\n```"}"#;
        assert_eq!(content_of(object, "a.toml").as_deref(), Some("[package]\n"));
    }

    #[test]
    fn a_markdown_block_runs_to_its_last_fence() {
        let reply = "```markdown\n# API\n\n```python\nf()\n```\n```";
        assert_eq!(
            content_of(reply, "API.md").as_deref(),
            Some("# API\n\n```python\nf()\n```\n")
        );
    }

    #[test]
    fn a_whole_file_that_starts_partway_gets_its_head_back() {
        let old = "def a():\n    pass\n\n\ndef b():\n    return 1\n";
        let new = "def b():\n    return 2\n";
        assert_eq!(
            with_head_kept(old, new),
            "def a():\n    pass\n\n\ndef b():\n    return 2\n"
        );
        // From the first line, or with the head written elsewhere: as it is.
        assert_eq!(
            with_head_kept(old, "def a():\n    pass\n"),
            "def a():\n    pass\n"
        );
        let moved = "def b():\n    return 1\n\ndef a():\n    pass\n";
        assert_eq!(with_head_kept(old, moved), moved);
    }
}
