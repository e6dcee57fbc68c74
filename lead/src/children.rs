//! Teammate processes the lead starts (`lead spawn`, `lead demo`), and how
//! they are stopped: SIGTERM, then SIGKILL after a grace period.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use nix::sys::signal::Signal;
use tokio::{process::Command, sync::mpsc, task::JoinHandle};

use crate::group::Session;

mod orphans;

pub(crate) use orphans::left_running;

/// What a spawned teammate gets of the lead's environment (with every
/// `LC_*`): what a process needs to run, find its tools and certificates,
/// reach the network through a proxy and log; nothing else, so no secret of
/// the lead's is passed on.
const PASSED_ON: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "TERM",
    "NO_COLOR",
    "RUST_LOG",
    "RUST_BACKTRACE",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
];

/// What the lead needs to start a teammate.
#[derive(Debug, Clone)]
pub struct Spawner {
    /// The `teammate` executable, unless a spawn request names another.
    pub teammate_bin: PathBuf,
    /// The URLs the teammate dials, comma-separated: this lead's
    /// (`http://127.0.0.1:PORT`, or `https://`) first, then its `--peer`s.
    pub lead_url: String,
    /// What the teammate trusts and shows over TLS (`--ca`, `--cert`, `--key`).
    pub tls: shared::transport::ClientTls,
    /// Passed in `MESH_JOIN_TOKEN`, never on the command line.
    pub join_token: String,
    /// Logs go to `<state_dir>/logs/<name>.log`; default workspaces under `<state_dir>/workspaces`.
    pub state_dir: PathBuf,
    /// Between SIGTERM and SIGKILL.
    pub kill_grace: Duration,
    /// Scripts and workspaces a spawn request names must be inside it
    /// (`--spawn-root`); default workspaces are under the state dir.
    pub root: PathBuf,
    /// The variables of the lead's environment a model teammate may be
    /// given as its API key (`--model-key-env`). A child gets the one it
    /// was given and none of the others (nor OPENAI_API_KEY, unless given).
    pub model_keys: Vec<String>,
    /// The team's repository (`--repo`): a teammate spawned without a
    /// workspace of its own works in a worktree of it.
    pub repo: Option<std::sync::Arc<crate::git::Repo>>,
    /// Where the lead exports telemetry (`--otlp-endpoint`): its teammates
    /// export there too.
    pub otlp_endpoint: Option<String>,
}

/// Why a path a spawn request named may not be used.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Confined {
    /// Not absolute, or with a `..` in it.
    Malformed(&'static str),
    /// Outside the spawn root (and the state dir's workspaces).
    Outside,
}

