//! `lead spawn`: asks the lead to start a teammate, then waits until it has
//! joined, or says why it has not: it ended first (how, and the end of its
//! log), or it did not join within `--wait` seconds (the end of its log, if
//! this host can read it). `SpawnTeammate` itself answers once the process
//! has started; the waiting is the CLI's, on the event stream it opens
//! before asking, so neither the join nor the exit can come unheard.

use std::{path::PathBuf, time::Duration};

use mesh_core::display::escape;
use shared::pb::{self, event::Kind};
use tokio_stream::StreamExt;

use super::{CliError, Operator};

/// What `lead spawn` starts: a teammate driven by a script or by a model.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("brain").required(true).args(["script", "model"])))]
pub struct SpawnArgs {
    pub name: String,
    #[arg(long)]
    pub role: String,
    /// The teammate's script (TOML).
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// A model teammate: the model's name (needs --task).
    #[arg(long, requires = "task")]
    pub model: Option<String>,
    /// The model teammate's task.
    #[arg(long, requires = "model")]
    pub task: Option<String>,
    /// The chat-completions API's root (default: OpenAI's).
    #[arg(long, requires = "model")]
    pub base_url: Option<String>,
    /// The variable of the lead's environment that holds the API key
    /// (default: OPENAI_API_KEY); the lead passes on only those its
    /// `--model-key-env` names.
    #[arg(long, requires = "model")]
    pub api_key_env: Option<String>,
    /// The model teammate's token budget, prompt and completion together
    /// (default: the lead's --token-budget; a budget set with `lead budget`
    /// wins over both).
    #[arg(long, requires = "model")]
    pub token_budget: Option<u64>,
    /// The most tokens of one model reply (default: the teammate's).
    #[arg(long, requires = "model")]
    pub max_tokens: Option<u32>,
    /// The model's context window in tokens (default: what the server says,
    /// else the teammate's).
    #[arg(long, requires = "model")]
    pub context_window: Option<u32>,
    /// Its workspace (default: <state-dir>/workspaces/<name>).
    #[arg(long)]
    pub workspace: Option<PathBuf>,
    /// The `teammate` executable; the lead starts only its own (its
    /// --teammate-bin, else the one beside it), so this may only name that.
    #[arg(long)]
    pub teammate_bin: Option<PathBuf>,
    /// Seconds to wait for the teammate to join; 0 returns once it started.
    #[arg(long, default_value_t = 15.0)]
    pub wait: f64,
}

/// How the wait for a spawned teammate ended.
#[derive(Debug)]
enum Outcome {
    /// It joined.
    Joined,
    /// It ended before joining.
    Exited(pb::ChildExited),
}

/// `lead spawn`; `ca`: the CA file this command trusts the lead by
/// (`--ca`), which its child is given to trust too.
pub async fn spawn(
    client: &mut Operator,
    args: SpawnArgs,
    ca: Option<&std::path::Path>,
) -> Result<String, CliError> {
    // Paths as the lead's process sees them.
    let absolute = |p: PathBuf| {
        std::path::absolute(&p)
            .unwrap_or(p)
            .to_string_lossy()
            .into_owned()
    };
    if !(args.wait.is_finite() && args.wait >= 0.0) {
        return Err(CliError::Usage(format!(
            "--wait: {} is not a number of seconds",
            args.wait
        )));
    }
    let wait = Duration::from_secs_f64(args.wait);
    let ca_pem = match ca {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| CliError::Usage(format!("--ca: cannot read {}: {e}", path.display())))?,
        None => String::new(),
    };
    let name = args.name;
    let request = pb::SpawnTeammateRequest {
        name: name.clone(),
        role: args.role,
        script_path: args.script.map(absolute).unwrap_or_default(),
        workspace: args.workspace.map(absolute).unwrap_or_default(),
        teammate_bin: args.teammate_bin.map(absolute).unwrap_or_default(),
        model: args.model.unwrap_or_default(),
        task: args.task.unwrap_or_default(),
        base_url: args.base_url.unwrap_or_default(),
        api_key_env: args.api_key_env.unwrap_or_default(),
        token_budget: args.token_budget.unwrap_or_default(),
        max_tokens: args.max_tokens.unwrap_or_default(),
        context_window: args.context_window.unwrap_or_default(),
        ca_pem,
    };
    // The lead registers a watcher before it answers: from here on nothing
    // is missed.
    let events = if wait.is_zero() {
        None
    } else {
        Some(client.watch(pb::WatchRequest {}).await?.into_inner())
    };
    let response = client.spawn_teammate(request).await?.into_inner();
    let pid = response.pid;
    let spawned = format!("spawned {name} (pid {pid})\n");
    let Some(mut events) = events else {
        return Ok(spawned);
    };
    let waited = tokio::time::timeout(wait, async {
        while let Some(event) = events.next().await {
            match event?.kind {
                Some(Kind::Member(m))
                    if m.name == name && m.status != pb::MemberStatus::Terminated as i32 =>
                {
                    return Ok(Outcome::Joined);
                }
                Some(Kind::ChildExited(c)) if c.name == name && c.pid == pid => {
                    return Ok(if c.joined {
                        Outcome::Joined
                    } else {
                        Outcome::Exited(c)
                    });
                }
                _ => {}
            }
        }
        Err(CliError::Connect(format!(
            "the lead closed the event stream before {name} joined"
        )))
    })
    .await;
    match waited {
        Ok(Ok(Outcome::Joined)) => Ok(spawned),
        Ok(Ok(Outcome::Exited(exited))) => Err(CliError::NotJoined(format!(
            "{name} (pid {pid}) exited before joining: {}{}",
            exited.how,
            log_said(&exited.log_path, &exited.log_tail)
        ))),
        Ok(Err(e)) => Err(e),
        Err(_) => {
            let path = std::path::Path::new(&response.log_path);
            Err(CliError::NotJoined(format!(
                "{name} (pid {pid}) has not joined within {}s; it still runs{}",
                args.wait,
                log_said(&response.log_path, &crate::children::log_tail(path))
            )))
        }
    }
}

/// "; its log (PATH) ends:" and the lines, indented and escaped; or where
/// the log is, if nothing of it could be read.
fn log_said(path: &str, tail: &str) -> String {
    let path = escape(path);
    if tail.is_empty() {
        return format!("; its log is {path} on the lead's host");
    }
    let lines: Vec<String> = tail
        .lines()
        .map(|line| format!("  {}", escape(line)))
        .collect();
    format!("; its log ({path}) ends:\n{}", lines.join("\n"))
}
