//! Where the executables are: the `teammate` beside this `lead`.

use std::path::PathBuf;

use anyhow::{bail, Context};

/// The path of `name` in the directory of this `lead` executable.
pub fn beside_lead(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the lead's own executable")?;
    let dir = exe
        .parent()
        .context("the lead's executable has no directory")?;
    Ok(dir.join(name))
}

/// The `teammate` executable beside this `lead`; if it is missing, an
/// error that says how to build both.
pub fn teammate_beside_lead() -> anyhow::Result<PathBuf> {
    let bin = beside_lead("teammate")?;
    if bin.is_file() {
        return Ok(bin);
    }
    bail!(
        "no teammate binary at {}: build both with `cargo build --release -p lead -p teammate` (or pass --teammate-bin)",
        bin.display()
    )
}
