//! `bench`: measures the mesh against the gRPC floor on loopback, with the
//! lead and the floor's echo server as separate processes and this program
//! as the load generator. Prints a table (and `--json FILE`).

use std::{path::PathBuf, time::Duration};

use clap::Parser;

mod against;
mod commands;
mod floor;
mod jwt;
mod mesh;
mod model;
mod postgres;
mod procs;
mod prompt;
mod shapes;
mod stats;
mod tls;

use procs::Server;
use stats::Report;

/// The mesh benchmark.
#[derive(Debug, Parser)]
#[command(about)]
struct Args {
    /// Small counts, one run: checks the benchmark works (CI); asserts nothing.
    #[arg(long)]
    quick: bool,
    /// Repeat every measurement this many times (median and spread).
    #[arg(long)]
    runs: Option<usize>,
    /// Also write the figures as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Team sizes for the scale scenario.
    #[arg(long, value_delimiter = ',')]
    scale: Option<Vec<usize>>,
    /// Team sizes for the scenario where every member terminates at once.
    #[arg(long, value_delimiter = ',')]
    terminations: Option<Vec<usize>>,
    /// Only the terminations scenario (with --terminations, --stores).
    #[arg(long)]
    terminations_only: bool,
    /// Only the floor and the team shapes (with --stores).
    #[arg(long)]
    shapes_only: bool,
    /// Stores to measure with: sqlite (--sync full), sqlite-normal (--sync
    /// normal), memory, postgres (a PostgreSQL server of Debian's package
    /// the bench starts, flushing each commit, --sync full).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "sqlite,sqlite-normal,memory,postgres",
        value_parser = ["sqlite", "sqlite-normal", "memory", "postgres"]
    )]
    stores: Vec<String>,
    /// Only the model teammate's prompt and tool schemas, in tokens.
    #[arg(long)]
    prompt_only: bool,
    /// Only the model section: a real small model on small tasks, the
    /// constraint on and off (needs the real-model kit; skipped without).
    #[arg(long)]
    model_only: bool,
    /// Only the model suite: 26 small tasks in six workspaces on the real
    /// small model (needs the real-model kit); with --against OLD_LEAD, on
    /// that build too (its `teammate` beside it), task by task.
    #[arg(long)]
    model_suite: bool,
    /// With --model-suite: only the tasks whose names start with one of
    /// these (e.g. `calc/,greeter/hello`).
    #[arg(long, value_delimiter = ',')]
    suite_tasks: Vec<String>,
    /// With --model-suite: keep each teammate's log here, with every
    /// request to the model and its reply whole.
    #[arg(long)]
    suite_logs: Option<PathBuf>,
    /// With --model-suite: a llama.cpp server already running at this URL
    /// (e.g. a recording proxy in front of the kit's) instead of the kit's.
    #[arg(long)]
    model_base_url: Option<String>,
    /// The real-model kit's folder [default: ../shared/tools/real-model
    /// beside the checkout]. The model section runs in full mode (not
    /// --quick) where the kit is set up.
    #[arg(long)]
    model_kit: Option<PathBuf>,
    /// Only the sequential plan handshake, of this build's lead and of the
    /// `lead` executable at this path (an older build): per run and store a
    /// fresh lead of each, both running, taking turns in 10 short rounds;
    /// the change is the median of the paired rounds' ratios.
    #[arg(long, value_name = "OLD_LEAD")]
    against: Option<PathBuf>,
    /// Only what the sandbox costs a command: `true` through run_command,
    /// unconfined and in each sandbox that works here.
    #[arg(long)]
    commands_only: bool,
    /// Only the manual handshake with the operator on a static token and on
    /// JWTs from an OpenID issuer (what verifying a person's token costs).
    #[arg(long)]
    people_only: bool,
    /// Run the floor's echo server (used by the benchmark itself).
    #[arg(long, hide = true)]
    floor_server: bool,
}

/// How much work each scenario does.
#[derive(Debug)]
pub(crate) struct Counts {
    runs: usize,
    floor: usize,
    handshakes: usize,
    concurrent: (usize, usize),
    shutdowns: usize,
    routing: (usize, usize, usize),
    scale: Vec<usize>,
    scale_handshakes: usize,
    terminations: Vec<usize>,
    /// Messages routed, and handshakes, per team shape.
    shapes: (usize, usize),
    /// Flushed commits timed.
    flushes: usize,
}

