//! The documentation against the tree, without starting anything: the
//! layout page (`docs/layout.md`) names every source file of the workspace
//! and no file that does not exist; the README stays a newcomer's page
//! (short, linking every page of `docs/`); and every relative link in the
//! README and in `docs/` leads to a file that exists (and, for a page, to a
//! heading it has). And the lead's shape: no module reaches itself through
//! its imports, and the runtime modules speak no wire.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

/// The page that names every source file.
const LAYOUT: &str = "docs/layout.md";

/// The directories whose source files the layout page must name.
const WALKED: &[&str] = &[
    "lead", "teammate", "shared", "tests", "bench", "examples", "proto",
];

/// What counts as a source file: Rust, protobuf, Python, and the console's
/// assets.
const SOURCE_EXTENSIONS: &[&str] = &["rs", "proto", "py", "js", "css", "html"];

/// Directories never walked: build output, caches, generated stubs.
const SKIPPED_DIRS: &[&str] = &["target", "node_modules", "__pycache__", "gen"];

/// The README's most lines.
const README_MAX_LINES: usize = 320;

/// The repository's root: the parent of this crate's directory.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives in the repository")
        .to_path_buf()
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Markdown with its fenced code blocks blanked out (their lines kept, so
/// that nothing else moves).
fn without_fences(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// The inline code spans of a page, outside its fenced blocks.
fn code_spans(text: &str) -> Vec<String> {
    without_fences(text)
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// Whether a code span is a file's path from the repository's root: no
/// spaces or wildcards, a directory in it, and a name with an extension
/// (`lead/src/hub.rs`, not `mesh.v1.Lead`, `tests/`, `/proc/PID/environ`
/// or `<state-dir>/mesh.db`).
fn looks_like_file_path(span: &str) -> bool {
    let clean = !span.is_empty()
        && !span.starts_with('/')
        && !span.starts_with('.')
        && !span.contains("://")
        && span
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c));
    let Some((dir, name)) = span.rsplit_once('/') else {
        return false;
    };
    let extension = name.rsplit_once('.').map(|(_, ext)| ext);
    clean
        && !dir.is_empty()
        && extension.is_some_and(|ext| {
            (1..=5).contains(&ext.len()) && ext.chars().all(|c| c.is_ascii_alphanumeric())
        })
}

fn is_source(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let generated = name.ends_with("_pb2.py") || name.ends_with("_pb2_grpc.py");
    !generated
        && path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| SOURCE_EXTENSIONS.contains(&e))
}

/// Every source file under `dir`, as a path from the root with `/`.
fn walk(root: &Path, dir: &Path, found: &mut BTreeSet<String>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("list {}: {e}", dir.display()));
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| panic!("list {}: {e}", dir.display()));
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let kind = entry
            .file_type()
            .unwrap_or_else(|e| panic!("stat {}: {e}", path.display()));
        if kind.is_dir() {
            if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_ref()) {
                walk(root, &path, found);
            }
        } else if kind.is_file() && is_source(&path) {
            let relative = path.strip_prefix(root).expect("walked under the root");
            let parts: Vec<_> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            found.insert(parts.join("/"));
        }
    }
}

