//! Plans: what a teammate proposes to do, checked at the edge before the
//! core ([`Plan`]) or anyone reviews it.

pub use mesh_core::plan::Plan;

use crate::pb;
use mesh_core::{error::FieldError, grant::check_relative_glob};

/// The largest plan the lead accepts, encoded.
pub const MAX_PLAN_BYTES: usize = mesh_core::limits::PLAN;
/// The most entries any one list of a plan may hold.
pub const MAX_PLAN_ITEMS: usize = mesh_core::limits::LIST_ITEMS;

/// Checks a plan as the field `field` of a request: a summary, sane lists,
/// workspace-relative files, and a size limit.
pub fn validate(field: &str, plan: Option<&pb::Plan>) -> Result<(), FieldError> {
    let plan = plan.ok_or_else(|| FieldError::new(field, "is required"))?;
    let size = prost::Message::encoded_len(plan);
    if size > MAX_PLAN_BYTES {
        return Err(FieldError::new(
            field,
            format!("is {size} bytes encoded; the limit is {MAX_PLAN_BYTES}"),
        ));
    }
    if plan.summary.trim().is_empty() {
        return Err(FieldError::new(format!("{field}.summary"), "is required"));
    }
    for (name, list) in [
        ("steps", &plan.steps),
        ("files", &plan.files),
        ("tests", &plan.tests),
    ] {
        if list.len() > MAX_PLAN_ITEMS {
            return Err(FieldError::new(
                format!("{field}.{name}"),
                format!("has {} entries; the limit is {MAX_PLAN_ITEMS}", list.len()),
            ));
        }
    }
    for (i, file) in plan.files.iter().enumerate() {
        // The field's name is spelled out only for an error.
        check_relative_glob("", file).map_err(|e| e.at(format!("{field}.files[{i}]")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> pb::Plan {
        pb::Plan {
            summary: "Add auth".into(),
            files: vec!["src/auth.rs".into()],
            ..Default::default()
        }
    }

    #[test]
    fn a_plan_needs_a_summary_and_relative_files_within_limits() {
        assert_eq!(validate("plan", Some(&plan())), Ok(()));
        assert_eq!(
            validate("plan", None).map_err(|e| e.field),
            Err("plan".into())
        );
        let no_summary = pb::Plan {
            summary: " ".into(),
            ..plan()
        };
        assert_eq!(
            validate("plan", Some(&no_summary)).map_err(|e| e.field),
            Err("plan.summary".into())
        );
        let escaping = pb::Plan {
            files: vec!["ok.rs".into(), "../etc".into()],
            ..plan()
        };
        assert_eq!(
            validate("plan", Some(&escaping)).map_err(|e| e.field),
            Err("plan.files[1]".into())
        );
        // A plain path is taken as it is; one with a glob's characters is
        // parsed, and a broken one named where it is.
        let broken = pb::Plan {
            files: vec!["src/a b.rs".into(), "src/{a".into()],
            ..plan()
        };
        assert_eq!(
            validate("plan", Some(&broken)).map_err(|e| e.field),
            Err("plan.files[1]".into())
        );
        let huge = pb::Plan {
            body: "x".repeat(MAX_PLAN_BYTES),
            ..plan()
        };
        assert_eq!(
            validate("plan", Some(&huge)).map_err(|e| e.field),
            Err("plan".into())
        );
        let long = pb::Plan {
            steps: vec!["s".into(); MAX_PLAN_ITEMS + 1],
            ..plan()
        };
        assert_eq!(
            validate("plan", Some(&long)).map_err(|e| e.field),
            Err("plan.steps".into())
        );
    }
}
