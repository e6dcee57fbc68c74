//! A fake OpenAI-compatible chat-completions server: a real HTTP server on
//! loopback (axum) that answers `POST /v1/chat/completions` from a script,
//! in order, and records every request it gets. With the script used up it
//! answers with a plain text reply (the model is done).

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    extract::State,
    http::{header, HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
    Json, Router,
};
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::within;

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Answer {
    /// A reply with this text and these tool calls `(name, arguments)`,
    /// streamed as OpenAI streams it (ids `call_<n>`, arguments in pieces).
    Reply {
        content: String,
        calls: Vec<(String, String)>,
    },
    /// These chunks as server-sent events, then `[DONE]`: for quirks.
    Chunks(Vec<Value>),
    /// This body as one JSON response (a server that does not stream).
    Whole(Value),
    /// An error status, with `Retry-After` if given.
    Status {
        code: u16,
        retry_after: Option<u64>,
        body: String,
    },
    /// No answer for this long (a slow model); the connection stays open.
    Stall(Duration),
}

impl Answer {
    /// A reply that calls one tool.
    pub fn call(name: &str, arguments: Value) -> Answer {
        Answer::Reply {
            content: String::new(),
            calls: vec![(name.into(), arguments.to_string())],
        }
    }

    /// A reply that calls one tool with arguments written as they are (malformed ones).
    pub fn call_raw(name: &str, arguments: &str) -> Answer {
        Answer::Reply {
            content: String::new(),
            calls: vec![(name.into(), arguments.into())],
        }
    }

    /// A reply with text only: the turn ends.
    pub fn text(content: &str) -> Answer {
        Answer::Reply {
            content: content.into(),
            calls: Vec::new(),
        }
    }
}

/// A request the server got.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The JSON body.
    pub body: Value,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
}

impl Recorded {
    /// The names of the tools offered.
    pub fn tool_names(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The messages sent.
    pub fn messages(&self) -> Vec<Value> {
        self.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The last message.
    pub fn last_message(&self) -> Value {
        self.messages().last().cloned().unwrap_or(Value::Null)
    }

    /// Every message's content, joined: for "does the conversation say X".
    pub fn all_text(&self) -> String {
        self.messages()
            .iter()
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[derive(Default)]
struct Shared {
    script: Mutex<VecDeque<Answer>>,
    requests: Mutex<Vec<Recorded>>,
    arrived: Notify,
}

/// A running fake server; it stops when dropped.
pub struct FakeModel {
    /// The base URL to pass as `--base-url` (`http://127.0.0.1:PORT/v1`).
    pub base_url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeModel {
    /// Starts a server that answers with `script`, in order.
    pub async fn start(script: Vec<Answer>) -> FakeModel {
        let shared = Arc::new(Shared::default());
        shared.script.lock().unwrap().extend(script);
        let app = Router::new()
            .route("/v1/chat/completions", post(complete))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeModel {
            base_url: format!("http://{addr}/v1"),
            shared,
            task,
        }
    }

    /// Adds answers to the end of the script.
    pub fn push(&self, answers: impl IntoIterator<Item = Answer>) {
        self.shared.script.lock().unwrap().extend(answers);
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// Waits until at least `n` requests arrived; returns them all.
    pub async fn wait_for(&self, n: usize) -> Vec<Recorded> {
        within(&format!("{n} requests to the fake model"), async {
            loop {
                let arrived = self.shared.arrived.notified();
                let requests = self.requests();
                if requests.len() >= n {
                    return requests;
                }
                arrived.await;
            }
        })
        .await
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn complete(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let answer = shared.script.lock().unwrap().pop_front();
    shared.requests.lock().unwrap().push(Recorded {
        body,
        authorization,
    });
    shared.arrived.notify_waiters();
    match answer.unwrap_or_else(|| Answer::text("(the fake model has nothing more to say)")) {
        Answer::Reply { content, calls } => sse(reply_chunks(&content, &calls)),
        Answer::Chunks(chunks) => sse(chunks),
        Answer::Whole(body) => Json(body).into_response(),
        Answer::Status {
            code,
            retry_after,
            body,
        } => {
            let code = StatusCode::from_u16(code).unwrap();
            let mut response = (code, body).into_response();
            if let Some(seconds) = retry_after {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, seconds.to_string().parse().unwrap());
            }
            response
        }
        Answer::Stall(duration) => {
            tokio::time::sleep(duration).await;
            sse(reply_chunks("(late)", &[]))
        }
    }
}

/// The chunks OpenAI streams for a reply.
fn reply_chunks(content: &str, calls: &[(String, String)]) -> Vec<Value> {
    let mut chunks =
        vec![json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})];
    if !content.is_empty() {
        chunks.push(json!({"choices": [{"index": 0, "delta": {"content": content}}]}));
    }
    for (i, (name, arguments)) in calls.iter().enumerate() {
        chunks.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": i, "id": format!("call_{i}"), "type": "function",
             "function": {"name": name, "arguments": ""}}
        ]}}]}));
        let mid = (0..=arguments.len() / 2)
            .rev()
            .find(|&m| arguments.is_char_boundary(m))
            .unwrap_or(0);
        for piece in [&arguments[..mid], &arguments[mid..]] {
            chunks.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": i, "function": {"arguments": piece}}
            ]}}]}));
        }
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    chunks.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}));
    chunks
}

/// Chunks as a server-sent-event stream, ending with `[DONE]`.
fn sse(chunks: Vec<Value>) -> Response {
    let mut body = String::new();
    for chunk in chunks {
        body.push_str(&format!("data: {chunk}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}
