//! Each op applied ([`Op`]): what it answers, where it may come in, and
//! the team's function that does it. [`Team::apply`](super::Team::apply)
//! calls the op's own `apply`; nothing routes an op by matching on it.
//! The ops of the request protocol (shutdowns, plans, permissions,
//! results, amendments, their reviews and reads) are in [`requests`].

mod requests;

use super::{Listed, Op, Team, TeamPage};
use crate::{
    access::{Admitted, Role},
    effect::{Effect, Notice},
    op::{
        Ack, ClaimTask, CompleteTask, CreateTask, Doors, Join, Joined, Leave, ListTasks, ListTeam,
        ReportIdle, ReportToolCall, ReportUsage, SetBudget, WithdrawTask,
    },
    refusal::CoreError,
    tasks::Task,
    usage::Standing,
};

impl Op for CreateTask {
    type Reply = Task;
    const DOORS: Doors = Doors::Operator(Role::Reviewer);

    fn apply(
        self,
        team: &mut Team,
        now: i64,
        _: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<Task, CoreError> {
        team.create_task_op(self.task_id, self.task, now, effects)
    }
}

impl Op for ClaimTask {
    type Reply = Task;
    const DOORS: Doors = Doors::Member("ClaimTask");

    fn apply(
        self,
        team: &mut Team,
        now: i64,
        caller: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<Task, CoreError> {
        team.claim_task_op(member_of(caller)?, self.task_id.as_deref(), now, effects)
    }
}

impl Op for CompleteTask {
    type Reply = Task;
    const DOORS: Doors = Doors::Member("CompleteTask");

    fn apply(
        self,
        team: &mut Team,
        now: i64,
        caller: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<Task, CoreError> {
        if team.rules.repo {
            return Err(CoreError::Conflict(
                "CompleteTask: with a team repository (lead serve --repo) a task is \
                 completed when its result lands; call SubmitResult"
                    .into(),
            ));
        }
        team.complete_task_op(
            member_of(caller)?,
            &self.task_id,
            self.completion,
            now,
            effects,
        )
    }
}

impl Op for WithdrawTask {
    type Reply = Task;
    const DOORS: Doors = Doors::Operator(Role::Reviewer);

    fn apply(
        self,
        team: &mut Team,
        now: i64,
        _: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<Task, CoreError> {
        team.withdraw_task_op(&self.task_id, &self.reason, &self.by, now, effects)
    }
}

impl Op for ListTasks {
    type Reply = Listed<Task>;
    const DOORS: Doors = Doors::Both("ListTasks", Role::Viewer);

    fn apply(
        self,
        team: &mut Team,
        _: i64,
        _: &Admitted,
        _: &mut Vec<Effect>,
    ) -> Result<Listed<Task>, CoreError> {
        Ok(team.list_tasks(self.status, self.page))
    }
}

impl Op for ReportUsage {
    type Reply = Standing;
    const DOORS: Doors = Doors::Member("ReportUsage");

    fn apply(
        self,
        team: &mut Team,
        _: i64,
        caller: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<Standing, CoreError> {
        Ok(team.report_usage_op(member_of(caller)?, &self.epoch, self.totals, effects))
    }
}

impl Op for SetBudget {
    type Reply = Standing;
    const DOORS: Doors = Doors::Operator(Role::Admin);

    fn apply(
        self,
        team: &mut Team,
        _: i64,
        _: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<Standing, CoreError> {
        team.set_budget_op(&self.name, self.token_budget, effects)
    }
}

impl Op for ReportIdle {
    type Reply = ();
    const DOORS: Doors = Doors::Member("ReportIdle");

    fn apply(
        self,
        team: &mut Team,
        _: i64,
        caller: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<(), CoreError> {
        team.report_idle_op(member_of(caller)?, self.reason, effects);
        Ok(())
    }
}

impl Op for Leave {
    type Reply = ();
    const DOORS: Doors = Doors::Member("Leave");

    fn apply(
        self,
        team: &mut Team,
        now: i64,
        caller: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<(), CoreError> {
        let why = if self.reason.is_empty() {
            "left the team".to_owned()
        } else {
            format!("left the team: {}", self.reason)
        };
        effects.extend(team.end_member(member_of(caller)?, &why, now));
        Ok(())
    }
}

impl Op for Join {
    type Reply = Joined;
    const DOORS: Doors = Doors::Join;

    fn apply(
        self,
        team: &mut Team,
        now: i64,
        _: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<Joined, CoreError> {
        let Join {
            name,
            role,
            token_budget,
            member_id,
            session_token,
            sandbox,
            decoding,
        } = self;
        let named = name.to_string();
        let joined = team.join_op(
            name,
            role,
            token_budget,
            member_id,
            session_token,
            now,
            effects,
        )?;
        team.members.set_sandbox(&named, sandbox);
        team.members.set_decoding(&named, decoding);
        Ok(joined)
    }
}

impl Op for Ack {
    type Reply = ();
    const DOORS: Doors = Doors::Member("Ack");

    fn apply(
        self,
        team: &mut Team,
        _: i64,
        caller: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<(), CoreError> {
        let name = member_of(caller)?;
        let seq = self.seq;
        let last_seq = team.members.get(name).map_or(0, |m| m.last_seq);
        if seq > last_seq {
            return Err(CoreError::OutOfRange(format!(
                "seq: {seq} is past the newest envelope ({last_seq}) of {name:?}"
            )));
        }
        effects.push(Effect::Ack {
            name: name.to_owned(),
            seq,
        });
        Ok(())
    }
}

impl Op for ReportToolCall {
    type Reply = ();
    const DOORS: Doors = Doors::Member("ReportToolCall");

    fn apply(
        self,
        team: &mut Team,
        _: i64,
        caller: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<(), CoreError> {
        let name = member_of(caller)?;
        effects.extend(team.show_work(name));
        effects.push(Effect::Notify(Notice::ToolCall {
            member: name.to_owned(),
            tool: self.tool,
            args_json: self.args_json,
            allowed: self.allowed,
            outcome: self.outcome,
        }));
        Ok(())
    }
}

impl Op for ListTeam {
    type Reply = TeamPage;
    const DOORS: Doors = Doors::Operator(Role::Viewer);

    fn apply(
        self,
        team: &mut Team,
        _: i64,
        _: &Admitted,
        _: &mut Vec<Effect>,
    ) -> Result<TeamPage, CoreError> {
        Ok(team.list_team(self.page))
    }
}

/// The member an op of a member's came from: its door admits members alone,
/// so this refuses only an op applied past its door.
pub(super) fn member_of(caller: &Admitted) -> Result<&str, CoreError> {
    caller
        .member()
        .ok_or_else(|| CoreError::Conflict("an op of a member's, with no member".into()))
}
