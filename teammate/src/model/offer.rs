//! What the model may call now: the mode's tools narrowed by what the
//! driver knows of its state, for the server's grammar. Paths to read among
//! the files that exist and were not read, directories to list among those
//! not listed, at least one file in a plan, paths to write among the
//! grant's not yet written, the claimed task's id to complete, the shared
//! list's tools once the lead told of a task to claim, messages to those
//! who wrote (and the lead) once someone did, and the end tool only when
//! nothing is owed. A tool with nothing left to call it on is
//! left out. Pure: the workspace's listing is passed in.
//!
//! The grammar is a convenience for the model; the gate stays the guarantee
//! (whatever arrives by another way still meets it).

use std::collections::{BTreeMap, BTreeSet};

use mesh_llm::Tool;
use serde_json::{json, Value};

use crate::catalog;

/// The most files (and directories) of the workspace named in a schema;
/// beyond it, a path is any string.
pub(super) const MAX_LISTED: usize = 200;

/// The most bytes of one `write_file`'s content the grammar lets through.
pub(super) const MAX_WRITE: usize = 16 * 1024;

/// What is offered while an approved plan's files are not all written.
const WORKING: [&str; 4] = ["read_file", "write_file", "edit_file", "run_command"];

/// What is offered once an approved plan is carried out: a check, and the
/// end; a fix once a check failed.
const CHECKING: [&str; 2] = ["run_command", catalog::DONE];

/// What is offered once a check failed after the plan was carried out.
const FIXING: [&str; 3] = ["edit_file", "run_command", catalog::DONE];

/// A path a plan may name in the grammar: relative, without spaces.
const PATH_PATTERN: &str = "^[A-Za-z0-9_.][A-Za-z0-9_./-]*$";

/// The most files one plan may name in the grammar (more come by an
/// amendment): the 0.5B model ran a plan's list on to 60 entries, most of
/// them `read_file`, which took 46 s to write.
const MAX_PLAN_FILES: usize = 16;

/// The most items of any other list in the grammar (a plan's steps, its
/// tests): a model that loops in a list stops there.
const MAX_ITEMS: usize = 16;

/// The most steps a plan names in the grammar, and the longest: the 0.5B
/// model filled sixteen steps of 200 characters with `read_file(1),
/// read_file(2), ...` (34 s of a 54 s task); a plan's steps are for the
/// reviewer to read, and eight short ones say what a small task does.
const MAX_PLAN_STEPS: usize = 8;
const MAX_STEP_TEXT: usize = 120;

/// What the driver knows that narrows a call.
#[derive(Debug, Default, Clone)]
pub(super) struct Known {
    /// The workspace's files and directories (relative, `/`-separated),
    /// where it is small enough to name them: `None` beyond [`MAX_LISTED`].
    pub(super) tree: Option<Tree>,
    /// Files the model read (successfully).
    pub(super) read: BTreeSet<String>,
    /// Directories the model listed.
    pub(super) listed: BTreeSet<String>,
    /// Files the model wrote or edited under the current grant.
    pub(super) written: BTreeSet<String>,
    /// The grant's write paths, once a plan is approved.
    pub(super) granted: Vec<String>,
    /// The task claimed and not completed.
    pub(super) claimed: Option<String>,
    /// Whether the teammate owes something (then it may not end).
    pub(super) owes: bool,
    /// Tools whose last call was refused as invalid, not offered again
    /// until news comes (a model at temperature 0 repeats a refused call).
    pub(super) spurned: BTreeSet<String>,
    /// Whether the lead told of a task of the shared list that can be
    /// claimed: until then the list's tools are not offered.
    pub(super) tasks_heard: bool,
    /// Who sent the teammate a message: `send_message` goes to them (and
    /// the lead), once there is someone to answer.
    pub(super) correspondents: BTreeSet<String>,
    /// Whether the last command since the last write failed (then a fix
    /// is offered).
    pub(super) check_failed: bool,
    /// Files whose whole-file write was put back to the model
    /// ([`super::task_check`]): `write_file` is not offered for them again.
    pub(super) rewrite_put_back: BTreeSet<String>,
    /// Files whose content the model was asked for as text
    /// ([`super::content`]), each once.
    pub(super) asked_whole: BTreeSet<String>,
    /// The files a plan put back to the model would answer the task with
    /// ([`super::task_check::plan_against_task`]): the next plan names
    /// exactly these.
    pub(super) plan_files: Vec<String>,
    /// Where the task names files of the workspace, those of them that
    /// exist: the only files worth reading (a small model otherwise reads
    /// every file before it plans, and takes up what the last one says).
    pub(super) worth_reading: Option<BTreeSet<String>>,
    /// The lines of the granted files that exist, each one that occurs
    /// once (where replies are held to a schema): `edit_file`'s `old` is one
    /// of them, so that a small model's edit always finds its text.
    pub(super) lines: BTreeMap<String, Vec<String>>,
}

