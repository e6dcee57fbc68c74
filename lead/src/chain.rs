//! A chain of reviewers (`--approval chain:FILE`): stages tried in order for
//! each plan, each of which approves, rejects (feedback to the teammate) or
//! passes to the next; a person sees only what the machines could not decide.
//!
//! ```toml
//! escalate = ["db/**"]            # plans touching these always end with a person
//!
//! [[stages]]
//! kind = "policy"
//! file = "policy.toml"            # relative to this file
//! on_pass = "next"                # every criterion holds: "next" (default) or "approve"
//!
//! [[stages]]
//! kind = "program"
//! command = ["./review.sh"]       # the plan request as JSON on stdin
//! timeout_secs = 30               # exit 0 approves, 2 rejects (stderr: feedback), 1 passes
//!
//! [[stages]]
//! kind = "model"
//! file = "reviewer.toml"          # as --approval model:FILE
//!
//! [[stages]]
//! kind = "human"                  # waits for an operator
//! ```
//!
//! What follows a verdict is a pure function ([`Chain::after`]); the hub runs
//! the stages and records each verdict in the request's history. A stage that
//! errs never approves: the plan goes to a person, with the error shown. A
//! plan that escalates hears every machine stage as advice and ends with a
//! person, whatever they said. Running out of stages also ends with a person.

use std::{path::Path, sync::Arc, time::Duration};

use crate::reviewer::Reviewer;
use serde::Deserialize;
use shared::{
    grant::{Grant, PathSet},
    policy::Policy,
};

mod program;
pub(crate) mod stages;
pub use program::run_program;

/// The chain file, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChainFile {
    #[serde(default)]
    escalate: Vec<String>,
    stages: Vec<StageFile>,
}

/// One stage, as written.
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
enum StageFile {
    Policy {
        file: String,
        #[serde(default)]
        on_pass: OnPass,
    },
    Program {
        command: Vec<String>,
        #[serde(default = "default_timeout")]
        timeout_secs: u64,
    },
    Model {
        file: String,
    },
    Human,
}

fn default_timeout() -> u64 {
    30
}

/// What a policy stage does with a plan that meets every criterion.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnPass {
    /// Pass it to the next stage.
    #[default]
    Next,
    /// Approve it.
    Approve,
}

/// One stage of a chain.
#[derive(Debug, Clone)]
pub enum Stage {
    /// A policy's criteria.
    Policy { policy: Policy, on_pass: OnPass },
    /// A program: the plan request on stdin, the verdict in its exit status.
    Program {
        command: Vec<String>,
        timeout: Duration,
    },
    /// The language-model reviewer.
    Model(Arc<Reviewer>),
    /// An operator.
    Human,
}

impl Stage {
    /// How its verdicts are signed in a request's history.
    pub fn name(&self) -> String {
        match self {
            Stage::Policy { .. } => "policy".into(),
            Stage::Program { command, .. } => {
                let program = command.first().map(String::as_str).unwrap_or_default();
                let short = Path::new(program)
                    .file_name()
                    .map_or(program.into(), |n| n.to_string_lossy());
                format!("program {short}")
            }
            Stage::Model(reviewer) => reviewer.name(),
            Stage::Human => "human".into(),
        }
    }
}

/// What a stage said of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Approve, with this grant (`None`: the plan's files, ACCEPT_EDITS).
    Approve { grant: Option<Grant>, words: String },
    /// Reject; `words` is the teammate's feedback.
    Reject { words: String },
    /// No opinion: the next stage decides.
    Pass { words: String },
    /// The stage could not decide (crashed, timed out, misconfigured).
    Error { words: String },
}

impl Verdict {
    /// Its name in a request's history.
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Approve { .. } => "approve",
            Verdict::Reject { .. } => "reject",
            Verdict::Pass { .. } => "pass",
            Verdict::Error { .. } => "error",
        }
    }

    /// Its words.
    pub fn words(&self) -> &str {
        match self {
            Verdict::Approve { words, .. }
            | Verdict::Reject { words }
            | Verdict::Pass { words }
            | Verdict::Error { words } => words,
        }
    }
}

/// What follows a verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Run stage `n`.
    Run(usize),
    /// The chain decided: approve (with the grant, if any) or reject.
    Decide(Verdict),
    /// A person decides; the reason is shown to them.
    Person(String),
}

/// A configured chain.
#[derive(Debug, Clone)]
pub struct Chain {
    /// Tried in order.
    stages: Vec<Stage>,
    /// Plans whose files match always end with a person.
    escalate: PathSet,
}

impl Chain {
    /// The chain a TOML file describes; files it names are read relative to
    /// `dir`.
    pub fn parse(text: &str, dir: &Path) -> Result<Self, String> {
        let file: ChainFile = toml::from_str(text).map_err(|e| e.message().to_owned())?;
        if file.stages.is_empty() {
            return Err("stages: is empty; name at least one stage".into());
        }
        let escalate = PathSet::new("escalate", &file.escalate).map_err(|e| e.to_string())?;
        let read = |i: usize, name: &str| {
            std::fs::read_to_string(dir.join(name))
                .map_err(|e| format!("stages[{i}].file: {name}: {e}"))
        };
        let mut stages = Vec::with_capacity(file.stages.len());
        for (i, stage) in file.stages.into_iter().enumerate() {
            stages.push(match stage {
                StageFile::Policy { file, on_pass } => Stage::Policy {
                    policy: Policy::parse(&read(i, &file)?)
                        .map_err(|e| format!("stages[{i}] ({file}): {e}"))?,
                    on_pass,
                },
                StageFile::Program {
                    command,
                    timeout_secs,
                } => {
                    if command.first().is_none_or(|c| c.is_empty()) {
                        return Err(format!("stages[{i}].command: is empty"));
                    }
                    Stage::Program {
                        command,
                        timeout: Duration::from_secs(timeout_secs.max(1)),
                    }
                }
                StageFile::Model { file } => Stage::Model(Arc::new(
                    Reviewer::parse(&read(i, &file)?)
                        .map_err(|e| format!("stages[{i}] ({file}): {e}"))?,
                )),
                StageFile::Human => Stage::Human,
            });
        }
        Ok(Self { stages, escalate })
    }

