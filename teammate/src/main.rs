//! `teammate`: parses the command line and runs one session, driven by a
//! script or by a language model.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use clap::{ArgGroup, Parser};
use shared::{
    chat::{ChatClient, ChatConfig, DEFAULT_API_KEY_ENV, OPENAI_BASE_URL},
    display::Escaped,
};
use teammate::{
    driver::{Driver, ScriptDriver},
    model::{Brief, ModelDriver},
    session::{Config, Exit, Session},
};

/// A mesh teammate, driven by a script (`--script`) or a language model (`--model`).
#[derive(Debug, Parser)]
#[command(version, about)]
#[command(group(ArgGroup::new("driver").required(true).args(["script", "model"])))]
#[command(group(ArgGroup::new("task_source").args(["task", "task_file"])))]
struct Args {
    /// The lead's URL, e.g. http://127.0.0.1:7447.
    #[arg(long)]
    lead: String,
    /// The member name to join as.
    #[arg(long)]
    name: String,
    /// The role to join with.
    #[arg(long, default_value = "coder")]
    role: String,
    /// The directory tools work in.
    #[arg(long, default_value = ".")]
    workspace: PathBuf,
    /// The script that drives this teammate (TOML).
    #[arg(long)]
    script: Option<PathBuf>,
    /// The model that drives this teammate, by the name its server knows.
    #[arg(long, requires = "task_source")]
    model: Option<String>,
    /// The chat-completions API's root (OpenAI's, or a local server's such as
    /// http://127.0.0.1:11434/v1 for Ollama).
    #[arg(long, default_value = OPENAI_BASE_URL)]
    base_url: String,
    /// The environment variable that holds the API key; unset or empty sends
    /// no Authorization header (local servers).
    #[arg(long, default_value = DEFAULT_API_KEY_ENV)]
    api_key_env: String,
    /// The task, as the model's first message.
    #[arg(long, requires = "model")]
    task: Option<String>,
    /// A file that holds the task.
    #[arg(long, requires = "model")]
    task_file: Option<PathBuf>,
    /// A file whose text replaces the default system prompt.
    #[arg(long, requires = "model")]
    system_prompt_file: Option<PathBuf>,
    /// The most model replies in a row without a message from outside; then
    /// the teammate reports idle until one arrives.
    #[arg(long, default_value_t = 50)]
    max_turns: u32,
    /// Sampling temperature (the server's default if not given).
    #[arg(long)]
    temperature: Option<f32>,
    /// Seconds one model call may take before it is retried.
    #[arg(long, default_value_t = 300)]
    model_timeout: u64,
    /// The lead's join token.
    #[arg(long, env = "MESH_JOIN_TOKEN", hide_env_values = true)]
    join_token: String,
    /// Seconds the lead may be unreachable before the teammate exits.
    #[arg(long, default_value_t = 60)]
    lead_gone_limit: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let config = Config {
        lead_url: args.lead.clone(),
        name: args.name.clone(),
        role: args.role.clone(),
        workspace: args.workspace.clone(),
        join_token: args.join_token.clone(),
        lead_gone_limit: Duration::from_secs(args.lead_gone_limit),
    };
    let result = match (&args.script, &args.model) {
        (Some(script), _) => match script_driver(script) {
            Ok(driver) => run(config, driver).await,
            Err(e) => return usage(&e),
        },
        (None, Some(model)) => match model_driver(&args, model) {
            Ok(driver) => run(config, driver).await,
            Err(e) => return usage(&e),
        },
        (None, None) => return usage("one of --script and --model is required"),
    };
    match result {
        Ok(Exit::Shutdown) => {
            tracing::info!(member = %Escaped(&args.name), "shut down on request");
            ExitCode::SUCCESS
        }
        Ok(Exit::Signal) => {
            tracing::info!(member = %Escaped(&args.name), "stopped by signal after the tool call in progress");
            ExitCode::from(143)
        }
        Err(e) => {
            // The error may quote the lead's or the model server's message: peer text.
            eprintln!(
                "teammate {}: {}",
                Escaped(&args.name),
                Escaped(&e.to_string())
            );
            ExitCode::FAILURE
        }
    }
}

/// Joins and runs the session with `driver`.
async fn run<D: Driver>(
    config: Config,
    driver: D,
) -> Result<Exit, teammate::session::SessionError> {
    Session::join(config, shared::signal::stop_signal())
        .await?
        .run(driver)
        .await
}

/// A usage error: said on stderr, exit code 2.
fn usage(message: &str) -> ExitCode {
    eprintln!("teammate: {message}");
    ExitCode::from(2)
}

fn read(flag: &str, path: &PathBuf) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{flag} {}: {e}", path.display()))
}

fn script_driver(path: &PathBuf) -> Result<ScriptDriver, String> {
    let text = read("--script", path)?;
    ScriptDriver::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn model_driver(args: &Args, model: &str) -> Result<ModelDriver, String> {
    let task = match (&args.task, &args.task_file) {
        (Some(task), _) => task.clone(),
        (None, Some(file)) => read("--task-file", file)?,
        (None, None) => return Err("--model needs --task or --task-file".into()),
    };
    if task.trim().is_empty() {
        return Err("the task is empty".into());
    }
    let system_prompt = match &args.system_prompt_file {
        Some(file) => Some(read("--system-prompt-file", file)?),
        None => None,
    };
    let mut chat = ChatConfig::new(
        &args.base_url,
        model,
        ChatConfig::key_from_env(&args.api_key_env),
    );
    chat.temperature = args.temperature;
    chat.timeout = Duration::from_secs(args.model_timeout.max(1));
    let client = ChatClient::new(chat).map_err(|e| e.to_string())?;
    Ok(ModelDriver::new(
        client,
        Brief {
            name: args.name.clone(),
            role: args.role.clone(),
            task,
            system_prompt,
            max_turns: args.max_turns,
        },
    ))
}
