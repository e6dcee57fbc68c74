//! `teammate`: parses the command line and runs one session.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use clap::Parser;
use shared::display::Escaped;
use teammate::{
    driver::ScriptDriver,
    session::{Config, Exit, Session},
};

/// A mesh teammate driven by a script.
#[derive(Debug, Parser)]
#[command(version, about)]
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
    script: PathBuf,
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
    let text = match std::fs::read_to_string(&args.script) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("teammate: --script {}: {e}", args.script.display());
            return ExitCode::from(2);
        }
    };
    let driver = match ScriptDriver::parse(&text) {
        Ok(driver) => driver,
        Err(e) => {
            eprintln!("teammate: {}: {e}", args.script.display());
            return ExitCode::from(2);
        }
    };
    let config = Config {
        lead_url: args.lead,
        name: args.name.clone(),
        role: args.role,
        workspace: args.workspace,
        join_token: args.join_token,
        lead_gone_limit: Duration::from_secs(args.lead_gone_limit),
    };
    let result = match Session::join(config, Box::new(driver), shared::signal::stop_signal()).await
    {
        Ok(session) => session.run().await,
        Err(e) => Err(e),
    };
    match result {
        Ok(Exit::Shutdown) => {
            tracing::info!(member = %args.name, "shut down on request");
            ExitCode::SUCCESS
        }
        Ok(Exit::Signal) => {
            tracing::info!(member = %args.name, "stopped by signal after the tool call in progress");
            ExitCode::from(143)
        }
        Err(e) => {
            // The error may quote the lead's message: peer text.
            eprintln!(
                "teammate {}: {}",
                Escaped(&args.name),
                Escaped(&e.to_string())
            );
            ExitCode::FAILURE
        }
    }
}
