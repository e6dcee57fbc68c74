//! Landing an approved result: a three-way merge into the team branch's
//! head, one commit, compare-and-swap of the branch (the steps are
//! `lead/src/git.rs`'s); and what landed, found again by its trailer.

use mesh_core::result::Landing;

use super::{GitError, Repo};

#[cfg(feature = "faults")]
mod fault;

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
}

/// Where a landing may be stopped for the fault tests (`before-ref`,
/// `after-ref`), in a build with the `faults` feature (the tests turn it
/// on); in any other build it does nothing.
async fn fault_point(point: &str, commit: &str) {
    #[cfg(feature = "faults")]
    fault::stop_at(point, commit).await;
    #[cfg(not(feature = "faults"))]
    let _ = (point, commit);
}
