//! The API crate both binaries use: the generated `mesh.v1` types and
//! services, the protocol state machine, grants, policy and names.

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
pub mod error;
pub mod grant;
pub mod holds;
pub mod lifecycle;
pub mod limits;
pub mod names;
pub mod plan;
pub mod policy;
pub mod procfs;
pub mod protocol;
pub mod rate;
pub mod signal;
pub mod tasks;
pub mod transport;
