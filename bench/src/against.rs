//! `bench --against OLD_LEAD`: this build's lead beside an older one, on the
//! figure a change to the commit path moves first: the sequential plan
//! handshake (auto approval, one teammate, each handshake waiting for the
//! last). Each run starts a fresh lead of each build per store, the two
//! alternating (which goes first alternates too), so that both meet the
//! machine in the same state; the medians and their ratio are printed.

use std::path::Path;

use crate::{mesh, stats::Report, Counts};

/// Measures both builds `counts.runs` times on each of `stores`.
pub(crate) async fn measure(old: &Path, counts: &Counts, stores: &[String]) -> anyhow::Result<()> {
    let old = std::path::absolute(old)?;
    anyhow::ensure!(
        old.is_file(),
        "--against: no executable at {}",
        old.display()
    );
    let new = crate::procs::beside("lead")?;
    let mut report = Report::default();
    for run in 1..=counts.runs {
        eprintln!("bench: run {run} of {}", counts.runs);
        for store in stores {
            let builds = [("this build", &new), ("--against", &old)];
            let order: Vec<_> = if run % 2 == 1 {
                builds.iter().collect()
            } else {
                builds.iter().rev().collect()
            };
            for (label, program) in order {
                let (_server, lead) =
                    crate::start_lead_at(program, store, &["--approval", "auto"]).await?;
                let (samples, rate) =
                    mesh::handshakes_sequential(&lead, "seq", counts.handshakes).await?;
                let [p50, p99, _] = samples.summary();
                report.add(&format!("[{store}] {label}: handshake p50"), "us", p50);
                report.add(&format!("[{store}] {label}: handshake p99"), "us", p99);
                report.add(
                    &format!("[{store}] {label}: handshake sequential"),
                    "/s",
                    rate,
                );
            }
        }
    }
    println!("\n{}", report.table());
    for store in stores {
        let figure =
            |label: &str| report.median(&format!("[{store}] {label}: handshake sequential"));
        if let (Some(new), Some(old)) = (figure("this build"), figure("--against")) {
            println!(
                "[{store}] sequential handshake: this build {new:.0} /s, --against {old:.0} /s: \
                 {:+.1}%",
                (new / old - 1.0) * 100.0
            );
        }
    }
    Ok(())
}
