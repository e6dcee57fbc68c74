//! Who may use the console: an operator, known by a live session (the
//! login form or the provider's sign-in sets its cookie) or a token the
//! lead takes for an operator (its own, a named one, or a person's from the
//! identity provider); the extractor that answers 401 to anyone else, and
//! 403 to a session's request that changes something without the session's
//! CSRF token ([`super::csrf`]).

use std::{
    collections::{HashMap, VecDeque},
    time::Instant,
};

use mesh_core::access::{Caller, Person};

use axum::{
    http::{header, HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde_json::json;

use super::{csrf, Console, COOKIE, MAX_SESSIONS};

/// One signed-in browser: who, the token its page sends with every change,
/// and when it ends (a provider's sign-in ends with the provider's token).
#[derive(Debug, Clone)]
pub(super) struct Session {
    pub(super) person: Person,
    pub(super) csrf: String,
    pub(super) until: Option<Instant>,
}

/// Session ids, with whom each signed in, oldest first.
#[derive(Default)]
pub(super) struct Sessions {
    ids: HashMap<String, Session>,
    order: VecDeque<String>,
}

/// An operator, known by a live session or a token: a handler that takes
/// it answers 401 to anyone else, before reading anything; and 403 to a
/// session's POST without the session's CSRF token.
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
        match console.caller(&parts.headers).await {
            Some(Who {
                person,
                session: Some(session),
            }) if !parts.method.is_safe() => {
                csrf::check(&parts.headers, &session.csrf).map_err(csrf::refused)?;
                Ok(Operator(person))
            }
            Some(caller) => Ok(Operator(caller.person)),
            None => Err(unauthorized()),
        }
    }
}

/// Who a request comes from, and their session when a cookie named them
/// (a `Bearer` token is not sent by a browser on its own: it needs no
/// CSRF token).
pub(super) struct Who {
    pub(super) person: Person,
    pub(super) session: Option<Session>,
}

impl Console {
    /// The operator the request's `Bearer` token or live session names,
    /// with the session.
    pub(super) async fn caller(&self, headers: &HeaderMap) -> Option<Who> {
        if let Some(token) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
        {
            let person = self.operator_of(token).await?;
            return Some(Who {
                person,
                session: None,
            });
        }
        let session = self.session(cookie(headers, COOKIE)?)?;
        Some(Who {
            person: session.person.clone(),
            session: Some(session),
        })
    }

    /// The live session `id` names (one past its end is dropped).
    fn session(&self, id: &str) -> Option<Session> {
        let mut sessions = self.sessions.lock().ok()?;
        let session = sessions.ids.get(id)?;
        if session.until.is_some_and(|until| until <= Instant::now()) {
            sessions.ids.remove(id);
            sessions.order.retain(|other| other != id);
            return None;
        }
        Some(session.clone())
    }

    /// The operator `token` names, if it names one.
    pub(super) async fn operator_of(&self, token: &str) -> Option<Person> {
        match crate::callers::claim_of_token(Some(token), &self.tokens).await {
            crate::hub::Claim::Known(Caller::Operator(person)) => Some(person),
            _ => None,
        }
    }

    /// A new session for `person`, until `until` (none: while the lead
    /// runs): its id, for the cookie.
    pub(super) fn open_session(&self, person: Person, until: Option<Instant>) -> String {
        let id = shared::auth::new_token();
        if let Ok(mut sessions) = self.sessions.lock() {
            if sessions.order.len() >= MAX_SESSIONS {
                if let Some(old) = sessions.order.pop_front() {
                    sessions.ids.remove(&old);
                }
            }
            let session = Session {
                person,
                csrf: shared::auth::new_token(),
                until,
            };
            sessions.ids.insert(id.clone(), session);
            sessions.order.push_back(id.clone());
        }
        id
    }

    /// Ends the session the request's cookie names, if any.
    pub(super) fn close_session(&self, headers: &HeaderMap) {
        let Some(id) = cookie(headers, COOKIE) else {
            return;
        };
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.ids.remove(id);
            sessions.order.retain(|other| other != id);
        }
    }

    /// The `Set-Cookie` value of a cookie `name` the console sets: HttpOnly,
    /// `Secure` over TLS, for `path`; `max_age` in seconds (none: for the
    /// browser's session; 0: removed).
    pub(super) fn set_cookie(
        &self,
        name: &str,
        value: &str,
        same_site: &str,
        path: &str,
        max_age: Option<u64>,
    ) -> header::HeaderValue {
        let max_age = max_age.map_or_else(String::new, |s| format!("; Max-Age={s}"));
        let secure = if self.tls { "; Secure" } else { "" };
        header::HeaderValue::from_str(&format!(
            "{name}={value}; HttpOnly; SameSite={same_site}; Path={path}{max_age}{secure}"
        ))
        .unwrap_or_else(|_| header::HeaderValue::from_static(""))
    }
}

/// The value of cookie `name`.
pub(super) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
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
pub(super) fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        Json(json!({"error": "log in with the operator token first"})),
    )
        .into_response()
}
