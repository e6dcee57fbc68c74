//! The notify file read: [`Config::parse`] checks every sink, route and
//! address, and a [`ConfigError`] names the key, sink or route at fault and
//! its line.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

use serde::Deserialize;
use toml::Spanned;

pub use crate::doc::ConfigError;
use crate::{
    doc::Doc,
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
