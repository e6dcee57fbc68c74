//! The model's calls held against its task before they are made: the
//! paths a task names, a plan that leaves out a file the task asks for or
//! would overwrite one the task never mentions, and a `write_file` that
//! would throw away most of a file when the task asked for a change. Each
//! is put back to the model once, with the fact ([`crate::driver::Step::PutBack`]);
//! the same call again goes through. Pure: the workspace's files are passed in.

use std::collections::BTreeSet;

/// Extensions that make a word of a task a file's path even where no such
/// file exists yet.
const EXTENSIONS: &[&str] = &[
    "c", "cc", "cfg", "conf", "cpp", "cs", "css", "csv", "env", "go", "h", "hpp", "html", "ini",
    "java", "js", "json", "jsx", "kt", "lock", "log", "md", "mjs", "php", "py", "rb", "rs", "rst",
    "scss", "sh", "sql", "svg", "swift", "toml", "ts", "tsx", "txt", "xml", "yaml", "yml",
];

/// The paths `task` names, in order, each once: a word that is a file of
/// the workspace (`existing`), or that looks like a path with a known
/// extension.
pub(super) fn named_paths(task: &str, existing: &BTreeSet<String>) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for word in task.split(|c: char| c.is_whitespace() || ",;:()[]{}\"'`<>!?*".contains(c)) {
        let word = word.trim_end_matches('.').trim_start_matches("./");
        if word.is_empty() || paths.iter().any(|p| p == word) {
            continue;
        }
        let extension = word
            .rsplit_once('.')
            .map(|(stem, ext)| (stem, ext.to_ascii_lowercase()));
        let looks_like_path = word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c))
            && extension
                .as_ref()
                .is_some_and(|(stem, ext)| !stem.is_empty() && EXTENSIONS.contains(&ext.as_str()));
        if existing.contains(word) || looks_like_path {
            paths.push(word.to_owned());
        }
    }
    paths
}

/// A one-line edit that pulled the line after it onto itself (`def f(a):`
/// made `def g(a): return a`, with `return a` still the next line of
/// `file`): the file would say that line twice. `new` without it; `None`
/// where the edit is not one such.
pub(super) fn next_line_pulled(file: &str, old: &str, new: &str) -> Option<String> {
    if old.contains('\n') || new.contains('\n') || old.trim().is_empty() {
        return None;
    }
    let lines: Vec<&str> = file.lines().collect();
    let at = lines.iter().position(|l| *l == old)?;
    let next = lines[at + 1..]
        .iter()
        .map(|l| l.trim())
        .find(|l| !l.is_empty())?;
    let kept = new.trim_end().strip_suffix(next)?.trim_end();
    (!kept.trim().is_empty() && kept != old).then(|| kept.to_owned())
}

/// Words that make the path after them one the task only reads.
const READS: &[&str] = &["read", "run", "copy", "from", "imports", "import", "see"];

/// Words passed over on the way back from a path to what it is for.
const LINKS: &[&str] = &["and", "the", "file", "files", "then"];

/// The paths of `named` (as [`named_paths`] found them in `task`) that the
/// task only reads: right after `read`, `run`, `copy`, `from` (or after
/// another such path and `and`).
pub(super) fn read_only(task: &str, named: &[String]) -> Vec<String> {
    let words: Vec<String> = task
        .split(|c: char| c.is_whitespace() || ",;:()[]{}\"'`<>!?*".contains(c))
        .map(|w| w.trim_end_matches('.').trim_start_matches("./").to_owned())
        .filter(|w| !w.is_empty())
        .collect();
    let mut only_read: Vec<String> = Vec::new();
    for (i, word) in words.iter().enumerate() {
        if !named.contains(word) {
            continue;
        }
        let before = words[..i]
            .iter()
            .rev()
            .find(|w| !LINKS.contains(&w.to_lowercase().as_str()) && !w.starts_with("python"));
        let reads = before
            .is_some_and(|w| READS.contains(&w.to_lowercase().as_str()) || only_read.contains(w));
        if reads && !only_read.contains(word) {
            only_read.push(word.clone());
        }
    }
    only_read
}

/// Whether `task` asks to take something away (then a file's lines that
/// a whole-file answer left out are not put back).
pub(super) fn removes(task: &str) -> bool {
    has_word(task, &["remove", "delete", "move", "drop", "strip", "cut"])
}

/// Whether `task` asks to add something to a file.
pub(super) fn adds(task: &str) -> bool {
    has_word(task, &["add", "append", "insert", "include"])
}

