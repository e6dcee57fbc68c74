//! Who holds which files: from the approval of a plan until its teammate
//! completes that plan's task, is granted anew or terminates, the grant's
//! write paths are that teammate's hold. A plan whose files fall inside
//! another member's hold *overlaps* it. A pure type: no I/O, no clock.
//!
//! Paths and globs are compared relative to the workspace root (teammates on
//! one codebase share that layout). Two globs overlap when one could match a
//! path the other matches, judged conservatively: a literal path against a
//! glob is matched exactly; two globs overlap when the literal part before
//! their first wildcard is a prefix of the other's.

use std::collections::{BTreeMap, BTreeSet};

use globset::Glob;

/// One member's hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// The globs it may write.
    pub paths: Vec<String>,
    /// The task the approved plan was for (empty: none; then the hold lasts
    /// until a new grant or termination).
    pub task_id: String,
}

/// The files of a plan that fall inside another member's hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    /// Who holds them.
    pub member: String,
    /// The plan's files (paths or globs) that overlap the hold.
    pub files: Vec<String>,
}

impl std::fmt::Display for Overlap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "overlaps {}: {}", self.member, self.files.join(", "))
    }
}

/// Every member's hold.
#[derive(Debug, Clone, Default)]
pub struct Holds {
    by_member: BTreeMap<String, Hold>,
    /// Members whose hold changed since the last [`Holds::take_touched`],
    /// for persistence.
    touched: BTreeSet<String>,
}

impl Holds {
    /// The holds as stored.
    pub fn restore(holds: impl IntoIterator<Item = (String, Hold)>) -> Self {
        Self {
            by_member: holds.into_iter().collect(),
            touched: BTreeSet::new(),
        }
    }

    /// `member` holds `paths` now, for `task_id` (replacing what it held).
    pub fn hold(&mut self, member: &str, paths: Vec<String>, task_id: String) {
        self.by_member
            .insert(member.to_owned(), Hold { paths, task_id });
        self.touched.insert(member.to_owned());
    }

    /// `member` holds nothing any more (it terminated).
    pub fn release(&mut self, member: &str) {
        if self.by_member.remove(member).is_some() {
            self.touched.insert(member.to_owned());
        }
    }

    /// `member` completed `task_id`: the hold its plan for that task made
    /// ends. `true` if it held one.
    pub fn complete(&mut self, member: &str, task_id: &str) -> bool {
        let ends = self
            .by_member
            .get(member)
            .is_some_and(|h| !h.task_id.is_empty() && h.task_id == task_id);
        if ends {
            self.by_member.remove(member);
            self.touched.insert(member.to_owned());
        }
        ends
    }

    /// The members whose hold changed (or ended) since the last call, with
    /// what each holds now: what the store must write.
    pub fn take_changed(&mut self) -> Vec<(String, Option<Hold>)> {
        std::mem::take(&mut self.touched)
            .into_iter()
            .map(|member| {
                let hold = self.by_member.get(&member).cloned();
                (member, hold)
            })
            .collect()
    }

    /// Every hold, by member.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Hold)> {
        self.by_member.iter()
    }

    /// What `member` holds.
    pub fn get(&self, member: &str) -> Option<&Hold> {
        self.by_member.get(member)
    }

    /// Where `files` (a plan of `member`) fall inside the holds of others.
    pub fn overlaps(&self, member: &str, files: &[String]) -> Vec<Overlap> {
        self.by_member
            .iter()
            .filter(|(holder, _)| holder.as_str() != member)
            .filter_map(|(holder, hold)| {
                let files: Vec<String> = files
                    .iter()
                    .filter(|f| hold.paths.iter().any(|p| overlap(f, p)))
                    .cloned()
                    .collect();
                (!files.is_empty()).then(|| Overlap {
                    member: holder.clone(),
                    files,
                })
            })
            .collect()
    }
}

/// `path` without a leading `./`.
fn normal(path: &str) -> &str {
    let mut path = path;
    while let Some(rest) = path.strip_prefix("./") {
        path = rest;
    }
    path
}

