//! Why a teammate failed: the error of the session and of its client.

use tonic::Status;

/// Why a teammate failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The lead refused a call.
    #[error("{rpc}: {}: {}", .status.code().description(), .status.message())]
    Rpc { rpc: &'static str, status: Status },
    /// The lead could not be reached for longer than the limit.
    #[error("the lead has been unreachable for longer than the limit: {0}")]
    LeadGone(String),
    /// The setup is wrong (URL, token, workspace, grant).
    #[error("{0}")]
    Setup(String),
    /// The driver cannot go on (the model server refuses every request).
    #[error("{0}")]
    Driver(String),
}
