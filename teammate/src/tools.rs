//! Tool calls, and the read-only tools every mode has: `read_file`,
//! `list_dir`, `search`. Every path is confined to the workspace: no absolute
//! paths, no `..`, no symlink that leads out. Files are read only if they are
//! regular files with one link: a FIFO would block the teammate, a device is
//! not text, and a hard link may be a file from outside the workspace.

use std::{
    fs,
    io::Read,
    os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt},
    path::{Component, Path, PathBuf},
};

use nix::fcntl::OFlag;

use serde_json::json;

/// The tools that never change anything.
pub const READ_TOOLS: [&str; 3] = ["read_file", "list_dir", "search"];
/// The tools a grant unlocks.
pub const GATED_TOOLS: [&str; 3] = [WRITE_FILE, "edit_file", RUN_COMMAND];
/// The gated tool that runs a shell command (not offered where no sandbox works).
pub const RUN_COMMAND: &str = "run_command";
/// The tool that writes a whole file.
pub const WRITE_FILE: &str = "write_file";

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
    /// Finds lines containing `pattern` in the workspace's files, or under
    /// the directory `path`.
    Search {
        pattern: String,
        path: Option<String>,
    },
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

    /// The whole call as JSON, nothing cut: what a permission request
    /// carries, so that the operator sees everything they allow.
    pub fn full_args_json(&self) -> String {
        match self {
            ToolCall::ReadFile { path } | ToolCall::ListDir { path } => json!({ "path": path }),
            ToolCall::Search { pattern, path } => json!({ "pattern": pattern, "path": path }),
            ToolCall::WriteFile { path, content } => json!({ "path": path, "content": content }),
            ToolCall::EditFile { path, old, new } => {
                json!({ "path": path, "old": old, "new": new })
            }
            ToolCall::RunCommand { command } => json!({ "command": command }),
        }
        .to_string()
    }

    /// The arguments as JSON, file contents cut, for reports and logs. Paths,
    /// patterns and commands are whole: a report cuts the result as a whole
    /// to its limit (`mesh_core::limits::REPORT_ARGS_JSON`).
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
            ToolCall::Search { pattern, path } => json!({ "pattern": pattern, "path": path }),
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
    /// The path leaves the workspace or is malformed. Shown as the model
    /// wrote it: escaping is for whoever displays it (`lead watch` does),
    /// so that it is escaped once.
    #[error("bad path \"{path}\": {problem}")]
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

    /// An existing path inside the workspace (the root itself for `.`),
    /// symlinks resolved; a symlink may lead anywhere inside.
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
        self.outside_state_dirs(path, &real)?;
        Ok(real)
    }

    /// Refuses a path inside a lead's state dir (its tokens): a teammate
    /// that works in the directory the lead started in must not read them.
    fn outside_state_dirs(&self, path: &str, real: &Path) -> Result<(), ToolError> {
        let inside = real
            .ancestors()
            .take_while(|a| a.starts_with(&self.root))
            .any(crate::sandbox::is_state_dir);
        if inside {
            return Err(ToolError::Path {
                path: path.to_owned(),
                problem: "is inside a lead's state dir, which holds its tokens".into(),
            });
        }
        Ok(())
    }

    /// Where a write to `path` lands, creating nothing: the deepest ancestor
    /// that exists resolved (it must be inside the workspace; a symlinked
    /// directory inside is fine), then the rest as written. The last
    /// component is not followed: writes replace, never follow, a symlink.
    fn write_target(&self, path: &str) -> Result<PathBuf, ToolError> {
        let joined = self.lexical(path)?;
        let bad = |problem: &str| ToolError::Path {
            path: path.to_owned(),
            problem: problem.to_owned(),
        };
        let escape = || bad("a symlink leads out of the workspace");
        if joined == self.root {
            return Err(bad("names the workspace itself"));
        }
        // `lexical` adds only normal components: below the root, a path has
        // a parent and a file name, and so has every ancestor that does not
        // exist yet (the root does).
        let (Some(parent), Some(name)) = (joined.parent(), joined.file_name()) else {
            return Err(bad("names the workspace itself"));
        };
        let mut ancestor = parent;
        let mut missing = Vec::new();
        while !ancestor.exists() {
            missing.push(ancestor.file_name().ok_or_else(escape)?);
            ancestor = ancestor.parent().ok_or_else(escape)?;
        }
        let mut target = ancestor
            .canonicalize()
            .map_err(|e| ToolError::Failed(format!("{path}: {e}")))?;
        if !target.starts_with(&self.root) {
            return Err(escape());
        }
        target.extend(missing.iter().rev());
        target.push(name);
        self.outside_state_dirs(path, &target)?;
        Ok(target)
    }

    /// A path to write: inside the workspace, its parent created, no symlink
    /// on the way that leads out, and the path itself not a symlink. The path
    /// returned goes through the parent's real location.
    pub(crate) fn writable(&self, path: &str) -> Result<PathBuf, ToolError> {
        let bad = |problem: &str| ToolError::Path {
            path: path.to_owned(),
            problem: problem.to_owned(),
        };
        let failed = |e: std::io::Error| ToolError::Failed(format!("{path}: {e}"));
        let planned = self.write_target(path)?;
        let (Some(parent), Some(name)) = (planned.parent(), planned.file_name()) else {
            return Err(bad("names the workspace itself"));
        };
        fs::create_dir_all(parent).map_err(failed)?;
        // Checked again once the directories exist: what was created must
        // not have led anywhere else.
        let real_parent = parent.canonicalize().map_err(failed)?;
        if !real_parent.starts_with(&self.root) {
            return Err(bad("a symlink leads out of the workspace"));
        }
        let target = real_parent.join(name);
        match fs::symlink_metadata(&target) {
            Ok(m) if m.file_type().is_symlink() => {
                Err(bad("is a symlink; writes do not follow symlinks"))
            }
            Ok(m) if m.is_dir() => Err(bad("is a directory")),
            _ => Ok(target),
        }
    }

    /// Where a write to `path` lands, relative to the root with `/`
    /// separators: what a grant's write paths are matched against, so that
    /// a symlinked directory cannot carry a write outside them.
    pub(crate) fn write_relative(&self, path: &str) -> Result<String, ToolError> {
        Ok(self.relative_of(&self.write_target(path)?))
    }

    /// A path inside the root, relative to it with `/` separators.
    pub(crate) fn relative_of(&self, real: &Path) -> String {
        real.strip_prefix(&self.root)
            .unwrap_or(real)
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/")
    }

    /// The path as written, relative to the root with `/` separators.
    pub(crate) fn relative(&self, path: &str) -> Result<String, ToolError> {
        Ok(self.relative_of(&self.lexical(path)?))
    }

    /// Runs a read-only tool; `None` for a gated one.
    pub fn run_read(&self, call: &ToolCall) -> Option<Result<String, ToolError>> {
        Some(match call {
            ToolCall::ReadFile { path } => self.read_file(path),
            ToolCall::ListDir { path } => self.list_dir(path),
            ToolCall::Search { pattern, path } => self.search(pattern, path.as_deref()),
            _ => return None,
        })
    }

    /// `read_file`.
    fn read_file(&self, path: &str) -> Result<String, ToolError> {
        read_text(&self.existing(path)?, path)
    }

    /// `list_dir`: one entry per line, directories with a trailing `/`.
    fn list_dir(&self, path: &str) -> Result<String, ToolError> {
        let real = if path.is_empty() {
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

    /// `search`: `path:line: text` for each line containing `pattern`, in
    /// the directory `under` (the workspace's root if `None`).
    fn search(&self, pattern: &str, under: Option<&str>) -> Result<String, ToolError> {
        if pattern.is_empty() {
            return Err(ToolError::Failed("search: pattern is empty".into()));
        }
        let start = match under {
            Some(dir) => self.existing(dir)?,
            None => self.root.clone(),
        };
        if !start.is_dir() {
            return Err(ToolError::Failed(format!(
                "search: {} is not a directory",
                under.unwrap_or(".")
            )));
        }
        let mut matches = Vec::new();
        let mut stack = vec![start];
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
                    if !crate::sandbox::is_state_dir(&path) {
                        stack.push(path);
                    }
                } else if kind.is_file() {
                    // Skips what read_file refuses: a file swapped for a FIFO
                    // since the listing, a hard link, a large or binary file.
                    let Ok(text) = read_text(&path, "") else {
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

/// The text of the file at `real` (a path inside the workspace; `shown` is
/// how the caller named it). It is opened without blocking and without
/// following a final symlink, and read only if the opened file is a regular
/// file with one link, of at most [`MAX_READ_BYTES`], in UTF-8. What is
/// checked is the open file itself, so it cannot change between check and
/// read.
pub(crate) fn read_text(real: &Path, shown: &str) -> Result<String, ToolError> {
    let failed = |e: std::io::Error| ToolError::Failed(format!("{shown}: {e}"));
    // Checked before opening too: opening a device can have effects.
    check_regular(&fs::metadata(real).map_err(failed)?, shown)?;
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NONBLOCK | OFlag::O_NOFOLLOW | OFlag::O_NOCTTY).bits())
        .open(real)
        .map_err(failed)?;
    check_regular(&file.metadata().map_err(failed)?, shown)?;
    let mut bytes = Vec::new();
    file.take(MAX_READ_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(failed)?;
    if bytes.len() as u64 > MAX_READ_BYTES {
        return Err(ToolError::Failed(format!(
            "{shown}: larger than {MAX_READ_BYTES} bytes; read_file stops there"
        )));
    }
    String::from_utf8(bytes).map_err(|_| ToolError::Failed(format!("{shown}: is not UTF-8 text")))
}

/// Refuses anything but a regular file with a single link.
fn check_regular(meta: &fs::Metadata, shown: &str) -> Result<(), ToolError> {
    let kind = meta.file_type();
    let what = if kind.is_file() {
        None
    } else if kind.is_dir() {
        Some("a directory")
    } else if kind.is_fifo() {
        Some("a FIFO")
    } else if kind.is_socket() {
        Some("a socket")
    } else if kind.is_char_device() {
        Some("a character device")
    } else if kind.is_block_device() {
        Some("a block device")
    } else {
        Some("a special file")
    };
    if let Some(what) = what {
        return Err(ToolError::Refused(format!(
            "{shown}: is {what}, not a regular file"
        )));
    }
    if meta.nlink() > 1 {
        return Err(ToolError::Refused(format!(
            "{shown}: has {} hard links; a file linked from outside the workspace cannot be read",
            meta.nlink()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::open(&dir.path().join("ws")).expect("open");
        (dir, ws)
    }

    /// A lead's state dir in the workspace (the teammate works where the
    /// lead started): its tokens are out of the read tools' reach, and of
    /// a write's.
    #[test]
    fn a_leads_state_dir_in_the_workspace_is_out_of_reach() {
        let (_dir, ws) = workspace();
        fs::create_dir(ws.root().join(".mesh")).expect("state dir");
        fs::write(ws.root().join(".mesh/operator.token"), "op-token-123").expect("token");
        fs::write(ws.root().join("notes.txt"), "nothing here").expect("notes");
        let read = ws.run_read(&ToolCall::ReadFile {
            path: ".mesh/operator.token".into(),
        });
        assert!(
            matches!(read, Some(Err(ToolError::Path { .. }))),
            "{read:?}"
        );
        let found = ws.run_read(&ToolCall::Search {
            pattern: "op-token".into(),
            path: None,
        });
        assert!(
            found
                .as_ref()
                .is_some_and(|r| r.as_ref().is_ok_and(|text| !text.contains("op-token-123"))),
            "{found:?}"
        );
        assert!(matches!(
            ws.writable(".mesh/operator.token"),
            Err(ToolError::Path { .. })
        ));
        assert!(ws
            .run_read(&ToolCall::ReadFile {
                path: "notes.txt".into()
            })
            .is_some_and(|r| r.is_ok()));
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
        assert_eq!(ws.write_relative("./a/./b.rs"), Ok("a/b.rs".to_owned()));
        assert!(matches!(
            ws.write_relative("out/new/deeper.txt"),
            Err(ToolError::Path { .. })
        ));
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
                pattern: "login".into(),
                path: None,
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

    /// Runs `call` on a thread, so that a read that blocks fails the test
    /// instead of hanging it.
    fn run_read_within(ws: &Workspace, call: ToolCall) -> Result<String, ToolError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let ws = ws.clone();
        std::thread::spawn(move || {
            let _ = tx.send(ws.run_read(&call).expect("a read tool"));
        });
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("the read tool returned instead of blocking")
    }

    fn read(path: &str) -> ToolCall {
        ToolCall::ReadFile { path: path.into() }
    }

    #[test]
    fn fifos_and_sockets_are_refused_without_blocking_and_search_skips_them() {
        let (_dir, ws) = workspace();
        nix::unistd::mkfifo(
            &ws.root().join("pipe"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .expect("mkfifo");
        let _socket = std::os::unix::net::UnixListener::bind(ws.root().join("sock")).expect("bind");
        fs::write(ws.root().join("plain.txt"), "needle\n").expect("write");

        match run_read_within(&ws, read("pipe")) {
            Err(ToolError::Refused(reason)) => {
                assert_eq!(reason, "pipe: is a FIFO, not a regular file")
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        match run_read_within(&ws, read("sock")) {
            Err(ToolError::Refused(reason)) => assert!(reason.contains("is a socket"), "{reason}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(
            run_read_within(
                &ws,
                ToolCall::Search {
                    pattern: "needle".into(),
                    path: None,
                }
            )
            .as_deref(),
            Ok("plain.txt:1: needle")
        );
    }

    #[test]
    fn a_hard_link_is_refused_and_search_skips_it() {
        let (dir, ws) = workspace();
        let secret = dir.path().join("secret");
        fs::write(&secret, "TOPSECRET\n").expect("write");
        fs::hard_link(&secret, ws.root().join("linked")).expect("link");
        fs::write(ws.root().join("own.txt"), "TOPSECRET is a word\n").expect("write");

        match run_read_within(&ws, read("linked")) {
            Err(ToolError::Refused(reason)) => assert_eq!(
                reason,
                "linked: has 2 hard links; a file linked from outside the workspace cannot be read"
            ),
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(
            run_read_within(
                &ws,
                ToolCall::Search {
                    pattern: "TOPSECRET".into(),
                    path: None,
                }
            )
            .as_deref(),
            Ok("own.txt:1: TOPSECRET is a word")
        );
    }

    #[test]
    fn the_root_itself_is_a_directory_to_read_and_no_file_to_write() {
        let (_dir, ws) = workspace();
        fs::write(ws.root().join("a.txt"), "a").expect("write");
        for path in [".", "./", "./."] {
            match run_read_within(&ws, read(path)) {
                Err(ToolError::Refused(reason)) => {
                    assert!(
                        reason.ends_with("is a directory, not a regular file"),
                        "{reason}"
                    )
                }
                other => panic!("{path}: expected a refusal, got {other:?}"),
            }
            match ws.writable(path) {
                Err(ToolError::Path { problem, .. }) => {
                    assert_eq!(problem, "names the workspace itself", "{path}")
                }
                other => panic!("{path}: expected a path error, got {other:?}"),
            }
            assert_eq!(
                run_read_within(&ws, ToolCall::ListDir { path: path.into() }).as_deref(),
                Ok("a.txt"),
                "{path}"
            );
        }
    }

    #[test]
    fn a_symlinked_directory_inside_the_workspace_reads_lists_and_writes() {
        let (_dir, ws) = workspace();
        fs::create_dir_all(ws.root().join("real/sub")).expect("mkdir");
        fs::write(ws.root().join("real/a.txt"), "a").expect("write");
        std::os::unix::fs::symlink(ws.root().join("real"), ws.root().join("alias"))
            .expect("symlink");
        std::os::unix::fs::symlink("real", ws.root().join("relative")).expect("symlink");

        for alias in ["alias", "relative"] {
            assert_eq!(
                run_read_within(&ws, read(&format!("{alias}/a.txt"))).as_deref(),
                Ok("a")
            );
            assert_eq!(
                run_read_within(&ws, ToolCall::ListDir { path: alias.into() }).as_deref(),
                Ok("a.txt\nsub/")
            );
            let target = ws
                .writable(&format!("{alias}/sub/new.txt"))
                .expect("a parent reached through a symlink inside is writable");
            assert_eq!(target, ws.root().join("real/sub/new.txt"));
        }
        // Reached through a symlink, the file itself must still not be one.
        std::os::unix::fs::symlink(ws.root().join("real/a.txt"), ws.root().join("real/l"))
            .expect("symlink");
        assert!(matches!(
            ws.writable("alias/l"),
            Err(ToolError::Path { problem, .. }) if problem.contains("is a symlink")
        ));
        assert!(matches!(
            ws.writable("alias/sub"),
            Err(ToolError::Path { problem, .. }) if problem == "is a directory"
        ));
    }

    #[test]
    fn a_file_over_the_limit_is_not_read() {
        let (_dir, ws) = workspace();
        let big = vec![b'x'; MAX_READ_BYTES as usize + 1];
        fs::write(ws.root().join("big"), &big).expect("write");
        fs::write(ws.root().join("edge"), &big[1..]).expect("write");
        assert!(matches!(
            run_read_within(&ws, read("big")),
            Err(ToolError::Failed(e)) if e.contains("larger than")
        ));
        assert_eq!(
            run_read_within(&ws, read("edge")).map(|t| t.len()),
            Ok(MAX_READ_BYTES as usize)
        );
    }

    #[test]
    fn a_permission_request_carries_the_whole_call_and_a_report_cuts_contents() {
        let content = "c".repeat(500);
        let call = ToolCall::WriteFile {
            path: "a".into(),
            content: content.clone(),
        };
        let full: serde_json::Value = serde_json::from_str(&call.full_args_json()).expect("JSON");
        assert_eq!(full["content"], content.as_str());
        assert!(call.args_json().len() < 300, "{}", call.args_json());
    }
}
