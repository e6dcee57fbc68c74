//! A client for the chat-completions API: OpenAI's, and the same API served
//! by Ollama, llama.cpp's server, vLLM and LM Studio. One call sends the
//! conversation and the tools on offer and returns the model's reply: its
//! text and the tool calls it made.
//!
//! The reply is streamed (`"stream": true`, server-sent events) and put
//! together by [`assemble`], which tolerates the known quirks of local
//! servers; a server that answers with one JSON completion instead is read
//! the same way. Connection errors, 429 and 5xx are retried with capped
//! exponential backoff and jitter, honouring `Retry-After`; any other 4xx
//! stops with the server's own message. HTTP is `reqwest` (rustls, ring).

mod assemble;
mod constrain;
mod genai;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio_stream::StreamExt as _;

pub use self::constrain::{describe_tools, Constrain};
use mesh_core::display::Escaped;

/// OpenAI's API, the default `--base-url`.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// Where the key is read from unless told otherwise.
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";

/// Which model, where, and how patiently.
#[derive(Clone)]
pub struct ChatConfig {
    /// The API's root, e.g. `https://api.openai.com/v1` or
    /// `http://127.0.0.1:11434/v1`; `/chat/completions` is appended.
    pub base_url: String,
    /// The model's name as the server knows it.
    pub model: String,
    /// Sent as `Authorization: Bearer`; `None` sends no such header.
    pub api_key: Option<String>,
    /// Sampling temperature; `None` leaves the server's default.
    pub temperature: Option<f32>,
    /// The longest one attempt may take, from connecting to the last byte.
    pub timeout: Duration,
    /// How many times a failed attempt is retried.
    pub max_retries: u32,
    /// The first backoff; it doubles up to [`BACKOFF_CAP`].
    pub first_backoff: Duration,
    /// The most tokens of one reply; `None` leaves the server's own cap.
    pub max_tokens: Option<u32>,
    /// The field that carries `max_tokens`.
    pub max_tokens_field: MaxTokensField,
    /// How a reply is held to one call of the tools, where a call asks
    /// ([`ChatClient::complete_call`]).
    pub constrain: Constrain,
    /// Sampling controls against a looping model, sent where set.
    pub penalties: Penalties,
}

/// llama.cpp's sampling controls that stop a model repeating itself: sent
/// only where set (other servers refuse or ignore them).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Penalties {
    /// `repeat_penalty`: above 1 makes recent tokens less likely.
    pub repeat_penalty: Option<f32>,
    /// `dry_multiplier`: above 0 penalizes extending a repeated sequence.
    pub dry_multiplier: Option<f32>,
}

/// The request field that bounds a reply: `max_tokens` for most servers
/// (llama.cpp, Ollama, vLLM, LM Studio), `max_completion_tokens` for
/// OpenAI's API (its newer models refuse `max_tokens`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensField {
    MaxTokens,
    MaxCompletionTokens,
}

impl MaxTokensField {
    /// The field a server at `base_url` understands.
    pub fn for_url(base_url: &str) -> Self {
        let host = reqwest::Url::parse(base_url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_default();
        if host == "api.openai.com" {
            Self::MaxCompletionTokens
        } else {
            Self::MaxTokens
        }
    }

    /// As the request spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MaxTokens => "max_tokens",
            Self::MaxCompletionTokens => "max_completion_tokens",
        }
    }
}

impl std::str::FromStr for MaxTokensField {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "max_tokens" => Ok(Self::MaxTokens),
            "max_completion_tokens" => Ok(Self::MaxCompletionTokens),
            other => Err(format!(
                "{other:?}: expected max_tokens or max_completion_tokens"
            )),
        }
    }
}

impl std::fmt::Debug for ChatConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("ChatConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("temperature", &self.temperature)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("max_tokens", &self.max_tokens)
            .field("max_tokens_field", &self.max_tokens_field)
            .field("constrain", &self.constrain)
            .field("penalties", &self.penalties)
            .finish()
    }
}