impl Known {
    /// Whether a grant of named files (no glob) is held and each is
    /// written.
    pub(super) fn all_written(&self) -> bool {
        !self.granted.is_empty()
            && self
                .granted
                .iter()
                .all(|path| literal(path) && self.written.contains(path))
    }

    /// Takes `tool` off the offer until news comes; never the plan or the end.
    pub(super) fn spurn(&mut self, tool: &str) {
        if tool != catalog::SUBMIT_PLAN && tool != catalog::DONE {
            self.spurned.insert(tool.to_owned());
        }
    }
}

/// A workspace's files and directories.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Tree {
    pub(super) files: BTreeSet<String>,
    /// Always holds `.`.
    pub(super) dirs: BTreeSet<String>,
}

impl Tree {
    /// The files and directories under `root`, hidden ones left out;
    /// `None` if there are more than [`MAX_LISTED`] or it cannot be read.
    pub(super) fn of(root: &std::path::Path) -> Option<Tree> {
        let mut tree = Tree::default();
        tree.dirs.insert(".".into());
        let mut pending = vec![(root.to_path_buf(), String::new())];
        while let Some((dir, prefix)) = pending.pop() {
            for entry in std::fs::read_dir(&dir).ok()? {
                let entry = entry.ok()?;
                let name = entry.file_name();
                let Some(name) = name.to_str() else { continue };
                if name.starts_with('.') {
                    continue;
                }
                let path = format!("{prefix}{name}");
                let kind = entry.file_type().ok()?;
                if kind.is_dir() {
                    pending.push((entry.path(), format!("{path}/")));
                    tree.dirs.insert(path);
                } else if kind.is_file() {
                    tree.files.insert(path);
                }
                if tree.files.len() + tree.dirs.len() > MAX_LISTED {
                    return None;
                }
            }
        }
        Some(tree)
    }
}

/// Whether a grant's path names one file (no glob).
pub(super) fn literal(path: &str) -> bool {
    !path.contains(['*', '?', '[', '{'])
}

/// `tools` (the mode's, and the end tool) narrowed to what `known` allows.
pub(super) fn narrow(tools: &[Tool], known: &Known) -> Vec<Tool> {
    tools
        .iter()
        .filter_map(|tool| narrow_one(tool, known))
        .map(|mut tool| {
            bound(&mut tool.parameters);
            tool
        })
        .collect()
}

/// The most characters of any other string in a call: a model that runs on
/// inside a string (a summary, a step) stops there, not at the reply bound.
const MAX_TEXT: usize = 500;

/// The most characters of one item of a list (a step, a test).
const MAX_ITEM_TEXT: usize = 200;

/// Properties that carry a file's text, bounded by [`MAX_WRITE`].
const FILE_TEXT: [&str; 3] = ["content", "old", "new"];

/// Bounds every string and list of a schema that is not bounded already.
fn bound(schema: &mut Value) {
    let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    for (name, property) in properties.iter_mut() {
        let limit = if FILE_TEXT.contains(&name.as_str()) {
            MAX_WRITE
        } else {
            MAX_TEXT
        };
        bound_value(property, limit);
    }
}

