//! `lead store copy`: a stopped lead's state dir copied into an empty
//! PostgreSQL database, checked record by record (see `store/copy.rs`).

use std::path::Path;

use super::CliError;
use crate::store::{copy_to_postgres, PgTarget};

/// `--to`: a PostgreSQL URL, as `lead serve --store` takes it.
pub fn target(value: &str) -> Result<PgTarget, String> {
    PgTarget::parse("--to", value).map_err(|e| e.to_string())
}

/// `lead store copy --from DIR --to URL`: what was copied, one line.
pub async fn copy(from: &Path, to: &PgTarget) -> Result<String, CliError> {
    let copied = copy_to_postgres(from, to).await?;
    Ok(format!("{copied}\n"))
}
