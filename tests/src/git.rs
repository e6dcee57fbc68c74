//! A team repository for the tests of `lead serve --repo`.

#![allow(clippy::expect_used)]

use std::path::Path;

/// Runs `git ARGS` in `dir`; its stdout, trimmed. Panics if it fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A team repository on branch `main` with a README and `src/lib.rs`.
pub fn team_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = dir.path();
    git(repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "# team\n\nline two\n").expect("write");
    std::fs::create_dir_all(repo.join("src")).expect("mkdir");
    std::fs::write(repo.join("src/lib.rs"), "pub fn one() -> u32 { 1 }\n").expect("write");
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-q", "-m", "start"]);
    // The lead moves `main`; nobody edits in this checkout.
    git(repo, &["checkout", "-q", "--detach"]);
    dir
}
