//! A2A's errors (the specification's §3.3 and §10.6): a gRPC status with a
//! `google.rpc.ErrorInfo` in the `a2a-protocol.org` domain whose reason is
//! the error's name, so that an A2A client maps it whatever the code.
//!
//! The codes are A2A v1.0.0's, which the conformance kit (branch 1.0-dev)
//! and a2a-sdk 1.0 check: UNIMPLEMENTED for an unsupported operation, a
//! version or push notifications (v1.0.1 says FAILED_PRECONDITION for
//! these; clients of either map by the reason).

use std::collections::HashMap;

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt as _};

/// The domain of every A2A error.
const DOMAIN: &str = "a2a-protocol.org";

/// `reason`, as a status of `code` saying `message`.
fn error(code: Code, reason: &str, message: impl Into<String>) -> Status {
    Status::with_error_details(
        code,
        message,
        ErrorDetails::with_error_info(reason, DOMAIN, HashMap::new()),
    )
}

/// No task `id` (or none the caller may see).
pub(crate) fn task_not_found(id: &str) -> Status {
    error(
        Code::NotFound,
        "TASK_NOT_FOUND",
        format!("id: no task {id:?}"),
    )
}

/// What the caller asked is not done here, or not in the task's state.
pub(crate) fn unsupported(message: impl Into<String>) -> Status {
    error(Code::Unimplemented, "UNSUPPORTED_OPERATION", message)
}

/// The task cannot be cancelled (it has ended).
pub(crate) fn not_cancelable(id: &str, state: &str) -> Status {
    error(
        Code::FailedPrecondition,
        "TASK_NOT_CANCELABLE",
        format!("id: task {id:?} is {state}; only a task still open can be cancelled"),
    )
}

/// A body not sent as JSON (`media` is the type it was sent as).
pub(crate) fn content_type_not_supported(media: &str) -> Status {
    error(
        Code::InvalidArgument,
        "CONTENT_TYPE_NOT_SUPPORTED",
        format!("Content-Type {media:?}: a request's body is application/json"),
    )
}

/// Push notifications are not offered.
pub(crate) fn push_not_supported() -> Status {
    error(
        Code::Unimplemented,
        "PUSH_NOTIFICATION_NOT_SUPPORTED",
        "this agent does not send push notifications (its card says pushNotifications: false)",
    )
}

/// The caller speaks another version of A2A.
pub(crate) fn version_not_supported(asked: &str) -> Status {
    error(
        Code::Unimplemented,
        "VERSION_NOT_SUPPORTED",
        format!("a2a-version: {asked:?} is not served here; this agent speaks A2A 1.0 (send the metadata a2a-version: 1.0)"),
    )
}

/// A field of the request is wrong: its name and what is wrong.
pub(crate) fn invalid(field: &str, what: impl std::fmt::Display) -> Status {
    error(
        Code::InvalidArgument,
        "INVALID_PARAMS",
        format!("{field}: {what}"),
    )
}

/// The `a2a-version` the caller speaks: 1.0 (any patch) is served; none
/// is 0.3, as the specification says, which is not.
pub(super) fn check_version(metadata: &tonic::metadata::MetadataMap) -> Result<(), Status> {
    let asked = metadata
        .get("a2a-version")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .unwrap_or("0.3");
    let mut parts = asked.split('.');
    let major_minor = (parts.next(), parts.next());
    if major_minor == (Some("1"), Some("0")) {
        Ok(())
    } else {
        Err(version_not_supported(asked))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_carries_its_reason_in_the_a2a_domain() {
        for (status, code, reason) in [
            (task_not_found("t"), Code::NotFound, "TASK_NOT_FOUND"),
            (
                unsupported("x"),
                Code::Unimplemented,
                "UNSUPPORTED_OPERATION",
            ),
            (
                not_cancelable("t", "completed"),
                Code::FailedPrecondition,
                "TASK_NOT_CANCELABLE",
            ),
            (
                push_not_supported(),
                Code::Unimplemented,
                "PUSH_NOTIFICATION_NOT_SUPPORTED",
            ),
            (
                version_not_supported("99.0"),
                Code::Unimplemented,
                "VERSION_NOT_SUPPORTED",
            ),
            (
                invalid("message", "is required"),
                Code::InvalidArgument,
                "INVALID_PARAMS",
            ),
        ] {
            assert_eq!(status.code(), code);
            let info = status.get_details_error_info().expect("ErrorInfo");
            assert_eq!(info.reason, reason);
            assert_eq!(info.domain, DOMAIN);
        }
    }

    #[test]
    fn version_1_0_is_served_and_no_other() {
        let with = |v: Option<&str>| {
            let mut m = tonic::metadata::MetadataMap::new();
            if let Some(v) = v {
                m.insert("a2a-version", v.parse().expect("ascii"));
            }
            check_version(&m)
        };
        assert!(with(Some("1.0")).is_ok());
        assert!(with(Some("1.0.1")).is_ok());
        assert_eq!(
            with(Some("99.0")).map_err(|s| s.code()),
            Err(tonic::Code::Unimplemented)
        );
        assert!(with(Some("0.3")).is_err());
        assert!(with(None).is_err(), "none is 0.3");
    }
}
