//! Review policies: criteria an operator writes down once, in TOML, so that
//! the lead can approve or reject plans without a person at the keyboard.
//!
//! ```toml
//! require_tests = true          # "only approve plans that include test coverage"
//! deny_write = ["db/schema/**"] # "reject plans that touch the database schema"
//! max_files = 10
//! deny_overlap = true           # reject plans whose files another teammate holds
//! mode = "accept-edits"         # the grant an approved plan gets (the default)
//! max_changed_lines = 400       # results (`--repo`): at most this many lines changed
//! amend_max_files = 2           # amendments of at most 2 files, none held, none denied: approved
//! require_sandbox = true        # no plan of a teammate whose commands run unconfined
//! ```
//!
//! A result (`lead serve --repo`) is checked on what would land, whatever
//! tools wrote it: every changed path inside the submitter's grant for the
//! task (where it holds one), none under `deny_write`, at most `max_files`
//! files and `max_changed_lines` lines.

use serde::Deserialize;

use crate::{
    error::FieldError,
    grant::{Grant, Mode, PathSet},
    holds::Overlap,
    plan::Plan,
};

/// The policy file, as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    /// Plans must list at least one test.
    #[serde(default)]
    require_tests: bool,
    /// No planned file may match one of these globs.
    #[serde(default)]
    deny_write: Vec<String>,
    /// Plans may write at most this many files.
    max_files: Option<usize>,
    /// Plans may not write files another teammate holds.
    #[serde(default)]
    deny_overlap: bool,
    /// The grant's mode for approved plans.
    mode: Option<String>,
    /// A result may change at most this many lines (added and removed).
    max_changed_lines: Option<u64>,
    /// An amendment adding at most this many files (none held by another
    /// teammate, none under deny_write) is approved without a person.
    amend_max_files: Option<usize>,
    /// No plan of a member whose commands run unconfined is approved.
    #[serde(default)]
    require_sandbox: bool,
}

/// A validated policy.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Plans must list at least one test.
    require_tests: bool,
    /// Paths no plan (and no permission request) may write.
    deny_write: PathSet,
    /// Plans may write at most this many files.
    max_files: Option<usize>,
    /// Plans may not write files another teammate holds.
    deny_overlap: bool,
    /// The grant's mode for approved plans.
    mode: Mode,
    /// A result may change at most this many lines.
    max_changed_lines: Option<u64>,
    /// Amendments of at most this many files may be approved by the policy.
    amend_max_files: Option<usize>,
    /// No plan of a member whose commands run unconfined is approved.
    require_sandbox: bool,
}

/// What a policy says of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every criterion holds: approve with this grant.
    Approve(Grant),
    /// These criteria do not hold; each line names one.
    Reject(Vec<String>),
}

impl Policy {
    /// Parses a policy file's text.
    pub fn parse(text: &str) -> Result<Self, FieldError> {
        let file: PolicyFile =
            toml::from_str(text).map_err(|e| FieldError::new("policy", e.message().to_owned()))?;
        let mode = match file.mode.as_deref() {
            None => Mode::AcceptEdits,
            Some(mode) => Mode::parse("policy.mode", mode)?,
        };
        if mode == Mode::Plan {
            return Err(FieldError::new(
                "policy.mode",
                "an approval cannot grant plan mode",
            ));
        }
        Ok(Self {
            require_tests: file.require_tests,
            deny_write: PathSet::new("policy.deny_write", &file.deny_write)?,
            max_files: file.max_files,
            deny_overlap: file.deny_overlap,
            mode,
            max_changed_lines: file.max_changed_lines,
            amend_max_files: file.amend_max_files,
            require_sandbox: file.require_sandbox,
        })
    }

    /// Whether it approves no plan of a member whose commands run
    /// unconfined (`require_sandbox`).
    pub fn require_sandbox(&self) -> bool {
        self.require_sandbox
    }

