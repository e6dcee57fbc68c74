//! The lead's errors, and the one place they become gRPC statuses and the
//! one place they become the console's HTTP statuses.

use mesh_core::{
    access::Refused, error::FieldError, protocol::TransitionError, refusal::CoreError,
};

/// Why the lead refused a call.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// No token, or one the lead does not know.
    #[error("{0}")]
    Unauthenticated(String),
    /// A known token that may not make this call.
    #[error("{0}")]
    PermissionDenied(String),
    /// A field is missing or malformed.
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// A named thing (member, request) does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The name or id is taken.
    #[error("{0}")]
    AlreadyExists(String),
    /// The call does not fit the current state.
    #[error("{0}")]
    FailedPrecondition(String),
    /// A limit was reached (an inbox is full).
    #[error("{0}")]
    ResourceExhausted(String),
    /// A value is past the valid range (`after_seq` beyond the newest envelope).
    #[error("{0}")]
    OutOfRange(String),
    /// The protocol state machine refused the transition.
    #[error(transparent)]
    Transition(#[from] TransitionError),
    /// The lead is stopping.
    #[error("the lead is shutting down")]
    ShuttingDown,
    /// Something on the lead's side failed (spawning a process, say).
    #[error("{0}")]
    Internal(String),
}

impl From<Refused> for HubError {
    fn from(refusal: Refused) -> Self {
        match refusal {
            Refused::Unauthenticated(m) => HubError::Unauthenticated(m),
            Refused::PermissionDenied(m) => HubError::PermissionDenied(m),
        }
    }
}

impl From<CoreError> for HubError {
    fn from(err: CoreError) -> Self {
        match err {
            CoreError::Invalid(e) => HubError::Invalid(e),
            CoreError::NotFound(m) => HubError::NotFound(m),
            CoreError::Taken(m) => HubError::AlreadyExists(m),
            CoreError::Conflict(m) => HubError::FailedPrecondition(m),
            CoreError::NotYours(m) => HubError::PermissionDenied(m),
            CoreError::LimitReached(m) => HubError::ResourceExhausted(m),
            CoreError::OutOfRange(m) => HubError::OutOfRange(m),
            CoreError::Transition(t) => HubError::Transition(t),
            CoreError::Caller(refused) => HubError::from(refused),
        }
    }
}

/// A stream's end as gRPC says it: the one place it is mapped.
impl From<crate::outbox::StreamEnd> for tonic::Status {
    fn from(end: crate::outbox::StreamEnd) -> Self {
        use crate::outbox::StreamEnd;
        match end {
            StreamEnd::Behind(m) => tonic::Status::resource_exhausted(m),
            StreamEnd::Replaced(m) => tonic::Status::aborted(m),
            StreamEnd::Unacknowledged(m) => tonic::Status::deadline_exceeded(m),
            StreamEnd::Gone(m) => tonic::Status::unavailable(m),
        }
    }
}

impl From<HubError> for tonic::Status {
    fn from(err: HubError) -> Self {
        use tonic::Status;
        let message = err.to_string();
        match err {
            HubError::Unauthenticated(_) => Status::unauthenticated(message),
            HubError::PermissionDenied(_) => Status::permission_denied(message),
            HubError::Invalid(_) => Status::invalid_argument(message),
            HubError::NotFound(_) => Status::not_found(message),
            HubError::AlreadyExists(_) => Status::already_exists(message),
            HubError::FailedPrecondition(_) => Status::failed_precondition(message),
            HubError::ResourceExhausted(_) => Status::resource_exhausted(message),
            HubError::OutOfRange(_) => Status::out_of_range(message),
            HubError::ShuttingDown => Status::unavailable(message),
            HubError::Internal(_) => Status::internal(message),
            HubError::Transition(t) => match t {
                TransitionError::NotFound(_) => Status::not_found(message),
                TransitionError::WrongType { .. } | TransitionError::AlreadyResolved { .. } => {
                    Status::failed_precondition(message)
                }
                TransitionError::NotTheAnswerer { .. } => Status::permission_denied(message),
                TransitionError::IdReused(_) => Status::already_exists(message),
            },
        }
    }
}

impl HubError {
    /// The console's HTTP status for this error.
    pub(crate) fn http_status(&self) -> http::StatusCode {
        use http::StatusCode;
        match self {
            HubError::Invalid(_) | HubError::OutOfRange(_) => StatusCode::BAD_REQUEST,
            HubError::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            HubError::PermissionDenied(_) => StatusCode::FORBIDDEN,
            HubError::NotFound(_) => StatusCode::NOT_FOUND,
            HubError::AlreadyExists(_) | HubError::FailedPrecondition(_) => StatusCode::CONFLICT,
            HubError::ResourceExhausted(_) => StatusCode::TOO_MANY_REQUESTS,
            HubError::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            HubError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            HubError::Transition(t) => match t {
                TransitionError::NotFound(_) => StatusCode::NOT_FOUND,
                TransitionError::WrongType { .. }
                | TransitionError::AlreadyResolved { .. }
                | TransitionError::IdReused(_) => StatusCode::CONFLICT,
                TransitionError::NotTheAnswerer { .. } => StatusCode::FORBIDDEN,
            },
        }
    }
}
