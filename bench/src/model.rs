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

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};

use anyhow::{bail, Context};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::Command,
};

use crate::procs::{beside, Server};

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

/// What one run came to.
#[derive(Debug, Default, Clone)]
struct Run {
    done: bool,
    calls: u64,
    prompt: u64,
    cached: u64,
    completion: u64,
    seconds: f64,
    refused: u64,
    cut: u64,
}

/// The kit, if it is here and set up: its folder and the model file.
fn kit(dir: Option<&Path>) -> Option<PathBuf> {
    let dir = match dir {
        Some(dir) => dir.to_path_buf(),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/tools/real-model"),
    };
    let home = std::env::var_os("REALMODEL_HOME")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/mesh-real-model"))
        })?;
    let model = home.join("models/qwen2.5-coder-0.5b-instruct.gguf");
    (dir.join("start.sh").is_file() && model.is_file()).then_some(dir)
}

/// Runs the section where the kit is present; says why not otherwise.
pub(crate) async fn measure(dir: Option<&Path>) -> anyhow::Result<()> {
    let Some(kit) = kit(dir) else {
        println!(
            "\nmodel section: skipped (no real-model kit set up; run \
             ../shared/tools/real-model/setup.sh, or pass --model-kit DIR)"
        );
        return Ok(());
    };
    let port = free_port()?;
    let started = std::process::Command::new(kit.join("start.sh"))
        .arg(port.to_string())
        .output()
        .context("the kit's start.sh")?;
    if !started.status.success() {
        bail!(
            "the kit's server did not start: {}",
            String::from_utf8_lossy(&started.stdout)
        );
    }
    let base_url = format!("http://127.0.0.1:{port}/v1");
    let result = run_all(&base_url, port).await;
    let _ = std::process::Command::new(kit.join("stop.sh"))
        .arg(port.to_string())
        .status();
    let runs = result?;
    print(&runs);
    Ok(())
}

async fn run_all(base_url: &str, port: u16) -> anyhow::Result<Vec<(&'static str, String, Run)>> {
    let mut runs = Vec::new();
    for task in &TASKS {
        for constrain in ["auto", "off"] {
            wait_idle(port).await;
            eprintln!("bench: model: {} with --constrain {constrain}", task.name);
            let run = run_one(task, constrain, base_url).await?;
            runs.push((task.name, constrain.to_owned(), run));
        }
    }
    Ok(runs)
}

/// One task on a fresh lead, to the teammate's first end of turn (or the limit).
async fn run_one(task: &Task, constrain: &str, base_url: &str) -> anyhow::Result<Run> {
    let (join, operator) = (shared::auth::new_token(), shared::auth::new_token());
    let lead = Server::lead(
        &beside("lead")?,
        &["--approval", "auto", "--store", "memory", "--http", "off"],
        &join,
        &operator,
    )
    .await?;
    let workspace = tempfile::tempdir()?;
    for (path, text) in task.seed {
        std::fs::write(workspace.path().join(path), text)?;
    }
    let started = Instant::now();
    let mut teammate = Command::new(beside("teammate")?)
        .args([
            "--lead",
            &format!("http://{}", lead.addr),
            "--name",
            "alice",
        ])
        .arg("--workspace")
        .arg(workspace.path())
        .args(["--api-key-env", "MESH_BENCH_NO_KEY", "--model", "qwen"])
        .args(["--base-url", base_url, "--temperature", "0"])
        .args(["--constrain", constrain, "--task", task.ask])
        .env("MESH_JOIN_TOKEN", &join)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting the teammate")?;
    let stderr = teammate.stderr.take().context("stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    let mut run = Run::default();
    let ended = tokio::time::timeout(RUN_LIMIT, async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("tool call") && line.contains("allowed=false") {
                run.refused += 1;
            }
            if line.contains("a reply was cut at its bound") {
                run.cut += 1;
            }
            if line.contains("model use") {
                return Some(line);
            }
        }
        None
    })
    .await;
    run.seconds = started.elapsed().as_secs_f64();
    let _ = teammate.start_kill();
    let _ = teammate.wait().await;
    // At the end of its turn the teammate logs what it used; a run that
    // never got there is counted by what the lead heard (its reports lag
    // by a call), and its cached share is not known.
    let mesh = crate::mesh::Lead {
        addr: lead.addr.clone(),
        join,
        operator,
        tls: None,
    };
    let team = mesh
        .operator()
        .await?
        .list_team(shared::pb::ListTeamRequest::default())
        .await?
        .into_inner();
    if let Some(usage) = team.team_usage {
        run.calls = usage.calls;
        run.prompt = usage.prompt_tokens;
        run.completion = usage.completion_tokens;
    }
    if let Ok(Some(line)) = ended {
        let field = |key: &str| -> u64 {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{key}=")))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        run.calls = field("calls");
        run.prompt = field("prompt_tokens");
        run.completion = field("completion_tokens");
        run.cached = field("cached_tokens");
    }
    let (file, needle) = task.check;
    run.done = std::fs::read_to_string(workspace.path().join(file))
        .is_ok_and(|text| text.to_lowercase().contains(&needle.to_lowercase()));
    drop(lead);
    Ok(run)
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

/// A free loopback port for the model server.
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Waits until the model server works on no request (one a stopped
/// teammate left may still be generating), for at most two minutes.
async fn wait_idle(port: u16) {
    let until = Instant::now() + Duration::from_secs(120);
    while Instant::now() < until {
        if !busy(port).await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Whether llama.cpp's `GET /slots` says a slot is processing.
async fn busy(port: u16) -> bool {
    // reqwest here needs rustls's one crypto provider installed (a second
    // install is refused, harmlessly).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let slots = async {
        reqwest::Client::new()
            .get(format!("http://127.0.0.1:{port}/slots"))
            .timeout(Duration::from_secs(5))
            .send()
            .await?
            .json::<serde_json::Value>()
            .await
    };
    let slots = slots.await.ok();
    slots
        .as_ref()
        .and_then(serde_json::Value::as_array)
        .is_some_and(|slots| slots.iter().any(|s| s["is_processing"] == true))
}
