//! A `[[route]]`: which notices go to which sinks, and when. A notice
//! matches a route when its kind is one of `kinds`, one of its paths
//! matches one of `paths`, and one of its owners is one of `owners` (each
//! test passes when the key is absent); a route with `after` sends only
//! once the request has waited that long.

use std::{collections::BTreeMap, time::Duration};

use globset::{GlobSet, GlobSetBuilder};
use serde::Deserialize;
use toml::Spanned;

use crate::{
    doc::{ConfigError, Doc},
    notice::{Notice, KINDS},
    sink::duration,
};

/// The shortest `after`.
pub const LEAST_AFTER: Duration = Duration::from_secs(1);
/// The longest `after`.
pub const MOST_AFTER: Duration = Duration::from_secs(30 * 24 * 3600);

/// A `[[route]]` as TOML reads it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRoute {
    kinds: Option<Spanned<Vec<String>>>,
    paths: Option<Spanned<Vec<String>>>,
    owners: Option<Spanned<Vec<String>>>,
    sinks: Spanned<Vec<String>>,
    after: Option<Spanned<String>>,
}

/// One route, checked.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    /// Its place in the file, from 1: how logs name it.
    pub(crate) number: usize,
    /// `None`: every kind.
    kinds: Option<Vec<String>>,
    /// `None`: any paths (none included).
    paths: Option<GlobSet>,
    /// `None`: any owners (none included).
    owners: Option<Vec<String>>,
    /// Indexes into the config's sinks, each once.
    pub(crate) sinks: Vec<usize>,
    /// When to escalate; `None`: at once.
    pub(crate) after: Option<Duration>,
}

impl Route {
    /// Checks the `number`th `[[route]]` against the sinks by name.
    pub(crate) fn parse(
        doc: &Doc<'_>,
        number: usize,
        raw: Spanned<RawRoute>,
        sinks: &BTreeMap<&str, usize>,
    ) -> Result<Route, ConfigError> {
        let raw = raw.into_inner();
        let at = |what: String| format!("route {number}: {what}");
        if let Some(kinds) = &raw.kinds {
            if let Some(bad) = kinds
                .get_ref()
                .iter()
                .find(|k| !KINDS.contains(&k.as_str()))
            {
                return Err(doc.error(
                    &kinds.span(),
                    at(format!("kind {bad:?} is not one of {KINDS:?}")),
                ));
            }
        }
        let paths = match &raw.paths {
            None => None,
            Some(globs) => {
                Some(glob_set(globs.get_ref()).map_err(|e| doc.error(&globs.span(), at(e)))?)
            }
        };
        let mut indexes = Vec::new();
        for name in raw.sinks.get_ref() {
            let Some(&i) = sinks.get(name.as_str()) else {
                return Err(doc.error(
                    &raw.sinks.span(),
                    at(format!("sink {name:?} is not a [[sink]] of this file")),
                ));
            };
            if !indexes.contains(&i) {
                indexes.push(i);
            }
        }
        if indexes.is_empty() {
            return Err(doc.error(&raw.sinks.span(), at("`sinks` is empty".into())));
        }
        let after = match &raw.after {
            None => None,
            Some(text) => Some(
                duration(text, LEAST_AFTER, MOST_AFTER)
                    .map_err(|e| doc.error(&text.span(), at(format!("after {e}"))))?,
            ),
        };
        let listed = |list: &Option<Spanned<Vec<String>>>, key: &str| match list {
            Some(l) if l.get_ref().is_empty() => Err(doc.error(
                &l.span(),
                at(format!("`{key}` is empty: leave it out to match any")),
            )),
            other => Ok(other.as_ref().map(|l| l.get_ref().clone())),
        };
        Ok(Route {
            number,
            kinds: listed(&raw.kinds, "kinds")?,
            paths,
            owners: listed(&raw.owners, "owners")?,
            sinks: indexes,
            after,
        })
    }

    /// Whether `notice` goes this way.
    pub(crate) fn matches(&self, notice: &Notice) -> bool {
        let kind = self.kinds.as_ref().is_none_or(|k| k.contains(&notice.kind));
        let paths = self
            .paths
            .as_ref()
            .is_none_or(|set| notice.paths.iter().any(|p| set.is_match(p)));
        let owners = self
            .owners
            .as_ref()
            .is_none_or(|o| notice.owners.iter().any(|owner| o.contains(owner)));
        kind && paths && owners
    }
}

/// `globs` as one set; `/` is a separator (`*` stays in a directory, `**`
/// crosses them).
fn glob_set(globs: &[String]) -> Result<GlobSet, String> {
    if globs.is_empty() {
        return Err("`paths` is empty: leave it out to match any".into());
    }
    let mut builder = GlobSetBuilder::new();
    for glob in globs {
        let parsed = globset::GlobBuilder::new(glob)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("path {glob:?} is not a glob: {e}"))?;
        builder.add(parsed);
    }
    builder
        .build()
        .map_err(|e| format!("paths do not build: {e}"))
}
