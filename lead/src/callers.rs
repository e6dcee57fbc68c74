//! Who a caller is, for every adapter (the gRPC services, the console, A2A):
//! the tokens the lead accepts, and what a request's token claims, which
//! the hub admits once ([`crate::hub::Claim`]).

use mesh_core::access::Caller;
use shared::auth::{bearer, same_token};
use tonic::Request;

use crate::hub::Claim;

/// The tokens the lead accepts, fixed at start.
#[derive(Clone)]
pub struct Tokens {
    /// For `Join`.
    pub join: String,
    /// For every `Operator` call.
    pub operator: String,
    /// Named operator tokens (`--operator-token NAME=TOKEN`): for every
    /// `Operator` call too, and the trail says who decided.
    pub named: Vec<(String, String)>,
    /// `--a2a-open NAME`: an A2A caller without a token acts as operator
    /// NAME (for a conformance kit, or a network that is trusted).
    pub a2a_open: Option<String>,
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
/// token that only the roster can place (a member's session, or unknown).
fn static_caller(token: Option<&str>, tokens: &Tokens) -> Option<Caller> {
    match token {
        None => Some(Caller::Anonymous),
        Some(token) if same_token(token, &tokens.operator) => Some(Caller::Operator),
        Some(token) if tokens.named.iter().any(|(_, t)| same_token(token, t)) => {
            Some(Caller::Operator)
        }
        Some(token) if same_token(token, &tokens.join) => Some(Caller::Joiner),
        Some(_) => None,
    }
}

/// Who the request's token names as far as the lead's own tokens tell;
/// any other token is a session, for the hub to place.
pub(crate) fn claim_of<T>(request: &Request<T>, tokens: &Tokens) -> Claim {
    let token = token_of(request);
    match static_caller(token.as_deref(), tokens) {
        Some(caller) => Claim::Known(caller),
        None => Claim::Session(token.unwrap_or_default()),
    }
}

/// The lead's own operator, as the console and A2A act once they checked
/// the caller's operator token themselves.
pub(crate) fn operator() -> Claim {
    Claim::Known(Caller::Operator)
}
