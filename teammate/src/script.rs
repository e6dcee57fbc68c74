//! The script driver: a TOML file says what the teammate does.
//!
//! A script runs its plan-phase actions, submits its plans (the next one
//! after each rejection) until one is approved, runs its work actions, and
//! idles. With `claim = "next"` it works the shared task list instead: when
//! idle it claims the next task, runs that task's `[[tasks]]` section (the one
//! whose `subject` matches, else the one with `subject = "*"`, which the
//! top-level `[[plans]]` and `[[actions]]` also make, else a plan made from
//! the task itself), completes the task with the section's
//! summary, and claims again until none is left; when a task becomes
//! claimable while it idles, it hears so and claims again.
//!
//! ```text
//! Claim --claimed--> Planning --> Submit(n) --rejected--> Submit(n+1)
//!   ^  \--none--> Idle --task claimable--> Claim          \--approved--> Working
//!   |                                                                      |
//!   +--completed-- Completing <-- (AwaitingMessage --message-->) <---------+
//! ```

use std::collections::VecDeque;

use mesh_core::plan::Plan;
use serde::Deserialize;

use crate::{
    driver::{ClaimedTask, Driver, DriverError, Observation, ShutdownAnswer, Step, TaskCall},
    tools::ToolCall,
};

/// A script, as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// `"next"`: work the shared task list (plans and actions go in `tasks`;
    /// top-level ones are the section for any task, `subject = "*"`).
    #[serde(default)]
    pub claim: Option<Claim>,
    /// Submitted in order: the first, then the next after each rejection.
    #[serde(default)]
    pub plans: Vec<PlanSpec>,
    /// Run in order within their phase.
    #[serde(default)]
    pub actions: Vec<Action>,
    /// With `claim = "next"`: what to do for each task, by its subject.
    #[serde(default)]
    pub tasks: Vec<TaskSpec>,
    /// How to answer a shutdown request.
    #[serde(default)]
    pub shutdown: ShutdownSpec,
}

/// How a script takes work from the task list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Claim {
    /// Claim the oldest claimable task whenever idle.
    Next,
}

/// What a script does for one task.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    /// The subject of the task this is for; `"*"` (the default) is for any
    /// task without a section of its own.
    #[serde(default = "any_subject")]
    pub subject: String,
    /// Submitted in order, as the script's `plans`; none: a plan made from
    /// the task (its subject, description and files).
    #[serde(default)]
    pub plans: Vec<PlanSpec>,
    /// Run in order within their phase, as the script's `actions`.
    #[serde(default)]
    pub actions: Vec<Action>,
    /// Said when completing the task (default: "done: SUBJECT").
    #[serde(default)]
    pub summary: String,
    /// Complete the task only once a message has arrived since it was
    /// claimed (someone checks the work first): after the work, report idle
    /// and wait for one if none came yet.
    #[serde(default)]
    pub await_message: bool,
}

fn any_subject() -> String {
    "*".into()
}

/// One plan of a script.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanSpec {
    pub summary: String,
    #[serde(default)]
    pub files: Vec<String>,
    #[serde(default)]
    pub tests: Vec<String>,
    #[serde(default)]
    pub steps: Vec<String>,
    #[serde(default)]
    pub body: String,
}

impl PlanSpec {
    fn to_plan(&self) -> Plan {
        Plan {
            summary: self.summary.clone(),
            steps: self.steps.clone(),
            files: self.files.clone(),
            tests: self.tests.clone(),
            body: self.body.clone(),
            task_id: String::new(),
        }
    }
}

/// When an action runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Before the first plan is submitted (plan mode).
    Plan,
    /// After approval.
    Work,
}

/// One tool call of a script.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Action {
    pub phase: Phase,
    pub tool: String,
    pub path: Option<String>,
    pub content: Option<String>,
    pub old: Option<String>,
    pub new: Option<String>,
    pub command: Option<String>,
    pub pattern: Option<String>,
    /// `send_message`: to whom (a member, `lead` or `*`).
    pub to: Option<String>,
    /// `send_message`: what; `request_amendment`: why.
    pub text: Option<String>,
    /// `request_amendment`: the files to add.
    pub files: Option<Vec<String>>,
}

