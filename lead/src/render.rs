//! How operators see things: one line per event, rows for tables, and JSON
//! objects for scripts.

use mesh_core::display::{escape, is_unsafe};
use serde_json::{json, Value};
use shared::pb::{self, envelope::Body, event::Kind};

/// JSON text with the characters `serde_json` leaves as they are but a
/// terminal acts on or hides (C1 controls, DEL, bidirectional marks,
/// separators, invisible characters: [`is_unsafe`]) written as `\uXXXX`
/// escapes (a surrogate pair past U+FFFF): still the same JSON value.
pub fn json_text(value: &Value) -> String {
    let text = value.to_string();
    if !text.chars().any(is_unsafe) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_unsafe(c) {
            for unit in c.encode_utf16(&mut [0; 2]) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A member status without its prefix: `working`, `idle`, ...
pub fn member_status(status: i32) -> String {
    pb::MemberStatus::try_from(status)
        .map(|s| {
            s.as_str_name()
                .trim_start_matches("MEMBER_STATUS_")
                .to_lowercase()
        })
        .unwrap_or_else(|_| status.to_string())
}

/// A permission mode as the CLI spells it: `plan`, `accept-edits`, ...
pub fn mode(mode: i32) -> String {
    pb::PermissionMode::try_from(mode)
        .map(|m| {
            m.as_str_name()
                .trim_start_matches("PERMISSION_MODE_")
                .to_lowercase()
                .replace('_', "-")
        })
        .unwrap_or_else(|_| mode.to_string())
}

/// `plan_approval`, `shutdown`, `permission`.
pub fn request_type(kind: i32) -> String {
    pb::RequestType::try_from(kind)
        .map(|k| {
            k.as_str_name()
                .trim_start_matches("REQUEST_TYPE_")
                .to_lowercase()
        })
        .unwrap_or_else(|_| kind.to_string())
}

/// `pending`, `approved`, `rejected`, `expired`.
pub fn request_status(status: i32) -> String {
    pb::RequestStatus::try_from(status)
        .map(|s| {
            s.as_str_name()
                .trim_start_matches("REQUEST_STATUS_")
                .to_lowercase()
        })
        .unwrap_or_else(|_| status.to_string())
}

/// One member as JSON.
pub fn member_json(m: &pb::Member) -> Value {
    let used = m.usage.unwrap_or_default();
    json!({
        "member_id": m.member_id, "name": m.name, "role": m.role,
        "status": member_status(m.status), "mode": mode(m.mode),
        "usage": usage_value(&used), "token_budget": m.token_budget, "holds": m.holds,
        "joining": m.joining, "idle_reason": m.idle_reason,
        "sandbox": m.sandbox.as_ref().map(|s| json!({
            "kind": s.kind, "confines": s.confines, "detail": s.detail,
        })),
        "decoding": m.decoding.as_ref().map(|d| json!({
            "model": d.model, "server": d.server, "constrain": d.constrain, "why": d.why,
        })),
    })
}

/// A member's sandbox for a table: its kind, or `-` where it did not say.
pub fn sandbox(sandbox: Option<&pb::Sandbox>) -> String {
    sandbox.map_or_else(|| "-".to_owned(), |s| s.kind.clone())
}

/// How `name`'s model's replies are held to one call, for under a table,
/// on one line: `alice's model qwen on llama.cpp: schema (why)`.
pub fn decoding_line(name: &str, d: &pb::Decoding) -> String {
    let mut line = format!(
        "{name}'s model {} on {}: {}",
        d.model, d.server, d.constrain
    );
    if !d.why.is_empty() {
        line.push_str(&format!(" ({})", d.why));
    }
    format!("{}\n", mesh_core::display::Escaped(&line))
}

/// A usage as JSON.
pub fn usage_value(u: &pb::Usage) -> Value {
    json!({
        "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
        "calls": u.calls, "model_ms": u.model_ms,
    })
}

/// Prompt and completion tokens together.
pub fn tokens(u: &pb::Usage) -> u64 {
    u.prompt_tokens.saturating_add(u.completion_tokens)
}

/// A budget for a table: `-` for none.
pub fn budget(token_budget: u64) -> String {
    if token_budget == 0 {
        "-".into()
    } else {
        token_budget.to_string()
    }
}

/// A usage and its budget in a few words: `1,234 tokens (1,000 prompt, 234
/// completion) in 3 calls, 2.1 s; budget 10,000`.
pub fn usage_line(u: &pb::MemberUsage) -> String {
    let total = u.total.unwrap_or_default();
    let tokens = tokens(&total);
    let mut line = format!(
        "{tokens} tokens ({} prompt, {} completion) in {} calls, {:.1} s",
        total.prompt_tokens,
        total.completion_tokens,
        total.calls,
        total.model_ms as f64 / 1000.0
    );
    if u.token_budget > 0 {
        line.push_str(&format!("; budget {}", u.token_budget));
    }
    line
}

/// A usage as JSON.
pub fn usage_json(u: &pb::MemberUsage) -> Value {
    let total = u.total.unwrap_or_default();
    json!({
        "name": u.name, "prompt_tokens": total.prompt_tokens,
        "completion_tokens": total.completion_tokens, "calls": total.calls,
        "model_ms": total.model_ms, "token_budget": u.token_budget,
    })
}

/// One request as JSON.
pub fn request_json(r: &pb::ProtocolState) -> Value {
    json!({
        "request_id": r.request_id, "type": request_type(r.r#type), "sender": r.sender,
        "target": r.target, "status": request_status(r.status),
        "payload": serde_json::from_str::<Value>(&r.payload_json).unwrap_or(Value::Null),
        "feedback": r.feedback, "created_at_unix_ms": r.created_at_unix_ms,
        "resolved_at_unix_ms": r.resolved_at_unix_ms,
        "waits_for": r.waits_for,
        "reviews": r.reviews.iter().map(|s| json!({
            "reviewer": s.reviewer, "verdict": s.verdict, "words": s.words,
            "at_unix_ms": s.at_unix_ms,
        })).collect::<Vec<_>>(),
        "grant": r.grant.as_ref().map(|g| json!({
            "mode": mode(g.mode), "write_paths": g.write_paths,
            "expires_at_unix_ms": g.expires_at_unix_ms,
        })),
    })
}

/// What the queue's figures need of a request from the wire.
pub fn timed(r: &pb::ProtocolState) -> crate::stats::Timed {
    crate::stats::Timed {
        kind: request_type(r.r#type),
        pending: r.status == pb::RequestStatus::Pending as i32,
        created_at_unix_ms: r.created_at_unix_ms,
        resolved_at_unix_ms: r.resolved_at_unix_ms,
        steps: r
            .reviews
            .iter()
            .map(|s| (s.reviewer.clone(), s.verdict.clone(), s.at_unix_ms))
            .collect(),
    }
}

/// A request's history in a line: each reviewer and its verdict, and the
/// last one's words.
pub fn reviews_line(r: &pb::ProtocolState) -> Option<String> {
    let last = r.reviews.last()?;
    let steps: Vec<String> = r
        .reviews
        .iter()
        .map(|s| format!("{} {}", s.reviewer, s.verdict))
        .collect();
    Some(if last.words.is_empty() {
        format!("[{}]", steps.join(" > "))
    } else {
        format!("[{}: {}]", steps.join(" > "), last.words)
    })
}

/// Peer text in double quotes, as it is: a line is escaped once, as a
/// whole, where it is shown ([`event_line`]); Rust's `{:?}` here would
/// escape it a second time.
#[derive(Debug)]
pub struct Quoted<'a>(pub &'a str);

impl std::fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "\"{}\"", self.0)
    }
}

