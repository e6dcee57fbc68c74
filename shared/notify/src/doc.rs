//! What reading the notify file shares with every part of it: the error
//! that names the key, sink or route at fault and its line, and the text
//! being read ([`Doc`]), which turns a span into that line and looks up the
//! secrets `*_env` keys name.

use std::{
    ops::Range,
    path::{Path, PathBuf},
};

/// Why a notify file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", where_(.file.as_deref(), *.line))]
pub struct ConfigError {
    /// The file, when it was read from one ([`Config::load`]).
    pub file: Option<PathBuf>,
    /// The line (from 1) of the key at fault, where it is known.
    pub line: Option<usize>,
    /// What is wrong, naming the sink, route or key.
    pub message: String,
}

/// "FILE:LINE: ", "line LINE: ", "FILE: " or nothing.
fn where_(file: Option<&Path>, line: Option<usize>) -> String {
    match (file, line) {
        (Some(file), Some(line)) => format!("{}:{line}: ", file.display()),
        (Some(file), None) => format!("{}: ", file.display()),
        (None, Some(line)) => format!("line {line}: "),
        (None, None) => String::new(),
    }
}

/// The text being read, to turn a span into a line, and where the secrets
/// named by `*_env` keys are looked up.
pub(crate) struct Doc<'a> {
    pub(crate) text: &'a str,
    pub(crate) env: &'a dyn Fn(&str) -> Option<String>,
}

impl Doc<'_> {
    /// The line (from 1) where `span` starts.
    pub(crate) fn line(&self, span: &Range<usize>) -> usize {
        let end = span.start.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1
    }

    /// An error at `span`.
    pub(crate) fn error(&self, span: &Range<usize>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: None,
            line: Some(self.line(span)),
            message: message.into(),
        }
    }

    /// TOML's own error, with the table (`sink 2`, `route 1`, `[people]`)
    /// and the key it is about where they are known.
    pub(crate) fn toml_error(&self, e: &toml::de::Error) -> ConfigError {
        let line = e.span().map(|span| self.line(&span));
        // Without the input, TOML's text ends with the key's path.
        let mut bare = e.clone();
        bare.set_input(None);
        let shown = bare.to_string();
        let path = shown
            .lines()
            .find_map(|l| l.strip_prefix("in `")?.strip_suffix('`'))
            .unwrap_or("");
        let table = line.and_then(|l| self.table_at(l));
        let key = path.split_once('.').map_or("", |(_, key)| key);
        let mut message = String::new();
        if let Some(table) = table {
            message.push_str(&table);
            message.push_str(": ");
        }
        if !key.is_empty() {
            message.push_str(&format!("`{key}`: "));
        }
        message.push_str(e.message().trim_end());
        ConfigError {
            file: None,
            line,
            message,
        }
    }

    /// The table `line` is in: "sink 2", "route 1" or "[people]".
    fn table_at(&self, line: usize) -> Option<String> {
        let (mut sinks, mut routes, mut table) = (0, 0, None);
        for text in self.text.lines().take(line) {
            let header = text.split('#').next().unwrap_or("").trim();
            match header {
                "[[sink]]" => {
                    sinks += 1;
                    table = Some(format!("sink {sinks}"));
                }
                "[[route]]" => {
                    routes += 1;
                    table = Some(format!("route {routes}"));
                }
                "[people]" => table = Some("[people]".to_owned()),
                _ => {}
            }
        }
        table
    }

    /// The environment variable `name`, when it is set and not empty.
    pub(crate) fn env(&self, name: &str) -> Option<String> {
        (self.env)(name).filter(|v| !v.is_empty())
    }
}
