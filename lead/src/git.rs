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

use mesh_core::result::{FileChange, Landing};
use tokio::io::AsyncWriteExt;

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

/// A submitted diff, made a commit on its base.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    /// The commit (its parent: the base).
    pub(crate) commit: String,
    /// The files it changes, as git counts them.
    pub(crate) files: Vec<FileChange>,
}

/// Why a submitted diff was refused.
#[derive(Debug)]
pub(crate) enum PrepareError {
    /// The field, and what is wrong with it.
    Invalid(&'static str, String),
    /// Git failed for another reason.
    Git(GitError),
}

/// What landing a result needs.
#[derive(Debug, Clone)]
pub(crate) struct LandAsk {
    pub(crate) request_id: String,
    pub(crate) base: String,
    pub(crate) commit: String,
    pub(crate) task_id: String,
    pub(crate) plan_id: String,
    pub(crate) summary: String,
    pub(crate) author: String,
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

    /// Makes `diff` (against `base`) a commit on `base`, in a scratch
    /// index: nothing the team sees changes.
    pub(crate) async fn prepare(
        &self,
        base: &str,
        diff: &str,
        summary: &str,
    ) -> Result<Prepared, PrepareError> {
        let verify = format!("{base}^{{commit}}");
        let base = self
            .git_ok(&["rev-parse", "--verify", "--quiet", &verify], &[])
            .await
            .map_err(|_| {
                PrepareError::Invalid(
                    "base",
                    format!("no commit {base} in the team's repository; fetch the team branch and start from it"),
                )
            })?;
        let scratch =
            tempfile::tempdir().map_err(|e| PrepareError::Git(GitError(e.to_string())))?;
        let index = scratch.path().join("index");
        let index = index.to_string_lossy().into_owned();
        let env = [("GIT_INDEX_FILE", index.as_str())];
        self.git_ok(&["read-tree", &base], &env)
            .await
            .map_err(PrepareError::Git)?;
        let applied = self
            .git(
                &["apply", "--cached", "--binary", "--whitespace=nowarn", "-"],
                &env,
                Some(diff.as_bytes()),
            )
            .await
            .map_err(PrepareError::Git)?;
        if !applied.ok() {
            return Err(PrepareError::Invalid(
                "diff",
                format!(
                    "does not apply to base {base}: {}",
                    mesh_core::limits::cut(applied.stderr.trim(), 1000)
                ),
            ));
        }
        let tree = self
            .git_ok(&["write-tree"], &env)
            .await
            .map_err(PrepareError::Git)?;
        let base_tree = format!("{base}^{{tree}}");
        let base_tree = self
            .git_ok(&["rev-parse", &base_tree], &[])
            .await
            .map_err(PrepareError::Git)?;
        if tree == base_tree {
            return Err(PrepareError::Invalid(
                "diff",
                "changes nothing against its base".into(),
            ));
        }
        // Fixed names and dates: the same diff on the same base with the
        // same summary is the same commit, so a retried SubmitResult is the
        // same request (the landed commit is made afresh).
        let commit = self
            .git_ok(
                &["commit-tree", &tree, "-p", &base, "-m", summary],
                &[
                    ("GIT_AUTHOR_NAME", "mesh"),
                    ("GIT_AUTHOR_EMAIL", COMMITTER.1),
                    ("GIT_AUTHOR_DATE", "@0 +0000"),
                    ("GIT_COMMITTER_DATE", "@0 +0000"),
                ],
            )
            .await
            .map_err(PrepareError::Git)?;
        let files = self
            .changes(&base, &commit)
            .await
            .map_err(PrepareError::Git)?;
        Ok(Prepared { commit, files })
    }

