//! The team's repository (`lead serve --repo DIR --branch B`), through the
//! git CLI: a submitted diff made into a commit on its base, an approved
//! result merged into the team branch as one commit, and the worktrees of
//! spawned teammates. Every call runs a `git` process off the hub (from an
//! RPC handler or the lander task), never on its actor.
//!
//! Landing, step by step, so that a lead killed at any instant leaves the
//! team branch before or after the merge and never between:
//! 1. the result's commit (made at submission: the diff applied to its base
//!    in a scratch index, `git apply --cached`, then `commit-tree`);
//! 2. a three-way merge of it into the branch's head against the base
//!    (`git merge-tree --write-tree --merge-base`), in the object store
//!    only: no worktree, no index is touched, and a conflict names its paths;
//! 3. one commit on the head, authored as the teammate, its message the
//!    summary with trailers (`Mesh-Task`, `Mesh-Plan`, `Mesh-Result`);
//! 4. `git update-ref refs/heads/B NEW OLD`: compare-and-swap, atomic (a
//!    lock file renamed into place). Until then only unreachable objects
//!    exist; after it, the merge happened.
//!
//! A restarted lead finds what landed by the `Mesh-Result` trailer
//! ([`Repo::landed`]), so the request's state agrees with the branch.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
};

use tokio::io::AsyncWriteExt;

mod land;
mod submit;
mod worktrees;

pub(crate) use land::LandAsk;
pub(crate) use submit::{PrepareError, Prepared};
pub use worktrees::Worktree;

/// Who commits for the team.
const COMMITTER: (&str, &str) = ("mesh lead", "lead@mesh.invalid");

/// A git command that failed, in its words.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct GitError(pub(crate) String);

/// What a git process printed.
struct Out {
    /// Exit code (`None`: killed).
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Out {
    fn ok(&self) -> bool {
        self.code == Some(0)
    }
}

/// The team's repository and the branch it lands on.
#[derive(Debug)]
pub struct Repo {
    /// The repository (its worktree, or a bare repository).
    path: PathBuf,
    /// The team branch, e.g. `main`.
    branch: String,
    /// One landing at a time.
    landing: tokio::sync::Mutex<()>,
}

impl Repo {
    /// The repository at `path` and its branch `branch` (none: the branch
    /// checked out there). Fails unless both exist.
    pub async fn open(path: &Path, branch: Option<&str>) -> Result<Repo, GitError> {
        let path = std::fs::canonicalize(path)
            .map_err(|e| GitError(format!("--repo {}: {e}", path.display())))?;
        let mut repo = Repo {
            path,
            branch: String::new(),
            landing: tokio::sync::Mutex::new(()),
        };
        let out = repo.git(&["rev-parse", "--git-dir"], &[], None).await?;
        if !out.ok() {
            return Err(GitError(format!(
                "--repo {}: not a git repository: {}",
                repo.path.display(),
                out.stderr.trim()
            )));
        }
        repo.branch = match branch {
            Some(b) => b.to_owned(),
            None => {
                let out = repo
                    .git(&["symbolic-ref", "--short", "HEAD"], &[], None)
                    .await?;
                if !out.ok() {
                    return Err(GitError(format!(
                        "--repo {}: no branch is checked out; name one with --branch",
                        repo.path.display()
                    )));
                }
                out.stdout.trim().to_owned()
            }
        };
        repo.head().await?;
        Ok(repo)
    }

    /// The repository's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The team branch.
    pub(crate) fn branch(&self) -> &str {
        &self.branch
    }

    fn branch_ref(&self) -> String {
        format!("refs/heads/{}", self.branch)
    }

    /// Runs `git ARGS` in the repository with `env`, feeding it `stdin`.
    async fn git(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
        stdin: Option<&[u8]>,
    ) -> Result<Out, GitError> {
        let mut command = tokio::process::Command::new("git");
        command
            .arg("-C")
            .arg(&self.path)
            .args(args)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_COMMITTER_NAME", COMMITTER.0)
            .env("GIT_COMMITTER_EMAIL", COMMITTER.1)
            .envs(env.iter().copied())
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|e| GitError(format!("cannot run git: {e}")))?;
        if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
            // A git that stops reading early (a bad patch) fails below with
            // its own words; the broken pipe says nothing more.
            let _ = pipe.write_all(bytes).await;
            drop(pipe);
        }
        let output = child
            .wait_with_output()
            .await
            .map_err(|e| GitError(format!("git {}: {e}", args.join(" "))))?;
        Ok(Out {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }

    /// `git ARGS`, which must succeed; its stdout, trimmed.
    async fn git_ok(&self, args: &[&str], env: &[(&str, &str)]) -> Result<String, GitError> {
        let out = self.git(args, env, None).await?;
        if out.ok() {
            Ok(out.stdout.trim().to_owned())
        } else {
            Err(GitError(format!(
                "git {} failed: {}",
                args.join(" "),
                out.stderr.trim()
            )))
        }
    }

    /// Where the team branch stands.
    pub(crate) async fn head(&self) -> Result<String, GitError> {
        let reference = self.branch_ref();
        self.git_ok(&["rev-parse", "--verify", "--quiet", &reference], &[])
            .await
            .map_err(|_| {
                GitError(format!(
                    "--branch {}: no such branch in {}",
                    self.branch,
                    self.path.display()
                ))
            })
    }
}
