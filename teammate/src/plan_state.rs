//! Where a teammate stands with its plans: the task it claimed, the last plan
//! it submitted and whether that is under review, and the [`Gate`] the
//! decision on it set. Pure: no async, no I/O, no RPC, no clock, no log; the
//! session makes the calls and steps this state (through
//! [`crate::protocol_state::ProtocolState`]) with their outcome.
//!
//! ```text
//! prepare --SubmitPlan--> submitted --decide--> rejected: Plan; the next plan supersedes it
//!                                           \-> approved: Unlocked(Writer) --completed(its task)--> Plan
//! ```

use mesh_core::{
    grant::{Grant, Mode},
    plan::Plan,
    protocol::Decision,
};

use crate::{
    command::CommandLimits,
    driver::Observation,
    gate::{Gate, Writer},
    tools::Workspace,
};

/// A teammate's plan, and the grant it earned.
#[derive(Debug)]
pub(crate) struct PlanState {
    /// Plan mode, or the writer a grant created.
    gate: Gate,
    /// The last plan submitted: its id and files.
    last_plan: Option<LastPlan>,
    /// The id of the plan under review, while its decision has not arrived.
    under_review: Option<String>,
    /// The task this teammate claimed and has not completed: its plans
    /// are for it.
    claimed: Option<String>,
}

/// The last plan submitted.
#[derive(Debug)]
struct LastPlan {
    /// Its request id (the next plan supersedes it, unless it was approved).
    request_id: String,
    /// The files it named.
    files: Vec<String>,
    /// The task it was for, if any.
    task_id: String,
    /// Whether it was approved (the gate holds its grant).
    approved: bool,
}

/// The lead approved a plan with a grant that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the lead sent a bad grant: {0}")]
pub(crate) struct BadGrant(String);

impl PlanState {
    /// Plan mode, no plan, no task.
    pub(crate) fn new() -> Self {
        Self {
            gate: Gate::Plan,
            last_plan: None,
            under_review: None,
            claimed: None,
        }
    }

    /// Plan mode, or the writer the grant created.
    pub(crate) fn gate(&self) -> &Gate {
        &self.gate
    }

    /// Whether a plan is under review (its decision has not arrived).
    pub(crate) fn is_under_review(&self) -> bool {
        self.under_review.is_some()
    }

    /// Whether `request_id` is the plan under review.
    pub(crate) fn reviews(&self, request_id: &str) -> bool {
        self.under_review.as_deref() == Some(request_id)
    }

