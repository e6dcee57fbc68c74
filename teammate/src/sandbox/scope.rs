//! What one command may reach, worked out from the workspace and the grant
//! it runs under: the trees it reads, the files and directories it writes,
//! and what inside those stays out of its reach.

use std::path::{Component, Path, PathBuf};

use mesh_core::grant::PathSet;

/// The system's read-only trees a command reads (those that exist), and
/// `/proc` but its processes' directories (see [`proc_entries`]).
const SYSTEM_READS: [&str; 8] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
];

/// Devices a command reads; `/dev/null` and `/dev/full` it also writes.
pub(super) const DEVICES: [&str; 5] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// The files that make a directory a lead's state dir: a command that read
/// them could approve its own plans (`operator.token`) or join as anyone.
const STATE_FILES: [&str; 4] = ["operator.token", "join.token", "lead.addr", "lead.url"];

/// How deep below the workspace a lead's state dir is looked for.
const STATE_DEPTH: usize = 3;

/// What a command may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// The workspace (its real path): read whole, but for `hidden`.
    pub workspace: PathBuf,
    /// Trees read whole: the system's, the user's (`--sandbox-read`), and
    /// the git metadata a worktree's `.git` points to.
    pub reads: Vec<PathBuf>,
    /// Lead state dirs inside the workspace: out of reach.
    pub hidden: Vec<PathBuf>,
    /// Files the grant names: written in place.
    pub files: Vec<PathBuf>,
    /// Directories a glob of the grant names by its literal prefix: written
    /// whole, then checked against the grant.
    pub dirs: Vec<PathBuf>,
    /// Inside those directories, what stays read-only (git metadata) or out
    /// of reach (a lead's state dir).
    pub protected: Vec<PathBuf>,
    /// The command's private temporary directory.
    pub temp: PathBuf,
}

impl Scope {
    /// The scope of a command in `workspace` under a grant of `grant`.
    pub fn new(
        workspace: &Path,
        grant: &PathSet,
        user_reads: &[PathBuf],
        temp: &Path,
    ) -> std::io::Result<Self> {
        let workspace = workspace.canonicalize()?;
        let mut reads: Vec<PathBuf> = SYSTEM_READS
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.exists())
            .collect();
        reads.extend(proc_entries());
        reads.extend(user_reads.iter().filter_map(|p| p.canonicalize().ok()));
        reads.extend(git_metadata(&workspace));
        let hidden = state_dirs(&workspace);
        let mut files = Vec::new();
        let mut dirs = Vec::new();
        for pattern in grant.patterns() {
            let pattern = pattern.trim_start_matches("./");
            let Some(target) = inside(&workspace, &workspace.join(literal_prefix(pattern))) else {
                continue;
            };
            if is_git(&workspace, &target) || hidden.iter().any(|h| target.starts_with(h)) {
                continue;
            }
            if literal_prefix(pattern) == Path::new(pattern) {
                if !target.is_dir() && !files.contains(&target) {
                    files.push(target);
                }
            } else if !dirs.contains(&target) {
                dirs.push(target);
            }
        }
        // A directory inside another adds nothing.
        let all = dirs.clone();
        dirs.retain(|d| !all.iter().any(|o| o != d && d.starts_with(o)));
        files.retain(|f| !dirs.iter().any(|d| f.starts_with(d)));
        let mut protected = Vec::new();
        for dir in &dirs {
            protected.extend(hidden.iter().filter(|h| h.starts_with(dir)).cloned());
            find_git(dir, &mut protected);
        }
        Ok(Self {
            workspace,
            reads,
            hidden,
            files,
            dirs,
            protected,
            temp: temp.to_owned(),
        })
    }

    /// The path relative to the workspace, with `/` separators (what the
    /// grant's globs match).
    pub fn relative(&self, path: &Path) -> Option<String> {
        let rel = path.strip_prefix(&self.workspace).ok()?;
        let parts: Vec<_> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect();
        Some(parts.join("/"))
    }
}

/// What a command reads of `/proc`: the kernel's tables (`cpuinfo`,
/// `meminfo`, `sys`, ...), not a process's directory, its own included: a
/// rule on a `/proc/PID` would be the teammate's, and every other one shows
/// a process's command line, which may hold a secret.
fn proc_entries() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            !name.bytes().all(|b| b.is_ascii_digit())
                && !e.file_type().is_ok_and(|t| t.is_symlink())
        })
        .map(|e| e.path())
        .collect()
}

/// The part of a glob before its first component with a wildcard: the
/// whole path when it has none.
fn literal_prefix(pattern: &str) -> PathBuf {
    Path::new(pattern)
        .components()
        .take_while(|c| {
            !c.as_os_str()
                .to_string_lossy()
                .contains(['*', '?', '[', '{', '\\'])
        })
        .collect()
}

