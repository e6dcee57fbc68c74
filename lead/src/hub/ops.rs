//! The hub's ops: who calls ([`Claim`], admitted once, [`Hub::admit`]),
//! what each op answers and where it may come in ([`HubOp`], one type per
//! op, so no answer is checked when it comes back), and where it is
//! applied ([`Hub::apply`]: by the core, but a join, which passes the join
//! rate first, and [`SendText`], which is the hub's).

use mesh_core::{
    access::{self, Admitted, Call, Caller},
    names::RequestId,
    op::{
        Ack, ClaimTask, CompleteTask, CreateTask, Decide, Doors, GetRequest, Join, Joined, Landed,
        Leave, ListRequests, ListTasks, ListTeam, ReportIdle, ReportToolCall, ReportUsage,
        RequestAmendment, RequestPermission, RequestShutdown, RespondShutdown, ReviewAmendment,
        ReviewPermission, ReviewPlan, ReviewResult, Sent, SetBudget, StageVerdict, SubmitPlan,
        SubmitResult, WithdrawTask,
    },
    team::Op,
};

use super::Hub;
use crate::{error::HubError, store::token_hash};

/// Who the edge says calls: a caller the lead's own tokens name, a session
/// token only the team's members can place, or a caller the hub admitted
/// already.
#[derive(Debug)]
pub(crate) enum Claim {
    /// An operator, the join token, no token.
    Known(Caller),
    /// Some other token.
    Session(String),
    /// A token the edge turned away already (a person's token that has
    /// expired, say): why.
    Refused(access::Refused),
    /// A caller the hub admitted for work an edge does before the op (a
    /// result's git): it is not admitted again.
    Admitted(Admitted),
}

impl Claim {
    /// The lead's own operator (the unnamed token's holder, an admin), for
    /// what the lead does on its own (asking members to stop as it stops)
    /// and the reads it makes for a caller it admitted already.
    pub(crate) fn operator() -> Claim {
        Claim::Known(Caller::Operator(access::Person::operator()))
    }
}

/// An op the hub applies for an admitted caller: what it answers, where it
/// may come in, and how the hub applies it.
pub(crate) trait HubOp: Sized + Send + 'static {
    /// What it answers.
    type Reply: Send + 'static;
    /// Where it may come in.
    const DOORS: Doors;

    /// The shutdown request this op answers, which a member that agreed to
    /// it and is gone may answer again (see [`Hub::retired_answerer`]).
    fn answers_shutdown(&self) -> Option<&RequestId> {
        None
    }

    /// Applies it for `caller`.
    fn apply(self, hub: &mut Hub, caller: &Admitted) -> Result<Self::Reply, HubError>;
}

/// [`HubOp`] for ops the core applies as they are.
macro_rules! in_core {
    ($($op:ty),* $(,)?) => {
        $(impl HubOp for $op {
            type Reply = <$op as Op>::Reply;
            const DOORS: Doors = <$op as Op>::DOORS;

            fn apply(self, hub: &mut Hub, caller: &Admitted) -> Result<Self::Reply, HubError> {
                hub.in_core(caller, self)
            }
        })*
    };
}

in_core!(
    Ack,
    ClaimTask,
    CompleteTask,
    CreateTask,
    Decide,
    GetRequest,
    Landed,
    Leave,
    ListRequests,
    ListTasks,
    ListTeam,
    ReportIdle,
    ReportToolCall,
    ReportUsage,
    RequestAmendment,
    RequestPermission,
    RequestShutdown,
    ReviewAmendment,
    ReviewPermission,
    ReviewPlan,
    ReviewResult,
    SetBudget,
    StageVerdict,
    SubmitPlan,
    SubmitResult,
    WithdrawTask,
);

impl HubOp for Join {
    type Reply = Joined;
    const DOORS: Doors = <Join as Op>::DOORS;

    fn apply(self, hub: &mut Hub, caller: &Admitted) -> Result<Joined, HubError> {
        hub.join(caller, self)
    }
}

impl HubOp for RespondShutdown {
    type Reply = ();
    const DOORS: Doors = <RespondShutdown as Op>::DOORS;

