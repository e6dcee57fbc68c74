//! Replies recorded from a real model server (llama.cpp's, running
//! Qwen2.5-Coder-0.5B; see `tests/fixtures/real-model/README.md`), replayed
//! byte for byte through the [`Assembler`].

use serde_json::{json, Value};

use super::{Assembler, Reply};

/// A fixture's `response_body` as the chunks before `data: [DONE]` or the
/// server's error event, and that error.
struct Replay {
    /// The chunks, in order.
    chunks: Vec<Value>,
    /// The `error` of a mid-stream error event.
    error: Option<Value>,
}

impl Replay {
    fn of(name: &str) -> Self {
        let path = format!(
            "{}/../../tests/fixtures/real-model/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).expect("the fixture");
        let fixture: Value = serde_json::from_str(&text).expect("the fixture is JSON");
        let body = fixture["response_body"].as_str().expect("a response_body");
        let mut replay = Replay {
            chunks: Vec::new(),
            error: None,
        };
        for line in body.lines() {
            let Some(data) = line.strip_prefix("data:").map(str::trim) else {
                continue;
            };
            if data == "[DONE]" {
                break;
            }
            let chunk: Value = serde_json::from_str(data).expect("a chunk is JSON");
            if let Some(error) = chunk.get("error") {
                replay.error = Some(error.clone());
                break;
            }
            replay.chunks.push(chunk);
        }
        replay
    }

    fn reply(&self) -> Reply {
        let mut assembler = Assembler::default();
        for chunk in &self.chunks {
            assembler.push_chunk(chunk);
        }
        assembler.finish()
    }
}

/// Each call's name and arguments, parsed.
fn calls(reply: &Reply) -> Vec<(&str, Value)> {
    reply
        .tool_calls
        .iter()
        .map(|c| {
            let args = serde_json::from_str(&c.function.arguments).expect("arguments are JSON");
            (c.function.name.as_str(), args)
        })
        .collect()
}

#[test]
fn several_calls_as_json_lines_are_four_calls_in_order() {
    let reply = Replay::of("several-calls-as-json-lines.json").reply();
    assert_eq!(
        calls(&reply),
        [
            ("add", json!({"a": 5, "b": 3})),
            (
                "edit_file",
                json!({"file": "example.txt", "content": "5 + 3 = 8"})
            ),
            (
                "run_command",
                json!({"command": "ls", "output": "example.txt"})
            ),
            (
                "respond_shutdown",
                json!({"message": "Thank you for using the math_utils.py file."})
            ),
        ]
    );
    assert_eq!(reply.content, "");
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    // The request did not ask for usage (stream_options.include_usage).
    assert_eq!(reply.usage, None);
}

#[test]
fn a_fenced_call_in_content_is_one_call() {
    let reply = Replay::of("fenced-call-in-content.json").reply();
    let calls = calls(&reply);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].0, "submit_plan");
    assert_eq!(
        calls[0].1["summary"],
        "Create hello.txt containing 'hello world'"
    );
    assert_eq!(calls[0].1["files"], json!(["hello.txt"]));
    assert_eq!(reply.content, "");
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
}

#[test]
fn a_wrong_argument_name_is_kept_as_written() {
    let reply = Replay::of("wrong-argument-name.json").reply();
    assert_eq!(
        calls(&reply),
        [(
            "write_file",
            json!({"path": "hello.txt", "text": "hello world"})
        )]
    );
    assert_eq!(reply.content, "");
}

#[test]
fn a_runaway_reply_gives_its_whole_calls_and_no_partial_one() {
    let reply = Replay::of("runaway-reply.json").reply();
    assert_eq!(reply.finish_reason.as_deref(), Some("length"));
    assert!(reply.cut());
    let calls = calls(&reply);
    // 18 whole lines: one write_file, then submit_plan 17 times, each with
    // a stray `}` after it; the 19th line is cut mid-string.
    assert_eq!(calls.len(), 18);
    assert_eq!(
        calls[0],
        (
            "write_file",
            json!({"path": "hello.txt", "content": "hello world"})
        )
    );
    for (name, args) in &calls[1..] {
        assert_eq!(*name, "submit_plan");
        assert_eq!(args["files"], json!(["hello.txt"]));
        assert_eq!(
            args["tests"],
            json!(["list_tasks", "claim_task", "complete_task"])
        );
    }
    assert_eq!(reply.content, "", "neither the JSON nor its stray braces");
}

#[test]
fn an_error_mid_stream_comes_after_the_first_chunk() {
    let replay = Replay::of("error-mid-stream.json");
    let error = replay.error.as_ref().expect("the error event");
    assert_eq!(error["code"], 500);
    assert_eq!(replay.chunks.len(), 1);
    assert_eq!(replay.reply(), Reply::default());
}

#[test]
fn an_error_after_a_partial_tool_call_follows_its_deltas() {
    let replay = Replay::of("error-after-partial-tool-call.json");
    let error = replay.error.as_ref().expect("the error event");
    assert!(error["message"]
        .as_str()
        .is_some_and(|m| m.contains("does not match")));
    assert_eq!(replay.chunks.len(), 112);
    let reply = replay.reply();
    assert_eq!(reply.tool_calls.len(), 1);
    assert_eq!(reply.tool_calls[0].id, "A4UklZvH67WLOciXsDZmetvgxFNd6Hwb");
    assert_eq!(reply.tool_calls[0].function.name, "submit_plan");
    assert!(reply.tool_calls[0]
        .function
        .arguments
        .starts_with("{\"summary\": \"Submit your plan"));
    assert_eq!(reply.content, "");
    assert_eq!(reply.finish_reason, None);
}
