//! One model's client: the configuration it holds, the shape of a call's
//! constraint, and a call with its retries (capped exponential backoff
//! with jitter, honouring `Retry-After`; a reply the server failed
//! mid-stream asked for again).

mod attempt;
mod server;

pub use server::{Decoding, Server, ServerKind, OPENAI_CONTEXT_WINDOW};

use std::time::Duration;

use serde_json::json;

use crate::{
    constrain, genai, tools_json, ChatConfig, ChatError, Constrain, MaxTokensField, Message,
    Penalties, Reply, Tool,
};
use mesh_core::display::Escaped;

/// The longest wait between attempts, `Retry-After` included.
pub const BACKOFF_CAP: Duration = Duration::from_secs(30);

/// How many times a reply the server itself could not finish (an error
/// event mid-stream: its tool-call parser rejected the model's output) is
/// asked for again before it is [`ChatError::Format`]. The same request at
/// temperature 0 tends to fail the same way: the caller does better to
/// change the conversation.
pub const FORMAT_RETRIES: u32 = 2;

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
    /// The server and the shape of the constraint, once asked
    /// ([`ChatClient::decide`]).
    decided: std::sync::Arc<std::sync::OnceLock<Decoding>>,
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
            decided: Default::default(),
        })
    }

    /// The shape a call's constraint takes now: `--constrain`, resolved
    /// for this server when `auto` ([`ChatClient::decide`]; before it is
    /// asked, tool choice), and `Off` once the server refused it.
    pub fn constraint(&self) -> Constrain {
        match self.config.constrain {
            Constrain::Auto
                if self
                    .unconstrained
                    .load(std::sync::atomic::Ordering::Relaxed) =>
            {
                Constrain::Off
            }
            Constrain::Auto => self
                .decided
                .get()
                .map_or(Constrain::ToolChoice, |d| d.constrain),
            chosen => chosen,
        }
    }

    /// Which server this is ([`ChatClient::server`], asked once) and how
    /// replies are held to one call there: with `--constrain auto`, a JSON
    /// schema where the server is one known to enforce it (llama.cpp,
    /// Ollama, vLLM, LM Studio, SGLang), and native `tools` with
    /// `tool_choice` anywhere else (OpenAI's API, a hosted
    /// OpenAI-compatible API, a proxy), which a server that refuses it is
    /// asked without from then on; otherwise what `--constrain` says. A
    /// server that did not answer at all is asked again next time.
    pub async fn decide(&self) -> Decoding {
        if let Some(decided) = self.decided.get() {
            return decided.clone();
        }
        let server = self.server().await;
        let (constrain, why) = match self.config.constrain {
            Constrain::Auto if server.kind == ServerKind::OpenAi => (
                Constrain::ToolChoice,
                "OpenAI's API: native tools with tool_choice and strict schemas".to_owned(),
            ),
            Constrain::Auto if server.kind.enforces_schema() => (
                Constrain::Schema,
                format!(
                    "{} enforces a JSON schema in response_format ({})",
                    server.kind.as_str(),
                    server.how
                ),
            ),
            Constrain::Auto => (
                Constrain::ToolChoice,
                format!(
                    "not a server known to enforce a JSON schema ({}): native tools with \
                     tool_choice, and without it if the server refuses it",
                    server.how
                ),
            ),
            chosen => (chosen, format!("--constrain {chosen}")),
        };
        let decoding = Decoding {
            server,
            constrain,
            why,
        };
        if decoding.server.how == server::UNREACHED {
            // Asked again at the next call.
            return decoding;
        }
        self.decided.get_or_init(|| decoding).clone()
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
            if self.config.constrain == Constrain::Auto {
                self.decide().await;
            }
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
}
