//! The lists a caller pages through (tasks, requests, the team), as the
//! core has them: entries by a key that only grows, at most the size asked,
//! and whether more follow. The edge renders a page for the wire and may
//! end it sooner, by its size there.

use super::Team;
use crate::{
    effect::MemberView,
    op::PageAsk,
    protocol::{Kind, Request, Status},
    tasks::{Task, TaskStatus},
    usage::Usage,
};

/// One page of a list: entries by key, and whether more follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed<T> {
    /// The entries, by key, in key order.
    pub entries: Vec<(u64, T)>,
    /// Whether entries follow the last of these.
    pub more: bool,
}

impl<T> Listed<T> {
    /// The page of `entries` (in key order) that `page` asks for.
    fn of(entries: impl Iterator<Item = (u64, T)>, page: PageAsk) -> Self {
        let mut entries = entries.peekable();
        let mut taken = Vec::new();
        while taken.len() < page.size.max(1) {
            match entries.next() {
                Some(entry) => taken.push(entry),
                None => break,
            }
        }
        Self {
            more: entries.peek().is_some(),
            entries: taken,
        }
    }
}

/// A page of the team, with what every page shows of usage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamPage {
    /// Members by join order.
    pub members: Listed<MemberView>,
    /// What the whole team used.
    pub team_usage: Usage,
    /// What each user of a model that is no member used (the lead's
    /// model reviewer).
    pub others: Vec<(String, Usage)>,
}

impl Team {
    /// Tasks oldest first, of one status or all.
    pub fn list_tasks(&self, status: Option<TaskStatus>, page: PageAsk) -> Listed<Task> {
        let start = page.after.map_or(0, |after| {
            usize::try_from(after)
                .unwrap_or(usize::MAX)
                .saturating_add(1)
        });
        Listed::of(
            self.tasks
                .iter_from(status, start)
                .map(|(at, t)| (u64::try_from(at).unwrap_or(u64::MAX), t.clone())),
            page,
        )
    }

    /// Requests oldest first, of one status and kind or all.
    pub fn list_requests(
        &self,
        status: Option<Status>,
        kind: Option<Kind>,
        page: PageAsk,
    ) -> Listed<Request> {
        Listed::of(
            self.requests
                .iter_after(page.after)
                .filter(|(_, r)| {
                    status.is_none_or(|s| r.status == s) && kind.is_none_or(|k| r.opening.kind == k)
                })
                .map(|(ord, r)| (ord, r.clone())),
            page,
        )
    }

    /// Members in join order, and the team's usage.
    pub fn list_team(&self, page: PageAsk) -> TeamPage {
        let members = Listed::of(
            self.members
                .iter_after(page.after)
                .filter_map(|m| Some((m.order, self.member_view(m.name.as_str())?))),
            page,
        );
        TeamPage {
            members,
            team_usage: self.usage.team_total(),
            others: self
                .usage
                .iter()
                .filter(|a| !a.member)
                .map(|a| (a.name.clone(), a.total()))
                .collect(),
        }
    }
}
