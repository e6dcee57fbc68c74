//! Tool calls, and the read-only tools every mode has: `read_file`,
//! `list_dir`, `search`. Every path is confined to the workspace: no absolute
//! paths, no `..`, no symlink that leads out.

use std::{
    fs,
    path::{Component, Path, PathBuf},
};

use serde_json::json;

/// The tools that never change anything.
pub const READ_TOOLS: [&str; 3] = ["read_file", "list_dir", "search"];
/// The tools a grant unlocks.
pub const GATED_TOOLS: [&str; 3] = ["write_file", "edit_file", "run_command"];

/// The largest file `read_file` returns, and `search` looks into.
const MAX_READ_BYTES: u64 = 1024 * 1024;
/// The most matches `search` returns.
const MAX_MATCHES: usize = 200;

/// One tool call, as a driver asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolCall {
    /// Reads a file.
    ReadFile { path: String },
    /// Lists a directory.
    ListDir { path: String },
    /// Finds lines containing `pattern` in the workspace's files.
    Search { pattern: String },
    /// Writes a whole file, atomically.
    WriteFile { path: String, content: String },
    /// Replaces the one occurrence of `old` with `new`, atomically.
    EditFile {
        path: String,
        old: String,
        new: String,
    },
    /// Runs a shell command in the workspace.
    RunCommand { command: String },
}

impl ToolCall {
    /// The tool's name.
    pub fn name(&self) -> &'static str {
        match self {
            ToolCall::ReadFile { .. } => "read_file",
            ToolCall::ListDir { .. } => "list_dir",
            ToolCall::Search { .. } => "search",
            ToolCall::WriteFile { .. } => "write_file",
            ToolCall::EditFile { .. } => "edit_file",
            ToolCall::RunCommand { .. } => "run_command",
        }
    }

    /// Whether the tool needs a grant.
    pub fn is_gated(&self) -> bool {
        GATED_TOOLS.contains(&self.name())
    }

    /// The path it writes, for file edits.
    pub fn write_path(&self) -> Option<&str> {
        match self {
            ToolCall::WriteFile { path, .. } | ToolCall::EditFile { path, .. } => Some(path),
            _ => None,
        }
    }

    /// The arguments as JSON; long text is cut, for reports.
    pub fn args_json(&self) -> String {
        let cut = |s: &str| {
            if s.len() > 120 {
                format!("{}… ({} bytes)", truncate(s, 120), s.len())
            } else {
                s.to_owned()
            }
        };
        match self {
            ToolCall::ReadFile { path } | ToolCall::ListDir { path } => json!({ "path": path }),
            ToolCall::Search { pattern } => json!({ "pattern": pattern }),
            ToolCall::WriteFile { path, content } => {
                json!({ "path": path, "content": cut(content) })
            }
            ToolCall::EditFile { path, old, new } => {
                json!({ "path": path, "old": cut(old), "new": cut(new) })
            }
            ToolCall::RunCommand { command } => json!({ "command": command }),
        }
        .to_string()
    }
}

/// `s` cut to at most `max` bytes, on a character boundary.
pub fn truncate(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A tool call that did not run or failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The mode or grant does not allow it.
    #[error("refused: {0}")]
    Refused(String),
    /// The path leaves the workspace or is malformed.
    #[error("bad path {path:?}: {problem}")]
    Path { path: String, problem: String },
    /// It ran and failed.
    #[error("{0}")]
    Failed(String),
}

/// The directory a teammate works in.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// Canonical root.
    root: PathBuf,
}

