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
//!
//! # Results (`lead serve --repo`), when given: stages of the same kinds.
//! [[result_stages]]
//! kind = "policy"                 # grant scope, deny_write, max_files, max_changed_lines
//! file = "policy.toml"
//!
//! [[result_stages]]
//! kind = "program"                # runs in a scratch worktree of the result's commit
//! command = ["./run-tests.sh"]    # exit 0 approves; any other rejects, its output the feedback
//! timeout_secs = 600
//! ```
//!
//! Without `result_stages`, results wait for an operator.
//!
//! What follows a verdict is a pure function ([`Chain::after`]); the hub runs
//! the stages and records each verdict in the request's history. A stage that
//! errs never approves: the plan goes to a person, with the error shown. A
//! plan that escalates hears every machine stage as advice and ends with a
//! person, whatever they said. Running out of stages also ends with a person.

use std::{path::Path, sync::Arc, time::Duration};

use crate::reviewer::Reviewer;
pub use mesh_core::chain::{Next, OnPass, Rule, Verdict};
use mesh_core::policy::Policy;
use serde::Deserialize;

pub(crate) mod program;
pub(crate) mod stages;
pub use program::run_program;

/// The chain file, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChainFile {
    #[serde(default)]
    escalate: Vec<String>,
    stages: Vec<StageFile>,
    /// The stages results go through (`lead serve --repo`).
    #[serde(default)]
    result_stages: Vec<StageFile>,
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

/// A configured chain.
#[derive(Debug, Clone)]
pub struct Chain {
    /// Tried in order.
    stages: Vec<Stage>,
    /// What follows each verdict.
    rule: Rule,
    /// The chain results go through, if the file gives one.
    results: Option<Arc<Chain>>,
}

impl Chain {
    /// The chain a TOML file describes; files it names are read relative to
    /// `dir`.
    pub fn parse(text: &str, dir: &Path) -> Result<Self, String> {
        let file: ChainFile = toml::from_str(text).map_err(|e| e.message().to_owned())?;
        if file.stages.is_empty() {
            return Err("stages: is empty; name at least one stage".into());
        }
        let results = if file.result_stages.is_empty() {
            None
        } else {
            Some(Arc::new(Self::of_stages(
                file.result_stages,
                &file.escalate,
                dir,
                "result_stages",
            )?))
        };
        let mut chain = Self::of_stages(file.stages, &file.escalate, dir, "stages")?;
        chain.results = results;
        Ok(chain)
    }

    /// The chain of `files` stages, as the file's `key` lists them.
    fn of_stages(
        files: Vec<StageFile>,
        escalate: &[String],
        dir: &Path,
        key: &str,
    ) -> Result<Self, String> {
        let read = |i: usize, name: &str| {
            std::fs::read_to_string(dir.join(name))
                .map_err(|e| format!("{key}[{i}].file: {name}: {e}"))
        };
        let mut stages = Vec::with_capacity(files.len());
        for (i, stage) in files.into_iter().enumerate() {
            stages.push(match stage {
                StageFile::Policy { file, on_pass } => Stage::Policy {
                    policy: Policy::parse(&read(i, &file)?)
                        .map_err(|e| format!("{key}[{i}] ({file}): {e}"))?,
                    on_pass,
                },
                StageFile::Program {
                    command,
                    timeout_secs,
                } => {
                    if command.first().is_none_or(|c| c.is_empty()) {
                        return Err(format!("{key}[{i}].command: is empty"));
                    }
                    Stage::Program {
                        command,
                        timeout: Duration::from_secs(timeout_secs.max(1)),
                    }
                }
                StageFile::Model { file } => Stage::Model(Arc::new(
                    Reviewer::parse(&read(i, &file)?)
                        .map_err(|e| format!("{key}[{i}] ({file}): {e}"))?,
                )),
                StageFile::Human => Stage::Human,
            });
        }
        let names = stages.iter().map(Stage::name).collect();
        let rule = Rule::new(names, escalate).map_err(|e| e.to_string())?;
        Ok(Self {
            stages,
            rule,
            results: None,
        })
    }

    /// The chain results go through, if the file gives one.
    pub fn results(&self) -> Option<&Arc<Chain>> {
        self.results.as_ref()
    }

    /// Stage `n`.
    pub fn stage(&self, n: usize) -> Option<&Stage> {
        self.stages.get(n)
    }

    /// What follows each verdict.
    pub fn rule(&self) -> &Rule {
        &self.rule
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
