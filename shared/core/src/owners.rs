//! Owners by path (`lead serve --owners FILE`), in CODEOWNERS syntax: each
//! line a pattern, its owners (a name, or `@group`) and, last, how many
//! distinct owners must approve (one when it says none):
//!
//! ```text
//! # the database's files take two of the DBAs
//! db/**            @dba 2
//! /docs/           carol @writers
//! *.proto          @api
//! ```
//!
//! As in git's CODEOWNERS, the last line whose pattern matches a file is
//! the rule for that file. A pattern with a slash at its start or inside
//! is anchored at the repository's root; one without matches at any depth;
//! one ending in a slash, or naming a directory, covers what is inside;
//! `*` stays within a directory, `**` crosses them.
//!
//! A request whose files fall under rules waits, once its machine stages
//! are done, for approvals from the owners of every rule it falls under
//! ([`Tally`]); a rejection from any reviewer still ends it.

use globset::{GlobBuilder, GlobMatcher};

use crate::access::Person;

/// Who owns: a person by name, or everyone in a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// A person: their name (a token's name, or the provider's `email`,
    /// `preferred_username` or `sub`), or their subject.
    Person(String),
    /// `@group`: anyone whose groups hold it.
    Group(String),
}

impl Owner {
    /// Whether `person` is this owner.
    pub fn is(&self, person: &Person) -> bool {
        match self {
            Owner::Person(name) => {
                *name == person.name || person.subject.as_deref() == Some(name.as_str())
            }
            Owner::Group(group) => person.groups.iter().any(|g| g == group),
        }
    }
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Owner::Person(name) => f.write_str(name),
            Owner::Group(group) => write!(f, "@{group}"),
        }
    }
}

/// One line of the owners file.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The pattern as written: how the rule is named.
    pub pattern: String,
    /// Who may approve for it.
    pub owners: Vec<Owner>,
    /// How many distinct owners must.
    pub count: usize,
    /// The line it is on, from 1.
    pub line: usize,
    matchers: Vec<GlobMatcher>,
}

impl Rule {
    /// Whether `path` (relative to the repository's root) matches.
    pub fn matches(&self, path: &str) -> bool {
        let path = path.trim_start_matches("./").trim_start_matches('/');
        self.matchers.iter().any(|m| m.is_match(path))
    }

    /// Whether `person` is one of its owners.
    pub fn owned_by(&self, person: &Person) -> bool {
        self.owners.iter().any(|o| o.is(person))
    }

    /// Its owners as the file says them: `@dba`, `carol @writers`.
    pub fn owners_text(&self) -> String {
        self.owners
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// An owners file that does not parse: the line and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {why}")]
pub struct OwnersError {
    /// From 1.
    pub line: usize,
    /// What is wrong.
    pub why: String,
}

/// The owners file's rules, in its order.
#[derive(Debug, Clone, Default)]
pub struct Owners {
    rules: Vec<Rule>,
}

impl Owners {
    /// The rules `text` holds.
    pub fn parse(text: &str) -> Result<Owners, OwnersError> {
        let mut rules = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let content = raw.split(" #").next().unwrap_or_default().trim();
            if content.is_empty() || content.starts_with('#') {
                continue;
            }
            rules.push(rule(content, line)?);
        }
        Ok(Owners { rules })
    }

    /// Whether it has no rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules `paths` fall under: each path's last matching rule, each
    /// rule once, in the file's order.
    pub fn rules_for<'a>(&'a self, paths: &[String]) -> Vec<&'a Rule> {
        let mut lines: Vec<usize> = paths
            .iter()
            .filter_map(|path| self.rules.iter().rev().find(|r| r.matches(path)))
            .map(|r| r.line)
            .collect();
        lines.sort_unstable();
        lines.dedup();
        self.rules
            .iter()
            .filter(|r| lines.binary_search(&r.line).is_ok())
            .collect()
    }
}

