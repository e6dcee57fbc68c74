//! What the server says of itself: which kind it is and the model's
//! context window.

use std::time::Duration;

use serde_json::{json, Value};

use super::ChatClient;

/// How a server that did not answer at all is described.
pub(crate) const UNREACHED: &str = "the server did not answer";

/// OpenAI's current models' context window.
pub const OPENAI_CONTEXT_WINDOW: u32 = 128_000;

/// Ollama's context window when the model sets none.
const OLLAMA_DEFAULT_CONTEXT: u32 = 2_048;

/// What kind of server answers, as far as it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// llama.cpp's server (`GET /props`, or `owned_by: llamacpp`).
    LlamaCpp,
    /// Ollama (`POST /api/show`, `GET /api/version`).
    Ollama,
    /// vLLM (`owned_by: vllm`, `GET /version`).
    Vllm,
    /// LM Studio (`GET /api/v0/models`).
    LmStudio,
    /// SGLang (`owned_by: sglang`, `GET /get_model_info`).
    SgLang,
    /// OpenAI's API.
    OpenAi,
    /// Any other (a hosted OpenAI-compatible API, a proxy).
    Other,
}

impl ServerKind {
    /// Whether the server holds a reply to a JSON schema in
    /// `response_format` by its own constrained decoding.
    pub fn enforces_schema(self) -> bool {
        matches!(
            self,
            Self::LlamaCpp | Self::Ollama | Self::Vllm | Self::LmStudio | Self::SgLang
        )
    }

    /// As the teammate reports it: `llama.cpp`, `ollama`, `vllm`,
    /// `lm-studio`, `sglang`, `openai`, `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::LlamaCpp => "llama.cpp",
            Self::Ollama => "ollama",
            Self::Vllm => "vllm",
            Self::LmStudio => "lm-studio",
            Self::SgLang => "sglang",
            Self::OpenAi => "openai",
            Self::Other => "unknown",
        }
    }
}

/// What the server says of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// Which server.
    pub kind: ServerKind,
    /// The model's context window, where it says.
    pub window: Option<u32>,
    /// How it was recognised (`GET /props answered as llama.cpp's server`).
    pub how: String,
}

/// How a model's replies are held to one call, as chosen for its server
/// ([`ChatClient::decide`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoding {
    /// The server, as it said.
    pub server: Server,
    /// The shape of the constraint: never [`crate::Constrain::Auto`].
    pub constrain: crate::Constrain,
    /// Why, for people.
    pub why: String,
}

impl Server {
    fn new(kind: ServerKind, window: Option<u32>, how: impl Into<String>) -> Self {
        Self {
            kind,
            window,
            how: how.into(),
        }
    }
}

