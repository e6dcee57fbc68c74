//! The operator's console: a web page served by the lead (`lead serve
//! --http ADDR`), live from the hub's event stream (server-sent events), with
//! every asset compiled into the binary. It needs the operator token, typed
//! once on a login form; the lead then sets a session cookie. Every request
//! is checked: without a valid session (or `Authorization: Bearer` with the
//! operator token) the page is the login form and every API call is 401.
//!
//! The console applies the same ops as the `Operator` service, as the
//! operator, so it decides nothing the gRPC API could not.

use std::sync::{Arc, Mutex};

use axum::{
    routing::{get, post},
    Router,
};

use crate::{connections::ConnInfo, hub::HubHandle};

mod actions;
mod answers;
mod assets;
mod brief;
mod events;
mod json;
mod listener;
mod session;
mod state;

use actions::{approve, decide, permission, reject, shutdown};
use assets::{index, login, script, style};
use events::events;
pub(crate) use listener::Accepted;
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
    operator_token: Arc<String>,
    sessions: Arc<Mutex<Sessions>>,
    /// Served over TLS: the session cookie is `Secure`.
    tls: bool,
}

/// Serves the console on `listener` until `stop` completes.
pub(crate) async fn serve(
    listener: Accepted,
    tls: bool,
    hub: HubHandle,
    operator_token: String,
    card: Arc<crate::a2a::card::CardBase>,
    a2a: crate::a2a::A2a,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let console = Console {
        hub,
        operator_token: Arc::new(operator_token),
        sessions: Arc::default(),
        tls,
    };
    let served = Arc::new(crate::a2a::card::Served::default());
    let mut app = Router::new()
        .route("/", get(index))
        .route("/login", post(login))
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
        .route("/api/shutdown", post(shutdown))
        // Public, as A2A clients fetch it before they authenticate.
        .route(
            "/.well-known/agent-card.json",
            get(
                move |axum::extract::State(console): axum::extract::State<Console>,
                      headers: axum::http::HeaderMap| async move {
                    let roles = state::roles(&console.hub).await.unwrap_or_default();
                    // The JSON bindings are where the card was fetched from.
                    let here = headers
                        .get(axum::http::header::HOST)
                        .and_then(|h| h.to_str().ok())
                        .map(|host| {
                            let scheme = if console.tls { "https" } else { "http" };
                            format!("{scheme}://{host}")
                        });
                    let body = crate::a2a::card::card(&card, &roles, here.as_deref()).to_string();
                    served.answer(body, &headers)
                },
            ),
        );
    for (path, body) in assets::MODULES {
        app = app.route(path, get(move |operator| assets::module(operator, body)));
    }
    let app = app
        .with_state(console)
        .merge(crate::a2a::jsonrpc::router(a2a.clone()))
        .merge(crate::a2a::rest::router(a2a));
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<ConnInfo>(),
    )
    .with_graceful_shutdown(stop)
    .await
}
