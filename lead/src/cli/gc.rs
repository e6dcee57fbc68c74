//! `lead gc`: the team's leftover worktrees removed, no lead needed.

use super::CliError;

/// `lead gc`: removes the team's leftover worktrees and their branches.
pub async fn gc(
    repo: &std::path::Path,
    branch: Option<&str>,
    force: bool,
    unlock: bool,
) -> Result<String, CliError> {
    let internal = |e: crate::git::GitError| CliError::Usage(e.to_string());
    let repo = crate::git::Repo::open(repo, branch)
        .await
        .map_err(internal)?;
    let mut out = String::new();
    for worktree in repo.worktrees().await.map_err(internal)? {
        let path = worktree.path.display();
        if worktree.locked && !unlock {
            out.push_str(&format!(
                "kept {path}: in use by a running lead (--unlock to remove it anyway)\n"
            ));
            continue;
        }
        if repo
            .remove_worktree(&worktree.path, &worktree.member, force)
            .await
            .map_err(internal)?
        {
            out.push_str(&format!("removed {path} (mesh/{}/work)\n", worktree.member));
        } else {
            out.push_str(&format!(
                "kept {path}: it holds work that has not landed (--force to remove it)\n"
            ));
        }
    }
    if out.is_empty() {
        out.push_str("no worktrees of the team's\n");
    }
    Ok(out)
}
