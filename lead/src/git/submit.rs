//! A submitted diff made a commit on its base, in a scratch index: nothing
//! the team sees changes.

use mesh_core::result::FileChange;

use super::{GitError, Repo, COMMITTER};

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

impl Repo {
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
}
