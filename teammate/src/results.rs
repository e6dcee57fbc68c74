//! Finished work as a result (`lead serve --repo`): with a team repository,
//! completing a task sends the workspace's change as a diff against the
//! commit it started from (`SubmitResult`), and the task is done when the
//! lead has merged it. The workspace is a git worktree of the team's
//! repository (the lead makes one for a teammate it spawns). Git runs
//! through its CLI.
//!
//! After a landing the worktree moves to the landed commit, clean, ready
//! for the next task. A result that conflicts with the team branch is
//! rebased: the change is set aside, the worktree moves to the branch's new
//! head, and the change is put back, each conflicting file keeping both
//! sides' lines (a union merge); then it is submitted again, superseding the
//! rejected one, and reviewed again.

use std::path::{Path, PathBuf};

use shared::pb;

/// A git command that failed.
#[derive(Debug)]
pub(crate) struct GitFailed(pub(crate) String);

/// The team repository as the teammate works in it.
#[derive(Debug, Clone)]
pub(crate) struct TeamRepo {
    /// The team branch.
    pub(crate) branch: String,
    /// The worktree (the teammate's workspace).
    pub(crate) worktree: PathBuf,
}

/// Runs `git ARGS` in `dir`: (success, stdout, stderr).
pub(crate) async fn git(dir: &Path, args: &[&str]) -> Result<(bool, String, String), GitFailed> {
    let out = tokio::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "mesh teammate")
        .env("GIT_AUTHOR_EMAIL", "teammate@mesh.invalid")
        .env("GIT_COMMITTER_NAME", "mesh teammate")
        .env("GIT_COMMITTER_EMAIL", "teammate@mesh.invalid")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|e| GitFailed(format!("cannot run git: {e}")))?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        String::from_utf8_lossy(&out.stderr).trim().to_owned(),
    ))
}

/// `git ARGS` in `dir`, which must succeed; its stdout.
async fn git_ok(dir: &Path, args: &[&str]) -> Result<String, GitFailed> {
    let (ok, out, err) = git(dir, args).await?;
    if ok {
        Ok(out)
    } else {
        Err(GitFailed(format!("git {} failed: {err}", args.join(" "))))
    }
}

impl TeamRepo {
    /// The team repository, if the lead has one and `workspace` is a git
    /// worktree; `None` otherwise (tasks complete as they always did).
    pub(crate) async fn find(state: Option<pb::RepoState>, workspace: &Path) -> Option<TeamRepo> {
        let state = state?;
        let inside = git(workspace, &["rev-parse", "--is-inside-work-tree"])
            .await
            .ok()
            .is_some_and(|(ok, out, _)| ok && out == "true");
        if !inside {
            tracing::warn!(workspace = %workspace.display(), "the lead has a team repository, but the workspace is not a git worktree: results cannot be submitted");
            return None;
        }
        Some(TeamRepo {
            branch: state.branch,
            worktree: workspace.to_path_buf(),
        })
    }

    /// The commit the work is against: the worktree's `HEAD`.
    pub(crate) async fn base(&self) -> Result<String, GitFailed> {
        git_ok(&self.worktree, &["rev-parse", "HEAD"]).await
    }