/// One line's rule.
fn rule(content: &str, line: usize) -> Result<Rule, OwnersError> {
    let fail = |why: String| OwnersError { line, why };
    let mut words: Vec<&str> = content.split_whitespace().collect();
    let pattern = words.remove(0).to_owned();
    let count = match words.last().map(|w| w.parse::<usize>()) {
        Some(Ok(0)) => return Err(fail("the count of approvers is at least 1".into())),
        Some(Ok(n)) => {
            words.pop();
            n
        }
        _ => 1,
    };
    if words.is_empty() {
        return Err(fail(format!("{pattern}: no owner (a name or @group)")));
    }
    let owners: Vec<Owner> = words
        .iter()
        .map(|w| match w.strip_prefix('@') {
            Some("") => Err(fail("\"@\" names no group".into())),
            Some(group) => Ok(Owner::Group(group.to_owned())),
            None => Ok(Owner::Person((*w).to_owned())),
        })
        .collect::<Result<_, _>>()?;
    let people_named = owners
        .iter()
        .filter(|o| matches!(o, Owner::Person(_)))
        .count();
    if !owners.iter().any(|o| matches!(o, Owner::Group(_))) && people_named < count {
        return Err(fail(format!(
            "{pattern}: {count} approvers asked of {people_named} named owner(s)"
        )));
    }
    Ok(Rule {
        matchers: matchers(&pattern).map_err(fail)?,
        pattern,
        owners,
        count,
        line,
    })
}

/// What `pattern` matches, as globs over a path from the root.
fn matchers(pattern: &str) -> Result<Vec<GlobMatcher>, String> {
    if pattern.contains("..") || pattern.starts_with('!') {
        return Err(format!(
            "{pattern}: a pattern may not climb (..) or negate (!)"
        ));
    }
    let dir_only = pattern.ends_with('/');
    let bare = pattern.trim_end_matches('/');
    let anchored = bare.starts_with('/') || bare.contains('/');
    let bare = bare.trim_start_matches('/');
    let base = if anchored || bare.starts_with("**") {
        bare.to_owned()
    } else {
        format!("**/{bare}")
    };
    let mut globs = vec![format!("{base}/**")];
    if !dir_only {
        globs.push(base);
    }
    globs
        .iter()
        .map(|g| {
            GlobBuilder::new(g)
                .literal_separator(true)
                .build()
                .map(|g| g.compile_matcher())
                .map_err(|e| format!("{pattern}: {e}"))
        })
        .collect()
}

/// Where a request's owners stand: for each rule it falls under, who has
/// approved for it.
#[derive(Debug, Clone)]
pub struct Tally<'a> {
    /// The rules, each with the names that counted for it.
    pub rules: Vec<(&'a Rule, Vec<String>)>,
}

