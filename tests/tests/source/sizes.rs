//! Rooms one can hold in the head: no source file over 600 lines and no
//! function over 120 (tests and generated code aside), checked on the tree
//! without building anything. (When the floor was set, 11 files and 5
//! functions were over it and were listed here, allowed to shrink only;
//! they have all come under it, so there is no list any more: a file or a
//! function over the floor fails.)
//!
//! `cargo test -p mesh-tests --test source -- --nocapture` prints the largest
//! files and functions.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
};

/// The most lines a source file may have.
const FILE_FLOOR: usize = 600;
/// The most lines a function may have.
const FN_FLOOR: usize = 120;

/// The source trees held to the floors (tests and generated code aside).
const TREES: &[&str] = &[
    "lead/src",
    "teammate/src",
    "shared/src",
    "shared/core/src",
    "shared/llm/src",
    "shared/telemetry/src",
    "shared/notify/src",
    "bench/src",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives in the repository")
        .to_path_buf()
}

/// Whether `path` is test code: a `tests.rs`, a `*_tests.rs`, or under a
/// `tests/` directory.
fn is_test(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name == "tests.rs" || name.ends_with("_tests.rs") || path.contains("/tests/")
}

fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let relative = path
                .strip_prefix(root)
                .expect("under the root")
                .to_string_lossy()
                .replace('\\', "/");
            if !is_test(&relative) {
                out.push(relative);
            }
        }
    }
}

/// The file's lines before its unit tests: a top-level `#[cfg(test)]`
/// followed by an inline `mod NAME {` (any other item behind
/// `#[cfg(test)]` counts, a `mod NAME;` of tests in a file of their own
/// too).
fn code_lines(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let tests = lines.windows(2).position(|pair| {
        pair[0] == "#[cfg(test)]" && pair[1].starts_with("mod ") && pair[1].ends_with('{')
    });
    lines[..tests.unwrap_or(lines.len())].to_vec()
}

/// Each line with string and char literals and comments blanked, so that
/// only code's braces are left (raw strings, escapes and block comments
/// included).
fn braces_only(lines: &[&str]) -> Vec<String> {
    #[derive(Clone, Copy, PartialEq)]
    enum In {
        Code,
        Str,
        Raw(usize),
        Block,
    }
    let mut state = In::Code;
    let mut out = Vec::with_capacity(lines.len());
    for line in lines {
        let chars: Vec<char> = line.chars().collect();
        let mut kept = String::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            match state {
                In::Code => {
                    if c == '/' && chars.get(i + 1) == Some(&'/') {
                        break;
                    } else if c == '/' && chars.get(i + 1) == Some(&'*') {
                        state = In::Block;
                        i += 1;
                    } else if c == 'r'
                        && matches!(chars.get(i + 1), Some('#') | Some('"'))
                        && (i == 0 || !chars[i - 1].is_alphanumeric() && chars[i - 1] != '_')
                    {
                        let mut hashes = 0;
                        let mut j = i + 1;
                        while chars.get(j) == Some(&'#') {
                            hashes += 1;
                            j += 1;
                        }
                        if chars.get(j) == Some(&'"') {
                            state = In::Raw(hashes);
                            i = j;
                        }
                    } else if c == '"' {
                        state = In::Str;
                    } else if c == '\'' {
                        // A char literal ('{', '\'', '\u{..}'); a lifetime
                        // ('a) has no closing quote near.
                        if chars.get(i + 1) == Some(&'\\') {
                            if let Some(end) = chars[i + 2..].iter().position(|&x| x == '\'') {
                                i += end + 2;
                            }
                        } else if chars.get(i + 2) == Some(&'\'') {
                            i += 2;
                        }
                    } else if c == '{' || c == '}' {
                        kept.push(c);
                    }
                }
                In::Str => {
                    if c == '\\' {
                        i += 1;
                    } else if c == '"' {
                        state = In::Code;
                    }
                }
                In::Raw(hashes) => {
                    if c == '"'
                        && chars[i + 1..].iter().take_while(|&&x| x == '#').count() >= hashes
                    {
                        state = In::Code;
                        i += hashes;
                    }
                }
                In::Block => {
                    if c == '*' && chars.get(i + 1) == Some(&'/') {
                        state = In::Code;
                        i += 1;
                    }
                }
            }
            i += 1;
        }
        out.push(kept);
    }
    out
}

/// The name of the function a line declares, if it does.
fn declared_fn(line: &str) -> Option<String> {
    let mut words = line.split_whitespace().peekable();
    while let Some(word) = words.next() {
        match word {
            "pub" | "async" | "const" | "unsafe" | "extern" => continue,
            w if w.starts_with("pub(") => continue,
            "fn" => {
                let name = words.next()?;
                let name: String = name
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                return (!name.is_empty()).then_some(name);
            }
            _ => return None,
        }
    }
    None
}

