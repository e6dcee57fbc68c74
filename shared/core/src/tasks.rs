//! The shared task list as a pure type: tasks are created, claimed by one
//! member at a time, completed by their owner, and given back when their
//! owner terminates. No I/O and no clock: time comes in as an argument, and
//! the caller stores what changed.
//!
//! ```text
//!            claim (blockers all completed)          complete (by the owner)
//!  PENDING ----------------------------------> CLAIMED -----------------------> COMPLETED
//!     ^                                          |
//!     +------- release (the owner terminated) ---+
//! ```

use std::collections::HashMap;

use crate::{error::FieldError, grant::PathSet, limits, refusal::CoreError};

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskStatus {
    /// Waiting for a member to claim it (once its blockers are completed).
    Pending,
    /// A member works on it.
    Claimed,
    /// Its owner completed it. Terminal.
    Completed,
    /// The operator withdrew it (its summary says why; its owner, if it
    /// had one, stays named). Terminal; a task it blocks stays blocked.
    Withdrawn,
}

/// One task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub task_id: String,
    pub subject: String,
    pub description: String,
    pub status: TaskStatus,
    /// The member that claimed it; empty while pending.
    pub owner: String,
    /// Tasks that must be completed before this one can be claimed.
    pub blocked_by: Vec<String>,
    /// Globs the task is expected to touch (a hint).
    pub files: Vec<String>,
    pub created_at_unix_ms: i64,
    pub updated_at_unix_ms: i64,
    /// What the owner said on completing it.
    pub summary: String,
    /// What is reviewed.
    pub review: Review,
    /// Who handed it to the team from outside (an A2A caller), and the
    /// goal it belongs to; empty for a task made here.
    pub origin: Origin,
    /// What the owner handed in on completing it besides the summary.
    pub outputs: Vec<Output>,
    /// The owner completed it with a reply: it was a question, and the
    /// outputs (without any, the summary) are the answer.
    pub reply: bool,
}

/// Where a task came from when an outside caller handed it to the team
/// (A2A): who, and the context (one goal's tasks) it belongs to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Origin {
    /// Who handed it in (`a2a NAME`); empty for a task made here.
    pub by: String,
    /// The caller's context: the tasks of one goal.
    pub context_id: String,
    /// The caller's message that handed it in.
    pub message_id: String,
}

/// One thing a task produced besides its summary (a report, a file, a
/// link, data), named: what an A2A caller gets as an artifact.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Output {
    /// e.g. `report.md`.
    pub name: String,
    /// e.g. `text/markdown`; empty: the content's usual type.
    pub media_type: String,
    pub content: OutputContent,
}

/// What an [`Output`] holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OutputContent {
    Text(String),
    Raw(Vec<u8>),
    /// An http(s) URL where it is.
    Url(String),
    /// A JSON value, as its text.
    DataJson(String),
}

/// What an owner hands in on completing a task.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Completion {
    /// What it did.
    pub summary: String,
    /// What it produced besides.
    pub outputs: Vec<Output>,
    /// The task was a question and the outputs (without any, the summary)
    /// are the answer (see [`Task::reply`]).
    pub reply: bool,
}

impl Completion {
    /// A completion that says `summary` and hands in nothing else.
    pub fn summary(summary: impl Into<String>) -> Self {
        Self {
            summary: summary.into(),
            ..Self::default()
        }
    }
}

/// The most outputs one completion carries.
pub const MOST_OUTPUTS: usize = 16;