    /// Reviews a plan against every criterion; `overlaps` are where its
    /// files fall inside other teammates' holds.
    pub fn review(&self, plan: &Plan, overlaps: &[Overlap]) -> Verdict {
        let mut unmet = Vec::new();
        if self.deny_overlap {
            for overlap in overlaps {
                unmet.push(format!(
                    "deny_overlap: the plan writes {}, which {} holds under an approved plan; \
                     wait until {} completes its task, or plan other files",
                    overlap.files.join(", "),
                    overlap.member,
                    overlap.member
                ));
            }
        }
        if self.require_tests && plan.tests.is_empty() {
            unmet.push(
                "require_tests: the plan lists no tests; add the tests it adds or runs".to_owned(),
            );
        }
        for file in &plan.files {
            if let Some(glob) = self.deny_write.first_match(file) {
                unmet.push(format!(
                    "deny_write: the plan writes {file:?}, which matches {glob:?}"
                ));
            }
        }
        if let Some(max) = self.max_files {
            if plan.files.len() > max {
                unmet.push(format!(
                    "max_files: the plan writes {} files; at most {max} are allowed",
                    plan.files.len()
                ));
            }
        }
        if unmet.is_empty() {
            Verdict::Approve(Grant {
                mode: self.mode,
                write_paths: Vec::new(),
                expires_at_unix_ms: None,
            })
        } else {
            Verdict::Reject(unmet)
        }
    }

    /// Whether a gated tool call may run without a person: file writes outside
    /// `deny_write` may; commands never do (they wait for an operator).
    /// Checks a result on what it would land: the criteria it does not
    /// meet, each in words (none: it meets them all). `scope` is what the
    /// submitter's grant for the task lets it write, where it holds one.
    pub fn review_result(
        &self,
        result: &crate::result::WorkResult,
        scope: Option<&[String]>,
    ) -> Vec<String> {
        let mut unmet = Vec::new();
        let outside = outside_scope(result, scope);
        if !outside.is_empty() {
            unmet.push(format!(
                "grant: the result changes {}, outside what the grant lets it write ({})",
                outside.join(", "),
                scope.unwrap_or_default().join(", ")
            ));
        }
        for file in &result.files {
            if let Some(glob) = self.deny_write.first_match(&file.path) {
                unmet.push(format!(
                    "deny_write: the result changes {:?}, which matches {glob:?}",
                    file.path
                ));
            }
        }
        if let Some(max) = self.max_files {
            if result.files.len() > max {
                unmet.push(format!(
                    "max_files: the result changes {} files; at most {max} are allowed",
                    result.files.len()
                ));
            }
        }
        if let Some(max) = self.max_changed_lines {
            let lines = result.changed_lines();
            if lines > max {
                unmet.push(format!(
                    "max_changed_lines: the result changes {lines} lines; at most {max} are allowed"
                ));
            }
        }
        unmet
    }

    /// Whether an amendment adding `files` (of which `held` fall in another
    /// teammate's hold) is small enough to approve without a person: `Ok`,
    /// or why a person must decide.
    pub fn review_amendment(&self, files: &[String], held: &[Overlap]) -> Result<(), String> {
        let Some(max) = self.amend_max_files else {
            return Err("the policy approves no amendment on its own (amend_max_files)".into());
        };
        if files.len() > max {
            return Err(format!(
                "amend_max_files: it adds {} files; the policy approves at most {max}",
                files.len()
            ));
        }
        if let Some(overlap) = held.first() {
            return Err(format!(
                "{} holds {}",
                overlap.member,
                overlap.files.join(", ")
            ));
        }
        if let Some((file, glob)) = files
            .iter()
            .find_map(|f| self.deny_write.first_match(f).map(|g| (f, g)))
        {
            return Err(format!("deny_write: {file:?} matches {glob:?}"));
        }
        Ok(())
    }

    pub fn allows_call(&self, tool: &str, path: Option<&str>) -> Option<bool> {
        match (tool, path) {
            ("write_file" | "edit_file", Some(path)) => Some(!self.deny_write.matches(path)),
            _ => None,
        }
    }
}

