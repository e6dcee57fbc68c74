//! The processes a benchmark measures: started from the binaries beside this
//! one, read for their address, measured for memory, and stopped.

use std::{path::PathBuf, process::Stdio, time::Duration};

use anyhow::{bail, Context};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

/// A server process under measurement.
#[derive(Debug)]
pub(crate) struct Server {
    /// The process.
    pub(crate) child: Child,
    /// `HOST:PORT`.
    pub(crate) addr: String,
    /// Its state directory, removed when it is dropped.
    pub(crate) _dir: tempfile::TempDir,
}

/// An executable beside this one (`lead`, or `bench` itself). Under
/// `cargo run`, a missing one is built first, with the same profile.
pub(crate) fn beside(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("own executable")?;
    let dir = exe.parent().context("executable dir")?;
    let path = dir.join(name);
    if !path.is_file() {
        if let (Ok(cargo), Ok(manifest)) =
            (std::env::var("CARGO"), std::env::var("CARGO_MANIFEST_DIR"))
        {
            eprintln!("bench: building {name} ...");
            let mut build = std::process::Command::new(cargo);
            build
                .args(["build", "-p", name, "--manifest-path"])
                .arg(PathBuf::from(manifest).join("../Cargo.toml"));
            if dir.file_name().is_some_and(|n| n == "release") {
                build.arg("--release");
            }
            build.status().context("cargo build")?;
        }
    }
    if !path.is_file() {
        bail!(
            "no {name} at {}: build it with `cargo build --release -p {name}`",
            path.display()
        );
    }
    Ok(path)
}

impl Server {
    /// Starts `program args` and waits for its `listening on HOST:PORT` line.
    pub(crate) async fn start(program: PathBuf, args: &[String]) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let mut child = Command::new(&program)
            .args(args)
            .env("MESH_STATE_DIR", dir.path())
            .env("RUST_LOG", "error")
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        let stdout = child.stdout.take().context("stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .context("waiting for the server's address")??
            .context("the server printed nothing")?;
        let addr = line
            .strip_prefix("listening on ")
            .context("unexpected first line")?
            .to_owned();
        if args.iter().any(|a| a.starts_with("postgres://")) {
            // A lead on PostgreSQL serves once it holds the lease.
            loop {
                let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
                    .await
                    .context("waiting for the lead to lead")??
                    .context("the lead stopped before it led")?;
                if line.starts_with("leading (") {
                    break;
                }
            }
        }
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self {
            child,
            addr,
            _dir: dir,
        })
    }

    /// Starts `program` (a `lead`) as `lead serve` with these extra flags,
    /// its state in a fresh directory.
    pub(crate) async fn lead(
        program: &std::path::Path,
        extra: &[&str],
        join: &str,
        operator: &str,
    ) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let mut args: Vec<String> = [
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--join-token",
            join,
            "--operator-token",
            operator,
            "--state-dir",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push(dir.path().join("state").to_string_lossy().into_owned());
        // The bench measures the mechanism, not the lead's guard against a
        // leaked join token: team size, join rate and connections from one
        // address (every teammate here is on loopback) are unbounded here.
        for flag in [
            "--max-members",
            "--join-rate",
            "--join-burst",
            "--max-connections-per-address",
        ] {
            args.push(flag.into());
            args.push("1000000".into());
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut server = Self::start(program.to_path_buf(), &args).await?;
        server._dir = dir;
        Ok(server)
    }

    /// The CPU time each of the process's threads has had so far, in ns
    /// (`/proc/PID/task/TID/schedstat`: the scheduler's own count, to the
    /// nanosecond, where `/proc/PID/stat` counts in ticks of 10 ms).
    pub(crate) fn thread_cpu_ns(&self) -> std::collections::HashMap<u32, u64> {
        let Some(pid) = self.child.id() else {
            return Default::default();
        };
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return Default::default();
        };
        tasks
            .flatten()
            .filter_map(|task| {
                let tid = task.file_name().to_str()?.parse().ok()?;
                let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
                Some((tid, stat.split_whitespace().next()?.parse().ok()?))
            })
            .collect()
    }

    /// The peak resident memory so far, in MiB (`VmHWM`).
    pub(crate) fn peak_rss_mib(&self) -> f64 {
        let Some(pid) = self.child.id() else {
            return f64::NAN;
        };
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    }
}