impl Output {
    /// Checks output `i` (a name, a type, content within [`limits::TEXT`],
    /// a URL that is http(s), data that is JSON).
    pub fn check(&self, i: usize) -> Result<(), FieldError> {
        let field = |f: &str| format!("outputs[{i}].{f}");
        if self.name.trim().is_empty() {
            return Err(FieldError::new(field("name"), "is required"));
        }
        limits::check(&field("name"), &self.name, limits::GLOB)?;
        limits::check(&field("media_type"), &self.media_type, limits::ROLE)?;
        match &self.content {
            OutputContent::Text(t) => limits::check(&field("text"), t, limits::TEXT),
            OutputContent::Raw(bytes) if bytes.len() > limits::TEXT => Err(FieldError::new(
                field("raw"),
                format!("is {} bytes; the limit is {}", bytes.len(), limits::TEXT),
            )),
            OutputContent::Raw(_) => Ok(()),
            OutputContent::Url(url) => {
                limits::check(&field("url"), url, limits::PATH)?;
                let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
                match scheme.as_deref() {
                    Some("http" | "https") => Ok(()),
                    _ => Err(FieldError::new(field("url"), "is not an http(s) URL")),
                }
            }
            OutputContent::DataJson(json) => {
                limits::check(&field("data_json"), json, limits::TEXT)?;
                serde_json::from_str::<serde_json::Value>(json)
                    .map(|_| ())
                    .map_err(|e| FieldError::new(field("data_json"), format!("is not JSON: {e}")))
            }
        }
    }
}

/// What of a task is reviewed (`lead serve --repo`; without it, plans).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Review {
    /// The plan; its result lands if it stays inside the plan's grant.
    #[default]
    Plan,
    /// The result alone: no plan round, nothing lands unreviewed.
    Result,
    /// Both.
    Both,
}

impl Review {
    /// Whether the task's work needs an approved plan first.
    pub fn needs_plan(self) -> bool {
        self != Review::Result
    }

    /// Its name (`plan`, `result`, `both`).
    pub fn as_str(self) -> &'static str {
        match self {
            Review::Plan => "plan",
            Review::Result => "result",
            Review::Both => "both",
        }
    }

    /// `plan`, `result` or `both`; an error naming `field` otherwise.
    pub fn parse(field: &str, value: &str) -> Result<Self, FieldError> {
        match value {
            "plan" => Ok(Review::Plan),
            "result" => Ok(Review::Result),
            "both" => Ok(Review::Both),
            other => Err(FieldError::new(
                field,
                format!("{other:?} is not one of plan, result, both"),
            )),
        }
    }
}

/// What a new task says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewTask {
    pub subject: String,
    pub description: String,
    pub blocked_by: Vec<String>,
    pub files: Vec<String>,
    /// What is reviewed; `None`: the lead's default.
    pub review: Option<Review>,
    /// Who handed it in from outside, if anyone did.
    pub origin: Origin,
}

/// The task list.
#[derive(Debug, Default)]
pub struct TaskBoard {
    /// Every task, oldest first.
    tasks: Vec<Task>,
    /// Where each id is in `tasks`.
    index: HashMap<String, usize>,
    /// The most tasks the board holds.
    max_tasks: usize,
    /// Where the tasks created or changed since the last
    /// [`TaskBoard::take_changed`] are in `tasks`, for persistence.
    touched: std::collections::BTreeSet<usize>,
}

/// What completing a task changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed {
    /// The task, completed.
    pub task: Task,
    /// Tasks that this completion made claimable (pending, every blocker
    /// completed now).
    pub unblocked: Vec<Task>,
    /// Whether the call changed anything (`false`: a retry of a completion).
    pub fresh: bool,
}

impl TaskBoard {
    /// The default bound on the number of tasks.
    pub const DEFAULT_MAX_TASKS: usize = 10_000;

    /// An empty board holding at most `max_tasks`.
    pub fn new(max_tasks: usize) -> Self {
        Self {
            max_tasks,
            ..Self::default()
        }
    }