    /// The change against `base`, new files too, binary-safe (empty: none).
    pub(crate) async fn diff(&self, base: &str) -> Result<String, GitFailed> {
        git_ok(&self.worktree, &["add", "-A"]).await?;
        let out = tokio::process::Command::new("git")
            .arg("-C")
            .arg(&self.worktree)
            .args(["diff", "--cached", "--binary", base])
            .output()
            .await
            .map_err(|e| GitFailed(format!("cannot run git: {e}")))?;
        if !out.status.success() {
            return Err(GitFailed(format!(
                "git diff failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        String::from_utf8(out.stdout).map_err(|_| {
            GitFailed("the diff is not UTF-8 (git diff --binary should make it so)".into())
        })
    }

    /// Starts work on a claimed task: where the worktree holds nothing
    /// unsubmitted, it moves to the team branch's head on its own branch
    /// `mesh/NAME/TASK` (the base of the work).
    pub(crate) async fn start_task(&self, name: &str, task_id: &str) -> Result<(), GitFailed> {
        let status = git_ok(&self.worktree, &["status", "--porcelain"]).await?;
        if !status.is_empty() {
            return Ok(());
        }
        let head = format!("refs/heads/{}", self.branch);
        let branch = format!("mesh/{name}/{task_id}");
        git_ok(&self.worktree, &["checkout", "-q", "-B", &branch, &head]).await?;
        // The branches of its earlier tasks, landed: gone.
        let pattern = format!("mesh/{name}/*");
        let merged = format!("--merged={head}");
        let done = git_ok(
            &self.worktree,
            &[
                "branch",
                "--list",
                "--format=%(refname:short)",
                &merged,
                &pattern,
            ],
        )
        .await?;
        for old in done.lines().filter(|b| !b.is_empty() && *b != branch) {
            let _ = git(&self.worktree, &["branch", "-q", "-D", old]).await?;
        }
        Ok(())
    }

    /// After a landing: the worktree moves to the landed commit, clean.
    pub(crate) async fn landed(&self, commit: &str) -> Result<(), GitFailed> {
        git_ok(&self.worktree, &["reset", "-q", "--hard", commit]).await?;
        Ok(())
    }

    /// After a conflict: the change moves onto `head`, the teammate's side
    /// of each conflicting file kept.
    pub(crate) async fn rebase(&self, head: &str) -> Result<(), GitFailed> {
        git_ok(&self.worktree, &["add", "-A"]).await?;
        git_ok(&self.worktree, &["stash", "push", "-q"]).await?;
        git_ok(&self.worktree, &["reset", "-q", "--hard", head]).await?;
        let (popped, _, _) = git(&self.worktree, &["stash", "pop", "-q"]).await?;
        if !popped {
            // Conflicts: each file keeps both sides' lines (a union merge:
            // the branch's, then the teammate's); then the stash a failed
            // pop keeps is dropped. The result is reviewed again.
            let conflicted = git_ok(
                &self.worktree,
                &["diff", "--name-only", "--diff-filter=U", "-z"],
            )
            .await?;
            for path in conflicted.split('\0').filter(|p| !p.is_empty()) {
                self.union(path).await?;
            }
            git_ok(&self.worktree, &["reset", "-q"]).await?;
            git_ok(&self.worktree, &["stash", "drop", "-q"]).await?;
        }
        Ok(())
    }

    /// Resolves the conflicting `path` by keeping both sides' lines.
    async fn union(&self, path: &str) -> Result<(), GitFailed> {
        let scratch = tempfile::tempdir().map_err(|e| GitFailed(e.to_string()))?;
        let mut sides = Vec::new();
        for stage in ["1", "2", "3"] {
            let out = tokio::process::Command::new("git")
                .arg("-C")
                .arg(&self.worktree)
                .args(["show", &format!(":{stage}:{path}")])
                .output()
                .await
                .map_err(|e| GitFailed(format!("cannot run git: {e}")))?;
            let file = scratch.path().join(stage);
            // A side without the file (added on both sides): empty.
            let bytes = if out.status.success() {
                out.stdout
            } else {
                Vec::new()
            };
            std::fs::write(&file, bytes).map_err(|e| GitFailed(e.to_string()))?;
            sides.push(file.to_string_lossy().into_owned());
        }
        let out = tokio::process::Command::new("git")
            .args([
                "merge-file",
                "--union",
                "-p",
                &sides[1],
                &sides[0],
                &sides[2],
            ])
            .output()
            .await
            .map_err(|e| GitFailed(format!("cannot run git: {e}")))?;
        std::fs::write(self.worktree.join(path), out.stdout)
            .map_err(|e| GitFailed(format!("{path}: {e}")))?;
        Ok(())
    }
}
