//! Cross-site request forgery, refused.
//!
//! Each session has a random CSRF token of its own. The page served to the
//! session carries it (`<meta name="csrf-token">`) and `app.js` sends it as
//! `X-CSRF-Token` with every POST; a POST that a session's cookie
//! authenticates is refused (403, naming the header) without the matching
//! token ([`check`], from the [`super::session::Operator`] extractor, so
//! every state-changing route has it). A request with `Authorization:
//! Bearer` needs none: no browser adds that header on its own.
//!
//! The login form is posted before there is a session, so it cannot carry
//! one's token: there the browser's own headers must say that the
//! console's page posted it ([`from_own_page`]: `Sec-Fetch-Site`
//! same-origin, `Origin` the console's). A form on another site would
//! otherwise sign the victim in as the attacker (login CSRF). A client that
//! is not a browser sends neither header, and is not at risk.

use axum::{
    http::{header, HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde_json::json;

/// The header the page sends the session's CSRF token in.
pub(super) const HEADER: &str = "x-csrf-token";

/// `Ok` when the request carries the session's CSRF token `expected`;
/// else why not.
pub(super) fn check(headers: &HeaderMap, expected: &str) -> Result<(), &'static str> {
    let given = headers
        .get(HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !given.is_empty() && shared::auth::same_token(given, expected) {
        return Ok(());
    }
    Err(if given.is_empty() {
        "this request needs the session's CSRF token in the X-CSRF-Token header (the console's page sends it); none was sent"
    } else {
        "the X-CSRF-Token header is not this session's CSRF token; load the console's page again"
    })
}

/// The 403 for a change without the session's CSRF token: `why`, as JSON.
pub(super) fn refused(why: &str) -> Response {
    (StatusCode::FORBIDDEN, Json(json!({ "error": why }))).into_response()
}

/// `Ok` when a form posted before any session came from the console's own
/// page, as far as the browser says: `Sec-Fetch-Site`, when sent, is
/// `same-origin` (or `none`, typed by the person), and `Origin`, when sent,
/// is the console's (its scheme, and the `Host` the request went to).
pub(super) fn from_own_page(headers: &HeaderMap, tls: bool) -> Result<(), String> {
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = site.to_str().unwrap_or_default();
        if site != "same-origin" && site != "none" {
            return Err(format!(
                "the form was posted from another site (Sec-Fetch-Site: {site})"
            ));
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        let scheme = if tls { "https" } else { "http" };
        if host.is_empty() || origin != format!("{scheme}://{host}") {
            return Err(format!(
                "the form was posted from another origin ({origin}, not {scheme}://{host})"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, value.parse().expect("a header value"));
        }
        headers
    }

    #[test]
    fn a_session_change_needs_its_own_token() {
        assert!(check(&headers(&[(HEADER, "abc")]), "abc").is_ok());
        assert!(check(&headers(&[(HEADER, "abd")]), "abc").is_err());
        assert!(check(&headers(&[]), "abc").is_err());
        assert!(check(&headers(&[(HEADER, "")]), "").is_err());
    }

    #[test]
    fn the_login_form_is_taken_from_the_consoles_own_page_or_no_browser() {
        let host = ("host", "127.0.0.1:8080");
        assert!(from_own_page(&headers(&[host]), false).is_ok());
        let own = headers(&[
            host,
            ("origin", "http://127.0.0.1:8080"),
            ("sec-fetch-site", "same-origin"),
        ]);
        assert!(from_own_page(&own, false).is_ok());
        assert!(from_own_page(&own, true).is_err(), "the scheme counts");
        let other_port = headers(&[host, ("origin", "http://127.0.0.1:9090")]);
        assert!(from_own_page(&other_port, false).is_err());
        let same_site = headers(&[host, ("sec-fetch-site", "same-site")]);
        assert!(from_own_page(&same_site, false).is_err());
        let null = headers(&[host, ("origin", "null")]);
        assert!(from_own_page(&null, false).is_err());
    }
}
