//! The tools a teammate offers a model (or any agent), by their binding
//! names: each one's description and JSON schema, and how a call's
//! arguments become a request of the session. Which tools are on offer at a
//! moment is the gate's business ([`crate::gate::Gate::tools`]); a call to a
//! tool not on offer is parsed all the same and meets the gate.

use mesh_core::plan::Plan;
use mesh_llm::Tool;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::{driver::TaskCall, tools::ToolCall};

/// `send_message(to, text)`.
pub const SEND_MESSAGE: &str = "send_message";
/// `submit_plan(summary, steps[], files[], tests[], body?)`.
pub const SUBMIT_PLAN: &str = "submit_plan";
/// `respond_shutdown(approve, reason)`.
pub const RESPOND_SHUTDOWN: &str = "respond_shutdown";
/// `list_tasks()`.
pub const LIST_TASKS: &str = "list_tasks";
/// `claim_task(task_id?)`.
pub const CLAIM_TASK: &str = "claim_task";
/// `complete_task(task_id, summary)`.
pub const COMPLETE_TASK: &str = "complete_task";
/// `request_amendment(files[], steps[]?, why)`, once a plan is approved.
pub const REQUEST_AMENDMENT: &str = "request_amendment";
/// `done(summary)`: a model says it has nothing more to do now (the model
/// driver's; it ends the turn, and is on offer only when nothing is owed).
pub const DONE: &str = "done";
/// The task-list tools, on offer in every mode.
pub const TASK_TOOLS: [&str; 3] = [LIST_TASKS, CLAIM_TASK, COMPLETE_TASK];

/// Every tool name a teammate knows.
pub const ALL: [&str; 13] = [
    "read_file",
    "list_dir",
    "search",
    SEND_MESSAGE,
    LIST_TASKS,
    CLAIM_TASK,
    COMPLETE_TASK,
    SUBMIT_PLAN,
    "write_file",
    "edit_file",
    "run_command",
    RESPOND_SHUTDOWN,
    REQUEST_AMENDMENT,
];

/// What a call asks the session for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// A workspace tool (read, or gated).
    Tool(ToolCall),
    /// A message to a member (or `*`).
    Send { to: String, text: String },
    /// A plan for review.
    Submit(Plan),
    /// The answer to the waiting shutdown request.
    RespondShutdown { approve: bool, reason: String },
    /// A call on the shared task list.
    Task(TaskCall),
}

/// The tool `name` as a model sees it; `None` for an unknown name.
pub fn tool(name: &str) -> Option<Tool> {
    let string = json!({"type": "string"});
    let strings = json!({"type": "array", "items": {"type": "string"}});
    let object = |properties: Value, required: &[&str]| json!({"type": "object", "properties": properties, "required": required});
    let (name, description, parameters) = match name {
        "read_file" => (
            "read_file",
            "Read a text file; `path` is relative to the workspace.",
            object(json!({"path": string}), &["path"]),
        ),
        "list_dir" => (
            "list_dir",
            "List a directory (\".\" is the workspace); directories end in `/`.",
            object(json!({"path": string}), &["path"]),
        ),
        "search" => (
            "search",
            "Find lines containing `pattern` (plain text) in the workspace's files; `path` \
             narrows it to a directory.",
            object(json!({"pattern": string, "path": string}), &["pattern"]),
        ),
        SEND_MESSAGE => (
            SEND_MESSAGE,
            "Send a text to a member by name, to \"lead\", or to everyone as \"*\".",
            object(json!({"to": string, "text": string}), &["to", "text"]),
        ),
        SUBMIT_PLAN => (
            SUBMIT_PLAN,
            "Submit your plan for review; you write only once it is approved.",
            object(
                json!({"summary": {"type": "string", "description": "what you will do, in one sentence"},
                       "steps": {"type": "array", "items": string, "description": "what you will do, in order"},
                       "files": {"type": "array", "items": string,
                                 "description": "the paths you will create or change, not those you only read"},
                       "tests": strings,
                       "body": {"type": "string", "description": "details, optional"}}),
                &["summary", "steps", "files", "tests"],
            ),
        ),
        "write_file" => (
            "write_file",
            "Write a whole file (created or replaced).",
            object(
                json!({"path": string, "content": string}),
                &["path", "content"],
            ),
        ),
        "edit_file" => (
            "edit_file",
            "Replace the one occurrence of `old` with `new` in a file.",
            object(
                json!({"path": string, "old": string, "new": string}),
                &["path", "old", "new"],
            ),
        ),
        "run_command" => (
            "run_command",
            "Run a shell command in the workspace (sh -c, 60 s limit): its exit status and \
             output.",
            object(json!({"command": string}), &["command"]),
        ),
        LIST_TASKS => (
            LIST_TASKS,
            "List the team's shared tasks.",
            object(json!({}), &[]),
        ),
        CLAIM_TASK => (
            CLAIM_TASK,
            "Claim a shared task to work on (`task_id`, or none for the oldest claimable); \
             your next plan is for it.",
            object(json!({"task_id": string}), &[]),
        ),
        COMPLETE_TASK => (
            COMPLETE_TASK,
            "Complete your claimed task, with a short summary of what you did.",
            object(
                json!({"task_id": string, "summary": string}),
                &["task_id", "summary"],
            ),
        ),
        REQUEST_AMENDMENT => (
            REQUEST_AMENDMENT,
            "Your approved plan must grow: ask to add `files` (and `steps`), saying `why`. \
             It is reviewed against your plan; on approval you may write those files too.",
            object(
                json!({"files": strings, "steps": strings, "why": string}),
                &["files", "why"],
            ),
        ),
        RESPOND_SHUTDOWN => (
            RESPOND_SHUTDOWN,
            "Answer the lead's shutdown request: approve=true to stop, or approve=false with a \
             reason to go on.",
            object(
                json!({"approve": {"type": "boolean"}, "reason": string}),
                &["approve", "reason"],
            ),
        ),
        DONE => (
            DONE,
            "End your turn: nothing more to do until a message comes. `summary`: what you \
             did, or why you stop.",
            object(json!({"summary": string}), &["summary"]),
        ),
        _ => return None,
    };
    Some(Tool {
        name,
        description,
        parameters,
    })
}