/// How a script answers a shutdown request.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShutdownSpec {
    #[serde(default = "yes")]
    pub approve: bool,
    #[serde(default)]
    pub reason: String,
}

fn yes() -> bool {
    true
}

impl Default for ShutdownSpec {
    fn default() -> Self {
        Self {
            approve: true,
            reason: String::new(),
        }
    }
}

impl Action {
    /// The step it describes; the error names where it is and what is missing.
    fn to_step(&self, at: &str) -> Result<Step, String> {
        let arg = |name: &str, value: &Option<String>| {
            value
                .clone()
                .ok_or_else(|| format!("{at}: {} needs `{name}`", self.tool))
        };
        let call = match self.tool.as_str() {
            "send_message" => {
                return Ok(Step::Send {
                    to: arg("to", &self.to)?,
                    text: arg("text", &self.text)?,
                })
            }
            "read_file" => ToolCall::ReadFile {
                path: arg("path", &self.path)?,
            },
            "list_dir" => ToolCall::ListDir {
                path: self.path.clone().unwrap_or_else(|| ".".into()),
            },
            "search" => ToolCall::Search {
                pattern: arg("pattern", &self.pattern)?,
                path: self.path.clone(),
            },
            "write_file" => ToolCall::WriteFile {
                path: arg("path", &self.path)?,
                content: arg("content", &self.content)?,
            },
            "edit_file" => ToolCall::EditFile {
                path: arg("path", &self.path)?,
                old: arg("old", &self.old)?,
                new: arg("new", &self.new)?,
            },
            "request_amendment" => {
                return Ok(Step::Task(TaskCall::Amend {
                    files: self
                        .files
                        .clone()
                        .ok_or_else(|| format!("{at}: request_amendment needs `files`"))?,
                    steps: Vec::new(),
                    why: arg("text", &self.text)?,
                }))
            }
            "run_command" => ToolCall::RunCommand {
                command: arg("command", &self.command)?,
            },
            other => return Err(format!("{at}: unknown tool {other:?}")),
        };
        Ok(Step::Call(call))
    }
}

/// One piece of work: calls while planning, plans, calls once approved.
#[derive(Debug, Clone, Default)]
struct Job {
    /// Plan-phase steps, in order.
    plan_steps: Vec<Step>,
    /// Plans to submit, in order.
    plans: Vec<Plan>,
    /// Work-phase steps, in order.
    work_steps: Vec<Step>,
}

impl Job {
    /// The job `plans` and `actions` describe; `at` names them in errors.
    fn parse(plans: &[PlanSpec], actions: &[Action], at: &str) -> Result<Self, String> {
        let mut job = Job {
            plans: plans.iter().map(PlanSpec::to_plan).collect(),
            ..Job::default()
        };
        for (i, action) in actions.iter().enumerate() {
            let step = action.to_step(&format!("{at}actions[{i}]"))?;
            match action.phase {
                Phase::Plan => job.plan_steps.push(step),
                Phase::Work => job.work_steps.push(step),
            }
        }
        Ok(job)
    }
}

/// A `[[tasks]]` section, parsed.
#[derive(Debug, Clone)]
struct Section {
    subject: String,
    job: Job,
    summary: String,
    await_message: bool,
}

/// The task being worked on.
#[derive(Debug, Clone)]
struct Current {
    task: ClaimedTask,
    summary: String,
    await_message: bool,
    /// Whether a message arrived since the task was claimed.
    heard: bool,
}

/// Runs a script.
#[derive(Debug)]
pub struct ScriptDriver {
    /// What to do outside any task (all of it without `claim`).
    job: Job,
    /// With `claim = "next"`: what to do for each task.
    sections: Vec<Section>,
    /// Whether to claim tasks.
    claims: bool,
    /// The shutdown answer.
    shutdown: ShutdownSpec,
    /// The task claimed and not completed.
    current: Option<Current>,
    /// Where the script is.
    cursor: Cursor,
    /// What happened since the last step, oldest first.
    seen: VecDeque<Observation>,
}

