//! The hub's ops: who calls ([`Claim`], placed and admitted at the op's
//! door in one place, [`Hub::admit`]), where each op is applied
//! ([`Hub::apply`]: by the core, but a join, which passes the join rate
//! first, and `Send`, which is the hub's), and what it answers
//! ([`Answer`]).

use mesh_core::{
    access::{Call, Caller},
    names::RequestId,
    op::{Joined, Op, Sent},
    protocol::Request,
    tasks::Task,
    team::{Listed, TeamPage},
    usage::Standing,
};

use super::Hub;
use crate::{error::HubError, store::token_hash};

/// Who the edge says calls: a caller the lead's own tokens name, or a
/// session token only the team's members can place.
#[derive(Debug)]
pub(crate) enum Claim {
    /// The operator, the join token, no token.
    Known(Caller),
    /// Some other token.
    Session(String),
}

/// An answer of one type, taken out of an [`Answer`].
pub(crate) trait Answered: Sized {
    /// `answer` as `Self`; an internal error where the hub answered
    /// something else.
    fn from_answer(answer: Answer) -> Result<Self, HubError>;
}

/// [`Answer`], one variant per type an op answers with, each [`Answered`].
macro_rules! answers {
    ($($variant:ident($ty:ty)),* $(,)?) => {
        /// An op's answer, in the core's types.
        #[derive(Debug)]
        pub(crate) enum Answer {
            $($variant($ty)),*
        }

        $(impl Answered for $ty {
            fn from_answer(answer: Answer) -> Result<Self, HubError> {
                match answer {
                    Answer::$variant(value) => Ok(value),
                    #[allow(unreachable_patterns)]
                    other => Err(HubError::Internal(format!(
                        "the hub answered {other:?} where {} was due",
                        stringify!($variant)
                    ))),
                }
            }
        })*
    };
}

answers!(
    Task(Task),
    Usage(Standing),
    Opened(RequestId),
    Request(Request),
    Joined(Joined),
    Sent(Sent),
    Done(()),
    Tasks(Listed<Task>),
    Requests(Listed<Request>),
    Team(TeamPage),
);

impl Hub {
    /// Applies `op` for the caller `claim` names, if it may come in at
    /// `door`: the caller first, so that a stranger learns nothing from
    /// validation.
    pub(super) fn apply(
        &mut self,
        claim: Claim,
        door: Call<'static>,
        op: Result<Op, HubError>,
    ) -> Result<Answer, HubError> {
        let caller = self.admit(claim, door, op.as_ref().ok())?;
        let op = op?;
        if !op.doors().open(door) {
            return Err(HubError::Internal(format!(
                "an op came in at {door:?}, not one of its doors"
            )));
        }
        match op {
            op @ Op::Join { .. } => self.join(&caller, op),
            Op::Send {
                to,
                message_id,
                content,
            } => {
                let Caller::Member(from) = &caller else {
                    return Err(HubError::Internal("a member's op with no member".into()));
                };
                Ok(Answer::Sent(
                    self.send_text(from, &to, message_id, content)?,
                ))
            }
            op => self.apply_in_core(&caller, op),
        }
    }

    /// Who `claim` names, if that caller may come in at `door`. A session
    /// token is placed by the team's members; one no member holds is a stranger's,
    /// unless `op` answers a settled shutdown request its retired holder
    /// answered (see [`Hub::retired_answerer`]).
    pub(super) fn admit(
        &self,
        claim: Claim,
        door: Call<'static>,
        op: Option<&Op>,
    ) -> Result<Caller, HubError> {
        let caller = match claim {
            Claim::Known(caller) => caller,
            Claim::Session(token) => match self.team.members.by_token_hash(&token_hash(&token)) {
                Some(name) => Caller::Member(name.to_owned()),
                None => match op {
                    Some(Op::RespondShutdown { request_id, .. }) => self
                        .retired_answerer(&token, request_id)
                        .map_or(Caller::Stranger, Caller::Member),
                    _ => Caller::Stranger,
                },
            },
        };
        mesh_core::access::admit(&caller, door)?;
        Ok(caller)
    }

    /// The member `claim` names, if it may call `Lead.<rpc>`.
    pub(super) fn admit_member(&self, claim: Claim, rpc: &'static str) -> Result<String, HubError> {
        match self.admit(claim, Call::Teammate(rpc), None)? {
            Caller::Member(name) => Ok(name),
            _ => Err(HubError::Internal("a member's call with no member".into())),
        }
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
