//! The shared task list on the hub: the core's task board (in the
//! [`shared::team::Team`], which tells the store) wired to the watchers and
//! the inboxes of idle members.

use shared::wire::*;
use shared::{
    grant::Mode,
    op::PageAsk,
    pb::{self, envelope::Body},
    tasks::{NewTask, Task, TaskStatus},
};

use super::{Hub, LEAD};
use crate::error::HubError;

impl Hub {
    /// `CreateTask`: a new pending task; idle members hear of it if it can
    /// be claimed now.
    pub(super) fn create_task(&mut self, new: NewTask) -> Result<Task, HubError> {
        let task = self
            .team
            .tasks
            .create(uuid::Uuid::new_v4().to_string(), new, self.now())?;
        tracing::info!(task_id = %task.task_id, subject = %shared::display::Escaped(&task.subject), "task created");
        self.task_changed(&task);
        if self.team.tasks.is_claimable(&task) {
            self.announce_claimable(std::slice::from_ref(&task));
        }
        Ok(task)
    }

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

    /// `ClaimTask`: the caller claims a task (or the oldest claimable one).
    pub(super) fn claim_task(&mut self, name: &str, id: Option<&str>) -> Result<Task, HubError> {
        let before = id
            .and_then(|id| self.team.tasks.get(id))
            .map(|t| t.updated_at_unix_ms);
        let task = self.team.tasks.claim(name, id, self.now())?;
        if before != Some(task.updated_at_unix_ms) {
            tracing::info!(task_id = %task.task_id, member = %name, "task claimed");
            self.task_changed(&task);
            self.mark_busy(name);
        }
        Ok(task)
    }

    /// `CompleteTask`: the owner completes its task; the tasks that waited
    /// on it become claimable, and idle members hear of them.
    pub(super) fn complete_task(
        &mut self,
        name: &str,
        task_id: &str,
        summary: String,
    ) -> Result<Task, HubError> {
        let (done, hold_ended) = self
            .team
            .complete_task(name, task_id, summary, self.now())?;
        if done.fresh {
            tracing::info!(task_id = %task_id, member = %name, "task completed");
            // The grant was for that task's plan: it ends with the task, and
            // the member's next task needs a plan of its own.
            if hold_ended {
                self.team.members.set_mode(name, Mode::Plan);
                self.emit_member(name);
            }
            self.task_changed(&done.task);
            self.announce_claimable(&done.unblocked);
        }
        Ok(done.task)
    }

    /// A terminated member's claimed tasks, `released` from the board, go
    /// back to the list: announced, and offered to idle members.
    pub(super) fn give_back(&mut self, name: &str, released: Vec<Task>) {
        for task in &released {
            tracing::info!(task_id = %task.task_id, member = %name, "task given back: its owner terminated");
            self.task_changed(task);
        }
        let claimable: Vec<Task> = released
            .into_iter()
            .filter(|t| self.team.tasks.is_claimable(t))
            .collect();
        self.announce_claimable(&claimable);
    }

    /// Shows a task's new state to the watchers (the board tells the store).
    fn task_changed(&mut self, task: &Task) {
        self.emit(pb::event::Kind::Task(task.to_pb()));
    }

    /// Tells every idle active member without a task of its own that work
    /// can be claimed: one envelope each, naming the oldest of `tasks` (a
    /// claim with no id takes the oldest claimable task anyway), its body
    /// stored once for them all. However many tasks one change unblocks, it
    /// costs one envelope per idle member.
    fn announce_claimable(&mut self, tasks: &[Task]) {
        let Some(oldest) = tasks.iter().min_by_key(|t| t.created_at_unix_ms) else {
            return;
        };
        let body = Body::TaskClaimable(oldest.to_pb());
        let owners: std::collections::HashSet<&str> = self
            .team
            .tasks
            .list(Some(TaskStatus::Claimed))
            .into_iter()
            .map(|t| t.owner.as_str())
            .collect();
        let idle: Vec<String> = self
            .team
            .members
            .iter()
            .filter(|m| !m.terminated() && m.life.is_idle() && m.name.as_str() != LEAD)
            .filter(|m| !owners.contains(m.name.as_str()))
            .map(|m| m.name.to_string())
            .collect();
        match idle.as_slice() {
            [] => {}
            [one] => {
                let one = one.clone();
                self.deliver(LEAD, &one, None, body);
            }
            _ => self.fan_out(LEAD, &idle, uuid::Uuid::new_v4().to_string(), body),
        }
    }
}
