//! The task in view: every request ends with the task and what is still
//! owed (a plan; the granted files not yet written; a check that failed),
//! where a small model attends, however long the conversation grew. The
//! note is the request's last words and is not kept in the conversation:
//! the server's cached prefix stays as it was, and only the note and the
//! reply before it are read again (a few hundred tokens).

use mesh_core::limits;
use mesh_llm::{Message, Role};

use super::{owed::Owed, ModelDriver};

/// The most bytes of the task said again in every request.
const TASK_IN_VIEW: usize = 600;

/// The most bytes of a file still to be written shown as it is now, and
/// of all of them.
const FILE_IN_VIEW: usize = 1_500;
const FILES_IN_VIEW: usize = 3_000;

impl ModelDriver {
    /// The words every request ends with: the task, what is still owed,
    /// and the files still to change as they are now.
    pub(super) fn task_in_view(&self, tools: &[&'static str]) -> String {
        let mut note = format!(
            "Your task: {}\n{}",
            limits::cut(&self.task, TASK_IN_VIEW),
            self.still_to_do(tools)
        );
        if let Some(files) = self.files_in_view() {
            note.push_str(&files);
        }
        note
    }

    /// The conversation as sent: the messages, and `note` their last words.
    pub(super) fn with_in_view(&self, note: &str) -> Vec<Message> {
        let mut messages = self.messages.clone();
        match messages.last_mut() {
            Some(last) if last.role == Role::User => {
                last.content.push_str("\n\n");
                last.content.push_str(note);
            }
            _ => messages.push(Message::user(note)),
        }
        messages
    }

    /// The granted files not yet written that exist, as they are now (where
    /// small): what an edit must match.
    fn files_in_view(&self) -> Option<String> {
        let root = self.workspace.as_deref()?;
        // Only the workspace's own files (not hidden, not reached through a
        // link), as listed for this reply.
        let tree = self.known.tree.as_ref()?;
        let mut text = String::new();
        for path in self
            .known
            .granted
            .iter()
            .filter(|p| !self.known.written.contains(*p) && tree.files.contains(*p))
        {
            let Ok(content) = std::fs::read_to_string(root.join(path)) else {
                continue;
            };
            if content.len() > FILE_IN_VIEW || text.len() + content.len() > FILES_IN_VIEW {
                continue;
            }
            text.push_str(&format!(
                "\n[the file {path} now]\n{content}\n[end of {path}]"
            ));
            let lines = self
                .known
                .lines
                .get(path)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let pointed = super::task_check::lines_for_task(&self.task, lines);
            if !pointed.is_empty() {
                let pointed: Vec<String> =
                    pointed.iter().map(|l| format!("`{}`", l.trim())).collect();
                text.push_str(&format!(
                    "\nThe lines of {path} your task is about: {}",
                    pointed.join(", ")
                ));
            }
        }
        (!text.is_empty()).then_some(text)
    }

    /// What is still to do, in a line.
    fn still_to_do(&self, tools: &[&'static str]) -> String {
        let unwritten: Vec<&str> = self
            .known
            .granted
            .iter()
            .filter(|p| !self.known.written.contains(*p))
            .map(String::as_str)
            .collect();
        match self.owed(tools) {
            Some(Owed::Plan) => "Next: call submit_plan with the files your task asks you to \
                                 write."
                .into(),
            Some(Owed::Task(id)) => format!(
                "Still to do: finish task {id}, then call complete_task with task_id {id:?}."
            ),
            _ if self.known.check_failed => {
                "Your last command failed: fix what it shows, or call done.".into()
            }
            _ if !unwritten.is_empty() => {
                format!("Still to write: {}.", unwritten.join(", "))
            }
            _ if self.approved => {
                "Every file of your plan is written: call done with a short summary.".into()
            }
            _ => "When the work is done, call done with a short summary.".into(),
        }
    }
}