impl Counts {
    fn new(args: &Args) -> Self {
        let mut counts = if args.quick {
            Counts {
                runs: 1,
                floor: 300,
                handshakes: 200,
                concurrent: (8, 10),
                shutdowns: 10,
                routing: (4, 500, 16),
                scale: vec![100],
                scale_handshakes: 50,
                terminations: vec![200],
                shapes: (256, 64),
                flushes: 50,
            }
        } else {
            Counts {
                runs: 3,
                floor: 5_000,
                handshakes: 2_000,
                concurrent: (64, 50),
                shutdowns: 200,
                routing: (16, 10_000, 64),
                scale: vec![1_000, 5_000, 10_000],
                scale_handshakes: 500,
                terminations: vec![2_000, 10_000],
                shapes: (8_000, 2_048),
                flushes: 500,
            }
        };
        if let Some(runs) = args.runs {
            counts.runs = runs.max(1);
        }
        if let Some(scale) = &args.scale {
            counts.scale = scale.clone();
        }
        if let Some(terminations) = &args.terminations {
            counts.terminations = terminations.clone();
        }
        counts
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.floor_server {
        return floor::serve().await;
    }
    prompt::print()?;
    if args.prompt_only {
        return Ok(());
    }
    if args.model_suite {
        return model::suite(
            args.model_kit.as_deref(),
            args.against.as_deref(),
            &args.suite_tasks,
            args.suite_logs.as_deref(),
            args.model_base_url.as_deref(),
        )
        .await;
    }
    if args.model_only {
        return model::measure(args.model_kit.as_deref()).await;
    }
    let command_calls = if args.quick { 20 } else { 300 };
    if args.commands_only {
        let mut report = Report::default();
        return commands::measure(command_calls, &mut report).await;
    }
    let _stop_postgres = postgres::Stopper;
    let counts = Counts::new(&args);
    eprintln!("bench: {counts:?}");
    if args.people_only {
        let mut report = Report::default();
        for run in 1..=counts.runs {
            eprintln!("bench: run {run} of {}", counts.runs);
            jwt::measure(&counts, &mut report).await?;
        }
        println!("\n{}", report.table());
        jwt::print(&report);
        return Ok(());
    }
    if let Some(old) = &args.against {
        return against::measure(old, &counts, &args.stores).await;
    }
    let mut report = Report::default();
    for run in 1..=counts.runs {
        eprintln!("bench: run {run} of {}", counts.runs);
        if args.terminations_only {
            for store in &args.stores {
                measure_terminations(&counts, store, &mut report).await?;
            }
            continue;
        }
        let floor = Server::start(procs::beside("bench")?, &["--floor-server".into()]).await?;
        measure_floor(&floor.addr, &counts, &mut report).await?;
        if args.shapes_only {
            for store in &args.stores {
                let (_server, lead) = start_lead(store, &["--approval", "auto"]).await?;
                let (routed, handshakes) = counts.shapes;
                shapes::measure(&lead, store, routed, handshakes, &mut report).await?;
            }
            continue;
        }
        for store in &args.stores {
            measure_mesh(&floor.addr, &counts, store, &mut report).await?;
            measure_terminations(&counts, store, &mut report).await?;
        }
    }
    if !args.terminations_only && !args.shapes_only {
        commands::measure(command_calls, &mut report).await?;
    }
    println!("\n{}", report.table());
    print_ratios(&report, &args.stores);
    postgres::print(&report);
    shapes::print(&report, &args.stores);
    if let (Some(tls), Some(plain), Some(tls_rate), Some(plain_rate)) = (
        report.median("[sqlite, TLS] handshake auto p50"),
        report.median("[sqlite] handshake auto p50"),
        report.median("[sqlite, TLS] routing 16 in flight"),
        report.median("[sqlite] routing 16 in flight"),
    ) {
        println!(
            "\nTLS (sqlite): handshake p50 {tls:.0} us against {plain:.0} us in plain text; \
             routing 16 in flight {tls_rate:.0} against {plain_rate:.0} msg/s"
        );
    }
    jwt::print(&report);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report.json())?)?;
        eprintln!("bench: wrote {}", path.display());
    }
    if !args.quick && !args.terminations_only && !args.shapes_only {
        model::measure(args.model_kit.as_deref()).await?;
    }
    Ok(())
}

async fn measure_floor(addr: &str, counts: &Counts, report: &mut Report) -> anyhow::Result<()> {
    let flushes = shapes::flush_cost(counts.flushes)?;
    report.add("flushed commit p50", "us", flushes.quantile_us(0.5));
    report.add("flushed commit p99", "us", flushes.quantile_us(0.99));
    let [p50, p99, max] = floor::unary(addr, counts.floor).await?.summary();
    report.add("floor unary p50", "us", p50);
    report.add("floor unary p99", "us", p99);
    report.add("floor unary max", "us", max);
    let [p50, p99, _] = floor::ping_pong(addr, counts.floor).await?.summary();
    report.add("floor ping-pong p50", "us", p50);
    report.add("floor ping-pong p99", "us", p99);
    Ok(())
}

