//! A [`Scope`] as a Landlock ruleset: every filesystem right handled (so
//! denied but where a rule grants it), TCP bind and connect handled with no
//! rule (so denied), and signals and abstract UNIX sockets scoped to the
//! command's own domain. Rules only add rights, and a right granted on a
//! directory holds for everything beneath it, so a tree with a part kept out
//! (a lead's state dir in the workspace, `.git` in a writable directory) is
//! granted piece by piece around that part.

use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, AccessNet, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope as LandlockScope, ABI,
};

use super::scope::{Scope, DEVICES};

/// The ABI whose rights mesh handles: files, truncation, device ioctls,
/// TCP, and the signal and abstract-socket scopes. The crate keeps what an
/// older kernel has.
const TARGET: ABI = ABI::V6;

/// The first ABI that scopes signals.
pub(super) const SIGNAL_SCOPE_ABI: i32 = 6;

/// The kernel's Landlock ABI, if it has Landlock and it is enabled.
pub(super) fn abi() -> Option<i32> {
    // SAFETY: the documented way to ask for the ABI version: no attribute,
    // size 0, LANDLOCK_CREATE_RULESET_VERSION.
    let version = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    i32::try_from(version).ok().filter(|v| *v >= 1)
}

/// A ruleset made, to enforce in the command's process before it starts.
#[derive(Debug)]
pub(super) struct Rules(RulesetCreated);

impl Rules {
    /// The ruleset of `scope`.
    pub(super) fn build(scope: &Scope) -> std::io::Result<Self> {
        let read = AccessFs::from_read(TARGET);
        let all = AccessFs::from_all(TARGET);
        let write = all
            & !(AccessFs::MakeChar | AccessFs::MakeBlock | AccessFs::IoctlDev | AccessFs::Execute);
        let file_rw = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate;

        let mut grants: Vec<(PathBuf, BitFlags<AccessFs>)> = Vec::new();
        for tree in &scope.reads {
            grants.push((tree.clone(), read));
        }
        for device in DEVICES {
            let access = if device == "/dev/null" || device == "/dev/full" {
                file_rw
            } else {
                AccessFs::ReadFile.into()
            };
            grants.push((PathBuf::from(device), access));
        }
        // The workspace, around its lead state dirs: their ancestors only
        // listed.
        let mut partial = Vec::new();
        let mut whole = Vec::new();
        split(&scope.workspace, &scope.hidden, &mut partial, &mut whole);
        grants.extend(partial.into_iter().map(|p| (p, AccessFs::ReadDir.into())));
        grants.extend(whole.into_iter().map(|p| (p, read)));
        for file in &scope.files {
            grants.push((file.clone(), file_rw));
        }
        // The globs' directories, around their git metadata.
        for dir in &scope.dirs {
            let mut partial = Vec::new();
            let mut whole = Vec::new();
            split(dir, &scope.protected, &mut partial, &mut whole);
            grants.extend(whole.into_iter().map(|p| (p, write | read)));
        }
        grants.push((scope.temp.clone(), write | read));

        let mut ruleset = Ruleset::default()
            .handle_access(all)
            .and_then(|r| r.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp))
            .and_then(|r| r.scope(LandlockScope::AbstractUnixSocket | LandlockScope::Signal))
            .and_then(|r| r.create())
            .map_err(std::io::Error::other)?;
        for (path, access) in grants {
            let Ok(metadata) = std::fs::metadata(&path) else {
                continue;
            };
            let access = if metadata.is_dir() {
                access
            } else {
                access & AccessFs::from_file(TARGET)
            };
            let Ok(fd) = PathFd::new(&path) else {
                continue;
            };
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, access))
                .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?;
        }
        Ok(Self(ruleset))
    }

    /// Restricts the calling process (the command's, between fork and exec)
    /// for good; sets no-new-privileges first. Refuses to go on unconfined.
    pub(super) fn enforce(self) -> std::io::Result<()> {
        match self.0.restrict_self() {
            Ok(status) if status.ruleset != RulesetStatus::NotEnforced => Ok(()),
            Ok(_) => Err(std::io::Error::from_raw_os_error(nix::libc::ENOSYS)),
            Err(_) => Err(std::io::Error::last_os_error()),
        }
    }
}

/// Splits `root` around `except`: the directories on the way to an
/// excepted path go to `partial`, everything else beneath `root` (as high
/// up as it can be granted whole) to `whole`; excepted paths go nowhere.
fn split(root: &Path, except: &[PathBuf], partial: &mut Vec<PathBuf>, whole: &mut Vec<PathBuf>) {
    if except.iter().any(|e| e == root) {
        return;
    }
    if !except.iter().any(|e| e.starts_with(root)) {
        whole.push(root.to_owned());
        return;
    }
    partial.push(root.to_owned());
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        split(&entry.path(), except, partial, whole);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_is_split_around_what_it_keeps_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        for d in ["a/b/.mesh", "a/c", "d"] {
            std::fs::create_dir_all(root.join(d)).expect("dirs");
        }
        std::fs::write(root.join("a/f"), "").expect("file");
        let mut partial = Vec::new();
        let mut whole = Vec::new();
        split(root, &[root.join("a/b/.mesh")], &mut partial, &mut whole);
        partial.sort();
        whole.sort();
        assert_eq!(partial, [root.to_owned(), root.join("a"), root.join("a/b")]);
        assert_eq!(whole, [root.join("a/c"), root.join("a/f"), root.join("d")]);
    }
}