/// The type a top-level `impl` line is for: `impl ToPb for Notice {` is
/// `Notice`, `impl<T> Sender<T> {` is `Sender`.
fn impl_type(line: &str) -> Option<String> {
    let rest = line.strip_prefix("impl")?;
    let rest = match rest.strip_prefix('<') {
        // Past the generics' closing `>`.
        Some(generics) => {
            let mut depth = 1;
            let cut = generics.char_indices().find_map(|(i, c)| {
                depth += match c {
                    '<' => 1,
                    '>' => -1,
                    _ => 0,
                };
                (depth == 0).then_some(i + 1)
            })?;
            &generics[cut..]
        }
        None => rest,
    };
    let target = rest.split(" for ").nth(1).unwrap_or(rest).trim_start();
    let name: String = target
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// Each function's name (`path::name`, or `path::Type::name` for a method
/// of a top-level `impl`; with a number when a file has two of one name)
/// and its lines, from its `fn` to its closing brace.
fn functions(path: &str, lines: &[&str]) -> Vec<(String, usize)> {
    let braces = braces_only(lines);
    let mut found = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut within: Option<String> = None;
    for (start, line) in lines.iter().enumerate() {
        if !line.starts_with(' ') {
            if let Some(ty) = impl_type(line) {
                within = Some(ty);
            } else if line.starts_with('}') || declared_fn(line).is_some() {
                within = None;
            }
        }
        let Some(name) = declared_fn(line) else {
            continue;
        };
        let name = match (&within, line.starts_with(' ')) {
            (Some(ty), true) => format!("{ty}::{name}"),
            _ => name,
        };
        // From its first `{` to the brace that closes it; a declaration
        // that ends in `;` first (a trait's) has no body.
        let mut depth = 0i64;
        let mut opened = false;
        let mut end = None;
        'lines: for (at, kept) in braces.iter().enumerate().skip(start) {
            if !opened && at > start && lines[at - 1].trim_end().ends_with(';') {
                break;
            }
            for c in kept.chars() {
                depth += if c == '{' { 1 } else { -1 };
                opened |= c == '{';
                if opened && depth == 0 {
                    end = Some(at);
                    break 'lines;
                }
            }
        }
        if let Some(end) = end {
            let n = seen.entry(name.clone()).or_default();
            *n += 1;
            let key = if *n == 1 {
                format!("{path}::{name}")
            } else {
                format!("{path}::{name}#{n}")
            };
            found.push((key, end - start + 1));
        }
    }
    found
}

struct Measured {
    files: Vec<(String, usize)>,
    fns: Vec<(String, usize)>,
}

fn measure() -> Measured {
    let root = root();
    let mut paths = Vec::new();
    for tree in TREES {
        walk(&root.join(tree), &root, &mut paths);
    }
    paths.sort();
    let mut files = Vec::new();
    let mut fns = Vec::new();
    for path in &paths {
        let text = fs::read_to_string(root.join(path)).expect("readable");
        let lines = code_lines(&text);
        files.push((path.clone(), lines.len()));
        fns.extend(functions(path, &lines));
    }
    files.sort_by_key(|f| std::cmp::Reverse(f.1));
    fns.sort_by_key(|f| std::cmp::Reverse(f.1));
    Measured { files, fns }
}

/// What is over `floor`.
fn over(measured: &[(String, usize)], floor: usize) -> Vec<String> {
    measured
        .iter()
        .filter(|(_, lines)| *lines > floor)
        .map(|(name, lines)| format!("{name}: {lines} lines, over the floor of {floor}"))
        .collect()
}

#[test]
fn no_file_or_function_is_over_the_floor() {
    let measured = measure();
    println!("largest files:");
    for (name, lines) in measured.files.iter().take(10) {
        println!("  {lines:5} {name}");
    }
    println!("largest functions:");
    for (name, lines) in measured.fns.iter().take(10) {
        println!("  {lines:5} {name}");
    }
    let files = over(&measured.files, FILE_FLOOR);
    let fns = over(&measured.fns, FN_FLOOR);
    assert!(
        files.is_empty() && fns.is_empty(),
        "over the floors (files {FILE_FLOOR} lines, functions {FN_FLOOR}):\n{}",
        files
            .iter()
            .chain(&fns)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_lexer_sees_only_code_braces() {
    let lines = [
        "fn a() {",
        "    let s = \"{ not a brace\";",
        "    let c = '{';",
        "    let r = r#\"} nor this\"#;",
        "    // } nor this",
        "    if x { y } /* { */",
        "}",
        "fn b<'a>(x: &'a str) -> &'a str { x }",
    ];
    let found = functions("f.rs", &lines);
    assert_eq!(
        found,
        [("f.rs::a".to_owned(), 7), ("f.rs::b".to_owned(), 1)]
    );
}
