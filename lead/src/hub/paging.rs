//! Pages of the list calls: a page token names the last entry of the
//! previous page by a key that only grows (join order, request order), so a
//! page continues where the last one ended even as the list changes.

use prost::Message;
use shared::{error::FieldError, limits, op::PageAsk};

use crate::error::HubError;

/// Entries in a page when the caller names no size, and the most it may name.
pub(crate) const MAX_PAGE_SIZE: usize = 1_000;
/// A page ends before it passes this many bytes (it holds at least one
/// entry), well under the 4 MiB a gRPC client decodes by default.
pub(crate) const MAX_PAGE_BYTES: usize = 1024 * 1024;

/// The prefixes of the lists' page tokens, so that one list's token is
/// refused by another.
pub(crate) const TASKS: &str = "t";
/// See [`TASKS`].
pub(crate) const REQUESTS: &str = "r";
/// See [`TASKS`].
pub(crate) const MEMBERS: &str = "m";

/// One page asked for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Page {
    /// The key of the last entry of the previous page.
    pub(crate) after: Option<u64>,
    /// The most entries.
    size: usize,
    /// The token's prefix, so that one list's token is refused by another.
    prefix: &'static str,
}

impl Page {
    /// Reads `page_size` and `page_token`; a token is `<prefix><key>`.
    pub(crate) fn parse(
        page_size: u32,
        page_token: &str,
        prefix: &'static str,
    ) -> Result<Self, HubError> {
        limits::check("page_token", page_token, limits::PAGE_TOKEN)?;
        let size = match usize::try_from(page_size).unwrap_or(usize::MAX) {
            0 => MAX_PAGE_SIZE,
            n => n.min(MAX_PAGE_SIZE),
        };
        let after = if page_token.is_empty() {
            None
        } else {
            let key = page_token
                .strip_prefix(prefix)
                .and_then(|k| k.parse::<u64>().ok())
                .ok_or_else(|| {
                    FieldError::new(
                        "page_token",
                        format!(
                            "{page_token:?} is not a token this list gave; pass next_page_token as it came"
                        ),
                    )
                })?;
            Some(key)
        };
        Ok(Self {
            after,
            size,
            prefix,
        })
    }

    /// The page `ask` names, of the list whose tokens start with `prefix`.
    pub(crate) fn of(ask: PageAsk, prefix: &'static str) -> Self {
        Self {
            after: ask.after,
            size: ask.size.clamp(1, MAX_PAGE_SIZE),
            prefix,
        }
    }

    /// What the edge hands the core: the page asked for.
    pub(crate) fn ask(&self) -> PageAsk {
        PageAsk {
            after: self.after,
            size: self.size,
        }
    }

    /// Takes one page from `entries` (key, value), in key order; returns it
    /// and the token of the next page (empty after the last).
    pub(crate) fn collect<T: Message>(
        &self,
        entries: impl Iterator<Item = (u64, T)>,
    ) -> (Vec<T>, String) {
        let mut page = Vec::new();
        let mut bytes = 0;
        let mut last = None;
        let mut entries = entries.peekable();
        while let Some((key, value)) = entries.next_if(|_| page.len() < self.size) {
            let size = value.encoded_len() + 8;
            if !page.is_empty() && bytes + size > MAX_PAGE_BYTES {
                // Put it back for the next page.
                return (
                    page,
                    last.map(|k| format!("{}{k}", self.prefix))
                        .unwrap_or_default(),
                );
            }
            bytes += size;
            page.push(value);
            last = Some(key);
        }
        let next = if entries.peek().is_some() {
            last.map(|k| format!("{}{k}", self.prefix))
                .unwrap_or_default()
        } else {
            String::new()
        };
        (page, next)
    }
}
