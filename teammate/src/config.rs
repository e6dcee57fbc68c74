//! How a teammate is set up: what `main` builds from the command line and
//! the session and its client run with.

use std::{path::PathBuf, time::Duration};

use shared::leads::Leads;

use crate::command::CommandLimits;

/// How a teammate is set up.
#[derive(Debug, Clone)]
pub struct Config {
    /// The lead's URL, or the URLs of several leads on one database (the
    /// teammate follows the active one), and what reaches them over TLS.
    pub leads: Leads,
    /// The member name to join as.
    pub name: String,
    /// The role to join with.
    pub role: String,
    /// Where tools read and write.
    pub workspace: PathBuf,
    /// The lead's join token.
    pub join_token: String,
    /// How long the lead may be unreachable before the teammate gives up.
    pub lead_gone_limit: Duration,
    /// How `run_command` runs.
    pub commands: CommandLimits,
    /// The token budget to join with (`--token-budget`).
    pub token_budget: Option<u64>,
    /// How the model's replies are held to one call, said at join (a
    /// model teammate's, once its server was asked).
    pub decoding: Option<shared::pb::Decoding>,
}