/// A list of peer texts, each [`Quoted`]: `["a", "b"]`.
struct Listed<'a>(&'a [String]);

impl std::fmt::Display for Listed<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[")?;
        for (i, item) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{}", Quoted(item))?;
        }
        f.write_str("]")
    }
}

/// The first 12 digits of a commit id.
pub fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// A result's files in a line: `3 files +10 -2 (src/a.rs +8 -2, ...)`.
pub fn diff_stat(files: &[pb::FileChange]) -> String {
    let added: u64 = files.iter().map(|f| u64::from(f.added)).sum();
    let removed: u64 = files.iter().map(|f| u64::from(f.removed)).sum();
    let each: Vec<String> = files
        .iter()
        .map(|f| {
            if f.binary {
                format!("{} (binary)", Quoted(&f.path))
            } else {
                format!("{} +{} -{}", Quoted(&f.path), f.added, f.removed)
            }
        })
        .collect();
    format!(
        "{} file{} +{added} -{removed} ({})",
        files.len(),
        if files.len() == 1 { "" } else { "s" },
        each.join(", ")
    )
}

/// What an envelope carries, in a few words.
pub fn body(body: Option<&Body>) -> String {
    match body {
        None => "(empty)".into(),
        Some(Body::BudgetChanged(b)) => format!("token budget {}", b.token_budget),
        Some(Body::Text(t)) => format!("text {}", Quoted(&t.content)),
        Some(Body::PlanApprovalRequest(r)) => {
            let plan = r.plan.clone().unwrap_or_default();
            let mut line = format!(
                "plan_approval_request {} {} files={} tests={}",
                r.request_id,
                Quoted(&plan.summary),
                Listed(&plan.files),
                Listed(&plan.tests)
            );
            if !r.supersedes.is_empty() {
                line.push_str(&format!(" supersedes={}", r.supersedes));
            }
            line
        }
        Some(Body::PlanApprovalResponse(r)) => {
            let verdict = if r.approve { "approved" } else { "rejected" };
            let grant = r
                .grant
                .as_ref()
                .map(|g| format!(" grant={}", mode(g.mode)))
                .unwrap_or_default();
            format!(
                "plan_approval_response {} {verdict}{grant} {}",
                r.request_id,
                Quoted(&r.feedback)
            )
        }
        Some(Body::ShutdownRequest(r)) => {
            format!("shutdown_request {} {}", r.request_id, Quoted(&r.reason))
        }
        Some(Body::ShutdownResponse(r)) => {
            let verdict = if r.approve { "agrees" } else { "refuses" };
            format!(
                "shutdown_response {} {verdict} {}",
                r.request_id,
                Quoted(&r.reason)
            )
        }
        Some(Body::PermissionRequest(r)) => format!(
            "permission_request {} {} {}",
            r.request_id, r.tool, r.args_json
        ),
        Some(Body::PermissionResponse(r)) => {
            let verdict = if r.approve { "allowed" } else { "denied" };
            format!(
                "permission_response {} {verdict} {}",
                r.request_id,
                Quoted(&r.feedback)
            )
        }
        Some(Body::ResultRequest(r)) => {
            let mut line = format!(
                "result_request {} task={} base={} {} {}",
                r.request_id,
                r.task_id,
                short(&r.base),
                Quoted(&r.summary),
                diff_stat(&r.files)
            );
            if !r.supersedes.is_empty() {
                line.push_str(&format!(" supersedes={}", r.supersedes));
            }
            line
        }
        Some(Body::AmendmentRequest(r)) => format!(
            "amendment_request {} plan={} files={} {}",
            r.request_id,
            r.plan_id,
            Listed(&r.files),
            Quoted(&r.why)
        ),
        Some(Body::AmendmentResponse(r)) => {
            let verdict = if r.approve { "approved" } else { "rejected" };
            format!(
                "amendment_response {} {verdict} {}",
                r.request_id,
                Quoted(&r.feedback)
            )
        }
        Some(Body::ResultResponse(r)) => {
            let verdict = if r.approve { "landed" } else { "rejected" };
            let mut line = format!("result_response {} {verdict}", r.request_id);
            if !r.commit.is_empty() {
                line.push_str(&format!(" commit={}", short(&r.commit)));
            }
            if !r.conflicts.is_empty() {
                line.push_str(&format!(" conflicts={}", Listed(&r.conflicts)));
            }
            line.push_str(&format!(" {}", Quoted(&r.feedback)));
            line
        }
        Some(Body::IdleNotification(i)) => format!("idle {}", Quoted(&i.reason)),
        Some(Body::TeammateTerminated(t)) => {
            let mut line = format!("teammate_terminated {} {}", t.name, Quoted(&t.reason));
            for more in &t.more {
                line.push_str(&format!(", {} {}", more.name, Quoted(&more.reason)));
            }
            line
        }
        Some(Body::TaskClaimable(t)) => {
            format!("task_claimable {} {}", t.task_id, Quoted(&t.subject))
        }
    }
}