    /// Readies `plan` for submission: a plan that names no task is for the
    /// one claimed. The id of the plan it supersedes (the last one, unless it
    /// was approved; empty for none), or why `submit_plan` is not available.
    pub(crate) fn prepare(&self, plan: &mut Plan) -> Result<String, &'static str> {
        if plan.task_id.is_empty() {
            if let Some(task_id) = &self.claimed {
                plan.task_id = task_id.clone();
            }
        }
        if let Gate::Unlocked(_) = self.gate {
            // Not on offer once a plan is approved: a driver that asks
            // anyway meets the gate like any other call.
            return Err("submit_plan is not available: your plan is already approved; carry it out now with write_file, edit_file or run_command");
        }
        if self.under_review.is_some() {
            return Err("submit_plan is not available: your plan is still under review; wait for the decision");
        }
        Ok(self
            .last_plan
            .as_ref()
            .filter(|last| !last.approved)
            .map(|last| last.request_id.clone())
            .unwrap_or_default())
    }

    /// The lead took `plan`, as `request_id`, for review.
    pub(crate) fn submitted(&mut self, request_id: String, plan: Plan) {
        self.under_review = Some(request_id.clone());
        self.last_plan = Some(LastPlan {
            request_id,
            files: plan.files,
            task_id: plan.task_id,
            approved: false,
        });
    }

    /// Applies the decision on the plan under review: a grant unlocks the
    /// gated tools, in a [`Writer`] over `workspace`.
    pub(crate) fn decide(
        &mut self,
        response: Decision,
        workspace: &Workspace,
        commands: &CommandLimits,
    ) -> Result<Observation, BadGrant> {
        self.under_review = None;
        let files = self
            .last_plan
            .as_ref()
            .map(|last| last.files.clone())
            .unwrap_or_default();
        if !response.approve {
            return Ok(Observation::PlanRejected {
                feedback: response.feedback,
            });
        }
        let grant = response
            .grant
            .unwrap_or_else(|| Grant::of_plan(Mode::AcceptEdits));
        let writer = Writer::unlock(&grant, &files, workspace, commands)
            .map_err(|e| BadGrant(e.to_string()))?;
        self.gate = writer.map_or(Gate::Plan, Gate::Unlocked);
        if let Some(last) = &mut self.last_plan {
            last.approved = true;
        }
        let write_paths = if grant.write_paths.is_empty() {
            files
        } else {
            grant.write_paths
        };
        Ok(Observation::PlanApproved {
            mode: grant.mode,
            write_paths,
        })
    }

    /// The teammate claimed `task_id`: its plans are for it now.
    pub(crate) fn claim(&mut self, task_id: String) {
        self.claimed = Some(task_id);
    }

    /// An approved amendment widened the grant: the writer now writes
    /// where `grant` says (nothing changes in plan mode).
    pub(crate) fn widen(
        &mut self,
        grant: Grant,
        workspace: &Workspace,
        commands: &CommandLimits,
    ) -> Result<Vec<String>, BadGrant> {
        if matches!(self.gate, Gate::Plan) {
            return Err(BadGrant("an amendment was approved in plan mode".into()));
        }
        let writer = Writer::unlock(&grant, &grant.write_paths, workspace, commands)
            .map_err(|e| BadGrant(e.to_string()))?;
        self.gate = writer.map_or(Gate::Plan, Gate::Unlocked);
        if let Some(last) = &mut self.last_plan {
            last.files = grant.write_paths.clone();
        }
        Ok(grant.write_paths)
    }

    /// The claimed `task_id` is reviewed by its result alone (`lead serve
    /// --repo`): the gate opens for edits (inside `files`, or anywhere in
    /// the workspace where the task names none) without a plan, as the lead
    /// did for the member; the grant ends with the task. What lands is
    /// still checked by the lead.
    pub(crate) fn unlock_for_result(
        &mut self,
        task_id: &str,
        files: &[String],
        workspace: &Workspace,
        commands: &CommandLimits,
    ) -> Result<(), BadGrant> {
        let write_paths = if files.is_empty() {
            vec!["**".to_owned()]
        } else {
            files.to_vec()
        };
        let grant = Grant {
            mode: Mode::AcceptEdits,
            write_paths: write_paths.clone(),
            expires_at_unix_ms: None,
        };
        let writer = Writer::unlock(&grant, &write_paths, workspace, commands)
            .map_err(|e| BadGrant(e.to_string()))?;
        self.gate = writer.map_or(Gate::Plan, Gate::Unlocked);
        self.last_plan = Some(LastPlan {
            request_id: String::new(),
            files: write_paths,
            task_id: task_id.to_owned(),
            approved: true,
        });
        Ok(())
    }

    /// The teammate completed `task_id`: it is no longer claimed, and the
    /// grant for it ends ([`PlanState::end_grant_of`]). `true` if it did.
    pub(crate) fn completed(&mut self, task_id: &str) -> bool {
        if self.claimed.as_deref() == Some(task_id) {
            self.claimed = None;
        }
        self.end_grant_of(task_id)
    }

    /// The teammate completed `task_id`: if the grant it works under came
    /// from a plan for that task, the grant ends with it (as it does on the
    /// lead) and the gate is back in plan mode. `true` if it did.
    fn end_grant_of(&mut self, task_id: &str) -> bool {
        let ends = matches!(self.gate, Gate::Unlocked(_))
            && self
                .last_plan
                .as_ref()
                .is_some_and(|last| last.approved && last.task_id == task_id);
        if ends {
            self.gate = Gate::Plan;
            self.last_plan = None;
        }
        ends
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A workspace for the writers grants unlock (kept while its directory is).
    pub(crate) fn workspace() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().expect("tempdir");
        let workspace = Workspace::open(dir.path()).expect("workspace");
        (dir, workspace)
    }

    /// A plan for `files`.
    pub(crate) fn plan(files: &[&str]) -> Plan {
        Plan {
            summary: "a plan".into(),
            files: files.iter().map(|f| (*f).to_owned()).collect(),
            ..Default::default()
        }
    }

    /// The rejection of a plan, with feedback "smaller".
    pub(crate) fn rejection() -> Decision {
        Decision {
            approve: false,
            feedback: "smaller".into(),
            grant: None,
        }
    }

    /// The approval of a plan, with a grant of `mode` for `paths` if any
    /// (as the lead sent it: not checked here).
    pub(crate) fn approval(grant: Option<(Mode, &[&str])>) -> Decision {
        Decision {
            approve: true,
            feedback: String::new(),
            grant: grant.map(|(mode, paths)| Grant {
                mode,
                write_paths: paths.iter().map(|p| (*p).to_owned()).collect(),
                expires_at_unix_ms: None,
            }),
        }
    }

    /// The mode of the writer the gate holds, if any.
    pub(crate) fn unlocked(gate: &Gate) -> Option<Mode> {
        match gate {
            Gate::Unlocked(writer) => Some(writer.mode()),
            Gate::Plan => None,
        }
    }

    /// Submits `plan` as `request_id`; the id it supersedes.
    fn submit(state: &mut PlanState, request_id: &str, mut plan: Plan) -> String {
        let supersedes = state.prepare(&mut plan).expect("submittable");
        state.submitted(request_id.to_owned(), plan);
        supersedes
    }

    #[test]
    fn a_rejected_plan_is_superseded_by_the_next_and_an_approval_unlocks_the_gate() {
        let (_dir, ws) = workspace();
        let limits = CommandLimits::default();
        let mut state = PlanState::new();
        assert_eq!(submit(&mut state, "p1", plan(&["src/a.rs"])), "");
        assert!(state.reviews("p1") && !state.reviews("p2"));
        assert_eq!(
            state.prepare(&mut plan(&[])),
            Err("submit_plan is not available: your plan is still under review; wait for the decision")
        );
        let rejected = state.decide(rejection(), &ws, &limits);
        assert_eq!(
            rejected,
            Ok(Observation::PlanRejected {
                feedback: "smaller".into()
            })
        );
        assert!(!state.is_under_review());
        assert_eq!(unlocked(state.gate()), None);

        assert_eq!(
            submit(&mut state, "p2", plan(&["src/a.rs"])),
            "p1",
            "supersedes p1"
        );
        let approved = state.decide(
            approval(Some((Mode::AcceptEdits, &["src/**"]))),
            &ws,
            &limits,
        );
        assert_eq!(
            approved,
            Ok(Observation::PlanApproved {
                mode: Mode::AcceptEdits,
                write_paths: vec!["src/**".into()],
            })
        );
        assert_eq!(unlocked(state.gate()), Some(Mode::AcceptEdits));
        assert_eq!(
            state.prepare(&mut plan(&[])),
            Err("submit_plan is not available: your plan is already approved; carry it out now with write_file, edit_file or run_command")
        );
    }

    #[test]
    fn an_approval_without_a_grant_accepts_edits_to_the_plan_files() {
        let (_dir, ws) = workspace();
        let mut state = PlanState::new();
        submit(&mut state, "p1", plan(&["notes.md"]));
        let approved = state.decide(approval(None), &ws, &CommandLimits::default());
        assert_eq!(
            approved,
            Ok(Observation::PlanApproved {
                mode: Mode::AcceptEdits,
                write_paths: vec!["notes.md".into()],
            })
        );
        assert_eq!(unlocked(state.gate()), Some(Mode::AcceptEdits));
    }

    #[test]
    fn a_plan_mode_grant_approves_but_unlocks_nothing_and_is_not_superseded() {
        let (_dir, ws) = workspace();
        let mut state = PlanState::new();
        submit(&mut state, "p1", plan(&["a.txt"]));
        let approved = state.decide(
            approval(Some((Mode::Plan, &[]))),
            &ws,
            &CommandLimits::default(),
        );
        assert!(matches!(
            approved,
            Ok(Observation::PlanApproved {
                mode: Mode::Plan,
                ..
            })
        ));
        assert_eq!(unlocked(state.gate()), None);
        assert_eq!(submit(&mut state, "p2", plan(&["a.txt"])), "");
    }

    #[test]
    fn a_bad_grant_is_an_error_and_unlocks_nothing() {
        let (_dir, ws) = workspace();
        let mut state = PlanState::new();
        submit(&mut state, "p1", plan(&["a.txt"]));
        let bad = state.decide(
            approval(Some((Mode::AcceptEdits, &["../out"]))),
            &ws,
            &CommandLimits::default(),
        );
        let error = bad.expect_err("a path out of the workspace");
        assert!(
            error.to_string().starts_with("the lead sent a bad grant: "),
            "{error}"
        );
        assert_eq!(unlocked(state.gate()), None);
    }

    #[test]
    fn plans_are_for_the_claimed_task_and_its_completion_ends_the_grant() {
        let (_dir, ws) = workspace();
        let mut state = PlanState::new();
        state.claim("t1".into());
        let mut own = plan(&["a.txt"]);
        own.task_id = "t9".into();
        state.prepare(&mut own).expect("submittable");
        assert_eq!(own.task_id, "t9", "a plan that names its task keeps it");
        let mut planned = plan(&["a.txt"]);
        state.prepare(&mut planned).expect("submittable");
        assert_eq!(planned.task_id, "t1");
        state.submitted("p1".into(), planned);
        state
            .decide(
                approval(Some((Mode::Bypass, &[]))),
                &ws,
                &CommandLimits::default(),
            )
            .expect("approved");
        assert_eq!(unlocked(state.gate()), Some(Mode::Bypass));

        assert!(!state.completed("t2"), "another task leaves the grant");
        assert_eq!(state.claimed.as_deref(), Some("t1"));
        assert!(state.completed("t1"));
        assert_eq!(unlocked(state.gate()), None, "back in plan mode");
        assert_eq!(state.claimed, None);
        assert!(!state.completed("t1"), "the grant ends once");
        let mut next = plan(&["b.txt"]);
        assert_eq!(
            state.prepare(&mut next),
            Ok(String::new()),
            "supersedes nothing"
        );
        assert_eq!(next.task_id, "", "and is for no task");
    }

    #[test]
    fn end_grant_of_needs_an_approved_plan_for_that_task() {
        let (_dir, ws) = workspace();
        let mut state = PlanState::new();
        assert!(!state.end_grant_of("t1"), "nothing to end in plan mode");
        state.claim("t1".into());
        submit(&mut state, "p1", plan(&["a.txt"]));
        assert!(!state.end_grant_of("t1"), "under review, not approved");
        state
            .decide(approval(None), &ws, &CommandLimits::default())
            .expect("approved");
        state.claim("t2".into());
        assert!(!state.end_grant_of("t2"), "the plan was for t1");
        assert!(state.end_grant_of("t1"));
    }
}
