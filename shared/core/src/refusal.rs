//! Why the core refuses an op: [`CoreError`], by kind, in the core's words.
//! Each kind becomes one gRPC status and one HTTP status, each mapping in one
//! place at the lead's edge (`lead/src/error.rs`).

use crate::{access::Refused, error::FieldError, protocol::TransitionError};

/// Why the core refused an op.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    /// A field is missing or malformed.
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// No such thing: a task, a request, a member, or none claimable.
    #[error("{0}")]
    NotFound(String),
    /// A name or an id is taken.
    #[error("{0}")]
    Taken(String),
    /// The op does not fit where things stand (a task claimed, completed or
    /// blocked; a plan already approved).
    #[error("{0}")]
    Conflict(String),
    /// Another party's to do (only a task's owner completes it).
    #[error("{0}")]
    NotYours(String),
    /// A position past the end (an inbox's `seq`).
    #[error("{0}")]
    OutOfRange(String),
    /// A limit was reached; the message names it.
    #[error("{0}")]
    LimitReached(String),
    /// The request state machine refused the transition.
    #[error(transparent)]
    Transition(#[from] TransitionError),
    /// The caller may not make this call.
    #[error(transparent)]
    Caller(#[from] Refused),
}
