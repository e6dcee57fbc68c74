//! Constrained decoding: a reply that can only be one call of the tools on
//! offer. The servers users run turn a JSON schema into a grammar that the
//! model's sampling must follow, each in its own request shape:
//!
//! - [`Constrain::Schema`]: `response_format: {"type": "json_schema", ..}`
//!   holding one of `{"name": <a tool's name>, "arguments": <its schema>}`;
//!   llama.cpp's server, vLLM, LM Studio, and Ollama (whose OpenAI-compatible
//!   endpoint turns `response_format` into its own `format`). The reply is
//!   that object, as text, and is read back as the call.
//! - [`Constrain::ToolChoice`]: `tool_choice: "required"` with each tool
//!   `strict` (every property required, optional ones nullable, no other
//!   properties): OpenAI's API, whose structured outputs do not take a
//!   schema whose root is a choice.
//! - [`Constrain::Off`]: the model writes what it likes; its calls are
//!   parsed as before.
//!
//! [`Constrain::Auto`] picks the shape from the server (OpenAI's host: tool
//! choice; any other: a schema) and falls back to `Off` for good when the
//! server refuses the parameter with a 4xx that names it.

use serde_json::{json, Map, Value};

use super::Tool;

/// How a reply is held to one call of the tools on offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Constrain {
    /// Whatever the server takes: [`Constrain::ToolChoice`] for OpenAI's
    /// API, [`Constrain::Schema`] for any other, `Off` once refused.
    #[default]
    Auto,
    /// A JSON schema in `response_format`.
    Schema,
    /// `tool_choice: "required"` with strict tools.
    ToolChoice,
    /// No constraint.
    Off,
}

impl Constrain {
    /// As `--constrain` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Schema => "schema",
            Self::ToolChoice => "tool-choice",
            Self::Off => "off",
        }
    }

    /// The request parameter that carries this shape.
    pub(crate) fn parameter(self) -> &'static str {
        match self {
            Self::Schema => "response_format",
            Self::ToolChoice => "tool_choice",
            Self::Auto | Self::Off => "",
        }
    }
}

impl std::str::FromStr for Constrain {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "schema" => Ok(Self::Schema),
            "tool-choice" => Ok(Self::ToolChoice),
            "off" => Ok(Self::Off),
            other => Err(format!(
                "{other:?}: expected auto, schema, tool-choice or off"
            )),
        }
    }
}

