//! The API crate both binaries use: the generated `mesh.v1` types and
//! services, and [`wire`], the one place they are converted to and from the
//! core's types (`mesh-core`, re-exported here: the protocol state machine,
//! grants, policy, names).

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
pub mod chat;
pub mod display;
pub mod plan;
pub mod procfs;
pub mod signal;
pub mod telemetry;
pub mod transport;
pub mod wire;

/// The pure types live in `mesh-core`; these are the same modules.
pub use mesh_core::{
    access, chain, effect, error, grant, holds, lifecycle, limits, members, names, op, policy,
    protocol, rate, refusal, result, tasks, team, usage,
};
