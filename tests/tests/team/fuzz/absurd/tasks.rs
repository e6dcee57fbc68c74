//! Tasks: CreateTask, ListTasks (of both services), ClaimTask and
//! CompleteTask, with absurd subjects, descriptions, dependencies, files,
//! filters, pages, ids and summaries.

use mesh_core::limits;
use shared::pb;

use super::{plan, Absurd};
use crate::fuzz::pools::{around, globs, page_tokens, weird, ENUMS, PAGE_SIZES};

/// A task: a plain one, then `edit`ed.
fn task(edit: &dyn Fn(&mut pb::CreateTaskRequest)) -> pb::CreateTaskRequest {
    let mut task = pb::CreateTaskRequest {
        subject: "absurd".into(),
        ..Default::default()
    };
    edit(&mut task);
    task
}

impl Absurd {
    /// The task RPCs, one after the other.
    pub(super) async fn tasks(&mut self) {
        self.create_task().await;
        self.list_tasks().await;
        self.claim_and_complete_task().await;
        self.report.section("tasks");
    }

    /// CreateTask: absurd subjects, descriptions, dependencies and files; then
    /// a task blocked by the first one created, as many times as allowed.
    async fn create_task(&mut self) {
        let mut creates = vec![
            pb::CreateTaskRequest::default(),
            task(&|t| t.blocked_by = vec![String::new()]),
            task(&|t| t.blocked_by = vec!["nope".into()]),
            task(&|t| t.blocked_by = vec!["x".into(); limits::LIST_ITEMS + 1]),
            task(&|t| t.files = vec!["a".into(); limits::LIST_ITEMS + 1]),
            task(&|t| t.files = vec!["src/**".into(); limits::LIST_ITEMS]),
            task(&|t| t.description = "d".repeat(5 << 20)),
        ];
        for subject in weird()
            .into_iter()
            .chain(around(limits::SUBJECT))
            .chain(around(limits::REASON))
        {
            creates.push(task(&|t| t.subject = subject.clone()));
        }
        for description in weird()
            .into_iter()
            .chain(around(limits::TEXT))
            .chain(around(limits::PLAN))
        {
            creates.push(task(&|t| t.description = description.clone()));
        }
        for id in weird().into_iter().chain(around(limits::ID)) {
            creates.push(task(&|t| t.blocked_by = vec![id.clone()]));
        }
        for glob in globs() {
            creates.push(task(&|t| t.files = vec![glob.clone()]));
        }
        for request in creates {
            if let Some(created) = call!(self.report, "CreateTask", self.op, create_task, request) {
                self.tasks.push(created.task_id);
            }
        }
        if let Some(first) = self.tasks.first().cloned() {
            let blocked = task(&|t| t.blocked_by = vec![first.clone(); limits::LIST_ITEMS]);
            if let Some(created) = call!(self.report, "CreateTask", self.op, create_task, blocked) {
                self.tasks.push(created.task_id);
            }
        }
    }

    /// ListTasks of both services, by absurd filters, page sizes and tokens.
    async fn list_tasks(&mut self) {
        let mut lists: Vec<pb::ListTasksRequest> = ENUMS
            .iter()
            .map(|&status| pb::ListTasksRequest {
                status,
                ..Default::default()
            })
            .collect();
        lists.extend(PAGE_SIZES.iter().map(|&page_size| pb::ListTasksRequest {
            status: *self.rng.pick(ENUMS),
            page_size,
            ..Default::default()
        }));
        for request in lists {
            call!(
                self.report,
                "Operator.ListTasks",
                self.op,
                list_tasks,
                request.clone()
            );
            call!(
                self.report,
                "Lead.ListTasks",
                self.alice.api,
                list_tasks,
                request
            );
        }
        for page_token in page_tokens() {
            let request = pb::ListTasksRequest {
                page_token,
                ..Default::default()
            };
            call!(
                self.report,
                "Operator.ListTasks",
                self.op,
                list_tasks,
                request.clone()
            );
            call!(
                self.report,
                "Lead.ListTasks",
                self.alice.api,
                list_tasks,
                request
            );
        }
    }

    /// ClaimTask of absurd ids and of the tasks created; a plan and absurd
    /// summaries for two claimed tasks; CompleteTask of absurd ids.
    async fn claim_and_complete_task(&mut self) {
        let mut claims: Vec<String> = weird().into_iter().chain(around(limits::ID)).collect();
        claims.extend(self.tasks.iter().take(10).cloned());
        claims.push(String::new());
        let mut claimed = Vec::new();
        for task_id in claims {
            if let Some(task) = call!(
                self.report,
                "ClaimTask",
                self.alice.api,
                claim_task,
                pb::ClaimTaskRequest { task_id }
            ) {
                claimed.push(task.task_id);
            }
        }
        // A plan for a claimed task, with absurd plans around it.
        for task_id in claimed.iter().take(2) {
            let request = plan(&|p| p.task_id = task_id.clone());
            call!(
                self.report,
                "SubmitPlan",
                self.alice.api,
                submit_plan,
                request
            );
        }
        let summaries: Vec<String> = weird()
            .into_iter()
            .chain(around(limits::TEXT))
            .chain(std::iter::once("s".repeat(5 << 20)))
            .collect();
        for task_id in claimed.iter().take(2) {
            for summary in &summaries {
                let request = pb::CompleteTaskRequest {
                    task_id: task_id.clone(),
                    summary: summary.clone(),
                    ..Default::default()
                };
                call!(
                    self.report,
                    "CompleteTask",
                    self.alice.api,
                    complete_task,
                    request
                );
            }
        }
        for (i, task_id) in weird().into_iter().chain(around(limits::ID)).enumerate() {
            let request = pb::CompleteTaskRequest {
                task_id,
                summary: summaries[i % summaries.len()].clone(),
                ..Default::default()
            };
            call!(
                self.report,
                "CompleteTask",
                self.alice.api,
                complete_task,
                request
            );
        }
    }
}
