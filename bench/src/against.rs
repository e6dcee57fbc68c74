//! `bench --against OLD_LEAD`: this build's lead beside an older one, on the
//! figures a change to the commit path moves first: the sequential plan
//! handshake (auto approval, one teammate, each handshake waiting for the
//! last), the handshake with 16 teammates at once, and routing with 16
//! messages in flight. Each run starts a fresh lead of each build per store, both kept
//! running, and takes turns between them in short rounds (which goes first
//! alternates), so that both meet the machine in the same state: this
//! machine's speed drifts by more than the difference sought within a few
//! seconds. Each round pairs the two builds' rates; the median of those
//! ratios, with its quartiles, is the figure printed. Beside it, the same
//! for the CPU time each lead spent a handshake in the round (every thread,
//! as the scheduler counts it): on two cores shared with the bench, the
//! rate moves with whatever else runs, and the CPU a handshake costs the
//! lead moves much less.

use std::{collections::HashMap, path::Path, time::Instant};

use crate::{
    mesh::{handshakes_concurrent, Lead},
    shapes::routing,
    stats::{Report, Samples},
    Counts,
};

/// Rounds per run; each build does `handshakes / ROUNDS` in each.
const ROUNDS: usize = 10;

/// Teammates at once, and messages in flight.
const IN_FLIGHT: usize = 16;

/// The figures paired besides the sequential handshake, each measured on
/// new members of its own in every round.
const AT_ONCE: [&str; 2] = ["handshake 16 at once", "routing 16 in flight"];

/// One round of a figure of [`AT_ONCE`] on `lead`: its rate.
async fn at_once(lead: &Lead, which: usize, prefix: &str, per_round: usize) -> anyhow::Result<f64> {
    Ok(match which {
        0 => {
            let each = (per_round / 4).max(4);
            handshakes_concurrent(lead, prefix, IN_FLIGHT, each)
                .await?
                .1
        }
        _ => routing(lead, prefix, IN_FLIGHT, per_round * 10).await?.0,
    })
}

/// Measures both builds `counts.runs` times on each of `stores`.
pub(crate) async fn measure(old: &Path, counts: &Counts, stores: &[String]) -> anyhow::Result<()> {
    let old = std::path::absolute(old)?;
    anyhow::ensure!(
        old.is_file(),
        "--against: no executable at {}",
        old.display()
    );
    let new = crate::procs::beside("lead")?;
    let labels = ["this build", "--against"];
    let per_round = (counts.handshakes / ROUNDS).max(50);
    let mut report = Report::default();
    let mut ratios: Vec<(String, Vec<f64>, Vec<f64>)> = stores
        .iter()
        .map(|s| (s.clone(), Vec::new(), Vec::new()))
        .collect();
    let mut at_once_ratios: Vec<[Vec<f64>; 2]> =
        stores.iter().map(|_| Default::default()).collect();
    for run in 1..=counts.runs {
        eprintln!("bench: run {run} of {}", counts.runs);
        for ((store, store_ratios, cpu_ratios), paired) in
            ratios.iter_mut().zip(&mut at_once_ratios)
        {
            let (new_server, new_lead) =
                crate::start_lead_at(&new, store, &["--approval", "auto"]).await?;
            let (old_server, old_lead) =
                crate::start_lead_at(&old, store, &["--approval", "auto"]).await?;
            let servers = [&new_server, &old_server];
            let mut members = [
                new_lead.member("seq", None).await?,
                old_lead.member("seq", None).await?,
            ];
            for member in &mut members {
                for _ in 0..per_round {
                    member.handshake().await?;
                }
            }
            let mut samples = [
                Samples::with_capacity(per_round * ROUNDS),
                Samples::with_capacity(per_round * ROUNDS),
            ];
            for round in 0..ROUNDS {
                let order = if (run + round) % 2 == 0 {
                    [0, 1]
                } else {
                    [1, 0]
                };
                let mut rates = [0.0; 2];
                let mut cpu = [0.0; 2];
                for i in order {
                    let before = servers[i].thread_cpu_ns();
                    let start = Instant::now();
                    for _ in 0..per_round {
                        samples[i].push(members[i].handshake().await?);
                    }
                    rates[i] = per_round as f64 / start.elapsed().as_secs_f64();
                    cpu[i] = spent(&before, &servers[i].thread_cpu_ns()) / per_round as f64;
                    report.add(
                        &format!("[{store}] {}: lead CPU a handshake", labels[i]),
                        "us",
                        cpu[i] / 1e3,
                    );
                    report.add(
                        &format!("[{store}] {}: handshake sequential", labels[i]),
                        "/s",
                        rates[i],
                    );
                }
                store_ratios.push(rates[0] / rates[1]);
                cpu_ratios.push(cpu[0] / cpu[1]);
                let leads = [&new_lead, &old_lead];
                for (which, what) in AT_ONCE.iter().enumerate() {
                    let mut rates = [0.0; 2];
                    for i in order {
                        let prefix = format!("a{which}r{run}n{round}x");
                        rates[i] = at_once(leads[i], which, &prefix, per_round).await?;
                        report.add(&format!("[{store}] {}: {what}", labels[i]), "/s", rates[i]);
                    }
                    paired[which].push(rates[0] / rates[1]);
                }
            }
            for (i, samples) in samples.iter().enumerate() {
                let [p50, p99, _] = samples.summary();
                report.add(
                    &format!("[{store}] {}: handshake p50", labels[i]),
                    "us",
                    p50,
                );
                report.add(
                    &format!("[{store}] {}: handshake p99", labels[i]),
                    "us",
                    p99,
                );
            }
        }
    }
    println!("\n{}", report.table());
    print_pairs(
        &report,
        &labels,
        ratios,
        at_once_ratios,
        counts.runs * ROUNDS,
    );
    Ok(())
}

