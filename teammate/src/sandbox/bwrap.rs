//! A [`Scope`] as bubblewrap's arguments: a new root that holds only the
//! system's trees, the workspace (read-only, a lead's state dir covered by
//! an empty directory), what the grant writes bound writable, git metadata
//! bound read-only again on top, a private `/tmp`, and every namespace new
//! (no network, its own PIDs).

use std::{ffi::OsString, path::PathBuf};

use super::scope::Scope;

/// `bwrap` on `PATH`, if it can start a sandbox here (it cannot where user
/// namespaces are refused: some containers, Ubuntu's AppArmor restriction).
pub(super) fn usable() -> Result<PathBuf, String> {
    let path = find("bwrap").ok_or("no bwrap on PATH (install bubblewrap)")?;
    let probe = std::process::Command::new(&path)
        .args(["--ro-bind", "/", "/", "--unshare-all", "--", "true"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if probe.status.success() {
        Ok(path)
    } else {
        Err(format!(
            "{} cannot start a sandbox here: {}",
            path.display(),
            String::from_utf8_lossy(&probe.stderr).trim()
        ))
    }
}

/// `name` on `PATH`.
pub(super) fn find(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// bubblewrap's arguments for `scope`, up to the command.
pub(super) fn args(scope: &Scope) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    let mut push = |words: &[&dyn AsRef<std::ffi::OsStr>]| {
        args.extend(words.iter().map(|w| w.as_ref().to_owned()));
    };
    // First, so that a bind below /tmp (a workspace, say) lands on it.
    push(&[&"--dev", &"/dev", &"--proc", &"/proc", &"--tmpfs", &"/tmp"]);
    for tree in &scope.reads {
        if tree.starts_with("/proc") {
            continue;
        }
        match std::fs::read_link(tree) {
            Ok(target) => push(&[&"--symlink", &target, tree]),
            Err(_) => push(&[&"--ro-bind", tree, tree]),
        }
    }
    push(&[&"--ro-bind", &scope.workspace, &scope.workspace]);
    for hidden in &scope.hidden {
        push(&[&"--tmpfs", hidden, &"--remount-ro", hidden]);
    }
    for path in scope.files.iter().chain(&scope.dirs) {
        if path.exists() {
            push(&[&"--bind", path, path]);
        }
    }
    for path in &scope.protected {
        if scope.hidden.contains(path) {
            continue;
        }
        push(&[&"--ro-bind", path, path]);
    }
    push(&[
        &"--unshare-all",
        &"--die-with-parent",
        &"--new-session",
        &"--chdir",
        &scope.workspace,
    ]);
    args
}
