//! Where the executables are: the `teammate` beside this `lead` (built
//! first under `cargo run`).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

/// The path of `name` in the directory of this `lead` executable.
pub fn beside_lead(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the lead's own executable")?;
    let dir = exe
        .parent()
        .context("the lead's executable has no directory")?;
    Ok(dir.join(name))
}

/// The `teammate` executable beside this `lead`. Under `cargo run`, where
/// only `lead` was built, it is built first with the same profile.
pub fn teammate_beside_lead() -> anyhow::Result<PathBuf> {
    let bin = beside_lead("teammate")?;
    let exe = std::env::current_exe().context("cannot find the lead's own executable")?;
    let dir = exe
        .parent()
        .context("the lead's executable has no directory")?;
    if bin.is_file() {
        return Ok(bin);
    }
    if let (Ok(cargo), Ok(manifest)) = (std::env::var("CARGO"), std::env::var("CARGO_MANIFEST_DIR"))
    {
        let release = dir.file_name().is_some_and(|n| n == "release");
        eprintln!(
            "lead: building the teammate binary beside {} ...",
            exe.display()
        );
        let mut build = std::process::Command::new(cargo);
        build
            .args(["build", "-p", "teammate", "--manifest-path"])
            .arg(Path::new(&manifest).join("Cargo.toml"));
        if release {
            build.arg("--release");
        }
        let status = build.status().context("running cargo build -p teammate")?;
        if status.success() && bin.is_file() {
            return Ok(bin);
        }
    }
    bail!(
        "no teammate binary at {}: build it with `cargo build --release -p teammate`, or pass --teammate-bin",
        bin.display()
    )
}