/// The paths `result` changes outside `scope` (globs); none without a scope.
pub fn outside_scope(result: &crate::result::WorkResult, scope: Option<&[String]>) -> Vec<String> {
    let Some(scope) = scope else {
        return Vec::new();
    };
    let Ok(set) = PathSet::new("scope", scope) else {
        // A scope that is not a set of globs lets nothing through.
        return result.paths();
    };
    result
        .files
        .iter()
        .filter(|f| !set.matches(&f.path))
        .map(|f| f.path.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(files: &[&str], tests: &[&str]) -> Plan {
        Plan {
            summary: "s".into(),
            files: files.iter().map(|s| s.to_string()).collect(),
            tests: tests.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_rejection_names_every_unmet_criterion() {
        let policy =
            Policy::parse("require_tests = true\ndeny_write = [\"db/**\"]\nmax_files = 1\n")
                .expect("valid");
        match policy.review(&plan(&["db/schema.sql", "src/a.rs"], &[]), &[]) {
            Verdict::Reject(unmet) => {
                assert_eq!(unmet.len(), 3, "{unmet:?}");
                assert!(unmet[0].starts_with("require_tests"));
                assert!(unmet[1].contains("db/schema.sql") && unmet[1].contains("db/**"));
                assert!(unmet[2].starts_with("max_files"));
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
        assert_eq!(
            policy.review(&plan(&["src/a.rs"], &["tests/a.rs"]), &[]),
            Verdict::Approve(Grant {
                mode: Mode::AcceptEdits,
                write_paths: vec![],
                expires_at_unix_ms: None
            })
        );
    }

    #[test]
    fn deny_overlap_names_the_holder_and_the_files() {
        let overlaps = [Overlap {
            member: "alice".into(),
            files: vec!["src/auth.rs".into()],
        }];
        let strict = Policy::parse("deny_overlap = true").expect("valid");
        match strict.review(&plan(&["src/auth.rs"], &[]), &overlaps) {
            Verdict::Reject(unmet) => {
                assert!(
                    unmet[0].contains("alice") && unmet[0].contains("src/auth.rs"),
                    "{unmet:?}"
                );
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
        let lax = Policy::parse("").expect("valid");
        assert!(matches!(
            lax.review(&plan(&["src/auth.rs"], &[]), &overlaps),
            Verdict::Approve(_)
        ));
    }

    #[test]
    fn the_grant_mode_is_configurable_but_never_plan() {
        let policy = Policy::parse("mode = \"bypass\"").expect("valid");
        assert!(
            matches!(policy.review(&plan(&[], &[]), &[]), Verdict::Approve(g) if g.mode == Mode::Bypass)
        );
        assert_eq!(
            Policy::parse("mode = \"plan\"").expect_err("plan").field,
            "policy.mode"
        );
        assert_eq!(
            Policy::parse("mode = \"fast\"").expect_err("bad").field,
            "policy.mode"
        );
        assert_eq!(
            Policy::parse("require_test = true")
                .expect_err("typo")
                .field,
            "policy"
        );
        assert_eq!(
            Policy::parse("deny_write = [\"/abs\"]")
                .expect_err("abs")
                .field,
            "policy.deny_write[0]"
        );
    }

    #[test]
    fn permission_calls_follow_deny_write() {
        let policy = Policy::parse("deny_write = [\"db/**\"]").expect("valid");
        assert_eq!(
            policy.allows_call("write_file", Some("src/a.rs")),
            Some(true)
        );
        assert_eq!(
            policy.allows_call("edit_file", Some("db/x.sql")),
            Some(false)
        );
        assert_eq!(policy.allows_call("run_command", None), None);
    }

    #[test]
    fn a_result_is_checked_on_what_it_changes() {
        use crate::result::{FileChange, WorkResult};
        let result = WorkResult {
            files: vec![
                FileChange {
                    path: "src/a.rs".into(),
                    added: 10,
                    removed: 2,
                    binary: false,
                },
                FileChange {
                    path: "db/schema.sql".into(),
                    added: 1,
                    removed: 0,
                    binary: false,
                },
            ],
            ..Default::default()
        };
        let policy =
            Policy::parse("deny_write = [\"db/**\"]\nmax_changed_lines = 5\nmax_files = 1")
                .expect("valid");
        let scope = vec!["src/**".to_owned()];
        let unmet = policy.review_result(&result, Some(&scope));
        assert_eq!(unmet.len(), 4, "{unmet:?}");
        assert!(unmet[0].starts_with("grant:") && unmet[0].contains("db/schema.sql"));
        assert!(unmet[1].starts_with("deny_write"));
        assert!(unmet[2].starts_with("max_files"));
        assert!(unmet[3].contains("13 lines"));
        let lax = Policy::parse("").expect("valid");
        assert!(lax.review_result(&result, None).is_empty());
        let wide = vec!["**".to_owned()];
        assert!(lax.review_result(&result, Some(&wide)).is_empty());
    }
}
