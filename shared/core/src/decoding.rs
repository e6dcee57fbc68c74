//! How a model teammate's replies are held to one call of the tools it may
//! call now, as it says at join: the model, the server that runs it, and
//! how that server's decoding constrains the reply. The lead only shows it.

use std::fmt;

use crate::error::FieldError;
use crate::words::{value_of, word_of};

/// The longest `model` kept.
pub const MODEL_MAX: usize = 256;
/// The longest `why` kept.
pub const WHY_MAX: usize = 1024;

/// The model server, as the teammate recognised it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Server {
    /// llama.cpp's `llama-server`.
    LlamaCpp,
    /// Ollama.
    Ollama,
    /// vLLM.
    Vllm,
    /// LM Studio.
    LmStudio,
    /// SGLang.
    SgLang,
    /// OpenAI's API.
    OpenAi,
    /// One it did not recognise.
    Unknown,
}

/// How the server holds a reply to one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Constrain {
    /// A JSON schema in `response_format`, which the server's own decoding
    /// enforces.
    Schema,
    /// Native `tools` with `tool_choice`.
    ToolChoice,
    /// Native `tools`, unconstrained.
    Off,
}

const SERVERS: [(Server, &str); 7] = [
    (Server::LlamaCpp, "llama.cpp"),
    (Server::Ollama, "ollama"),
    (Server::Vllm, "vllm"),
    (Server::LmStudio, "lm-studio"),
    (Server::SgLang, "sglang"),
    (Server::OpenAi, "openai"),
    (Server::Unknown, "unknown"),
];

const CONSTRAINS: [(Constrain, &str); 3] = [
    (Constrain::Schema, "schema"),
    (Constrain::ToolChoice, "tool-choice"),
    (Constrain::Off, "off"),
];

impl Server {
    /// As the wire and the store spell it.
    pub fn as_str(self) -> &'static str {
        word_of(&SERVERS, self)
    }

    fn parse(word: &str) -> Option<Self> {
        value_of(&SERVERS, word)
    }
}

impl Constrain {
    /// As the wire and the store spell it.
    pub fn as_str(self) -> &'static str {
        word_of(&CONSTRAINS, self)
    }

    fn parse(word: &str) -> Option<Self> {
        value_of(&CONSTRAINS, word)
    }
}