#[derive(Deserialize)]
struct PathArgs {
    #[serde(default)]
    path: String,
}

#[derive(Deserialize)]
struct SearchArgs {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
}

#[derive(Deserialize)]
struct WriteArgs {
    path: String,
    content: String,
}

#[derive(Deserialize)]
struct EditArgs {
    path: String,
    old: String,
    new: String,
}

#[derive(Deserialize)]
struct CommandArgs {
    command: String,
}

#[derive(Deserialize)]
struct SendArgs {
    to: String,
    text: String,
}

#[derive(Deserialize)]
struct PlanArgs {
    summary: String,
    #[serde(default)]
    steps: Vec<String>,
    #[serde(default)]
    files: Vec<String>,
    #[serde(default)]
    tests: Vec<String>,
    #[serde(default)]
    body: Option<String>,
}

#[derive(Deserialize)]
struct ClaimArgs {
    #[serde(default)]
    task_id: Option<String>,
}

#[derive(Deserialize)]
struct CompleteArgs {
    task_id: String,
    summary: String,
}

#[derive(Deserialize)]
struct AmendArgs {
    files: Vec<String>,
    #[serde(default)]
    steps: Vec<String>,
    why: String,
}

#[derive(Deserialize)]
struct ShutdownArgs {
    approve: bool,
    #[serde(default)]
    reason: String,
}

/// The request a call of `name` with `arguments` (JSON text, as the model
/// wrote it) makes; the error says what is wrong, for the model to fix. A
/// name no tool has is told the tools `offered` now (the mode's, not every
/// one a teammate knows: plan mode does not hear of the gated tools).
pub fn parse(name: &str, arguments: &str, offered: &[&str]) -> Result<Request, String> {
    let value: Value = if arguments.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(arguments)
            .map_err(|e| format!("the arguments of {name} are not valid JSON ({e})"))?
    };
    Ok(match name {
        "read_file" => {
            let a: PathArgs = typed(name, value)?;
            if a.path.is_empty() {
                return Err(format!("{name} needs `path`"));
            }
            Request::Tool(ToolCall::ReadFile { path: a.path })
        }
        "list_dir" => {
            let a: PathArgs = typed(name, value)?;
            Request::Tool(ToolCall::ListDir { path: a.path })
        }
        "search" => {
            let a: SearchArgs = typed(name, value)?;
            Request::Tool(ToolCall::Search {
                pattern: a.pattern,
                path: a.path.filter(|p| !p.is_empty() && p != "."),
            })
        }
        "write_file" => {
            let a: WriteArgs = typed(name, value)?;
            Request::Tool(ToolCall::WriteFile {
                path: a.path,
                content: a.content,
            })
        }
        "edit_file" => {
            let a: EditArgs = typed(name, value)?;
            Request::Tool(ToolCall::EditFile {
                path: a.path,
                old: a.old,
                new: a.new,
            })
        }
        "run_command" => {
            let a: CommandArgs = typed(name, value)?;
            Request::Tool(ToolCall::RunCommand { command: a.command })
        }
        SEND_MESSAGE => {
            let a: SendArgs = typed(name, value)?;
            Request::Send {
                to: a.to,
                text: a.text,
            }
        }
        SUBMIT_PLAN => {
            let a: PlanArgs = typed(name, value)?;
            Request::Submit(Plan {
                summary: a.summary,
                steps: a.steps,
                files: a.files,
                tests: a.tests,
                body: a.body.unwrap_or_default(),
                task_id: String::new(),
            })
        }
        LIST_TASKS => Request::Task(TaskCall::List),
        CLAIM_TASK => {
            let a: ClaimArgs = typed(name, value)?;
            Request::Task(TaskCall::Claim(a.task_id.filter(|id| !id.is_empty())))
        }
        COMPLETE_TASK => {
            let a: CompleteArgs = typed(name, value)?;
            Request::Task(TaskCall::Complete {
                task_id: a.task_id,
                summary: a.summary,
            })
        }
        REQUEST_AMENDMENT => {
            let a: AmendArgs = typed(name, value)?;
            Request::Task(TaskCall::Amend {
                files: a.files,
                steps: a.steps,
                why: a.why,
            })
        }
        RESPOND_SHUTDOWN => {
            let a: ShutdownArgs = typed(name, value)?;
            Request::RespondShutdown {
                approve: a.approve,
                reason: a.reason,
            }
        }
        other => {
            return Err(format!(
                "there is no tool {other:?}; the tools are {}",
                offered.join(", ")
            ))
        }
    })
}

