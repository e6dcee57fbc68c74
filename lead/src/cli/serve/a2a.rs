//! `lead serve`'s A2A flags, checked: `--a2a-open NAME` (a name, and a
//! loopback address unless `--insecure`) and `--a2a-card FILE` (the card's
//! words for the team) and `--a2a-push-allow HOST` (a bare host).

use super::ServeArgs;

/// What the A2A flags say.
pub(super) struct A2aFlags {
    /// Who an A2A caller without a token acts as.
    pub(super) open: Option<String>,
    /// The agent card's own words for the team.
    pub(super) card: serde_json::Map<String, serde_json::Value>,
    /// Hosts push notifications may be posted to.
    pub(super) push_allow: Vec<String>,
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
    let mut push_allow = Vec::new();
    for host in &args.a2a_push_allow {
        let host = host.trim();
        // A host, as a URL names it: no scheme, port, path or wildcard.
        let bare = reqwest::Url::parse(&format!("http://{host}/"))
            .ok()
            .and_then(|url| url.host_str().map(str::to_owned))
            .filter(|parsed| parsed.eq_ignore_ascii_case(host));
        match bare {
            Some(host) => push_allow.push(host),
            None => anyhow::bail!(
                "--a2a-push-allow {host:?}: a host name or address is expected \
                 (e.g. hooks.example.com or 127.0.0.1), without scheme, port or path"
            ),
        }
    }
    Ok(A2aFlags {
        open,
        card,
        push_allow,
    })
}