/// A table's words, for a message: `a, b or c`.
fn words_of<T>(table: &[(T, &'static str)]) -> String {
    let words: Vec<&str> = table.iter().map(|(_, w)| *w).collect();
    match words.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// A model teammate's decoding, as it reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoding {
    /// The model, as its server names it.
    pub model: String,
    /// The server that runs it.
    pub server: Server,
    /// How that server holds a reply to one call.
    pub constrain: Constrain,
    /// Why, for people.
    pub why: String,
}

impl Decoding {
    /// The report of a `JoinRequest.decoding` (`field`), checked: a model of
    /// 1 to [`MODEL_MAX`] bytes on one line, a known server and constraint,
    /// a `why` within [`WHY_MAX`].
    pub fn parse(
        field: &str,
        model: &str,
        server: &str,
        constrain: &str,
        why: &str,
    ) -> Result<Self, FieldError> {
        if model.is_empty() {
            return Err(FieldError::new(format!("{field}.model"), "is empty"));
        }
        crate::limits::check(&format!("{field}.model"), model, MODEL_MAX)?;
        if model.chars().any(char::is_control) {
            return Err(FieldError::new(
                format!("{field}.model"),
                "holds a control character",
            ));
        }
        let server = Server::parse(server).ok_or_else(|| {
            FieldError::new(
                format!("{field}.server"),
                format!("{server:?} is not {}", words_of(&SERVERS)),
            )
        })?;
        let constrain = Constrain::parse(constrain).ok_or_else(|| {
            FieldError::new(
                format!("{field}.constrain"),
                format!("{constrain:?} is not {}", words_of(&CONSTRAINS)),
            )
        })?;
        crate::limits::check(&format!("{field}.why"), why, WHY_MAX)?;
        Ok(Self {
            model: model.to_owned(),
            server,
            constrain,
            why: why.to_owned(),
        })
    }

    /// As the store keeps it: `server`, `constrain`, `model` and `why`,
    /// separated by newlines (`why` last, so it may hold any).
    pub fn encode(&self) -> String {
        format!(
            "{}\n{}\n{}\n{}",
            self.server.as_str(),
            self.constrain.as_str(),
            self.model,
            self.why
        )
    }

    /// What [`Decoding::encode`] made; `None` for an empty or unknown text.
    pub fn decode(text: &str) -> Option<Self> {
        let mut parts = text.splitn(4, '\n');
        let server = Server::parse(parts.next()?)?;
        let constrain = Constrain::parse(parts.next()?)?;
        let model = parts.next().filter(|m| !m.is_empty())?;
        Some(Self {
            model: model.to_owned(),
            server,
            constrain,
            why: parts.next().unwrap_or_default().to_owned(),
        })
    }
}

impl fmt::Display for Decoding {
    /// `schema on llama.cpp`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on {}", self.constrain.as_str(), self.server.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_parses_and_round_trips() {
        let d = Decoding::parse(
            "decoding",
            "qwen2.5-coder:7b",
            "llama.cpp",
            "schema",
            "llama-server enforces response_format\nwith its grammar",
        )
        .expect("valid");
        assert_eq!(d.server, Server::LlamaCpp);
        assert_eq!(d.constrain, Constrain::Schema);
        assert_eq!(d.to_string(), "schema on llama.cpp");
        assert_eq!(Decoding::decode(&d.encode()), Some(d));

        for (server, want) in SERVERS {
            let d = Decoding::parse("d", "m", want, "off", "").expect("server");
            assert_eq!(d.server, server);
        }
        for (constrain, want) in CONSTRAINS {
            let d = Decoding::parse("d", "m", "vllm", want, "").expect("constrain");
            assert_eq!(d.constrain, constrain);
            assert_eq!(Decoding::decode(&d.encode()), Some(d));
        }
    }

    #[test]
    fn a_bad_report_names_its_field() {
        let field = |model: &str, server: &str, constrain: &str, why: &str| {
            Decoding::parse("decoding", model, server, constrain, why)
                .expect_err("invalid")
                .field
        };
        assert_eq!(field("", "ollama", "schema", ""), "decoding.model");
        let long = "m".repeat(MODEL_MAX + 1);
        assert_eq!(field(&long, "ollama", "schema", ""), "decoding.model");
        assert_eq!(field("a\nb", "ollama", "schema", ""), "decoding.model");
        assert_eq!(field("m", "tgi", "schema", ""), "decoding.server");
        assert_eq!(field("m", "", "schema", ""), "decoding.server");
        assert_eq!(field("m", "ollama", "grammar", ""), "decoding.constrain");
        let long = "w".repeat(WHY_MAX + 1);
        assert_eq!(field("m", "ollama", "schema", &long), "decoding.why");

        let err = Decoding::parse("decoding", "m", "tgi", "off", "").expect_err("server");
        assert!(err.to_string().contains("llama.cpp, ollama"), "{err}");
        assert!(err.to_string().contains("openai or unknown"), "{err}");
        assert!(Decoding::parse("d", &"m".repeat(MODEL_MAX), "openai", "off", "").is_ok());
    }

    #[test]
    fn empty_or_garbage_decodes_to_none() {
        assert_eq!(Decoding::decode(""), None);
        assert_eq!(Decoding::decode("garbage"), None);
        assert_eq!(Decoding::decode("ollama\nschema"), None);
        assert_eq!(Decoding::decode("ollama\nschema\n"), None);
        assert_eq!(Decoding::decode("ollama\ngrammar\nm\n"), None);
        assert_eq!(Decoding::decode("landlock\nreads\ndetail"), None);
    }
}
