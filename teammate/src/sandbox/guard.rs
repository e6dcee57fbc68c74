//! What a confined command must not leave behind. Before it runs: each file
//! the grant names that does not exist yet is made empty (so that the rule
//! can hold on that file alone, and its directory needs no right to make
//! files), and what a glob's directory holds outside the grant is noted and
//! kept (up to [`KEEP_MAX`] bytes). After it ran: whatever it wrote there
//! outside the grant is undone (a new file removed, a changed or removed one
//! restored), and said, so the call is reported as refused; the empty files
//! and directories made for it and left untouched are removed.

use std::{
    collections::BTreeMap,
    fs,
    os::unix::fs::{MetadataExt, PermissionsExt},
    path::{Path, PathBuf},
};

use mesh_core::grant::PathSet;

use super::scope::Scope;

/// Bytes of files outside the grant kept before a command, to restore.
const KEEP_MAX: u64 = 64 * 1024 * 1024;

/// Enough of a file's metadata to tell that it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    mode: u32,
}

impl Stamp {
    fn of(m: &fs::Metadata) -> Self {
        Self {
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
            mode: m.mode(),
        }
    }
}

/// An entry outside the grant, as it was.
#[derive(Debug)]
enum Kept {
    Dir,
    Symlink(PathBuf),
    /// A file, and its copy (none past [`KEEP_MAX`]).
    File(Stamp, Option<PathBuf>),
}

/// Undoes, once the command ended, what it wrote outside its grant.
#[derive(Debug)]
pub struct Guard {
    workspace: PathBuf,
    grant: PathSet,
    dirs: Vec<PathBuf>,
    protected: Vec<PathBuf>,
    made_files: Vec<(PathBuf, Stamp)>,
    made_dirs: Vec<PathBuf>,
    kept: BTreeMap<PathBuf, Kept>,
    copies: tempfile::TempDir,
}

impl Guard {
    /// Makes the granted files that are missing, and keeps what the
    /// globs' directories hold outside the grant.
    pub fn before(scope: &Scope, grant: &PathSet) -> std::io::Result<Self> {
        let mut guard = Self {
            workspace: scope.workspace.clone(),
            grant: grant.clone(),
            dirs: scope.dirs.clone(),
            protected: scope.protected.clone(),
            made_files: Vec::new(),
            made_dirs: Vec::new(),
            kept: BTreeMap::new(),
            copies: tempfile::Builder::new().prefix("mesh-kept-").tempdir()?,
        };
        for dir in &scope.dirs {
            guard.make_dirs(dir)?;
        }
        for file in &scope.files {
            if file.symlink_metadata().is_ok() {
                continue;
            }
            if let Some(parent) = file.parent() {
                guard.make_dirs(parent)?;
            }
            fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(file)?;
            guard
                .made_files
                .push((file.clone(), Stamp::of(&fs::symlink_metadata(file)?)));
        }
        let mut room = KEEP_MAX;
        for (path, metadata) in guard.walk() {
            let kept = if metadata.is_dir() {
                Kept::Dir
            } else if metadata.file_type().is_symlink() {
                Kept::Symlink(fs::read_link(&path)?)
            } else if guard.granted(&path) {
                continue;
            } else {
                let copy = if metadata.is_file() && metadata.len() <= room {
                    let copy = guard.copies.path().join(guard.kept.len().to_string());
                    fs::copy(&path, &copy)?;
                    room -= metadata.len();
                    Some(copy)
                } else {
                    None
                };
                Kept::File(Stamp::of(&metadata), copy)
            };
            guard.kept.insert(path, kept);
        }
        Ok(guard)
    }

    /// Creates `dir` and its missing ancestors, noting each.
    fn make_dirs(&mut self, dir: &Path) -> std::io::Result<()> {
        let mut missing = Vec::new();
        let mut at = dir;
        while at.symlink_metadata().is_err() {
            missing.push(at.to_owned());
            match at.parent() {
                Some(parent) => at = parent,
                None => break,
            }
        }
        for dir in missing.into_iter().rev() {
            fs::create_dir(&dir)?;
            self.made_dirs.push(dir);
        }
        Ok(())
    }

    /// Whether the grant lets a command write the file at `path`.
    fn granted(&self, path: &Path) -> bool {
        path.strip_prefix(&self.workspace).is_ok_and(|rel| {
            let rel: Vec<_> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect();
            self.grant.matches(&rel.join("/"))
        })
    }

    /// Everything beneath the globs' directories but what is protected,
    /// symlinks not followed, parents before children.
    fn walk(&self) -> Vec<(PathBuf, fs::Metadata)> {
        let mut found = Vec::new();
        let mut stack: Vec<PathBuf> = self.dirs.iter().rev().cloned().collect();
        while let Some(dir) = stack.pop() {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
            entries.sort();
            for path in entries.into_iter().rev() {
                if self.protected.contains(&path) {
                    continue;
                }
                let Ok(metadata) = fs::symlink_metadata(&path) else {
                    continue;
                };
                if metadata.is_dir() {
                    stack.push(path.clone());
                }
                found.push((path, metadata));
            }
        }
        found
    }