/// Whether one of `task`'s words (lowercase, letters only) is one of `these`.
fn has_word(task: &str, these: &[&str]) -> bool {
    task.split(|c: char| !c.is_ascii_alphabetic())
        .any(|w| these.contains(&w.to_lowercase().as_str()))
}

/// Whether `task` mentions `path`: by path, or by its file name.
fn mentions(task: &str, path: &str) -> bool {
    let task = task.to_lowercase();
    let path = path.to_lowercase();
    let name = path.rsplit('/').next().unwrap_or(&path);
    task.contains(&path) || task.contains(name)
}

/// What is wrong with a plan writing `files` for `task`, in a workspace
/// holding `existing`; `None` if nothing is. A file the task names that
/// does not exist yet and the plan leaves out; no file the task names, where
/// it names some that exist; a file that exists and that the task never
/// mentions.
pub(super) fn plan_against_task(
    task: &str,
    files: &[String],
    existing: &BTreeSet<String>,
) -> Option<PlanPutBack> {
    let files: Vec<&str> = files.iter().map(|f| f.trim_start_matches("./")).collect();
    let all_named = named_paths(task, existing);
    let only_read = read_only(task, &all_named);
    // A file the task only reads counts as one it does not ask to change.
    let named: Vec<String> = all_named
        .into_iter()
        .filter(|p| !only_read.contains(p))
        .collect();
    let mut facts = Vec::new();
    let new: Vec<&str> = named
        .iter()
        .map(String::as_str)
        .filter(|p| !existing.contains(*p) && !files.contains(p))
        .collect();
    if !new.is_empty() {
        facts.push(format!(
            "your task names {}, which your plan leaves out",
            new.join(", ")
        ));
    }
    let old: Vec<&str> = named
        .iter()
        .map(String::as_str)
        .filter(|p| existing.contains(*p))
        .collect();
    if new.is_empty() && !old.is_empty() && !files.iter().any(|f| named.iter().any(|n| n == f)) {
        facts.push(format!(
            "your plan changes none of the files your task names ({})",
            old.join(", ")
        ));
    }
    let unasked: Vec<&str> = files
        .iter()
        .copied()
        .filter(|f| {
            existing.contains(*f) && (!mentions(task, f) || only_read.iter().any(|r| r == f))
        })
        .collect();
    if !unasked.is_empty() {
        facts.push(format!(
            "your plan would change {}, which your task does not ask to change",
            unasked.join(", ")
        ));
    }
    if facts.is_empty() {
        return None;
    }
    // The plan's files the task names (not one the model made up, nor a
    // word of the task it took for a file).
    let mut keep: Vec<&str> = files
        .iter()
        .copied()
        .filter(|f| named.iter().any(|n| n == f))
        .collect();
    for path in &new {
        if !keep.contains(path) {
            keep.push(path);
        }
    }
    if keep.is_empty() {
        keep = old;
    }
    let note = format!(
        "Not submitted: {}. Your task is: {task}\nCall submit_plan again with the files your \
         task asks you to write{}. If your plan was right, submit it again as it was.",
        facts.join("; "),
        if keep.is_empty() {
            String::new()
        } else {
            format!(", e.g. files: {:?}", keep)
        }
    );
    Some(PlanPutBack {
        note,
        files: keep.into_iter().map(str::to_owned).collect(),
    })
}

/// A plan put back to the model: what to tell it, and the files that
/// would answer the task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PlanPutBack {
    pub(super) note: String,
    pub(super) files: Vec<String>,
}

/// Whether writing `new` over a file that holds `old` would throw away
/// most of it: fewer than half of its non-blank lines (of at least three)
/// kept, where `task` does not ask to rewrite or replace it. Then what to
/// say to the model.
pub(super) fn write_against_task(task: &str, path: &str, old: &str, new: &str) -> Option<String> {
    let lines: Vec<&str> = old
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.len() < 3 {
        return None;
    }
    let lower = task.to_lowercase();
    if ["rewrite", "replace", "overwrite", "from scratch"]
        .iter()
        .any(|w| lower.contains(w))
    {
        return None;
    }
    let kept = lines.iter().filter(|l| new.contains(*l)).count();
    if kept * 2 >= lines.len() {
        return None;
    }
    Some(format!(
        "Not written: write_file replaces all of {path}, and your content keeps {kept} of its \
         {} lines. Your task is: {task}\nTo change a part of {path}, call edit_file with `old` \
         (text that is in the file now) and `new`. To replace it whole, call write_file again \
         with the whole new content.",
        lines.len()
    ))
}

