//! A mesh teammate: joins a lead, plans with read-only tools, submits its plan
//! for approval, and works only within the grant that comes back.

pub mod catalog;
pub mod command;
pub mod driver;
pub mod gate;
pub mod inbox;
pub mod mcp;
pub mod model;
pub mod reaper;
pub mod script;
pub mod secrets;
pub mod session;
pub mod tools;
