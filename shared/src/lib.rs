//! The wire crate both binaries use: the generated `mesh.v1` types and
//! services, and [`wire`], the one place they are converted to and from the
//! core's types (`mesh-core`, which the binaries name themselves; nothing of
//! it is re-exported here), with the transport (TLS, and [`leads`]: which of
//! several leads is active), bearer tokens, and the process helpers
//! (`procfs`, `signal`) the binaries share.

pub mod pb {
    //! Generated from `proto/mesh/v1/mesh.proto`.
    #![allow(
        missing_docs,
        unreachable_pub,
        missing_debug_implementations,
        clippy::all
    )]
    tonic::include_proto!("mesh.v1");

    /// The encoded file descriptor set, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/mesh_descriptor.bin"));
}

pub mod auth;
pub mod leads;
pub mod plan;
pub mod procfs;
pub mod signal;
pub mod transport;
pub mod wire;
