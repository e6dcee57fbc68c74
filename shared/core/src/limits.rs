//! Every limit on what a peer sends, in one place. The lead checks each string
//! field against its limit at the boundary and answers INVALID_ARGUMENT naming
//! the field and the limit; reports (`ToolCallReport`) are cut with a marker
//! instead, so that no tool call escapes the record.
//!
//! These are part of the contract, not settings: a client in another language
//! codes against them. The budgets of the lead's own resources (inboxes,
//! connections, retention) are flags of `lead serve`.

use crate::error::FieldError;
pub use crate::text::cut;

/// `JoinRequest.role`.
pub const ROLE: usize = 256;
/// `Text.content`.
pub const TEXT: usize = 64 * 1024;
/// `SendRequest.message_id`, and every `request_id` / `supersedes`.
pub const ID: usize = 128;
/// Free text: `reason` (shutdown, idle), `feedback` (reviews).
pub const REASON: usize = 16 * 1024;
/// A tool's name: `PermissionRequest.tool`, `ToolCallReport.tool`.
pub const TOOL: usize = 128;
/// `PermissionRequest.args_json`: the whole call, so the operator sees what
/// they allow.
pub const ARGS_JSON: usize = 64 * 1024;
/// `ToolCallReport.args_json`: longer ones are cut, with a marker.
pub const REPORT_ARGS_JSON: usize = 16 * 1024;
/// `ToolCallReport.outcome`: longer ones are cut, with a marker.
pub const REPORT_OUTCOME: usize = 16 * 1024;
/// `PlanApprovalRequest.plan`, encoded.
pub const PLAN: usize = 64 * 1024;
/// Entries in any one list of a plan, or in a grant's `write_paths`.
pub const LIST_ITEMS: usize = 1_000;
/// One glob of a plan's `files` or a grant's `write_paths`.
pub const GLOB: usize = 1_024;
/// `page_token` of the list calls.
pub const PAGE_TOKEN: usize = 64;
/// Paths of `SpawnTeammateRequest` (`script_path`, `workspace`, `teammate_bin`).
pub const PATH: usize = 4_096;
/// A task's subject.
pub const SUBJECT: usize = 1_024;
/// A result's diff (`SubmitResult`): it is held in the request, within the
/// pending budgets (2 MiB per member by default).
pub const DIFF: usize = 1024 * 1024;

/// `value` of the field `field` within `limit` bytes, or INVALID_ARGUMENT
/// naming both.
pub fn check(field: &str, value: &str, limit: usize) -> Result<(), FieldError> {
    if value.len() > limit {
        return Err(FieldError::new(
            field,
            format!("is {} bytes; the limit is {limit}", value.len()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_values_are_refused_naming_field_and_limit() {
        assert!(check("role", &"r".repeat(ROLE), ROLE).is_ok());
        let err = check("role", &"r".repeat(ROLE + 1), ROLE).expect_err("too long");
        assert_eq!(err.to_string(), "role: is 257 bytes; the limit is 256");
    }

    #[test]
    fn cut_values_fit_and_say_how_long_they_were() {
        assert_eq!(cut("short", 10), "short");
        let long = "é".repeat(10_000);
        let cut = cut(&long, 1_000);
        assert!(cut.len() <= 1_000, "{}", cut.len());
        assert!(cut.ends_with("…[cut: 20000 bytes in all]"), "{cut}");
    }
}