/// A fresh `lead serve` on `store` with `extra` flags, and how to reach it.
pub(crate) async fn start_lead(
    store: &str,
    extra: &[&str],
) -> anyhow::Result<(Server, mesh::Lead)> {
    start_lead_at(&procs::beside("lead")?, store, extra).await
}

/// [`start_lead`] with the `lead` executable at `program`.
pub(crate) async fn start_lead_at(
    program: &std::path::Path,
    store: &str,
    extra: &[&str],
) -> anyhow::Result<(Server, mesh::Lead)> {
    let (join, operator) = (shared::auth::new_token(), shared::auth::new_token());
    let mut flags: Vec<String> = extra.iter().map(|f| f.to_string()).collect();
    let database;
    flags.extend(
        match store {
            "sqlite" => ["--store", "sqlite", "--sync", "full"],
            "sqlite-normal" => ["--store", "sqlite", "--sync", "normal"],
            "postgres" => {
                database = postgres::database()?;
                ["--store", &database, "--sync", "full"]
            }
            _ => ["--store", "memory", "--sync", "full"],
        }
        .map(str::to_owned),
    );
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let server = Server::lead(program, &flags, &join, &operator).await?;
    let lead = mesh::Lead {
        addr: server.addr.clone(),
        join,
        operator,
        tls: None,
    };
    Ok((server, lead))
}

