//! Processes the lead starts on someone's behalf (a chain's program stage, a
//! spawned teammate) each lead a session, and so a process group, of their
//! own: whatever they start stays in that session, and ends with them.
//!
//! A [`Session`] is killed whole (SIGKILL to every process in it) when its
//! owner says so, and when it is dropped: a stage that timed out, a task the
//! lead abandons when it stops, the lead's runtime shutting down. Only a
//! process that starts a session of its own escapes, as it would escape any
//! process group.

use nix::{sys::signal::Signal, unistd::Pid};
use shared::procfs::Stat;
use tokio::process::{Child, Command};

/// A running process that leads its own session.
#[derive(Debug)]
pub(crate) struct Session {
    /// The leader, as tokio holds it (for `wait` and its pipes).
    pub(crate) child: Child,
    /// The leader's pid: also the session's and the process group's id (0
    /// once the session has been killed whole).
    sid: u32,
}

impl Session {
    /// Starts `command` as the leader of a new session.
    pub(crate) fn spawn(command: &mut Command) -> std::io::Result<Self> {
        // SAFETY: setsid is async-signal-safe and touches no memory of ours.
        unsafe {
            command.pre_exec(|| {
                nix::unistd::setsid()
                    .map(drop)
                    .map_err(std::io::Error::from)
            });
        }
        let child = command.kill_on_drop(true).spawn()?;
        let sid = child.id().unwrap_or(0);
        Ok(Self { child, sid })
    }

    /// The leader's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.sid
    }

    /// Sends `sig` to the leader's process group (not to groups of its own
    /// that it made inside the session).
    pub(crate) fn signal_group(&self, sig: Signal) {
        signal_group(self.sid, sig);
    }

    /// SIGKILL to every process of the session, the leader included; once.
    pub(crate) fn kill(&mut self) {
        if self.sid > 0 {
            let _ = self.child.start_kill();
            signal_session(self.sid, Signal::SIGKILL);
            self.sid = 0;
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Sends `sig` to the process group `pid` leads, if it is a real pid.
fn signal_group(pid: u32, sig: Signal) {
    if let Ok(raw) = i32::try_from(pid) {
        if raw > 0 {
            let _ = nix::sys::signal::killpg(Pid::from_raw(raw), sig);
        }
    }
}

/// Sends `sig` to every process in the session `sid` leads: its own process
/// group, and groups of their own made inside the session (a shell's jobs),
/// found in `/proc`.
fn signal_session(sid: u32, sig: Signal) {
    if sid == 0 {
        return;
    }
    signal_group(sid, sig);
    for pid in shared::procfs::pids() {
        let session = Stat::of(&pid.to_string()).and_then(|stat| stat.field::<u32>(6));
        if session == Some(sid) {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), sig);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a process with this argument is alive (not a zombie).
    fn alive(needle: &str) -> bool {
        std::fs::read_dir("/proc")
            .map(|entries| {
                entries.flatten().any(|e| {
                    std::fs::read(e.path().join("cmdline"))
                        .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == needle.as_bytes()))
                })
            })
            .unwrap_or(false)
    }

    async fn gone(needle: &str) -> bool {
        for _ in 0..200 {
            if !alive(needle) {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        false
    }

    #[tokio::test]
    async fn what_a_leader_leaves_behind_ends_when_it_ends_or_is_dropped() {
        let needle = format!("31.{}7", std::process::id());
        let mut command = Command::new("sh");
        command.args([
            "-c",
            &format!("( sleep {needle} & ); set -m; sleep {needle} & exit 0"),
        ]);
        let mut session = Session::spawn(&mut command).expect("spawn");
        assert!(session.child.wait().await.expect("wait").success());
        session.kill();
        assert!(gone(&needle).await, "the background went with the leader");

        let needle = format!("32.{}7", std::process::id());
        let mut command = Command::new("sh");
        command.args(["-c", &format!("( sleep {needle} & ); exec sleep {needle}")]);
        let session = Session::spawn(&mut command).expect("spawn");
        drop(session);
        assert!(gone(&needle).await, "dropping the session ends it whole");
    }
}
