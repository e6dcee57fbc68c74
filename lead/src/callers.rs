//! Who a caller is, for every adapter (the gRPC services, the console, A2A):
//! the tokens the lead accepts (its own, and the identity provider's, see
//! [`oidc`]), and what a request's token claims, which the hub admits once
//! ([`crate::hub::Claim`]).

pub mod oidc;

use std::sync::Arc;

use mesh_core::access::{Caller, Person, Refused, Role};
use shared::auth::{bearer, same_token};
use tonic::Request;

use crate::hub::Claim;

pub use oidc::OidcConfig;

/// A named operator token (`--operator-token NAME=TOKEN[:ROLE]`).
#[derive(Clone)]
pub struct NamedToken {
    /// Who holds it, as the trail names them.
    pub name: String,
    /// The token.
    pub token: String,
    /// What its holder may do.
    pub role: Role,
}

/// The tokens the lead accepts, fixed at start.
#[derive(Clone)]
pub struct Tokens {
    /// For `Join`.
    pub join: String,
    /// For every `Operator` call.
    pub operator: String,
    /// Named operator tokens (`--operator-token NAME=TOKEN[:ROLE]`): for
    /// the `Operator` calls their role reaches, and the trail says who
    /// decided.
    pub named: Vec<NamedToken>,
    /// The identity provider whose tokens name operators too
    /// (`--oidc-issuer`).
    pub oidc: Option<Arc<oidc::Verifier>>,
    /// `--a2a-open NAME`: an A2A caller without a token acts as operator
    /// NAME (for a conformance kit, or a network that is trusted).
    pub a2a_open: Option<String>,
}

impl std::fmt::Debug for NamedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NamedToken({}, {})", self.name, self.role)
    }
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tokens(..)")
    }
}

/// The token a request carries, if it carries one as `Bearer <token>`.
pub(crate) fn token_of<T>(request: &Request<T>) -> Option<String> {
    bearer(request)
        .filter(|token| !token.is_empty())
        .map(str::to_owned)
}

/// Who presents `token`, as far as the lead's own tokens tell: `None` for a
/// token that only the roster or the identity provider can place (a
/// member's session, a person's token, or unknown).
fn static_caller(token: Option<&str>, tokens: &Tokens) -> Option<Caller> {
    match token {
        None => Some(Caller::Anonymous),
        Some(token) if same_token(token, &tokens.operator) => {
            Some(Caller::Operator(Person::operator()))
        }
        Some(token) => {
            if let Some(named) = tokens.named.iter().find(|n| same_token(token, &n.token)) {
                return Some(Caller::Operator(Person::token(&named.name, named.role)));
            }
            same_token(token, &tokens.join).then_some(Caller::Joiner)
        }
    }
}

/// Who the request's token names: the lead's own tokens, then a person's
/// token from the identity provider; any other token is a session, for the
/// hub to place.
pub(crate) async fn claim_of<T>(request: &Request<T>, tokens: &Tokens) -> Claim {
    claim_of_token(token_of(request).as_deref(), tokens).await
}

/// [`claim_of`] for a token however it came (a console's `Authorization`
/// header, say).
pub(crate) async fn claim_of_token(token: Option<&str>, tokens: &Tokens) -> Claim {
    if let Some(caller) = static_caller(token, tokens) {
        return Claim::Known(caller);
    }
    let token = token.unwrap_or_default();
    match &tokens.oidc {
        Some(provider) if oidc::looks_like_jwt(token) => match provider.verify(token).await {
            Ok(person) => Claim::Known(Caller::Operator(person)),
            Err(oidc::Rejected::Token(why)) => Claim::Refused(Refused::Unauthenticated(why)),
            Err(oidc::Rejected::NoRole(why)) => Claim::Refused(Refused::PermissionDenied(why)),
        },
        _ => Claim::Session(token.to_owned()),
    }
}

/// The operator a claim names, if it names one.
pub(crate) fn person_of(claim: &Claim) -> Option<&Person> {
    match claim {
        Claim::Known(Caller::Operator(person)) => Some(person),
        Claim::Admitted(admitted) => admitted.person(),
        _ => None,
    }
}

/// Who decides, for a review's history (and so the audit trail): `operator
/// NAME` for a named token's holder or a person, `operator` for the
/// unnamed token.
pub(crate) fn signer(claim: &Claim) -> String {
    match person_of(claim) {
        Some(person) if *person != Person::operator() => format!("operator {}", person.name),
        _ => "operator".to_owned(),
    }
}