    /// The files `to` changes against `from`, with line counts.
    async fn changes(&self, from: &str, to: &str) -> Result<Vec<FileChange>, GitError> {
        let out = self
            .git_ok(
                &[
                    "diff-tree",
                    "-r",
                    "--numstat",
                    "-z",
                    "--no-renames",
                    from,
                    to,
                ],
                &[],
            )
            .await?;
        // Each entry: "ADDED\tREMOVED\tPATH\0"; "-\t-\t" for a binary file.
        let mut files = Vec::new();
        for entry in out.split('\0').filter(|e| !e.is_empty()) {
            let mut parts = entry.splitn(3, '\t');
            let (Some(added), Some(removed), Some(path)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let binary = added == "-";
            files.push(FileChange {
                path: path.to_owned(),
                added: added.parse().unwrap_or(0),
                removed: removed.parse().unwrap_or(0),
                binary,
            });
        }
        Ok(files)
    }

    /// The commit on the team branch that landed result `request_id`, if
    /// one did.
    pub(crate) async fn landed(&self, request_id: &str) -> Result<Option<String>, GitError> {
        let grep = format!("--grep=^Mesh-Result: {request_id}$");
        let reference = self.branch_ref();
        let found = self
            .git_ok(&["log", "--format=%H", "-1", &grep, &reference], &[])
            .await?;
        Ok((!found.is_empty()).then_some(found))
    }

    /// Merges result `ask` into the team branch as one commit (see the
    /// module's doc); a landing already done is found, not made twice.
    pub(crate) async fn land(&self, ask: &LandAsk) -> Landing {
        let _one_at_a_time = self.landing.lock().await;
        match self.try_land(ask).await {
            Ok(landing) => landing,
            Err(e) => Landing::Failed(e.0),
        }
    }

    async fn try_land(&self, ask: &LandAsk) -> Result<Landing, GitError> {
        if let Some(commit) = self.landed(&ask.request_id).await? {
            return Ok(Landing::Merged { commit });
        }
        let reference = self.branch_ref();
        // The head moves only under this lock, but another tool may move it
        // too: the compare-and-swap below then fails, and this tries again.
        for _ in 0..5 {
            let head = self.head().await?;
            let tree = if head == ask.base {
                self.git_ok(&["rev-parse", &format!("{}^{{tree}}", ask.commit)], &[])
                    .await?
            } else {
                let merge_base = format!("--merge-base={}", ask.base);
                let out = self
                    .git(
                        &[
                            "merge-tree",
                            "--write-tree",
                            "--name-only",
                            "--no-messages",
                            &merge_base,
                            &head,
                            &ask.commit,
                        ],
                        &[],
                        None,
                    )
                    .await?;
                match out.code {
                    Some(0) => out.stdout.lines().next().unwrap_or_default().to_owned(),
                    Some(1) => {
                        let mut paths: Vec<String> = out
                            .stdout
                            .lines()
                            .skip(1)
                            .take_while(|l| !l.is_empty())
                            .map(str::to_owned)
                            .collect();
                        paths.dedup();
                        return Ok(Landing::Conflict { paths, head });
                    }
                    _ => {
                        return Err(GitError(format!(
                            "git merge-tree failed: {}",
                            out.stderr.trim()
                        )))
                    }
                }
            };
            let mut message = format!("{}\n\nMesh-Task: {}\n", ask.summary.trim(), ask.task_id);
            if !ask.plan_id.is_empty() {
                message.push_str(&format!("Mesh-Plan: {}\n", ask.plan_id));
            }
            message.push_str(&format!("Mesh-Result: {}\n", ask.request_id));
            let email = format!("{}@mesh.invalid", ask.author);
            let commit = self
                .git_ok(
                    &["commit-tree", &tree, "-p", &head, "-m", &message],
                    &[
                        ("GIT_AUTHOR_NAME", ask.author.as_str()),
                        ("GIT_AUTHOR_EMAIL", email.as_str()),
                    ],
                )
                .await?;
            fault_point("before-ref", &commit).await;
            let reason = format!("mesh: land result {}", ask.request_id);
            let moved = self
                .git(
                    &["update-ref", "-m", &reason, &reference, &commit, &head],
                    &[],
                    None,
                )
                .await?;
            if moved.ok() {
                fault_point("after-ref", &commit).await;
                return Ok(Landing::Merged { commit });
            }
            tracing::warn!(branch = %self.branch, error = %moved.stderr.trim(), "the team branch moved during a landing; merging again");
        }
        Err(GitError(format!(
            "the team branch {} kept moving; landing gave up",
            self.branch
        )))
    }

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

/// For the fault tests: with `MESH_FAULT_LAND=POINT:FILE`, a landing that
/// reaches `POINT` (`before-ref`, `after-ref`) writes the new commit to
/// `FILE` and stops there for good, so that the test can kill the lead at
/// exactly that instant. Unset (always, outside tests), it does nothing.
async fn fault_point(point: &str, commit: &str) {
    let Ok(spec) = std::env::var("MESH_FAULT_LAND") else {
        return;
    };
    let Some((at, file)) = spec.split_once(':') else {
        return;
    };
    if at == point {
        let _ = std::fs::write(file, commit);
        tracing::warn!(point, "MESH_FAULT_LAND: the landing stops here");
        std::future::pending::<()>().await;
    }
}
