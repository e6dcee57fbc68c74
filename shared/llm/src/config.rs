//! Which model, where, and how patiently: the client's configuration, and
//! the request field that bounds a reply.

use std::time::Duration;

use crate::Constrain;

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
    /// The first backoff; it doubles up to [`BACKOFF_CAP`](crate::BACKOFF_CAP).
    pub first_backoff: Duration,
    /// The most tokens of one reply; `None` leaves the server's own cap.
    pub max_tokens: Option<u32>,
    /// The field that carries `max_tokens`.
    pub max_tokens_field: MaxTokensField,
    /// How a reply is held to one call of the tools, where a call asks
    /// ([`crate::ChatClient::complete_call`]).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_never_shows_in_debug_output() {
        let config = ChatConfig::new("http://x/v1/", "m", Some("sk-secret".into()));
        assert_eq!(config.base_url, "http://x/v1");
        assert!(!format!("{config:?}").contains("sk-secret"));
    }
}
