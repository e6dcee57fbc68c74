//! `bench --model-suite`: the suite of [`super::tasks`] on the real small
//! model, each task on a fresh lead and a fresh copy of its workspace, with
//! the teammate's defaults; per task and in all: done (every check holds),
//! seconds to the teammate's end of turn, calls, tokens, calls refused.
//! With `--against OLD_LEAD`, each task also runs on that older build (its
//! `teammate` beside it), the two taking turns at going first, so that one
//! run says what a change to prompts, schemas or the offer did.

use std::{path::Path, time::Duration};

use super::{
    run::{self, Ask, Build, Kit, Run},
    tasks::{self, Task, TASKS},
};

/// The longest a task may take before it counts as not done.
const LIMIT: Duration = Duration::from_secs(60);

/// One task's run on one build, and the first check that failed.
struct Outcome {
    task: &'static str,
    build: usize,
    run: Run,
    failed: Option<String>,
}

/// Runs the suite (the tasks whose name starts with one of `only`, if
/// given) on this build and, with `against`, on that one too.
pub(crate) async fn measure(
    kit: Option<&Path>,
    against: Option<&Path>,
    only: &[String],
    logs: Option<&Path>,
    base_url: Option<&str>,
) -> anyhow::Result<()> {
    if let Some(dir) = logs {
        std::fs::create_dir_all(dir)?;
    }
    let dir = Kit::find(kit);
    if dir.is_none() && base_url.is_none() {
        anyhow::bail!(
            "--model-suite needs the real-model kit: run ../shared/tools/real-model/setup.sh, \
             or pass --model-kit DIR (or --model-base-url URL of a server already running)"
        );
    }
    let mut builds = vec![("this build", Build::this()?)];
    if let Some(old) = against {
        builds.push(("--against", Build::at(old)?));
    }
    let chosen: Vec<&Task> = TASKS
        .iter()
        .filter(|t| only.is_empty() || only.iter().any(|o| t.name.starts_with(o.as_str())))
        .collect();
    anyhow::ensure!(!chosen.is_empty(), "--suite-tasks matches no task");
    let kit = match (base_url, dir) {
        (Some(url), _) => Kit::running(url)?,
        (None, Some(dir)) => Kit::start(dir)?,
        (None, None) => unreachable!("checked above"),
    };
    let mut outcomes = Vec::new();
    for (i, task) in chosen.iter().enumerate() {
        let order: Vec<usize> = if i % 2 == 0 {
            (0..builds.len()).collect()
        } else {
            (0..builds.len()).rev().collect()
        };
        for b in order {
            kit.wait_idle().await;
            eprintln!("bench: suite: {} ({})", task.name, builds[b].0);
            let ask = Ask {
                task: task.ask,
                files: task.workspace.files,
                constrain: "auto",
                limit: LIMIT,
                log: logs.map(|dir| {
                    dir.join(format!(
                        "{}{}.log",
                        task.name.replace('/', "-"),
                        if b == 0 { "" } else { "-against" }
                    ))
                }),
            };
            let (mut run, workspace) = run::run(&builds[b].1, &ask, &kit.base_url).await?;
            let failed = task
                .checks
                .iter()
                .find_map(|c| tasks::check(*c, workspace.path(), task.workspace.files).err());
            run.done = failed.is_none();
            eprintln!(
                "bench: suite: {}: {} in {:.1} s{}",
                task.name,
                if run.done { "done" } else { "not done" },
                run.seconds,
                failed
                    .as_deref()
                    .map(|f| format!(" ({f})"))
                    .unwrap_or_default()
            );
            outcomes.push(Outcome {
                task: task.name,
                build: b,
                run,
                failed,
            });
        }
    }
    drop(kit);
    print(&outcomes, &builds, chosen.len());
    Ok(())
}

fn print(outcomes: &[Outcome], builds: &[(&str, Build)], tasks: usize) {
    println!(
        "\nmodel suite: {tasks} tasks in {} workspaces; Qwen2.5-Coder-0.5B (Q4_K_M) on \
         llama.cpp's server (the kit), this machine's CPU; the teammate's defaults, temperature \
         0, --approval auto; each task to the teammate's end of turn (at most {} s)",
        tasks::TASKS
            .iter()
            .map(|t| t.workspace.name)
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        LIMIT.as_secs()
    );
    println!(
        "{:<24} {:<11} {:>5} {:>8} {:>6} {:>8} {:>8}  why not",
        "task", "build", "done", "seconds", "calls", "tokens", "refused"
    );
    for o in outcomes {
        let r = &o.run;
        println!(
            "{:<24} {:<11} {:>5} {:>8.1} {:>6} {:>8} {:>8}  {}",
            o.task,
            builds[o.build].0,
            if r.done { "yes" } else { "no" },
            r.seconds,
            r.calls,
            r.prompt + r.completion,
            r.refused,
            o.failed
                .as_deref()
                .unwrap_or(if r.ended { "" } else { "(out of time)" })
        );
    }
    for (b, (label, _)) in builds.iter().enumerate() {
        let mine: Vec<&Run> = outcomes
            .iter()
            .filter(|o| o.build == b)
            .map(|o| &o.run)
            .collect();
        let done: Vec<&&Run> = mine.iter().filter(|r| r.done).collect();
        let mut seconds: Vec<f64> = done.iter().map(|r| r.seconds).collect();
        seconds.sort_by(f64::total_cmp);
        let median = seconds.get(seconds.len() / 2).copied().unwrap_or(0.0);
        println!(
            "{label}: {} of {} done ({:.0}%), median done task {median:.1} s; in all {:.0} s, {} \
             calls, {} tokens, {} refused calls ({} in done tasks)",
            done.len(),
            mine.len(),
            100.0 * done.len() as f64 / mine.len().max(1) as f64,
            mine.iter().map(|r| r.seconds).sum::<f64>(),
            mine.iter().map(|r| r.calls).sum::<u64>(),
            mine.iter().map(|r| r.prompt + r.completion).sum::<u64>(),
            mine.iter().map(|r| r.refused).sum::<u64>(),
            done.iter().map(|r| r.refused).sum::<u64>(),
        );
    }
}
