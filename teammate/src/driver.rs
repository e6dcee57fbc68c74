//! What decides a teammate's next step: a [`Driver`]. The script driver reads
//! a TOML file; the model driver ([`crate::model`]) asks a language model.
//! Either sees only the tools of the current mode, and neither holds the
//! gate's capability: every step it asks for runs through the session.

use std::future::Future;

use serde::Deserialize;
use shared::{grant::Mode, pb};

use crate::tools::ToolCall;

/// The teammate's next move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Run one tool (through the gate).
    Call(ToolCall),
    /// Submit a plan for approval (after a rejection, it supersedes the last one).
    Submit(pb::Plan),
    /// Send a text message to a member, the lead, or `*`.
    Send { to: String, text: String },
    /// A call that cannot be made as asked (an unknown tool, malformed
    /// arguments): reported to the lead as refused, and answered with `problem`.
    Invalid {
        tool: String,
        args_json: String,
        problem: String,
    },
    /// Nothing to do: report idle with this reason and wait for a message.
    Idle(String),
    /// A call on the shared task list.
    Task(TaskCall),
}

/// A call on the shared task list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskCall {
    /// `list_tasks()`.
    List,
    /// `claim_task(task_id?)`: that task, or the oldest claimable one.
    Claim(Option<String>),
    /// `complete_task(task_id, summary)`.
    Complete { task_id: String, summary: String },
}

/// What happened since the last step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    /// The teammate just joined.
    Started,
    /// The last step that was a call (tool, message, invalid call) ended:
    /// its output, or why it failed or was refused.
    ToolResult(Result<String, String>),
    /// The plan was rejected; revise against the feedback.
    PlanRejected {
        /// Why.
        feedback: String,
    },
    /// The plan was approved; the gated tools of the grant's mode are available.
    PlanApproved {
        /// The grant's mode.
        mode: Mode,
        /// Where writes may go (the plan's files if the grant named none).
        write_paths: Vec<String>,
    },
    /// A message from another member or the lead.
    Message {
        /// Who sent it.
        from: String,
        /// What it says.
        text: String,
    },
    /// The plan is still under review after [`Driver::review_wait`]; the
    /// decision arrives later as `PlanApproved` or `PlanRejected`.
    PlanPending {
        /// The plan's request id.
        request_id: String,
    },
    /// The teammate agreed to a shutdown request and the lead knows: it has
    /// left the team.
    ShutdownAgreed,
    /// A task of the shared list can be claimed now.
    TaskClaimable {
        /// Its id.
        task_id: String,
        /// What it is.
        subject: String,
    },
    /// The teammate refused a shutdown request and goes on.
    ShutdownRefused {
        /// What it told the lead.
        reason: String,
    },
}

/// How the teammate answers a shutdown request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShutdownAnswer {
    /// Agree (and exit) or refuse (and keep working).
    pub approve: bool,
    /// Said to the lead.
    pub reason: String,
}

/// Why a driver cannot go on (a model server that refuses every request).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct DriverError(pub String);

/// Decides the teammate's steps.
pub trait Driver: Send {
    /// Takes in what happened.
    fn observe(&mut self, seen: Observation);

    /// The next step, given the tools of the current mode. Cancel-safe: a
    /// step dropped before it ends leaves the driver as it was, so the
    /// session can stop waiting for it (a shutdown request arrived).
    fn step(
        &mut self,
        tools: &[&'static str],
    ) -> impl Future<Output = Result<Step, DriverError>> + Send;

    /// How long a submitted plan's review is waited for before the step
    /// ends with [`Observation::PlanPending`]; `None` waits for the decision.
    fn review_wait(&self) -> Option<std::time::Duration> {
        None
    }

    /// Whether news (a message, a late decision) should cancel the step in
    /// progress so that the driver observes it at once. A model call is too
    /// dear to cancel for news; an agent waiting for its next call is not.
    fn hears_while_thinking(&self) -> bool {
        false
    }

    /// The answer to a shutdown request, given before `deadline_unix_ms`;
    /// `tools` are those of the current mode plus `respond_shutdown`.
    fn answer_shutdown(
        &mut self,
        request: &pb::ShutdownRequest,
        tools: &[&'static str],
    ) -> impl Future<Output = ShutdownAnswer> + Send;
}

/// A script, as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Submitted in order: the first, then the next after each rejection.
    #[serde(default)]
    pub plans: Vec<PlanSpec>,
    /// Run in order within their phase.
    #[serde(default)]
    pub actions: Vec<Action>,
    /// How to answer a shutdown request.
    #[serde(default)]
    pub shutdown: ShutdownSpec,
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
    /// The tool call it describes; the error names the missing argument.
    fn to_call(&self, index: usize) -> Result<ToolCall, String> {
        let arg = |name: &str, value: &Option<String>| {
            value
                .clone()
                .ok_or_else(|| format!("actions[{index}]: {} needs `{name}`", self.tool))
        };
        Ok(match self.tool.as_str() {
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
            "run_command" => ToolCall::RunCommand {
                command: arg("command", &self.command)?,
            },
            other => return Err(format!("actions[{index}]: unknown tool {other:?}")),
        })
    }
}

/// Runs a script: plan-phase actions, then plans until one is approved, then
/// work actions, then idle.
#[derive(Debug)]
pub struct ScriptDriver {
    /// Plan-phase calls, in order.
    plan_calls: Vec<ToolCall>,
    /// Work-phase calls, in order.
    work_calls: Vec<ToolCall>,
    /// Plans to submit, in order.
    plans: Vec<pb::Plan>,
    /// The shutdown answer.
    shutdown: ShutdownSpec,
    /// Where the script is.
    cursor: Cursor,
    /// What happened last, for the next step.
    seen: Option<Observation>,
}

/// The script driver's position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cursor {
    /// Running plan-phase call `n`.
    Planning(usize),
    /// Plan `n` was submitted and awaits review.
    Reviewing(usize),
    /// Running work call `n`.
    Working(usize),
    /// Done.
    Idle,
}

