//! `[people]`: who an owner is by mail. A name (`carol`) or a group
//! (`@dba`) maps to one address or a list of them; a mail sink writes to
//! the addresses of a notice's owners.

use std::collections::{BTreeMap, BTreeSet};

use lettre::message::Mailbox;
use serde::Deserialize;
use toml::Spanned;

use crate::{
    doc::{ConfigError, Doc},
    sink::mailbox,
};

/// An owner's addresses as TOML reads them: one or a list.
#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum RawAddresses {
    One(String),
    Many(Vec<String>),
}

/// Owners and their addresses.
#[derive(Debug, Clone, Default)]
pub(crate) struct People {
    addresses: BTreeMap<String, Vec<Mailbox>>,
}

impl People {
    /// Checks `[people]`: every owner named, every address a mail address.
    pub(crate) fn parse(
        doc: &Doc<'_>,
        raw: BTreeMap<Spanned<String>, Spanned<RawAddresses>>,
    ) -> Result<People, ConfigError> {
        let mut addresses = BTreeMap::new();
        for (owner, list) in raw {
            let name = owner.get_ref().trim();
            if name.is_empty() || name == "@" {
                return Err(doc.error(&owner.span(), "[people]: an owner's name is empty"));
            }
            let at = |what: String| doc.error(&list.span(), format!("[people] {name:?}: {what}"));
            let texts = match list.get_ref() {
                RawAddresses::One(one) => vec![one.clone()],
                RawAddresses::Many(many) => many.clone(),
            };
            if texts.is_empty() {
                return Err(at("names no address".into()));
            }
            let parsed = texts
                .iter()
                .map(|t| mailbox(t))
                .collect::<Result<Vec<_>, _>>()
                .map_err(at)?;
            addresses.insert(name.to_owned(), parsed);
        }
        Ok(People { addresses })
    }

    /// Whether it names no one.
    pub(crate) fn is_empty(&self) -> bool {
        self.addresses.is_empty()
    }

    /// The addresses of `owners`, each once, and the owners it has none
    /// for.
    pub(crate) fn of<'a>(&self, owners: &'a [String]) -> (Vec<Mailbox>, Vec<&'a str>) {
        let mut seen = BTreeSet::new();
        let mut found = Vec::new();
        let mut unknown = Vec::new();
        for owner in owners {
            match self.addresses.get(owner.as_str()) {
                Some(list) => {
                    for address in list {
                        if seen.insert(address.email.to_string()) {
                            found.push(address.clone());
                        }
                    }
                }
                None => unknown.push(owner.as_str()),
            }
        }
        (found, unknown)
    }
}
