//! What the model driver makes of what happened ([`Observation`]): a call's
//! result answers it (and changes what the driver knows), a review or a
//! message is told to the model once every call is answered, and the lead's
//! word on usage may let a spent budget go on.

use mesh_core::{grant::Mode, limits};

use super::{calls::Effect, ModelDriver};
use crate::driver::Observation;

impl ModelDriver {
    /// Takes in what happened ([`crate::driver::Driver::observe`]).
    pub(super) fn take_in(&mut self, seen: Observation) {
        // News from outside (not a call's result) may make a refused call
        // worth making again.
        let news = !matches!(seen, Observation::ToolResult(_));
        match seen {
            Observation::Started => {}
            Observation::ToolResult(Ok(output)) => self.succeeded(output),
            Observation::TaskClaimed { task, text } => {
                self.claimed = Some(task.task_id);
                self.answer(&text)
            }
            Observation::ToolResult(Err(error)) => {
                self.completing = None;
                self.writing = false;
                self.effect = None;
                // At temperature 0 the same call would fail the same way.
                if let Some(tool) = self.calling.take() {
                    self.known.spurn(&tool);
                }
                self.answer(&format!("error: {error}"))
            }
            Observation::PlanRejected { feedback } => {
                self.answer("the plan was reviewed: rejected");
                self.pinned.feedback = Some(limits::cut(&feedback, 4 * 1024));
                self.unheard.push(format!(
                    "Your plan was rejected. The reviewer's feedback:\n{feedback}\n\nRevise the \
                     plan to answer it and call submit_plan again. You are still in plan mode."
                ));
            }
            Observation::PlanApproved { mode, write_paths } => {
                self.plan_approved(mode, write_paths)
            }
            Observation::Message { from, text } => {
                self.unheard.push(format!("Message from {from}:\n{text}"));
                self.known.correspondents.insert(from);
                self.turns = 0;
            }
            Observation::TaskClaimable { task_id, subject } => {
                self.known.tasks_heard = true;
                self.unheard.push(format!(
                    "Task {task_id} of the shared list can be claimed now: {subject}. \
                     Call claim_task to take it if you are free."
                ));
                self.turns = 0;
            }
            Observation::ShutdownRefused { reason } => self.unheard.push(format!(
                "You refused the lead's shutdown request ({reason}); carry on."
            )),
            Observation::Usage(status) => {
                let was_spent = self.meter.spent();
                self.meter.heard(&status);
                if !self.unspent(was_spent) {
                    // Not news: the model has nothing new to hear.
                    return;
                }
            }
            Observation::BudgetChanged { token_budget } => {
                let was_spent = self.meter.spent();
                self.meter.set_budget(token_budget);
                if !self.unspent(was_spent) {
                    return;
                }
            }
            // It waits for every decision and ends at an agreed shutdown.
            Observation::PlanPending { .. } | Observation::ShutdownAgreed => {}
        }
        if news {
            self.known.spurned.clear();
            self.made.clear();
        }
        self.news = true;
    }

    /// Whether the budget, spent before (`was_spent`), is not any more: then
    /// the model may go on (its turns count again from 0).
    fn unspent(&mut self, was_spent: bool) -> bool {
        if was_spent && !self.meter.spent() {
            self.turns = 0;
            true
        } else {
            false
        }
    }

    /// The running call succeeded with `output`: what it did is known now,
    /// and the model hears its output.
    fn succeeded(&mut self, output: String) {
        self.calling = None;
        if self.completing.take().is_some() {
            self.claimed = None;
        }
        if std::mem::take(&mut self.writing) {
            self.unwritten = None;
        }
        let mut output = output;
        match self.effect.take() {
            Some(Effect::Read(path)) => {
                // A file's text is data, set apart from the task: a small
                // model otherwise does what a file says.
                output = format!("[the file {path}]\n{output}\n[end of {path}]");
                self.known.read.insert(path);
            }
            Some(Effect::Listed(path)) => {
                self.known.listed.insert(path);
            }
            Some(Effect::Wrote(path)) => {
                // The model knows what it wrote.
                self.known.read.insert(path.clone());
                let first = self.known.written.insert(path);
                // A change is worth checking again.
                self.made.retain(|(tool, _)| tool != "run_command");
                self.known.spurned.remove("run_command");
                self.known.check_failed = false;
                if first && self.known.all_written() {
                    output.push_str(
                        "\nEvery file of your plan is written now. When the work is \
                         done, call done with a short summary.",
                    );
                }
            }
            Some(Effect::Ran) => {
                // Nothing changed until a write: the same check
                // would say the same.
                self.known.spurned.insert("run_command".into());
                self.known.check_failed = !output.starts_with("exit status: 0;");
            }
            None => {}
        }
        self.answer(&output)
    }

    /// The plan was approved with `mode`, writing `write_paths`: the model
    /// hears what it may do now (with the files it read, where small).
    fn plan_approved(&mut self, mode: Mode, write_paths: Vec<String>) {
        self.answer("the plan was reviewed: approved");
        let told = format!(
            "Your plan was approved with mode {mode}. You may write: {paths}. The \
             tools write_file, edit_file and run_command are now available, and \
             submit_plan is not. Carry out the plan now for your task ({task}): call \
             write_file with `path` and `content` for a new file, edit_file with `old` \
             and `new` to change a file that exists. When the work is done, call done \
             with a short summary.",
            task = limits::cut(&self.task, 1_000),
            paths = if write_paths.is_empty() {
                "the files your plan names".to_owned()
            } else {
                write_paths.join(", ")
            }
        );
        self.pinned.grant = Some(told.clone());
        // What the plan was made from, said again where it is small:
        // a small model loses what it read before it planned.
        let told = match self.read_again() {
            Some(read) => format!("{told}\n\n{read}"),
            None => told,
        };
        self.known.granted = if write_paths.is_empty() {
            self.planned.clone()
        } else {
            write_paths.clone()
        };
        self.known.written.clear();
        self.approved = true;
        self.plan_put_back = false;
        self.known.plan_files.clear();
        self.unwritten = Some(write_paths);
        self.pinned.feedback = None;
        self.unheard.push(told);
    }
}
