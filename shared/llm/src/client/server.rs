//! What the server says of itself: which kind it is and the model's
//! context window.

use std::time::Duration;

use serde_json::{json, Value};

use super::ChatClient;

/// OpenAI's current models' context window.
pub const OPENAI_CONTEXT_WINDOW: u32 = 128_000;

/// Ollama's context window when the model sets none.
const OLLAMA_DEFAULT_CONTEXT: u32 = 2_048;

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

impl ChatClient {
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
}