/// A task's status, without the enum prefix.
pub fn task_status(status: i32) -> &'static str {
    match pb::TaskStatus::try_from(status) {
        Ok(pb::TaskStatus::Pending) => "PENDING",
        Ok(pb::TaskStatus::Claimed) => "CLAIMED",
        Ok(pb::TaskStatus::Completed) => "COMPLETED",
        Ok(pb::TaskStatus::Withdrawn) => "WITHDRAWN",
        _ => "UNSPECIFIED",
    }
}

/// One task as JSON.
pub fn task_json(t: &pb::Task) -> Value {
    json!({
        "task_id": t.task_id, "subject": t.subject, "description": t.description,
        "status": task_status(t.status), "owner": t.owner, "blocked_by": t.blocked_by,
        "files": t.files, "created_at_unix_ms": t.created_at_unix_ms,
        "updated_at_unix_ms": t.updated_at_unix_ms, "summary": t.summary,
        "review": task_review(t.review),
        "from": t.origin.as_ref().map_or("", |o| o.by.as_str()),
        "context_id": t.origin.as_ref().map_or("", |o| o.context_id.as_str()),
        "outputs": t.outputs.iter().map(output_json).collect::<Vec<_>>(),
    })
}

/// What a task produced, named: its kind and size (the content is the
/// A2A caller's).
pub fn output_json(o: &pb::TaskOutput) -> Value {
    use pb::task_output::Content;
    let (kind, size) = match &o.content {
        Some(Content::Text(t)) => ("text", t.len()),
        Some(Content::Raw(b)) => ("raw", b.len()),
        Some(Content::Url(u)) => ("url", u.len()),
        Some(Content::DataJson(j)) => ("data", j.len()),
        None => ("none", 0),
    };
    json!({ "name": o.name, "media_type": o.media_type, "kind": kind, "size": size })
}