impl std::fmt::Display for Constrain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The schema of one call of `tools`: one of `{"name": NAME, "arguments":
/// ARGS}`, the name a constant and the arguments that tool's schema.
fn call_schema(tools: &[Tool]) -> Value {
    let choices: Vec<Value> = tools
        .iter()
        .map(|t| {
            json!({
                "type": "object",
                "properties": {"name": {"const": t.name}, "arguments": t.parameters},
                "required": ["name", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    match <[Value; 1]>::try_from(choices) {
        Ok([one]) => one,
        Err(choices) => json!({"anyOf": choices}),
    }
}

/// `tools` as text for the conversation, one line each (`- name(arg:
/// type, opt?: type): what it does`), where a schema-constrained reply's
/// tools are told (the request carries no `tools` then): told at the end of
/// the conversation as they change, they leave the prefix the server has
/// cached as it was, where a request's `tools` come first in most chat
/// templates and a change of them makes the server read everything again.
pub fn describe_tools(tools: &[Tool]) -> String {
    let mut text = String::new();
    for tool in tools {
        // Arguments that are one of several shapes are told by the first.
        let parameters = tool
            .parameters
            .get("anyOf")
            .and_then(|a| a.get(0))
            .unwrap_or(&tool.parameters);
        let properties = parameters["properties"].as_object();
        let required: Vec<&str> = parameters["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut params = Vec::new();
        let mut notes = Vec::new();
        // The required first, in their order (the grammar's), then the rest.
        let mut names: Vec<&str> = required.clone();
        names.extend(
            properties
                .into_iter()
                .flatten()
                .map(|(name, _)| name.as_str())
                .filter(|name| !required.contains(name)),
        );
        for name in names {
            let Some(schema) = properties.and_then(|p| p.get(name)) else {
                continue;
            };
            let optional = if required.contains(&name) { "" } else { "?" };
            params.push(format!("{name}{optional}: {}", type_of(schema)));
            if let Some(note) = schema["description"].as_str() {
                notes.push(format!("`{name}`: {note}"));
            }
        }
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&format!(
            "- {}({}): {}",
            tool.name,
            params.join(", "),
            tool.description
        ));
        if !notes.is_empty() {
            text.push_str(&format!(" {}.", notes.join("; ")));
        }
    }
    text
}

/// A property's type as [`describe_tools`] writes it: `string`, `[string]`, ...
fn type_of(schema: &Value) -> String {
    match schema["type"].as_str() {
        Some("array") => format!("[{}]", type_of(&schema["items"])),
        Some(other) => other.to_owned(),
        None if schema.get("const").is_some_and(Value::is_string) => "string".to_owned(),
        None => "any".to_owned(),
    }
}

/// Sets the request's constraint to one call of `only`, in `shape`. A
/// schema takes the request's `tools` out: the caller tells them in the
/// conversation ([`describe_tools`]).
pub(crate) fn apply(body: &mut Value, shape: Constrain, only: &[Tool]) {
    match shape {
        Constrain::Schema => {
            if let Some(map) = body.as_object_mut() {
                map.remove("tools");
            }
            body["response_format"] = json!({"type": "json_schema", "json_schema": {
                "name": "tool_call", "strict": true, "schema": call_schema(only),
            }});
        }
        Constrain::ToolChoice => {
            body["tools"] = strict_tools(only);
            body["tool_choice"] = json!("required");
            body["parallel_tool_calls"] = json!(false);
        }
        Constrain::Auto | Constrain::Off => {}
    }
}

/// Takes the constraint out of a request again.
pub(crate) fn remove(body: &mut Value, tools: &[Tool]) {
    if let Some(map) = body.as_object_mut() {
        map.remove("response_format");
        map.remove("tool_choice");
        map.remove("parallel_tool_calls");
        if !tools.is_empty() {
            map.insert("tools".into(), super::tools_json(tools));
        }
    }
}

/// Whether a 4xx's message says the server does not take `shape`'s
/// parameter (it names it, or the thing it asks for).
pub(crate) fn refused(shape: Constrain, message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    let words: &[&str] = match shape {
        Constrain::Schema => &["response_format", "json_schema", "grammar", "schema"],
        Constrain::ToolChoice => &["tool_choice", "strict", "parallel_tool_calls"],
        Constrain::Auto | Constrain::Off => &[],
    };
    words.iter().any(|w| message.contains(w))
}

/// `value` as JSON text in which a schema's properties come in the order
/// its `required` list gives (then the rest, sorted), and a call's `name`
/// before its `arguments`: servers build their grammar in the order they
/// read, and a model that must write the arguments before it names the tool
/// (serde_json sorts keys) writes worse calls.
pub(crate) fn to_ordered_string(value: &Value) -> String {
    let mut out = String::new();
    write_ordered(value, &mut out);
    out
}

fn write_ordered(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_ordered(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let first: Vec<&str> = match map.get("required").and_then(Value::as_array) {
                Some(required) if map.contains_key("properties") => {
                    required.iter().filter_map(Value::as_str).collect()
                }
                _ => Vec::new(),
            };
            out.push('{');
            for (i, key) in in_order(map, &[]).into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(key.as_str()).to_string());
                out.push(':');
                if key == "properties" && !first.is_empty() {
                    write_in_order(&map[key], &first, out);
                } else {
                    write_ordered(&map[key], out);
                }
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// The keys of `map`, those in `first` first (in its order), then the rest
/// sorted.
fn in_order<'a>(map: &'a Map<String, Value>, first: &[&str]) -> Vec<&'a String> {
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort_by_key(|k| {
        (
            first.iter().position(|f| f == k).unwrap_or(first.len()),
            k.as_str(),
        )
    });
    keys
}

/// A `properties` object, the keys in `first` first.
fn write_in_order(properties: &Value, first: &[&str], out: &mut String) {
    let Some(map) = properties.as_object() else {
        return write_ordered(properties, out);
    };
    out.push('{');
    for (i, key) in in_order(map, first).into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::from(key.as_str()).to_string());
        out.push(':');
        write_ordered(&map[key], out);
    }
    out.push('}');
}

/// The tools as OpenAI's strict mode takes them.
fn strict_tools(tools: &[Tool]) -> Value {
    tools
        .iter()
        .map(|t| {
            json!({"type": "function", "function": {
                "name": t.name, "description": t.description,
                "parameters": strict(&t.parameters), "strict": true,
            }})
        })
        .collect()
}

/// An object schema as strict mode wants it: every property required (the
/// optional ones may be null), no other property; nested objects alike.
fn strict(schema: &Value) -> Value {
    let Some(object) = schema.as_object() else {
        return schema.clone();
    };
    let mut out: Map<String, Value> = object.clone();
    if let Some(items) = object.get("items") {
        out.insert("items".into(), strict(items));
    }
    if object.get("type") != Some(&json!("object")) {
        return Value::Object(out);
    }
    let required: Vec<&str> = object
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut properties = Map::new();
    let mut names = Vec::new();
    for (name, property) in object
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let mut property = strict(property);
        if !required.contains(&name.as_str()) {
            property = nullable(property);
        }
        properties.insert(name.clone(), property);
        names.push(json!(name));
    }
    out.insert("properties".into(), Value::Object(properties));
    out.insert("required".into(), Value::Array(names));
    out.insert("additionalProperties".into(), json!(false));
    Value::Object(out)
}

/// A property that may also be null.
fn nullable(mut property: Value) -> Value {
    match property.get("type").cloned() {
        Some(Value::String(kind)) => {
            property["type"] = json!([kind, "null"]);
            if let Some(values) = property.get_mut("enum").and_then(Value::as_array_mut) {
                values.push(Value::Null);
            }
            property
        }
        _ => json!({"anyOf": [property, {"type": "null"}]}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &'static str, parameters: Value) -> Tool {
        Tool {
            name,
            description: "d",
            parameters,
        }
    }

    #[test]
    fn tools_are_told_a_line_each_required_first_then_optional_with_notes() {
        let plan = tool(
            "submit_plan",
            json!({"type": "object", "properties": {
                "body": {"type": "string"},
                "summary": {"type": "string", "description": "one sentence"},
                "files": {"type": "array", "items": {"type": "string"}}},
                "required": ["summary", "files"]}),
        );
        let list = tool("list_tasks", json!({"type": "object", "properties": {}}));
        assert_eq!(
            describe_tools(&[plan, list]),
            "- submit_plan(summary: string, files: [string], body?: string): d `summary`: one \
             sentence.\n- list_tasks(): d"
        );
    }

    #[test]
    fn a_schema_takes_the_tools_out_of_the_request_and_removing_it_puts_them_back() {
        let read = tool("read_file", json!({"type": "object", "properties": {}}));
        let mut body = json!({"tools": [], "messages": []});
        apply(&mut body, Constrain::Schema, std::slice::from_ref(&read));
        assert!(body.get("tools").is_none(), "{body}");
        remove(&mut body, std::slice::from_ref(&read));
        assert!(body.get("response_format").is_none(), "{body}");
        assert_eq!(body["tools"][0]["function"]["name"], "read_file");
    }

    #[test]
    fn a_call_is_one_of_the_tools_with_its_arguments() {
        let read = tool(
            "read_file",
            json!({"type": "object", "properties": {"path": {"enum": ["a"]}}, "required": ["path"]}),
        );
        let done = tool(
            "done",
            json!({"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}),
        );
        let schema = call_schema(&[read.clone(), done]);
        let choices = schema["anyOf"].as_array().expect("a choice");
        assert_eq!(choices.len(), 2);
        assert_eq!(choices[0]["properties"]["name"]["const"], "read_file");
        assert_eq!(
            choices[0]["properties"]["arguments"]["properties"]["path"]["enum"],
            json!(["a"])
        );
        assert_eq!(choices[1]["required"], json!(["name", "arguments"]));
        // One tool: the object itself.
        assert_eq!(
            call_schema(&[read])["properties"]["name"]["const"],
            "read_file"
        );
    }

    #[test]
    fn strict_tools_require_every_property_and_null_the_optional_ones() {
        let search = tool(
            "search",
            json!({"type": "object", "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}}, "required": ["pattern"]}),
        );
        let mut body = json!({"tools": []});
        apply(
            &mut body,
            Constrain::ToolChoice,
            std::slice::from_ref(&search),
        );
        assert_eq!(body["tool_choice"], "required");
        let function = &body["tools"][0]["function"];
        assert_eq!(function["strict"], true);
        let parameters = &function["parameters"];
        assert_eq!(parameters["additionalProperties"], false);
        assert_eq!(parameters["required"], json!(["path", "pattern"]));
        assert_eq!(
            parameters["properties"]["path"]["type"],
            json!(["string", "null"])
        );
        assert_eq!(parameters["properties"]["pattern"]["type"], "string");
        remove(&mut body, &[search]);
        assert!(body.get("tool_choice").is_none());
        assert!(body["tools"][0]["function"].get("strict").is_none());
    }

    #[test]
    fn a_call_names_its_tool_first_and_properties_follow_required() {
        let write = tool(
            "write_file",
            json!({"type": "object", "properties": {"content": {"type": "string"}, "path": {"type": "string"}}, "required": ["path", "content"]}),
        );
        let text = to_ordered_string(&call_schema(&[write]));
        let at = |needle: &str| text.find(needle).expect(needle);
        assert!(at("\"name\"") < at("\"arguments\""), "{text}");
        assert!(at("\"path\":{") < at("\"content\":{"), "{text}");
        let back: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(back["properties"]["name"]["const"], "write_file");
    }

    #[test]
    fn a_refusal_is_read_from_the_words_that_name_the_parameter() {
        assert!(refused(
            Constrain::Schema,
            "Unrecognized request argument supplied: response_format"
        ));
        assert!(refused(
            Constrain::ToolChoice,
            "'tool_choice' is not supported"
        ));
        assert!(!refused(Constrain::Schema, "model not found"));
        assert_eq!("tool-choice".parse(), Ok(Constrain::ToolChoice));
        assert!("grammar".parse::<Constrain>().is_err());
    }
}
