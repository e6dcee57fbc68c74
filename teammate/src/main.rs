//! `teammate`: parses the command line and runs one session, driven by a
//! script, by a language model, or (`teammate mcp`) by any agent that
//! speaks the Model Context Protocol.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use clap::{ArgGroup, Parser};
use mesh_core::display::Escaped;
use mesh_llm::{
    ChatClient, ChatConfig, Constrain, MaxTokensField, Penalties, DEFAULT_API_KEY_ENV,
    OPENAI_BASE_URL,
};
use shared::{leads::Leads, transport::ClientTls};
use teammate::{
    command::{CommandLimits, Sandbox},
    driver::Driver,
    gate::Gate,
    mcp,
    model::{Brief, ModelDriver},
    script::ScriptDriver,
    session::{Config, Exit, Session},
};

/// How `run_command` runs (see docs/security.md, "What run_command can reach").
#[derive(Debug, clap::Args)]
struct CommandArgs {
    /// Seconds one run_command may take; then it and everything it started
    /// are killed.
    #[arg(long, default_value_t = 60.0)]
    command_timeout: f64,
    /// Bytes of a command's stdout, and of its stderr, kept for the result.
    #[arg(long, default_value_t = 16 * 1024)]
    command_output_max: usize,
    /// Where commands run: auto (Landlock where the kernel has it, else
    /// bubblewrap where it can start; with neither, run_command is not
    /// offered), landlock (Landlock and a seccomp filter: reads of the
    /// workspace and the system's trees, writes of what the grant names, no
    /// network, no signals outside), bwrap (the same scope in bubblewrap),
    /// or none (unconfined, as this user: said at start and to the lead).
    #[arg(long, default_value = "auto")]
    sandbox: String,
    /// A tree a confined command may also read (a toolchain, say);
    /// repeatable.
    #[arg(long = "sandbox-read", value_name = "PATH")]
    sandbox_read: Vec<PathBuf>,
}

impl CommandArgs {
    fn limits(&self) -> Result<CommandLimits, String> {
        let sandbox_read = self
            .sandbox_read
            .iter()
            .map(|path| {
                path.canonicalize()
                    .map_err(|e| format!("--sandbox-read {}: {e}", path.display()))
            })
            .collect::<Result<_, _>>()?;
        Ok(CommandLimits {
            timeout: Duration::try_from_secs_f64(self.command_timeout)
                .ok()
                .filter(|t| !t.is_zero())
                .ok_or_else(|| {
                    format!(
                        "--command-timeout: {} is not a number of seconds above 0",
                        self.command_timeout
                    )
                })?,
            output_max: self.command_output_max,
            sandbox: Sandbox::parse(&self.sandbox)?,
            sandbox_read,
        })
    }
}

/// Serve the mesh's tools to an MCP client over stdio (stdout is the
/// protocol; logs go to stderr): the agent that started this process is the
/// teammate, its writes gated by the lead's approval. It leaves the team
/// when the client closes stdin.
#[derive(Debug, Parser)]
#[command(name = "teammate mcp", bin_name = "teammate mcp", version)]
struct McpArgs {
    /// The lead's URL, e.g. http://127.0.0.1:7447 (https:// for a lead with
    /// TLS). Several leads on one database: each URL (repeated, or
    /// comma-separated); the teammate follows the active one.
    #[arg(long, required = true, value_delimiter = ',')]
    lead: Vec<String>,
    /// The member name to join as.
    #[arg(long)]
    name: String,
    /// The role to join with.
    #[arg(long, default_value = "coder")]
    role: String,
    /// The directory tools work in.
    #[arg(long)]
    workspace: PathBuf,
    /// The lead's join token.
    #[arg(long, env = "MESH_JOIN_TOKEN", hide_env_values = true)]
    join_token: String,
    /// Seconds submit_plan waits for the review before it returns "pending"
    /// (the decision then shows in check_inbox).
    #[arg(long, default_value_t = 60)]
    review_wait: u64,
    /// Seconds the lead may be unreachable before the teammate gives up.
    #[arg(long, default_value_t = 60)]
    lead_gone_limit: u64,
    /// Export traces and metrics over OTLP/gRPC to this collector (off by
    /// default; see `teammate --help`).
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    otlp_endpoint: Option<String>,
    #[command(flatten)]
    tls: ClientTls,
    #[command(flatten)]
    commands: CommandArgs,
}

