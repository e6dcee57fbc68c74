//! Worktrees of the team's repository: a spawned teammate's (on its branch
//! `mesh/NAME/work`, locked while used), a program stage's scratch tree,
//! and the team's leftovers found and removed (`lead gc`).

use std::path::{Path, PathBuf};

use super::{GitError, Repo};

impl Repo {
    /// A scratch worktree of `commit`, detached, in a directory of its own
    /// (for a result's program stage); [`Repo::drop_scratch`] removes it.
    pub(crate) async fn scratch(&self, commit: &str) -> Result<tempfile::TempDir, GitError> {
        let dir = tempfile::Builder::new()
            .prefix("mesh-scratch-")
            .tempdir()
            .map_err(|e| GitError(format!("cannot make a scratch directory: {e}")))?;
        let tree = dir.path().join("tree");
        let tree = tree.to_string_lossy().into_owned();
        self.git_ok(&["worktree", "add", "--detach", "-q", &tree, commit], &[])
            .await?;
        Ok(dir)
    }

    /// Removes a scratch worktree [`Repo::scratch`] made.
    pub(crate) async fn drop_scratch(&self, dir: tempfile::TempDir) {
        let tree = dir.path().join("tree");
        let tree = tree.to_string_lossy().into_owned();
        if let Err(e) = self
            .git_ok(&["worktree", "remove", "--force", &tree], &[])
            .await
        {
            tracing::warn!(error = %e, "cannot remove a scratch worktree");
        }
        drop(dir);
    }

    /// Makes (or finds) `name`'s worktree at `dir`, on its branch
    /// `mesh/NAME/work` from the team branch's head, and locks it so that
    /// `git worktree prune` and `lead gc` leave it alone while it is used.
    pub(crate) async fn add_worktree(&self, dir: &Path, name: &str) -> Result<(), GitError> {
        let dir_s = dir.to_string_lossy().into_owned();
        let branch = format!("mesh/{name}/work");
        if !dir.join(".git").exists() {
            if let Some(parent) = dir.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| GitError(format!("{}: {e}", parent.display())))?;
            }
            let exists = self
                .git(
                    &[
                        "rev-parse",
                        "--verify",
                        "--quiet",
                        &format!("refs/heads/{branch}"),
                    ],
                    &[],
                    None,
                )
                .await?
                .ok();
            let head = self.head().await?;
            if exists {
                self.git_ok(&["worktree", "add", &dir_s, &branch], &[])
                    .await?;
            } else {
                self.git_ok(&["worktree", "add", "-b", &branch, &dir_s, &head], &[])
                    .await?;
            }
        }
        let reason = format!("mesh: {name}'s worktree");
        // Already locked (a worktree reused) is fine.
        let _ = self
            .git(
                &["worktree", "lock", "--reason", &reason, &dir_s],
                &[],
                None,
            )
            .await?;
        Ok(())
    }

    /// Whether the worktree at `dir` holds work that has not landed:
    /// commits the team branch does not have, or files (changed or new)
    /// whose content differs from the team branch's.
    pub(crate) async fn unlanded(&self, dir: &Path) -> Result<bool, GitError> {
        let dir_s = dir.to_string_lossy().into_owned();
        let range = format!("{}..HEAD", self.branch_ref());
        let ahead = self
            .git_ok(&["-C", &dir_s, "rev-list", "--count", &range], &[])
            .await?;
        if ahead != "0" {
            return Ok(true);
        }
        let status = self
            .git_ok(
                &[
                    "-C",
                    &dir_s,
                    "status",
                    "--porcelain",
                    "-z",
                    "--untracked-files=all",
                ],
                &[],
            )
            .await?;
        for entry in status.split('\0').filter(|e| e.len() > 3) {
            let path = &entry[3..];
            let file = dir.join(path);
            let here = if file.exists() {
                self.git_ok(&["hash-object", &file.to_string_lossy()], &[])
                    .await?
            } else {
                String::new()
            };
            let spec = format!("{}:{path}", self.branch_ref());
            let there = self
                .git(&["rev-parse", "--verify", "--quiet", &spec], &[], None)
                .await?;
            let there = if there.ok() {
                there.stdout.trim().to_owned()
            } else {
                String::new()
            };
            if here != there {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Removes `name`'s worktree at `dir` and its branches, unless it holds
    /// unlanded work and `force` is false; whether it was removed.
    pub async fn remove_worktree(
        &self,
        dir: &Path,
        name: &str,
        force: bool,
    ) -> Result<bool, GitError> {
        if !force && self.unlanded(dir).await? {
            return Ok(false);
        }
        let dir_s = dir.to_string_lossy().into_owned();
        let _ = self.git(&["worktree", "unlock", &dir_s], &[], None).await?;
        self.git_ok(&["worktree", "remove", "--force", &dir_s], &[])
            .await?;
        // Its branches (`mesh/NAME/work`, and one per task it started):
        // those the team branch has, or every one when forced.
        let pattern = format!("mesh/{name}/*");
        let mut list = vec![
            "branch",
            "--list",
            "--format=%(refname:short)",
            pattern.as_str(),
        ];
        let merged = format!("--merged={}", self.branch_ref());
        if !force {
            list.push(&merged);
        }
        let branches = self.git_ok(&list, &[]).await?;
        for branch in branches.lines().filter(|b| !b.is_empty()) {
            let _ = self.git(&["branch", "-D", branch], &[], None).await?;
        }
        Ok(true)
    }

    /// The team's worktrees: every worktree on a `mesh/NAME/...` branch,
    /// whose it is, and whether it is locked (in use).
    pub async fn worktrees(&self) -> Result<Vec<Worktree>, GitError> {
        let out = self
            .git_ok(&["worktree", "list", "--porcelain"], &[])
            .await?;
        let mut found = Vec::new();
        for block in out.split("\n\n") {
            let mut path = None;
            let mut branch = None;
            let mut locked = false;
            for line in block.lines() {
                if let Some(p) = line.strip_prefix("worktree ") {
                    path = Some(PathBuf::from(p));
                } else if let Some(b) = line.strip_prefix("branch refs/heads/") {
                    branch = Some(b.to_owned());
                } else if line.starts_with("locked") {
                    locked = true;
                }
            }
            let member = branch
                .as_deref()
                .and_then(|b| b.strip_prefix("mesh/"))
                .and_then(|b| b.split_once('/'))
                .map(|(member, _)| member.to_owned());
            if let (Some(path), Some(member)) = (path, member) {
                found.push(Worktree {
                    path,
                    member,
                    locked,
                });
            }
        }
        Ok(found)
    }
}

/// One of the team's worktrees.
#[derive(Debug, Clone)]
pub struct Worktree {
    /// Where it is.
    pub path: PathBuf,
    /// Whose it is (its branch is `mesh/MEMBER/work`).
    pub member: String,
    /// Locked: in use by a running lead.
    pub locked: bool,
}
