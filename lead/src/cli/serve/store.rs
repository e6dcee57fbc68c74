//! `lead serve --store`: where state is kept, and a lead's name in a
//! shared PostgreSQL store's lease.

use crate::{state::StateDir, store::PgTarget};

/// `--store`: where state is kept.
#[derive(Debug, Clone)]
pub(super) enum StoreArg {
    /// `<state-dir>/mesh.db`: survives restarts.
    Sqlite,
    /// Memory: gone when the lead stops.
    Memory,
    /// A PostgreSQL database several leads may share.
    Postgres(Box<PgTarget>),
}

pub(super) fn store_arg(value: &str) -> Result<StoreArg, String> {
    match value {
        "sqlite" => Ok(StoreArg::Sqlite),
        "memory" => Ok(StoreArg::Memory),
        url if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            PgTarget::parse("--store", url)
                .map(|target| StoreArg::Postgres(Box::new(target)))
                .map_err(|e| e.to_string())
        }
        other => Err(format!(
            "{other:?} is not sqlite, memory or a postgres:// URL"
        )),
    }
}

/// This lead's name in a PostgreSQL store's lease: the host's name and an
/// id kept in the state dir, so a restarted lead takes its lease back at once.
pub(super) fn holder(state: &StateDir) -> anyhow::Result<String> {
    let id = state.token(None, "lead.id")?;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let short: String = id.chars().take(8).collect();
    Ok(format!("{}/{short}", host.trim()))
}
