//! Why the core refuses an op: [`CoreError`], by kind, in the core's words
//! (each kind becomes one gRPC status and one HTTP status, each mapping in
//! one place at the lead's edge); and [`FieldError`], an input error that
//! names the field at fault.

use std::fmt;

/// One field of a request is missing or malformed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field's path in the request, e.g. `plan.files[2]`.
    pub field: String,
    /// What is wrong with it.
    pub problem: String,
}

/// The longest `problem` kept: an error that quotes a peer's value must not
/// grow with it (a status travels in a header, which clients bound).
pub const PROBLEM_MAX: usize = 1024;

impl FieldError {
    /// `field`: `problem`, the problem cut to [`PROBLEM_MAX`] bytes.
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            field: crate::text::cut(&field.into(), 256),
            problem: crate::text::cut(&problem.into(), PROBLEM_MAX),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.problem)
    }
}

impl std::error::Error for FieldError {}

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
    /// A limit was reached; the message names it.
    #[error("{0}")]
    LimitReached(String),
    /// The request state machine refused the transition.
    #[error(transparent)]
    Transition(#[from] crate::protocol::TransitionError),
}
