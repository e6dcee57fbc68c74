//! The team over a real lead: the handshakes, inboxes, joining, tasks, results,
//! usage, the bounds and hostile input (with the fuzzer), who may call what,
//! the reviewer chain, the audit trail, secrets kept out of output, the CLI,
//! and a teammate's own limits.
//!
//! One test binary (`cargo test -p mesh-tests --test team`), each module linked once.

mod audit;
mod authorization;
mod bounds;
mod chain;
mod cli;
mod fuzz;
mod handshakes;
mod hostile;
mod inbox;
mod joining;
mod results;
mod secrets;
mod status_table;
mod tasks;
mod teammate_limits;
mod usage;