impl ChatClient {
    /// Which server this is and the model's context window in tokens, as
    /// far as the server says, asking in turn: llama.cpp's `GET /props`
    /// (`n_ctx`); the `GET /v1/models` list's `owned_by` (llama.cpp, vLLM
    /// with its `max_model_len`, SGLang); Ollama's `POST /api/show` (its
    /// `num_ctx` parameter; without one, Ollama's default of 2,048, since it
    /// cuts a longer prompt silently whatever the model could take) and
    /// `GET /api/version`; SGLang's `GET /get_model_info`; vLLM's `GET
    /// /version`; LM Studio's `GET /api/v0/models` (`max_context_length`).
    /// For OpenAI's API, its current models' [`OPENAI_CONTEXT_WINDOW`]
    /// without asking. No window when the server says none: then the
    /// caller must be told.
    pub async fn server(&self) -> Server {
        if self.is_openai() {
            return Server::new(
                ServerKind::OpenAi,
                Some(OPENAI_CONTEXT_WINDOW),
                "the URL is OpenAI's API",
            );
        }
        let root = self.config.base_url.trim_end_matches('/');
        let root = root.strip_suffix("/v1").unwrap_or(root).to_owned();
        // A server not reached at all (not started yet, say) is asked
        // again at the next call ([`ChatClient::decide`]).
        let mut probe = self.http.get(format!("{}/models", self.config.base_url));
        if let Some(key) = &self.config.api_key {
            probe = probe.bearer_auth(key);
        }
        if probe.timeout(Duration::from_secs(5)).send().await.is_err() {
            return Server::new(ServerKind::Other, None, UNREACHED);
        }
        if let Some(props) = self.ask(self.http.get(format!("{root}/props"))).await {
            let n_ctx = props
                .pointer("/default_generation_settings/n_ctx")
                .or_else(|| props.get("n_ctx"))
                .and_then(Value::as_u64);
            if let Some(n) = n_ctx.filter(|n| *n > 0) {
                return Server::new(
                    ServerKind::LlamaCpp,
                    Some(clamp(n)),
                    "GET /props answered as llama.cpp's server",
                );
            }
        }
        let models = self
            .ask(self.http.get(format!("{}/models", self.config.base_url)))
            .await;
        if let Some(server) = models.as_ref().and_then(|m| self.by_owner(m)) {
            return server;
        }
        if let Some(server) = self.ollama(&root).await {
            return server;
        }
        if let Some(info) = self
            .ask(self.http.get(format!("{root}/get_model_info")))
            .await
        {
            if info.get("model_path").is_some() {
                return Server::new(
                    ServerKind::SgLang,
                    None,
                    "GET /get_model_info answered as SGLang",
                );
            }
        }
        if let Some(version) = self.ask(self.http.get(format!("{root}/version"))).await {
            if version.get("version").and_then(Value::as_str).is_some() {
                return Server::new(ServerKind::Vllm, None, "GET /version answered as vLLM");
            }
        }
        if let Some(models) = self
            .ask(self.http.get(format!("{root}/api/v0/models")))
            .await
        {
            if let Some(data) = models.get("data").and_then(Value::as_array) {
                let window = data
                    .iter()
                    .find(|m| m["id"] == self.config.model)
                    .and_then(|m| m["max_context_length"].as_u64())
                    .map(clamp);
                return Server::new(
                    ServerKind::LmStudio,
                    window,
                    "GET /api/v0/models answered as LM Studio",
                );
            }
        }
        Server::new(
            ServerKind::Other,
            None,
            "it answered none of llama.cpp's, Ollama's, vLLM's, LM Studio's or SGLang's own \
             questions",
        )
    }

    /// The answer to `request` (with the key, if any) as JSON, if it
    /// succeeded within 5 s.
    async fn ask(&self, mut request: reqwest::RequestBuilder) -> Option<Value> {
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.timeout(Duration::from_secs(5)).send().await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        response.json::<Value>().await.ok()
    }

    /// The server by the `owned_by` of the model list's entries (this
    /// model's, else the first).
    fn by_owner(&self, models: &Value) -> Option<Server> {
        let data = models.get("data")?.as_array()?;
        let entry = data
            .iter()
            .find(|m| m["id"] == self.config.model)
            .or_else(|| data.first())?;
        let how = |owner: &str| format!("GET /v1/models says owned_by {owner:?}");
        match entry.get("owned_by")?.as_str()? {
            "llamacpp" => Some(Server::new(
                ServerKind::LlamaCpp,
                entry
                    .pointer("/meta/n_ctx")
                    .and_then(Value::as_u64)
                    .map(clamp),
                how("llamacpp"),
            )),
            "vllm" => Some(Server::new(
                ServerKind::Vllm,
                entry
                    .get("max_model_len")
                    .and_then(Value::as_u64)
                    .map(clamp),
                how("vllm"),
            )),
            "sglang" => Some(Server::new(ServerKind::SgLang, None, how("sglang"))),
            _ => None,
        }
    }

    /// Ollama, if `POST /api/show` or `GET /api/version` answers as it does.
    async fn ollama(&self, root: &str) -> Option<Server> {
        let show = self
            .ask(
                self.http
                    .post(format!("{root}/api/show"))
                    .json(&json!({"model": self.config.model})),
            )
            .await
            // Only Ollama's own answer means Ollama's default.
            .filter(|show| show.get("modelfile").is_some() || show.get("details").is_some());
        let Some(show) = show else {
            let version = self
                .ask(self.http.get(format!("{root}/api/version")))
                .await?;
            version.get("version")?.as_str()?;
            return Some(Server::new(
                ServerKind::Ollama,
                Some(OLLAMA_DEFAULT_CONTEXT),
                "GET /api/version answered as Ollama",
            ));
        };
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
        Some(Server::new(
            ServerKind::Ollama,
            Some(num_ctx.unwrap_or(OLLAMA_DEFAULT_CONTEXT)),
            "POST /api/show answered as Ollama",
        ))
    }
}

/// A window in tokens as a `u32`.
fn clamp(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
