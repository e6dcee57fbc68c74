//! Why a model call failed, as its caller sees it.

/// Why a model call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ChatError {
    /// A 4xx other than 429: retrying will not help.
    #[error("the model server at {url} refused the request: HTTP {status}: {message}")]
    Refused {
        url: String,
        status: u16,
        message: String,
    },
    /// Every attempt failed (connection errors, 429, 5xx, broken replies).
    #[error("the model server at {url} failed {attempts} attempts; the last: {last}")]
    Unavailable {
        url: String,
        attempts: u32,
        last: String,
    },
    /// The server failed the reply itself, mid-stream, on every attempt
    /// (e.g. llama.cpp: "the model produced output that does not match the
    /// expected format"): the model may do better if told.
    #[error(
        "the model server at {url} could not finish a reply {attempts} times; the last: {message}"
    )]
    Format {
        url: String,
        attempts: u32,
        message: String,
    },
    /// The request could not be made (a malformed URL).
    #[error("{0}")]
    Setup(String),
}