/// `path` with its longest existing ancestor canonicalized (symlinks
/// followed) and the rest appended as written.
fn resolve(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut existing = path;
    loop {
        if let Ok(canonical) = existing.canonicalize() {
            return rest.iter().rev().fold(canonical, |p, c| p.join(c));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// What drives a spawned teammate.
#[derive(Debug, Clone)]
pub(crate) enum Brain {
    /// `--script FILE`.
    Script(PathBuf),
    /// `--model NAME --task TEXT [--base-url URL] [--api-key-env VAR]`; the
    /// key itself stays in the environment the teammate inherits.
    Model {
        model: String,
        task: String,
        base_url: Option<String>,
        api_key_env: Option<String>,
        /// Its token budget (`--token-budget`); 0: the lead's default.
        token_budget: u64,
        /// The most tokens of one reply (`--max-tokens`); 0: the teammate's.
        max_tokens: u32,
        /// The model's context window (`--context-window`); 0: the teammate's.
        context_window: u32,
    },
}

impl Brain {
    /// The variable a model teammate reads its API key from (the
    /// teammate's default, OPENAI_API_KEY, when none is named); none for a
    /// script.
    pub(crate) fn key_env(&self) -> Option<&str> {
        match self {
            Brain::Script(_) => None,
            Brain::Model { api_key_env, .. } => Some(
                api_key_env
                    .as_deref()
                    .unwrap_or(mesh_llm::DEFAULT_API_KEY_ENV),
            ),
        }
    }

    /// Its flags on the teammate's command line.
    fn args(&self) -> Vec<std::ffi::OsString> {
        match self {
            Brain::Script(script) => vec!["--script".into(), script.into()],
            Brain::Model {
                model,
                task,
                base_url,
                api_key_env,
                token_budget,
                max_tokens,
                context_window,
            } => {
                let mut args = vec!["--model".into(), model.into(), "--task".into(), task.into()];
                if let Some(url) = base_url {
                    args.extend(["--base-url".into(), url.into()]);
                }
                if let Some(var) = api_key_env {
                    args.extend(["--api-key-env".into(), var.into()]);
                }
                for (flag, value) in [
                    ("--token-budget", *token_budget),
                    ("--max-tokens", u64::from(*max_tokens)),
                    ("--context-window", u64::from(*context_window)),
                ] {
                    if value != 0 {
                        args.extend([flag.into(), value.to_string().into()]);
                    }
                }
                args
            }
        }
    }
}

/// A running child, as the hub holds it.
#[derive(Debug)]
pub(crate) struct Child {
    /// The process id.
    pub(crate) pid: u32,
    /// Its log file.
    pub(crate) log: PathBuf,
    /// Whether it has joined the team (a `Join` with its name came while
    /// it ran).
    pub(crate) joined: bool,
    /// Its workspace, on the lead's host.
    pub(crate) workspace: PathBuf,
    /// Asks the child's task to stop it (TERM, then KILL).
    stop: mpsc::Sender<()>,
    /// The task that waits for the child; it ends when the child is reaped.
    pub(crate) task: JoinHandle<()>,
}

impl Child {
    /// Sends SIGTERM now and SIGKILL after the grace period if it still runs.
    pub(crate) fn stop(&self) {
        // A full channel means a stop is already on its way.
        let _ = self.stop.try_send(());
    }

    /// A child with process id `pid` and no process behind it, for tests
    /// of what holds children (in a tokio runtime).
    #[cfg(test)]
    pub(crate) fn idle(pid: u32) -> Self {
        let (stop, _) = mpsc::channel(1);
        Self {
            pid,
            log: PathBuf::from(format!("{pid}.log")),
            joined: false,
            workspace: PathBuf::new(),
            stop,
            task: tokio::spawn(async {}),
        }
    }
}

impl Spawner {
    /// Where the log of the teammate spawned as `name` goes.
    pub(crate) fn log_path(&self, name: &str) -> PathBuf {
        self.state_dir.join("logs").join(format!("{name}.log"))
    }

    /// Where `name`'s worktree is (`--repo`).
    pub(crate) fn worktree(&self, name: &str) -> PathBuf {
        self.state_dir.join("worktrees").join(name)
    }

    /// The workspace a teammate gets when none is named.
    pub(crate) fn default_workspace(&self, name: &str) -> PathBuf {
        self.state_dir.join("workspaces").join(name)
    }

    /// `path`, resolved (symlinks followed as far as it exists), if it lies
    /// inside the spawn root or the state dir's workspaces. Nothing is said
    /// of whether a path outside exists.
    pub(crate) fn confine(&self, path: &Path) -> Result<PathBuf, Confined> {
        if !path.is_absolute() {
            return Err(Confined::Malformed("must be an absolute path"));
        }
        if path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(Confined::Malformed("may not contain '..'"));
        }
        let resolved = resolve(path);
        let inside = [
            resolve(&self.root),
            resolve(&self.state_dir.join("workspaces")),
        ]
        .iter()
        .any(|root| resolved.starts_with(root));
        if inside {
            Ok(resolved)
        } else {
            Err(Confined::Outside)
        }
    }

    /// Whether `--model-key-env` names `var`.
    pub(crate) fn passes_key(&self, var: &str) -> bool {
        self.model_keys.iter().any(|named| named == var)
    }

    /// Whether `bin` is the configured teammate executable.
    pub(crate) fn is_teammate_bin(&self, bin: &Path) -> bool {
        resolve(bin) == resolve(&self.teammate_bin)
    }

    /// What a child trusts and shows over TLS: the lead's settings, and
    /// with `ca_pem` (the spawning command's CA) a file of its own that
    /// holds those certificates and the lead's CA file's.
    fn child_tls(&self, name: &str, ca_pem: &str) -> std::io::Result<shared::transport::ClientTls> {
        if ca_pem.is_empty() {
            return Ok(self.tls.clone());
        }
        let mut bundle = ca_pem.trim_end().to_owned();
        bundle.push('\n');
        if let Some(own) = &self.tls.ca {
            bundle.push_str(&std::fs::read_to_string(own)?);
        }
        let dir = self.state_dir.join("tls");
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("{name}.ca.pem"));
        std::fs::write(&path, bundle)?;
        Ok(shared::transport::ClientTls {
            ca: Some(path),
            ..self.tls.clone()
        })
    }

    /// Starts `teammate` for `name`; `on_exit` hears its pid, how it ended
    /// and the end of its log, once it is reaped. `ca_pem`: certificates
    /// it trusts besides the lead's CA.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn spawn(
        &self,
        bin: &Path,
        name: &str,
        role: &str,
        brain: &Brain,
        workspace: &Path,
        ca_pem: &str,
        on_exit: impl FnOnce(u32, String, String) + Send + 'static,
    ) -> std::io::Result<Child> {
        let tls = self.child_tls(name, ca_pem)?;
        std::fs::create_dir_all(workspace)?;
        let log_path = self.log_path(name);
        if let Some(logs) = log_path.parent() {
            std::fs::create_dir_all(logs)?;
        }
        let log = std::fs::File::create(&log_path)?;
        let mut command = Command::new(bin);
        command
            .arg("--lead")
            .arg(&self.lead_url)
            .arg("--name")
            .arg(name)
            .arg("--role")
            .arg(role)
            .arg("--workspace")
            .arg(workspace)
            .args(brain.args())
            .args(tls.args())
            // Nothing of the lead's environment but what a teammate needs
            // to run (and the OpenTelemetry settings), so no secret of the
            // lead's reaches a child (or a command it runs, or a model it
            // talks to); the join token, never the operator's.
            .env_clear()
            .envs(std::env::vars_os().filter(|(var, _)| {
                var.to_str().is_some_and(|var| {
                    PASSED_ON.contains(&var) || var.starts_with("LC_") || var.starts_with("OTEL_")
                })
            }))
            .env("MESH_JOIN_TOKEN", &self.join_token)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        if let Some(endpoint) = &self.otlp_endpoint {
            command.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint);
        }
        // Of the model keys, the one it was given, if --model-key-env names it.
        if let Some(var) = brain.key_env().filter(|var| self.passes_key(var)) {
            if let Some(value) = std::env::var_os(var) {
                command.env(var, value);
            }
        }
        // Its own session (and process group), so that stopping it also
        // stops the commands it runs, which get process groups of their own
        // inside that session.
        let mut session = Session::spawn(&mut command)?;
        let pid = session.pid();
        let (stop, mut stop_rx) = mpsc::channel(1);
        let grace = self.kill_grace;
        let name = name.to_owned();
        let tail_of = log_path.clone();
        let task = tokio::spawn(async move {
            let status = tokio::select! {
                status = session.child.wait() => status,
                _ = stop_rx.recv() => {
                    // The teammate alone: it finishes the call in progress.
                    session.signal_group(Signal::SIGTERM);
                    match tokio::time::timeout(grace, session.child.wait()).await {
                        Ok(status) => status,
                        Err(_) => {
                            tracing::warn!(member = %name, pid, "did not stop after SIGTERM; sending SIGKILL");
                            session.kill();
                            session.child.wait().await
                        }
                    }
                }
            };
            // Whatever it started and left behind goes with it.
            session.kill();
            let how = match status {
                Ok(status) => describe(status),
                Err(e) => format!("could not be waited for: {e}"),
            };
            tracing::info!(member = %name, pid, how = %how, "teammate process ended");
            let tail = log_tail(&tail_of);
            on_exit(pid, how, tail);
        });
        Ok(Child {
            pid,
            log: log_path,
            joined: false,
            workspace: workspace.to_path_buf(),
            stop,
            task,
        })
    }
}

/// The most bytes of a log's end that [`log_tail`] reads.
pub const LOG_TAIL: u64 = 2048;

/// The last lines of the file at `path` (at most [`LOG_TAIL`] bytes, whole
/// lines where it can), as written: whoever shows them escapes them. Empty
/// if it cannot be read.
pub fn log_tail(path: &Path) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let from = len.saturating_sub(LOG_TAIL);
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(from)).is_err() || file.read_to_end(&mut bytes).is_err() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    let text = match text.split_once('\n') {
        // A cut line at the start goes.
        Some((_, rest)) if from > 0 => rest,
        _ => &text,
    };
    text.trim_end().to_owned()
}

/// "exited with status 0", "killed by SIGTERM".
fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => match Signal::try_from(sig) {
            Ok(sig) => format!("killed by {}", sig.as_str()),
            Err(_) => format!("killed by signal {sig}"),
        },
        (None, None) => "ended".to_owned(),
    }
}