#[test]
fn the_layout_page_names_every_source_file_and_only_files_that_exist() {
    let root = root();
    let page = read(&root.join(LAYOUT));
    let named: BTreeSet<String> = code_spans(&page)
        .into_iter()
        .filter(|span| looks_like_file_path(span))
        .collect();
    assert!(
        named.len() > 100,
        "{LAYOUT} names only {} files: is it the layout page?",
        named.len()
    );

    let missing: Vec<&String> = named
        .iter()
        .filter(|path| !root.join(path).is_file())
        .collect();

    let mut sources = BTreeSet::new();
    for dir in WALKED {
        walk(&root, &root.join(dir), &mut sources);
    }
    let unnamed: Vec<&String> = sources.difference(&named).collect();

    let mut problems = Vec::new();
    if !missing.is_empty() {
        problems.push(format!(
            "{LAYOUT} names files that do not exist:\n  {}",
            join(&missing)
        ));
    }
    if !unnamed.is_empty() {
        problems.push(format!(
            "source files that {LAYOUT} does not name (add a line each: \
             \"- `PATH` — what it holds\"):\n  {}",
            join(&unnamed)
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_readme_is_short_and_links_every_docs_page() {
    let root = root();
    let readme = read(&root.join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines < README_MAX_LINES,
        "README.md has {lines} lines; keep it under {README_MAX_LINES} and move detail to docs/"
    );

    let mut pages = Vec::new();
    let docs = root.join("docs");
    let entries = fs::read_dir(&docs).unwrap_or_else(|e| panic!("list {}: {e}", docs.display()));
    for entry in entries {
        let path = entry.expect("a docs entry").path();
        if path.extension().and_then(|e| e.to_str()) == Some("md") {
            let name = path.file_name().expect("a file name").to_string_lossy();
            pages.push(name.into_owned());
        }
    }
    pages.sort();
    assert!(!pages.is_empty(), "docs/ has no page");
    let unlinked: Vec<&String> = pages
        .iter()
        .filter(|page| {
            !readme.contains(&format!("](docs/{page})"))
                && !readme.contains(&format!("](docs/{page}#"))
        })
        .collect();
    assert!(
        unlinked.is_empty(),
        "README.md does not link these pages of docs/:\n  {}",
        join(&unlinked)
    );
}

#[test]
fn relative_links_in_the_readme_and_docs_lead_somewhere() {
    let root = root();
    let mut pages = vec![root.join("README.md")];
    let docs = root.join("docs");
    for entry in fs::read_dir(&docs).unwrap_or_else(|e| panic!("list {}: {e}", docs.display())) {
        let path = entry.expect("a docs entry").path();
        if path.extension().and_then(|e| e.to_str()) == Some("md") {
            pages.push(path);
        }
    }

    let mut broken = Vec::new();
    for page in &pages {
        let text = read(page);
        let dir = page.parent().expect("a page is in a directory");
        for target in link_targets(&without_fences(&text)) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (target.as_str(), None),
            };
            let file = if file.is_empty() {
                page.clone()
            } else {
                dir.join(file)
            };
            let shown = format!(
                "{}: ({target})",
                page.strip_prefix(&root).unwrap_or(page).display()
            );
            if !file.exists() {
                broken.push(format!("{shown}: no such file"));
            } else if let Some(anchor) = anchor {
                let is_page = file.extension().and_then(|e| e.to_str()) == Some("md");
                if is_page && !anchors(&read(&file)).contains(anchor) {
                    broken.push(format!("{shown}: no heading makes #{anchor}"));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "broken links:\n  {}",
        broken.join("\n  ")
    );
}

/// The targets of a page's inline links, `[text](target)`.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        if let Some(end) = rest.find(')') {
            let target = &rest[..end];
            if !target.is_empty() && !target.contains(char::is_whitespace) {
                targets.push(target.to_owned());
            }
            rest = &rest[end..];
        }
    }
    targets
}

/// The anchors a page's headings make, as GitHub makes them: lower case,
/// punctuation but `-` and `_` dropped, spaces as `-`.
fn anchors(text: &str) -> BTreeSet<String> {
    without_fences(text)
        .lines()
        .filter_map(|line| {
            let title = line.trim_start_matches('#');
            (title.len() < line.len() && title.starts_with(' ')).then_some(title)
        })
        .map(|title| {
            title
                .trim()
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
                .map(|c| if c == ' ' { '-' } else { c })
                .collect()
        })
        .collect()
}

fn join(paths: &[&String]) -> String {
    paths
        .iter()
        .map(|p| p.as_str())
        .collect::<Vec<_>>()
        .join("\n  ")
}

/// The workspace's crates as `cargo metadata` reads them: each crate's
/// folder (from the repository's root) and the workspace crates it depends
/// on (normal dependencies, as the table states them).
fn workspace_crates() -> BTreeMap<String, (String, BTreeSet<String>)> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(root().join("Cargo.toml"))
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let packages = metadata["packages"].as_array().expect("packages");
    let names: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    let root = root();
    packages
        .iter()
        .map(|p| {
            let name = p["name"].as_str().expect("a package's name").to_owned();
            let manifest = Path::new(p["manifest_path"].as_str().expect("manifest_path"));
            let folder = manifest
                .parent()
                .and_then(|d| d.strip_prefix(&root).ok())
                .map(|d| d.display().to_string())
                .expect("a crate inside the repository");
            let deps = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str())
                .filter(|d| names.contains(d))
                .map(str::to_owned)
                .collect();
            (name, (folder, deps))
        })
        .collect()
}

