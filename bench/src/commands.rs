//! What the sandbox costs a command: `run_command`'s `true`, unconfined
//! (`--sandbox none`) and in each sandbox that works here, taking turns so
//! that both see the same machine. The whole call is timed: the scope
//! worked out from the grant, the ruleset or bubblewrap's arguments, the
//! process, its exit, and the check of what it wrote.

use std::time::Instant;

use mesh_core::grant::PathSet;
use teammate::command::{self, CommandLimits, Sandbox};

use crate::stats::{Report, Samples};

/// Times `calls` runs of `true` in each sandbox; adds `[commands] true,
/// KIND p50` and `p99` to the report and prints the comparison.
pub(crate) async fn measure(calls: usize, report: &mut Report) -> anyhow::Result<()> {
    let workspace = tempfile::tempdir()?;
    std::fs::write(workspace.path().join("README.md"), "# bench\n")?;
    let grant = PathSet::new("grant.write_paths", &["out.txt".into(), "src/**".into()])?;
    let mut sandboxes = vec![("none", Sandbox::None)];
    for kind in ["landlock", "bwrap"] {
        match Sandbox::parse(kind) {
            Ok(sandbox) => sandboxes.push((kind, sandbox)),
            Err(why) => eprintln!("bench: commands: no {kind} here: {why}"),
        }
    }
    let mut samples: Vec<Samples> = sandboxes
        .iter()
        .map(|_| Samples::with_capacity(calls))
        .collect();
    for _ in 0..calls {
        for ((_, sandbox), times) in sandboxes.iter().zip(&mut samples) {
            let limits = CommandLimits {
                sandbox: sandbox.clone(),
                ..CommandLimits::default()
            };
            let start = Instant::now();
            let done = command::run(workspace.path(), "true", &limits, &grant).await?;
            times.push(start.elapsed());
            anyhow::ensure!(
                done.status.is_some_and(|s| s.success()),
                "true failed: {done:?}"
            );
        }
    }
    let none = samples[0].quantile_us(0.5);
    let mut line = format!("run_command `true` ({calls} calls each), p50: none {none:.0} us");
    for ((kind, _), times) in sandboxes.iter().zip(&samples) {
        let [p50, p99, _] = times.summary();
        report.add(&format!("[commands] true, {kind} p50"), "us", p50);
        report.add(&format!("[commands] true, {kind} p99"), "us", p99);
        if *kind != "none" {
            line.push_str(&format!(", {kind} {p50:.0} us (+{:.0} us)", p50 - none));
        }
    }
    println!("{line}");
    Ok(())
}