/// The arguments as `T`, or what is wrong with them and what was expected.
fn typed<T: for<'de> Deserialize<'de>>(name: &str, value: Value) -> Result<T, String> {
    serde_json::from_value(value).map_err(|e| {
        let expected = tool(name)
            .map(|t| t.parameters["properties"].to_string())
            .unwrap_or_default();
        format!("the arguments of {name} do not fit ({e}); expected {expected}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`parse`] with every tool on offer.
    fn parse_any(name: &str, arguments: &str) -> Result<Request, String> {
        parse(name, arguments, &ALL)
    }

    #[test]
    fn every_tool_has_a_schema_and_parses() {
        for name in ALL {
            let tool = tool(name).expect("a schema");
            assert_eq!(tool.name, name);
            assert_eq!(tool.parameters["type"], "object");
        }
        assert!(tool("rm_rf").is_none());
        assert_eq!(
            parse_any("read_file", r#"{"path": "a.rs"}"#),
            Ok(Request::Tool(ToolCall::ReadFile {
                path: "a.rs".into()
            }))
        );
        assert_eq!(
            parse_any("list_dir", ""),
            Ok(Request::Tool(ToolCall::ListDir { path: "".into() }))
        );
        assert_eq!(
            parse_any("search", r#"{"pattern": "fn", "path": "src"}"#),
            Ok(Request::Tool(ToolCall::Search {
                pattern: "fn".into(),
                path: Some("src".into())
            }))
        );
        assert!(matches!(
            parse_any("submit_plan", r#"{"summary": "s", "steps": ["a"], "files": ["f"], "tests": ["t"]}"#),
            Ok(Request::Submit(p)) if p.files == ["f"] && p.body.is_empty()
        ));
        assert_eq!(
            parse_any(
                "respond_shutdown",
                r#"{"approve": false, "reason": "busy"}"#
            ),
            Ok(Request::RespondShutdown {
                approve: false,
                reason: "busy".into()
            })
        );
    }

    #[test]
    fn malformed_arguments_say_what_is_wrong() {
        let not_json = parse_any("write_file", "{path: a").expect_err("not JSON");
        assert!(not_json.contains("not valid JSON"), "{not_json}");
        let wrong_type =
            parse_any("write_file", r#"{"path": 3, "content": "x"}"#).expect_err("type");
        assert!(
            wrong_type.contains("do not fit") && wrong_type.contains("\"content\""),
            "{wrong_type}"
        );
        let missing = parse_any("read_file", "{}").expect_err("missing");
        assert!(missing.contains("path"), "{missing}");
        let unknown = parse_any("delete_everything", "{}").expect_err("unknown");
        assert!(
            unknown.contains("no tool") && unknown.contains("write_file"),
            "{unknown}"
        );
        // In plan mode only plan mode's tools are named.
        let plan = crate::gate::Gate::Plan.tools();
        let unknown = parse("delete_everything", "{}", &plan).expect_err("unknown");
        assert!(
            unknown.contains("submit_plan") && unknown.contains("read_file"),
            "{unknown}"
        );
        for gated in crate::tools::GATED_TOOLS {
            assert!(!unknown.contains(gated), "{unknown}");
        }
        assert!(parse_any("respond_shutdown", r#"{"approve": "yes"}"#).is_err());
        assert!(parse_any("read_file", "[1]").is_err());
    }
}
