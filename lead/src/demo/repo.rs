//! The demo's team repository: made before the mission, checked after it
//! (what `main` holds, and that no teammate's worktree or branch is left).

use std::path::Path;

use anyhow::{bail, Context};

/// Runs `git ARGS` in `dir`; its stdout. Fails naming the command.
fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "mesh demo")
        .env("GIT_AUTHOR_EMAIL", "demo@mesh.invalid")
        .env("GIT_COMMITTER_NAME", "mesh demo")
        .env("GIT_COMMITTER_EMAIL", "demo@mesh.invalid")
        .output()
        .context("running git (the demo's team repository needs it)")?;
    if !out.status.success() {
        bail!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The team's repository: `main`, with a README and `src/lib.rs`.
pub(super) fn team_repo(repo: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(repo.join("src"))?;
    git(repo, &["init", "-q", "-b", "main"])?;
    std::fs::write(repo.join("README.md"), "# the team's crate\n")?;
    std::fs::write(repo.join("src/lib.rs"), "// modules\n")?;
    git(repo, &["add", "-A"])?;
    git(repo, &["commit", "-q", "-m", "Start the crate"])?;
    // The lead moves `main`; nobody edits in this checkout.
    git(repo, &["checkout", "-q", "--detach"])?;
    Ok(())
}

/// What the team branch must hold after the demo: its history (who landed
/// what, on top of the start) and its files.
pub(super) fn check_branch(repo: &Path) -> anyhow::Result<()> {
    println!("\nthe team branch (main), newest first:");
    let log = git(repo, &["log", "--format=%h %an: %s", "main"])?;
    for line in log.lines() {
        println!("  {line}");
    }
    let authors: Vec<String> = git(repo, &["log", "--format=%an", "main"])?
        .lines()
        .map(str::to_owned)
        .collect();
    let mut landed = authors.clone();
    landed.pop(); // the start
    landed.sort();
    if landed != ["alice", "alice", "bob"] {
        bail!("main should have two commits of alice's and one of bob's on the start; it has {authors:?}");
    }
    let trailers = git(repo, &["log", "--format=%B", "-1", "main"])?;
    if !trailers.contains("Mesh-Task: ") || !trailers.contains("Mesh-Result: ") {
        bail!("the newest commit on main has no Mesh-Task/Mesh-Result trailers: {trailers}");
    }
    println!("\nthe files on main:");
    for (path, expected) in [
        ("src/auth.rs", Some("pub fn login")),
        ("tests/auth_test.rs", Some("login_needs_a_user")),
        ("src/session.rs", Some("pub fn start")),
        ("tests/session_test.rs", Some("no_session_without_a_user")),
        ("src/lib.rs", Some("pub mod auth;\npub mod session;")),
        ("docs/login.md", Some("# Login")),
        ("db/schema.sql", None),
    ] {
        let content = git(repo, &["show", &format!("main:{path}")]).ok();
        let ok = match (&content, expected) {
            (Some(content), Some(expected)) => content.contains(expected),
            (None, None) => true,
            _ => false,
        };
        let mark = if ok { "ok " } else { "BAD" };
        println!(
            "  {mark} {path}: {}",
            if content.is_some() {
                "landed"
            } else {
                "absent"
            }
        );
        if !ok {
            bail!(
                "main:{path} should be {}",
                match expected {
                    Some(text) => format!("landed, holding {text:?}"),
                    None => "absent".into(),
                }
            );
        }
    }
    Ok(())
}

/// No teammate worktree or branch is left: only the team's.
pub(super) fn check_leftovers(repo: &Path, state: &Path) -> anyhow::Result<()> {
    let worktrees = git(repo, &["worktree", "list", "--porcelain"])?;
    let count = worktrees
        .lines()
        .filter(|l| l.starts_with("worktree "))
        .count();
    let branches = git(repo, &["branch", "--list", "mesh/*"])?;
    if count != 1 || !branches.is_empty() || state.join("worktrees/alice").exists() {
        bail!("teammates' worktrees or branches are left: {worktrees}\n{branches}");
    }
    println!("\nworktrees and branches left: only main's checkout");
    Ok(())
}
