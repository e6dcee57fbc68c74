//! The caller's answers on a task: a message on what of it waits, as a
//! decision (approve or not, and the feedback); and each plan or result of
//! the task decided, as the caller's message in the task's history.

use mesh_a2a::pb as a2a;
use mesh_core::{
    protocol::{Kind, Request},
    tasks::Task,
};
use tonic::Status;

use super::{
    errors::invalid,
    tasks::{context_of, data, text, texts},
};

/// The plans and results of `task` among `decided`, in the order they were
/// decided: each an answer of its caller's.
pub(crate) fn answered(task: &Task, decided: &[Request]) -> Vec<Request> {
    let mut answered: Vec<Request> = decided
        .iter()
        .filter(|r| {
            matches!(r.opening.kind, Kind::PlanApproval | Kind::Result)
                && !r.is_landing()
                && r.names_task(&task.task_id)
        })
        .cloned()
        .collect();
    answered.sort_by_key(|r| r.resolved_at_unix_ms);
    answered
}

/// A decided request as the caller's message on the task: "approve" (and
/// the feedback), or the feedback it was sent back with.
pub(crate) fn message(task: &Task, request: &Request) -> a2a::Message {
    let approved = request.decision.as_ref().is_some_and(|d| d.approve);
    let words = match (approved, request.feedback.is_empty()) {
        (true, true) => "approve".to_owned(),
        (true, false) => format!("approve: {}", request.feedback),
        (false, _) => request.feedback.clone(),
    };
    a2a::Message {
        message_id: format!("{}-answer-{}", task.task_id, request.id()),
        context_id: context_of(task).to_owned(),
        task_id: task.task_id.clone(),
        role: a2a::Role::User as i32,
        parts: vec![text(words)],
        ..Default::default()
    }
}

/// A decision a message carries: approve or not, and the feedback. Only
/// an explicit approval approves: a data part `{"decision": "approve"}` or
/// text beginning "approve". Any other text is the caller's input on what
/// waits, so it goes back to its author as feedback (a rejection), which
/// is how its author hears it and revises.
pub(crate) fn decision(message: &a2a::Message) -> Result<(bool, String), Status> {
    const HOW: &str = "say the decision: a data part {\"decision\": \"approve\"|\"reject\", \
                       \"feedback\": \"...\"}, or text (beginning \"approve\" approves; \
                       any other is feedback)";
    if let Some(data) = data(message) {
        if let Some(decision) = data.get("decision") {
            let approve = match decision.as_str() {
                Some("approve") => true,
                Some("reject") => false,
                _ => return Err(invalid("message.parts.data.decision", HOW)),
            };
            let feedback = match data.get("feedback") {
                None | Some(serde_json::Value::Null) => String::new(),
                Some(serde_json::Value::String(f)) => f.clone(),
                Some(_) => return Err(invalid("message.parts.data.feedback", "is not a string")),
            };
            return Ok((approve, feedback));
        }
    }
    let text = texts(message);
    let trimmed = text.trim_start();
    let lower = trimmed.to_lowercase();
    for (word, approve) in [("approve", true), ("reject", false)] {
        if lower.starts_with(word) {
            let feedback = trimmed[word.len()..]
                .trim_start_matches(|c: char| c == ':' || c == ',' || c == '.' || c.is_whitespace())
                .trim()
                .to_owned();
            return Ok((approve, feedback));
        }
    }
    if trimmed.trim().is_empty() {
        return Err(invalid("message.parts", HOW));
    }
    Ok((false, trimmed.trim().to_owned()))
}
