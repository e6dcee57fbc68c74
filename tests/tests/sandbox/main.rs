//! run_command's sandbox, tried by real escape attempts: what a command may
//! reach under each mode, what the operator is shown, and where a command's
//! reach stops.
//!
//! One test binary (`cargo test -p mesh-tests --test sandbox`), each module linked once.

mod command_reach;
mod sandbox;
mod sandbox_seen;