impl ScriptDriver {
    /// Parses and checks a script.
    pub fn parse(text: &str) -> Result<Self, String> {
        let script: Script = toml::from_str(text).map_err(|e| format!("script: {e}"))?;
        let mut plan_calls = Vec::new();
        let mut work_calls = Vec::new();
        for (i, action) in script.actions.iter().enumerate() {
            let call = action.to_call(i)?;
            match action.phase {
                Phase::Plan => plan_calls.push(call),
                Phase::Work => work_calls.push(call),
            }
        }
        let plans = script
            .plans
            .into_iter()
            .map(|p| pb::Plan {
                summary: p.summary,
                steps: p.steps,
                files: p.files,
                tests: p.tests,
                body: p.body,
                task_id: String::new(),
            })
            .collect();
        Ok(Self {
            plan_calls,
            work_calls,
            plans,
            shutdown: script.shutdown,
            cursor: Cursor::Planning(0),
            seen: None,
        })
    }

    /// The step at the cursor, moving it on.
    fn advance(&mut self) -> Step {
        loop {
            match self.cursor {
                Cursor::Planning(n) if n < self.plan_calls.len() => {
                    self.cursor = Cursor::Planning(n + 1);
                    return Step::Call(self.plan_calls[n].clone());
                }
                Cursor::Planning(_) => match self.plans.first() {
                    Some(plan) => {
                        self.cursor = Cursor::Reviewing(0);
                        return Step::Submit(plan.clone());
                    }
                    None => self.cursor = Cursor::Working(0),
                },
                Cursor::Reviewing(_) => return Step::Idle("waiting for the plan's review".into()),
                Cursor::Working(n) if n < self.work_calls.len() => {
                    self.cursor = Cursor::Working(n + 1);
                    return Step::Call(self.work_calls[n].clone());
                }
                Cursor::Working(_) => {
                    self.cursor = Cursor::Idle;
                    return Step::Idle("work done".into());
                }
                Cursor::Idle => return Step::Idle("nothing to do".into()),
            }
        }
    }
}

impl ScriptDriver {
    /// The next step, given what just happened.
    fn next_step(&mut self, seen: Observation) -> Step {
        match (seen, self.cursor) {
            (Observation::PlanRejected { .. }, Cursor::Reviewing(n)) => match self.plans.get(n + 1)
            {
                Some(plan) => {
                    self.cursor = Cursor::Reviewing(n + 1);
                    Step::Submit(plan.clone())
                }
                None => {
                    self.cursor = Cursor::Idle;
                    Step::Idle("every plan in the script was rejected".into())
                }
            },
            (Observation::PlanApproved { .. }, Cursor::Reviewing(_)) => {
                self.cursor = Cursor::Working(0);
                self.advance()
            }
            _ => self.advance(),
        }
    }
}

impl Driver for ScriptDriver {
    fn observe(&mut self, seen: Observation) {
        self.seen = Some(seen);
    }

    async fn step(&mut self, _tools: &[&'static str]) -> Result<Step, DriverError> {
        let seen = self.seen.take().unwrap_or(Observation::Started);
        Ok(self.next_step(seen))
    }

    async fn answer_shutdown(
        &mut self,
        _request: &pb::ShutdownRequest,
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

    #[test]
    fn a_script_plans_revises_works_and_idles() {
        let mut d = ScriptDriver::parse(SCRIPT).expect("valid");
        let write = ToolCall::WriteFile {
            path: "a.rs".into(),
            content: "x".into(),
        };
        assert_eq!(d.next_step(Observation::Started), Step::Call(write));
        let refused = Observation::ToolResult(Err("refused".into()));
        assert!(matches!(d.next_step(refused), Step::Submit(p) if p.summary == "one"));
        let rejected = Observation::PlanRejected {
            feedback: "no tests".into(),
        };
        assert!(matches!(d.next_step(rejected), Step::Submit(p) if p.summary == "two"));
        assert_eq!(
            d.next_step(Observation::PlanApproved {
                mode: Mode::AcceptEdits,
                write_paths: Vec::new()
            }),
            Step::Call(ToolCall::RunCommand {
                command: "true".into()
            })
        );
        let ran = Observation::ToolResult(Ok(String::new()));
        assert_eq!(d.next_step(ran), Step::Idle("work done".into()));
        let message = Observation::Message {
            from: "bob".into(),
            text: "hi".into(),
        };
        assert!(matches!(d.next_step(message), Step::Idle(_)));
        let answer = d.shutdown.clone();
        assert!(!answer.approve);
        assert_eq!(answer.reason, "busy");
    }

    #[test]
    fn running_out_of_plans_idles() {
        let mut d = ScriptDriver::parse("[[plans]]\nsummary = \"only\"\n").expect("valid");
        assert!(matches!(d.next_step(Observation::Started), Step::Submit(_)));
        let rejected = Observation::PlanRejected {
            feedback: "no".into(),
        };
        assert!(matches!(d.next_step(rejected), Step::Idle(r) if r.contains("rejected")));
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
        assert!(ScriptDriver::parse("bogus = 1").is_err());
        assert!(ScriptDriver::parse("[shutdown]\n").is_ok_and(|d| d.shutdown.approve));
    }
}
