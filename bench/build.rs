//! Compiles the floor's echo service with protox (no system protoc).

use std::{env, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?).join("proto");
    let proto = dir.join("echo.proto");
    println!("cargo:rerun-if-changed={}", proto.display());
    let fds = protox::compile([&proto], [&dir])?;
    tonic_prost_build::configure().compile_fds(fds)?;
    Ok(())
}
