//! A mesh task as an A2A task, and an A2A message as a mesh task or a
//! decision: pure mapping, no I/O.
//!
//! States: not yet claimed, `SUBMITTED`; claimed, `WORKING` (the status
//! message names the member); a plan, result or amendment of the task
//! waiting for its review, `INPUT_REQUIRED` (the status message holds what
//! is to be decided and how to answer); completed, `COMPLETED` (the summary
//! as an artifact).

use mesh_a2a::pb::{self as a2a, part::Content};
use mesh_core::{
    protocol::{Kind, Request},
    tasks::{NewTask, Origin, Output, OutputContent, Review, Task, TaskStatus},
};
use tonic::Status;

use super::errors::invalid;

/// A task as an A2A caller sees it: the task, its request that waits (if
/// one does), its result that landed (if one did).
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) task: Task,
    pub(crate) waiting: Option<Request>,
    pub(crate) landed: Option<Request>,
    /// Its plans and results decided, oldest first: the caller's answers.
    pub(crate) answered: Vec<Request>,
}

impl Seen {
    /// Its state.
    pub(crate) fn state(&self) -> a2a::TaskState {
        state(&self.task, self.waiting.as_ref())
    }

    /// As an A2A task (see [`to_a2a`]).
    pub(crate) fn to_a2a(&self, history: Option<usize>, artifacts: bool) -> a2a::Task {
        to_a2a(
            &self.task,
            self.waiting.as_ref(),
            self.landed.as_ref(),
            &self.answered,
            history,
            artifacts,
        )
    }
}

/// The task's state, given the request of it that waits, if one does.
pub(crate) fn state(task: &Task, waiting: Option<&Request>) -> a2a::TaskState {
    match (task.status, waiting) {
        (TaskStatus::Completed, _) => a2a::TaskState::Completed,
        (TaskStatus::Withdrawn, _) => a2a::TaskState::Canceled,
        (_, Some(_)) => a2a::TaskState::InputRequired,
        (TaskStatus::Claimed, None) => a2a::TaskState::Working,
        (TaskStatus::Pending, None) => a2a::TaskState::Submitted,
    }
}

/// Whether a task in `state` has ended.
pub(crate) fn terminal(state: a2a::TaskState) -> bool {
    matches!(
        state,
        a2a::TaskState::Completed
            | a2a::TaskState::Failed
            | a2a::TaskState::Canceled
            | a2a::TaskState::Rejected
    )
}

/// Whether a task in `state` waits for its caller.
pub(crate) fn interrupted(state: a2a::TaskState) -> bool {
    matches!(
        state,
        a2a::TaskState::InputRequired | a2a::TaskState::AuthRequired
    )
}

/// The task's request that waits for a decision: a plan or result of it
/// (they name the task), or an amendment of its owner's plan while the
/// owner works on it, pending.
pub(crate) fn waiting<'a>(task: &Task, pending: &'a [Request]) -> Option<&'a Request> {
    pending.iter().find(|r| {
        r.opening.sender == task.owner
            && !r.is_landing()
            && match r.opening.kind {
                Kind::PlanApproval | Kind::Result => r.names_task(&task.task_id),
                Kind::Amendment => task.status == TaskStatus::Claimed,
                Kind::Shutdown | Kind::Permission => false,
            }
    })
}

