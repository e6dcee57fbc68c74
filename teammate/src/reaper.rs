//! What a command leaves behind dies with it, wherever it went.
//!
//! A command's process group is killed when the command ends, but a process
//! that left the group (`setsid`, a double fork) escapes that kill. So the
//! teammate is a child subreaper ([`adopt_orphans`]): an orphan below it is
//! handed to it rather than to init, and stays below it whatever session it
//! moved to. When a command ends or is abandoned, [`sweep`] kills every
//! process below the teammate but the commands still running, and reaps
//! those handed to it. A command's own process is known to the sweep from
//! its [`spawn`] (under the lock the sweep holds) until it is reaped; the
//! teammate starts no other process, and runs one command at a time.

use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard},
    time::{Duration, Instant},
};

use nix::{
    sys::{
        signal::{kill, Signal},
        wait::{waitpid, WaitPidFlag},
    },
    unistd::Pid,
};
use shared::procfs::{self, Stat};

/// How long a sweep keeps killing and reaping before it gives up (a process
/// stuck in the kernel does not die at once) and says so.
const SWEEP_LIMIT: Duration = Duration::from_secs(5);

/// The pause between passes of a sweep, while what it killed dies.
const PASS_PAUSE: Duration = Duration::from_millis(2);

/// The commands' own processes that are not reaped yet (their `Child` reaps
/// them): what the sweep spares.
static COMMANDS: Mutex<Commands> = Mutex::new(Commands {
    running: Vec::new(),
    abandoned: Vec::new(),
});

fn commands() -> MutexGuard<'static, Commands> {
    COMMANDS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The commands' own processes, by what the sweep does with them.
#[derive(Debug)]
struct Commands {
    /// Running: spared, and what is below them too.
    running: Vec<Process>,
    /// Abandoned (the call was dropped): killed, and what is below them
    /// too, but never reaped here.
    abandoned: Vec<Process>,
}

/// One process, told apart from a later one with the same PID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Process {
    /// Its PID.
    pid: i32,
    /// When it started (clock ticks since boot, `/proc/PID/stat` field 22).
    start: u64,
}

/// A process the sweep kills.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Stray {
    /// Its PID.
    pid: i32,
    /// Its parent's: the sweeper reaps its own children.
    parent: i32,
    /// Whether it is an abandoned command's own process, which its `Child`
    /// reaps.
    command: bool,
}

/// Makes this process the subreaper of everything below it.
pub fn adopt_orphans() -> std::io::Result<()> {
    nix::sys::prctl::set_child_subreaper(true).map_err(std::io::Error::from)
}

/// A command's own process, known to the sweep until it is reaped. Dropped
/// without [`Known::reaped`] (the call was abandoned), it is killed with
/// everything below it at once, and left to its `Child` to reap.
#[derive(Debug)]
pub struct Known {
    /// The process; `None` if `/proc` could not tell its start.
    process: Option<Process>,
    /// Whether [`Known::reaped`] was called.
    reaped: bool,
}

/// Spawns `command`, known to the sweep from the start.
pub fn spawn(
    command: &mut tokio::process::Command,
) -> std::io::Result<(tokio::process::Child, Known)> {
    let mut commands = commands();
    let child = command.spawn()?;
    let process = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(|pid| stat(pid).map(|(start, _)| Process { pid, start }));
    commands.running.extend(process);
    Ok((
        child,
        Known {
            process,
            reaped: false,
        },
    ))
}

impl Known {
    /// The command's process was waited for: it is forgotten, and whatever
    /// it left behind is swept.
    pub async fn reaped(mut self) {
        self.reaped = true;
        if let Some(process) = self.process {
            commands().running.retain(|p| *p != process);
        }
        if tokio::task::spawn_blocking(sweep).await.is_err() {
            tracing::warn!("the sweep after a command failed");
        }
    }
}

impl Drop for Known {
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        if let Some(process) = self.process {
            let mut commands = commands();
            commands.running.retain(|p| *p != process);
            commands.abandoned.push(process);
        }
        sweep();
    }
}

