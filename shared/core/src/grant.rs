//! Permission modes and grants: what a teammate may do, as the lead grants it.

use std::fmt;

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::error::FieldError;

/// How much a teammate may do without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Read-only tools only.
    Plan,
    /// Each write or command needs a `PermissionRequest`.
    Default,
    /// File edits inside the grant's paths run; commands still ask.
    AcceptEdits,
    /// Every tool runs.
    Bypass,
}

impl Mode {
    /// The mode as `lead` prints and parses it.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Plan => "plan",
            Mode::Default => "default",
            Mode::AcceptEdits => "accept-edits",
            Mode::Bypass => "bypass",
        }
    }

    /// Parses `plan`, `default`, `accept-edits` or `bypass`.
    pub fn parse(field: &str, value: &str) -> Result<Self, FieldError> {
        match value {
            "plan" => Ok(Mode::Plan),
            "default" => Ok(Mode::Default),
            "accept-edits" => Ok(Mode::AcceptEdits),
            "bypass" => Ok(Mode::Bypass),
            other => Err(FieldError::new(
                field,
                format!("{other:?} is not one of plan, default, accept-edits, bypass"),
            )),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A permission grant, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// What the teammate may do.
    pub mode: Mode,
    /// Globs, relative to the teammate's workspace, that ACCEPT_EDITS may write;
    /// empty means the approved plan's files.
    pub write_paths: Vec<String>,
    /// When the grant lapses, if ever.
    pub expires_at_unix_ms: Option<i64>,
}

impl Grant {
    /// The grant an approval without one carries: the plan's files, in `mode`.
    pub fn of_plan(mode: Mode) -> Self {
        Self {
            mode,
            write_paths: Vec::new(),
            expires_at_unix_ms: None,
        }
    }

    /// A grant as an edge received it, checked: at most
    /// [`crate::limits::LIST_ITEMS`] write paths, each a relative glob, and
    /// no expiry before the epoch. `field` names the grant in errors.
    pub fn checked(
        field: &str,
        mode: Mode,
        write_paths: Vec<String>,
        expires_at_unix_ms: Option<i64>,
    ) -> Result<Self, FieldError> {
        if write_paths.len() > crate::limits::LIST_ITEMS {
            return Err(FieldError::new(
                format!("{field}.write_paths"),
                format!(
                    "has {} entries; the limit is {}",
                    write_paths.len(),
                    crate::limits::LIST_ITEMS
                ),
            ));
        }
        for (i, path) in write_paths.iter().enumerate() {
            check_relative_glob("", path).map_err(|e| e.at(format!("{field}.write_paths[{i}]")))?;
        }
        if expires_at_unix_ms.is_some_and(|at| at < 0) {
            return Err(FieldError::new(
                format!("{field}.expires_at_unix_ms"),
                "is negative",
            ));
        }
        Ok(Self {
            mode,
            write_paths,
            expires_at_unix_ms,
        })
    }

    /// The grant every teammate starts with.
    pub fn plan() -> Self {
        Self {
            mode: Mode::Plan,
            write_paths: Vec::new(),
            expires_at_unix_ms: None,
        }
    }
}

/// Checks that `path` is a glob relative to a workspace: not absolute, no `..`.
pub fn check_relative_glob(field: &str, path: &str) -> Result<(), FieldError> {
    if path.is_empty() {
        return Err(FieldError::new(field, "is empty"));
    }
    crate::limits::check(field, path, crate::limits::GLOB)?;
    if path.starts_with('/') || path.starts_with('\\') {
        return Err(FieldError::new(
            field,
            format!("{path:?} is absolute; paths are relative to the workspace"),
        ));
    }
    if path.split(['/', '\\']).any(|part| part == "..") {
        return Err(FieldError::new(
            field,
            format!("{path:?} leaves the workspace (\"..\")"),
        ));
    }
    // A path with none of a glob's special characters is a glob of itself
    // (a plan's files mostly are): nothing to parse.
    if path.contains(['*', '?', '[', ']', '{', '}', '\\']) {
        Glob::new(path)
            .map_err(|e| FieldError::new(field, format!("{path:?} is not a glob: {e}")))?;
    }
    Ok(())
}

/// A compiled set of write globs.
#[derive(Debug, Clone)]
pub struct PathSet {
    /// The globs as given, for messages.
    patterns: Vec<String>,
    /// The globs compiled; `*` does not cross `/`.
    set: GlobSet,
}

impl PathSet {
    /// Compiles `patterns`, each checked with [`check_relative_glob`].
    pub fn new(field: &str, patterns: &[String]) -> Result<Self, FieldError> {
        let mut builder = GlobSetBuilder::new();
        for (i, pattern) in patterns.iter().enumerate() {
            let item = format!("{field}[{i}]");
            check_relative_glob(&item, pattern)?;
            let glob = globset::GlobBuilder::new(pattern.trim_start_matches("./"))
                .literal_separator(true)
                .build()
                .map_err(|e| FieldError::new(item, e.to_string()))?;
            builder.add(glob);
        }
        let set = builder
            .build()
            .map_err(|e| FieldError::new(field, e.to_string()))?;
        Ok(Self {
            patterns: patterns.to_vec(),
            set,
        })
    }

    /// Whether the workspace-relative `path` (with `/` separators) matches.
    pub fn matches(&self, path: &str) -> bool {
        self.set.is_match(path.trim_start_matches("./"))
    }

    /// The first pattern `path` matches, if any.
    pub fn first_match(&self, path: &str) -> Option<&str> {
        self.set
            .matches(path.trim_start_matches("./"))
            .first()
            .map(|&i| self.patterns[i].as_str())
    }

    /// The globs as given.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_sets_match_within_the_workspace() {
        let set = PathSet::new(
            "w",
            &["src/*.rs".into(), "docs/**".into(), "README.md".into()],
        )
        .expect("valid");
        assert!(set.matches("src/auth.rs"));
        assert!(set.matches("./src/auth.rs"));
        assert!(!set.matches("src/deep/auth.rs"));
        assert!(set.matches("docs/a/b.md"));
        assert!(set.matches("README.md"));
        assert!(!set.matches("db/schema.sql"));
        assert_eq!(set.first_match("docs/x"), Some("docs/**"));
    }

    #[test]
    fn globs_outside_the_workspace_are_refused() {
        for bad in ["/etc/passwd", "../x", "a/../../b", "", "a[", "\\x"] {
            let err = PathSet::new("grant.write_paths", &[bad.to_string()]).expect_err(bad);
            assert_eq!(err.field, "grant.write_paths[0]");
        }
    }
}