    fn answers_shutdown(&self) -> Option<&RequestId> {
        Some(&self.request_id)
    }

    fn apply(self, hub: &mut Hub, caller: &Admitted) -> Result<(), HubError> {
        hub.in_core(caller, self)
    }
}

/// A member sends a text to one member, to `lead`, or to everyone (`*`):
/// the hub's own op (what an inbox holds, its byte budgets and the message
/// ids it remembers are the runtime's, not the core's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SendText {
    /// The recipient.
    pub(crate) to: String,
    /// The id the sender chose, which makes a retry harmless.
    pub(crate) message_id: Option<String>,
    /// The text.
    pub(crate) content: String,
}

impl HubOp for SendText {
    type Reply = Sent;
    const DOORS: Doors = Doors::Member("Send");

    fn apply(self, hub: &mut Hub, caller: &Admitted) -> Result<Sent, HubError> {
        let Some(from) = caller.member() else {
            return Err(HubError::Internal("a member's op with no member".into()));
        };
        hub.send_text(from, &self.to, self.message_id, self.content)
    }
}

impl Hub {
    /// Applies `op` for the caller `claim` names, come in at `door`: the
    /// caller first (admitted once, here), so that a stranger learns
    /// nothing from validation.
    pub(super) fn apply<O: HubOp>(
        &mut self,
        claim: Claim,
        door: Call<'static>,
        op: Result<O, HubError>,
    ) -> Result<O::Reply, HubError> {
        if !O::DOORS.open(door) {
            return Err(HubError::Internal(format!(
                "an op came in at {door:?}, not one of its doors"
            )));
        }
        let shutdown = op.as_ref().ok().and_then(HubOp::answers_shutdown);
        let caller = self.admit(claim, door, shutdown)?;
        op?.apply(self, &caller)
    }

    /// Applies `op` for the operator `claim` names, at the Operator door
    /// with the role the op needs.
    pub(super) fn operate<O: HubOp>(
        &mut self,
        claim: Claim,
        op: Result<O, HubError>,
    ) -> Result<O::Reply, HubError> {
        self.apply(claim, O::DOORS.operator(), op)
    }

    /// Who `claim` names, admitted if that caller may come in at `door`:
    /// the one admission a call passes. A session token is placed by the
    /// team's members; one no member holds is a stranger's, unless it
    /// answers `shutdown`, a settled shutdown request its retired holder
    /// answered (see [`Hub::retired_answerer`]).
    pub(super) fn admit(
        &self,
        claim: Claim,
        door: Call<'static>,
        shutdown: Option<&RequestId>,
    ) -> Result<Admitted, HubError> {
        let caller = match claim {
            Claim::Admitted(admitted) => return Ok(admitted),
            Claim::Refused(why) => return Err(why.into()),
            Claim::Known(caller) => caller,
            Claim::Session(token) => match self.team.members.by_token_hash(&token_hash(&token)) {
                Some(name) => Caller::Member(name.to_owned()),
                None => shutdown
                    .and_then(|id| self.retired_answerer(&token, id))
                    .map_or(Caller::Stranger, Caller::Member),
            },
        };
        Ok(access::admit(caller, door)?)
    }

    /// The member `claim` names, if it may call `Lead.<rpc>`.
    pub(super) fn admit_member(&self, claim: Claim, rpc: &'static str) -> Result<String, HubError> {
        let admitted = self.admit(claim, Call::Teammate(rpc), None)?;
        admitted
            .member()
            .map(str::to_owned)
            .ok_or_else(|| HubError::Internal("a member's call with no member".into()))
    }

    /// Who answers shutdown request `id` with session `token` no active
    /// member holds: a member that agreed is gone, but its retry of that
    /// answer (the reply to the first was lost) gets the first answer's
    /// result.
    pub(super) fn retired_answerer(&self, token: &str, id: &RequestId) -> Option<String> {
        let name = self.team.members.by_retired_hash(&token_hash(token))?;
        self.team
            .requests
            .get(id)
            .is_some_and(|r| r.status.is_terminal())
            .then(|| name.to_owned())
    }
}
