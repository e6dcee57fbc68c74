//! The console's assets, compiled into the binary: the page, the login form
//! (and logging in), the scripts and the style.

use axum::{
    extract::{Form, State},
    http::{header, HeaderMap, StatusCode},
    response::{Html, IntoResponse, Redirect, Response},
};
use serde::Deserialize;

use super::{answers::no_store, session::Operator, Console, COOKIE};

const LOGIN: &str = include_str!("login.html");
const PAGE: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("app.js");
const STYLE: &str = include_str!("app.css");

/// The modules `app.js` imports (a page or a part the pages share each), by
/// the path the page asks for them at.
pub(super) const MODULES: [(&str, &str); 16] = [
    ("/js/content.js", include_str!("js/content.js")),
    ("/js/decided.js", include_str!("js/decided.js")),
    ("/js/diff.js", include_str!("js/diff.js")),
    ("/js/dom.js", include_str!("js/dom.js")),
    ("/js/events.js", include_str!("js/events.js")),
    ("/js/forms.js", include_str!("js/forms.js")),
    ("/js/live.js", include_str!("js/live.js")),
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

/// `/`: the page for the operator, the login form for anyone else.
pub(super) async fn index(State(console): State<Console>, headers: HeaderMap) -> Response {
    if console.authorized(&headers).await.is_some() {
        no_store(Html(PAGE).into_response())
    } else {
        no_store(Html(LOGIN.replace("{{error}}", "")).into_response())
    }
}

#[derive(Deserialize)]
pub(super) struct LoginForm {
    token: String,
}

pub(super) async fn login(State(console): State<Console>, Form(form): Form<LoginForm>) -> Response {
    let Some(person) = console.operator_of(form.token.trim()).await else {
        let page = LOGIN.replace(
            "{{error}}",
            "<p class=\"error\" role=\"alert\">That is not an operator's token.</p>",
        );
        return no_store((StatusCode::UNAUTHORIZED, Html(page)).into_response());
    };
    let session = console.open_session(person);
    let mut response = Redirect::to("/").into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        format!(
            "{COOKIE}={session}; HttpOnly; SameSite=Strict; Path=/{}",
            if console.tls { "; Secure" } else { "" }
        )
        .parse()
        .expect("valid cookie"),
    );
    response
}
