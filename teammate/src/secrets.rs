//! The teammate's secrets, out of its commands' sight.
//!
//! A command without a sandbox runs as the teammate's user, and Linux lets a
//! process of that user read the teammate's `/proc/PID/environ` and anyone
//! read its `/proc/PID/cmdline`. Both show the blocks the process was started
//! with, as the kernel keeps them in its memory: removing a variable from the
//! environment changes neither. So once the command line is parsed and the
//! secrets read, before any thread starts, [`hide`]:
//!
//! - overwrites each secret variable's value in the initial environment
//!   block, and each secret flag's value in the argument block, with `*`
//!   (through `/proc/self/mem`), so `environ` and `cmdline` show stars to
//!   every reader, root included;
//! - removes the variables from the environment, so nothing the teammate
//!   reads or starts later sees them;
//! - makes the process undumpable (`PR_SET_DUMPABLE` 0): no core dump, and
//!   its `/proc/PID/environ`, `mem` and ptrace are closed to unprivileged
//!   processes of the same user, so the token it holds in memory is out of
//!   their reach. Root (`CAP_SYS_PTRACE`) still reads its memory.
//!
//! What no process can hide: a value given on the command line is readable
//! by anyone in `/proc/PID/cmdline` from the `exec` until [`hide`] runs (a
//! few milliseconds), and it stays in the shell's history and in whatever
//! started the process; hence docs/security.md's advice to pass tokens in the
//! environment.

use std::{
    fs::{File, OpenOptions},
    ops::Range,
    os::unix::fs::FileExt,
};

use shared::procfs::Stat;

/// The byte a hidden value's bytes become.
const MASK: u8 = b'*';

/// Where the kernel keeps this process's initial arguments and environment.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Blocks {
    /// `arg_start..arg_end`: what `/proc/PID/cmdline` shows.
    args: Range<u64>,
    /// `env_start..env_end`: what `/proc/PID/environ` shows.
    env: Range<u64>,
}

impl Blocks {
    /// The blocks from `/proc/self/stat` (fields 48 to 51).
    fn of_self() -> std::io::Result<Self> {
        Stat::of("self")
            .and_then(|stat| Self::parse(&stat))
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "/proc/self/stat has no argument and environment addresses",
                )
            })
    }

    fn parse(stat: &Stat) -> Option<Self> {
        let blocks = Self {
            args: stat.field(48)?..stat.field(49)?,
            env: stat.field(50)?..stat.field(51)?,
        };
        (blocks.args.start < blocks.args.end && blocks.env.start <= blocks.env.end)
            .then_some(blocks)
    }
}

/// Hides the values of `variables` and of the command line's `flags` (see
/// the module's note), then makes the process undumpable. Call it before
/// any thread starts: it changes the environment.
pub fn hide(variables: &[&str], flags: &[&str]) -> std::io::Result<()> {
    match Blocks::of_self() {
        Ok(blocks) => {
            let memory = OpenOptions::new()
                .read(true)
                .write(true)
                .open("/proc/self/mem")?;
            mask(&memory, &blocks.args, |block| flag_values(block, flags))?;
            mask(&memory, &blocks.env, |block| {
                variable_values(block, variables)
            })?;
        }
        // No /proc: no command reads the blocks through it either.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    for variable in variables {
        std::env::remove_var(variable);
    }
    nix::sys::prctl::set_dumpable(false).map_err(std::io::Error::from)
}

/// Overwrites the ranges `find` picks in the block at `at` with [`MASK`].
fn mask(
    memory: &File,
    at: &Range<u64>,
    find: impl Fn(&[u8]) -> Vec<Range<usize>>,
) -> std::io::Result<()> {
    let len = usize::try_from(at.end - at.start).map_err(std::io::Error::other)?;
    let mut block = vec![0u8; len];
    memory.read_exact_at(&mut block, at.start)?;
    for range in find(&block) {
        let stars = vec![MASK; range.len()];
        memory.write_all_at(&stars, at.start + range.start as u64)?;
    }
    Ok(())
}

/// The NUL-separated entries of `block`, with where each starts.
fn entries(block: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    let mut start = 0;
    block.split(|b| *b == 0).map(move |entry| {
        let at = start;
        start += entry.len() + 1;
        (at, entry)
    })
}

/// Where the values of `flags` are in an argument block: the argument after
/// `--flag`, and what follows `--flag=`.
fn flag_values(block: &[u8], flags: &[&str]) -> Vec<Range<usize>> {
    let mut found = Vec::new();
    let mut value_next = false;
    for (at, arg) in entries(block).skip(1) {
        if std::mem::take(&mut value_next) {
            found.push(at..at + arg.len());
            continue;
        }
        for flag in flags {
            let flag = flag.as_bytes();
            if arg == flag {
                value_next = true;
            } else if arg.len() > flag.len() && arg.starts_with(flag) && arg[flag.len()] == b'=' {
                found.push(at + flag.len() + 1..at + arg.len());
            }
        }
    }
    found
}

/// Where the values of `variables` are in an environment block.
fn variable_values(block: &[u8], variables: &[&str]) -> Vec<Range<usize>> {
    entries(block)
        .filter_map(|(at, entry)| {
            let eq = entry.iter().position(|b| *b == b'=')?;
            variables
                .iter()
                .any(|v| v.as_bytes() == &entry[..eq])
                .then_some(at + eq + 1..at + entry.len())
        })
        .filter(|range| !range.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked(block: &[u8], ranges: &[Range<usize>]) -> String {
        let mut block = block.to_vec();
        for range in ranges {
            block[range.clone()].fill(MASK);
        }
        String::from_utf8_lossy(&block).replace('\0', " ")
    }

    #[test]
    fn a_flag_value_is_found_after_the_flag_or_its_equals_sign() {
        let block = b"teammate\0--name\0--join-token\0--join-token\0x\0--join-token=s3cr3t\0--join-tokens\0keep\0";
        let ranges = flag_values(block, &["--join-token"]);
        assert_eq!(
            masked(block, &ranges),
            "teammate --name --join-token ************ x --join-token=****** --join-tokens keep "
        );
        // The program's own name is never a flag.
        assert!(flag_values(b"--join-token\0v\0", &["--x"]).is_empty());
    }

    #[test]
    fn a_variable_value_is_found_by_its_exact_name() {
        let block = b"PATH=/bin\0MESH_JOIN_TOKEN=abc\0MESH_JOIN_TOKENS=keep\0KEY=\0KEY=k=v\0";
        let ranges = variable_values(block, &["MESH_JOIN_TOKEN", "KEY"]);
        assert_eq!(
            masked(block, &ranges),
            "PATH=/bin MESH_JOIN_TOKEN=*** MESH_JOIN_TOKENS=keep KEY= KEY=*** "
        );
    }

    #[test]
    fn the_blocks_come_from_fields_48_to_51() {
        let mut stat = "12 (a) b) c) S".to_owned();
        for n in 4..=52 {
            stat.push_str(&format!(" {n}"));
        }
        let parsed = |line: &str| Stat::parse(line).and_then(|s| Blocks::parse(&s));
        assert_eq!(
            parsed(&stat),
            Some(Blocks {
                args: 48..49,
                env: 50..51
            })
        );
        assert_eq!(parsed("12 (a) S 1 2"), None);
        assert!(Blocks::of_self().is_ok());
    }
}
