//! Input errors that name the field at fault ([`FieldError`]); with the
//! core's other refusals they make a [`crate::refusal::CoreError`].

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

    /// The same problem, in `field`: a check run without a name (spelling
    /// out `plan.files[2]` costs an allocation every time) is named where
    /// it fails.
    pub fn at(self, field: impl Into<String>) -> Self {
        Self::new(field, self.problem)
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.problem)
    }
}

impl std::error::Error for FieldError {}
