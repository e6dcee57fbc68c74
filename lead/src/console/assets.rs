//! The console's assets, compiled into the binary: the page, the login form
//! (and logging in and out, and who is signed in), the scripts and the
//! style.

use axum::{
    extract::{Form, State},
    http::{header, HeaderMap, StatusCode},
    response::{Html, IntoResponse, Redirect, Response},
    Json,
};
use serde::Deserialize;
use serde_json::json;

use super::{
    answers::no_store,
    csrf,
    session::{unauthorized, Operator},
    Console, COOKIE,
};

const LOGIN: &str = include_str!("login.html");
const PAGE: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("app.js");
const STYLE: &str = include_str!("app.css");

/// The modules `app.js` imports (a page or a part the pages share each), by
/// the path the page asks for them at.
pub(super) const MODULES: [(&str, &str); 17] = [
    ("/js/content.js", include_str!("js/content.js")),
    ("/js/decided.js", include_str!("js/decided.js")),
    ("/js/diff.js", include_str!("js/diff.js")),
    ("/js/dom.js", include_str!("js/dom.js")),
    ("/js/events.js", include_str!("js/events.js")),
    ("/js/forms.js", include_str!("js/forms.js")),
    ("/js/live.js", include_str!("js/live.js")),
    ("/js/me.js", include_str!("js/me.js")),
    ("/js/notify.js", include_str!("js/notify.js")),
    ("/js/overlaps.js", include_str!("js/overlaps.js")),
    ("/js/queue.js", include_str!("js/queue.js")),
    ("/js/request.js", include_str!("js/request.js")),
    ("/js/router.js", include_str!("js/router.js")),
    ("/js/state.js", include_str!("js/state.js")),
    ("/js/tasks.js", include_str!("js/tasks.js")),
    ("/js/team.js", include_str!("js/team.js")),
    ("/js/waits.js", include_str!("js/waits.js")),
];

/// The page's script, `app.js`: the module that starts the others.
pub(super) async fn script(operator: Operator) -> Response {
    module(operator, SCRIPT).await
}

/// A script module, to the operator only.
pub(super) async fn module(_: Operator, body: &'static str) -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        body,
    )
        .into_response()
}

pub(super) async fn style(State(_console): State<Console>) -> Response {
    // The login form needs the style too; it holds nothing secret.
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}

/// `/`: the page for the operator (with their session's CSRF token), the
/// login form for anyone else.
pub(super) async fn index(State(console): State<Console>, headers: HeaderMap) -> Response {
    match console.caller(&headers).await {
        Some(who) => {
            let csrf = who.session.map(|s| s.csrf).unwrap_or_default();
            no_store(Html(PAGE.replace("{{csrf}}", &csrf)).into_response())
        }
        None => login_page(&console, None, StatusCode::OK),
    }
}

/// The login form, with the provider's sign-in when there is one, and
/// `error` said on it.
pub(super) fn login_page(console: &Console, error: Option<&str>, status: StatusCode) -> Response {
    let oidc = console.sign_in.as_ref().map_or_else(String::new, |flows| {
        format!(
            "<p><a id=\"oidc-login\" class=\"sign-in\" href=\"/oidc/login\">Sign in with {}</a></p>\n  <p class=\"hint\">or with a token:</p>",
            escape(&flows.sign_in.host())
        )
    });
    let error = error.map_or_else(String::new, |e| {
        format!("<p class=\"error\" role=\"alert\">{}</p>", escape(e))
    });
    let page = LOGIN
        .replace("{{oidc}}", &oidc)
        .replace("{{error}}", &error);
    no_store((status, Html(page)).into_response())
}

/// `text` for HTML: `&`, `<`, `>` and quotes escaped.
pub(super) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

#[derive(Deserialize)]
pub(super) struct LoginForm {
    token: String,
}

/// `POST /login`: the token form, taken only from the console's own page
/// ([`csrf::from_own_page`]); a session for the token's operator.
pub(super) async fn login(
    State(console): State<Console>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    if let Err(why) = csrf::from_own_page(&headers, console.tls) {
        let why = format!("Not logged in: {why}.");
        return login_page(&console, Some(&why), StatusCode::FORBIDDEN);
    }
    let Some(person) = console.operator_of(form.token.trim()).await else {
        let why = "That is not the operator token, nor another operator's.";
        return login_page(&console, Some(why), StatusCode::UNAUTHORIZED);
    };
    let session = console.open_session(person, None);
    let mut response = Redirect::to("/").into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        console.set_cookie(COOKIE, &session, "Strict", "/", None),
    );
    response
}

/// `GET /api/me`: who is signed in, and whether by a session (which can
/// sign out).
pub(super) async fn me(State(console): State<Console>, headers: HeaderMap) -> Response {
    let Some(who) = console.caller(&headers).await else {
        return unauthorized();
    };
    no_store(
        Json(json!({
            "name": who.person.name,
            "role": who.person.role.to_string(),
            "issuer": who.person.issuer,
            "session": who.session.is_some(),
        }))
        .into_response(),
    )
}

/// `POST /logout`: the session ends (its CSRF token checked, as for every
/// change), and its cookie goes.
pub(super) async fn logout(
    _: Operator,
    State(console): State<Console>,
    headers: HeaderMap,
) -> Response {
    console.close_session(&headers);
    let mut response = Json(json!({"signed_out": true})).into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        console.set_cookie(COOKIE, "", "Strict", "/", Some(0)),
    );
    no_store(response)
}
