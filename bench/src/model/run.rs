//! One small task for a real model teammate: a fresh lead (in memory,
//! `--approval auto`), a fresh workspace seeded with the task's files, and
//! the teammate (the model on the kit's server) to its first end of turn or
//! the limit. What the run came to is read from the teammate's own log (its
//! `model use` line at the end of its turn, and its tool-call lines) and,
//! where it never got there, from what the lead heard of its usage.

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

use crate::procs::Server;

/// What one run came to.
#[derive(Debug, Default, Clone)]
pub(crate) struct Run {
    pub(crate) done: bool,
    pub(crate) calls: u64,
    pub(crate) prompt: u64,
    pub(crate) cached: u64,
    pub(crate) completion: u64,
    pub(crate) seconds: f64,
    pub(crate) refused: u64,
    pub(crate) cut: u64,
    /// Whether the teammate reached its end of turn within the limit.
    pub(crate) ended: bool,
}

/// The `lead` and `teammate` executables of one build.
#[derive(Debug, Clone)]
pub(crate) struct Build {
    pub(crate) lead: PathBuf,
    pub(crate) teammate: PathBuf,
}

impl Build {
    /// This build's, beside the bench.
    pub(crate) fn this() -> anyhow::Result<Self> {
        Ok(Self {
            lead: crate::procs::beside("lead")?,
            teammate: crate::procs::beside("teammate")?,
        })
    }

    /// An older build's: its `lead` at `lead`, its `teammate` beside it.
    pub(crate) fn at(lead: &Path) -> anyhow::Result<Self> {
        let lead = std::path::absolute(lead)?;
        let teammate = lead.with_file_name("teammate");
        anyhow::ensure!(
            lead.is_file(),
            "--against: no executable at {}",
            lead.display()
        );
        anyhow::ensure!(
            teammate.is_file(),
            "--against: no teammate beside {}",
            lead.display()
        );
        Ok(Self { lead, teammate })
    }
}

/// What to run: the task as the teammate is given it, the files its
/// workspace holds first, and the teammate's `--constrain`.
pub(crate) struct Ask<'a> {
    pub(crate) task: &'a str,
    pub(crate) files: &'a [(&'a str, &'a str)],
    pub(crate) constrain: &'a str,
    pub(crate) limit: Duration,
    /// Where to keep the teammate's log, with every request and reply
    /// whole (`mesh_llm::wire` at trace).
    pub(crate) log: Option<PathBuf>,
}

/// Runs `ask` with `build` against the model at `base_url`; the run and
/// the workspace as the teammate left it.
pub(crate) async fn run(
    build: &Build,
    ask: &Ask<'_>,
    base_url: &str,
) -> anyhow::Result<(Run, tempfile::TempDir)> {
    let (join, operator) = (shared::auth::new_token(), shared::auth::new_token());
    let lead = Server::lead(
        &build.lead,
        &["--approval", "auto", "--store", "memory", "--http", "off"],
        &join,
        &operator,
    )
    .await?;
    let workspace = tempfile::tempdir()?;
    for (path, text) in ask.files {
        let path = workspace.path().join(path);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, text)?;
    }
    let started = Instant::now();
    let mut teammate = Command::new(&build.teammate)
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
        .args(["--constrain", ask.constrain, "--task", ask.task])
        .env("MESH_JOIN_TOKEN", &join)
        .env(
            "RUST_LOG",
            if ask.log.is_some() {
                "info,mesh_llm::wire=trace"
            } else {
                "info"
            },
        )
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting the teammate")?;
    let stderr = teammate.stderr.take().context("stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    let mut run = Run::default();
    let mut log = match &ask.log {
        Some(path) => Some(std::fs::File::create(path)?),
        None => None,
    };
    let ended = tokio::time::timeout(ask.limit, async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(file) = &mut log {
                use std::io::Write as _;
                let _ = writeln!(file, "{line}");
            }
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
        run.ended = true;
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
    drop(lead);
    Ok((run, workspace))
}

/// The kit's model server, started on a free port and stopped when dropped
/// (or one already running, left as it is).
pub(crate) struct Kit {
    /// The kit's folder, where this started the server.
    dir: Option<PathBuf>,
    port: u16,
    pub(crate) base_url: String,
}

impl Kit {
    /// The kit at `dir` (default: `../shared/tools/real-model` beside the
    /// checkout), if it is here and set up.
    pub(crate) fn find(dir: Option<&Path>) -> Option<PathBuf> {
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

    /// Starts the kit's server at `dir`.
    pub(crate) fn start(dir: PathBuf) -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let started = std::process::Command::new(dir.join("start.sh"))
            .arg(port.to_string())
            .output()
            .context("the kit's start.sh")?;
        if !started.status.success() {
            bail!(
                "the kit's server did not start: {}",
                String::from_utf8_lossy(&started.stdout)
            );
        }
        Ok(Self {
            dir: Some(dir),
            port,
            base_url: format!("http://127.0.0.1:{port}/v1"),
        })
    }

    /// A llama.cpp server already running at `base_url` on loopback (a
    /// recording proxy in front of the kit's, say).
    pub(crate) fn running(base_url: &str) -> anyhow::Result<Self> {
        let url = reqwest::Url::parse(base_url).context("--model-base-url")?;
        let port = url
            .port_or_known_default()
            .context("--model-base-url names no port")?;
        Ok(Self {
            dir: None,
            port,
            base_url: base_url.trim_end_matches('/').to_owned(),
        })
    }

    /// Waits until the server works on no request (one a stopped teammate
    /// left may still be generating), for at most two minutes.
    pub(crate) async fn wait_idle(&self) {
        let until = Instant::now() + Duration::from_secs(120);
        while Instant::now() < until {
            if !self.busy().await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Whether llama.cpp's `GET /slots` says a slot is processing.
    async fn busy(&self) -> bool {
        // reqwest here needs rustls's one crypto provider installed (a
        // second install is refused, harmlessly).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let slots = async {
            reqwest::Client::new()
                .get(format!("http://127.0.0.1:{}/slots", self.port))
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
}

impl Drop for Kit {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let _ = std::process::Command::new(dir.join("stop.sh"))
                .arg(self.port.to_string())
                .status();
        }
    }
}
