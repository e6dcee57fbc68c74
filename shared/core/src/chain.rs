//! The reviewer chain's rule (`--approval chain:FILE`), without its stages'
//! machinery: what follows each stage's verdict, and the decision the chain
//! makes. The lead's `chain` module holds the runnable stages (a policy, a
//! program, a model, a person) and asks this rule what comes next.
//!
//! ```text
//!   verdict of stage `at`        plan not escalated        plan escalated
//!   error                        a person (why)            a person (why)
//!   approve / reject             decide                    next stage
//!   pass                         next stage                next stage
//!   (no next stage)              a person                  a person
//! ```

use serde::Deserialize;

use crate::{
    error::FieldError,
    grant::{Grant, Mode, PathSet},
    holds::Overlap,
    limits,
    plan::Plan,
    policy::{self, Policy},
    protocol::Decision,
};

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

/// A chain's rule: its stages by name, in order, and the files that always
/// end with a person.
#[derive(Debug, Clone)]
pub struct Rule {
    /// How each stage signs its verdicts (`policy`, `program NAME`, ...).
    names: Vec<String>,
    /// Plans whose files match always end with a person.
    escalate: PathSet,
}

impl Rule {
    /// A rule over stages named `names`, escalating plans that write a file
    /// matching one of `escalate`.
    pub fn new(names: Vec<String>, escalate: &[String]) -> Result<Self, FieldError> {
        Ok(Self {
            names,
            escalate: PathSet::new("escalate", escalate)?,
        })
    }

    /// How many stages it has.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether it has no stage.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The name of stage `at` (empty past the end).
    pub fn name(&self, at: usize) -> &str {
        self.names.get(at).map(String::as_str).unwrap_or_default()
    }

    /// Whether a plan writing `files` must end with a person.
    pub fn escalates(&self, files: &[String]) -> bool {
        files.iter().any(|f| self.escalate.matches(f))
    }

    /// What follows stage `at`'s `verdict`, for a plan that `escalated` or not.
    pub fn after(&self, at: usize, verdict: &Verdict, escalated: bool) -> Next {
        let next = || {
            if at + 1 < self.names.len() {
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

    /// The decision of a chain that decided with stage `at`'s `verdict`
    /// (approve or reject), its feedback signed with the stage's name.
    pub fn decision(&self, at: usize, verdict: Verdict) -> Decision {
        let name = self.name(at);
        let signed = |words: &str| {
            limits::cut(
                &if words.is_empty() {
                    name.to_owned()
                } else {
                    format!("{name}: {words}")
                },
                limits::REASON,
            )
        };
        match verdict {
            Verdict::Approve { grant, words } => Decision {
                approve: true,
                feedback: format!("approved by {}", signed(&words)),
                grant: Some(grant.unwrap_or_else(|| Grant::of_plan(Mode::AcceptEdits))),
            },
            verdict => Decision {
                approve: false,
                feedback: format!("rejected by {}", signed(verdict.words())),
                grant: None,
            },
        }
    }
}

/// A policy stage's verdict on `plan`: every criterion holding approves
/// (`on_pass = "approve"`) or passes it on; any unmet rejects, naming each.
pub fn policy_verdict(
    policy: &Policy,
    on_pass: OnPass,
    plan: &Plan,
    overlaps: &[Overlap],
) -> Verdict {
    match policy.review(plan, overlaps) {
        policy::Verdict::Approve(grant) if on_pass == OnPass::Approve => Verdict::Approve {
            grant: Some(grant),
            words: "every criterion holds".into(),
        },
        policy::Verdict::Approve(_) => Verdict::Pass {
            words: "every criterion holds".into(),
        },
        policy::Verdict::Reject(unmet) => Verdict::Reject {
            words: unmet.join("; "),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(names: &[&str], escalate: &[&str]) -> Rule {
        Rule::new(
            names.iter().map(|s| s.to_string()).collect(),
            &escalate.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
        .expect("globs")
    }

    #[test]
    fn every_verdict_at_every_place() {
        let two = rule(&["program check", "human"], &["db/**"]);
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
        let one = rule(&["program check"], &["db/**"]);
        assert!(matches!(one.after(0, &pass, false), Next::Person(r) if r.contains("every stage")));
        assert!(matches!(one.after(0, &approve, true), Next::Person(r) if r.contains("escalated")));
        assert_eq!(one.after(0, &approve, false), Next::Decide(approve));
        assert!(one.escalates(&["src/a.rs".into(), "db/schema.sql".into()]));
        assert!(!one.escalates(&["src/a.rs".into()]));
        assert!(Rule::new(vec![], &["../x".into()]).is_err());
    }

    #[test]
    fn decisions_are_signed_by_the_deciding_stage() {
        let chain = rule(&["policy", "model reviewer"], &[]);
        let approved = chain.decision(
            1,
            Verdict::Approve {
                grant: None,
                words: "fine".into(),
            },
        );
        assert!(approved.approve);
        assert_eq!(approved.feedback, "approved by model reviewer: fine");
        assert_eq!(approved.grant, Some(Grant::of_plan(Mode::AcceptEdits)));
        let rejected = chain.decision(0, Verdict::Reject { words: "".into() });
        assert!(!rejected.approve);
        assert_eq!(rejected.feedback, "rejected by policy");
        assert_eq!(rejected.grant, None);
        let long = chain.decision(
            0,
            Verdict::Reject {
                words: "x".repeat(limits::REASON * 2),
            },
        );
        assert!(long.feedback.len() <= limits::REASON + "rejected by ".len());
    }

    #[test]
    fn a_policy_stage_approves_or_passes_what_meets_every_criterion() {
        let policy = Policy::parse("require_tests = true\n").expect("policy");
        let tested = Plan {
            summary: "s".into(),
            tests: vec!["t".into()],
            ..Default::default()
        };
        let untested = Plan {
            summary: "s".into(),
            ..Default::default()
        };
        assert!(matches!(
            policy_verdict(&policy, OnPass::Approve, &tested, &[]),
            Verdict::Approve { grant: Some(_), .. }
        ));
        assert!(matches!(
            policy_verdict(&policy, OnPass::Next, &tested, &[]),
            Verdict::Pass { .. }
        ));
        assert!(matches!(
            policy_verdict(&policy, OnPass::Next, &untested, &[]),
            Verdict::Reject { words } if words.contains("require_tests")
        ));
    }
}