/// Words of a task too common to point at a line.
const COMMON: &[&str] = &[
    "add", "and", "change", "create", "file", "for", "from", "function", "instead", "into", "its",
    "line", "new", "one", "so", "that", "the", "then", "this", "with", "saying", "returns", "make",
    "named", "also", "end", "text", "every",
];

/// The lines of a file (`lines`) that share the most words with `task`
/// (not counting common words and the paths it names), at most three, in
/// the file's order: where an edit for the task most likely goes.
pub(super) fn lines_for_task<'a>(task: &str, lines: &'a [String]) -> Vec<&'a str> {
    let words = |text: &str| -> BTreeSet<String> {
        text.split(|c: char| !c.is_alphanumeric() && c != '_')
            .filter(|w| w.len() >= 3 || w.chars().all(|c| c.is_ascii_digit()) && !w.is_empty())
            .map(str::to_lowercase)
            .filter(|w| !COMMON.contains(&w.as_str()))
            .collect()
    };
    let named: BTreeSet<String> = named_paths(task, &BTreeSet::new())
        .iter()
        .flat_map(|p| words(p))
        .collect();
    let asked: BTreeSet<String> = words(task).difference(&named).cloned().collect();
    // What the task quotes ("Hello, {name}!", `pool`) points hardest.
    let quoted: BTreeSet<String> = task
        .split(['"', '`'])
        .skip(1)
        .step_by(2)
        .flat_map(words)
        .collect();
    let scored: Vec<(usize, &str)> = lines
        .iter()
        .map(|l| {
            let shared = words(l);
            let score =
                shared.intersection(&asked).count() + 2 * shared.intersection(&quoted).count();
            (score, l.as_str())
        })
        .collect();
    let best = scored.iter().map(|(score, _)| *score).max().unwrap_or(0);
    if best == 0 {
        return Vec::new();
    }
    scored
        .into_iter()
        .filter(|(score, _)| *score == best)
        .map(|(_, line)| line)
        .take(3)
        .collect()
}

