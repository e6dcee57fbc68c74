//! A plan: what a teammate proposes to do, as the core sees it once the edge
//! has checked it (`shared::plan::validate`).

/// A teammate's plan.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default)]
pub struct Plan {
    /// One line on what the plan does.
    pub summary: String,
    /// The steps, in order.
    pub steps: Vec<String>,
    /// Paths (globs) the plan will write, relative to the teammate's workspace.
    pub files: Vec<String>,
    /// The tests it adds or runs.
    pub tests: Vec<String>,
    /// Free text.
    pub body: String,
    /// The task the plan is for (empty: none).
    pub task_id: String,
}
