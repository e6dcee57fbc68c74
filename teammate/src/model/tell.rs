//! What the model is told beyond its calls' results: the news it has not
//! heard, the files it read said again with an approval, the workspace's
//! files, and (where replies are held to a schema) the tools it may call.

use mesh_llm::{self as chat, Constrain, Message, Role, Tool};

use super::{offer::Tree, ModelDriver};

/// The most bytes of a file read while planning that the approval says
/// again ([`ModelDriver::read_again`]).
const READ_AGAIN: usize = 1024;

/// The most files of a workspace named in the first message.
const SHOWN_FILES: usize = 50;

impl ModelDriver {
    /// Tells the model what it has not heard, once no call is open.
    pub(super) fn tell(&mut self) {
        if self.queue.is_empty() && self.running.is_none() && !self.unheard.is_empty() {
            let text = std::mem::take(&mut self.unheard).join("\n\n");
            self.messages.push(Message::user(text));
        }
    }

    /// The files read before the plan was approved, as they are now, where
    /// each is at most [`READ_AGAIN`] bytes and all of them twice that; `None`
    /// if none was read or they are bigger.
    pub(super) fn read_again(&self) -> Option<String> {
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
    pub(super) fn show_workspace(&mut self) {
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
    pub(super) fn tell_tools(&mut self, callable: &[Tool]) {
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
}
