//! `run_command`'s process: `sh -c` in the workspace, with a cleaned
//! environment, in a process group of its own that is killed when the command
//! ends (so nothing it started in the background outlives the call), when it
//! runs past its time limit, or when the call is abandoned; its output is kept
//! up to a cap. Confined by the sandbox, scoped by the grant (see
//! [`crate::sandbox`]).
//!
//! A process that leaves the group (`setsid`) escapes that kill, but not the
//! teammate's [`crate::reaper`]: once the command's own process is reaped,
//! everything left below the teammate is killed too.
//!
//! What this does not stop, with `--sandbox none`: the command runs as the
//! teammate's user, so it can read (and, outside the grant's paths, write)
//! whatever that user can, and reach the network. The sandbox closes these.

use std::{
    path::{Path, PathBuf},
    process::{ExitStatus, Stdio},
    time::Duration,
};

use mesh_core::grant::PathSet;
use nix::{sys::signal::Signal, unistd::Pid};

pub use crate::sandbox::Sandbox;
use tokio::io::{AsyncRead, AsyncReadExt};

/// The variables a command gets from the teammate's environment; every
/// other one (tokens, API keys, cloud credentials) stays behind.
const PASSED_ENV: [&str; 4] = ["PATH", "LANG", "LC_ALL", "TZ"];

/// The `PATH` a command gets when the teammate has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// How long the output is read after the command ended and what it left
/// was killed: a process that escaped the kill may hold the pipes open.
const DRAIN: Duration = Duration::from_secs(1);

/// The limits a command runs within.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLimits {
    /// Longest run; then the whole group is killed.
    pub timeout: Duration,
    /// Bytes of stdout, and of stderr, kept; the rest is counted and dropped.
    pub output_max: usize,
    /// Where it runs.
    pub sandbox: Sandbox,
    /// Trees a confined command may read beside the workspace and the
    /// system's (`--sandbox-read`).
    pub sandbox_read: Vec<PathBuf>,
}

impl Default for CommandLimits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(60),
            output_max: 16 * 1024,
            sandbox: Sandbox::None,
            sandbox_read: Vec::new(),
        }
    }
}

/// How a command ended.
#[derive(Debug)]
pub struct Finished {
    /// Its exit status; `None` when it was killed at the time limit.
    pub status: Option<ExitStatus>,
    /// What it printed, up to the cap, with a note of what was dropped.
    pub stdout: String,
    pub stderr: String,
    /// What it wrote outside the grant, undone: one line each.
    pub undone: Vec<String>,
}

/// Kills the process group when dropped: the command ended, timed out, or
/// the call was abandoned.
struct Group(Pid);

impl Drop for Group {
    fn drop(&mut self) {
        // ESRCH: every process in it is gone already.
        let _ = nix::sys::signal::killpg(self.0, Signal::SIGKILL);
    }
}

