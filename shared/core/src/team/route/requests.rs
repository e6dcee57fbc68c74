//! The request protocol's ops applied: shutdowns, plans, permissions,
//! results and amendments, their reviews, and reading requests.

use super::member_of;
use crate::{
    access::{Admitted, Role},
    effect::Effect,
    names::RequestId,
    op::{
        Decide, Doors, GetRequest, Landed, ListRequests, RequestAmendment, RequestPermission,
        RequestShutdown, RespondShutdown, ReviewAmendment, ReviewPermission, ReviewPlan,
        ReviewResult, StageVerdict, SubmitPlan, SubmitResult,
    },
    protocol::{Decision, Request},
    refusal::CoreError,
    team::{Listed, Op, Team},
};

impl Op for RequestShutdown {
    type Reply = RequestId;
    const DOORS: Doors = Doors::Operator(Role::Admin);

    fn apply(
        self,
        team: &mut Team,
        now: i64,
        _: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<RequestId, CoreError> {
        team.request_shutdown_op(self, now, effects)
    }
}

impl Op for RespondShutdown {
    type Reply = ();
    const DOORS: Doors = Doors::Member("RespondShutdown");

    fn apply(
        self,
        team: &mut Team,
        now: i64,
        caller: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<(), CoreError> {
        team.respond_shutdown_op(
            member_of(caller)?,
            &self.request_id,
            self.approve,
            self.reason,
            now,
            effects,
        )
    }
}

impl Op for SubmitPlan {
    type Reply = RequestId;
    const DOORS: Doors = Doors::Member("SubmitPlan");

    fn apply(
        self,
        team: &mut Team,
        now: i64,
        caller: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<RequestId, CoreError> {
        team.submit_plan_op(
            member_of(caller)?,
            self.request_id,
            self.plan,
            self.supersedes,
            now,
            effects,
        )
    }
}

impl Op for ReviewPlan {
    type Reply = Request;
    const DOORS: Doors = Doors::Operator(Role::Reviewer);

    fn apply(
        self,
        team: &mut Team,
        now: i64,
        caller: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<Request, CoreError> {
        let by = (self.by.as_str(), caller.person());
        team.review_plan_op(self.request_id, self.verdict, by, now, effects)
    }
}

impl Op for StageVerdict {
    type Reply = ();
    const DOORS: Doors = Doors::Lead;

    fn apply(
        self,
        team: &mut Team,
        now: i64,
        _: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<(), CoreError> {
        team.stage_verdict(&self.request_id, self.stage, self.verdict, now, effects);
        Ok(())
    }
}

impl Op for RequestPermission {
    type Reply = RequestId;
    const DOORS: Doors = Doors::Member("RequestPermission");

    fn apply(
        self,
        team: &mut Team,
        now: i64,
        caller: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<RequestId, CoreError> {
        team.request_permission_op(
            member_of(caller)?,
            self.request_id,
            self.tool,
            self.args_json,
            self.path,
            now,
            effects,
        )
    }
}

impl Op for ReviewPermission {
    type Reply = Request;
    const DOORS: Doors = Doors::Operator(Role::Reviewer);

    fn apply(
        self,
        team: &mut Team,
        now: i64,
        caller: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<Request, CoreError> {
        let ReviewPermission {
            request_id,
            approve,
            feedback,
            by,
        } = self;
        let was_pending = team
            .requests
            .get(&request_id)
            .is_some_and(|r| r.status == crate::protocol::Status::Pending);
        if approve && team.held_for_owners(&request_id, (&by, caller.person()), now, effects) {
            return team.held_reply(&request_id);
        }
        let decision = Decision {
            approve,
            feedback: feedback.clone(),
            grant: None,
        };
        let decided = team.decide_permission(&request_id, decision, now, effects)?;
        if was_pending {
            let verdict = if approve { "approve" } else { "reject" };
            let by = (by.as_str(), caller.person());
            team.record_signed(&request_id, by, verdict, feedback, now, effects);
        }
        Ok(team.requests.get(&request_id).cloned().unwrap_or(decided))
    }
}

impl Op for ListRequests {
    type Reply = Listed<Request>;
    const DOORS: Doors = Doors::Operator(Role::Viewer);

    fn apply(
        self,
        team: &mut Team,
        _: i64,
        _: &Admitted,
        _: &mut Vec<Effect>,
    ) -> Result<Listed<Request>, CoreError> {
        let mut listed = team.list_requests(self.status, self.kind, self.page);
        for (_, request) in &mut listed.entries {
            team.show_owed(request);
        }
        Ok(listed)
    }
}

impl Op for GetRequest {
    type Reply = Request;
    const DOORS: Doors = Doors::Operator(Role::Viewer);

    fn apply(
        self,
        team: &mut Team,
        _: i64,
        _: &Admitted,
        _: &mut Vec<Effect>,
    ) -> Result<Request, CoreError> {
        let request_id = self.request_id;
        let mut request =
            team.requests.get(&request_id).cloned().ok_or_else(|| {
                CoreError::NotFound(format!("request_id: no request {request_id}"))
            })?;
        team.show_owed(&mut request);
        Ok(request)
    }
}

impl Op for SubmitResult {
    type Reply = RequestId;
    const DOORS: Doors = Doors::Member("SubmitResult");

    fn apply(
        self,
        team: &mut Team,
        now: i64,
        caller: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<RequestId, CoreError> {
        team.submit_result_op(
            member_of(caller)?,
            self.request_id,
            *self.result,
            self.supersedes,
            now,
            effects,
        )
    }
}

impl Op for ReviewResult {
    type Reply = Request;
    const DOORS: Doors = Doors::Operator(Role::Reviewer);

    fn apply(
        self,
        team: &mut Team,
        now: i64,
        caller: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<Request, CoreError> {
        team.review_result_op(
            &self.request_id,
            self.approve,
            self.feedback,
            (&self.by, caller.person()),
            now,
            effects,
        )
    }
}

impl Op for RequestAmendment {
    type Reply = RequestId;
    const DOORS: Doors = Doors::Member("RequestAmendment");

    fn apply(
        self,
        team: &mut Team,
        now: i64,
        caller: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<RequestId, CoreError> {
        team.request_amendment_op(
            member_of(caller)?,
            self.request_id,
            self.files,
            self.steps,
            self.why,
            now,
            effects,
        )
    }
}

impl Op for ReviewAmendment {
    type Reply = Request;
    const DOORS: Doors = Doors::Operator(Role::Reviewer);

    fn apply(
        self,
        team: &mut Team,
        now: i64,
        caller: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<Request, CoreError> {
        team.decide_amendment(
            &self.request_id,
            self.approve,
            self.feedback,
            (&self.by, caller.person()),
            now,
            effects,
        )
    }
}

impl Op for Landed {
    type Reply = ();
    const DOORS: Doors = Doors::Lead;

    fn apply(
        self,
        team: &mut Team,
        now: i64,
        _: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<(), CoreError> {
        team.landed_op(&self.request_id, self.landing, now, effects)
    }
}

impl Op for Decide {
    type Reply = Request;
    const DOORS: Doors = Doors::Operator(Role::Reviewer);

    /// The review the request's kind says this is, applied.
    fn apply(
        self,
        team: &mut Team,
        now: i64,
        caller: &Admitted,
        effects: &mut Vec<Effect>,
    ) -> Result<Request, CoreError> {
        team.review_of(self)?.apply(team, now, caller, effects)
    }
}