impl ChatConfig {
    /// A config with the defaults: 300 s per attempt, 6 retries starting at
    /// 500 ms, the server's own cap on a reply.
    pub fn new(base_url: &str, model: &str, api_key: Option<String>) -> Self {
        Self {
            max_tokens: None,
            max_tokens_field: MaxTokensField::for_url(base_url),
            base_url: base_url.trim_end_matches('/').to_owned(),
            model: model.to_owned(),
            api_key,
            temperature: None,
            timeout: Duration::from_secs(300),
            max_retries: 6,
            first_backoff: Duration::from_millis(500),
            constrain: Constrain::Auto,
            penalties: Penalties::default(),
        }
    }

    /// The key from the environment variable `var`; unset or empty is `None`.
    pub fn key_from_env(var: &str) -> Option<String> {
        std::env::var(var).ok().filter(|k| !k.trim().is_empty())
    }
}

/// The longest wait between attempts, `Retry-After` included.
pub const BACKOFF_CAP: Duration = Duration::from_secs(30);

/// OpenAI's current models' context window.
pub const OPENAI_CONTEXT_WINDOW: u32 = 128_000;

/// Ollama's context window when the model sets none.
const OLLAMA_DEFAULT_CONTEXT: u32 = 2_048;

/// How many times a reply the server itself could not finish (an error
/// event mid-stream: its tool-call parser rejected the model's output) is
/// asked for again before it is [`ChatError::Format`]. The same request at
/// temperature 0 tends to fail the same way: the caller does better to
/// change the conversation.
pub const FORMAT_RETRIES: u32 = 2;

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// One message of the conversation, as the API spells it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    #[serde(default)]
    pub content: String,
    /// An assistant's tool calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// A tool result: the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A system message.
    pub fn system(text: impl Into<String>) -> Self {
        Self::plain(Role::System, text.into())
    }

    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::plain(Role::User, text.into())
    }

    /// The result of the tool call `id`.
    pub fn tool(id: &str, text: impl Into<String>) -> Self {
        Self {
            tool_call_id: Some(id.to_owned()),
            ..Self::plain(Role::Tool, text.into())
        }
    }

    /// The model's reply, as it goes back into the conversation.
    pub fn assistant(reply: &Reply) -> Self {
        Self {
            tool_calls: reply.tool_calls.clone(),
            ..Self::plain(Role::Assistant, reply.content.clone())
        }
    }

    fn plain(role: Role, content: String) -> Self {
        Self {
            role,
            content,
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// A tool call the model made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Unique within its reply (made up where the server sent none).
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: String,
    pub function: FunctionCall,
}

/// Which function, with what arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    /// JSON text, as the model wrote it: it may be anything.
    pub arguments: String,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: &'static str,
    pub description: &'static str,
    /// A JSON schema of the arguments.
    pub parameters: Value,
}

/// What the model answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reply {
    /// Its text (tool calls written as text are taken out).
    pub content: String,
    /// Its tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Why the reply ended, as the server said (`stop`, `tool_calls`,
    /// `length` when it was cut at the token limit).
    pub finish_reason: Option<String>,
    /// What the call used, where the server said.
    pub usage: Option<Usage>,
}

impl Reply {
    /// Whether the reply was cut at the token limit.
    pub fn cut(&self) -> bool {
        self.finish_reason.as_deref() == Some("length")
    }
}

/// The tokens one call used, as the server counted them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// The request's tokens.
    pub prompt_tokens: u64,
    /// The reply's tokens.
    pub completion_tokens: u64,
    /// Of the prompt's tokens, those the server's cache served
    /// (`prompt_tokens_details.cached_tokens`).
    pub cached_tokens: u64,
}

/// What kind of server answers, as far as it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// llama.cpp's server (it answers `GET /props`).
    LlamaCpp,
    /// Ollama (it answers `POST /api/show`).
    Ollama,
    /// OpenAI's API.
    OpenAi,
    /// Any other (vLLM, LM Studio, a proxy).
    Other,
}

/// What the server says of itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Server {
    /// Which server.
    pub kind: ServerKind,
    /// The model's context window, where it says.
    pub window: Option<u32>,
}

