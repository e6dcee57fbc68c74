//! `lead tasks` (the shared task list) and `lead task add`.

use clap::Args;
use shared::pb;

use super::{CliError, Operator, Target};
use crate::render;

/// `lead tasks`: the shared task list, oldest first, every page.
pub async fn tasks(client: &mut Operator, json: bool) -> Result<String, CliError> {
    let tasks = all_tasks(client).await?;
    if json {
        return Ok(render::json_text(&serde_json::Value::Array(
            tasks.iter().map(render::task_json).collect(),
        )) + "\n");
    }
    Ok(table(&tasks))
}

/// Every task, oldest first.
pub(super) async fn all_tasks(client: &mut Operator) -> Result<Vec<pb::Task>, CliError> {
    let mut tasks = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = client
            .list_tasks(pb::ListTasksRequest {
                page_token: page_token.clone(),
                ..Default::default()
            })
            .await?
            .into_inner();
        tasks.extend(page.tasks);
        if page.next_page_token.is_empty() || page.next_page_token == page_token {
            break;
        }
        page_token = page.next_page_token;
    }
    Ok(tasks)
}

/// The tasks as a table.
fn table(tasks: &[pb::Task]) -> String {
    // Who handed a task in from outside (A2A), once any task came so.
    let from = |t: &pb::Task| t.origin.as_ref().map_or(String::new(), |o| o.by.clone());
    let handed_in = tasks.iter().any(|t| !from(t).is_empty());
    let mut header: Vec<String> = ["TASK ID", "STATUS", "OWNER", "SUBJECT", "BLOCKED BY"]
        .map(String::from)
        .to_vec();
    if handed_in {
        header.push("FROM".into());
    }
    let mut rows = vec![header];
    rows.extend(tasks.iter().map(|t| {
        let mut row = vec![
            t.task_id.clone(),
            render::task_status(t.status).into(),
            t.owner.clone(),
            t.subject.clone(),
            t.blocked_by.join(","),
        ];
        if handed_in {
            row.push(from(t));
        }
        row
    }));
    render::table(&rows)
}

/// `lead task add`'s flags.
#[derive(Debug, Args)]
pub struct NewTask {
    /// What the task is, in a line.
    subject: String,
    /// More detail.
    #[arg(long, default_value = "")]
    description: String,
    /// A task that must be completed first (repeatable).
    #[arg(long = "blocked-by")]
    blocked_by: Vec<String>,
    /// A glob the task is expected to touch (repeatable).
    #[arg(long)]
    files: Vec<String>,
    /// What is reviewed (with lead serve --repo): plan, result or both
    /// (default: the lead's --review).
    #[arg(long, value_parser = ["plan", "result", "both"])]
    review: Option<String>,
    // The lead.
    #[command(flatten)]
    pub target: Target,
}

/// `lead task add`: prints the new task's id.
pub async fn add_task(client: &mut Operator, task: NewTask) -> Result<String, CliError> {
    let task = client.create_task(task.request()).await?.into_inner();
    Ok(format!("{}\n", task.task_id))
}

impl NewTask {
    /// `lead task add`'s request, from its flags.
    fn request(self) -> pb::CreateTaskRequest {
        let review = match self.review.as_deref() {
            None => pb::TaskReview::Unspecified,
            Some("plan") => pb::TaskReview::Plan,
            Some("result") => pb::TaskReview::Result,
            Some(_) => pb::TaskReview::Both,
        };
        pb::CreateTaskRequest {
            subject: self.subject,
            description: self.description,
            blocked_by: self.blocked_by,
            files: self.files,
            review: review as i32,
        }
    }
}
