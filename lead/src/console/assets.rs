//! The console's assets, compiled into the binary: the page, the login form,
//! the scripts and the style.

use axum::{
    extract::State,
    http::header,
    response::{IntoResponse, Response},
};

use super::{session::Operator, Console};

pub(super) const LOGIN: &str = include_str!("login.html");
pub(super) const PAGE: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("app.js");
const STYLE: &str = include_str!("app.css");
pub(super) async fn script(_: Operator) -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response()
}

pub(super) async fn style(State(_console): State<Console>) -> Response {
    // The login form needs the style too; it holds nothing secret.
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}