/// Why a model call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ChatError {
    /// A 4xx other than 429: retrying will not help.
    #[error("the model server at {url} refused the request: HTTP {status}: {message}")]
    Refused {
        url: String,
        status: u16,
        message: String,
    },
    /// Every attempt failed (connection errors, 429, 5xx, broken replies).
    #[error("the model server at {url} failed {attempts} attempts; the last: {last}")]
    Unavailable {
        url: String,
        attempts: u32,
        last: String,
    },
    /// The server failed the reply itself, mid-stream, on every attempt
    /// (e.g. llama.cpp: "the model produced output that does not match the
    /// expected format"): the model may do better if told.
    #[error(
        "the model server at {url} could not finish a reply {attempts} times; the last: {message}"
    )]
    Format {
        url: String,
        attempts: u32,
        message: String,
    },
    /// The request could not be made (a malformed URL).
    #[error("{0}")]
    Setup(String),
}

/// How one attempt failed.
enum Failure {
    /// Try again, after `after` if the server said.
    Retry {
        problem: String,
        after: Option<Duration>,
    },
    /// The server failed the reply mid-stream; try again at most
    /// [`FORMAT_RETRIES`] times.
    Format(String),
    /// Stop.
    Stop(ChatError),
}

/// Talks to one model.
#[derive(Debug, Clone)]
pub struct ChatClient {
    http: reqwest::Client,
    config: ChatConfig,
    url: String,
    /// Whether the server refused `stream_options` (then it is not sent).
    no_stream_options: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Whether the server refused the constraint that `--constrain auto`
    /// chose (then calls are unconstrained).
    unconstrained: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl ChatClient {
    /// A client for `config`.
    pub fn new(config: ChatConfig) -> Result<Self, ChatError> {
        // rustls needs one process-wide crypto provider; a second install
        // (another client) is refused harmlessly.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("mesh/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ChatError::Setup(format!("the HTTP client: {e}")))?;
        let url = format!("{}/chat/completions", config.base_url);
        reqwest::Url::parse(&url)
            .map_err(|e| ChatError::Setup(format!("--base-url {:?}: {e}", config.base_url)))?;
        Ok(Self {
            http,
            config,
            url,
            no_stream_options: Default::default(),
            unconstrained: Default::default(),
        })
    }

    /// The shape a call's constraint takes now: `--constrain`, resolved
    /// for this server when `auto`, and `Off` once the server refused it.
    pub fn constraint(&self) -> Constrain {
        match self.config.constrain {
            Constrain::Auto
                if self
                    .unconstrained
                    .load(std::sync::atomic::Ordering::Relaxed) =>
            {
                Constrain::Off
            }
            Constrain::Auto if self.is_openai() => Constrain::ToolChoice,
            Constrain::Auto => Constrain::Schema,
            chosen => chosen,
        }
    }

    /// Whether the server is OpenAI's API (the host that takes
    /// `max_completion_tokens`).
    fn is_openai(&self) -> bool {
        MaxTokensField::for_url(&self.config.base_url) == MaxTokensField::MaxCompletionTokens
    }

    /// Sets the sampling controls against a looping model.
    pub fn set_penalties(&mut self, penalties: Penalties) {
        self.config.penalties = penalties;
    }

    /// The model's name.
    pub fn model(&self) -> &str {
        &self.config.model
    }

    /// Which server this is and the model's context window in tokens, as
    /// far as the server says: llama.cpp's `GET /props` (`n_ctx`), or
    /// Ollama's `POST /api/show` (its `num_ctx` parameter; without one,
    /// Ollama's default of 2,048, since it cuts a longer prompt silently
    /// whatever the model could take); for OpenAI's API, its current models'
    /// [`OPENAI_CONTEXT_WINDOW`]. No window when the server says nothing
    /// (vLLM, LM Studio): then the caller must be told.
    pub async fn server(&self) -> Server {
        if self.is_openai() {
            return Server {
                kind: ServerKind::OpenAi,
                window: Some(OPENAI_CONTEXT_WINDOW),
            };
        }
        let other = Server {
            kind: ServerKind::Other,
            window: None,
        };
        let root = self.config.base_url.trim_end_matches("/v1");
        let ask = |request: reqwest::RequestBuilder| async move {
            let response = request.timeout(Duration::from_secs(5)).send().await.ok()?;
            if !response.status().is_success() {
                return None;
            }
            response.json::<Value>().await.ok()
        };
        let mut props = self.http.get(format!("{root}/props"));
        if let Some(key) = &self.config.api_key {
            props = props.bearer_auth(key);
        }
        if let Some(props) = ask(props).await {
            let n_ctx = props
                .pointer("/default_generation_settings/n_ctx")
                .or_else(|| props.get("n_ctx"))
                .and_then(Value::as_u64);
            if let Some(n) = n_ctx.filter(|n| *n > 0) {
                return Server {
                    kind: ServerKind::LlamaCpp,
                    window: Some(u32::try_from(n).unwrap_or(u32::MAX)),
                };
            }
        }
        let mut show = self
            .http
            .post(format!("{root}/api/show"))
            .json(&json!({"model": self.config.model}));
        if let Some(key) = &self.config.api_key {
            show = show.bearer_auth(key);
        }
        let Some(show) = ask(show).await else {
            return other;
        };
        // Only Ollama's own answer means Ollama's default.
        if show.get("modelfile").is_none() && show.get("details").is_none() {
            return other;
        }
        let num_ctx = show
            .get("parameters")
            .and_then(Value::as_str)
            .and_then(|text| {
                text.lines().find_map(|line| {
                    let mut words = line.split_whitespace();
                    (words.next() == Some("num_ctx"))
                        .then(|| words.next()?.parse::<u32>().ok())
                        .flatten()
                })
            });
        Server {
            kind: ServerKind::Ollama,
            window: Some(num_ctx.unwrap_or(OLLAMA_DEFAULT_CONTEXT)),
        }
    }

    /// Sends the conversation and the tools on offer; the model's reply,
    /// at most `max_tokens` long ([`ChatConfig::max_tokens`]).
    pub async fn complete(&self, messages: &[Message], tools: &[Tool]) -> Result<Reply, ChatError> {
        self.complete_within(messages, tools, self.config.max_tokens)
            .await
    }

    /// [`ChatClient::complete`], the reply at most `max_tokens` long. When
    /// exporting telemetry, the call is a span of the OpenTelemetry GenAI
    /// conventions (`chat MODEL`, a child of the current context) and its
    /// tokens and duration are recorded ([`crate::telemetry`]).
    pub async fn complete_within(
        &self,
        messages: &[Message],
        tools: &[Tool],
        max_tokens: Option<u32>,
    ) -> Result<Reply, ChatError> {
        self.complete_call(messages, tools, None, max_tokens).await
    }

    /// [`ChatClient::complete_within`], the reply held to one call of
    /// `only` (the tools on offer, narrowed to what may be called now)
    /// where the server can enforce it ([`ChatClient::constraint`]). With
    /// [`Constrain::Schema`] the request carries no `tools`: the caller tells
    /// the model of them in `messages` ([`describe_tools`]), so that a change of
    /// tools leaves the request's prefix as it was; otherwise the request
    /// carries `tools` (and a server that refuses the schema gets them).
    pub async fn complete_call(
        &self,
        messages: &[Message],
        tools: &[Tool],
        only: Option<&[Tool]>,
        max_tokens: Option<u32>,
    ) -> Result<Reply, ChatError> {
        if !mesh_telemetry::enabled() {
            return self.call(messages, tools, only, max_tokens).await;
        }
        let traced = genai::Call::start(&self.config.model, &self.url);
        let result = self.call(messages, tools, only, max_tokens).await;
        traced.end(&result);
        result
    }

    /// One model call, with its retries.
    async fn call(
        &self,
        messages: &[Message],
        tools: &[Tool],
        only: Option<&[Tool]>,
        max_tokens: Option<u32>,
    ) -> Result<Reply, ChatError> {
        let mut body = json!({
            "model": self.config.model,
            "messages": messages,
            "stream": true,
        });
        if let Some(limit) = max_tokens {
            body[self.config.max_tokens_field.as_str()] = json!(limit);
        }
        if !tools.is_empty() {
            body["tools"] = tools_json(tools);
        }
        if let Some(t) = self.config.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(p) = self.config.penalties.repeat_penalty {
            body["repeat_penalty"] = json!(p);
        }
        if let Some(m) = self.config.penalties.dry_multiplier {
            body["dry_multiplier"] = json!(m);
        }
        let mut shape = Constrain::Off;
        if let Some(only) = only.filter(|o| !o.is_empty()) {
            shape = self.constraint();
            constrain::apply(&mut body, shape, only);
        }
        let mut backoff = self.config.first_backoff;
        let mut attempts = 0;
        let mut format_failures = 0;
        loop {
            attempts += 1;
            // Usage is asked for where the server takes the option.
            let ask_usage = !self
                .no_stream_options
                .load(std::sync::atomic::Ordering::Relaxed);
            if ask_usage {
                body["stream_options"] = json!({"include_usage": true});
            } else if let Some(map) = body.as_object_mut() {
                map.remove("stream_options");
            }
            let (problem, after) = match self.attempt(&body).await {
                Ok(reply) => return Ok(reply),
                Err(Failure::Stop(ChatError::Refused { message, .. }))
                    if ask_usage && message.contains("stream_options") =>
                {
                    tracing::info!(url = %self.url, "the model server refused stream_options; usage will be estimated");
                    self.no_stream_options
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                    continue;
                }
                Err(Failure::Stop(ChatError::Refused { message, .. }))
                    if shape != Constrain::Off
                        && self.config.constrain == Constrain::Auto
                        && constrain::refused(shape, &message) =>
                {
                    tracing::warn!(url = %self.url, parameter = shape.parameter(), refusal = %Escaped(&message), "the model server does not take this constraint; replies are read unconstrained from now on (--constrain off says so up front)");
                    self.unconstrained
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                    constrain::remove(&mut body, tools);
                    shape = Constrain::Off;
                    continue;
                }
                Err(Failure::Stop(e)) => return Err(e),
                Err(Failure::Format(message)) => {
                    format_failures += 1;
                    if format_failures > FORMAT_RETRIES {
                        return Err(ChatError::Format {
                            url: self.url.clone(),
                            attempts: format_failures,
                            message,
                        });
                    }
                    tracing::warn!(url = %self.url, attempt = format_failures, problem = %Escaped(&message), "the model server failed the reply mid-stream; asking again");
                    continue;
                }
                Err(Failure::Retry { problem, after }) => (problem, after),
            };
            if attempts > self.config.max_retries {
                return Err(ChatError::Unavailable {
                    url: self.url.clone(),
                    attempts,
                    last: problem,
                });
            }
            // Full jitter between half the backoff and all of it, unless the
            // server said how long to wait.
            let wait = after
                .unwrap_or_else(|| backoff / 2 + backoff.mul_f64(fastrand::f64() / 2.0))
                .min(BACKOFF_CAP);
            tracing::warn!(url = %self.url, attempt = attempts, problem = %Escaped(&problem), wait_ms = wait.as_millis() as u64, "model call failed; retrying");
            tokio::time::sleep(wait).await;
            backoff = (backoff * 2).min(BACKOFF_CAP);
        }
    }

    /// One request and its reply.
    async fn attempt(&self, body: &Value) -> Result<Reply, Failure> {
        let mut request = self
            .http
            .post(&self.url)
            .timeout(self.config.timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(constrain::to_ordered_string(body));
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| Failure::Retry {
            problem: describe(&e),
            after: None,
        })?;
        let status = response.status();
        if status == reqwest::StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            let after = retry_after(response.headers());
            let text = response.text().await.unwrap_or_default();
            return Err(Failure::Retry {
                problem: format!("HTTP {}: {}", status.as_u16(), error_message(&text)),
                after,
            });
        }
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            return Err(Failure::Stop(ChatError::Refused {
                url: self.url.clone(),
                status: status.as_u16(),
                message: error_message(&text),
            }));
        }
        let streamed = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let mut assembler = assemble::Assembler::default();
        let broken = |problem: String| Failure::Retry {
            problem,
            after: None,
        };
        if streamed {
            use eventsource_stream::Eventsource as _;
            let mut events = response.bytes_stream().eventsource();
            while let Some(event) = events.next().await {
                let event = event.map_err(|e| broken(format!("the stream broke: {e}")))?;
                let data = event.data.trim();
                if data == "[DONE]" {
                    break;
                }
                if data.is_empty() {
                    continue;
                }
                let chunk: Value = serde_json::from_str(data).map_err(|e| {
                    broken(format!("a streamed chunk is not JSON ({e}): {}", cut(data)))
                })?;
                if let Some(error) = chunk.get("error") {
                    let message = error
                        .get("message")
                        .and_then(Value::as_str)
                        .map_or_else(|| error.to_string(), str::to_owned);
                    return Err(Failure::Format(cut(&message)));
                }
                assembler.push_chunk(&chunk);
            }
        } else {
            let text = response
                .text()
                .await
                .map_err(|e| broken(format!("the reply broke: {}", describe(&e))))?;
            let completion: Value = serde_json::from_str(&text)
                .map_err(|e| broken(format!("the reply is not JSON ({e}): {}", cut(&text))))?;
            if assemble::first_choice(&completion)
                .and_then(|c| c.get("message"))
                .is_none()
            {
                return Err(broken(format!(
                    "the reply has no choices[0].message: {}",
                    cut(&text)
                )));
            }
            assembler.push_completion(&completion);
        }
        Ok(assembler.finish())
    }
}