impl Workspace {
    /// Opens (and creates) the workspace at `root`.
    pub fn open(root: &Path) -> std::io::Result<Self> {
        fs::create_dir_all(root)?;
        Ok(Self {
            root: root.canonicalize()?,
        })
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Joins a relative path to the root after refusing absolute paths and `..`.
    pub(crate) fn lexical(&self, path: &str) -> Result<PathBuf, ToolError> {
        let bad = |problem: &str| ToolError::Path {
            path: path.to_owned(),
            problem: problem.to_owned(),
        };
        if path.is_empty() {
            return Err(bad("is empty"));
        }
        let mut out = self.root.clone();
        for component in Path::new(path).components() {
            match component {
                Component::Normal(part) => out.push(part),
                Component::CurDir => {}
                Component::ParentDir => return Err(bad("\"..\" leaves the workspace")),
                Component::RootDir | Component::Prefix(_) => {
                    return Err(bad("is absolute; paths are relative to the workspace"))
                }
            }
        }
        Ok(out)
    }

    /// An existing path inside the workspace, symlinks resolved.
    fn existing(&self, path: &str) -> Result<PathBuf, ToolError> {
        let joined = self.lexical(path)?;
        let real = joined
            .canonicalize()
            .map_err(|e| ToolError::Failed(format!("{path}: {e}")))?;
        if !real.starts_with(&self.root) {
            return Err(ToolError::Path {
                path: path.to_owned(),
                problem: "a symlink leads out of the workspace".into(),
            });
        }
        Ok(real)
    }

    /// A path to write: inside the workspace, its parent created, and neither
    /// it nor any parent a symlink that leads out.
    pub(crate) fn writable(&self, path: &str) -> Result<PathBuf, ToolError> {
        let joined = self.lexical(path)?;
        let escape = || ToolError::Path {
            path: path.to_owned(),
            problem: "a symlink leads out of the workspace".into(),
        };
        let parent = joined.parent().ok_or_else(|| ToolError::Path {
            path: path.to_owned(),
            problem: "names the workspace itself".into(),
        })?;
        // The deepest ancestor that exists must resolve inside the root.
        let mut ancestor = parent;
        while !ancestor.exists() {
            ancestor = ancestor.parent().ok_or_else(escape)?;
        }
        let real = ancestor
            .canonicalize()
            .map_err(|e| ToolError::Failed(format!("{path}: {e}")))?;
        if !real.starts_with(&self.root) {
            return Err(escape());
        }
        fs::create_dir_all(parent).map_err(|e| ToolError::Failed(format!("{path}: {e}")))?;
        if parent
            .canonicalize()
            .map_err(|e| ToolError::Failed(format!("{path}: {e}")))?
            != parent
        {
            return Err(escape());
        }
        if fs::symlink_metadata(&joined).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(ToolError::Path {
                path: path.to_owned(),
                problem: "is a symlink; writes do not follow symlinks".into(),
            });
        }
        if joined.is_dir() {
            return Err(ToolError::Path {
                path: path.to_owned(),
                problem: "is a directory".into(),
            });
        }
        Ok(joined)
    }

    /// The path relative to the root, with `/` separators.
    pub(crate) fn relative(&self, path: &str) -> Result<String, ToolError> {
        let joined = self.lexical(path)?;
        let rel = joined
            .strip_prefix(&self.root)
            .map_err(|_| ToolError::Path {
                path: path.to_owned(),
                problem: "outside the workspace".into(),
            })?;
        Ok(rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/"))
    }

    /// Runs a read-only tool; `None` for a gated one.
    pub fn run_read(&self, call: &ToolCall) -> Option<Result<String, ToolError>> {
        Some(match call {
            ToolCall::ReadFile { path } => self.read_file(path),
            ToolCall::ListDir { path } => self.list_dir(path),
            ToolCall::Search { pattern } => self.search(pattern),
            _ => return None,
        })
    }

    /// `read_file`.
    fn read_file(&self, path: &str) -> Result<String, ToolError> {
        let real = self.existing(path)?;
        read_regular(&real, path)
    }

    /// `list_dir`: one entry per line, directories with a trailing `/`.
    fn list_dir(&self, path: &str) -> Result<String, ToolError> {
        let real = if path == "." || path.is_empty() {
            self.root.clone()
        } else {
            self.existing(path)?
        };
        let mut entries: Vec<String> = fs::read_dir(&real)
            .map_err(|e| ToolError::Failed(format!("{path}: {e}")))?
            .filter_map(Result::ok)
            .map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    format!("{name}/")
                } else {
                    name
                }
            })
            .collect();
        entries.sort();
        Ok(entries.join("\n"))
    }

    /// `search`: `path:line: text` for each line containing `pattern`.
    fn search(&self, pattern: &str) -> Result<String, ToolError> {
        if pattern.is_empty() {
            return Err(ToolError::Failed("search: pattern is empty".into()));
        }
        let mut matches = Vec::new();
        let mut stack = vec![self.root.clone()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
            entries.sort_by_key(|e| e.file_name());
            for entry in entries {
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = entry.path();
                if kind.is_dir() {
                    stack.push(path);
                } else if kind.is_file() {
                    let Ok(text) = read_regular(&path, "") else {
                        continue;
                    };
                    let rel = path
                        .strip_prefix(&self.root)
                        .unwrap_or(&path)
                        .to_string_lossy()
                        .into_owned();
                    for (i, line) in text
                        .lines()
                        .enumerate()
                        .filter(|(_, l)| l.contains(pattern))
                    {
                        matches.push(format!("{rel}:{}: {}", i + 1, truncate(line.trim(), 200)));
                        if matches.len() >= MAX_MATCHES {
                            return Ok(matches.join("\n"));
                        }
                    }
                }
            }
        }
        Ok(matches.join("\n"))
    }
}

