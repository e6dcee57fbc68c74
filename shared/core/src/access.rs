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
//!   operator      DENIED      DENIED               ok (role)    DENIED
//!   a member      DENIED      ok                   DENIED       DENIED
//!   the lead      DENIED      DENIED               DENIED       ok
//! ```
//!
//! At the Operator door the operator's [`Role`] must reach the role the
//! call needs (viewer < reviewer < admin); PERMISSION_DENIED names both.
//!
//! The lead itself (its timers, and the workers that run reviews off its
//! hub) is a caller no credential names: only the lead's code makes one.

/// What an operator may do, each role all the one before may.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads the team, its requests, tasks, events, stats and audit trail.
    Viewer,
    /// Also decides requests, adds and withdraws tasks, hands work in by A2A.
    Reviewer,
    /// Also spawns, shuts down, sets budgets.
    Admin,
}

impl Role {
    /// Every role, least first.
    pub const ALL: [Role; 3] = [Role::Viewer, Role::Reviewer, Role::Admin];

    /// Its name: `viewer`, `reviewer`, `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Reviewer => "reviewer",
            Role::Admin => "admin",
        }
    }

    /// The role named `name`.
    pub fn parse(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An operator as the lead knows them: a named token's holder, or a person
/// the identity provider vouched for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Person {
    /// How they are named: the token's name, or the provider's `email`,
    /// `preferred_username` or `sub`; `operator` for the unnamed token.
    pub name: String,
    /// What they may do.
    pub role: Role,
    /// The provider that vouched for them (none for a token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// Their `sub` at that provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// The provider's groups (or roles) they are in, as it said them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

impl Person {
    /// The holder of a token of the lead's own, named `name`.
    pub fn token(name: &str, role: Role) -> Person {
        Person {
            name: name.to_owned(),
            role,
            issuer: None,
            subject: None,
            groups: Vec::new(),
        }
    }

    /// The holder of the lead's unnamed operator token: `operator`, admin.
    pub fn operator() -> Person {
        Person::token("operator", Role::Admin)
    }
}

/// Who calls, as the edge resolved the credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// No credential, or not shaped as `Bearer <token>`.
    Anonymous,
    /// A token the lead does not know (no member holds it).
    Stranger,
    /// The join token.
    Joiner,
    /// An operator: an operator token's holder, or a person the identity
    /// provider vouched for.
    Operator(Person),
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
    /// An `Operator` rpc (the console's and A2A's calls too), which needs
    /// this role.
    Operator(Role),
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

    /// The operator, where one was let in.
    pub fn person(&self) -> Option<&Person> {
        match &self.0 {
            Caller::Operator(person) => Some(person),
            _ => None,
        }
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
        | (Call::Lead, Caller::Lead) => Ok(()),
        (Call::Operator(needed), Caller::Operator(person)) if person.role >= needed => Ok(()),
        (Call::Operator(needed), Caller::Operator(person)) => Err(Denied(format!(
            "authorization: this call needs the {needed} role; {} is a {}",
            person.name, person.role
        ))),
        (Call::Lead, _) => Err(Denied(
            "authorization: only the lead itself reports its workers' outcomes".into(),
        )),
        (_, Caller::Lead) => Err(Denied(
            "authorization: the lead's own workers only report their outcomes".into(),
        )),
        (Call::Join, Caller::Stranger) => Err(Unauth(
            "authorization: Join needs the lead's join token".into(),
        )),
        (Call::Join, Caller::Operator(_)) => Err(Denied(
            "authorization: the operator token cannot call Lead.Join; Join takes the join token"
                .into(),
        )),
        (Call::Join, Caller::Member(name)) => Err(Denied(format!(
            "authorization: {name:?} already joined; Join takes the join token, not a session token"
        ))),
        (Call::Teammate(_), Caller::Stranger) => Err(Unauth(
            "authorization: unknown session token; call Join first".into(),
        )),
        (Call::Teammate(rpc), Caller::Operator(_)) => Err(Denied(format!(
            "authorization: the operator token cannot call Lead.{rpc}; teammates use their session token"
        ))),
        (Call::Teammate(rpc), Caller::Joiner) => Err(Denied(format!(
            "authorization: the join token only calls Lead.Join; Lead.{rpc} takes the session token Join returned"
        ))),
        (Call::Operator(_), Caller::Stranger) => {
            Err(Unauth("authorization: unknown token".into()))
        }
        (Call::Operator(_), Caller::Joiner) => Err(Denied(
            "authorization: the join token cannot call Operator".into(),
        )),
        (Call::Operator(_), Caller::Member(name)) => Err(Denied(format!(
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
            Caller::Operator(Person::operator()),
            Caller::Member("alice".into()),
            Caller::Lead,
        ];
        let calls = [
            Call::Join,
            Call::Teammate("Send"),
            Call::Operator(Role::Admin),
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
            admit(Caller::Operator(Person::operator()), Call::Teammate("SubmitPlan")),
            Err(Refused::PermissionDenied(m)) if m.contains("Lead.SubmitPlan")
        ));
        assert!(matches!(
            admit(Caller::Joiner, Call::Teammate("Ack")),
            Err(Refused::PermissionDenied(m)) if m.contains("Lead.Ack")
        ));
        assert!(matches!(
            admit(alice.clone(), Call::Operator(Role::Viewer)),
            Err(Refused::PermissionDenied(m)) if m.contains("\"alice\" is a teammate")
        ));
        assert!(matches!(
            admit(alice.clone(), Call::Join),
            Err(Refused::PermissionDenied(m)) if m.contains("\"alice\" already joined")
        ));
    }

    /// Each role at each role's door: let in where it reaches, denied with
    /// the role needed and the one held where it does not.
    #[test]
    fn a_role_reaches_its_own_door_and_those_below() {
        for held in Role::ALL {
            for needed in Role::ALL {
                let caller = Caller::Operator(Person::token("victor", held));
                match admit(caller, Call::Operator(needed)) {
                    Ok(admitted) => {
                        assert!(held >= needed, "{held} let in at {needed}");
                        assert_eq!(admitted.person().map(|p| p.role), Some(held));
                    }
                    Err(Refused::PermissionDenied(m)) => {
                        assert!(held < needed, "{held} denied at {needed}");
                        assert!(
                            m.contains(&format!("needs the {needed} role"))
                                && m.contains(&format!("victor is a {held}")),
                            "{m}"
                        );
                    }
                    Err(other) => panic!("{other:?}"),
                }
            }
        }
        assert_eq!(Role::parse("reviewer"), Some(Role::Reviewer));
        assert_eq!(Role::parse("root"), None);
    }
}
