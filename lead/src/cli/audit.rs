//! `lead audit export` (the trail from a running lead) and `lead audit
//! verify` (an exported trail checked, no lead needed).

use shared::pb;

use super::{CliError, Operator};
use crate::render;

/// `lead audit export`: the trail, oldest first; a table, or JSON lines.
pub async fn audit_export(
    client: &mut Operator,
    since: Option<&str>,
    json: bool,
) -> Result<String, CliError> {
    let since = match since {
        None => 0,
        Some(s) => parse_since(s).map_err(CliError::Usage)?,
    };
    let mut lines = Vec::new();
    let mut after = 0;
    loop {
        let page = client
            .list_audit(pb::ListAuditRequest {
                since_unix_ms: since,
                after_seq: after,
                page_size: 1_000,
            })
            .await?
            .into_inner();
        if page.entries.is_empty() {
            break;
        }
        after = page.last_seq;
        lines.extend(page.entries);
    }
    if json {
        return Ok(lines.iter().map(|l| format!("{l}\n")).collect());
    }
    let mut rows = vec![vec![
        "SEQ".into(),
        "AT".into(),
        "WHAT".into(),
        "SUBJECT".into(),
        "DECISION".into(),
        "BY".into(),
    ]];
    for line in &lines {
        let e: crate::audit::Entry = serde_json::from_str(line)
            .map_err(|e| CliError::Usage(format!("the lead sent a bad entry: {e}")))?;
        rows.push(vec![
            e.seq.to_string(),
            e.at_unix_ms.to_string(),
            e.what,
            e.subject,
            e.decision,
            e.by,
        ]);
    }
    Ok(render::table(&rows))
}

/// `lead audit verify FILE`: whether the exported chain holds.
pub fn verify(file: &std::path::Path) -> Result<String, CliError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| CliError::Usage(format!("{}: {e}", file.display())))?;
    match crate::audit::verify(&text) {
        Ok(n) => Ok(format!("ok: {n} entries, the chain holds\n")),
        Err((line, why)) => Err(CliError::Usage(format!(
            "{}: line {line}: {why}",
            file.display()
        ))),
    }
}

/// `--since`: unix seconds, or an RFC 3339 time in UTC
/// (`2026-11-26T14:00:00Z`); unix ms.
fn parse_since(value: &str) -> Result<i64, String> {
    if let Ok(seconds) = value.trim().parse::<i64>() {
        return Ok(seconds.saturating_mul(1000));
    }
    humantime::parse_rfc3339(value.trim())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .ok_or_else(|| {
            format!(
                "--since {value:?}: give unix seconds (date +%s) or a UTC time \
                 such as 2026-11-26T14:00:00Z"
            )
        })
}

#[cfg(test)]
mod since_tests {
    use super::parse_since;

    #[test]
    fn since_takes_unix_seconds_or_a_utc_time() {
        assert_eq!(parse_since("1764165600"), Ok(1_764_165_600_000));
        assert_eq!(parse_since("2025-11-26T14:00:00Z"), Ok(1_764_165_600_000));
        assert_eq!(
            parse_since("2025-11-26T14:00:00.250Z"),
            Ok(1_764_165_600_250)
        );
        let wrong = parse_since("yesterday");
        assert!(
            wrong
                .as_ref()
                .is_err_and(|e| e.contains("2026-11-26T14:00:00Z")),
            "{wrong:?}"
        );
        assert!(parse_since("2025-11-26T14:00:00+01:00").is_err());
    }
}
