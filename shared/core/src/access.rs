//! Who may call what: the edge resolves the credential a call presents to a
//! [`Caller`] (the operator token, the join token, a member's session, a
//! token it does not know, or none), and [`admit`] decides whether that
//! caller may make the call, once: what it lets in is an [`Admitted`].
//! Missing or unknown credentials are unauthenticated; a credential the
//! lead knows, of the wrong kind, is denied. (Who may answer a request, once
//! admitted, is the tracker's rule: [`crate::protocol::Party`].)
//!
//! ```text
//!                 Join        a teammate's rpc     Operator     the lead's own
//!   none          UNAUTH      UNAUTH               UNAUTH       UNAUTH
//!   unknown       UNAUTH      UNAUTH               UNAUTH       DENIED
//!   join token    ok          DENIED               DENIED       DENIED
//!   operator      DENIED      DENIED               ok           DENIED
//!   a member      DENIED      ok                   DENIED       DENIED
//!   the lead      DENIED      DENIED               DENIED       ok
//! ```
//!
//! The lead itself (its timers, and the workers that run reviews off its
//! hub) is a caller no credential names: only the lead's code makes one.

/// Who calls, as the edge resolved the credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// No credential, or not shaped as `Bearer <token>`.
    Anonymous,
    /// A token the lead does not know (no member holds it).
    Stranger,
    /// The join token.
    Joiner,
    /// The operator token.
    Operator,
    /// The session token of the member of that name.
    Member(String),
    /// The lead itself: a worker's outcome coming back.
    Lead,
}

/// What is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call<'a> {
    /// `Lead.Join`.
    Join,
    /// Any other `Lead` rpc, a teammate's (named for messages; the lead's
    /// own resolution of a session may leave it empty).
    Teammate(&'a str),
    /// Any `Operator` rpc.
    Operator,
    /// What only the lead itself does (a review stage's verdict).
    Lead,
}

/// Why a caller is turned away.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// No credential, or one the lead does not know.
    #[error("{0}")]
    Unauthenticated(String),
    /// A credential the lead knows, of the wrong kind for the call.
    #[error("{0}")]
    PermissionDenied(String),
}

/// A caller let in: only [`admit`] makes one, so whoever is handed one (the
/// lead's hub, the team's ops) trusts it and does not ask again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted(Caller);

impl Admitted {
    /// Who it is.
    pub fn caller(&self) -> &Caller {
        &self.0
    }

    /// The member's name, where a member's session let it in.
    pub fn member(&self) -> Option<&str> {
        match &self.0 {
            Caller::Member(name) => Some(name),
            _ => None,
        }
    }
}

/// `caller`, let in if it may make `call`.
pub fn admit(caller: Caller, call: Call<'_>) -> Result<Admitted, Refused> {
    check(&caller, call).map(|()| Admitted(caller))
}

/// Whether `caller` may make `call`.
fn check(caller: &Caller, call: Call<'_>) -> Result<(), Refused> {
    use Refused::{PermissionDenied as Denied, Unauthenticated as Unauth};
    match (call, caller) {
        (_, Caller::Anonymous) => Err(Unauth(
            "authorization: expected \"Bearer <token>\" metadata".into(),
        )),
        (Call::Join, Caller::Joiner)
        | (Call::Teammate(_), Caller::Member(_))
        | (Call::Operator, Caller::Operator)
        | (Call::Lead, Caller::Lead) => Ok(()),
        (Call::Lead, _) => Err(Denied(
            "authorization: only the lead itself reports its workers' outcomes".into(),
        )),
        (_, Caller::Lead) => Err(Denied(
            "authorization: the lead's own workers only report their outcomes".into(),
        )),
        (Call::Join, Caller::Stranger) => Err(Unauth(
            "authorization: Join needs the lead's join token".into(),
        )),
        (Call::Join, Caller::Operator) => Err(Denied(
            "authorization: the operator token cannot call Lead.Join; Join takes the join token"
                .into(),
        )),
        (Call::Join, Caller::Member(name)) => Err(Denied(format!(
            "authorization: {name:?} already joined; Join takes the join token, not a session token"
        ))),
        (Call::Teammate(_), Caller::Stranger) => Err(Unauth(
            "authorization: unknown session token; call Join first".into(),
        )),
        (Call::Teammate(rpc), Caller::Operator) => Err(Denied(format!(
            "authorization: the operator token cannot call Lead.{rpc}; teammates use their session token"
        ))),
        (Call::Teammate(rpc), Caller::Joiner) => Err(Denied(format!(
            "authorization: the join token only calls Lead.Join; Lead.{rpc} takes the session token Join returned"
        ))),
        (Call::Operator, Caller::Stranger) => {
            Err(Unauth("authorization: unknown token".into()))
        }
        (Call::Operator, Caller::Joiner) => Err(Denied(
            "authorization: the join token cannot call Operator".into(),
        )),
        (Call::Operator, Caller::Member(name)) => Err(Denied(format!(
            "authorization: {name:?} is a teammate; only the operator token calls Operator"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table in the module's doc, cell by cell.
    #[test]
    fn every_caller_at_every_door() {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Answer {
            Ok,
            Unauth,
            Denied,
        }
        use Answer::{Denied as D, Ok as O, Unauth as U};
        let callers = [
            Caller::Anonymous,
            Caller::Stranger,
            Caller::Joiner,
            Caller::Operator,
            Caller::Member("alice".into()),
            Caller::Lead,
        ];
        let calls = [
            Call::Join,
            Call::Teammate("Send"),
            Call::Operator,
            Call::Lead,
        ];
        let table = [
            [U, U, U, U], // none
            [U, U, U, D], // unknown
            [O, D, D, D], // join token
            [D, D, O, D], // operator
            [D, O, D, D], // a member
            [D, D, D, O], // the lead
        ];
        for (caller, row) in callers.iter().zip(table) {
            for (call, expected) in calls.iter().zip(row) {
                let got = match admit(caller.clone(), *call) {
                    Ok(admitted) => {
                        assert_eq!(admitted.caller(), caller);
                        O
                    }
                    Err(Refused::Unauthenticated(m)) => {
                        assert!(m.starts_with("authorization: "), "{m}");
                        U
                    }
                    Err(Refused::PermissionDenied(m)) => {
                        assert!(m.starts_with("authorization: "), "{m}");
                        D
                    }
                };
                assert_eq!(got, expected, "{caller:?} calling {call:?}");
            }
        }
    }

    #[test]
    fn refusals_name_the_call_and_the_member() {
        let alice = Caller::Member("alice".into());
        assert!(matches!(
            admit(Caller::Operator, Call::Teammate("SubmitPlan")),
            Err(Refused::PermissionDenied(m)) if m.contains("Lead.SubmitPlan")
        ));
        assert!(matches!(
            admit(Caller::Joiner, Call::Teammate("Ack")),
            Err(Refused::PermissionDenied(m)) if m.contains("Lead.Ack")
        ));
        assert!(matches!(
            admit(alice.clone(), Call::Operator),
            Err(Refused::PermissionDenied(m)) if m.contains("\"alice\" is a teammate")
        ));
        assert!(matches!(
            admit(alice.clone(), Call::Join),
            Err(Refused::PermissionDenied(m)) if m.contains("\"alice\" already joined")
        ));
    }
}