/// The script driver's position in its job.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Cursor {
    /// Running plan-phase step `n`.
    Planning(usize),
    /// Plan `n` is to be submitted.
    Submit(usize),
    /// Plan `n` was submitted and awaits review.
    Reviewing(usize),
    /// Running work step `n`.
    Working(usize),
    /// The work is done; waiting for a message before completing the task.
    AwaitingMessage,
    /// The task is to be completed.
    Complete,
    /// `complete_task` was called.
    Completing,
    /// The next task is to be claimed.
    Claim,
    /// `claim_task` was called.
    Claiming,
    /// Nothing to do until something happens; the reason.
    Idle(String),
}

impl ScriptDriver {
    /// Parses and checks a script.
    pub fn parse(text: &str) -> Result<Self, String> {
        let script: Script = toml::from_str(text).map_err(|e| format!("script: {e}"))?;
        let claims = script.claim == Some(Claim::Next);
        if !claims && !script.tasks.is_empty() {
            return Err("script: [[tasks]] sections need claim = \"next\"".into());
        }
        let mut job = Job::parse(&script.plans, &script.actions, "")?;
        let mut sections: Vec<Section> = Vec::with_capacity(script.tasks.len() + 1);
        if claims && !(script.plans.is_empty() && script.actions.is_empty()) {
            // The top-level plans and actions: the section for any task
            // without one of its own.
            sections.push(Section {
                subject: any_subject(),
                job: std::mem::take(&mut job),
                summary: String::new(),
                await_message: false,
            });
        }
        for (i, spec) in script.tasks.iter().enumerate() {
            if sections.iter().any(|s| s.subject == spec.subject) {
                let top_level = !(script.plans.is_empty() && script.actions.is_empty());
                let also = if spec.subject == "*" && top_level {
                    " (the top-level plans and actions are the one for \"*\")"
                } else {
                    ""
                };
                return Err(format!(
                    "tasks[{i}]: a second section for subject {:?}{also}",
                    spec.subject
                ));
            }
            sections.push(Section {
                subject: spec.subject.clone(),
                job: Job::parse(&spec.plans, &spec.actions, &format!("tasks[{i}]."))?,
                summary: spec.summary.clone(),
                await_message: spec.await_message,
            });
        }
        let cursor = if claims {
            Cursor::Claim
        } else {
            Cursor::Planning(0)
        };
        Ok(Self {
            job,
            sections,
            claims,
            shutdown: script.shutdown,
            current: None,
            cursor,
            seen: VecDeque::new(),
        })
    }

    /// Starts on a claimed task: its section's job, or a plan made from it.
    fn start_task(&mut self, task: ClaimedTask) {
        let section = self
            .sections
            .iter()
            .find(|s| s.subject == task.subject)
            .or_else(|| self.sections.iter().find(|s| s.subject == "*"));
        let (mut job, summary, await_message) = match section {
            Some(s) => (s.job.clone(), s.summary.clone(), s.await_message),
            None => (Job::default(), String::new(), false),
        };
        if !task.needs_plan {
            // Reviewed by its result alone: no plan round.
            job.plans.clear();
        } else if job.plans.is_empty() {
            job.plans.push(Plan {
                summary: task.subject.clone(),
                steps: vec![if task.description.is_empty() {
                    task.subject.clone()
                } else {
                    task.description.clone()
                }],
                files: task.files.clone(),
                tests: Vec::new(),
                body: task.description.clone(),
                task_id: String::new(),
            });
        }
        for plan in &mut job.plans {
            plan.task_id = task.task_id.clone();
        }
        let summary = if summary.is_empty() {
            format!("done: {}", task.subject)
        } else {
            summary
        };
        self.job = job;
        self.current = Some(Current {
            task,
            summary,
            await_message,
            heard: false,
        });
        self.cursor = Cursor::Planning(0);
    }

