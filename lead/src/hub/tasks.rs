//! The shared task list's pages (the core applies the task ops: see
//! [`shared::team::Team::apply`]).

use shared::wire::*;
use shared::{op::PageAsk, pb, tasks::TaskStatus};

use super::Hub;

impl Hub {
    /// `ListTasks`: one page oldest first, at most `page.size` (default and
    /// cap 1,000) and about 1 MiB.
    pub(super) fn list_tasks(
        &self,
        status: Option<TaskStatus>,
        page: PageAsk,
    ) -> pb::ListTasksResponse {
        let page = super::paging::Page::of(page, super::paging::TASKS);
        let start = page.after.map_or(0, |after| {
            usize::try_from(after)
                .unwrap_or(usize::MAX)
                .saturating_add(1)
        });
        let (tasks, next_page_token) = page.collect(
            self.team
                .tasks
                .iter_from(status, start)
                .map(|(at, t)| (u64::try_from(at).unwrap_or(u64::MAX), t.to_pb())),
        );
        pb::ListTasksResponse {
            tasks,
            next_page_token,
        }
    }
}