/// A mesh teammate, driven by a script (`--script`), a language model
/// (`--model`), or an MCP client (`teammate mcp`).
///
/// `teammate mcp --help` shows how to serve an MCP client instead.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None, after_help = "To serve an MCP client instead (any agent as the teammate): teammate mcp --help")]
#[command(group(ArgGroup::new("driver").required(true).args(["script", "model"])))]
#[command(group(ArgGroup::new("task_source").args(["task", "task_file"])))]
struct Args {
    /// The lead's URL, e.g. http://127.0.0.1:7447 (https:// for a lead with
    /// TLS). Several leads on one database: each URL (repeated, or
    /// comma-separated); the teammate follows the active one.
    #[arg(long, required = true, value_delimiter = ',')]
    lead: Vec<String>,
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
    /// The most tokens of one model reply [default: 2048, or a quarter of
    /// the context window if less].
    #[arg(long, requires = "model", value_parser = clap::value_parser!(u32).range(16..))]
    max_tokens: Option<u32>,
    /// The request field that carries --max-tokens [default: max_completion_tokens
    /// for OpenAI's API, max_tokens for any other server].
    #[arg(long, requires = "model")]
    max_tokens_field: Option<MaxTokensField>,
    /// The model's context window in tokens [default: what the server says
    /// (llama.cpp, Ollama), 128000 for OpenAI's API, else 8192].
    #[arg(long, requires = "model", value_parser = clap::value_parser!(u32).range(512..))]
    context_window: Option<u32>,
    /// Tokens (prompt and completion) the model may use in all; then the
    /// teammate reports idle until the operator raises it (`lead budget`).
    /// A budget set by the lead wins.
    #[arg(long, requires = "model", value_parser = clap::value_parser!(u64).range(1..))]
    token_budget: Option<u64>,
    /// How each reply is held to one call of the tools the teammate may
    /// call now: schema (a JSON schema in response_format: llama.cpp, vLLM,
    /// LM Studio, Ollama), tool-choice (tool_choice "required" with strict
    /// tools: OpenAI), off (replies parsed as they come), or auto
    /// (tool-choice for OpenAI's API, schema for any other, off from the
    /// first time the server refuses it).
    #[arg(long, requires = "model", default_value = "auto")]
    constrain: Constrain,
    /// llama.cpp's repeat_penalty (1: off) [default: not sent].
    #[arg(long, requires = "model")]
    repeat_penalty: Option<f32>,
    /// llama.cpp's dry_multiplier (0: off) [default: 0.8 on llama.cpp with a
    /// context window up to 32768, else not sent].
    #[arg(long, requires = "model")]
    dry_multiplier: Option<f32>,
    /// The lead's join token.
    #[arg(long, env = "MESH_JOIN_TOKEN", hide_env_values = true)]
    join_token: String,
    /// Seconds the lead may be unreachable before the teammate exits.
    #[arg(long, default_value_t = 60)]
    lead_gone_limit: u64,
    /// Export traces and metrics over OTLP/gRPC to this collector, e.g.
    /// http://localhost:4317 (off by default). OTEL_SERVICE_NAME names the
    /// service (default mesh-teammate).
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    otlp_endpoint: Option<String>,
    #[command(flatten)]
    tls: ClientTls,
    #[command(flatten)]
    commands: CommandArgs,
}

/// The variable that holds the join token.
const JOIN_TOKEN_ENV: &str = "MESH_JOIN_TOKEN";

/// The flag that may hold the join token.
const JOIN_TOKEN_FLAG: &str = "--join-token";

