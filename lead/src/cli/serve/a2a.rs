//! `lead serve`'s A2A flags, checked: `--a2a-open NAME` (a name, and a
//! loopback address unless `--insecure`) and `--a2a-card FILE` (the card's
//! words for the team).

use super::ServeArgs;

/// What the A2A flags say.
pub(super) struct A2aFlags {
    /// Who an A2A caller without a token acts as.
    pub(super) open: Option<String>,
    /// The agent card's own words for the team.
    pub(super) card: serde_json::Map<String, serde_json::Value>,
}

/// `--a2a-open` and `--a2a-card`, checked.
pub(super) fn checked(args: &ServeArgs) -> anyhow::Result<A2aFlags> {
    let open = args
        .a2a_open
        .as_deref()
        .map(|name| {
            mesh_core::names::Name::parse("--a2a-open", name)
                .map(|_| name.to_owned())
                .map_err(|e| anyhow::anyhow!("{e}"))
        })
        .transpose()?;
    if open.is_some() && !args.listen.ip().is_loopback() && !args.insecure {
        anyhow::bail!(
            "--a2a-open: refusing to let callers without a token decide beyond this host \
             (--listen {}); listen on loopback, or say --insecure",
            args.listen
        );
    }
    let card = match &args.a2a_card {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("--a2a-card {}: {e}", path.display()))?;
            crate::a2a::card::own_fields(&text)
                .map_err(|e| anyhow::anyhow!("--a2a-card {}: {e}", path.display()))?
        }
        None => serde_json::Map::new(),
    };
    Ok(A2aFlags { open, card })
}
