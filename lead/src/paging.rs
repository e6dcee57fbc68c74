//! Pages of the list calls: a page token names the last entry of the
//! previous page by a key that only grows (join order, request order), so a
//! page continues where the last one ended even as the list changes.

use mesh_core::{error::FieldError, limits, op::PageAsk, team::Listed};
use prost::Message;

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
        Ok(Self { after, size })
    }

    /// What the edge hands the core: the page asked for.
    pub(crate) fn ask(&self) -> PageAsk {
        PageAsk {
            after: self.after,
            size: self.size,
        }
    }
}

/// The wire's page of `listed` (a list whose tokens start with `prefix`):
/// its entries rendered by `to_pb`, ended before it passes
/// [`MAX_PAGE_BYTES`] (it holds at least one), and the token of the next
/// page (empty after the last).
pub(crate) fn render<T, P: Message>(
    listed: Listed<T>,
    prefix: &str,
    to_pb: impl Fn(&T) -> P,
) -> (Vec<P>, String) {
    let token = |key: u64| format!("{prefix}{key}");
    let mut page = Vec::new();
    let mut bytes = 0;
    let mut last = None;
    for (key, entry) in &listed.entries {
        let value = to_pb(entry);
        let size = value.encoded_len() + 8;
        if !page.is_empty() && bytes + size > MAX_PAGE_BYTES {
            // The rest come on the next page.
            return (page, last.map(token).unwrap_or_default());
        }
        bytes += size;
        page.push(value);
        last = Some(*key);
    }
    let next = if listed.more {
        last.map(token).unwrap_or_default()
    } else {
        String::new()
    };
    (page, next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::pb;

    fn text(n: usize) -> pb::Text {
        pb::Text {
            content: "x".repeat(n),
        }
    }

    fn listed(sizes: &[usize], more: bool) -> Listed<usize> {
        Listed {
            entries: sizes
                .iter()
                .enumerate()
                .map(|(i, n)| (10 + i as u64, *n))
                .collect(),
            more,
        }
    }

    #[test]
    fn a_page_ends_before_a_mebibyte_and_names_where_the_next_begins() {
        let big = MAX_PAGE_BYTES / 3;
        let (page, next) = render(listed(&[big, big, big, 5], false), "t", |n| text(*n));
        assert_eq!(page.len(), 2, "a third would pass the bound");
        assert_eq!(next, "t11", "the next page starts after the last one given");
        let (page, next) = render(listed(&[MAX_PAGE_BYTES * 2], false), "t", |n| text(*n));
        assert_eq!((page.len(), next.as_str()), (1, ""), "at least one entry");
    }

    #[test]
    fn the_last_page_has_no_token_and_one_with_more_after_it_does() {
        let (page, next) = render(listed(&[1, 2], false), "m", |n| text(*n));
        assert_eq!((page.len(), next.as_str()), (2, ""));
        let (page, next) = render(listed(&[1, 2], true), "m", |n| text(*n));
        assert_eq!((page.len(), next.as_str()), (2, "m11"));
        let (page, next) = render(listed(&[], false), "m", |n| text(*n));
        assert_eq!((page.len(), next.as_str()), (0, ""));
    }
}