/// Kills every process below this one but the running commands (and what is
/// below them), until none is left or [`SWEEP_LIMIT`] passed; reaps the
/// ones no `Child` owns that are this process's children.
pub fn sweep() {
    let Ok(me) = i32::try_from(std::process::id()) else {
        return;
    };
    let deadline = Instant::now() + SWEEP_LIMIT;
    loop {
        let strays = {
            let mut commands = commands();
            let table = table();
            let alive = |p: &Process| {
                table
                    .get(&p.pid)
                    .is_some_and(|(start, _)| *start == p.start)
            };
            commands.running.retain(alive);
            commands.abandoned.retain(alive);
            let strays = below(me, &table, &commands);
            for stray in &strays {
                // ESRCH: it is gone already.
                let _ = kill(Pid::from_raw(stray.pid), Signal::SIGKILL);
            }
            strays
        };
        // An abandoned command alone is dying, and its `Child` reaps it.
        let left = strays.iter().filter(|s| !s.command).count();
        if left == 0 {
            return;
        }
        for stray in strays.iter().filter(|s| s.parent == me && !s.command) {
            let _ = waitpid(Pid::from_raw(stray.pid), Some(WaitPidFlag::WNOHANG));
        }
        if Instant::now() >= deadline {
            tracing::warn!(left, "processes a command left behind did not die in time");
            return;
        }
        std::thread::sleep(PASS_PAUSE);
    }
}

/// Every process: PID to (start, parent).
fn table() -> HashMap<i32, (u64, i32)> {
    procfs::pids()
        .into_iter()
        .filter_map(|pid| Some((pid, stat(pid)?)))
        .collect()
}

/// `pid`'s start time and parent, from `/proc/PID/stat`.
fn stat(pid: i32) -> Option<(u64, i32)> {
    start_and_parent(&Stat::of(&pid.to_string())?)
}

fn start_and_parent(stat: &Stat) -> Option<(u64, i32)> {
    Some((stat.field(22)?, stat.field(4)?))
}

/// The processes below `root` in `table` but the running `commands` and
/// what is below them.
fn below(root: i32, table: &HashMap<i32, (u64, i32)>, commands: &Commands) -> Vec<Stray> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for (pid, (_, parent)) in table {
        children.entry(*parent).or_default().push(*pid);
    }
    let is = |list: &[Process], pid: i32| {
        table
            .get(&pid)
            .is_some_and(|(start, _)| list.contains(&Process { pid, start: *start }))
    };
    let mut found = Vec::new();
    let mut parents = vec![root];
    while let Some(parent) = parents.pop() {
        for &pid in children.get(&parent).into_iter().flatten() {
            if pid != root && !is(&commands.running, pid) {
                found.push(Stray {
                    pid,
                    parent,
                    command: is(&commands.abandoned, pid),
                });
                parents.push(pid);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_the_start_and_the_parent() {
        let mut stat = "42 (a (b) c) S 7".to_owned();
        for n in 5..=52 {
            stat.push_str(&format!(" {n}"));
        }
        let parsed = |line: &str| Stat::parse(line).and_then(|s| start_and_parent(&s));
        assert_eq!(parsed(&stat), Some((22, 7)));
        assert_eq!(parsed("42 (a) S 7 5"), None);
    }

    #[test]
    fn below_the_root_all_but_the_running_and_theirs() {
        // 1 is the root; 2 a running command with its child 3; 4 a stray
        // with its child 5; 6 is elsewhere; 7 an abandoned command with its
        // child 8.
        let table: HashMap<i32, (u64, i32)> = [
            (1, (10, 0)),
            (2, (20, 1)),
            (3, (30, 2)),
            (4, (40, 1)),
            (5, (50, 4)),
            (6, (60, 0)),
            (7, (70, 1)),
            (8, (80, 7)),
        ]
        .into();
        let commands = Commands {
            running: vec![Process { pid: 2, start: 20 }],
            abandoned: vec![Process { pid: 7, start: 70 }],
        };
        let stray = |pid, parent, command| Stray {
            pid,
            parent,
            command,
        };
        let mut strays = below(1, &table, &commands);
        strays.sort_unstable();
        assert_eq!(
            strays,
            [
                stray(4, 1, false),
                stray(5, 4, false),
                stray(7, 1, true),
                stray(8, 7, false)
            ]
        );
        // A process with 2's PID but another start is not that command.
        let other = Commands {
            running: vec![Process { pid: 2, start: 21 }],
            abandoned: Vec::new(),
        };
        assert_eq!(below(1, &table, &other).len(), 6);
    }
}
