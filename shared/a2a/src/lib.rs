//! A2A v1.0 (`lf.a2a.v1`), the agent ecosystem's protocol for one agent
//! handing another work: the messages and the `A2AService` server trait,
//! generated from the specification's `a2a.proto` (v1.0.1, on the wire the
//! same as v1.0.0). The lead serves it (`lead/src/a2a`).

pub mod pb {
    //! Generated from `proto/lf/a2a/v1/a2a.proto`.
    #![allow(
        missing_docs,
        unreachable_pub,
        missing_debug_implementations,
        clippy::all
    )]
    tonic::include_proto!("lf.a2a.v1");

    /// The encoded file descriptor set, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/a2a_descriptor.bin"));
}