/// The driver chosen on the command line.
#[derive(Debug)]
enum Chosen {
    Script(Box<ScriptDriver>),
    Model(Box<ModelDriver>),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    if std::env::args_os().nth(1).is_some_and(|a| a == "mcp") {
        let args = McpArgs::parse_from(std::env::args_os().skip(1));
        if let Err(code) = confine(&[JOIN_TOKEN_ENV]) {
            return code;
        }
        let code = match runtime() {
            Ok(runtime) => runtime.block_on(async move {
                let endpoint = args.otlp_endpoint.clone();
                mesh_telemetry::exporting("mesh-teammate", endpoint.as_deref(), serve_mcp(args))
                    .await
                    .unwrap_or_else(|e| {
                        eprintln!("teammate mcp: {e}");
                        2
                    })
            }),
            Err(code) => return code,
        };
        // Exits at once: a read of stdin in progress would hold up the
        // runtime's shutdown until the client closed it.
        std::process::exit(code);
    }
    let args = Args::parse();
    let leads = match Leads::new(&args.lead, args.tls.clone()) {
        Ok(leads) => leads,
        Err(e) => return usage(&e.to_string()),
    };
    let config = Config {
        leads,
        name: args.name.clone(),
        role: args.role.clone(),
        workspace: args.workspace.clone(),
        join_token: args.join_token.clone(),
        lead_gone_limit: Duration::from_secs(args.lead_gone_limit),
        commands: match args.commands.limits() {
            Ok(limits) => limits,
            Err(e) => return usage(&e),
        },
        token_budget: args.token_budget,
        decoding: None,
    };
    let chosen = match (&args.script, &args.model) {
        (Some(script), _) => script_driver(script).map(|d| Chosen::Script(Box::new(d))),
        (None, Some(model)) => model_driver(&args, model).map(|d| Chosen::Model(Box::new(d))),
        (None, None) => Err("one of --script and --model is required".into()),
    };
    let chosen = match chosen {
        Ok(chosen) => chosen,
        Err(e) => return usage(&e),
    };
    let mut secrets = vec![JOIN_TOKEN_ENV];
    if args.model.is_some() {
        // The model's key, read with its driver.
        secrets.push(&args.api_key_env);
    }
    if let Err(code) = confine(&secrets) {
        return code;
    }
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let endpoint = args.otlp_endpoint.clone();
    let result = runtime.block_on(async move {
        let session = async move {
            match chosen {
                Chosen::Script(driver) => run(config, *driver).await,
                Chosen::Model(mut driver) => {
                    let mut config = config;
                    let decoding = driver.decide().await;
                    config.decoding = Some(shared::pb::Decoding {
                        model: driver.model().to_owned(),
                        server: decoding.server.kind.as_str().to_owned(),
                        constrain: decoding.constrain.as_str().to_owned(),
                        why: decoding.why,
                    });
                    run(config, *driver).await
                }
            }
        };
        // The last spans and metrics go out before the teammate exits.
        mesh_telemetry::exporting("mesh-teammate", endpoint.as_deref(), session)
            .await
            .unwrap_or_else(|e| Err(teammate::session::SessionError::Setup(e)))
    });
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

/// Before any thread starts: hides the secrets in `variables` and the join
/// token flag from the commands (see `teammate::secrets`), and makes this
/// process the reaper of everything its commands leave behind (see
/// `teammate::reaper`). Exit code 1 if either cannot be done.
fn confine(variables: &[&str]) -> Result<(), ExitCode> {
    if let Err(e) = teammate::secrets::hide(variables, &[JOIN_TOKEN_FLAG]) {
        eprintln!("teammate: could not hide the join token from commands: {e}");
        return Err(ExitCode::FAILURE);
    }
    if let Err(e) = teammate::reaper::adopt_orphans() {
        eprintln!("teammate: could not become the subreaper of its commands: {e}");
        return Err(ExitCode::FAILURE);
    }
    Ok(())
}

/// The multi-threaded runtime the session runs on.
fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("teammate: could not start the runtime: {e}");
            ExitCode::FAILURE
        })
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
    if let Some(field) = args.max_tokens_field {
        chat.max_tokens_field = field;
    }
    chat.constrain = args.constrain;
    let client = ChatClient::new(chat).map_err(|e| e.to_string())?;
    Ok(ModelDriver::new(
        client,
        Brief {
            name: args.name.clone(),
            role: args.role.clone(),
            task,
            system_prompt,
            max_turns: args.max_turns,
            max_tokens: args.max_tokens,
            context_window: args.context_window,
            token_budget: args.token_budget,
            workspace: Some(args.workspace.clone()),
            penalties: Penalties {
                repeat_penalty: args.repeat_penalty,
                dry_multiplier: args.dry_multiplier,
            },
        },
    ))
}