    /// The board as stored: the tasks in the order they were created (the
    /// order the store kept; not re-sorted by their times, which a clock
    /// set back between two runs of the lead would put out of order).
    pub fn restore(max_tasks: usize, tasks: Vec<Task>) -> Self {
        let index = tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (t.task_id.clone(), i))
            .collect();
        Self {
            tasks,
            index,
            max_tasks,
            touched: std::collections::BTreeSet::new(),
        }
    }

    /// The task with that id.
    pub fn get(&self, id: &str) -> Option<&Task> {
        self.index.get(id).map(|&i| &self.tasks[i])
    }

    /// Tasks oldest first, of one status or all.
    pub fn list(&self, status: Option<TaskStatus>) -> Vec<&Task> {
        self.tasks
            .iter()
            .filter(|t| status.is_none_or(|s| t.status == s))
            .collect()
    }

    /// Tasks oldest first, of one status or all, from position `start` on,
    /// each with its position (which never changes: tasks are not removed).
    pub fn iter_from(
        &self,
        status: Option<TaskStatus>,
        start: usize,
    ) -> impl Iterator<Item = (usize, &Task)> {
        self.tasks
            .iter()
            .enumerate()
            .skip(start)
            .filter(move |(_, t)| status.is_none_or(|s| t.status == s))
    }

    /// Whether `task` can be claimed: pending, every blocker completed.
    pub fn is_claimable(&self, task: &Task) -> bool {
        task.status == TaskStatus::Pending && self.open_blockers(task).is_empty()
    }

    /// Why a claim with no id finds nothing, in words that are true of the
    /// list: every pending task blocked, or none pending at all.
    fn none_claimable(&self) -> String {
        let count = |status| self.tasks.iter().filter(|t| t.status == status).count();
        match count(TaskStatus::Pending) {
            0 => {
                let withdrawn = match count(TaskStatus::Withdrawn) {
                    0 => String::new(),
                    n => format!(", {n} withdrawn"),
                };
                format!(
                    "no task can be claimed now: none is pending ({} claimed, {} completed{withdrawn})",
                    count(TaskStatus::Claimed),
                    count(TaskStatus::Completed)
                )
            }
            pending => format!(
                "no task can be claimed now: every pending task ({pending}) waits for a \
                 task that is not completed yet"
            ),
        }
    }

    /// The oldest task that can be claimed now (what a claim with no id takes).
    pub fn next_claimable(&self) -> Option<&Task> {
        self.tasks.iter().find(|t| self.is_claimable(t))
    }

    /// Whether `member` has claimed a task it has not completed.
    pub fn has_claimed(&self, member: &str) -> bool {
        self.tasks
            .iter()
            .any(|t| t.status == TaskStatus::Claimed && t.owner == member)
    }

    /// How many tasks can be claimed now.
    pub fn claimable_count(&self) -> usize {
        self.tasks.iter().filter(|t| self.is_claimable(t)).count()
    }

    /// The blockers of `task` not completed yet.
    fn open_blockers(&self, task: &Task) -> Vec<String> {
        task.blocked_by
            .iter()
            .filter(|id| {
                self.get(id)
                    .is_none_or(|b| b.status != TaskStatus::Completed)
            })
            .cloned()
            .collect()
    }

    /// Adds a task with id `task_id` (chosen by the caller, unique).
    pub fn create(&mut self, task_id: String, new: NewTask, now: i64) -> Result<Task, CoreError> {
        if new.subject.trim().is_empty() {
            return Err(FieldError::new("subject", "is required").into());
        }
        limits::check("subject", &new.subject, limits::SUBJECT)?;
        limits::check("description", &new.description, limits::PLAN)?;
        for (field, items) in [("blocked_by", &new.blocked_by), ("files", &new.files)] {
            if items.len() > limits::LIST_ITEMS {
                return Err(FieldError::new(
                    field,
                    format!(
                        "has {} items; the limit is {}",
                        items.len(),
                        limits::LIST_ITEMS
                    ),
                )
                .into());
            }
        }
        for (i, id) in new.blocked_by.iter().enumerate() {
            limits::check(&format!("blocked_by[{i}]"), id, limits::ID)?;
        }
        for (i, glob) in new.files.iter().enumerate() {
            limits::check(&format!("files[{i}]"), glob, limits::GLOB)?;
        }
        limits::check("origin.by", &new.origin.by, limits::ID)?;
        limits::check("origin.context_id", &new.origin.context_id, limits::ID)?;
        limits::check("origin.message_id", &new.origin.message_id, limits::ID)?;
        if self.tasks.len() >= self.max_tasks {
            return Err(CoreError::LimitReached(format!(
                "the task list holds {} tasks, the most it may",
                self.max_tasks
            )));
        }
        let mut blocked_by: Vec<String> = Vec::with_capacity(new.blocked_by.len());
        for (i, id) in new.blocked_by.into_iter().enumerate() {
            if self.get(&id).is_none() {
                return Err(
                    FieldError::new(format!("blocked_by[{i}]"), format!("no task {id:?}")).into(),
                );
            }
            if !blocked_by.contains(&id) {
                blocked_by.push(id);
            }
        }
        PathSet::new("files", &new.files)?;
        if self.index.contains_key(&task_id) {
            return Err(FieldError::new("task_id", "is taken").into());
        }
        let task = Task {
            task_id: task_id.clone(),
            subject: new.subject,
            description: new.description,
            status: TaskStatus::Pending,
            owner: String::new(),
            blocked_by,
            files: new.files,
            created_at_unix_ms: now,
            updated_at_unix_ms: now,
            summary: String::new(),
            review: new.review.unwrap_or_default(),
            origin: new.origin,
            outputs: Vec::new(),
            reply: false,
        };
        self.index.insert(task_id, self.tasks.len());
        self.touched.insert(self.tasks.len());
        self.tasks.push(task.clone());
        Ok(task)
    }

    /// `member` claims task `id`, or (`None`) the oldest claimable one.
    pub fn claim(&mut self, member: &str, id: Option<&str>, now: i64) -> Result<Task, CoreError> {
        let at = match id {
            Some(id) => {
                let &at = self
                    .index
                    .get(id)
                    .ok_or_else(|| CoreError::NotFound(format!("task_id: no task {id:?}")))?;
                let task = &self.tasks[at];
                match task.status {
                    TaskStatus::Claimed if task.owner == member => return Ok(task.clone()),
                    TaskStatus::Claimed => {
                        return Err(CoreError::Conflict(format!(
                            "task {id} is already claimed by {}",
                            task.owner
                        )))
                    }
                    TaskStatus::Completed => {
                        return Err(CoreError::Conflict(format!(
                            "task {id} is already completed"
                        )))
                    }
                    TaskStatus::Withdrawn => {
                        return Err(CoreError::Conflict(format!("task {id} was withdrawn")))
                    }
                    TaskStatus::Pending => {
                        let open = self.open_blockers(task);
                        if !open.is_empty() {
                            return Err(CoreError::Conflict(format!(
                                "task {id} is blocked by {} (not completed yet)",
                                open.join(", ")
                            )));
                        }
                    }
                }
                at
            }
            None => self
                .tasks
                .iter()
                .position(|t| self.is_claimable(t))
                .ok_or_else(|| CoreError::NotFound(self.none_claimable()))?,
        };
        self.touched.insert(at);
        let task = &mut self.tasks[at];
        task.status = TaskStatus::Claimed;
        task.owner = member.to_owned();
        task.updated_at_unix_ms = now;
        Ok(task.clone())
    }

    /// `member` completes task `id`, which it owns.
    pub fn complete(
        &mut self,
        member: &str,
        id: &str,
        completion: Completion,
        now: i64,
    ) -> Result<Completed, CoreError> {
        let Completion {
            summary,
            outputs,
            reply,
        } = completion;
        limits::check("summary", &summary, limits::TEXT)?;
        if outputs.len() > MOST_OUTPUTS {
            return Err(FieldError::new(
                "outputs",
                format!("has {} items; the limit is {MOST_OUTPUTS}", outputs.len()),
            )
            .into());
        }
        for (i, output) in outputs.iter().enumerate() {
            output.check(i)?;
        }
        let &at = self
            .index
            .get(id)
            .ok_or_else(|| CoreError::NotFound(format!("task_id: no task {id:?}")))?;
        let task = &self.tasks[at];
        if task.owner != member {
            return Err(CoreError::NotYours(if task.owner.is_empty() {
                format!("task {id} is not claimed; claim it before completing it")
            } else {
                format!(
                    "task {id} is owned by {}; only its owner completes it",
                    task.owner
                )
            }));
        }
        if task.status == TaskStatus::Withdrawn {
            return Err(CoreError::Conflict(format!(
                "task {id} was withdrawn ({}); it cannot be completed",
                task.summary
            )));
        }
        if task.status == TaskStatus::Completed {
            return Ok(Completed {
                task: task.clone(),
                unblocked: Vec::new(),
                fresh: false,
            });
        }
        self.touched.insert(at);
        let task = &mut self.tasks[at];
        task.status = TaskStatus::Completed;
        task.summary = summary;
        task.outputs = outputs;
        task.reply = reply;
        task.updated_at_unix_ms = now;
        let task = task.clone();
        let unblocked = self
            .tasks
            .iter()
            .filter(|t| t.blocked_by.iter().any(|b| b == id) && self.is_claimable(t))
            .cloned()
            .collect();
        Ok(Completed {
            task,
            unblocked,
            fresh: true,
        })
    }

    /// Gives back every task `member` claimed and did not complete: pending
    /// again, no owner. Returns them.
    pub fn release(&mut self, member: &str, now: i64) -> Vec<Task> {
        let mut released = Vec::new();
        for (at, task) in self.tasks.iter_mut().enumerate() {
            if task.status == TaskStatus::Claimed && task.owner == member {
                task.status = TaskStatus::Pending;
                task.owner.clear();
                task.updated_at_unix_ms = now;
                released.push(task.clone());
                self.touched.insert(at);
            }
        }
        released
    }

    /// Withdraws task `id` (the operator's word: `why`): it ends, whoever
    /// works on it. A task already ended is refused.
    pub fn withdraw(&mut self, id: &str, why: &str, now: i64) -> Result<Task, CoreError> {
        limits::check("reason", why, limits::TEXT)?;
        let &at = self
            .index
            .get(id)
            .ok_or_else(|| CoreError::NotFound(format!("task_id: no task {id:?}")))?;
        let task = &mut self.tasks[at];
        match task.status {
            TaskStatus::Completed => Err(CoreError::Conflict(format!(
                "task {id} is completed; only a task still open can be withdrawn"
            ))),
            TaskStatus::Withdrawn => Err(CoreError::Conflict(format!(
                "task {id} was withdrawn already"
            ))),
            TaskStatus::Pending | TaskStatus::Claimed => {
                task.status = TaskStatus::Withdrawn;
                task.summary = format!("withdrawn: {why}");
                task.updated_at_unix_ms = now;
                self.touched.insert(at);
                Ok(task.clone())
            }
        }
    }

    /// The tasks created or changed since the last call, oldest first, as
    /// the store must write them.
    pub fn take_changed(&mut self) -> Vec<Task> {
        std::mem::take(&mut self.touched)
            .into_iter()
            .filter_map(|at| self.tasks.get(at).cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(subject: &str, blocked_by: &[&str]) -> NewTask {
        NewTask {
            subject: subject.into(),
            blocked_by: blocked_by.iter().map(|s| s.to_string()).collect(),
            ..NewTask::default()
        }
    }

    fn board() -> TaskBoard {
        let mut board = TaskBoard::new(100);
        board.create("a".into(), new("first", &[]), 1).expect("a");
        board
            .create("b".into(), new("second", &["a"]), 2)
            .expect("b");
        board.create("c".into(), new("third", &[]), 3).expect("c");
        board
    }

    #[test]
    fn create_checks_its_fields() {
        let mut board = board();
        let empty = board.create("d".into(), new(" ", &[]), 4);
        assert!(matches!(empty, Err(CoreError::Invalid(e)) if e.field == "subject"));
        let unknown = board.create("d".into(), new("x", &["a", "zz"]), 4);
        assert!(matches!(unknown, Err(CoreError::Invalid(e)) if e.field == "blocked_by[1]"));
        let outside = board.create(
            "d".into(),
            NewTask {
                subject: "x".into(),
                files: vec!["../etc/passwd".into()],
                ..NewTask::default()
            },
            4,
        );
        assert!(matches!(outside, Err(CoreError::Invalid(_))), "{outside:?}");
        let long = board.create("d".into(), new(&"s".repeat(limits::SUBJECT + 1), &[]), 4);
        assert!(matches!(long, Err(CoreError::Invalid(e)) if e.field == "subject"));
        let many = NewTask {
            subject: "x".into(),
            files: vec!["a".into(); limits::LIST_ITEMS + 1],
            ..NewTask::default()
        };
        let many = board.create("d".into(), many, 4);
        assert!(matches!(many, Err(CoreError::Invalid(e)) if e.field == "files"));
        let twice = board
            .create("d".into(), new("x", &["a", "a"]), 4)
            .expect("d");
        assert_eq!(twice.blocked_by, ["a"]);
        let mut full = TaskBoard::new(1);
        full.create("a".into(), new("x", &[]), 1).expect("a");
        assert!(matches!(
            full.create("b".into(), new("y", &[]), 2),
            Err(CoreError::LimitReached(_))
        ));
    }

    #[test]
    fn claim_next_takes_the_oldest_claimable_task() {
        let mut board = board();
        assert_eq!(board.claim("alice", None, 5).expect("a").task_id, "a");
        // b waits for a: the next claimable is c.
        assert_eq!(board.claim("bob", None, 6).expect("c").task_id, "c");
        let none = board.claim("carol", None, 7);
        assert!(
            matches!(&none, Err(CoreError::NotFound(m))
                if m.contains("every pending task (1) waits")),
            "{none:?}"
        );
        // Once a completes, b is claimed; then nothing is pending at all,
        // and the refusal says so rather than "blocked".
        board
            .complete("alice", "a", Completion::summary("done"), 8)
            .expect("a done");
        assert_eq!(board.claim("carol", None, 9).expect("b").task_id, "b");
        let none = board.claim("dave", None, 10);
        assert!(
            matches!(&none, Err(CoreError::NotFound(m))
                if m.contains("none is pending (2 claimed, 1 completed)") && !m.contains("blocked")),
            "{none:?}"
        );
    }

    #[test]
    fn claim_by_id_says_why_it_cannot() {
        let mut board = board();
        let blocked = board.claim("bob", Some("b"), 5);
        assert!(
            matches!(&blocked, Err(CoreError::Conflict(m)) if m.contains("blocked by a")),
            "{blocked:?}"
        );
        board.claim("alice", Some("a"), 5).expect("a");
        // A retry of one's own claim is the same claim.
        assert_eq!(
            board
                .claim("alice", Some("a"), 6)
                .expect("again")
                .updated_at_unix_ms,
            5
        );
        let taken = board.claim("bob", Some("a"), 6);
        assert!(
            matches!(&taken, Err(CoreError::Conflict(m)) if m.contains("claimed by alice")),
            "{taken:?}"
        );
        board
            .complete("alice", "a", Completion::summary("done"), 7)
            .expect("complete");
        let done = board.claim("bob", Some("a"), 8);
        assert!(
            matches!(&done, Err(CoreError::Conflict(m)) if m.contains("completed")),
            "{done:?}"
        );
        assert!(matches!(
            board.claim("bob", Some("zz"), 8),
            Err(CoreError::NotFound(_))
        ));
    }

    #[test]
    fn only_the_owner_completes_and_completion_unblocks() {
        let mut board = board();
        let not_claimed = board.complete("alice", "a", Completion::default(), 5);
        assert!(matches!(not_claimed, Err(CoreError::NotYours(_))));
        board.claim("alice", Some("a"), 5).expect("a");
        let stranger = board.complete("bob", "a", Completion::default(), 6);
        assert!(matches!(&stranger, Err(CoreError::NotYours(m)) if m.contains("owned by alice")));
        let long = board.complete(
            "alice",
            "a",
            Completion::summary("s".repeat(limits::TEXT + 1)),
            7,
        );
        assert!(matches!(long, Err(CoreError::Invalid(e)) if e.field == "summary"));
        let done = board
            .complete("alice", "a", Completion::summary("parser added"), 7)
            .expect("done");
        assert!(done.fresh);
        assert_eq!(done.task.summary, "parser added");
        assert_eq!(
            done.unblocked
                .iter()
                .map(|t| t.task_id.as_str())
                .collect::<Vec<_>>(),
            ["b"]
        );
        let again = board
            .complete("alice", "a", Completion::summary("other"), 8)
            .expect("retry");
        assert!(!again.fresh && again.unblocked.is_empty());
        assert_eq!(again.task.summary, "parser added");
        assert_eq!(board.claim("bob", Some("b"), 9).expect("b").owner, "bob");
    }

    #[test]
    fn a_completion_carries_checked_outputs() {
        let output = |name: &str, content| Output {
            name: name.into(),
            media_type: String::new(),
            content,
        };
        let refused = |outputs: Vec<Output>| {
            let mut board = board();
            board.claim("alice", Some("a"), 5).expect("a");
            let completion = Completion {
                outputs,
                ..Completion::default()
            };
            match board.complete("alice", "a", completion, 6) {
                Err(CoreError::Invalid(e)) => e.field,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(
            refused(vec![output(" ", OutputContent::Text("x".into()))]),
            "outputs[0].name"
        );
        assert_eq!(
            refused(vec![
                output("a", OutputContent::Text("x".into())),
                output("b", OutputContent::Url("file:///etc/passwd".into()))
            ]),
            "outputs[1].url"
        );
        assert_eq!(
            refused(vec![output("d", OutputContent::DataJson("{".into()))]),
            "outputs[0].data_json"
        );
        assert_eq!(
            refused(vec![output(
                "r",
                OutputContent::Raw(vec![0; limits::TEXT + 1])
            )]),
            "outputs[0].raw"
        );
        assert_eq!(
            refused(vec![
                output("t", OutputContent::Text(String::new()));
                MOST_OUTPUTS + 1
            ]),
            "outputs"
        );
        let outputs = vec![
            output("report.md", OutputContent::Text("# found".into())),
            output("out.bin", OutputContent::Raw(vec![1, 2])),
            output("site", OutputContent::Url("https://example.com/x".into())),
            output("counts", OutputContent::DataJson(r#"{"count": 42}"#.into())),
        ];
        let mut board = board();
        board.claim("alice", Some("a"), 5).expect("a");
        let done = board
            .complete(
                "alice",
                "a",
                Completion {
                    summary: "done".into(),
                    outputs: outputs.clone(),
                    reply: true,
                },
                6,
            )
            .expect("done");
        assert_eq!(done.task.outputs, outputs);
        assert!(done.task.reply, "a reply is kept with the task");
        assert_eq!(board.get("a").expect("a").outputs, outputs);
    }

    #[test]
    fn a_terminated_owner_gives_its_tasks_back() {
        let mut board = board();
        board.claim("alice", Some("a"), 5).expect("a");
        board.claim("alice", Some("c"), 5).expect("c");
        board
            .complete("alice", "c", Completion::default(), 6)
            .expect("c done");
        let released = board.release("alice", 7);
        assert_eq!(released.len(), 1);
        assert_eq!(released[0].task_id, "a");
        let a = board.get("a").expect("a");
        assert_eq!((a.status, a.owner.as_str()), (TaskStatus::Pending, ""));
        assert_eq!(board.get("c").expect("c").status, TaskStatus::Completed);
        assert!(board.release("alice", 8).is_empty());
    }

    #[test]
    fn every_status_and_operation() {
        // Table: from each status, each operation by the owner and by another.
        for status in [
            TaskStatus::Pending,
            TaskStatus::Claimed,
            TaskStatus::Completed,
        ] {
            let mut board = TaskBoard::new(10);
            board.create("t".into(), new("t", &[]), 1).expect("t");
            if status != TaskStatus::Pending {
                board.claim("o", Some("t"), 2).expect("claim");
            }
            if status == TaskStatus::Completed {
                board
                    .complete("o", "t", Completion::default(), 3)
                    .expect("complete");
            }
            let claim_other = board.claim("x", Some("t"), 4).map(|t| t.status);
            let expected = match status {
                TaskStatus::Pending => Ok(TaskStatus::Claimed),
                _ => Err(()),
            };
            assert_eq!(
                claim_other.map_err(|_| ()),
                expected,
                "claim by another from {status:?}"
            );
        }
    }

    #[test]
    fn restore_keeps_order_and_lookups() {
        let board = board();
        let tasks: Vec<Task> = board.list(None).into_iter().cloned().collect();
        let restored = TaskBoard::restore(100, tasks);
        let ids: Vec<&str> = restored
            .list(None)
            .iter()
            .map(|t| t.task_id.as_str())
            .collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(restored.get("b").expect("b").blocked_by, ["a"]);
        assert_eq!(restored.claimable_count(), 2);
    }

    #[test]
    fn a_withdrawn_task_ends_and_what_it_blocked_stays_blocked() {
        let mut board = board();
        board.claim("ann", Some("c"), 4).expect("claim");
        // Every status: pending and claimed are withdrawn; ended ones refused.
        let pending = board.withdraw("a", "not needed", 5).expect("pending");
        assert_eq!(pending.status, TaskStatus::Withdrawn);
        assert_eq!(pending.summary, "withdrawn: not needed");
        let claimed = board.withdraw("c", "changed course", 6).expect("claimed");
        assert_eq!(
            (claimed.status, claimed.owner.as_str()),
            (TaskStatus::Withdrawn, "ann")
        );
        assert!(matches!(
            board.withdraw("a", "again", 7),
            Err(CoreError::Conflict(_))
        ));
        assert!(matches!(
            board.withdraw("zz", "x", 7),
            Err(CoreError::NotFound(_))
        ));
        board.create("d".into(), new("fourth", &[]), 8).expect("d");
        board.claim("bob", Some("d"), 9).expect("claim");
        board
            .complete("bob", "d", Completion::summary("done"), 10)
            .expect("complete");
        assert!(matches!(
            board.withdraw("d", "late", 11),
            Err(CoreError::Conflict(_))
        ));
        // Nothing more happens to it; what it blocked stays blocked.
        assert!(matches!(
            board.claim("bob", Some("a"), 12),
            Err(CoreError::Conflict(_))
        ));
        assert!(matches!(
            board.complete("ann", "c", Completion::summary("x"), 12),
            Err(CoreError::Conflict(_))
        ));
        assert!(!board.is_claimable(board.get("b").expect("b")));
        assert_eq!(board.release("ann", 13), Vec::<Task>::new());
        let none = board.claim("bob", None, 14).expect_err("nothing claimable");
        assert!(
            none.to_string().contains("withdrawn") || none.to_string().contains("waits"),
            "{none}"
        );
        let changed: Vec<String> = board
            .take_changed()
            .into_iter()
            .map(|t| t.task_id)
            .collect();
        assert!(changed.contains(&"a".to_owned()) && changed.contains(&"c".to_owned()));
    }
}