/// Runs `command` with `sh -c` in `workspace` within `limits`, able to
/// write what `grant` names.
pub async fn run(
    workspace: &Path,
    command: &str,
    limits: &CommandLimits,
    grant: &PathSet,
) -> std::io::Result<Finished> {
    let mut confined =
        crate::sandbox::confine(&limits.sandbox, workspace, grant, &limits.sandbox_read)?;
    let process = &mut confined.process;
    process
        .arg("-c")
        .arg(command)
        .current_dir(workspace)
        .env_clear()
        .envs(
            PASSED_ENV
                .iter()
                .filter_map(|name| std::env::var_os(name).map(|value| (name, value))),
        )
        .env("HOME", workspace)
        .env("TMPDIR", &confined.tmpdir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if std::env::var_os("PATH").is_none() {
        process.env("PATH", DEFAULT_PATH);
    }
    let (mut child, known) = crate::reaper::spawn(process)?;
    let group = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(|id| Group(Pid::from_raw(id)));
    let stdout = tokio::spawn(capped(child.stdout.take(), limits.output_max));
    let stderr = tokio::spawn(capped(child.stderr.take(), limits.output_max));
    let status = match tokio::time::timeout(limits.timeout, child.wait()).await {
        Ok(status) => Some(status?),
        Err(_) => None,
    };
    // Whatever it left running in the background goes with it.
    drop(group);
    let _ = child.kill().await;
    // And whatever left the group.
    known.reaped().await;
    let read = |task: tokio::task::JoinHandle<String>| async move {
        match tokio::time::timeout(DRAIN, task).await {
            Ok(Ok(text)) => text,
            _ => "[output still held open by a process that escaped the kill]".to_owned(),
        }
    };
    let stdout = read(stdout).await;
    let stderr = read(stderr).await;
    let undone = confined
        .guard
        .take()
        .map(crate::sandbox::Guard::after)
        .unwrap_or_default();
    Ok(Finished {
        status,
        stdout,
        stderr,
        undone,
    })
}

/// Reads `pipe` to its end, keeping the first `max` bytes.
async fn capped(pipe: Option<impl AsyncRead + Unpin>, max: usize) -> String {
    let Some(mut pipe) = pipe else {
        return String::new();
    };
    let mut kept = Vec::new();
    let mut dropped = 0usize;
    let mut buf = vec![0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = max.saturating_sub(kept.len()).min(n);
                kept.extend_from_slice(&buf[..room]);
                dropped += n - room;
            }
        }
    }
    let mut text = String::from_utf8_lossy(&kept).into_owned();
    if dropped > 0 {
        text.push_str(&format!("[... {dropped} more bytes not kept]"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(timeout_ms: u64, output_max: usize) -> CommandLimits {
        CommandLimits {
            timeout: Duration::from_millis(timeout_ms),
            output_max,
            sandbox: Sandbox::None,
            sandbox_read: Vec::new(),
        }
    }

    /// A grant that writes nothing.
    fn nothing() -> PathSet {
        PathSet::new("grant.write_paths", &[]).expect("empty")
    }

    /// Whether `pid` is gone (or a zombie nobody reaped yet).
    fn gone(pid: i32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        }
    }

    /// Whether `pid` dies within a few seconds: SIGKILL is delivered
    /// asynchronously, so the kill may not have landed when `run` returns.
    async fn dies(pid: i32) -> bool {
        for _ in 0..500 {
            if gone(pid) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    #[tokio::test]
    async fn it_runs_in_the_workspace_with_a_cleaned_environment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = dir.path().canonicalize().expect("canonical");
        let secret = "MESH_JOIN_TOKEN";
        // The test process's own environment stands in for the teammate's.
        assert!(std::env::var_os("PATH").is_some());
        let done = run(&ws, "pwd; env", &limits(10_000, 1 << 20), &nothing())
            .await
            .expect("run");
        assert!(done.status.is_some_and(|s| s.success()), "{done:?}");
        let mut lines = done.stdout.lines();
        assert_eq!(lines.next(), Some(ws.to_str().expect("utf-8")));
        let names: Vec<&str> = lines.filter_map(|l| l.split('=').next()).collect();
        assert!(!names.contains(&secret), "{names:?}");
        for name in &names {
            assert!(
                PASSED_ENV.contains(name) || ["HOME", "TMPDIR", "PWD", "SHLVL", "_"].contains(name),
                "{name} was passed on: {names:?}"
            );
        }
    }

    #[tokio::test]
    async fn what_it_leaves_in_the_background_is_killed_when_it_ends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let done = run(
            dir.path(),
            "sleep 1000 >/dev/null 2>&1 & echo $!",
            &limits(10_000, 1024),
            &nothing(),
        )
        .await
        .expect("run");
        let pid: i32 = done.stdout.trim().parse().expect("a pid");
        assert!(
            dies(pid).await,
            "the background sleep {pid} outlived the call"
        );
    }

    #[tokio::test]
    async fn what_left_the_group_is_killed_when_it_ends() {
        // Orphans come to this process, as they do to the teammate.
        crate::reaper::adopt_orphans().expect("PR_SET_CHILD_SUBREAPER");
        let dir = tempfile::tempdir().expect("tempdir");
        let done = run(
            dir.path(),
            "setsid sleep 1000 >/dev/null 2>&1 & echo $!",
            &limits(10_000, 1024),
            &nothing(),
        )
        .await
        .expect("run");
        let pid: i32 = done.stdout.trim().parse().expect("a pid");
        assert!(dies(pid).await, "the setsid sleep {pid} outlived the call");
    }

    #[tokio::test]
    async fn what_left_the_group_is_killed_when_the_call_is_abandoned() {
        crate::reaper::adopt_orphans().expect("PR_SET_CHILD_SUBREAPER");
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = dir.path().to_owned();
        let call = tokio::spawn(async move {
            run(
                &ws,
                "setsid sleep 1000 >/dev/null 2>&1 & echo $! > bg.pid; sleep 1000",
                &limits(60_000, 1024),
                &nothing(),
            )
            .await
        });
        let pid_file = dir.path().join("bg.pid");
        let mut pid = None;
        for _ in 0..1000 {
            pid = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|text| text.trim().parse::<i32>().ok());
            if pid.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let pid = pid.expect("the command wrote bg.pid");
        call.abort();
        assert!(call.await.is_err_and(|e| e.is_cancelled()));
        assert!(dies(pid).await, "the setsid sleep {pid} outlived the call");
    }

    #[tokio::test]
    async fn past_its_time_limit_the_whole_group_is_killed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let done = run(
            dir.path(),
            "sleep 1000 & echo $! > bg.pid; sleep 1000",
            &limits(300, 1024),
            &nothing(),
        )
        .await
        .expect("run");
        assert!(done.status.is_none(), "{done:?}");
        let pid: i32 = std::fs::read_to_string(dir.path().join("bg.pid"))
            .expect("pid file")
            .trim()
            .parse()
            .expect("a pid");
        assert!(
            dies(pid).await,
            "the background sleep {pid} outlived the timeout"
        );
    }

    #[tokio::test]
    async fn output_past_the_cap_is_counted_not_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let done = run(
            dir.path(),
            "head -c 100000 /dev/zero | tr '\\0' x; echo oops >&2",
            &limits(10_000, 1000),
            &nothing(),
        )
        .await
        .expect("run");
        assert!(done.stdout.starts_with(&"x".repeat(1000)));
        assert!(
            done.stdout.ends_with("[... 99000 more bytes not kept]"),
            "{}",
            &done.stdout[1000..]
        );
        assert_eq!(done.stderr, "oops\n");
    }

    /// In each sandbox that works here (bubblewrap where `tests/run`
    /// installed it), from inside a command: the granted file is written,
    /// nothing else is, a file of the user's outside the workspace cannot be
    /// read, and there is no network.
    #[tokio::test]
    async fn a_confined_command_writes_its_grant_and_reads_no_further() {
        // Not through `Sandbox::parse`: its probe is a child of this
        // process, which another test's reaper (a subreaper's sweep of
        // what its command left) may kill.
        let bwrap = crate::sandbox::bwrap_installed().expect("bwrap (apt install bubblewrap)");
        let mut sandboxes = vec![Sandbox::Bwrap(bwrap)];
        sandboxes.extend(Sandbox::parse("landlock").ok());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        for sandbox in sandboxes {
            let home = std::env::var("HOME").expect("HOME");
            let ws = tempfile::tempdir_in(&home).expect("a workspace outside /tmp");
            let outside = tempfile::tempdir_in(&home).expect("a directory outside /tmp");
            std::fs::write(outside.path().join("secret"), "s3cret").expect("secret");
            let script = format!(
                "echo in > in.txt; echo no > other.txt; echo out > {out}/f; cat {out}/secret; \
                 python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}))' \
                 2>&1 | tail -1; true",
                out = outside.path().display()
            );
            let grant = PathSet::new("grant.write_paths", &["in.txt".into()]).expect("grant");
            let done = run(
                ws.path(),
                &script,
                &CommandLimits {
                    sandbox: sandbox.clone(),
                    ..CommandLimits::default()
                },
                &grant,
            )
            .await
            .expect("run");
            let seen = format!("{sandbox:?}: {done:?}");
            assert_eq!(
                std::fs::read_to_string(ws.path().join("in.txt"))
                    .ok()
                    .as_deref(),
                Some("in\n"),
                "{seen}"
            );
            assert!(!ws.path().join("other.txt").exists(), "{seen}");
            assert!(!outside.path().join("f").exists(), "{seen}");
            assert!(!done.stdout.contains("s3cret"), "{seen}");
            assert!(done.stdout.contains("Error"), "{seen}");
            assert!(
                listener.accept().is_err(),
                "{seen}: the command reached a listener on the host's loopback"
            );
        }
    }
}