    /// Undoes what the command wrote outside the grant; says what, one line
    /// each (empty: nothing).
    pub fn after(self) -> Vec<String> {
        let mut undone = Vec::new();
        let shown = |path: &Path| {
            path.strip_prefix(&self.workspace)
                .unwrap_or(path)
                .display()
                .to_string()
        };
        let now = self.walk();
        let mut new_dirs = Vec::new();
        for (path, metadata) in &now {
            match self.kept.get(path) {
                None if metadata.is_dir() => new_dirs.push(path.clone()),
                None if !metadata.file_type().is_symlink() && self.granted(path) => {}
                None => {
                    if remove(path).is_ok() {
                        undone.push(format!(
                            "{}: written outside the grant; removed",
                            shown(path)
                        ));
                    }
                }
                Some(kept) => {
                    if !same(kept, metadata, path) {
                        undone.push(restore(path, kept, &shown(path)));
                    }
                }
            }
        }
        for (path, kept) in &self.kept {
            if path.symlink_metadata().is_err() && path.parent().is_some_and(Path::exists) {
                undone.push(restore(path, kept, &shown(path)));
            }
        }
        for (file, stamp) in &self.made_files {
            if fs::symlink_metadata(file).is_ok_and(|m| Stamp::of(&m) == *stamp) {
                let _ = fs::remove_file(file);
            }
        }
        // Deepest first: a directory emptied by the removals goes too.
        new_dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for dir in new_dirs {
            if fs::remove_dir(&dir).is_ok() {
                undone.push(format!("{}/: made outside the grant; removed", shown(&dir)));
            }
        }
        for dir in self.made_dirs.iter().rev() {
            let _ = fs::remove_dir(dir);
        }
        undone
    }
}

/// Whether `path` is still what was kept of it.
fn same(kept: &Kept, metadata: &fs::Metadata, path: &Path) -> bool {
    match kept {
        Kept::Dir => metadata.is_dir(),
        Kept::Symlink(target) => {
            metadata.file_type().is_symlink() && fs::read_link(path).is_ok_and(|t| &t == target)
        }
        Kept::File(stamp, _) => !metadata.is_dir() && Stamp::of(metadata) == *stamp,
    }
}

/// Removes whatever is at `path` (a tree, for a directory).
fn remove(path: &Path) -> std::io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Puts `kept` back at `path`; says what was done.
fn restore(path: &Path, kept: &Kept, shown: &str) -> String {
    let put = || -> std::io::Result<bool> {
        match kept {
            Kept::Dir => {
                remove(path)?;
                fs::create_dir_all(path)?;
                Ok(true)
            }
            Kept::Symlink(target) => {
                remove(path)?;
                std::os::unix::fs::symlink(target, path)?;
                Ok(true)
            }
            Kept::File(stamp, Some(copy)) => {
                remove(path)?;
                fs::copy(copy, path)?;
                fs::set_permissions(path, fs::Permissions::from_mode(stamp.mode & 0o7777))?;
                Ok(true)
            }
            Kept::File(_, None) => Ok(false),
        }
    };
    match put() {
        Ok(true) => format!("{shown}: written outside the grant; restored"),
        Ok(false) => format!(
            "{shown}: written outside the grant, and too large to have been kept: not restored"
        ),
        Err(e) => format!("{shown}: written outside the grant; could not restore it: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_outside_the_grant_is_undone_and_said() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = dir.path().canonicalize().expect("real");
        std::fs::create_dir_all(ws.join("src/.git")).expect("dirs");
        std::fs::write(ws.join("src/notes.txt"), "keep me").expect("notes");
        std::fs::write(ws.join("src/gone.txt"), "bring me back").expect("gone");
        std::fs::write(ws.join("src/a.rs"), "old").expect("a");
        let grant = PathSet::new(
            "grant.write_paths",
            &[
                "src/*.rs".into(),
                "made.txt".into(),
                "untouched/x.txt".into(),
            ],
        )
        .expect("grant");
        let temp = tempfile::tempdir().expect("temp");
        let scope = Scope::new(&ws, &grant, &[], temp.path()).expect("scope");
        let guard = Guard::before(&scope, &grant).expect("before");
        assert!(ws.join("made.txt").exists() && ws.join("untouched/x.txt").exists());

        // What a command might do.
        std::fs::write(ws.join("src/a.rs"), "new").expect("granted");
        std::fs::write(ws.join("src/b.rs"), "new").expect("granted");
        std::fs::write(ws.join("src/notes.txt"), "overwritten").expect("notes");
        std::fs::remove_file(ws.join("src/gone.txt")).expect("gone");
        std::fs::create_dir_all(ws.join("src/sub")).expect("sub");
        std::fs::write(ws.join("src/sub/evil.sh"), "x").expect("evil");
        std::fs::write(ws.join("made.txt"), "written").expect("made");

        let mut undone = guard.after();
        undone.sort();
        assert_eq!(
            undone,
            [
                "src/gone.txt: written outside the grant; restored",
                "src/notes.txt: written outside the grant; restored",
                "src/sub/: made outside the grant; removed",
                "src/sub/evil.sh: written outside the grant; removed",
            ]
        );
        let read = |p: &str| std::fs::read_to_string(ws.join(p)).expect(p);
        assert_eq!(read("src/a.rs"), "new");
        assert_eq!(read("src/b.rs"), "new");
        assert_eq!(read("src/notes.txt"), "keep me");
        assert_eq!(read("src/gone.txt"), "bring me back");
        assert_eq!(read("made.txt"), "written");
        assert!(
            !ws.join("untouched").exists(),
            "the untouched file and its directory are gone"
        );
        assert!(ws.join("src/.git").is_dir());
    }
}
