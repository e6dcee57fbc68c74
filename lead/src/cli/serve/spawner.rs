//! `lead serve`: how the lead starts its teammates (`lead spawn`), from the
//! flags.

use std::time::Duration;

use shared::{leads::Leads, transport::ClientTls};

use super::ServeArgs;
use crate::{callers::Tokens, children::Spawner, state::StateDir};

/// The spawner: the teammates it starts dial this lead at `lead_url` (and
/// its `--peer`s), trusting its certificate when it serves TLS.
pub(super) fn spawner(
    args: &ServeArgs,
    state: &StateDir,
    tokens: &Tokens,
    lead_url: &str,
    tls: bool,
) -> anyhow::Result<Spawner> {
    let mut spawn_tls = args.spawn_tls.clone();
    if tls && spawn_tls.ca.is_none() {
        spawn_tls.ca = args
            .tls_cert
            .as_deref()
            .map(std::path::absolute)
            .transpose()?;
    }
    let teammate_bin = match &args.teammate_bin {
        Some(bin) => bin.clone(),
        None => crate::demo::beside_lead("teammate")?,
    };
    let peers = match args.peer.is_empty() {
        true => String::new(),
        false => Leads::new(&args.peer, ClientTls::default())
            .map(|peers| format!(",{}", peers.joined()))
            .map_err(|e| anyhow::anyhow!("--peer: {e}"))?,
    };
    Ok(Spawner {
        teammate_bin,
        lead_url: format!("{lead_url}{peers}"),
        tls: if tls { spawn_tls } else { ClientTls::default() },
        join_token: tokens.join.clone(),
        state_dir: std::path::absolute(&state.root)?,
        kill_grace: Duration::from_secs(args.kill_grace),
        root: args
            .spawn_root
            .canonicalize()
            .map_err(|e| anyhow::anyhow!("--spawn-root {}: {e}", args.spawn_root.display()))?,
        model_keys: model_keys(args.model_key_env.clone())?,
        repo: None,
        otlp_endpoint: args.otlp_endpoint.clone(),
    })
}

/// The `--model-key-env` names: variables' names, none of the lead's own
/// `MESH_` ones.
fn model_keys(names: Vec<String>) -> anyhow::Result<Vec<String>> {
    for name in &names {
        let valid = !name.is_empty()
            && name
                .chars()
                .enumerate()
                .all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()));
        if !valid {
            anyhow::bail!("--model-key-env: {name:?} is not an environment variable's name");
        }
        if name.starts_with("MESH_") {
            anyhow::bail!(
                "--model-key-env: {name}: the lead's own MESH_ variables are not passed on"
            );
        }
    }
    Ok(names)
}
