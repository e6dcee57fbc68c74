//! What the console's first load says of a request: what the queue and the
//! lists show (its kind, who, its subject, its files and their line counts,
//! its status and history, how big its payload is), not its content (a
//! result's diff and test output, a plan's body, a permission's arguments),
//! which a card or the request's page fetches on its own
//! (`GET /api/request`). A lead that keeps a day of results loads in a
//! few kilobytes, not megabytes of diffs.

use mesh_core::protocol::Request;
use serde_json::Value;

use super::json::request_json;

/// `request_json` without the content: `"brief": true` where something was
/// left out, and `"payload_bytes"`, the whole payload's size.
pub(super) fn brief_json(request: &Request) -> Value {
    brief_of(request_json(request), request.opening.payload_json.len())
}

/// A request's JSON cut to its brief; `payload_bytes`: its payload's size.
fn brief_of(mut value: Value, payload_bytes: usize) -> Value {
    let payload = &mut value["payload"];
    let mut cut = false;
    for path in [
        &["plan", "body"][..],
        &["result", "diff"][..],
        &["result", "test_output"][..],
    ] {
        cut |= drop_field(payload, path);
    }
    // A permission: its tool, the path its call names and the command it
    // runs (cut), not its other arguments (a file's whole content for
    // write_file): what the queue's card says it does to what.
    if let Some(args) = payload.get("args_json").and_then(Value::as_str) {
        let args = serde_json::from_str::<Value>(args).unwrap_or(Value::Null);
        if let Some(path) = args.get("path").and_then(Value::as_str) {
            payload["path"] = Value::String(path.to_owned());
        }
        if let Some(command) = args.get("command").and_then(Value::as_str) {
            payload["command"] = Value::String(mesh_core::limits::cut(command, 300));
        }
        cut |= drop_field(payload, &["args_json"]);
    }
    if cut {
        value["brief"] = Value::Bool(true);
    }
    value["payload_bytes"] = payload_bytes.into();
    value
}

/// Removes the field at `path`; whether it held anything.
fn drop_field(value: &mut Value, path: &[&str]) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let mut at = value;
    for key in parents {
        match at.get_mut(*key) {
            Some(next) => at = next,
            None => return false,
        }
    }
    at.as_object_mut()
        .and_then(|object| object.remove(*last))
        .is_some_and(|gone| !matches!(&gone, Value::Null) && gone != Value::String(String::new()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mesh_core::{
        names::RequestId,
        protocol::{Kind, Opening, Status},
    };
    use shared::wire::ToPb;

    fn request(kind: Kind, payload: Value) -> Request {
        Request {
            opening: Opening {
                id: RequestId::existing("request_id", "r1").expect("id"),
                kind,
                sender: "ann".into(),
                target: "lead".into(),
                payload_json: payload.to_string(),
                deadline_unix_ms: None,
            },
            status: Status::Pending,
            decision: None,
            feedback: String::new(),
            created_at_unix_ms: 0,
            resolved_at_unix_ms: None,
            reviews: Vec::new(),
            waits_for: Vec::new(),
        }
    }

    #[test]
    fn a_result_keeps_its_summary_and_files_not_its_diff() {
        let diff = "+x\n".repeat(10_000);
        let payload = serde_json::json!({"result": {"summary": "s", "diff": diff,
            "test_output": "ok", "files": [{"path": "a", "added": 3}]}, "plan_id": "p"});
        let brief = brief_json(&request(Kind::Result, payload.clone()));
        assert_eq!(brief["brief"], true);
        assert_eq!(brief["payload"]["result"]["summary"], "s");
        assert_eq!(brief["payload"]["result"]["files"][0]["path"], "a");
        assert!(brief["payload"]["result"].get("diff").is_none());
        assert!(brief["payload"]["result"].get("test_output").is_none());
        assert_eq!(brief["payload_bytes"], payload.to_string().len());
        assert!(brief.to_string().len() < 1024);
    }

    #[test]
    fn a_permission_keeps_its_tool_and_path() {
        let args = serde_json::json!({"path": "src/a.rs", "content": "x".repeat(5000)});
        let payload = serde_json::json!({"tool": "write_file", "args_json": args.to_string()});
        let brief = brief_json(&request(Kind::Permission, payload));
        assert_eq!(brief["payload"]["tool"], "write_file");
        assert_eq!(brief["payload"]["path"], "src/a.rs");
        let args = serde_json::json!({"command": "make check"});
        let payload = serde_json::json!({"tool": "run_command", "args_json": args.to_string()});
        let brief = brief_of(serde_json::json!({ "payload": payload }), 100);
        assert_eq!(brief["payload"]["command"], "make check");
        assert!(brief["payload"].get("args_json").is_none());
        assert_eq!(brief["brief"], true);
    }

    #[test]
    fn a_plan_without_a_body_and_a_shutdown_are_whole() {
        let payload = serde_json::json!({"plan": {"summary": "s", "files": ["a"], "body": ""}});
        let whole = brief_json(&request(Kind::PlanApproval, payload));
        assert!(whole.get("brief").is_none());
        assert_eq!(whole["payload"]["plan"]["files"][0], "a");
        let payload = serde_json::json!({"reason": "done"});
        let whole = brief_json(&request(Kind::Shutdown, payload));
        assert!(whole.get("brief").is_none());
        assert_eq!(whole["payload"]["reason"], "done");
    }

    #[test]
    fn a_brief_is_the_one_made_from_the_wire() {
        for request in super::super::json::requests() {
            let wire = request.to_pb();
            let from_wire = brief_of(crate::render::request_json(&wire), wire.payload_json.len());
            assert_eq!(brief_json(&request), from_wire, "{request:?}");
        }
    }
}
