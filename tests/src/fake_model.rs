//! A fake OpenAI-compatible chat-completions server: a real HTTP server on
//! loopback (axum) that answers `POST /v1/chat/completions` from a script,
//! in order, and records every request it gets. With the script used up it
//! answers with a plain text reply (the model is done).
//!
//! It counts tokens as a quarter of the bytes of a request's messages and
//! tools (and of a reply's text and calls), reports them as `usage` when
//! asked (`stream_options.include_usage`), and, given a context window
//! ([`FakeModel::limit_context`]), says it at `GET /props` as llama.cpp does
//! and refuses a request whose tokens and `max_tokens` pass it, as llama.cpp
//! does. Requests without tools (a summary asked for) can be answered apart
//! from the script ([`FakeModel::answer_summaries`]).

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
    /// A reply cut at the token limit (`finish_reason: length`): this text
    /// and these calls, the last of them cut in the middle of its arguments.
    Cut {
        content: String,
        calls: Vec<(String, String)>,
    },
    /// HTTP 200, these chunks, then the server's error event mid-stream (as
    /// llama.cpp sends when its tool-call parser rejects the output).
    ErrorMidStream { chunks: Vec<Value>, message: String },
    /// These bytes exactly, with this status and content type: a recorded
    /// reply replayed.
    Raw {
        status: u16,
        content_type: String,
        body: String,
    },
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

    /// The reply recorded from a real server in
    /// `tests/fixtures/real-model/<name>.json`, byte for byte.
    pub fn replay(name: &str) -> Answer {
        let path = format!(
            "{}/fixtures/real-model/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let recorded: Value = serde_json::from_str(&text).expect("a fixture is JSON");
        let streamed = recorded["request"]["stream"].as_bool().unwrap_or(false);
        Answer::Raw {
            status: recorded["http_status"].as_u64().expect("http_status") as u16,
            content_type: if streamed {
                "text/event-stream".into()
            } else {
                "application/json".into()
            },
            body: recorded["response_body"]
                .as_str()
                .expect("response_body")
                .into(),
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
    /// The names of the tools offered: the request's `tools`, or, where a
    /// schema holds the reply (and the request carries no tools), the
    /// tools the schema lets the reply call.
    pub fn tool_names(&self) -> Vec<String> {
        if let Some(tools) = self.body["tools"].as_array() {
            return tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect();
        }
        let schema = &self.body["response_format"]["json_schema"]["schema"];
        let choices = match schema.get("anyOf").and_then(Value::as_array) {
            Some(choices) => choices.clone(),
            None if schema.is_object() => vec![schema.clone()],
            None => Vec::new(),
        };
        choices
            .iter()
            .filter_map(|c| c["properties"]["name"]["const"].as_str().map(str::to_owned))
            .collect()
    }

    /// The conversation as the teammate keeps it: the messages sent, less
    /// the words every request ends with (the task and what is still owed,
    /// [`Recorded::in_view`]), which are not kept from one request to the
    /// next.
    pub fn messages(&self) -> Vec<Value> {
        let mut messages = self.sent();
        let Some(last) = messages.last_mut() else {
            return messages;
        };
        let content = last["content"].as_str().unwrap_or_default().to_owned();
        match content.rfind(IN_VIEW) {
            Some(0) => {
                messages.pop();
            }
            Some(at) if last["role"] == "user" => {
                last["content"] = Value::from(content[..at].trim_end_matches('\n'));
            }
            _ => {}
        }
        messages
    }

    /// The words the request ends with: the task and what is still owed
    /// (empty if it has none).
    pub fn in_view(&self) -> String {
        let sent = self.sent();
        let last = sent
            .last()
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default();
        last.rfind(IN_VIEW)
            .map(|at| last[at..].to_owned())
            .unwrap_or_default()
    }

    /// The messages sent, as they were.
    pub fn sent(&self) -> Vec<Value> {
        self.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The last message (of [`Recorded::messages`]).
    pub fn last_message(&self) -> Value {
        self.messages().last().cloned().unwrap_or(Value::Null)
    }

    /// Every message's content as sent, joined: for "does the conversation
    /// say X".
    pub fn all_text(&self) -> String {
        self.sent()
            .iter()
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// How the words a model teammate's every request ends with begin
/// (`teammate/src/model/in_view.rs`).
pub const IN_VIEW: &str = "Your task: ";

/// The tokens the fake server counts for some JSON: a quarter of its bytes.
pub fn tokens_of(value: &Value) -> u64 {
    (value.to_string().len() as u64).div_ceil(4)
}

/// The prompt tokens the fake server counts for a request.
pub fn prompt_tokens(body: &Value) -> u64 {
    tokens_of(&body["messages"]) + body.get("tools").map_or(0, tokens_of)
}

#[derive(Default)]
struct Shared {
    script: Mutex<VecDeque<Answer>>,
    requests: Mutex<Vec<Recorded>>,
    arrived: Notify,
    /// The context window, if limited.
    context: Mutex<Option<u64>>,
    /// What a request without tools is answered, if set.
    summary: Mutex<Option<String>>,
    /// Requests refused for passing the context window.
    overlong: Mutex<Vec<u64>>,
    /// Whether the window is said as Ollama says it (`POST /api/show`)
    /// rather than as llama.cpp does (`GET /props`).
    ollama: Mutex<bool>,
    /// What the server says it is, where not Ollama.
    identity: Mutex<Identity>,
}

/// What the server says it is at `GET /v1/models` and `GET /props`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Identity {
    /// llama.cpp's server: `owned_by: llamacpp`, and the window at
    /// `/props` where one was given.
    #[default]
    LlamaCpp,
    /// A real llama.cpp server's own answers, recorded from the kit's.
    RecordedLlamaCpp,
    /// A plain OpenAI-compatible server that is none of the local ones.
    Plain,
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
            .route("/props", axum::routing::get(props))
            .route("/api/show", post(show))
            .route("/v1/models", axum::routing::get(models))
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

    /// Gives the model a context window of `tokens`: said at `GET /props`,
    /// and a request whose prompt and `max_tokens` pass it is refused.
    pub fn limit_context(&self, tokens: u64) {
        *self.shared.context.lock().unwrap() = Some(tokens);
    }

    /// Says the context window as Ollama does, at `POST /api/show` (the
    /// model's `num_ctx` parameter), and not at `GET /props`.
    pub fn speak_ollama(&self) {
        *self.shared.ollama.lock().unwrap() = true;
    }

    /// Says it is none of the servers known to enforce a JSON schema: a
    /// plain OpenAI-compatible server (a hosted API, a proxy), with no
    /// `/props` and a model list of its own.
    pub fn speak_plain(&self) {
        *self.shared.identity.lock().unwrap() = Identity::Plain;
    }

    /// Answers `GET /props` and `GET /v1/models` with a real llama.cpp
    /// server's answers, recorded from the kit's
    /// (`tests/fixtures/real-model/llama-server-*.json`).
    pub fn speak_recorded_llama_cpp(&self) {
        *self.shared.identity.lock().unwrap() = Identity::RecordedLlamaCpp;
    }

    /// Answers every request without tools (a summary) with `text`, apart
    /// from the script.
    pub fn answer_summaries(&self, text: &str) {
        *self.shared.summary.lock().unwrap() = Some(text.into());
    }

    /// The prompt tokens of every request refused for passing the window.
    pub fn overlong(&self) -> Vec<u64> {
        self.shared.overlong.lock().unwrap().clone()
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
    let prompt = prompt_tokens(&body);
    let asked_max = body["max_tokens"]
        .as_u64()
        .or_else(|| body["max_completion_tokens"].as_u64())
        .unwrap_or(0);
    let usage = body["stream_options"]["include_usage"]
        .as_bool()
        .unwrap_or(false)
        .then_some(prompt);
    let context = *shared.context.lock().unwrap();
    let summary = shared.summary.lock().unwrap().clone();
    let overlong = context.is_some_and(|n| prompt + asked_max > n);
    let answer = if overlong {
        shared.overlong.lock().unwrap().push(prompt);
        None
    } else if body.get("tools").is_none()
        && body.get("response_format").is_none()
        && summary.is_some()
    {
        summary.map(|text| Answer::text(&text))
    } else {
        Some(
            shared
                .script
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or_else(|| Answer::text("(the fake model has nothing more to say)")),
        )
    };
    shared.requests.lock().unwrap().push(Recorded {
        body,
        authorization,
    });
    shared.arrived.notify_waiters();
    let Some(answer) = answer else {
        let body = json!({"error": {"code": 400, "type": "exceed_context_size_error",
            "message": format!("the request exceeds the available context size ({prompt} prompt tokens + {asked_max} to generate > {} tokens), try increasing it", context.unwrap_or_default())}});
        return (StatusCode::BAD_REQUEST, Json(body)).into_response();
    };
    match answer {
        Answer::Reply { content, calls } => {
            sse(with_usage(reply_chunks(&content, &calls, "stop"), usage))
        }
        Answer::Cut { content, mut calls } => {
            if let Some((_, arguments)) = calls.last_mut() {
                let half = (0..=arguments.len() / 2)
                    .rev()
                    .find(|&m| arguments.is_char_boundary(m))
                    .unwrap_or(0);
                arguments.truncate(half);
            }
            sse(with_usage(reply_chunks(&content, &calls, "length"), usage))
        }
        Answer::ErrorMidStream { chunks, message } => {
            let mut body = String::new();
            for chunk in chunks {
                body.push_str(&format!("data: {chunk}\n\n"));
            }
            let error = json!({"error": {"code": 500, "message": message, "type": "server_error"}});
            body.push_str(&format!("data: {error}\n\n"));
            ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
        }
        Answer::Raw {
            status,
            content_type,
            body,
        } => (
            StatusCode::from_u16(status).unwrap(),
            [(header::CONTENT_TYPE, content_type)],
            body,
        )
            .into_response(),
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
            sse(reply_chunks("(late)", &[], "stop"))
        }
    }
}

/// A fixture of `tests/fixtures/real-model/`, as JSON.
fn fixture(name: &str) -> Response {
    let path = format!("{}/fixtures/real-model/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    ([(header::CONTENT_TYPE, "application/json")], text).into_response()
}

/// `GET /v1/models`: the model list, as the server it speaks for says it.
async fn models(State(shared): State<Arc<Shared>>) -> Response {
    let owner = match *shared.identity.lock().unwrap() {
        Identity::RecordedLlamaCpp => return fixture("llama-server-models.json"),
        _ if *shared.ollama.lock().unwrap() => "library",
        Identity::LlamaCpp => "llamacpp",
        Identity::Plain => "system",
    };
    Json(json!({"object": "list", "data": [
        {"id": "fake", "object": "model", "created": 0, "owned_by": owner},
    ]}))
    .into_response()
}

/// `GET /props`: the context window, as llama.cpp says it.
async fn props(State(shared): State<Arc<Shared>>) -> Response {
    match *shared.identity.lock().unwrap() {
        Identity::RecordedLlamaCpp => return fixture("llama-server-props.json"),
        Identity::Plain => return StatusCode::NOT_FOUND.into_response(),
        Identity::LlamaCpp => {}
    }
    match *shared.context.lock().unwrap() {
        Some(n) if !*shared.ollama.lock().unwrap() => {
            Json(json!({"default_generation_settings": {"n_ctx": n}})).into_response()
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

/// `POST /api/show`: the model's parameters, as Ollama says them.
async fn show(State(shared): State<Arc<Shared>>, Json(body): Json<Value>) -> Response {
    match *shared.context.lock().unwrap() {
        Some(n) if *shared.ollama.lock().unwrap() => Json(json!({
            "modelfile": "FROM x",
            "parameters": format!("stop \"<|im_end|>\"\nnum_ctx {n}\ntemperature 0.7"),
            "details": {"family": "qwen2"},
            "model_info": {"qwen2.context_length": 32768},
            "asked_for": body["model"],
        }))
        .into_response(),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The chunks with a last one that says the usage, if asked: the prompt's
/// tokens as counted, the reply's a quarter of its bytes.
fn with_usage(mut chunks: Vec<Value>, prompt: Option<u64>) -> Vec<Value> {
    if let Some(prompt) = prompt {
        let written: u64 = chunks
            .iter()
            .map(|c| tokens_of(&c["choices"][0]["delta"]))
            .sum();
        chunks.push(json!({"choices": [], "usage": {
            "prompt_tokens": prompt, "completion_tokens": written,
            "total_tokens": prompt + written,
        }}));
    }
    chunks
}

/// The chunks OpenAI streams for a reply, ending for `finish`.
fn reply_chunks(content: &str, calls: &[(String, String)], finish: &str) -> Vec<Value> {
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
    let finish = match finish {
        "stop" if !calls.is_empty() => "tool_calls",
        other => other,
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