/// Narrows `lines` (a file's, in order) to where an edit for `task` goes,
/// where its words point at lines: those lines, and the line after one
/// that is indented deeper (a function's body). Unchanged where they
/// point at none.
pub(super) fn keep_lines_for_task(task: &str, lines: &mut Vec<String>) {
    let pointed: Vec<String> = lines_for_task(task, lines)
        .into_iter()
        .map(str::to_owned)
        .collect();
    if pointed.is_empty() {
        return;
    }
    let indent = |l: &str| l.len() - l.trim_start().len();
    let kept: Vec<String> = lines
        .iter()
        .enumerate()
        .filter(|(i, l)| {
            pointed.contains(l)
                || (*i > 0 && pointed.contains(&lines[i - 1]) && indent(l) > indent(&lines[i - 1]))
        })
        .map(|(_, l)| l.clone())
        .collect();
    *lines = kept;
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_one_line_edit_that_pulled_the_next_line_on_drops_it() {
        let file = "def multiply(a, b):\n    return a * b\n";
        assert_eq!(
            super::next_line_pulled(file, "def multiply(a, b):", "def times(a, b): return a * b")
                .as_deref(),
            Some("def times(a, b):")
        );
        // A plain rename, a line not in the file, a several-line edit: as
        // they are.
        assert_eq!(
            super::next_line_pulled(file, "def multiply(a, b):", "def times(a, b):"),
            None
        );
        assert_eq!(
            super::next_line_pulled(file, "def f():", "x return a * b"),
            None
        );
        assert_eq!(
            super::next_line_pulled(
                file,
                "def multiply(a, b):",
                "def t(a, b):\n    return a * b"
            ),
            None
        );
        // Only the pulled line: nothing is left of the edit.
        assert_eq!(
            super::next_line_pulled(file, "def multiply(a, b):", "return a * b"),
            None
        );
    }

    use super::*;

    fn files(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn list(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_task_names_files_that_exist_and_words_that_look_like_paths() {
        let existing = files(&["src/lib.rs", "Makefile", "notes.txt"]);
        assert_eq!(
            named_paths(
                "In src/lib.rs, change greet; then create hello.txt and `docs/a.md`. See Makefile.",
                &existing
            ),
            list(&["src/lib.rs", "hello.txt", "docs/a.md", "Makefile"])
        );
        // Versions, calls and abbreviations are not paths.
        assert!(named_paths(
            "Add version 1.3.0, make s.title() work, e.g. like this, in notes",
            &existing
        )
        .is_empty());
    }

    #[test]
    fn a_plan_that_leaves_out_the_file_the_task_names_is_put_back_with_the_fact() {
        let existing = files(&["NOTES.md", "src/main.rs"]);
        let task = "Create hello.txt containing hello world.";
        let put_back =
            plan_against_task(task, &list(&["src/main.rs"]), &existing).expect("put back");
        assert_eq!(put_back.files, list(&["hello.txt"]));
        let note = put_back.note;
        assert!(
            note.contains("names hello.txt, which your plan leaves out"),
            "{note}"
        );
        assert!(note.contains("would change src/main.rs"), "{note}");
        assert!(note.contains("does not ask to change"), "{note}");
        assert!(note.contains(r#"files: ["hello.txt"]"#), "{note}");
        assert_eq!(
            plan_against_task(task, &list(&["hello.txt"]), &existing),
            None
        );
    }

    #[test]
    fn a_plan_that_changes_none_of_the_named_files_is_put_back() {
        let existing = files(&["config.toml", "NOTES.md"]);
        let task = "In config.toml, change the database pool from 5 to 10.";
        let put_back = plan_against_task(task, &list(&["NOTES.md"]), &existing).expect("put back");
        assert_eq!(put_back.files, list(&["config.toml"]));
        let note = put_back.note;
        assert!(note.contains("changes none of the files your task names (config.toml)"));
        assert!(note.contains(r#"files: ["config.toml"]"#), "{note}");
        assert_eq!(
            plan_against_task(task, &list(&["config.toml"]), &existing),
            None
        );
    }

    #[test]
    fn a_file_only_read_need_not_be_in_the_plan() {
        let existing = files(&["strings.py"]);
        let task = "Read strings.py, then create API.md that lists its functions.";
        assert_eq!(plan_against_task(task, &list(&["API.md"]), &existing), None);
        // A task that names no file leaves the plan to the model, but not
        // a file it never mentions.
        let task = "Add a line saying hi.";
        assert_eq!(
            plan_against_task(task, &list(&["new.txt"]), &existing),
            None
        );
        assert!(plan_against_task(task, &list(&["strings.py"]), &existing).is_some());
    }

    #[test]
    fn the_lines_a_task_points_to_are_those_sharing_most_of_its_words() {
        let lines = list(&[
            "/// The greeting for `name`.",
            "pub fn greet(name: &str) -> String {",
            "    format!(\"Hello, {name}!\")",
            "pool = 5",
        ]);
        let task = "In src/lib.rs, change greet so that it returns \"Hi, {name}!\" instead of \"Hello, {name}!\".";
        assert_eq!(
            lines_for_task(task, &lines),
            vec!["    format!(\"Hello, {name}!\")"]
        );
        assert_eq!(
            lines_for_task(
                "In config.toml, change the database pool from 5 to 10.",
                &lines
            ),
            vec!["pool = 5"]
        );
        assert!(lines_for_task("Add a section named License.", &lines).is_empty());
    }

    #[test]
    fn an_edit_is_narrowed_to_the_lines_pointed_at_and_the_body_below() {
        let mut lines = list(&[
            "def shout(s):",
            "    return s.upper()",
            "def whisper(s):",
            "    return s.lower()",
            "x = 1",
        ]);
        keep_lines_for_task("Change whisper so that it adds \"...\"", &mut lines);
        assert_eq!(lines, list(&["def whisper(s):", "    return s.lower()"]));
        let mut lines = list(&["a = 1", "b = 2"]);
        keep_lines_for_task("Add a function reverse(s)", &mut lines);
        assert_eq!(
            lines,
            list(&["a = 1", "b = 2"]),
            "pointing at none keeps all"
        );
    }

    #[test]
    fn a_task_that_adds_or_removes_is_told_by_its_words() {
        assert!(adds("Add a function reverse(s) to strings.py."));
        assert!(adds("append a line"));
        assert!(!adds("Change the address in README.md"));
        assert!(removes("Move the Usage section out of README.md"));
        assert!(!removes("Change the page title"));
    }

    #[test]
    fn a_write_that_throws_most_of_a_file_away_is_put_back_unless_asked_for() {
        let old = "# Usage\n\nRun `notes add TEXT`.\nRun `notes rm N`.\nRun `notes ls`.\n";
        let note = write_against_task("Add a line on list", "docs/usage.md", old, "notes list")
            .expect("put back");
        assert!(note.contains("keeps 0 of its 4 lines"), "{note}");
        let whole = format!("{old}Run `notes list`.\n");
        assert_eq!(write_against_task("Add a line", "u.md", old, &whole), None);
        assert_eq!(
            write_against_task("Rewrite u.md as one line", "u.md", old, "x"),
            None
        );
        assert_eq!(write_against_task("Add", "u.md", "a\nb\n", "x"), None);
    }
}
