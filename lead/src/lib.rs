//! The mesh lead: the gRPC server that owns the members, the inboxes and every
//! protocol request; the operator commands that talk to it; and the demo.

mod a2a;
pub mod audit;
pub mod callers;
pub mod chain;
pub mod children;
pub mod cli;
mod committer;
pub mod config;
pub mod connections;
mod console;
pub mod demo;
pub mod error;
mod from_wire;
pub mod git;
mod group;
pub mod history;
pub mod hub;
mod inboxes;
mod launch;
pub mod leadership;
pub(crate) mod notices;
mod outbox;
mod paging;
pub mod render;
mod reset;
pub mod reviewer;
pub mod server;
pub mod service;
pub mod state;
pub mod stats;
pub mod store;
pub mod telemetry;
pub mod tls;

pub use config::Config;
pub use console::SignIn;
pub use server::{run, Listeners};