fn bound_value(property: &mut Value, limit: usize) {
    let Some(map) = property.as_object_mut() else {
        return;
    };
    if map.contains_key("enum") || map.contains_key("const") {
        return;
    }
    match map.get("type").and_then(Value::as_str) {
        Some("string") => {
            map.entry("maxLength").or_insert(json!(limit));
        }
        Some("array") => {
            map.entry("maxItems").or_insert(json!(MAX_ITEMS));
            if let Some(items) = map.get_mut("items") {
                bound_value(items, limit.min(MAX_ITEM_TEXT));
            }
        }
        Some("object") => bound(property),
        _ => {}
    }
}

/// `submit_plan` as a small model can fill it: paths for files (the task's
/// own after a put-back), a few short steps, no optional prose.
fn narrow_plan(tool: &mut Tool, known: &Known) {
    let properties = &mut tool.parameters["properties"];
    properties["files"]["minItems"] = json!(1);
    // A path, not prose: no spaces (a path with one can still be
    // planned by another way; the gate does not care).
    properties["files"]["items"] =
        json!({"type": "string", "pattern": PATH_PATTERN, "maxLength": 200});
    properties["files"]["maxItems"] = json!(MAX_PLAN_FILES);
    if !known.plan_files.is_empty() {
        // Put back once for missing the task's files or changing
        // others: the next plan names the task's (a small model
        // otherwise submits the same plan again). A list of
        // `items` is a tuple, as llama.cpp's grammar reads it.
        let tuple: Vec<Value> = known
            .plan_files
            .iter()
            .map(|p| json!({ "const": p }))
            .collect();
        properties["files"]["minItems"] = json!(tuple.len());
        properties["files"]["maxItems"] = json!(tuple.len());
        properties["files"]["items"] = Value::Array(tuple);
    }
    properties["steps"]["minItems"] = json!(1);
    properties["steps"]["maxItems"] = json!(MAX_PLAN_STEPS);
    properties["steps"]["items"]["maxLength"] = json!(MAX_STEP_TEXT);
    // Optional prose that a small model runs away with, and tests
    // it fills with shell lines that it then writes as the file.
    if let Some(p) = properties.as_object_mut() {
        p.remove("body");
        p.remove("tests");
    }
    if let Some(required) = tool.parameters["required"].as_array_mut() {
        required.retain(|r| r != "tests");
    }
}

fn narrow_one(tool: &Tool, known: &Known) -> Option<Tool> {
    if known.spurned.contains(tool.name) {
        return None;
    }
    let literal_grant = !known.granted.is_empty() && known.granted.iter().all(|p| literal(p));
    // While an approved plan's files are not all written, the work; once
    // they are (and no task is claimed), checking, fixing, and the end.
    if literal_grant {
        let phase: &[&str] = if known.granted.iter().any(|p| !known.written.contains(p)) {
            &WORKING
        } else if known.claimed.is_none() && known.check_failed {
            &FIXING
        } else if known.claimed.is_none() {
            &CHECKING
        } else {
            &[tool.name]
        };
        if !phase.contains(&tool.name) {
            return None;
        }
    }
    let mut tool = tool.clone();
    let properties = &mut tool.parameters["properties"];
    match tool.name {
        "read_file" => {
            if let Some(tree) = &known.tree {
                let unread = tree.files.difference(&known.read);
                properties["path"] = match &known.worth_reading {
                    Some(worth) => one_of(unread.filter(|p| worth.contains(*p)))?,
                    None => one_of(unread)?,
                };
            }
        }
        "list_dir" | "search" if known.worth_reading.is_some() => return None,
        "list_dir" => {
            if let Some(tree) = &known.tree {
                properties["path"] = one_of(tree.dirs.difference(&known.listed))?;
            }
        }
        "search" if known.tree.as_ref().is_some_and(|t| t.files.is_empty()) => return None,
        catalog::SUBMIT_PLAN => narrow_plan(&mut tool, known),
        "write_file" => {
            if literal_grant {
                let granted: BTreeSet<String> = known.granted.iter().cloned().collect();
                // A file whose lines are known is changed by `edit_file`
                // (its `old` one of them): a small model that writes the
                // whole file writes a fragment.
                let unwritten: BTreeSet<String> = granted
                    .difference(&known.written)
                    .filter(|p| known.lines.get(*p).is_none_or(Vec::is_empty))
                    .cloned()
                    .collect();
                properties["path"] = one_of(unwritten.difference(&known.rewrite_put_back))?;
            }
            properties["content"]["maxLength"] = json!(MAX_WRITE);
        }
        "edit_file" if literal_grant => {
            let exists = |p: &&String| {
                known.written.contains(*p)
                    || known.tree.as_ref().is_some_and(|t| t.files.contains(*p))
            };
            properties["path"] = one_of(known.granted.iter().filter(exists))?;
            edit_by_lines(&mut tool.parameters, known);
        }
        // The grant's files come first: more are asked for once they are written.
        catalog::REQUEST_AMENDMENT
            if literal_grant && known.granted.iter().any(|p| !known.written.contains(p)) =>
        {
            return None
        }
        catalog::CLAIM_TASK if known.claimed.is_some() => return None,
        catalog::LIST_TASKS | catalog::CLAIM_TASK if !known.tasks_heard => return None,
        catalog::SEND_MESSAGE => {
            let mut to: BTreeSet<String> = known.correspondents.clone();
            if to.is_empty() {
                return None;
            }
            to.insert("lead".to_owned());
            properties["to"] = one_of(to.iter())?;
        }
        catalog::COMPLETE_TASK => {
            properties["task_id"] = json!({"const": known.claimed.as_ref()?});
        }
        catalog::DONE if known.owes => return None,
        _ => {}
    }
    Some(tool)
}