/// Reads a regular file of at most [`MAX_READ_BYTES`], refusing anything
/// else without blocking on it: a FIFO, a socket or a device is opened
/// non-blocking and refused by what the open handle is (no window between
/// looking and opening), and so is a file with more than one hard link (a
/// link planted in the workspace to a file outside it).
pub(crate) fn read_regular(real: &Path, path: &str) -> Result<String, ToolError> {
    use std::{
        io::Read,
        os::unix::fs::{MetadataExt, OpenOptionsExt},
    };
    let failed = |e: std::io::Error| ToolError::Failed(format!("{path}: {e}"));
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(real)
        .map_err(failed)?;
    let meta = file.metadata().map_err(failed)?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = if kind.is_dir() {
            "a directory"
        } else {
            "not a regular file (a FIFO, socket or device)"
        };
        return Err(ToolError::Refused(format!("{path}: is {what}")));
    }
    if meta.nlink() > 1 {
        return Err(ToolError::Refused(format!(
            "{path}: has {} hard links; a file linked from outside the workspace cannot be read",
            meta.nlink()
        )));
    }
    if meta.len() > MAX_READ_BYTES {
        return Err(ToolError::Failed(format!(
            "{path}: {} bytes; read_file stops at {MAX_READ_BYTES}",
            meta.len()
        )));
    }
    let mut text = String::new();
    file.take(MAX_READ_BYTES)
        .read_to_string(&mut text)
        .map_err(failed)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::open(&dir.path().join("ws")).expect("open");
        (dir, ws)
    }

    #[test]
    fn paths_cannot_leave_the_workspace() {
        let (dir, ws) = workspace();
        for bad in ["/etc/passwd", "../x", "a/../../x", ""] {
            assert!(
                matches!(ws.lexical(bad), Err(ToolError::Path { .. })),
                "{bad}"
            );
        }
        fs::write(dir.path().join("secret"), "s").expect("write");
        std::os::unix::fs::symlink(dir.path(), ws.root().join("out")).expect("symlink");
        assert!(matches!(
            ws.run_read(&ToolCall::ReadFile {
                path: "out/secret".into()
            }),
            Some(Err(ToolError::Path { .. }))
        ));
        assert!(matches!(
            ws.writable("out/new.txt"),
            Err(ToolError::Path { .. })
        ));
        std::os::unix::fs::symlink(dir.path().join("secret"), ws.root().join("link"))
            .expect("symlink");
        assert!(matches!(ws.writable("link"), Err(ToolError::Path { .. })));
        assert_eq!(ws.relative("./a/./b.rs"), Ok("a/b.rs".to_owned()));
    }

    #[test]
    fn read_tools_read_list_and_search() {
        let (_dir, ws) = workspace();
        fs::create_dir_all(ws.root().join("src")).expect("mkdir");
        fs::write(ws.root().join("src/a.rs"), "fn login() {}\nfn other() {}\n").expect("write");
        let run = |call: ToolCall| ws.run_read(&call).expect("read tool");
        assert_eq!(
            run(ToolCall::ReadFile {
                path: "src/a.rs".into()
            })
            .as_deref(),
            Ok("fn login() {}\nfn other() {}\n")
        );
        assert_eq!(
            run(ToolCall::ListDir { path: ".".into() }).as_deref(),
            Ok("src/")
        );
        assert_eq!(
            run(ToolCall::Search {
                pattern: "login".into()
            })
            .as_deref(),
            Ok("src/a.rs:1: fn login() {}")
        );
        assert!(run(ToolCall::ReadFile {
            path: "missing".into()
        })
        .is_err());
        assert!(ws
            .run_read(&ToolCall::RunCommand {
                command: "true".into()
            })
            .is_none());
    }
}