/// `teammate mcp`: joins, serves the MCP client on stdio until it closes
/// stdin, then leaves the team at once; the exit code (0 unless the
/// session failed).
async fn serve_mcp(args: McpArgs) -> i32 {
    use rmcp::ServiceExt;

    let leads = match Leads::new(&args.lead, args.tls.clone()) {
        Ok(leads) => leads,
        Err(e) => {
            eprintln!("teammate mcp: {e}");
            return 2;
        }
    };
    let config = Config {
        leads,
        name: args.name.clone(),
        role: args.role.clone(),
        workspace: args.workspace.clone(),
        join_token: args.join_token.clone(),
        lead_gone_limit: Duration::from_secs(args.lead_gone_limit),
        commands: match args.commands.limits() {
            Ok(limits) => limits,
            Err(e) => {
                eprintln!("teammate mcp: {e}");
                return 2;
            }
        },
        token_budget: None,
        decoding: None,
    };
    let name = Escaped(&args.name).to_string();
    // The session stops on a signal, or when the client goes away.
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<()>();
    let stop = async move {
        tokio::select! {
            () = shared::signal::stop_signal() => {}
            _ = closed_rx => {}
        }
    };
    let session = match Session::join(config, stop).await {
        Ok(session) => session,
        Err(e) => {
            eprintln!("teammate {name}: {}", Escaped(&e.to_string()));
            return 1;
        }
    };
    let leaver = session.leaver();
    let (server, mut driver) = mcp::pair(Gate::Plan.tools(), Duration::from_secs(args.review_wait));
    let running = match server.clone().serve(rmcp::transport::stdio()).await {
        Ok(running) => running,
        Err(e) => {
            // The client left before the handshake ended: so does the member.
            tracing::info!(member = %name, error = %e, "the MCP client went away before initializing");
            return leave(leaver, &name, "the MCP client closed the session").await;
        }
    };
    driver.connect(running.peer().clone());
    let mut run = tokio::spawn(session.run(driver));
    let waiting = running.waiting();
    tokio::pin!(waiting);
    tokio::select! {
        quit = &mut waiting => {
            tracing::info!(member = %name, reason = ?quit, "the MCP client closed the session");
            let _ = closed_tx.send(());
            match run.await {
                Ok(Ok(Exit::Shutdown)) => 0,
                Ok(Ok(Exit::Signal)) => {
                    leave(leaver, &name, "the MCP client closed the session").await
                }
                Ok(Err(e)) => {
                    eprintln!("teammate {name}: {}", Escaped(&e.to_string()));
                    1
                }
                Err(e) => {
                    eprintln!("teammate {name}: the session task failed: {e}");
                    1
                }
            }
        }
        ended = &mut run => {
            // The session ended first: a shutdown was agreed, a signal came,
            // or the lead went away. The client keeps check_inbox until it
            // closes stdin.
            let code = match ended {
                Ok(Ok(Exit::Shutdown)) => 0,
                Ok(Ok(Exit::Signal)) => {
                    return leave(leaver, &name, "stopped by signal").await;
                }
                Ok(Err(e)) => {
                    let why = Escaped(&e.to_string()).to_string();
                    eprintln!("teammate {name}: {why}");
                    server.end(why);
                    1
                }
                Err(e) => {
                    server.end(format!("the session task failed: {e}"));
                    1
                }
            };
            let _ = waiting.await;
            code
        }
    }
}

/// Leaves the team; exit 0 whether or not the lead heard (it would mark
/// the member gone after its grace period anyway).
async fn leave(leaver: teammate::session::Leaver, name: &str, reason: &str) -> i32 {
    match leaver.leave(reason).await {
        Ok(()) => tracing::info!(member = %name, reason, "left the team"),
        Err(e) => {
            tracing::warn!(member = %name, error = %Escaped(&e.to_string()), "could not tell the lead the member left")
        }
    }
    0
}
