//! Compiles `proto/lf/a2a/v1/a2a.proto` (A2A v1.0.1, as the specification
//! publishes it, with the `google/api` files it imports for its HTTP
//! annotations) with `protox`, so that a fresh machine needs no `protoc`.

use std::{env, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let proto = proto_dir.join("lf/a2a/v1/a2a.proto");
    println!("cargo:rerun-if-changed={}", proto.display());

    let fds = protox::compile([&proto], [&proto_dir])?;
    let out = PathBuf::from(env::var("OUT_DIR")?);
    std::fs::write(
        out.join("a2a_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(false)
        .compile_fds(fds)?;
    Ok(())
}
