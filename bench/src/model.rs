//! The model section: a real small model in the teammate's seat, on small
//! tasks, with the constraint on and off in one run. It runs where the
//! real-model kit (`../shared/tools/real-model/`, set up with its
//! `setup.sh`) is present: llama.cpp's server and Qwen2.5-Coder-0.5B on the
//! CPU, the model's own chat template, temperature 0, the teammate's
//! defaults, `lead serve --approval auto`.
//!
//! Each run is reported as done or not (the file the task asks for holds
//! what it should), with the model's calls, prompt tokens (and the share
//! the server's prompt cache served), completion tokens, seconds from the
//! teammate's start to its end of turn, calls refused, and replies cut at
//! their bound: read from the teammate's own `model use` log line and its
//! tool-call lines.

mod run;
mod suite;
mod tasks;

use std::{path::Path, time::Duration};

pub(crate) use suite::measure as suite;

use self::run::{Ask, Build, Kit, Run};

/// The longest a run may take before it counts as not done.
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// A small task: what the model is asked, what the workspace holds first,
/// and what done means.
struct Task {
    name: &'static str,
    ask: &'static str,
    seed: &'static [(&'static str, &'static str)],
    /// The file to check, and a text it must hold (case-insensitive).
    check: (&'static str, &'static str),
}

const TASKS: [Task; 3] = [
    Task {
        name: "hello",
        ask: "create hello.txt containing hello world",
        seed: &[],
        check: ("hello.txt", "hello"),
    },
    Task {
        name: "function",
        ask: "write math_utils.py with a function add(a, b) that returns a + b",
        seed: &[],
        check: ("math_utils.py", "def add"),
    },
    Task {
        name: "read, then write",
        ask: "read config.txt, then create backup.txt with the same content",
        seed: &[("config.txt", "port = 8080\n")],
        check: ("backup.txt", "port = 8080"),
    },
];

/// Runs the section where the kit is present; says why not otherwise.
pub(crate) async fn measure(dir: Option<&Path>) -> anyhow::Result<()> {
    let Some(dir) = Kit::find(dir) else {
        println!(
            "\nmodel section: skipped (no real-model kit set up; run \
             ../shared/tools/real-model/setup.sh, or pass --model-kit DIR)"
        );
        return Ok(());
    };
    let kit = Kit::start(dir)?;
    let build = Build::this()?;
    let mut runs = Vec::new();
    for task in &TASKS {
        for constrain in ["auto", "off"] {
            kit.wait_idle().await;
            eprintln!("bench: model: {} with --constrain {constrain}", task.name);
            let ask = Ask {
                task: task.ask,
                files: task.seed,
                constrain,
                limit: RUN_LIMIT,
                log: None,
            };
            let (mut run, workspace) = run::run(&build, &ask, &kit.base_url).await?;
            let (file, needle) = task.check;
            run.done = std::fs::read_to_string(workspace.path().join(file))
                .is_ok_and(|text| text.to_lowercase().contains(&needle.to_lowercase()));
            runs.push((task.name, constrain.to_owned(), run));
        }
    }
    drop(kit);
    print(&runs);
    Ok(())
}

fn print(runs: &[(&'static str, String, Run)]) {
    println!(
        "\nmodel section: Qwen2.5-Coder-0.5B (Q4_K_M) on llama.cpp's server, this machine's CPU; \
         --approval auto, temperature 0, defaults; each run to the teammate's end of turn \
         (at most {} s)",
        RUN_LIMIT.as_secs()
    );
    println!(
        "{:<18} {:<10} {:>5} {:>6} {:>8} {:>7} {:>11} {:>8} {:>8} {:>4}",
        "task",
        "constrain",
        "done",
        "calls",
        "prompt",
        "cached",
        "completion",
        "seconds",
        "refused",
        "cut"
    );
    for (task, constrain, r) in runs {
        println!(
            "{:<18} {:<10} {:>5} {:>6} {:>8} {:>6.0}% {:>11} {:>8.1} {:>8} {:>4}",
            task,
            constrain,
            if r.done { "yes" } else { "no" },
            r.calls,
            r.prompt,
            if r.prompt == 0 {
                0.0
            } else {
                100.0 * r.cached as f64 / r.prompt as f64
            },
            r.completion,
            r.seconds,
            r.refused,
            r.cut
        );
    }
    let sum = |c: &str| -> (usize, f64, u64) {
        runs.iter()
            .filter(|(_, k, _)| k == c)
            .fold((0, 0.0, 0), |(d, s, t), (_, _, r)| {
                (
                    d + usize::from(r.done),
                    s + r.seconds,
                    t + r.prompt + r.completion,
                )
            })
    };
    let (on_done, on_s, on_t) = sum("auto");
    let (off_done, off_s, off_t) = sum("off");
    println!(
        "constrained: {on_done}/{n} done in {on_s:.0} s and {on_t} tokens; unconstrained: \
         {off_done}/{n} done in {off_s:.0} s and {off_t} tokens ({:.1}x the time, {:.1}x the tokens)",
        off_s / on_s.max(0.001),
        off_t as f64 / (on_t.max(1)) as f64,
        n = TASKS.len()
    );
}
