//! Children a lead left running when it stepped down: the process that
//! starts again in its place (the same pid, after exec) is still their
//! parent, so it reaps them when they exit, else each would stay a zombie
//! until the lead exits. Their pids cross the exec in `MESH_ORPHANS`.

use std::sync::Mutex;

use nix::{
    sys::wait::{waitpid, WaitPidFlag, WaitStatus},
    unistd::Pid,
};

/// The variable naming them across the exec.
const VAR: &str = "MESH_ORPHANS";

/// Children left running and not yet reaped.
static LEFT: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Records `pids`, children this lead leaves running as it steps down.
pub(crate) fn left_running(pids: impl IntoIterator<Item = u32>) {
    if let Ok(mut left) = LEFT.lock() {
        left.extend(pids);
    }
}

/// Names the children left running (and not reaped yet) in the
/// environment of `command`, the lead started again.
pub(crate) fn hand_on(command: &mut std::process::Command) {
    let Ok(left) = LEFT.lock() else { return };
    if !left.is_empty() {
        let pids: Vec<String> = left.iter().map(u32::to_string).collect();
        command.env(VAR, pids.join(","));
    }
}

/// Reaps, as they exit, the children a lead that stepped down in this
/// process left running (named in the environment); on a task of its
/// own, woken by SIGCHLD. Nothing to do in a lead started afresh.
pub fn reap_inherited() {
    let Ok(named) = std::env::var(VAR) else {
        return;
    };
    std::env::remove_var(VAR);
    let pids: Vec<u32> = named.split(',').filter_map(|p| p.parse().ok()).collect();
    left_running(pids);
    let Ok(mut exits) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child())
    else {
        return;
    };
    tokio::spawn(async move {
        loop {
            if reap() == 0 {
                return;
            }
            exits.recv().await;
        }
    });
}

/// Reaps each child left running that has exited: how many still run.
fn reap() -> usize {
    let Ok(mut left) = LEFT.lock() else { return 0 };
    left.retain(|pid| {
        let Ok(pid) = i32::try_from(*pid) else {
            return false;
        };
        match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => true,
            Ok(status) => {
                tracing::info!(pid, ?status, "a teammate an earlier lead started exited");
                false
            }
            // Not our child (any more): nothing to reap.
            Err(_) => false,
        }
    });
    left.len()
}