async fn measure_mesh(
    floor_addr: &str,
    counts: &Counts,
    store: &str,
    report: &mut Report,
) -> anyhow::Result<()> {
    let (_server, lead) = start_lead(store, &["--approval", "auto"]).await?;
    // The floor again, right before: on a shared machine the ratio of two
    // figures taken a second apart is steadier than either figure.
    let [f50, f99, _] = floor::unary(floor_addr, counts.floor).await?.summary();
    let (samples, rate) = mesh::handshakes_sequential(&lead, "seq", counts.handshakes).await?;
    add_latency(report, &format!("[{store}] handshake auto"), &samples);
    let [h50, h99, _] = samples.summary();
    report.add(
        &format!("[{store}] handshake auto p50 / floor p50"),
        "x",
        h50 / f50,
    );
    report.add(
        &format!("[{store}] handshake auto p99 / floor p99"),
        "x",
        h99 / f99,
    );
    report.add(&format!("[{store}] handshake auto sequential"), "/s", rate);
    let (teammates, each) = counts.concurrent;
    let (samples, rate) = mesh::handshakes_concurrent(&lead, "con", teammates, each).await?;
    add_latency(
        report,
        &format!("[{store}] handshake auto x{teammates}"),
        &samples,
    );
    report.add(
        &format!("[{store}] handshake auto x{teammates}"),
        "/s",
        rate,
    );
    let samples = mesh::shutdowns(&lead, "down", counts.shutdowns).await?;
    let [p50, p99, _] = samples.summary();
    report.add(&format!("[{store}] shutdown p50"), "us", p50);
    report.add(&format!("[{store}] shutdown p99"), "us", p99);
    let (pairs, each, window) = counts.routing;
    let (rate, delivery) = mesh::routing(&lead, "route", pairs, each, window).await?;
    report.add(&format!("[{store}] routing {pairs} senders"), "msg/s", rate);
    report.add(
        &format!("[{store}] routing delivery p99"),
        "us",
        delivery.quantile_us(0.99),
    );
    drop(_server);

    let (_server, lead) = start_lead(store, &["--approval", "auto"]).await?;
    let (routed, handshakes) = counts.shapes;
    shapes::measure(&lead, store, routed, handshakes, report).await?;
    drop(_server);
    if store == "sqlite" {
        measure_tls(counts, report).await?;
        jwt::measure(counts, report).await?;
    }

    let (_server, lead) = start_lead(store, &["--approval", "manual"]).await?;
    let operator = mesh::run_operator(lead.clone()).await?;
    let (samples, rate) = mesh::handshakes_sequential(&lead, "man", counts.handshakes).await?;
    add_latency(report, &format!("[{store}] handshake manual"), &samples);
    report.add(
        &format!("[{store}] handshake manual sequential"),
        "/s",
        rate,
    );
    let (teammates, each) = counts.concurrent;
    let (samples, rate) = mesh::handshakes_concurrent(&lead, "mcon", teammates, each).await?;
    add_latency(
        report,
        &format!("[{store}] handshake manual x{teammates}"),
        &samples,
    );
    report.add(
        &format!("[{store}] handshake manual x{teammates}"),
        "/s",
        rate,
    );
    operator.abort();
    drop(_server);

    for &n in &counts.scale {
        let (server, lead) = start_lead(store, &["--approval", "auto"]).await?;
        let scale = mesh::scale(&lead, n, counts.scale_handshakes).await?;
        report.add(
            &format!("[{store}] scale {n}: join all"),
            "s",
            scale.join_secs,
        );
        report.add(
            &format!("[{store}] scale {n}: lead peak RSS"),
            "MiB",
            server.peak_rss_mib(),
        );
        report.add(
            &format!("[{store}] scale {n}: handshake p99"),
            "us",
            scale.handshakes.quantile_us(0.99),
        );
        report.add(
            &format!("[{store}] scale {n}: broadcast to all"),
            "ms",
            scale.broadcast_ms,
        );
        drop(server);
        // Let the kernel reclaim the closed sockets before the next size.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// What TLS costs: a sequential handshake and routing with 16 in flight
/// against a sqlite lead on TLS (a self-signed certificate), to set beside
/// the same figures in plain text.
async fn measure_tls(counts: &Counts, report: &mut Report) -> anyhow::Result<()> {
    let cert = tls::SelfSigned::new()?;
    let mut flags = vec!["--approval".to_owned(), "auto".to_owned()];
    flags.extend(cert.server_flags());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let (_server, mut lead) = start_lead("sqlite", &flags).await?;
    lead.tls = Some(cert.client());
    let (samples, _) = mesh::handshakes_sequential(&lead, "tls", counts.handshakes / 2).await?;
    report.add(
        "[sqlite, TLS] handshake auto p50",
        "us",
        samples.quantile_us(0.5),
    );
    let (rate, _) = shapes::routing(&lead, "tlsr", 16, counts.shapes.0).await?;
    report.add("[sqlite, TLS] routing 16 in flight", "msg/s", rate);
    Ok(())
}

/// Every member of a team of `n` terminating at once (their grace periods
/// end together): how long until the lead has settled, how slow `ListTeam`
/// got meanwhile, how many notices a member heard, the lead's peak memory.
async fn measure_terminations(
    counts: &Counts,
    store: &str,
    report: &mut Report,
) -> anyhow::Result<()> {
    for &n in &counts.terminations {
        let (server, lead) = start_lead(store, &["--grace", "3"]).await?;
        let ended = mesh::terminations(&lead, n, Duration::from_secs(3)).await?;
        let name = format!("[{store}] {n} terminating at once");
        report.add(&format!("{name}: settled"), "s", ended.settled_secs);
        report.add(
            &format!("{name}: slowest ListTeam"),
            "ms",
            ended.list_team_max_ms,
        );
        report.add(&format!("{name}: notices heard"), "", ended.notices as f64);
        report.add(
            &format!("{name}: lead peak RSS"),
            "MiB",
            server.peak_rss_mib(),
        );
        drop(server);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

fn add_latency(report: &mut Report, name: &str, samples: &stats::Samples) {
    let [p50, p99, max] = samples.summary();
    report.add(&format!("{name} p50"), "us", p50);
    report.add(&format!("{name} p99"), "us", p99);
    report.add(&format!("{name} max"), "us", max);
}

/// The mesh's handshake as a multiple of the floor, against the targets.
fn print_ratios(report: &Report, stores: &[String]) {
    println!(
        "handshake (auto) against the floor's unary round trip measured just before it \
         (targets: p50 <= 2x, p99 <= 3x):"
    );
    for store in stores {
        if let (Some(r50), Some(r99)) = (
            report.median(&format!("[{store}] handshake auto p50 / floor p50")),
            report.median(&format!("[{store}] handshake auto p99 / floor p99")),
        ) {
            println!("  [{store}] p50 {r50:.2}x, p99 {r99:.2}x (medians of the per-run ratios)");
        }
    }
    if let (Some(floor), Some(flush)) = (
        report.median("floor unary p50"),
        report.median("flushed commit p50"),
    ) {
        for store in stores {
            if let Some(p50) = report.median(&format!("[{store}] handshake auto p50")) {
                println!(
                    "  [{store}] sequential handshake p50 {p50:.0} us = floor + flush ({:.0} us) x {:.2}",
                    floor + flush,
                    p50 / (floor + flush)
                );
            }
        }
    }
}
