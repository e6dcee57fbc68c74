//! The steps the model's calls ask for: each call of a reply checked (a
//! repeat, `done` while something is owed, a plan without files, a useless
//! edit or amendment) and made a [`Step`], with what it will change in what
//! the driver knows ([`Effect`]).

use mesh_core::limits;
use mesh_llm::{self as chat, Message};

use super::{task_check, ModelDriver};
use crate::{
    catalog::{self, Request},
    driver::{Step, TaskCall},
};

/// What a call changes in what the driver knows, once it succeeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Effect {
    Read(String),
    Listed(String),
    Wrote(String),
    /// A command ran (its output says how it went).
    Ran,
}

impl ModelDriver {
    /// The step a tool call of the model asks for.
    pub(super) fn step_for(&mut self, call: chat::ToolCall, tools: &[&'static str]) -> Step {
        self.running = Some(call.id.clone());
        let name = call.function.name;
        self.calling = Some(name.clone());
        let arguments = call.function.arguments;
        self.writing = false;
        self.effect = None;
        if name == catalog::DONE {
            return self.end(arguments, tools);
        }
        // A read again is only a wasted turn (and the grammar offers none);
        // a call with an effect again, while nothing changed, is a loop.
        let reads = crate::tools::READ_TOOLS.contains(&name.as_str());
        let step = if reads || self.made.insert((name.clone(), arguments.clone())) {
            self.step_of(name, arguments, tools)
        } else {
            Step::Invalid {
                tool: name,
                args_json: arguments,
                problem: "you made this very call already and nothing changed since: its result \
                          stands. Do something else, or call done if the work is done."
                    .into(),
            }
        };
        if let Step::Invalid { tool, .. } = &step {
            self.tally.invalid += 1;
            self.known.spurn(tool);
        }
        step
    }

    /// `done`: the turn ends (the rest of the reply is not run), unless
    /// something is owed.
    fn end(&mut self, arguments: String, tools: &[&'static str]) -> Step {
        if let Some(owed) = self.owed(tools) {
            self.tally.invalid += 1;
            return Step::Invalid {
                tool: catalog::DONE.into(),
                args_json: arguments,
                problem: format!("you cannot end yet: you still owe {}", owed.what()),
            };
        }
        let summary = serde_json::from_str::<serde_json::Value>(&arguments)
            .ok()
            .and_then(|v| v.get("summary").and_then(|s| s.as_str()).map(str::to_owned))
            .unwrap_or_default();
        self.answer("your turn ended; you will be told when something happens");
        while let Some(call) = self.queue.pop_front() {
            self.messages
                .push(Message::tool(&call.id, "not run: done came before it"));
        }
        self.news = false;
        self.log_use();
        let summary = summary.trim();
        Step::Idle(if summary.is_empty() {
            "done".into()
        } else {
            format!("done: {}", limits::cut(summary, 1_000))
        })
    }

    /// What the model used so far and what went wrong, in the log.
    pub(super) fn log_use(&self) {
        let used = self.meter.mine();
        tracing::info!(
            calls = used.calls,
            prompt_tokens = used.prompt_tokens,
            completion_tokens = used.completion_tokens,
            cached_tokens = self.meter.cached(),
            model_ms = used.model_ms,
            cut_replies = self.tally.cut,
            invalid_calls = self.tally.invalid,
            "model use"
        );
    }

    /// The step a call of a tool of the catalog asks for.
    fn step_of(&mut self, name: String, arguments: String, tools: &[&'static str]) -> Step {
        let arguments = if name == "edit_file" {
            self.edit_apart(arguments)
        } else {
            arguments
        };
        let parsed = catalog::parse(&name, &arguments, tools);
        if let Some(note) = self.put_back(&parsed) {
            // The same call again goes through.
            self.made.remove(&(name.clone(), arguments));
            return Step::PutBack { tool: name, note };
        }
        match parsed {
            Ok(Request::Tool(crate::tools::ToolCall::EditFile { old, new, .. })) if old == new => {
                Step::Invalid {
                    tool: name,
                    args_json: arguments,
                    problem: "`old` and `new` are the same: that edit changes nothing".into(),
                }
            }
            Ok(Request::Tool(call)) => {
                self.writing = call.is_gated();
                self.effect = effect_of(&call);
                Step::Call(call)
            }
            // A plan that names no file can never be carried out: the
            // grant would allow no write.
            Ok(Request::Submit(plan)) if plan.files.is_empty() => Step::Invalid {
                tool: name,
                args_json: arguments,
                problem: "submit_plan needs `files`: the paths you will write (e.g. \
                          [\"hello.txt\"]); the approval allows writing only those"
                    .into(),
            },
            Ok(Request::Submit(plan)) => {
                self.pinned.plan = Some(limits::cut(&arguments, 4 * 1024));
                self.planned = plan.files.clone();
                Step::Submit(plan)
            }
            Ok(Request::Send { to, text }) => Step::Send { to, text },
            Ok(Request::Task(TaskCall::Amend { files, .. }))
                if !files.is_empty() && files.iter().all(|f| self.known.granted.contains(f)) =>
            {
                Step::Invalid {
                    tool: name,
                    args_json: arguments,
                    problem: format!(
                        "nothing to amend: you may already write {}",
                        files.join(", ")
                    ),
                }
            }
            Ok(Request::Task(call)) => {
                if let TaskCall::Complete { task_id, .. } = &call {
                    self.completing = Some(task_id.clone());
                }
                Step::Task(call)
            }
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

impl ModelDriver {
    /// `edit_file`'s arguments without the next line of the file where the
    /// model pulled it onto the edited line ([`task_check::next_line_pulled`]).
    fn edit_apart(&self, arguments: String) -> String {
        let Ok(mut args) = serde_json::from_str::<serde_json::Value>(&arguments) else {
            return arguments;
        };
        let (Some(path), Some(old), Some(new)) = (
            args["path"].as_str(),
            args["old"].as_str(),
            args["new"].as_str(),
        ) else {
            return arguments;
        };
        let listed = self
            .known
            .tree
            .as_ref()
            .is_some_and(|tree| tree.files.contains(path));
        let Some(root) = self.workspace.as_deref().filter(|_| listed) else {
            return arguments;
        };
        let real = root.join(path);
        if !std::fs::symlink_metadata(&real).is_ok_and(|m| m.is_file()) {
            return arguments;
        }
        let Ok(file) = std::fs::read_to_string(real) else {
            return arguments;
        };
        let Some(kept) = task_check::next_line_pulled(&file, old, new) else {
            return arguments;
        };
        tracing::info!(path, new, kept = %kept, "an edit pulled the next line onto its own: dropped");
        args["new"] = serde_json::Value::String(kept);
        args.to_string()
    }

    /// What to put back to the model of a call, held against the task it
    /// was given (not a claimed one, [`task_check`]): a plan once until one
    /// is approved, a `write_file` once a path. The workspace's files are
    /// those listed for the reply ([`ModelDriver::callable`]).
    fn put_back(&mut self, parsed: &Result<Request, String>) -> Option<String> {
        if self.claimed.is_some() {
            return None;
        }
        let root = self.workspace.as_deref()?;
        match parsed {
            Ok(Request::Submit(plan)) if !self.plan_put_back => {
                let tree = self.known.tree.as_ref()?;
                let put_back = task_check::plan_against_task(&self.task, &plan.files, &tree.files)?;
                self.plan_put_back = true;
                // Where the server holds replies to a schema, the plan that
                // comes next names these files ([`offer`]).
                if self.chat.constraint() == chat::Constrain::Schema {
                    self.known.plan_files = put_back.files;
                }
                Some(put_back.note)
            }
            Ok(Request::Tool(crate::tools::ToolCall::WriteFile { path, content }))
                if !self.known.rewrite_put_back.contains(path) =>
            {
                // Only a file of the workspace's own (not hidden, not
                // reached through a link) is read here.
                let listed = self.known.tree.as_ref()?.files.contains(path);
                let real = root.join(path);
                if !listed || !std::fs::symlink_metadata(&real).ok()?.is_file() {
                    return None;
                }
                let old = std::fs::read_to_string(real).ok()?;
                let note = task_check::write_against_task(&self.task, path, &old, content)?;
                self.known.rewrite_put_back.insert(path.clone());
                Some(note)
            }
            _ => None,
        }
    }
}

/// Drops the calls that repeat an earlier one of the same reply word for
/// word (a model looping until its reply is cut); how many were dropped.
pub(super) fn dedupe(calls: &mut Vec<chat::ToolCall>) -> usize {
    let before = calls.len();
    let mut seen = std::collections::HashSet::new();
    calls.retain(|c| seen.insert((c.function.name.clone(), c.function.arguments.clone())));
    before - calls.len()
}

/// What a read or write call changes in what the driver knows.
fn effect_of(call: &crate::tools::ToolCall) -> Option<Effect> {
    use crate::tools::ToolCall as T;
    let clean = |path: &str| {
        let path = path.trim_start_matches("./").trim_end_matches('/');
        if path.is_empty() {
            ".".to_owned()
        } else {
            path.to_owned()
        }
    };
    match call {
        T::ReadFile { path } => Some(Effect::Read(clean(path))),
        T::ListDir { path } => Some(Effect::Listed(clean(path))),
        T::WriteFile { path, .. } | T::EditFile { path, .. } => Some(Effect::Wrote(clean(path))),
        T::RunCommand { .. } => Some(Effect::Ran),
        _ => None,
    }
}
