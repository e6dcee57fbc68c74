//! What the demo's event stream showed of the story, and whether every
//! step of it happened.

use std::collections::HashSet;

use anyhow::bail;
use shared::pb::{self, event::Kind};

/// What the event stream showed of the story.
#[derive(Debug, Default)]
pub(super) struct Story {
    /// A write tried in plan mode was refused.
    pub(super) plan_mode_refused: bool,
    /// A write outside the grant was refused.
    pub(super) outside_grant_refused: bool,
    /// A plan was rejected by the policy for having no tests.
    pub(super) rejected_for_tests: bool,
    /// alice's amendment was granted by the policy.
    pub(super) amendment_granted: bool,
    /// bob did not find alice's unlanded file in his worktree.
    pub(super) isolated: bool,
    /// bob's plan was approved with word that alice holds src/lib.rs.
    pub(super) overlap_told: bool,
    /// alice's auth result was merged.
    pub(super) alice_landed: bool,
    /// bob's result was rejected for its conflict on src/lib.rs.
    pub(super) conflict_rejected: bool,
    /// bob's result landed after the conflict.
    pub(super) bob_landed_after_rebase: bool,
    /// The docs landed without any plan of their task.
    pub(super) docs_without_plan: bool,
    /// Tasks with a plan submitted, by id.
    pub(super) planned_tasks: HashSet<String>,
    /// Completed tasks.
    pub(super) completed: HashSet<String>,
    /// The docs task's id, once seen.
    pub(super) docs_task: Option<String>,
    /// Spawned processes that ended.
    pub(super) exited: HashSet<String>,
}

impl Story {
    /// Takes in one event.
    pub(super) fn see(&mut self, kind: &Kind) {
        match kind {
            Kind::ToolCall(call) if call.tool == "write_file" && !call.allowed => {
                if call.outcome.contains("plan mode") {
                    self.plan_mode_refused = true;
                } else if call.args_json.contains("db/schema.sql") {
                    self.outside_grant_refused = true;
                }
            }
            Kind::ToolCall(call)
                if call.member == "bob"
                    && call.tool == "read_file"
                    && call.args_json.contains("src/auth.rs")
                    && call.outcome.contains("No such file") =>
            {
                self.isolated = true;
            }
            Kind::Request(r) if r.r#type == pb::RequestType::PlanApproval as i32 => {
                if r.sender == "bob"
                    && r.status == pb::RequestStatus::Approved as i32
                    && r.feedback.contains("overlap: alice holds src/lib.rs")
                {
                    self.overlap_told = true;
                }
                if let Ok(payload) = serde_json::from_str::<serde_json::Value>(&r.payload_json) {
                    if let Some(task) = payload.pointer("/plan/task_id").and_then(|t| t.as_str()) {
                        self.planned_tasks.insert(task.to_owned());
                    }
                }
                if r.status == pb::RequestStatus::Rejected as i32 && r.feedback.contains("test") {
                    self.rejected_for_tests = true;
                }
            }
            Kind::Request(r)
                if r.r#type == pb::RequestType::Amendment as i32
                    && r.status == pb::RequestStatus::Approved as i32
                    && r.sender == "alice"
                    && r.feedback.contains("policy") =>
            {
                self.amendment_granted = true;
            }
            Kind::Request(r) if r.r#type == pb::RequestType::Result as i32 => {
                let approved = r.status == pb::RequestStatus::Approved as i32;
                let rejected = r.status == pb::RequestStatus::Rejected as i32;
                if r.sender == "alice" && approved && r.payload_json.contains("src/auth.rs") {
                    self.alice_landed = true;
                }
                if r.sender == "bob"
                    && rejected
                    && r.feedback.contains("conflicts")
                    && r.feedback.contains("src/lib.rs")
                {
                    self.conflict_rejected = true;
                }
                if r.sender == "bob" && approved && self.conflict_rejected {
                    self.bob_landed_after_rebase = true;
                }
            }
            Kind::Task(t) => {
                if t.review == pb::TaskReview::Result as i32 {
                    self.docs_task = Some(t.task_id.clone());
                }
                if t.status == pb::TaskStatus::Completed as i32 {
                    self.completed.insert(t.task_id.clone());
                    if self.docs_task.as_deref() == Some(t.task_id.as_str())
                        && !self.planned_tasks.contains(&t.task_id)
                    {
                        self.docs_without_plan = true;
                    }
                }
            }
            Kind::ChildExited(c) => {
                self.exited.insert(c.name.clone());
            }
            _ => {}
        }
    }

    /// Fails naming each step that did not happen.
    pub(super) fn check(&self) -> anyhow::Result<()> {
        let missing: Vec<&str> = [
            (self.plan_mode_refused, "a write in plan mode refused"),
            (self.rejected_for_tests, "a plan without tests rejected"),
            (
                self.outside_grant_refused,
                "a write outside the grant refused",
            ),
            (
                self.amendment_granted,
                "alice's amendment granted by the policy",
            ),
            (
                self.isolated,
                "bob's worktree without alice's unlanded file",
            ),
            (
                self.overlap_told,
                "bob told at plan time that alice holds src/lib.rs",
            ),
            (self.alice_landed, "alice's result merged"),
            (
                self.conflict_rejected,
                "bob's result rejected for its conflict on src/lib.rs",
            ),
            (self.bob_landed_after_rebase, "bob's rebased result merged"),
            (
                self.docs_without_plan,
                "the docs landed without a plan round",
            ),
        ]
        .into_iter()
        .filter(|(seen, _)| !seen)
        .map(|(_, what)| what)
        .collect();
        if !missing.is_empty() {
            bail!("the demo did not show: {}", missing.join("; "));
        }
        Ok(())
    }
}