    /// Takes in one observation: where the script goes next.
    fn absorb(&mut self, seen: Observation) {
        if let (Observation::Message { .. }, Some(current)) = (&seen, &mut self.current) {
            current.heard = true;
        }
        let cursor = std::mem::replace(&mut self.cursor, Cursor::Claim);
        self.cursor = match (seen, cursor) {
            (Observation::PlanRejected { .. }, Cursor::Reviewing(n)) => {
                if n + 1 < self.job.plans.len() {
                    Cursor::Submit(n + 1)
                } else {
                    Cursor::Idle(match &self.current {
                        Some(c) => format!(
                            "every plan in the script for task {:?} was rejected",
                            c.task.subject
                        ),
                        None => "every plan in the script was rejected".into(),
                    })
                }
            }
            (Observation::PlanApproved { .. }, Cursor::Reviewing(_)) => Cursor::Working(0),
            (Observation::ToolResult(Err(e)), Cursor::Reviewing(_)) => {
                Cursor::Idle(format!("the plan could not be submitted: {e}"))
            }
            (Observation::TaskClaimed { task, .. }, Cursor::Claiming) => {
                self.start_task(task);
                return;
            }
            (Observation::ToolResult(Err(e)), Cursor::Claiming) => {
                Cursor::Idle(format!("no task to claim: {e}"))
            }
            (Observation::ToolResult(result), Cursor::Completing) => {
                self.current = None;
                match result {
                    Ok(_) => Cursor::Claim,
                    Err(e) => Cursor::Idle(format!("could not complete the task: {e}")),
                }
            }
            (Observation::Message { .. }, Cursor::AwaitingMessage) => Cursor::Complete,
            (Observation::TaskClaimable { .. }, Cursor::Idle(_))
                if self.claims && self.current.is_none() =>
            {
                Cursor::Claim
            }
            (_, cursor) => cursor,
        };
    }

    /// The step at the cursor, moving it on.
    fn advance(&mut self) -> Step {
        loop {
            match self.cursor.clone() {
                Cursor::Planning(n) if n < self.job.plan_steps.len() => {
                    self.cursor = Cursor::Planning(n + 1);
                    return self.job.plan_steps[n].clone();
                }
                Cursor::Planning(_) if self.job.plans.is_empty() => {
                    self.cursor = Cursor::Working(0)
                }
                Cursor::Planning(_) => self.cursor = Cursor::Submit(0),
                Cursor::Submit(n) => {
                    self.cursor = Cursor::Reviewing(n);
                    return Step::Submit(self.job.plans[n].clone());
                }
                Cursor::Reviewing(_) => return Step::Idle("waiting for the plan's review".into()),
                Cursor::Working(n) if n < self.job.work_steps.len() => {
                    self.cursor = Cursor::Working(n + 1);
                    return self.job.work_steps[n].clone();
                }
                Cursor::Working(_) => {
                    self.cursor = match &self.current {
                        Some(c) if c.await_message && !c.heard => Cursor::AwaitingMessage,
                        Some(_) => Cursor::Complete,
                        None if self.claims => Cursor::Claim,
                        None => {
                            self.cursor = Cursor::Idle("nothing to do".into());
                            return Step::Idle("work done".into());
                        }
                    }
                }
                Cursor::AwaitingMessage => {
                    let subject = self
                        .current
                        .as_ref()
                        .map(|c| c.task.subject.clone())
                        .unwrap_or_default();
                    return Step::Idle(format!(
                        "work on {subject:?} done; waiting for a message before completing it"
                    ));
                }
                Cursor::Complete => match &self.current {
                    Some(c) => {
                        let call = TaskCall::Complete {
                            task_id: c.task.task_id.clone(),
                            summary: c.summary.clone(),
                        };
                        self.cursor = Cursor::Completing;
                        return Step::Task(call);
                    }
                    None => self.cursor = Cursor::Claim,
                },
                Cursor::Claim => {
                    self.cursor = Cursor::Claiming;
                    return Step::Task(TaskCall::Claim(None));
                }
                Cursor::Completing | Cursor::Claiming => {
                    return Step::Idle("waiting for the task list".into())
                }
                Cursor::Idle(reason) => return Step::Idle(reason),
            }
        }
    }

