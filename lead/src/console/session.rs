//! Who may use the console: the operator, known by a live session (the
//! login form sets its cookie) or the operator token; the extractor that
//! answers 401 to anyone else.

use std::collections::HashSet;

use axum::{
    http::{header, HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde_json::json;

use super::{Console, COOKIE, MAX_SESSIONS};

/// Session ids, oldest first.
#[derive(Default)]
pub(super) struct Sessions {
    ids: HashSet<String>,
    order: std::collections::VecDeque<String>,
}

/// The operator, known by a live session or the operator token: a handler
/// that takes it answers 401 to anyone else, before reading anything.
pub(super) struct Operator;

impl axum::extract::FromRequestParts<Console> for Operator {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        console: &Console,
    ) -> Result<Self, Self::Rejection> {
        if console.authorized(&parts.headers) {
            Ok(Operator)
        } else {
            Err(unauthorized())
        }
    }
}

impl Console {
    /// Whether the request carries a live session or the operator token.
    pub(super) fn authorized(&self, headers: &HeaderMap) -> bool {
        if let Some(token) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
        {
            return self.is_operator_token(token);
        }
        let Some(session) = cookie(headers, COOKIE) else {
            return false;
        };
        self.sessions
            .lock()
            .map(|s| s.ids.contains(session))
            .unwrap_or(false)
    }

    pub(super) fn is_operator_token(&self, token: &str) -> bool {
        shared::auth::same_token(token, &self.operator_token)
    }

    /// A new session id.
    pub(super) fn open_session(&self) -> String {
        let id = shared::auth::new_token();
        if let Ok(mut sessions) = self.sessions.lock() {
            if sessions.order.len() >= MAX_SESSIONS {
                if let Some(old) = sessions.order.pop_front() {
                    sessions.ids.remove(&old);
                }
            }
            sessions.ids.insert(id.clone());
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
