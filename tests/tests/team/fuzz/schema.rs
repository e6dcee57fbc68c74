//! The messages and RPCs of the contract, read from the descriptor set the
//! generated code carries, so that a new RPC or field is fuzzed without
//! touching these tests.

use std::collections::HashMap;

use shared::pb;

use crate::fuzz::wire::{read_fields, text_of, Value};

/// What a field holds on the wire.
#[derive(Debug, Clone)]
pub(crate) enum Kind {
    Str,
    Bytes,
    Varint,
    Fixed32,
    Fixed64,
    /// An embedded message, by its full name (`.mesh.v1.Plan`).
    Message(String),
}

#[derive(Debug, Clone)]
pub(crate) struct Field {
    pub(crate) number: u64,
    pub(crate) name: String,
    pub(crate) kind: Kind,
    pub(crate) repeated: bool,
}

/// Who may call an RPC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Caller {
    /// `Lead.Join`: the join token.
    Joiner,
    /// The rest of `Lead`: a member's session token.
    Member,
    /// `Operator`: the operator token.
    Operator,
}

#[derive(Debug, Clone)]
pub(crate) struct Rpc {
    /// `/mesh.v1.Lead/Join`.
    pub(crate) path: String,
    pub(crate) caller: Caller,
    pub(crate) server_streaming: bool,
    /// The request message's full name.
    pub(crate) input: String,
}

/// The messages and RPCs of the contract, from the descriptor set the
/// generated code carries.
#[derive(Debug, Default)]
pub(crate) struct Schema {
    messages: HashMap<String, Vec<Field>>,
    pub(crate) rpcs: Vec<Rpc>,
}

impl Schema {
    pub(crate) fn load() -> Self {
        let mut schema = Schema::default();
        for (number, file) in read_fields(pb::FILE_DESCRIPTOR_SET) {
            let Value::Bytes(file) = file else { continue };
            if number != 1 {
                continue;
            }
            let fields = read_fields(file);
            let package = fields
                .iter()
                .find(|(n, _)| *n == 2)
                .map(|(_, v)| text_of(*v))
                .unwrap_or_default();
            for (n, value) in &fields {
                match (n, value) {
                    (4, Value::Bytes(message)) => {
                        schema.message(&format!(".{package}"), message);
                    }
                    (6, Value::Bytes(service)) => schema.service(&package, service),
                    _ => {}
                }
            }
        }
        schema
    }

    fn message(&mut self, scope: &str, encoded: &[u8]) {
        let parts = read_fields(encoded);
        let name = parts
            .iter()
            .find(|(n, _)| *n == 1)
            .map(|(_, v)| text_of(*v))
            .expect("a message's name");
        let full = format!("{scope}.{name}");
        let mut fields = Vec::new();
        for (n, value) in &parts {
            match (n, value) {
                (2, Value::Bytes(field)) => fields.push(Self::field(field)),
                (3, Value::Bytes(nested)) => self.message(&full, nested),
                _ => {}
            }
        }
        self.messages.insert(full, fields);
    }

    fn field(encoded: &[u8]) -> Field {
        let (mut name, mut number, mut label, mut kind, mut type_name) =
            (String::new(), 0, 0, 0, String::new());
        for (n, value) in read_fields(encoded) {
            match (n, value) {
                (1, v) => name = text_of(v),
                (3, Value::Int(v)) => number = v,
                (4, Value::Int(v)) => label = v,
                (5, Value::Int(v)) => kind = v,
                (6, v) => type_name = text_of(v),
                _ => {}
            }
        }
        let kind = match kind {
            9 => Kind::Str,
            12 | 10 => Kind::Bytes,
            11 => Kind::Message(type_name),
            1 | 6 | 16 => Kind::Fixed64,
            2 | 7 | 15 => Kind::Fixed32,
            _ => Kind::Varint,
        };
        Field {
            number,
            name,
            kind,
            repeated: label == 3,
        }
    }

    fn service(&mut self, package: &str, encoded: &[u8]) {
        let parts = read_fields(encoded);
        let service = parts
            .iter()
            .find(|(n, _)| *n == 1)
            .map(|(_, v)| text_of(*v))
            .expect("a service's name");
        let full = format!("{package}.{service}");
        for (n, value) in &parts {
            let (2, Value::Bytes(method)) = (n, value) else {
                continue;
            };
            let (mut name, mut input, mut server_streaming) = (String::new(), String::new(), false);
            for (m, v) in read_fields(method) {
                match (m, v) {
                    (1, v) => name = text_of(v),
                    (2, v) => input = text_of(v),
                    (6, Value::Int(s)) => server_streaming = s != 0,
                    _ => {}
                }
            }
            let caller = match (full.as_str(), name.as_str()) {
                ("mesh.v1.Lead", "Join") => Caller::Joiner,
                ("mesh.v1.Lead", _) => Caller::Member,
                ("mesh.v1.Operator", _) => Caller::Operator,
                _ => continue,
            };
            self.rpcs.push(Rpc {
                path: format!("/{full}/{name}"),
                caller,
                server_streaming,
                input,
            });
        }
    }

    pub(crate) fn fields(&self, message: &str) -> &[Field] {
        self.messages
            .get(message)
            .unwrap_or_else(|| panic!("no message {message} in the descriptor set"))
    }
}
