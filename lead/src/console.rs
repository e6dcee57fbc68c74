//! The operator's console: a web page served by the lead (`lead serve
//! --http ADDR`), live from the hub's event stream (server-sent events), with
//! every asset compiled into the binary. An operator signs in at the
//! identity provider (`--oidc-issuer`: the authorization-code flow with
//! PKCE, [`oidc`]) or types a token the lead takes once on a login form; the
//! lead then sets a session cookie (HttpOnly, SameSite=Strict, Secure over
//! TLS). Every request is checked: without a valid session (or
//! `Authorization: Bearer` with a token the lead takes) the page is the
//! login form and every API call is 401; a session's change without its
//! CSRF token is 403 ([`csrf`]).
//!
//! The console applies the same ops as the `Operator` service, as the
//! operator, so it decides nothing the gRPC API could not.

use std::sync::{Arc, Mutex};

use axum::{
    routing::{get, post},
    Router,
};

use crate::{callers::Tokens, connections::ConnInfo, hub::HubHandle};

mod actions;
mod answers;
mod assets;
mod brief;
mod csrf;
mod events;
mod json;
mod listener;
mod oidc;
pub(crate) mod provider;
mod session;
mod state;

use actions::{approve, decide, permission, reject, shutdown};
use assets::{index, login, logout, me, script, style};
use events::events;
pub(crate) use listener::Accepted;
pub use oidc::SignIn;
use session::Sessions;
use state::{history, request, state, stats, write_target};

/// The session cookie's name.
const COOKIE: &str = "mesh_console";
/// The most console sessions kept (the oldest go first).
const MAX_SESSIONS: usize = 1_000;

/// What every handler shares.
#[derive(Clone)]
struct Console {
    hub: HubHandle,
    /// The credentials the lead takes, which name its operators.
    tokens: Tokens,
    sessions: Arc<Mutex<Sessions>>,
    /// Served over TLS: the session cookie is `Secure`.
    tls: bool,
    /// Signing in at the identity provider, when the lead has one.
    sign_in: Option<Arc<oidc::Flows>>,
}

/// The console's routes (its page, its assets and its API), for the server
/// to compose with the other adapters' on the console's port; with
/// `sign_in`, people sign in at the identity provider too.
pub(crate) fn router(
    hub: HubHandle,
    tokens: Tokens,
    tls: bool,
    sign_in: Option<SignIn>,
) -> Result<Router, String> {
    let sign_in = sign_in.map(oidc::Flows::new).transpose()?.map(Arc::new);
    let console = Console {
        hub,
        tokens,
        sessions: Arc::default(),
        tls,
        sign_in,
    };
    let mut app = Router::new()
        .route("/", get(index))
        .route("/login", post(login))
        .route("/logout", post(logout))
        .route("/oidc/login", get(oidc::start))
        .route("/oidc/callback", get(oidc::callback))
        .route("/api/me", get(me))
        .route("/app.js", get(script))
        .route("/app.css", get(style))
        .route("/api/state", get(state))
        .route("/api/request", get(request))
        .route("/api/events", get(events))
        .route("/api/history", get(history))
        .route("/api/stats", get(stats))
        .route("/api/file", get(write_target))
        .route("/api/approve", post(approve))
        .route("/api/reject", post(reject))
        .route("/api/permission", post(permission))
        .route("/api/decide", post(decide))
        .route("/api/shutdown", post(shutdown));
    for (path, body) in assets::MODULES {
        app = app.route(path, get(move |operator| assets::module(operator, body)));
    }
    Ok(app.with_state(console))
}

/// Serves `app` (the console's routes and the others the server composed
/// with them) on `listener` until `stop` completes.
pub(crate) async fn serve(
    listener: Accepted,
    app: Router,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<ConnInfo>(),
    )
    .with_graceful_shutdown(stop)
    .await
}