/// `plan`, `result`, `both` (unspecified: `plan`, as before reviews existed).
pub fn task_review(review: i32) -> &'static str {
    match pb::TaskReview::try_from(review) {
        Ok(pb::TaskReview::Result) => "result",
        Ok(pb::TaskReview::Both) => "both",
        _ => "plan",
    }
}

/// One event as one line, every character a peer could use to draw on the
/// terminal or break the line escaped.
pub fn event_line(event: &pb::Event) -> String {
    escape(&raw_event_line(event)).into_owned()
}

fn raw_event_line(event: &pb::Event) -> String {
    match &event.kind {
        Some(Kind::Envelope(e)) => {
            format!("message  {} -> {}: {}", e.from, e.to, body(e.body.as_ref()))
        }
        Some(Kind::Request(r)) => {
            let mut line = format!(
                "request  {} {} {} -> {}: {}",
                request_type(r.r#type),
                r.request_id,
                r.sender,
                r.target,
                request_status(r.status)
            );
            if !r.feedback.is_empty() {
                line.push_str(&format!(" ({})", r.feedback));
            } else if let Some(step) = r.reviews.last() {
                // Pending: what its reviewers said so far.
                let landing =
                    r.r#type == pb::RequestType::Result as i32 && step.verdict == "approve";
                line.push_str(&format!(
                    " ({} {}{})",
                    step.reviewer,
                    step.verdict,
                    if landing { "; merging" } else { "" }
                ));
            }
            line
        }
        Some(Kind::Member(m)) if m.joining => format!(
            "member   {} ({}) joined, mode {}",
            m.name,
            m.role,
            mode(m.mode)
        ),
        Some(Kind::Member(m)) => format!(
            "member   {} ({}) is {}, mode {}",
            m.name,
            m.role,
            member_status(m.status),
            mode(m.mode)
        ),
        Some(Kind::ToolCall(t)) => {
            let verdict = if t.allowed { "ran" } else { "REFUSED" };
            format!(
                "tool     {} {verdict} {} {}: {}",
                t.member, t.tool, t.args_json, t.outcome
            )
        }
        Some(Kind::ReviewNote(n)) => {
            format!("review   {} by {}: {}", n.request_id, n.reviewer, n.note)
        }
        Some(Kind::Task(t)) => {
            let mut line = format!(
                "task     {} {} {}",
                t.task_id,
                Quoted(&t.subject),
                task_status(t.status)
            );
            if !t.owner.is_empty() {
                line.push_str(&format!(" by {}", t.owner));
            } else if t.status == pb::TaskStatus::Pending as i32
                && t.updated_at_unix_ms != t.created_at_unix_ms
            {
                line.push_str(" (given back: its owner terminated)");
            }
            if !t.summary.is_empty() {
                line.push_str(&format!(": {}", t.summary));
            }
            if let Some(origin) = t.origin.as_ref().filter(|o| !o.by.is_empty()) {
                line.push_str(&format!(" (handed in by {})", origin.by));
            }
            line
        }
        Some(Kind::ChildExited(c)) => {
            let when = if c.joined { "" } else { " before joining" };
            let mut line = format!("child    {} (pid {}) {}{when}", c.name, c.pid, c.how);
            if !c.joined && !c.log_tail.is_empty() {
                line.push_str(&format!("; its log ends: {}", c.log_tail));
            }
            line
        }
        Some(Kind::Usage(u)) => format!("usage    {}: {}", u.name, usage_line(u)),
        None => "(empty event)".into(),
    }
}

/// One event as JSON.
pub fn event_json(event: &pb::Event) -> Value {
    let kind = match &event.kind {
        Some(Kind::Envelope(e)) => json!({
            "envelope": { "seq": e.seq, "message_id": e.message_id, "from": e.from, "to": e.to,
                          "sent_at_unix_ms": e.sent_at_unix_ms, "body": body(e.body.as_ref()) }
        }),
        Some(Kind::Request(r)) => json!({ "request": request_json(r) }),
        Some(Kind::Member(m)) => json!({ "member": member_json(m) }),
        Some(Kind::ToolCall(t)) => json!({
            "tool_call": { "member": t.member, "tool": t.tool, "args_json": t.args_json,
                           "allowed": t.allowed, "outcome": t.outcome }
        }),
        Some(Kind::ReviewNote(n)) => json!({
            "review_note": { "request_id": n.request_id, "reviewer": n.reviewer, "note": n.note }
        }),
        Some(Kind::Task(t)) => json!({ "task": task_json(t) }),
        Some(Kind::Usage(u)) => json!({ "usage": usage_json(u) }),
        Some(Kind::ChildExited(c)) => json!({
            "child_exited": { "name": c.name, "pid": c.pid, "how": c.how, "joined": c.joined,
                              "log_path": c.log_path, "log_tail": c.log_tail }
        }),
        None => Value::Null,
    };
    json!({ "at_unix_ms": event.at_unix_ms, "event": kind })
}

/// Lays rows out in columns, the first row a header.
pub fn table(rows: &[Vec<String>]) -> String {
    // Cells hold peer text (roles, reasons): escaped, so a cell is one line
    // that cannot move the cursor.
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| escape(c).into_owned()).collect())
        .collect();
    let rows = &rows[..];
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| format!("{cell:<width$}", width = widths[c]))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_text_cannot_draw_on_the_terminal() {
        let event = pb::Event {
            at_unix_ms: 0,
            kind: Some(Kind::ToolCall(pb::ToolCallReport {
                tool: "read\u{1b}[2K".into(),
                args_json: "{}".into(),
                allowed: true,
                outcome: "ok\r\nFORGED\u{9b}".into(),
                member: "alice".into(),
            })),
        };
        let line = event_line(&event);
        assert!(!line.contains(['\u{1b}', '\r', '\n', '\u{9b}']), "{line:?}");
        assert!(line.contains("ok\\r\\nFORGED"), "{line}");
        let table = table(&[vec!["a\nb".into()], vec!["c".into()]]);
        assert_eq!(table.lines().count(), 2, "{table:?}");
        let refused = pb::Event {
            at_unix_ms: 0,
            kind: Some(Kind::Envelope(pb::Envelope {
                from: "bob".into(),
                to: "lead".into(),
                body: Some(Body::ShutdownResponse(pb::ShutdownResponse {
                    request_id: "r1".into(),
                    approve: false,
                    reason: "busy:\n\u{1b}[2J \"tests\" run".into(),
                })),
                ..Default::default()
            })),
        };
        assert_eq!(
            event_line(&refused),
            "message  bob -> lead: shutdown_response r1 refuses \"busy:\\n\\u{1b}[2J \"tests\" run\"",
            "escaped once"
        );
        let json = json_text(&json!({ "role": "x\u{202e}y" }));
        assert_eq!(json, "{\"role\":\"x\\u202ey\"}");
        let hidden = json!({ "note": "a\u{2028}b\u{200b}c\u{e0041}d" });
        let json = json_text(&hidden);
        assert_eq!(json, "{\"note\":\"a\\u2028b\\u200bc\\udb40\\udc41d\"}");
        let back: Value = serde_json::from_str(&json).expect("still JSON");
        assert_eq!(back, hidden, "the same value");
    }

    #[test]
    fn a_decoding_is_one_line() {
        let mut d = pb::Decoding {
            model: "qwen".into(),
            server: "llama.cpp".into(),
            constrain: "schema".into(),
            why: String::new(),
        };
        assert_eq!(
            decoding_line("alice", &d),
            "alice's model qwen on llama.cpp: schema\n"
        );
        d.why = "asked the server\n\u{1b}[2J".into();
        assert_eq!(
            decoding_line("alice", &d),
            "alice's model qwen on llama.cpp: schema (asked the server\\n\\u{1b}[2J)\n"
        );
    }
}