/// The part of a glob before its first wildcard.
fn literal_prefix(glob: &str) -> &str {
    let end = glob.find(['*', '?', '[', '{']).unwrap_or(glob.len());
    &glob[..end]
}

/// Whether `glob` (a glob or a literal path) matches `path`.
fn matches(glob: &str, path: &str) -> bool {
    Glob::new(glob).is_ok_and(|g| g.compile_matcher().is_match(path))
}

/// Whether two paths or globs could name a common file.
pub fn overlap(a: &str, b: &str) -> bool {
    let (a, b) = (normal(a), normal(b));
    let (pa, pb) = (literal_prefix(a), literal_prefix(b));
    match (pa.len() == a.len(), pb.len() == b.len()) {
        (true, true) => a == b,
        (true, false) => matches(b, a),
        (false, true) => matches(a, b),
        (false, false) => pa.starts_with(pb) || pb.starts_with(pa),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_globs_overlap_as_expected() {
        for (a, b, expected) in [
            ("src/auth.rs", "src/auth.rs", true),
            ("./src/auth.rs", "src/auth.rs", true),
            ("src/auth.rs", "src/db.rs", false),
            ("src/auth.rs", "src/**", true),
            ("src/**", "src/auth.rs", true),
            ("docs/a.md", "src/**", false),
            ("src/**", "src/auth/**", true),
            ("src/auth/*.rs", "src/**", true),
            ("src/*.rs", "docs/*.md", false),
            ("**/*.rs", "src/auth.rs", true),
            ("**/*.rs", "docs/**", true),
            ("tests/x.rs", "src/*.rs", false),
        ] {
            assert_eq!(overlap(a, b), expected, "{a} vs {b}");
            assert_eq!(overlap(b, a), expected, "{b} vs {a}");
        }
    }

    #[test]
    fn holds_last_until_completion_new_grant_or_termination() {
        let mut holds = Holds::default();
        holds.hold("alice", vec!["src/auth.rs".into()], "t1".into());
        holds.hold("bob", vec!["docs/**".into()], String::new());
        let files = vec!["src/auth.rs".into(), "src/db.rs".into(), "docs/x.md".into()];
        let overlaps = holds.overlaps("carol", &files);
        assert_eq!(
            overlaps.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["overlaps alice: src/auth.rs", "overlaps bob: docs/x.md"]
        );
        // One's own hold is no overlap.
        assert_eq!(holds.overlaps("alice", &files).len(), 1);
        holds.complete("alice", "other-task");
        assert!(holds.get("alice").is_some());
        holds.complete("alice", "t1");
        assert!(holds.get("alice").is_none());
        // A hold without a task ends only with a new grant or termination.
        holds.complete("bob", "");
        assert!(holds.get("bob").is_some());
        holds.hold("bob", vec!["tests/**".into()], String::new());
        assert!(holds.overlaps("carol", &files).is_empty());
        holds.release("bob");
        assert!(holds.get("bob").is_none());
    }

    #[test]
    fn what_changed_is_what_the_store_writes_and_restores() {
        let mut holds = Holds::default();
        holds.hold("alice", vec!["src/**".into()], "t1".into());
        holds.hold("bob", vec!["docs/*.md".into()], String::new());
        holds.release("carol");
        assert!(holds.complete("alice", "t1"));
        let changed = holds.take_changed();
        assert_eq!(
            changed,
            vec![
                ("alice".to_owned(), None),
                (
                    "bob".to_owned(),
                    Some(Hold {
                        paths: vec!["docs/*.md".into()],
                        task_id: String::new()
                    })
                ),
            ]
        );
        assert!(holds.take_changed().is_empty());
        let restored = Holds::restore(
            changed
                .into_iter()
                .filter_map(|(member, hold)| hold.map(|h| (member, h))),
        );
        assert_eq!(restored.get("bob"), holds.get("bob"));
        assert_eq!(restored.get("alice"), None);
    }
}
