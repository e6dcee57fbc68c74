//! The shared task list as a teammate uses it: `list_tasks`, `claim_task` and
//! `complete_task` for the driver, each reported like a tool call, and a task
//! described for the driver to read. Claiming and completing step the
//! protocol state: the plans that follow a claim are for the task, and its
//! completion ends the grant its plan earned.

use shared::pb;

use crate::{
    catalog,
    client::{fatal_status, Lead},
    driver::{ClaimedTask, Observation, TaskCall},
    error::SessionError,
    protocol_state::ProtocolState,
};

/// Makes a call on the shared task list and reports it; a refusal by the
/// lead (claimed, blocked, not the owner) is the call's error.
pub(crate) async fn call(
    lead: &Lead,
    state: &mut ProtocolState,
    call: TaskCall,
) -> Result<Observation, SessionError> {
    let (tool, args) = match &call {
        TaskCall::List => (catalog::LIST_TASKS, serde_json::json!({})),
        TaskCall::Claim(id) => (catalog::CLAIM_TASK, serde_json::json!({ "task_id": id })),
        TaskCall::Complete { task_id, summary } => (
            catalog::COMPLETE_TASK,
            serde_json::json!({ "task_id": task_id, "summary": crate::tools::truncate(summary, 120) }),
        ),
        TaskCall::Amend { files, why, .. } => (
            catalog::REQUEST_AMENDMENT,
            serde_json::json!({ "files": files, "why": crate::tools::truncate(why, 120) }),
        ),
    };
    let mut claimed = None;
    let answered = match call {
        TaskCall::List => lead
            .retry("ListTasks", |mut client| async move {
                client.list_tasks(pb::ListTasksRequest::default()).await
            })
            .await
            .map(|list| {
                if list.tasks.is_empty() {
                    return "the task list is empty".to_owned();
                }
                let mut text = list
                    .tasks
                    .iter()
                    .map(describe_task)
                    .collect::<Vec<_>>()
                    .join("\n");
                if !list.next_page_token.is_empty() {
                    text.push_str(&format!(
                        "\n(the first {} tasks; claim_task() with no id takes the oldest claimable one)",
                        list.tasks.len()
                    ));
                }
                text
            }),
        TaskCall::Claim(id) => {
            let request = pb::ClaimTaskRequest {
                task_id: id.unwrap_or_default(),
            };
            lead.retry("ClaimTask", |mut client| {
                let request = request.clone();
                async move { client.claim_task(request).await }
            })
            .await
            .map(|task| {
                state.claim(task.task_id.clone());
                let needs_plan = task.review != pb::TaskReview::Result as i32;
                claimed = Some(ClaimedTask {
                    task_id: task.task_id.clone(),
                    subject: task.subject.clone(),
                    description: task.description.clone(),
                    files: task.files.clone(),
                    needs_plan,
                });
                if needs_plan {
                    format!(
                        "claimed: {}\nYour next plan is for this task.",
                        describe_task(&task)
                    )
                } else {
                    format!(
                        "claimed: {}\nThis task is reviewed by its result alone: no plan; \
                         write in your workspace now, then call complete_task, which submits \
                         your change for review.",
                        describe_task(&task)
                    )
                }
            })
        }
        // The session asks for amendments itself (it waits for the answer).
        TaskCall::Amend { .. } => Err(SessionError::Setup(
            "internal: an amendment reached the task list".into(),
        )),
        TaskCall::Complete { task_id, summary } => {
            let request = complete(task_id, summary);
            lead.retry("CompleteTask", |mut client| {
                let request = request.clone();
                async move { client.complete_task(request).await }
            })
            .await
            .map(|task| {
                let mut text = format!("completed: {}", describe_task(&task));
                if state.completed(&task.task_id) {
                    tracing::info!(task_id = %task.task_id, "task completed; back in plan mode");
                    text.push_str(
                        "\nThe grant for this task's plan has ended: you are in plan mode \
                         again. Claim another task and submit a plan for it.",
                    );
                }
                text
            })
        }
    };
    let result = match answered {
        Ok(text) => Ok(text),
        Err(SessionError::Rpc { status, .. }) if !fatal_status(&status) => {
            Err(format!("the lead refused: {}", status.message()))
        }
        Err(e) => return Err(e),
    };
    let outcome = match &result {
        Ok(text) => crate::tools::truncate(text, 300).to_owned(),
        Err(text) => text.clone(),
    };
    lead.report(tool, &args.to_string(), result.is_ok(), &outcome)
        .await?;
    Ok(match (result, claimed) {
        (Ok(text), Some(task)) => Observation::TaskClaimed { task, text },
        (result, _) => Observation::ToolResult(result),
    })
}

/// One task in a line (and its description, if any, on the next).
pub(crate) fn describe_task(task: &pb::Task) -> String {
    let status = match pb::TaskStatus::try_from(task.status) {
        Ok(pb::TaskStatus::Pending) => "pending",
        Ok(pb::TaskStatus::Claimed) => "claimed",
        Ok(pb::TaskStatus::Completed) => "completed",
        _ => "unknown",
    };
    let mut line = format!("task {} [{status}] {}", task.task_id, task.subject);
    if !task.owner.is_empty() {
        line.push_str(&format!("; owner {}", task.owner));
    }
    if !task.blocked_by.is_empty() {
        line.push_str(&format!("; blocked by {}", task.blocked_by.join(", ")));
    }
    if !task.files.is_empty() {
        line.push_str(&format!("; files {}", task.files.join(", ")));
    }
    if !task.summary.is_empty() {
        line.push_str(&format!("; summary: {}", task.summary));
    }
    if !task.description.is_empty() {
        line.push_str(&format!("\n  {}", task.description));
    }
    line
}

/// `CompleteTask` of `task_id`, saying `summary` (this teammate hands in
/// no outputs).
fn complete(task_id: String, summary: String) -> pb::CompleteTaskRequest {
    pb::CompleteTaskRequest {
        task_id,
        summary,
        outputs: Vec::new(),
        reply: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_is_described_in_a_line_and_its_description_on_the_next() {
        let bare = pb::Task {
            task_id: "t1".into(),
            subject: "docs".into(),
            status: pb::TaskStatus::Pending as i32,
            ..Default::default()
        };
        assert_eq!(describe_task(&bare), "task t1 [pending] docs");
        let full = pb::Task {
            status: pb::TaskStatus::Completed as i32,
            owner: "alice".into(),
            blocked_by: vec!["t0".into(), "t9".into()],
            files: vec!["docs/**".into()],
            summary: "written".into(),
            description: "the user guide".into(),
            ..bare
        };
        assert_eq!(
            describe_task(&full),
            "task t1 [completed] docs; owner alice; blocked by t0, t9; files docs/**; \
             summary: written\n  the user guide"
        );
        let odd = pb::Task {
            status: 99,
            ..Default::default()
        };
        assert_eq!(describe_task(&odd), "task  [unknown] ");
    }
}