impl<'a> Tally<'a> {
    /// The tally of `rules` after the approvals `counted` (each a rule's
    /// pattern and who counted for it, oldest first).
    pub fn new<'c>(
        rules: Vec<&'a Rule>,
        counted: impl Iterator<Item = (&'c str, &'c str)>,
    ) -> Self {
        let mut rules: Vec<(&'a Rule, Vec<String>)> =
            rules.into_iter().map(|r| (r, Vec::new())).collect();
        for (pattern, who) in counted {
            if let Some((_, names)) = rules.iter_mut().find(|(r, _)| r.pattern == pattern) {
                if !names.iter().any(|n| n == who) {
                    names.push(who.to_owned());
                }
            }
        }
        Self { rules }
    }

    /// The rules `person`'s approval counts for now: those they own, still
    /// short of approvers, that they have not counted for already.
    pub fn counts_for(&self, person: &Person) -> Vec<String> {
        self.rules
            .iter()
            .filter(|(rule, names)| {
                rule.owned_by(person) && names.len() < rule.count && !names.contains(&person.name)
            })
            .map(|(rule, _)| rule.pattern.clone())
            .collect()
    }

    /// Whether every rule has its approvers.
    pub fn done(&self) -> bool {
        self.rules
            .iter()
            .all(|(rule, names)| names.len() >= rule.count)
    }

    /// Who it still waits for, a rule each: `@dba: 1 of 2`.
    pub fn waits_for(&self) -> Vec<String> {
        self.rules
            .iter()
            .filter(|(rule, names)| names.len() < rule.count)
            .map(|(rule, names)| {
                format!("{}: {} of {}", rule.owners_text(), names.len(), rule.count)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Role;

    fn person(name: &str, groups: &[&str]) -> Person {
        Person {
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            ..Person::token(name, Role::Reviewer)
        }
    }

    fn paths(list: &[&str]) -> Vec<String> {
        list.iter().map(|p| (*p).to_owned()).collect()
    }

    const FILE: &str = "\
# comments and blank lines are skipped

*.md           @writers
/docs/         carol
db/**          @dba 2
db/seed.sql    dora   # a later line wins for its file
proto          @api
";

    #[test]
    fn the_last_matching_line_owns_a_file_and_patterns_match_as_codeowners_do() {
        let owners = Owners::parse(FILE).expect("parses");
        let rule_of = |path: &str| {
            owners
                .rules_for(&paths(&[path]))
                .first()
                .map(|r| r.pattern.clone())
        };
        assert_eq!(rule_of("README.md").as_deref(), Some("*.md"));
        assert_eq!(rule_of("src/deep/notes.md").as_deref(), Some("*.md"));
        assert_eq!(rule_of("docs/guide.md").as_deref(), Some("/docs/"));
        assert_eq!(rule_of("docs/a/b.txt").as_deref(), Some("/docs/"));
        assert_eq!(rule_of("src/docs/x.txt"), None, "anchored at the root");
        assert_eq!(rule_of("db/schema.sql").as_deref(), Some("db/**"));
        assert_eq!(rule_of("./db/schema.sql").as_deref(), Some("db/**"));
        assert_eq!(rule_of("db/seed.sql").as_deref(), Some("db/seed.sql"));
        assert_eq!(rule_of("api/proto/a.proto").as_deref(), Some("proto"));
        assert_eq!(rule_of("src/main.rs"), None);
        let both = owners.rules_for(&paths(&["db/schema.sql", "README.md", "db/x.sql"]));
        let names: Vec<&str> = both.iter().map(|r| r.pattern.as_str()).collect();
        assert_eq!(names, ["*.md", "db/**"]);
        assert_eq!(both[1].count, 2);
        assert_eq!(both[1].owners_text(), "@dba");
    }

    #[test]
    fn a_bad_line_is_named() {
        for (text, line, why) in [
            ("db/**\n", 1, "no owner"),
            ("ok @a\ndb/** @dba 0\n", 2, "at least 1"),
            ("a carol 2\n", 1, "2 approvers asked of 1"),
            ("../x @a\n", 1, "climb"),
            ("x @\n", 1, "names no group"),
            ("a[ @g\n", 1, "a[:"),
        ] {
            let error = Owners::parse(text).expect_err(text);
            assert_eq!(error.line, line, "{text}");
            assert!(error.why.contains(why), "{text}: {}", error.why);
        }
    }

    #[test]
    fn a_tally_counts_distinct_owners_per_rule_and_says_what_it_waits_for() {
        let owners = Owners::parse(FILE).expect("parses");
        let rules = owners.rules_for(&paths(&["db/schema.sql", "README.md"]));
        let dora = person("dora", &["dba"]);
        let dan = person("dan", &["dba", "writers"]);
        let adam = person("adam", &["admins"]);
        let tally = Tally::new(rules.clone(), std::iter::empty());
        assert_eq!(tally.waits_for(), ["@writers: 0 of 1", "@dba: 0 of 2"]);
        assert!(tally.counts_for(&adam).is_empty(), "not an owner");
        assert_eq!(tally.counts_for(&dora), ["db/**"]);
        let tally = Tally::new(rules.clone(), [("db/**", "dora")].into_iter());
        assert!(tally.counts_for(&dora).is_empty(), "once per person");
        assert_eq!(tally.waits_for(), ["@writers: 0 of 1", "@dba: 1 of 2"]);
        assert_eq!(tally.counts_for(&dan), ["*.md", "db/**"]);
        let tally = Tally::new(
            rules,
            [("db/**", "dora"), ("db/**", "dan"), ("*.md", "dan")].into_iter(),
        );
        assert!(tally.done());
        assert!(tally.waits_for().is_empty());
        let by_subject = Person {
            subject: Some("u-carol".into()),
            ..person("carol@example.com", &[])
        };
        assert!(Owner::Person("u-carol".into()).is(&by_subject));
        assert!(Owner::Person("carol@example.com".into()).is(&by_subject));
        assert!(!Owner::Person("carol".into()).is(&by_subject));
    }
}
