//! The notify file read: [`Config::parse`] checks every sink, route and
//! address, and a [`ConfigError`] names the key, sink or route at fault and
//! its line.

use std::{
    collections::{BTreeMap, BTreeSet},
    ops::Range,
    path::{Path, PathBuf},
};

use serde::Deserialize;
use toml::Spanned;

use crate::{
    people::{People, RawAddresses},
    route::{RawRoute, Route},
    sink::{RawSink, SinkConfig, SinkKind},
};

/// A notify file, read and checked: its sinks, its people and its routes.
#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) sinks: Vec<SinkConfig>,
    pub(crate) people: People,
    pub(crate) routes: Vec<Route>,
}

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

/// The file as TOML reads it, before any check.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    sink: Vec<Spanned<RawSink>>,
    #[serde(default)]
    people: BTreeMap<Spanned<String>, Spanned<RawAddresses>>,
    #[serde(default)]
    route: Vec<Spanned<RawRoute>>,
}

/// The text being read, to turn a span into a line, and where the secrets
/// named by `*_env` keys are looked up.
pub(crate) struct Doc<'a> {
    text: &'a str,
    env: &'a dyn Fn(&str) -> Option<String>,
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
    fn toml_error(&self, e: &toml::de::Error) -> ConfigError {
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

impl Config {
    /// Reads a notify file's text; the secrets that `secret_env` and
    /// `password_env` name are read from the process's environment now.
    pub fn parse(toml_text: &str) -> Result<Config, ConfigError> {
        Config::parse_with_env(toml_text, &|name| std::env::var(name).ok())
    }

    /// [`Config::parse`], with the environment variables looked up by `env`.
    pub fn parse_with_env(
        toml_text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let doc = Doc {
            text: toml_text,
            env,
        };
        let raw: RawFile = toml::from_str(toml_text).map_err(|e| doc.toml_error(&e))?;
        let sinks = sinks(&doc, raw.sink)?;
        let people = People::parse(&doc, raw.people)?;
        let names: BTreeMap<&str, usize> = sinks
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.as_str(), i))
            .collect();
        let mut routes = Vec::with_capacity(raw.route.len());
        for (i, route) in raw.route.into_iter().enumerate() {
            routes.push(Route::parse(&doc, i + 1, route, &names)?);
        }
        if routes.is_empty() {
            return Err(ConfigError {
                file: None,
                line: None,
                message: "no [[route]]: the file would send nothing".into(),
            });
        }
        let config = Config {
            sinks,
            people,
            routes,
        };
        config.check_mail_reaches_someone()?;
        Ok(config)
    }

    /// Reads and checks the notify file at `path`; an error names the file.
    pub fn load(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: Some(path.to_path_buf()),
            line: None,
            message: format!("cannot read it: {e}"),
        })?;
        Config::parse(&text).map_err(|e| ConfigError {
            file: Some(path.to_path_buf()),
            ..e
        })
    }

    /// The sinks' names, in the file's order.
    pub fn sink_names(&self) -> impl Iterator<Item = &str> {
        self.sinks.iter().map(|s| s.name.as_str())
    }

    /// How many routes the file has.
    pub fn route_count(&self) -> usize {
        self.routes.len()
    }

    /// A mail sink that a route uses must have someone to write to: its
    /// own `to`, or `[people]`.
    fn check_mail_reaches_someone(&self) -> Result<(), ConfigError> {
        let used: BTreeSet<usize> = self
            .routes
            .iter()
            .flat_map(|r| r.sinks.iter().copied())
            .collect();
        for i in used {
            let sink = &self.sinks[i];
            if let SinkKind::Smtp(smtp) = &sink.kind {
                if smtp.to.is_empty() && self.people.is_empty() {
                    return Err(ConfigError {
                        file: None,
                        line: Some(sink.line),
                        message: format!(
                            "sink {:?} (smtp) has no `to` and [people] names no one: \
                             its mail would reach no one",
                            sink.name
                        ),
                    });
                }
            }
        }
        Ok(())
    }
}

/// Every `[[sink]]` checked, their names unique.
fn sinks(doc: &Doc<'_>, raw: Vec<Spanned<RawSink>>) -> Result<Vec<SinkConfig>, ConfigError> {
    let mut seen = BTreeMap::new();
    let mut sinks = Vec::with_capacity(raw.len());
    for sink in raw {
        let sink = SinkConfig::parse(doc, sink)?;
        if let Some(first) = seen.insert(sink.name.clone(), sink.line) {
            return Err(ConfigError {
                file: None,
                line: Some(sink.line),
                message: format!(
                    "sink {:?} is named twice (first on line {first})",
                    sink.name
                ),
            });
        }
        sinks.push(sink);
    }
    Ok(sinks)
}