/// `edit_file`'s arguments as one choice per file whose lines are known:
/// that path, `old` one of its lines. Unchanged where a file's lines are
/// not known.
fn edit_by_lines(parameters: &mut Value, known: &Known) {
    let Some(paths) = parameters["properties"]["path"]["enum"].as_array() else {
        return;
    };
    let mut choices = Vec::new();
    for path in paths {
        let Some(lines) = path.as_str().and_then(|p| known.lines.get(p)) else {
            return;
        };
        if lines.is_empty() {
            return;
        }
        choices.push(json!({
            "type": "object",
            "properties": {
                "path": {"const": path},
                "old": {"type": "string", "enum": lines},
                "new": {"type": "string", "maxLength": MAX_WRITE},
            },
            "required": ["path", "old", "new"],
        }));
    }
    *parameters = match <[Value; 1]>::try_from(choices) {
        Ok([one]) => one,
        Err(choices) => json!({"type": "object", "anyOf": choices}),
    };
}

/// The lines of each of `paths` under `root` that occur once in it, where
/// the file is small (at most [`MAX_LINES`] lines and [`MAX_WRITE`] bytes).
pub(super) fn lines_of<'a>(
    root: &std::path::Path,
    paths: impl Iterator<Item = &'a String>,
) -> BTreeMap<String, Vec<String>> {
    let mut all = BTreeMap::new();
    for path in paths {
        let Ok(text) = std::fs::read_to_string(root.join(path)) else {
            continue;
        };
        if text.len() > MAX_WRITE || text.lines().count() > MAX_LINES {
            continue;
        }
        let mut lines: Vec<String> = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            if text.matches(line).count() == 1 && !lines.iter().any(|l| l == line) {
                lines.push(line.to_owned());
            }
        }
        all.insert(path.clone(), lines);
    }
    all
}

/// The most lines of a file whose lines `edit_file` offers.
const MAX_LINES: usize = 200;