/// A diff as the task's artifact `diff`.
fn diff_artifact(task: &Task, diff: String, description: &str) -> a2a::Artifact {
    a2a::Artifact {
        artifact_id: format!("{}-diff", task.task_id),
        name: "diff".into(),
        description: description.into(),
        parts: vec![a2a::Part {
            content: Some(Content::Text(diff)),
            media_type: "text/x-diff".into(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Output `i` of a completed task as its artifact.
fn output_artifact(task: &Task, i: usize, output: &Output) -> a2a::Artifact {
    a2a::Artifact {
        artifact_id: format!("{}-output-{i}", task.task_id),
        name: output.name.clone(),
        description: format!("what {} produced", task.owner),
        parts: vec![output_part(output)],
        ..Default::default()
    }
}

/// An output as a part: text, raw bytes or a URL named as a file; data as
/// a data part.
fn output_part(output: &Output) -> a2a::Part {
    let (content, usual) = match &output.content {
        OutputContent::Text(t) => (Content::Text(t.clone()), "text/plain"),
        OutputContent::Raw(b) => (Content::Raw(b.clone()), "application/octet-stream"),
        OutputContent::Url(u) => (Content::Url(u.clone()), ""),
        OutputContent::DataJson(j) => (
            Content::Data(value(
                &serde_json::from_str(j).unwrap_or(serde_json::Value::Null),
            )),
            "application/json",
        ),
    };
    a2a::Part {
        content: Some(content),
        filename: match output.content {
            OutputContent::DataJson(_) => String::new(),
            _ => output.name.clone(),
        },
        media_type: if output.media_type.is_empty() {
            usual.to_owned()
        } else {
            output.media_type.clone()
        },
        ..Default::default()
    }
}

/// Whether `task`'s owner completed it with a reply ([`Task::reply`]).
pub(crate) fn replied(task: &Task) -> bool {
    task.reply && task.status == TaskStatus::Completed
}

/// The answer of a task its owner completed with a reply
/// ([`Task::reply`]), as the team's message: its outputs as the parts,
/// or without any, its summary.
pub(crate) fn reply(task: &Task) -> a2a::Message {
    let parts = if task.outputs.is_empty() {
        vec![text(task.summary.clone())]
    } else {
        task.outputs.iter().map(output_part).collect()
    };
    a2a::Message {
        parts,
        ..agent_message(task, format!("{}-reply", task.task_id), String::new())
    }
}

/// JSON as a protobuf `Value`.
fn value(json: &serde_json::Value) -> prost_types::Value {
    use prost_types::value::Kind as V;
    let kind = match json {
        serde_json::Value::Null => V::NullValue(0),
        serde_json::Value::Bool(b) => V::BoolValue(*b),
        serde_json::Value::Number(n) => V::NumberValue(n.as_f64().unwrap_or(0.0)),
        serde_json::Value::String(s) => V::StringValue(s.clone()),
        serde_json::Value::Array(a) => V::ListValue(prost_types::ListValue {
            values: a.iter().map(value).collect(),
        }),
        serde_json::Value::Object(o) => V::StructValue(prost_types::Struct {
            fields: o.iter().map(|(k, v)| (k.clone(), value(v))).collect(),
        }),
    };
    prost_types::Value { kind: Some(kind) }
}

/// The task's result that landed, among the approved results `landed`.
pub(crate) fn landed_of<'a>(task: &Task, landed: &'a [Request]) -> Option<&'a Request> {
    landed
        .iter()
        .rev()
        .find(|r| r.opening.kind == Kind::Result && r.names_task(&task.task_id))
}

/// A landed result's commit (from its merge) and its diff.
fn commit_and_diff(result: &Request) -> Option<(String, String)> {
    let commit = result
        .feedback
        .strip_prefix("landed on the team branch as ")?
        .trim()
        .to_owned();
    let payload = serde_json::from_str::<serde_json::Value>(&result.opening.payload_json).ok()?;
    let diff = payload["result"]["diff"].as_str().unwrap_or("").to_owned();
    Some((commit, diff))
}

/// The task's context: the caller's, or (a task made here) its own id.
pub(crate) fn context_of(task: &Task) -> &str {
    if task.origin.context_id.is_empty() {
        &task.task_id
    } else {
        &task.origin.context_id
    }
}

/// A text part.
pub(super) fn text(content: impl Into<String>) -> a2a::Part {
    a2a::Part {
        content: Some(Content::Text(content.into())),
        ..Default::default()
    }
}

/// A message from the team (the agent) about `task`.
fn agent_message(task: &Task, id: String, words: String) -> a2a::Message {
    a2a::Message {
        message_id: id,
        context_id: context_of(task).to_owned(),
        task_id: task.task_id.clone(),
        role: a2a::Role::Agent as i32,
        parts: vec![text(words)],
        ..Default::default()
    }
}

/// A Unix ms as a timestamp.
fn timestamp(unix_ms: i64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: unix_ms.div_euclid(1000),
        nanos: i32::try_from(unix_ms.rem_euclid(1000) * 1_000_000).unwrap_or(0),
    }
}

/// What the status message says in `state`.
fn status_words(task: &Task, waiting: Option<&Request>) -> String {
    if let Some(request) = waiting {
        let what = match request.opening.kind {
            Kind::PlanApproval => "a plan",
            Kind::Result => "a result",
            _ => "an amendment",
        };
        let owners = match request.waits_for.as_slice() {
            [] => String::new(),
            owed => format!(" from its owners ({})", owed.join(", ")),
        };
        return format!(
            "{what} of {} waits for a decision{owners} (request {}):\n{}\n\n\
             Answer with a message on this task: a data part \
             {{\"decision\": \"approve\"|\"reject\", \"feedback\": \"...\"}}, \
             or text: beginning \"approve\" approves (the rest is the feedback), \
             any other text goes back to {} as feedback (a rejection).",
            request.opening.sender,
            request.id(),
            what_is_asked(&request.opening.payload_json),
            request.opening.sender,
        );
    }
    match task.status {
        TaskStatus::Pending => "waiting for a member to claim it".to_owned(),
        TaskStatus::Claimed => format!("{} works on it", task.owner),
        TaskStatus::Completed => format!("{} completed it: {}", task.owner, task.summary),
        TaskStatus::Withdrawn => format!("it was {}", task.summary),
    }
}

/// What a request asks, for a person: a plan's summary, steps, files and
/// tests; anything else as its JSON.
fn what_is_asked(payload_json: &str) -> String {
    let Ok(payload) = serde_json::from_str::<serde_json::Value>(payload_json) else {
        return payload_json.to_owned();
    };
    let result = &payload["result"];
    if result.is_object() {
        let files: String = result["files"]
            .as_array()
            .map(|files| {
                files
                    .iter()
                    .map(|f| {
                        format!(
                            "\n  - {} (+{} -{})",
                            f["path"].as_str().unwrap_or(""),
                            f["added"].as_u64().unwrap_or(0),
                            f["removed"].as_u64().unwrap_or(0)
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        return format!(
            "Result: {}\nFiles:{files}\n(the diff is the artifact \"diff\")",
            result["summary"].as_str().unwrap_or("")
        );
    }
    let plan = &payload["plan"];
    if !plan.is_object() {
        return payload_json.to_owned();
    }
    let list = |field: &str| -> String {
        plan[field]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i.as_str())
                    .map(|i| format!("\n  - {i}"))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = format!("Plan: {}", plan["summary"].as_str().unwrap_or(""));
    for (title, field) in [("Steps", "steps"), ("Files", "files"), ("Tests", "tests")] {
        let items = list(field);
        if !items.is_empty() {
            out.push_str(&format!("\n{title}:{items}"));
        }
    }
    if let Some(body) = plan["body"].as_str().filter(|b| !b.is_empty()) {
        out.push_str(&format!("\n\n{body}"));
    }
    out
}

/// `task` as an A2A task: its state given the request that waits (if
/// any), at most `history` messages of its history (what was asked, each
/// answer of the caller's (`answered`), where it stands; none: all), and its
/// artifacts if `artifacts` (a completed task's summary, and with its
/// `landed` result the commit and its diff).
pub(crate) fn to_a2a(
    task: &Task,
    waiting: Option<&Request>,
    landed: Option<&Request>,
    answered: &[Request],
    history: Option<usize>,
    artifacts: bool,
) -> a2a::Task {
    let state = state(task, waiting);
    let status = a2a::TaskStatus {
        state: state as i32,
        message: Some(if replied(task) {
            reply(task)
        } else {
            agent_message(
                task,
                format!("{}-status-{}", task.task_id, task.updated_at_unix_ms),
                status_words(task, waiting),
            )
        }),
        timestamp: Some(timestamp(task.updated_at_unix_ms)),
    };
    let asked = a2a::Message {
        message_id: format!("{}-asked", task.task_id),
        context_id: context_of(task).to_owned(),
        task_id: task.task_id.clone(),
        role: a2a::Role::User as i32,
        parts: vec![text(if task.description.is_empty() {
            task.subject.clone()
        } else {
            format!("{}\n{}", task.subject, task.description)
        })],
        ..Default::default()
    };
    let mut messages = vec![asked];
    messages.extend(answered.iter().map(|r| super::answers::message(task, r)));
    messages.extend(status.message.clone());
    let keep = history.unwrap_or(messages.len()).min(messages.len());
    let history = messages.split_off(messages.len() - keep);
    let wanted = artifacts;
    let mut artifacts = if wanted && task.status == TaskStatus::Completed {
        let mut artifacts: Vec<a2a::Artifact> = task
            .outputs
            .iter()
            .enumerate()
            .map(|(i, output)| output_artifact(task, i, output))
            .collect();
        artifacts.push(a2a::Artifact {
            artifact_id: format!("{}-summary", task.task_id),
            name: "summary".into(),
            description: format!("what {} said on completing the task", task.owner),
            parts: vec![text(if task.summary.is_empty() {
                "(no summary)".to_owned()
            } else {
                task.summary.clone()
            })],
            ..Default::default()
        });
        artifacts
    } else {
        Vec::new()
    };
    let proposed = waiting
        .filter(|r| wanted && r.opening.kind == Kind::Result)
        .and_then(|r| serde_json::from_str::<serde_json::Value>(&r.opening.payload_json).ok())
        .and_then(|p| p["result"]["diff"].as_str().map(str::to_owned));
    if let Some(diff) = proposed {
        artifacts.push(diff_artifact(
            task,
            diff,
            "the change that waits for a decision",
        ));
    }
    if !artifacts.is_empty() {
        if let Some((commit, diff)) = landed.and_then(commit_and_diff) {
            artifacts.push(a2a::Artifact {
                artifact_id: format!("{}-commit", task.task_id),
                name: "commit".into(),
                description: "the commit the work landed as on the team branch".into(),
                parts: vec![text(commit)],
                ..Default::default()
            });
            artifacts.push(diff_artifact(task, diff, "the change, as it landed"));
        }
    }
    a2a::Task {
        id: task.task_id.clone(),
        context_id: context_of(task).to_owned(),
        status: Some(status),
        artifacts,
        history,
        metadata: None,
    }
}

/// The text of `message`'s text parts, one after another.
pub(super) fn texts(message: &a2a::Message) -> String {
    message
        .parts
        .iter()
        .filter_map(|p| match &p.content {
            Some(Content::Text(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first data part of `message` that is an object, as JSON.
pub(super) fn data(message: &a2a::Message) -> Option<serde_json::Value> {
    message.parts.iter().find_map(|p| match &p.content {
        Some(Content::Data(value)) => Some(json(value)).filter(serde_json::Value::is_object),
        _ => None,
    })
}

/// A protobuf `Value` as JSON.
fn json(value: &prost_types::Value) -> serde_json::Value {
    use prost_types::value::Kind as V;
    match &value.kind {
        None | Some(V::NullValue(_)) => serde_json::Value::Null,
        Some(V::NumberValue(n)) => serde_json::json!(n),
        Some(V::StringValue(s)) => serde_json::json!(s),
        Some(V::BoolValue(b)) => serde_json::json!(b),
        Some(V::StructValue(s)) => {
            serde_json::Value::Object(s.fields.iter().map(|(k, v)| (k.clone(), json(v))).collect())
        }
        Some(V::ListValue(l)) => serde_json::Value::Array(l.values.iter().map(json).collect()),
    }
}

/// The strings of `data[field]`, if it is a list of them.
fn strings(data: Option<&serde_json::Value>, field: &str) -> Result<Vec<String>, Status> {
    match data.and_then(|d| d.get(field)) {
        None | Some(serde_json::Value::Null) => Ok(Vec::new()),
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                item.as_str().map(str::to_owned).ok_or_else(|| {
                    invalid(
                        &format!("message.parts.data.{field}[{i}]"),
                        "is not a string",
                    )
                })
            })
            .collect(),
        Some(_) => Err(invalid(
            &format!("message.parts.data.{field}"),
            "is not a list of strings",
        )),
    }
}

/// The task a message hands the team: the subject from its first line,
/// the rest its description; a data part may say `files`, `review` and
/// `blocked_by`. `by` handed it in, within `context_id`.
pub(crate) fn new_task(
    message: &a2a::Message,
    by: &str,
    context_id: String,
) -> Result<NewTask, Status> {
    let text = texts(message);
    let (subject, description) = match text.trim().split_once('\n') {
        Some((first, rest)) => (first.trim().to_owned(), rest.trim().to_owned()),
        None => (text.trim().to_owned(), String::new()),
    };
    let subject = if subject.is_empty() {
        untitled(message).ok_or_else(|| invalid("message.parts", "is empty"))?
    } else {
        subject
    };
    let data = data(message);
    let review = match data.as_ref().and_then(|d| d.get("review")) {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(r)) => Some(
            Review::parse("review", r)
                .map_err(|_| invalid("message.parts.data.review", "is not plan, result or both"))?,
        ),
        Some(_) => {
            return Err(invalid(
                "message.parts.data.review",
                "is not plan, result or both",
            ))
        }
    };
    Ok(NewTask {
        subject,
        description,
        blocked_by: strings(data.as_ref(), "blocked_by")?,
        files: strings(data.as_ref(), "files")?,
        review,
        origin: Origin {
            by: by.to_owned(),
            context_id,
            message_id: message.message_id.clone(),
        },
    })
}

/// A subject for a message without text: what its first part is.
fn untitled(message: &a2a::Message) -> Option<String> {
    let part = message.parts.first()?;
    let named = |what: &str, size: String| {
        let name = if part.filename.is_empty() {
            String::new()
        } else {
            format!(" {}", part.filename)
        };
        let kind = if part.media_type.is_empty() {
            String::new()
        } else {
            format!(", {}", part.media_type)
        };
        format!("(no text) {what}{name} ({size}{kind})")
    };
    Some(match &part.content {
        Some(Content::Raw(bytes)) => named("a file", format!("{} bytes", bytes.len())),
        Some(Content::Url(url)) => named("a link", url.chars().take(200).collect()),
        Some(Content::Data(_)) => named("data", "a JSON value".into()),
        Some(Content::Text(_)) | None => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::answers::decision;

    fn message(parts: Vec<a2a::Part>) -> a2a::Message {
        a2a::Message {
            message_id: "m".into(),
            role: a2a::Role::User as i32,
            parts,
            ..Default::default()
        }
    }

    fn data_part(json: serde_json::Value) -> a2a::Part {
        a2a::Part {
            content: Some(Content::Data(value(&json))),
            ..Default::default()
        }
    }

    #[test]
    fn a_message_is_a_task_subject_first_line_and_data_for_the_rest() {
        let m = message(vec![
            text("Add the login page\nWith a form.\n"),
            data_part(serde_json::json!({"files": ["src/login.rs"], "review": "plan"})),
        ]);
        let task = new_task(&m, "a2a alice", "goal".into()).expect("a task");
        assert_eq!(task.subject, "Add the login page");
        assert_eq!(task.description, "With a form.");
        assert_eq!(task.files, ["src/login.rs"]);
        assert_eq!(task.review, Some(Review::Plan));
        assert_eq!(task.origin.by, "a2a alice");
        assert_eq!(task.origin.context_id, "goal");
        let none = new_task(&message(vec![]), "a2a alice", "g".into()).expect_err("no text");
        assert!(none.message().contains("message.parts"), "{none:?}");
        let raw = message(vec![a2a::Part {
            content: Some(Content::Raw(b"tck".to_vec())),
            media_type: "application/x-unknown".into(),
            ..Default::default()
        }]);
        let raw = new_task(&raw, "a", "g".into()).expect("a file alone is a task");
        assert_eq!(
            raw.subject,
            "(no text) a file (3 bytes, application/x-unknown)"
        );
        let bad = message(vec![
            text("x"),
            data_part(serde_json::json!({"files": [1]})),
        ]);
        let bad = new_task(&bad, "a", "g".into()).expect_err("not strings");
        assert!(bad.message().contains("files[0]"), "{bad:?}");
    }

    #[test]
    fn a_decision_comes_as_data_or_as_text() {
        let d = message(vec![data_part(
            serde_json::json!({"decision": "reject", "feedback": "smaller"}),
        )]);
        assert_eq!(decision(&d).expect("data"), (false, "smaller".to_owned()));
        assert_eq!(
            decision(&message(vec![text("Approve: looks right")])).expect("text"),
            (true, "looks right".to_owned())
        );
        assert_eq!(
            decision(&message(vec![text("reject, split it")])).expect("text"),
            (false, "split it".to_owned())
        );
        assert_eq!(
            decision(&message(vec![text("Make it smaller first")])).expect("input"),
            (false, "Make it smaller first".to_owned()),
            "anything but an approval is feedback"
        );
        assert!(decision(&message(vec![])).is_err());
        let odd = message(vec![data_part(serde_json::json!({"decision": "yes"}))]);
        assert!(decision(&odd).is_err());
    }

    #[test]
    fn each_task_status_has_its_state_and_a_completed_one_its_summary() {
        let task = |status, owner: &str| Task {
            task_id: "t1".into(),
            subject: "s".into(),
            description: String::new(),
            status,
            owner: owner.into(),
            blocked_by: vec![],
            files: vec![],
            created_at_unix_ms: 1_000,
            updated_at_unix_ms: 2_500,
            summary: "done it".into(),
            review: Review::Plan,
            origin: Origin::default(),
            outputs: Vec::new(),
            reply: false,
        };
        let pending = to_a2a(&task(TaskStatus::Pending, ""), None, None, &[], None, true);
        assert_eq!(
            pending.status.as_ref().map(|s| s.state),
            Some(a2a::TaskState::Submitted as i32)
        );
        assert_eq!(pending.context_id, "t1");
        assert!(pending.artifacts.is_empty());
        assert_eq!(pending.history.len(), 2);
        let claimed = to_a2a(
            &task(TaskStatus::Claimed, "ann"),
            None,
            None,
            &[],
            Some(1),
            true,
        );
        assert_eq!(
            claimed.status.as_ref().map(|s| s.state),
            Some(a2a::TaskState::Working as i32)
        );
        assert_eq!(claimed.history.len(), 1);
        let done = to_a2a(
            &task(TaskStatus::Completed, "ann"),
            None,
            None,
            &[],
            Some(0),
            true,
        );
        assert_eq!(
            done.status.as_ref().map(|s| s.state),
            Some(a2a::TaskState::Completed as i32)
        );
        assert!(done.history.is_empty());
        assert_eq!(done.artifacts.len(), 1);
        let ts = done
            .status
            .as_ref()
            .and_then(|s| s.timestamp)
            .expect("timestamp");
        assert_eq!((ts.seconds, ts.nanos), (2, 500_000_000));
        let without = to_a2a(
            &task(TaskStatus::Completed, "ann"),
            None,
            None,
            &[],
            None,
            false,
        );
        assert!(without.artifacts.is_empty());
        let produced = Task {
            outputs: vec![
                Output {
                    name: "output.txt".into(),
                    media_type: String::new(),
                    content: OutputContent::Url("https://example.com/output.txt".into()),
                },
                Output {
                    name: "counts".into(),
                    media_type: String::new(),
                    content: OutputContent::DataJson(r#"{"count": 42}"#.into()),
                },
            ],
            ..task(TaskStatus::Completed, "ann")
        };
        let produced = to_a2a(&produced, None, None, &[], None, true);
        let names: Vec<&str> = produced.artifacts.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["output.txt", "counts", "summary"]);
        let link = &produced.artifacts[0].parts[0];
        assert_eq!(link.filename, "output.txt");
        assert!(matches!(&link.content, Some(Content::Url(u)) if u.ends_with("output.txt")));
        let data = &produced.artifacts[1].parts[0];
        assert_eq!(data.media_type, "application/json");
        let Some(Content::Data(data)) = &data.content else {
            panic!("{data:?}")
        };
        assert_eq!(json(data), serde_json::json!({"count": 42.0}));
    }
}