/// Prints each store's paired figures: the medians of the rounds' ratios,
/// with their quartiles.
fn print_pairs(
    report: &Report,
    labels: &[&str; 2],
    ratios: Vec<(String, Vec<f64>, Vec<f64>)>,
    at_once_ratios: Vec<[Vec<f64>; 2]>,
    rounds: usize,
) {
    for ((store, store_ratios, cpu_ratios), paired) in ratios.into_iter().zip(at_once_ratios) {
        let figure = |label: &str, what: &str| report.median(&format!("[{store}] {label}: {what}"));
        let what = "handshake sequential";
        if let (Some(new), Some(old)) = (figure(labels[0], what), figure(labels[1], what)) {
            let (median, q1, q3) = quartiles(store_ratios);
            println!(
                "[{store}] sequential handshake: this build {new:.0} /s, --against {old:.0} /s: \
                 {median:+.1}% (median of {} paired rounds; quartiles {q1:+.1}% .. {q3:+.1}%)",
                rounds,
            );
        }
        for (what, pairs) in AT_ONCE.iter().zip(paired) {
            if let (Some(new), Some(old)) = (figure(labels[0], what), figure(labels[1], what)) {
                let (median, q1, q3) = quartiles(pairs);
                println!(
                    "[{store}] {what}: this build {new:.0} /s, --against {old:.0} /s: \
                     {median:+.1}% (median of {} paired rounds; quartiles {q1:+.1}% .. {q3:+.1}%)",
                    rounds,
                );
            }
        }
        let what = "lead CPU a handshake";
        if let (Some(new), Some(old)) = (figure(labels[0], what), figure(labels[1], what)) {
            let (median, q1, q3) = quartiles(cpu_ratios);
            println!(
                "[{store}] lead CPU a handshake: this build {new:.1} us, --against {old:.1} us: \
                 {median:+.1}% (median of {} paired rounds; quartiles {q1:+.1}% .. {q3:+.1}%)",
                rounds,
            );
        }
    }
}

/// The median and quartiles of `ratios`, as changes in percent.
fn quartiles(mut ratios: Vec<f64>) -> (f64, f64, f64) {
    ratios.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let i = ((ratios.len().max(1) - 1) as f64 * q).round() as usize;
        ratios.get(i).map_or(f64::NAN, |r| (r - 1.0) * 100.0)
    };
    (at(0.5), at(0.25), at(0.75))
}

/// The CPU time (ns) the threads in `after` spent since `before` (a thread
/// new since then, all of its time).
fn spent(before: &HashMap<u32, u64>, after: &HashMap<u32, u64>) -> f64 {
    after
        .iter()
        .map(|(tid, ns)| ns.saturating_sub(before.get(tid).copied().unwrap_or(0)))
        .sum::<u64>() as f64
}