/// The tools on offer, as a request sends them.
pub fn tools_json(tools: &[Tool]) -> Value {
    tools
        .iter()
        .map(|t| {
            json!({"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters,
            }})
        })
        .collect()
}

/// A reqwest error with its causes (reqwest's own message is terse).
fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The server's own words from an error body: `error.message`, `error`,
/// `message`, or the body itself, cut.
fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let found = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("error"))
            .or_else(|| v.get("message"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    match found {
        Some(message) => cut(&message),
        None if body.trim().is_empty() => "(no body)".into(),
        None => cut(body.trim()),
    }
}

/// At most 500 bytes of `text`, for error messages.
fn cut(text: &str) -> String {
    mesh_core::limits::cut(text, 500)
}

/// `Retry-After`, in seconds or as an HTTP date.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    if let Ok(seconds) = value.trim().parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(std::time::SystemTime::now())
            .unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_are_the_servers_own_words() {
        assert_eq!(
            error_message(r#"{"error": {"message": "model not found", "type": "x"}}"#),
            "model not found"
        );
        assert_eq!(error_message(r#"{"error": "bad key"}"#), "bad key");
        assert_eq!(error_message("plain words\n"), "plain words");
        assert_eq!(error_message(""), "(no body)");
        assert!(error_message(&"x".repeat(2_000)).len() < 600);
    }

    #[test]
    fn retry_after_takes_seconds_and_dates() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(reqwest::header::RETRY_AFTER, "2".parse().expect("header"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        let later = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(60));
        headers.insert(reqwest::header::RETRY_AFTER, later.parse().expect("header"));
        let wait = retry_after(&headers).expect("a date");
        assert!(wait > Duration::from_secs(50) && wait <= Duration::from_secs(60));
        headers.insert(
            reqwest::header::RETRY_AFTER,
            "soon".parse().expect("header"),
        );
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn the_key_never_shows_in_debug_output() {
        let config = ChatConfig::new("http://x/v1/", "m", Some("sk-secret".into()));
        assert_eq!(config.base_url, "http://x/v1");
        assert!(!format!("{config:?}").contains("sk-secret"));
    }

    #[test]
    fn messages_serialize_as_the_api_spells_them() {
        let reply = Reply {
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                kind: "function".into(),
                function: FunctionCall {
                    name: "read_file".into(),
                    arguments: "{}".into(),
                },
            }],
            ..Reply::default()
        };
        assert_eq!(
            serde_json::to_value(Message::assistant(&reply)).expect("json"),
            json!({"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
            ]})
        );
        assert_eq!(
            serde_json::to_value(Message::tool("c1", "ok")).expect("json"),
            json!({"role": "tool", "content": "ok", "tool_call_id": "c1"})
        );
    }
}