    /// The next step, given what happened since the last.
    fn next_step(&mut self) -> Step {
        while let Some(seen) = self.seen.pop_front() {
            self.absorb(seen);
        }
        self.advance()
    }
}

impl Driver for ScriptDriver {
    fn observe(&mut self, seen: Observation) {
        self.seen.push_back(seen);
    }

    async fn step(&mut self, _tools: &[&'static str]) -> Result<Step, DriverError> {
        Ok(self.next_step())
    }

    async fn answer_shutdown(
        &mut self,
        _request: &crate::driver::ShutdownRequest,
        _tools: &[&'static str],
    ) -> ShutdownAnswer {
        ShutdownAnswer {
            approve: self.shutdown.approve,
            reason: self.shutdown.reason.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use mesh_core::grant::Mode;

    use super::*;

    const SCRIPT: &str = r#"
[[plans]]
summary = "one"
[[plans]]
summary = "two"
files = ["a.rs"]
[[actions]]
phase = "plan"
tool = "write_file"
path = "a.rs"
content = "x"
[[actions]]
phase = "work"
tool = "run_command"
command = "true"
[shutdown]
approve = false
reason = "busy"
"#;

    /// Observes `seen`, then takes the next step.
    fn after(d: &mut ScriptDriver, seen: Observation) -> Step {
        d.observe(seen);
        d.next_step()
    }

    fn approved() -> Observation {
        Observation::PlanApproved {
            mode: Mode::AcceptEdits,
            write_paths: Vec::new(),
        }
    }

    fn rejected() -> Observation {
        Observation::PlanRejected {
            feedback: "no".into(),
        }
    }

    fn ok() -> Observation {
        Observation::ToolResult(Ok(String::new()))
    }

    fn message() -> Observation {
        Observation::Message {
            from: "bob".into(),
            text: "hi".into(),
        }
    }

    fn claimed(id: &str, subject: &str) -> Observation {
        Observation::TaskClaimed {
            task: ClaimedTask {
                task_id: id.into(),
                subject: subject.into(),
                description: String::new(),
                files: vec!["src/x.rs".into()],
                needs_plan: true,
            },
            text: String::new(),
        }
    }

    #[test]
    fn a_script_plans_revises_works_and_idles() {
        let mut d = ScriptDriver::parse(SCRIPT).expect("valid");
        let write = ToolCall::WriteFile {
            path: "a.rs".into(),
            content: "x".into(),
        };
        assert_eq!(after(&mut d, Observation::Started), Step::Call(write));
        let refused = Observation::ToolResult(Err("refused".into()));
        assert!(matches!(after(&mut d, refused), Step::Submit(p) if p.summary == "one"));
        assert!(matches!(after(&mut d, rejected()), Step::Submit(p) if p.summary == "two"));
        assert_eq!(
            after(&mut d, approved()),
            Step::Call(ToolCall::RunCommand {
                command: "true".into()
            })
        );
        assert_eq!(after(&mut d, ok()), Step::Idle("work done".into()));
        assert!(matches!(after(&mut d, message()), Step::Idle(_)));
        let answer = d.shutdown.clone();
        assert!(!answer.approve);
        assert_eq!(answer.reason, "busy");
    }

    #[test]
    fn a_message_after_a_decision_does_not_hide_it() {
        let mut d = ScriptDriver::parse(SCRIPT).expect("valid");
        d.next_step();
        d.next_step();
        d.observe(rejected());
        d.observe(message());
        assert!(matches!(d.next_step(), Step::Submit(p) if p.summary == "two"));
    }

    #[test]
    fn running_out_of_plans_idles() {
        let mut d = ScriptDriver::parse("[[plans]]\nsummary = \"only\"\n").expect("valid");
        assert!(matches!(
            after(&mut d, Observation::Started),
            Step::Submit(_)
        ));
        assert!(matches!(after(&mut d, rejected()), Step::Idle(r) if r.contains("rejected")));
    }

    const CLAIMS: &str = r#"
claim = "next"

[[tasks]]
subject = "auth"
summary = "auth written"
await_message = true
[[tasks.plans]]
summary = "auth, first try"
files = ["src/auth.rs"]
[[tasks.plans]]
summary = "auth, with tests"
files = ["src/auth.rs", "tests/auth.rs"]
[[tasks.actions]]
phase = "work"
tool = "write_file"
path = "src/auth.rs"
content = "fn login() {}"
[[tasks.actions]]
phase = "work"
tool = "send_message"
to = "bob"
text = "auth is in"
"#;

    #[test]
    fn claim_next_works_a_task_by_its_section_and_claims_again() {
        let mut d = ScriptDriver::parse(CLAIMS).expect("valid");
        assert_eq!(
            after(&mut d, Observation::Started),
            Step::Task(TaskCall::Claim(None))
        );
        let first = after(&mut d, claimed("t1", "auth"));
        assert!(
            matches!(&first, Step::Submit(p) if p.summary == "auth, first try" && p.task_id == "t1"),
            "{first:?}"
        );
        assert!(
            matches!(after(&mut d, rejected()), Step::Submit(p) if p.summary == "auth, with tests" && p.task_id == "t1")
        );
        assert!(matches!(
            after(&mut d, approved()),
            Step::Call(ToolCall::WriteFile { .. })
        ));
        assert_eq!(
            after(&mut d, ok()),
            Step::Send {
                to: "bob".into(),
                text: "auth is in".into()
            }
        );
        assert!(
            matches!(after(&mut d, ok()), Step::Idle(r) if r.contains("waiting for a message"))
        );
        // A task becoming claimable does not end the wait; a message does.
        let claimable = Observation::TaskClaimable {
            task_id: "t2".into(),
            subject: "docs".into(),
        };
        assert!(matches!(after(&mut d, claimable), Step::Idle(_)));
        assert_eq!(
            after(&mut d, message()),
            Step::Task(TaskCall::Complete {
                task_id: "t1".into(),
                summary: "auth written".into()
            })
        );
        assert_eq!(after(&mut d, ok()), Step::Task(TaskCall::Claim(None)));
        // A task without a section gets a plan made from it.
        let plan = after(&mut d, claimed("t2", "docs"));
        assert!(
            matches!(&plan, Step::Submit(p) if p.summary == "docs" && p.files == ["src/x.rs"] && p.task_id == "t2"),
            "{plan:?}"
        );
        assert_eq!(
            after(&mut d, approved()),
            Step::Task(TaskCall::Complete {
                task_id: "t2".into(),
                summary: "done: docs".into()
            })
        );
        assert_eq!(after(&mut d, ok()), Step::Task(TaskCall::Claim(None)));
        let none = Observation::ToolResult(Err("no task can be claimed now".into()));
        assert!(matches!(after(&mut d, none), Step::Idle(r) if r.contains("no task to claim")));
        assert!(matches!(after(&mut d, message()), Step::Idle(_)));
        let claimable = Observation::TaskClaimable {
            task_id: "t3".into(),
            subject: "later".into(),
        };
        assert_eq!(after(&mut d, claimable), Step::Task(TaskCall::Claim(None)));
    }

    #[test]
    fn a_message_while_working_counts_for_await_message() {
        let mut d = ScriptDriver::parse(CLAIMS).expect("valid");
        d.next_step();
        after(&mut d, claimed("t1", "auth"));
        after(&mut d, rejected());
        d.observe(approved());
        d.observe(message());
        assert!(matches!(
            d.next_step(),
            Step::Call(ToolCall::WriteFile { .. })
        ));
        after(&mut d, ok());
        assert!(matches!(
            after(&mut d, ok()),
            Step::Task(TaskCall::Complete { .. })
        ));
    }

    #[test]
    fn a_task_whose_plans_are_all_rejected_is_kept_and_nothing_more_is_claimed() {
        let mut d = ScriptDriver::parse(CLAIMS).expect("valid");
        d.next_step();
        after(&mut d, claimed("t1", "auth"));
        after(&mut d, rejected());
        assert!(
            matches!(after(&mut d, rejected()), Step::Idle(r) if r.contains("\"auth\" was rejected"))
        );
        let claimable = Observation::TaskClaimable {
            task_id: "t2".into(),
            subject: "docs".into(),
        };
        assert!(matches!(after(&mut d, claimable), Step::Idle(_)));
    }

    #[test]
    fn with_claim_next_top_level_plans_and_actions_are_for_any_task() {
        let script = r#"
claim = "next"

[[plans]]
summary = "any task"
files = ["notes.md"]

[[actions]]
phase = "work"
tool = "write_file"
path = "notes.md"
content = "done"

[[tasks]]
subject = "auth"
summary = "auth done"
"#;
        let mut d = ScriptDriver::parse(script).expect("valid");
        assert_eq!(
            after(&mut d, Observation::Started),
            Step::Task(TaskCall::Claim(None))
        );
        let plan = after(&mut d, claimed("t1", "docs"));
        assert!(
            matches!(&plan, Step::Submit(p) if p.summary == "any task" && p.task_id == "t1"),
            "{plan:?}"
        );
        assert!(matches!(
            after(&mut d, approved()),
            Step::Call(ToolCall::WriteFile { .. })
        ));
        assert_eq!(
            after(&mut d, ok()),
            Step::Task(TaskCall::Complete {
                task_id: "t1".into(),
                summary: "done: docs".into()
            })
        );
        assert_eq!(after(&mut d, ok()), Step::Task(TaskCall::Claim(None)));
        // A task with a section of its own gets that one.
        let own = after(&mut d, claimed("t2", "auth"));
        assert!(
            matches!(&own, Step::Submit(p) if p.summary == "auth" && p.task_id == "t2"),
            "{own:?}"
        );
    }

    #[test]
    fn bad_scripts_say_what_is_wrong() {
        let missing = "[[actions]]\nphase = \"work\"\ntool = \"write_file\"\npath = \"a\"\n";
        assert!(ScriptDriver::parse(missing)
            .expect_err("missing content")
            .contains("actions[0]: write_file needs `content`"));
        assert!(
            ScriptDriver::parse("[[actions]]\nphase = \"work\"\ntool = \"rm\"\n")
                .expect_err("unknown")
                .contains("unknown tool")
        );
        let no_text = "claim = \"next\"\n[[tasks]]\n[[tasks.actions]]\nphase = \"work\"\ntool = \"send_message\"\nto = \"a\"\n";
        assert!(ScriptDriver::parse(no_text)
            .expect_err("missing text")
            .contains("tasks[0].actions[0]: send_message needs `text`"));
        assert!(ScriptDriver::parse("[[tasks]]\nsubject = \"x\"\n")
            .expect_err("no claim")
            .contains("need claim"));
        let twice = "claim = \"next\"\n[[plans]]\nsummary = \"x\"\n[[tasks]]\nsubject = \"*\"\n";
        assert!(ScriptDriver::parse(twice)
            .expect_err("top-level plans and a catch-all")
            .contains("a second section for subject \"*\" (the top-level plans"));
        assert!(
            ScriptDriver::parse("claim = \"next\"\n[[tasks]]\n[[tasks]]\n")
                .expect_err("two catch-alls")
                .contains("a second section")
        );
        assert!(ScriptDriver::parse("claim = \"all\"").is_err());
        assert!(ScriptDriver::parse("bogus = 1").is_err());
        assert!(ScriptDriver::parse("[shutdown]\n").is_ok_and(|d| d.shutdown.approve));
    }
}