#[test]
fn the_crates_table_matches_cargo_metadata() {
    let page = read(&root().join("docs/layout.md"));
    let crates = workspace_crates();
    let mut rows = BTreeMap::new();
    for line in page.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // | crate | folder | deps |, past the header and its rule.
        if cells.len() != 5 || cells[1] == "crate" || cells[1].starts_with("---") {
            continue;
        }
        if !root().join(cells[2]).join("Cargo.toml").is_file() {
            continue;
        }
        let said: BTreeSet<String> = if cells[3] == "none" {
            BTreeSet::new()
        } else {
            cells[3].split(", ").map(str::to_owned).collect()
        };
        rows.insert(cells[1].to_owned(), (cells[2].to_owned(), said));
    }
    let mut wrong = Vec::new();
    for (name, real) in &crates {
        match rows.get(name) {
            None => wrong.push(format!("{name} ({}) has no row", real.0)),
            Some(said) if said != real => wrong.push(format!(
                "{name}: the page says {said:?}, cargo metadata {real:?}"
            )),
            Some(_) => {}
        }
    }
    for name in rows.keys().filter(|n| !crates.contains_key(*n)) {
        wrong.push(format!("{name} has a row but is no crate of the workspace"));
    }
    assert!(
        wrong.is_empty(),
        "docs/layout.md's crate table is wrong:\n{}",
        wrong.join("\n")
    );
    let count = crates.len();
    let words = [
        "", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine", "Ten",
    ];
    let said = format!(
        "{} crates in one workspace",
        words.get(count).unwrap_or(&"")
    );
    assert!(
        page.contains(&said),
        "docs/layout.md should say \"{said}\" (cargo metadata lists {count})"
    );
}

/// The lead's modules (each file of `lead/src` but `lib.rs` and `main.rs`,
/// with its folder), and the text of each: its files, test code included.
fn lead_modules() -> Vec<(String, String)> {
    let src = root().join("lead/src");
    let mut modules = Vec::new();
    for entry in fs::read_dir(&src).expect("list lead/src") {
        let path = entry.expect("entry").path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".rs"))
        else {
            continue;
        };
        if name == "lib" || name == "main" {
            continue;
        }
        let mut files = BTreeSet::new();
        let folder = src.join(name);
        if folder.is_dir() {
            walk(&src, &folder, &mut files);
        }
        let mut text = read(&path);
        for file in files {
            text.push_str(&read(&src.join(file)));
        }
        modules.push((name.to_owned(), text));
    }
    modules
}

/// The lead's modules that `text` names as `crate::NAME` (also inside a
/// `use crate::{...}` group).
fn named(text: &str, modules: &BTreeSet<&str>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let word = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            // `a`, `b::c`, `d::{e, f}` (nested braces are cut, their first
            // names kept): the first word after each separator.
            for part in group.split([',', '{']) {
                let first = word(part.trim_start());
                found.insert(first);
            }
        } else {
            found.insert(word(rest));
        }
    }
    found.retain(|m| modules.contains(m.as_str()));
    found
}

/// No module of the lead imports one that imports it back, through any
/// path of imports, test code included: a module can be read, moved and
/// tested from the ones it names down.
#[test]
fn no_module_of_the_lead_reaches_itself_through_its_imports() {
    let modules = lead_modules();
    let names: BTreeSet<&str> = modules.iter().map(|(n, _)| n.as_str()).collect();
    let imports: std::collections::BTreeMap<&str, BTreeSet<String>> = modules
        .iter()
        .map(|(name, text)| {
            let mut named = named(text, &names);
            named.remove(name);
            (name.as_str(), named)
        })
        .collect();
    let mut circles = Vec::new();
    for start in &names {
        // Every module `start` reaches, and through which it was first reached.
        let mut reached: std::collections::BTreeMap<&str, &str> = Default::default();
        let mut queue = vec![*start];
        while let Some(module) = queue.pop() {
            for next in &imports[module] {
                if !reached.contains_key(next.as_str()) {
                    reached.insert(next.as_str(), module);
                    queue.push(next.as_str());
                }
            }
        }
        if reached.contains_key(start) {
            let mut path = vec![*start];
            let mut at = reached[start];
            while at != *start && path.len() <= names.len() {
                path.push(at);
                at = reached[at];
            }
            path.push(start);
            path.reverse();
            circles.push(path.join(" -> "));
        }
    }
    assert!(
        circles.is_empty(),
        "modules of the lead that reach themselves:\n{}",
        circles.join("\n")
    );
}

/// The modules that run the team (the hub, its outbox and inboxes, the
/// history, the stats, the reviewers) speak the core's types: the wire
/// (`pb::`, `tonic::`) is the adapters' business, test code included.
#[test]
fn the_runtime_modules_speak_no_wire() {
    const RUNTIME: &[&str] = &["hub", "outbox", "inboxes", "history", "stats", "reviewer"];
    let mut found = Vec::new();
    for (name, text) in lead_modules() {
        if !RUNTIME.contains(&name.as_str()) {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            if line.contains("pb::") || line.contains("tonic::") {
                found.push(format!(
                    "{name} (line {} of its text): {}",
                    n + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the wire in the runtime:\n{}",
        found.join("\n")
    );
}
