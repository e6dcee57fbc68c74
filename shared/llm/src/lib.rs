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
mod client;
mod config;
mod constrain;
mod conversation;
mod error;
mod genai;

pub use self::{
    client::{
        ChatClient, Decoding, Server, ServerKind, BACKOFF_CAP, FORMAT_RETRIES,
        OPENAI_CONTEXT_WINDOW,
    },
    config::{ChatConfig, MaxTokensField, Penalties, DEFAULT_API_KEY_ENV, OPENAI_BASE_URL},
    constrain::{describe_tools, Constrain},
    conversation::{tools_json, FunctionCall, Message, Reply, Role, Tool, ToolCall, Usage},
    error::ChatError,
};
