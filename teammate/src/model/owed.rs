//! What a model teammate owes when its model answers in prose, and the
//! reminder that names the tool to call.

/// What the teammate owes and may be reminded of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Owed {
    /// In plan mode with no plan under review: `submit_plan`.
    Plan,
    /// A claimed task not completed: `complete_task`.
    Task(String),
    /// An approved plan of which nothing was written yet: `write_file`.
    Work(Vec<String>),
}

impl Owed {
    pub(super) fn reminder(&self) -> String {
        match self {
            Owed::Plan => "You replied without calling a tool, but nothing happens until you \
                 submit a plan: you are in plan mode and cannot write. Call submit_plan now \
                 with a summary, the steps, the files you will write and the tests. If your \
                 reply above was the plan, pass it to submit_plan."
                .into(),
            Owed::Task(id) => format!(
                "You replied without calling a tool, but task {id} that you claimed is not \
                 completed. Carry on with it, or if it is done, call complete_task with \
                 task_id {id:?} and a short summary."
            ),
            Owed::Work(paths) => format!(
                "You replied without calling a tool, but your approved plan is not carried out: \
                 nothing was written yet. Call write_file (or edit_file, run_command) now{}.",
                if paths.is_empty() {
                    String::new()
                } else {
                    format!(" for {}", paths.join(", "))
                }
            ),
        }
    }

    pub(super) fn what(&self) -> String {
        match self {
            Owed::Plan => "a plan (submit_plan was not called)".into(),
            Owed::Task(id) => format!("the completion of task {id} (complete_task was not called)"),
            Owed::Work(_) => "the work of its approved plan (nothing was written)".into(),
        }
    }
}