/// `path` with the ancestors that exist resolved, if that stays inside
/// `root`; a path that is itself a symlink is refused (writes do not follow
/// symlinks).
fn inside(root: &Path, path: &Path) -> Option<PathBuf> {
    if path
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        return None;
    }
    let mut existing = path;
    let mut rest = Vec::new();
    while !existing.exists() {
        rest.push(existing.file_name()?);
        existing = existing.parent()?;
    }
    let mut real = existing.canonicalize().ok()?;
    if !real.starts_with(root) {
        return None;
    }
    real.extend(rest.iter().rev());
    Some(real)
}

/// Whether `path` is or is inside a `.git` below `root`.
fn is_git(root: &Path, path: &Path) -> bool {
    path.strip_prefix(root).is_ok_and(|rel| {
        rel.components()
            .any(|c| c == Component::Normal(".git".as_ref()))
    })
}

/// Every `.git` (a repository's directory, or a worktree's pointer file)
/// below `dir`, not looking inside them.
fn find_git(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_name() == ".git" {
            found.push(path);
        } else if entry.file_type().is_ok_and(|t| t.is_dir()) {
            find_git(&path, found);
        }
    }
}

/// The directories a worktree's `.git` file points to (its own git dir and
/// the repository's common one), which `git status` reads.
fn git_metadata(workspace: &Path) -> Vec<PathBuf> {
    let Ok(pointer) = std::fs::read_to_string(workspace.join(".git")) else {
        return Vec::new();
    };
    let Some(gitdir) = pointer.trim().strip_prefix("gitdir:") else {
        return Vec::new();
    };
    let Ok(gitdir) = workspace.join(gitdir.trim()).canonicalize() else {
        return Vec::new();
    };
    let common = std::fs::read_to_string(gitdir.join("commondir"))
        .ok()
        .and_then(|rel| gitdir.join(rel.trim()).canonicalize().ok());
    let mut dirs = vec![gitdir];
    dirs.extend(common);
    dirs
}

/// Whether `dir` is a lead's state dir (it holds one of [`STATE_FILES`]).
pub(crate) fn is_state_dir(dir: &Path) -> bool {
    STATE_FILES.iter().any(|f| dir.join(f).exists())
}

/// The lead state dirs in `workspace`, down to [`STATE_DEPTH`].
pub(super) fn state_dirs(workspace: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut level = vec![workspace.to_owned()];
    for _ in 0..STATE_DEPTH {
        let mut next = Vec::new();
        for dir in level {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                if !entry.file_type().is_ok_and(|t| t.is_dir()) || name == ".git" {
                    continue;
                }
                let path = entry.path();
                if is_state_dir(&path) {
                    found.push(path);
                } else if name != "target" && name != "node_modules" {
                    next.push(path);
                }
            }
        }
        level = next;
    }
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(patterns: &[&str]) -> PathSet {
        let patterns: Vec<String> = patterns.iter().map(|p| p.to_string()).collect();
        PathSet::new("grant.write_paths", &patterns).expect("valid")
    }

    #[test]
    fn a_globs_literal_prefix_is_its_directory() {
        assert_eq!(literal_prefix("src/*.rs"), Path::new("src"));
        assert_eq!(literal_prefix("src/**/x.rs"), Path::new("src"));
        assert_eq!(literal_prefix("**"), Path::new(""));
        assert_eq!(literal_prefix("a/b.txt"), Path::new("a/b.txt"));
        assert_eq!(literal_prefix("a/{b,c}.txt"), Path::new("a"));
    }

    #[test]
    fn files_dirs_and_what_stays_out_of_reach() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = dir.path().canonicalize().expect("real");
        std::fs::create_dir_all(ws.join("src/.git")).expect("dirs");
        std::fs::create_dir_all(ws.join(".mesh")).expect("dirs");
        std::fs::write(ws.join(".mesh/operator.token"), "t").expect("token");
        std::fs::create_dir_all(ws.join("deep/er/.mesh")).expect("dirs");
        std::fs::write(ws.join("deep/er/.mesh/lead.addr"), "a").expect("addr");
        std::os::unix::fs::symlink("/etc", ws.join("out")).expect("symlink");
        let scope = Scope::new(
            &ws,
            &grant(&[
                "a.txt",
                "src/**/*.rs",
                "src/lib.rs",
                ".mesh/operator.token",
                "out/passwd",
                ".git/config",
                "new/x.txt",
            ]),
            &[],
            Path::new("/tmp/t"),
        )
        .expect("scope");
        assert_eq!(scope.files, [ws.join("a.txt"), ws.join("new/x.txt")]);
        assert_eq!(scope.dirs, [ws.join("src")]);
        assert_eq!(scope.protected, [ws.join("src/.git")]);
        assert_eq!(scope.hidden, [ws.join(".mesh"), ws.join("deep/er/.mesh")]);
        assert!(scope.reads.contains(&PathBuf::from("/usr")));
        assert_eq!(
            scope.relative(&ws.join("src/a.rs")).as_deref(),
            Some("src/a.rs")
        );
    }
}
