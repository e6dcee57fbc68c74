//! Who may use the console: an operator, known by a live session (the
//! login form sets its cookie) or a token the lead takes for an operator
//! (its own, a named one, or a person's from the identity provider); the
//! extractor that answers 401 to anyone else.

use std::collections::HashMap;

use mesh_core::access::{Caller, Person};

use axum::{
    http::{header, HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde_json::json;

use super::{Console, COOKIE, MAX_SESSIONS};

/// Session ids, with whom each signed in, oldest first.
#[derive(Default)]
pub(super) struct Sessions {
    ids: HashMap<String, Person>,
    order: std::collections::VecDeque<String>,
}

/// An operator, known by a live session or a token: a handler that takes
/// it answers 401 to anyone else, before reading anything.
pub(super) struct Operator(pub(super) Person);

impl Operator {
    /// The claim the operator's ops carry, for the hub to check their role.
    pub(super) fn claim(&self) -> crate::hub::Claim {
        crate::hub::Claim::Known(Caller::Operator(self.0.clone()))
    }

    /// Who decides, as the request's history shows it: `operator
    /// (console)` for the unnamed token's holder, `operator NAME
    /// (console)` for anyone else.
    pub(super) fn signer(&self) -> String {
        if self.0 == Person::operator() {
            "operator (console)".into()
        } else {
            format!("operator {} (console)", self.0.name)
        }
    }
}

impl axum::extract::FromRequestParts<Console> for Operator {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        console: &Console,
    ) -> Result<Self, Self::Rejection> {
        match console.authorized(&parts.headers).await {
            Some(person) => Ok(Operator(person)),
            None => Err(unauthorized()),
        }
    }
}

impl Console {
    /// The operator the request's live session or `Bearer` token names.
    pub(super) async fn authorized(&self, headers: &HeaderMap) -> Option<Person> {
        if let Some(token) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
        {
            return self.operator_of(token).await;
        }
        let session = cookie(headers, COOKIE)?;
        self.sessions
            .lock()
            .ok()
            .and_then(|s| s.ids.get(session).cloned())
    }

    /// The operator `token` names, if it names one.
    pub(super) async fn operator_of(&self, token: &str) -> Option<Person> {
        match crate::callers::claim_of_token(Some(token), &self.tokens).await {
            crate::hub::Claim::Known(Caller::Operator(person)) => Some(person),
            _ => None,
        }
    }

    /// A new session id, for `person`.
    pub(super) fn open_session(&self, person: Person) -> String {
        let id = shared::auth::new_token();
        if let Ok(mut sessions) = self.sessions.lock() {
            if sessions.order.len() >= MAX_SESSIONS {
                if let Some(old) = sessions.order.pop_front() {
                    sessions.ids.remove(&old);
                }
            }
            sessions.ids.insert(id.clone(), person);
            sessions.order.push_back(id.clone());
        }
        id
    }
}

/// The value of cookie `name`.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}
/// 401 with a short reason, for API calls without a session.
fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        Json(json!({"error": "log in with the operator token first"})),
    )
        .into_response()
}
