//! mesh's core: the team's rules as pure types, with no I/O. No async, no
//! clock (time comes in as unix milliseconds), no files, no processes, no
//! protobuf: the edges (`shared`'s wire conversions, the lead's runtime and
//! services, the teammate) translate to and from these types and do the I/O.
//!
//! - [`protocol`]: the one state machine every request follows
//!   (pending → approved | rejected | expired), in a [`protocol::Tracker`];
//! - [`lifecycle`]: a member's life (working, idle, disconnected, shutting
//!   down, terminated);
//! - [`members`]: who is on the team, their tokens' digests, join order
//!   and grace periods;
//! - [`tasks`]: the shared task board; [`holds`]: who holds which files;
//! - [`grant`], [`plan`], [`policy`]: what a teammate may do, what it
//!   proposes, and the criteria that review it;
//! - [`access`]: who may call what, once the edge knows who calls;
//! - [`op`]: what a caller can do, as the edges hand it to the lead's hub;
//! - [`chain`]: the reviewer chain's rule (what follows each verdict);
//! - [`effect`]: what applying an op asks of the runtime, once durable;
//! - [`team`]: the requests, the tasks, the holds and the usage as one value, and
//!   what of them the store must make durable;
//! - [`usage`]: what each model user used (per process, counted once),
//!   and the members' token budgets;
//! - [`refusal`]: why the core refuses an op ([`refusal::CoreError`]);
//! - [`rate`]: a token bucket; [`names`], [`limits`], [`error`], [`text`]:
//!   the vocabulary and the bounds every field is checked against.

pub mod access;
pub mod chain;
pub mod decoding;
pub mod display;
pub mod effect;
pub mod error;
pub mod grant;
pub mod holds;
pub mod lifecycle;
pub mod limits;
pub mod members;
pub mod names;
pub mod op;
pub mod owners;
pub mod plan;
pub mod policy;
pub mod protocol;
pub mod rate;
pub mod refusal;
pub mod result;
pub mod sandbox;
pub mod tasks;
pub mod team;
pub mod text;
pub mod usage;
pub(crate) mod words;
