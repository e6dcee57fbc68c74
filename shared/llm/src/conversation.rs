//! The conversation as the API spells it: who said what, the tools on
//! offer and the calls the model made, and what it answered.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

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

#[cfg(test)]
mod tests {
    use super::*;

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