    /// Stage `n`.
    pub fn stage(&self, n: usize) -> Option<&Stage> {
        self.stages.get(n)
    }

    /// Whether a plan writing `files` must end with a person.
    pub fn escalates(&self, files: &[String]) -> bool {
        files.iter().any(|f| self.escalate.matches(f))
    }

    /// What follows stage `at`'s `verdict`, for a plan that `escalated` or not.
    pub fn after(&self, at: usize, verdict: &Verdict, escalated: bool) -> Next {
        let next = || {
            if at + 1 < self.stages.len() {
                Next::Run(at + 1)
            } else {
                Next::Person(if escalated {
                    "the plan's files are escalated to a person".into()
                } else {
                    "every stage passed it on".into()
                })
            }
        };
        match verdict {
            Verdict::Error { words } => Next::Person(format!("{} failed: {words}", self.name(at))),
            _ if escalated => next(),
            Verdict::Approve { .. } | Verdict::Reject { .. } => Next::Decide(verdict.clone()),
            Verdict::Pass { .. } => next(),
        }
    }

    /// The name of stage `at`.
    fn name(&self, at: usize) -> String {
        self.stages.get(at).map(Stage::name).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(stages: Vec<Stage>, escalate: &[&str]) -> Chain {
        Chain {
            stages,
            escalate: PathSet::new(
                "escalate",
                &escalate.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )
            .expect("globs"),
        }
    }

    fn program() -> Stage {
        Stage::Program {
            command: vec!["check".into()],
            timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn every_verdict_at_every_place() {
        let two = chain(vec![program(), Stage::Human], &["db/**"]);
        let approve = Verdict::Approve {
            grant: None,
            words: "ok".into(),
        };
        let reject = Verdict::Reject { words: "no".into() };
        let pass = Verdict::Pass { words: "".into() };
        let error = Verdict::Error {
            words: "crashed".into(),
        };
        // Not escalated: approve and reject decide, pass moves on, error goes to a person.
        assert_eq!(two.after(0, &approve, false), Next::Decide(approve.clone()));
        assert_eq!(two.after(0, &reject, false), Next::Decide(reject.clone()));
        assert_eq!(two.after(0, &pass, false), Next::Run(1));
        assert_eq!(
            two.after(0, &error, false),
            Next::Person("program check failed: crashed".into())
        );
        // Escalated: every machine verdict is advice; errors still go to a person.
        assert_eq!(two.after(0, &approve, true), Next::Run(1));
        assert_eq!(two.after(0, &reject, true), Next::Run(1));
        assert_eq!(two.after(0, &pass, true), Next::Run(1));
        assert!(matches!(two.after(0, &error, true), Next::Person(_)));
        // The last stage passing, or advising on an escalated plan: a person.
        let one = chain(vec![program()], &["db/**"]);
        assert!(matches!(one.after(0, &pass, false), Next::Person(r) if r.contains("every stage")));
        assert!(matches!(one.after(0, &approve, true), Next::Person(r) if r.contains("escalated")));
        assert_eq!(one.after(0, &approve, false), Next::Decide(approve));
        assert!(one.escalates(&["src/a.rs".into(), "db/schema.sql".into()]));
        assert!(!one.escalates(&["src/a.rs".into()]));
    }

    #[test]
    fn files_say_what_is_wrong() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("p.toml"), "require_tests = true\n").expect("write");
        let good = "escalate = [\"db/**\"]\n[[stages]]\nkind = \"policy\"\nfile = \"p.toml\"\non_pass = \"approve\"\n[[stages]]\nkind = \"program\"\ncommand = [\"true\"]\n[[stages]]\nkind = \"human\"\n";
        let chain = Chain::parse(good, dir.path()).expect("valid");
        assert!(matches!(
            chain.stage(0),
            Some(Stage::Policy {
                on_pass: OnPass::Approve,
                ..
            })
        ));
        assert_eq!(
            chain.stage(1).map(Stage::name).as_deref(),
            Some("program true")
        );
        let cases = [
            (
                "[[stages]]\nkind = \"policy\"\nfile = \"none.toml\"\n",
                "stages[0].file: none.toml",
            ),
            (
                "[[stages]]\nkind = \"program\"\ncommand = []\n",
                "stages[0].command: is empty",
            ),
            ("[[stages]]\nkind = \"oracle\"\n", "oracle"),
            ("stages = []\n", "stages: is empty"),
            (
                "escalate = [\"../x\"]\n[[stages]]\nkind = \"human\"\n",
                "escalate",
            ),
        ];
        for (text, expected) in cases {
            let err = Chain::parse(text, dir.path()).expect_err(text);
            assert!(err.contains(expected), "{text}: {err}");
        }
    }
}