/// A string that is one of `values`; `None` if there are none.
fn one_of<'a>(values: impl Iterator<Item = &'a String>) -> Option<Value> {
    let values: Vec<&String> = values.collect();
    (!values.is_empty()).then(|| json!({"type": "string", "enum": values}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools(names: &[&str]) -> Vec<Tool> {
        names
            .iter()
            .map(|n| catalog::tool(n).expect("a tool"))
            .collect()
    }

    fn names(tools: &[Tool]) -> Vec<&str> {
        tools.iter().map(|t| t.name).collect()
    }

    fn tree(files: &[&str]) -> Option<Tree> {
        let mut dirs = BTreeSet::from([".".to_owned()]);
        dirs.insert("src".into());
        Some(Tree {
            files: files.iter().map(|f| f.to_string()).collect(),
            dirs,
        })
    }

    #[test]
    fn plan_mode_reads_what_exists_and_was_not_read_and_cannot_end_owing_a_plan() {
        let offered = tools(&["read_file", "list_dir", "search", "submit_plan", "done"]);
        let mut known = Known {
            tree: tree(&["NOTES.md", "src/lib.rs"]),
            owes: true,
            ..Known::default()
        };
        known.read.insert("NOTES.md".into());
        let narrowed = narrow(&offered, &known);
        assert_eq!(
            names(&narrowed),
            ["read_file", "list_dir", "search", "submit_plan"]
        );
        assert_eq!(
            narrowed[0].parameters["properties"]["path"]["enum"],
            json!(["src/lib.rs"])
        );
        assert_eq!(narrowed[3].parameters["properties"]["files"]["minItems"], 1);
        // Everything read and listed: those tools are gone.
        known.read.insert("src/lib.rs".into());
        known.listed.extend([".".to_owned(), "src".to_owned()]);
        assert_eq!(names(&narrow(&offered, &known)), ["search", "submit_plan"]);
        // A workspace too big to name: any path.
        known.tree = None;
        let any = narrow(&offered, &known);
        assert_eq!(any[0].parameters["properties"]["path"]["type"], "string");
        assert!(any[0].parameters["properties"]["path"]
            .get("enum")
            .is_none());
    }

    #[test]
    fn approved_writes_go_to_the_grants_files_not_yet_written_and_then_it_may_end() {
        let offered = tools(&[
            "write_file",
            "edit_file",
            "run_command",
            "request_amendment",
            "done",
        ]);
        let mut known = Known {
            tree: tree(&[]),
            granted: vec!["hello.txt".into(), "b.txt".into()],
            owes: true,
            ..Known::default()
        };
        let narrowed = narrow(&offered, &known);
        assert_eq!(names(&narrowed), ["write_file", "run_command"]);
        let mut reading = known.clone();
        reading.granted.push("src/**".into());
        reading.correspondents.insert("bob".into());
        assert_eq!(
            names(&narrow(&tools(&["list_dir", "send_message"]), &reading)),
            ["list_dir", "send_message"],
            "a grant of globs leaves the offer whole"
        );
        assert!(narrow(&tools(&["list_dir", "send_message"]), &known).is_empty());
        assert_eq!(
            narrowed[0].parameters["properties"]["path"]["enum"],
            json!(["b.txt", "hello.txt"])
        );
        known.written.insert("hello.txt".into());
        known.owes = false;
        let narrowed = narrow(&offered, &known);
        assert_eq!(names(&narrowed), ["write_file", "edit_file", "run_command"]);
        assert_eq!(
            narrowed[1].parameters["properties"]["path"]["enum"],
            json!(["hello.txt"])
        );
        // All written: a check and the end; a fix once a check failed.
        known.written.insert("b.txt".into());
        assert!(known.all_written());
        assert_eq!(names(&narrow(&offered, &known)), ["run_command", "done"]);
        known.check_failed = true;
        assert_eq!(
            names(&narrow(&offered, &known)),
            ["edit_file", "run_command", "done"]
        );
        known.written.remove("b.txt");
        // A grant of globs: any path (the gate decides).
        known.granted = vec!["src/**".into()];
        let narrowed = narrow(&offered, &known);
        assert_eq!(
            narrowed[0].parameters["properties"]["path"]["type"],
            "string"
        );
        assert!(narrowed[0].parameters["properties"]["path"]
            .get("enum")
            .is_none());
    }

    #[test]
    fn every_string_and_list_is_bounded() {
        let narrowed = narrow(
            &tools(&["submit_plan", "write_file", "edit_file", "done"]),
            &Known::default(),
        );
        let plan = &narrowed[0].parameters["properties"];
        assert_eq!(plan["summary"]["maxLength"], MAX_TEXT);
        assert_eq!(plan["steps"]["maxItems"], MAX_PLAN_STEPS);
        assert_eq!(plan["steps"]["items"]["maxLength"], MAX_STEP_TEXT);
        assert!(plan.get("tests").is_none(), "left out: {plan}");
        assert_eq!(plan["files"]["minItems"], 1);
        assert_eq!(plan["files"]["items"]["pattern"], PATH_PATTERN);
        assert_eq!(plan["files"]["maxItems"], MAX_PLAN_FILES);
        let write = &narrowed[1].parameters["properties"];
        assert_eq!(write["content"]["maxLength"], MAX_WRITE);
        assert_eq!(write["path"]["maxLength"], MAX_TEXT);
        let edit = &narrowed[2].parameters["properties"];
        assert_eq!(edit["old"]["maxLength"], MAX_WRITE);
        assert_eq!(
            narrowed[3].parameters["properties"]["summary"]["maxLength"],
            MAX_TEXT
        );
    }

    #[test]
    fn messages_go_to_those_who_wrote_and_search_needs_files() {
        let offered = tools(&["send_message", "search"]);
        let mut known = Known {
            tree: tree(&[]),
            ..Known::default()
        };
        assert!(narrow(&offered, &known).is_empty());
        known.correspondents.insert("bob".into());
        known.tree = tree(&["a.txt"]);
        let narrowed = narrow(&offered, &known);
        assert_eq!(names(&narrowed), ["send_message", "search"]);
        assert_eq!(
            narrowed[0].parameters["properties"]["to"]["enum"],
            json!(["bob", "lead"])
        );
    }

    #[test]
    fn a_refused_tool_is_off_the_offer_but_never_the_plan() {
        let offered = tools(&["read_file", "submit_plan", "request_amendment"]);
        let mut known = Known::default();
        known.spurn("request_amendment");
        known.spurn("submit_plan");
        assert_eq!(
            names(&narrow(&offered, &known)),
            ["read_file", "submit_plan"]
        );
    }

    #[test]
    fn a_claimed_task_is_the_one_to_complete_and_no_other_is_claimed() {
        let offered = tools(&["list_tasks", "claim_task", "complete_task"]);
        assert!(
            narrow(&offered, &Known::default()).is_empty(),
            "no task heard of: nothing to list or claim"
        );
        let known = Known {
            tasks_heard: true,
            ..Known::default()
        };
        assert_eq!(
            names(&narrow(&offered, &known)),
            ["list_tasks", "claim_task"]
        );
        let known = Known {
            claimed: Some("t1".into()),
            ..Known::default()
        };
        let narrowed = narrow(&offered, &known);
        assert_eq!(names(&narrowed), ["complete_task"]);
        assert_eq!(
            narrowed[0].parameters["properties"]["task_id"]["const"],
            "t1"
        );
    }

    #[test]
    fn the_workspace_tree_leaves_out_hidden_files_and_gives_up_when_large() {
        let dir = tempfile::tempdir().expect("a dir");
        std::fs::create_dir_all(dir.path().join("src")).expect("mkdir");
        std::fs::create_dir_all(dir.path().join(".git")).expect("mkdir");
        std::fs::write(dir.path().join("src/lib.rs"), "x").expect("write");
        std::fs::write(dir.path().join(".git/HEAD"), "x").expect("write");
        std::fs::write(dir.path().join("NOTES.md"), "x").expect("write");
        let tree = Tree::of(dir.path()).expect("small");
        assert_eq!(
            tree.files.iter().collect::<Vec<_>>(),
            ["NOTES.md", "src/lib.rs"]
        );
        assert_eq!(tree.dirs.iter().collect::<Vec<_>>(), [".", "src"]);
        for i in 0..=MAX_LISTED {
            std::fs::write(dir.path().join(format!("f{i}")), "x").expect("write");
        }
        assert_eq!(Tree::of(dir.path()), None);
    }
}
