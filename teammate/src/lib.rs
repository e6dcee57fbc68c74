//! A mesh teammate: joins a lead, plans with read-only tools, submits its plan
//! for approval, and works only within the grant that comes back.

mod backoff;
pub mod catalog;
mod client;
pub mod command;
pub mod config;
pub mod driver;
pub mod error;
pub mod gate;
pub mod inbox;
pub mod mcp;
pub mod model;
mod plan_state;
mod protocol_state;
pub mod reaper;
mod results;
pub mod sandbox;
pub mod script;
pub mod secrets;
mod seen;
pub mod session;
mod tasks;
pub mod tools;
mod traces;
