//! The operator's console: a web page served by the lead (`lead serve
//! --http ADDR`), live from the hub's event stream (server-sent events), with
//! every asset compiled into the binary. It needs the operator token, typed
//! once on a login form; the lead then sets a session cookie. Every request
//! is checked: without a valid session (or `Authorization: Bearer` with the
//! operator token) the page is the login form and every API call is 401.
//!
//! The console applies the same ops as the `Operator` service, as the
//! operator, so it decides nothing the gRPC API could not.

use std::{
    collections::HashSet,
    convert::Infallible,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    extract::{Form, Query, State},
    http::{header, HeaderMap, StatusCode},
    response::{
        sse::{Event, KeepAlive, Sse},
        Html, IntoResponse, Redirect, Response,
    },
    routing::{get, post},
    Json, Router,
};
use mesh_core::{
    access::{Call, Caller},
    error::FieldError,
    grant::{Grant, Mode},
    limits,
    names::{Name, RequestId},
    op::{Op, PageAsk, PlanVerdict},
    protocol::{Request, Status},
};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;

use crate::{
    connections::{Conn, ConnInfo},
    error::HubError,
    hub::{Claim, Command, HubHandle},
    paging::{Page, MEMBERS, REQUESTS},
    render,
};
use mesh_core::{
    protocol::Request as CoreRequest,
    team::{Listed, TeamPage},
};
use shared::wire::ToPb;

mod brief;

const LOGIN: &str = include_str!("console/login.html");
const PAGE: &str = include_str!("console/index.html");
const SCRIPT: &str = include_str!("console/app.js");
const STYLE: &str = include_str!("console/app.css");

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

/// The console's connections, accepted within the port's limits (and with
/// TLS, if it is on) by [`crate::connections::incoming`].
#[derive(Debug)]
pub(crate) struct Accepted {
    connections: mpsc::Receiver<std::io::Result<Conn>>,
    addr: std::net::SocketAddr,
}

impl Accepted {
    /// Connections from `connections`, for a listener bound to `addr`.
    pub(crate) fn new(
        connections: mpsc::Receiver<std::io::Result<Conn>>,
        addr: std::net::SocketAddr,
    ) -> Self {
        Self { connections, addr }
    }
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, Accepted>>
    for ConnInfo
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, Accepted>) -> Self {
        tonic::transport::server::Connected::connect_info(stream.io())
    }
}

impl axum::serve::Listener for Accepted {
    type Io = Conn;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Conn, std::net::SocketAddr) {
        loop {
            match self.connections.recv().await {
                Some(Ok(conn)) => return (conn, self.addr),
                Some(Err(e)) => tracing::debug!(error = %e, "console connection"),
                // The accepting task ended: nothing more will come.
                None => std::future::pending::<()>().await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        Ok(self.addr)
    }
}

/// Session ids, oldest first.
#[derive(Default)]
struct Sessions {
    ids: HashSet<String>,
    order: std::collections::VecDeque<String>,
}

/// The operator, known by a live session or the operator token: a handler
/// that takes it answers 401 to anyone else, before reading anything.
struct Operator;

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
    fn authorized(&self, headers: &HeaderMap) -> bool {
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

    fn is_operator_token(&self, token: &str) -> bool {
        shared::auth::same_token(token, &self.operator_token)
    }

    /// A new session id.
    fn open_session(&self) -> String {
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

/// Serves the console on `listener` until `stop` completes.
pub(crate) async fn serve(
    listener: Accepted,
    tls: bool,
    hub: HubHandle,
    operator_token: String,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let console = Console {
        hub,
        operator_token: Arc::new(operator_token),
        sessions: Arc::default(),
        tls,
    };
    let app = Router::new()
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
        .with_state(console);
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<ConnInfo>(),
    )
    .with_graceful_shutdown(stop)
    .await
}

/// 401 with a short reason, for API calls without a session.
fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        Json(json!({"error": "log in with the operator token first"})),
    )
        .into_response()
}

/// A hub error as an HTTP answer that names the problem.
fn failed(error: impl std::fmt::Display, status: StatusCode) -> Response {
    (status, Json(json!({"error": error.to_string()}))).into_response()
}

/// A hub error as an HTTP answer: its status (see
/// [`HubError::http_status`]) and its message (which names the field or the
/// state).
fn hub_failed(error: HubError) -> Response {
    let status = error.http_status();
    failed(error, status)
}

fn no_store(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, "no-store".parse().expect("valid"));
    response
}

async fn index(State(console): State<Console>, headers: HeaderMap) -> Response {
    if console.authorized(&headers) {
        no_store(Html(PAGE).into_response())
    } else {
        no_store(Html(LOGIN.replace("{{error}}", "")).into_response())
    }
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
}

async fn login(State(console): State<Console>, Form(form): Form<LoginForm>) -> Response {
    if !console.is_operator_token(form.token.trim()) {
        let page = LOGIN.replace(
            "{{error}}",
            "<p class=\"error\" role=\"alert\">That is not the operator token.</p>",
        );
        return no_store((StatusCode::UNAUTHORIZED, Html(page)).into_response());
    }
    let session = console.open_session();
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

async fn script(_: Operator) -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response()
}

async fn style(State(_console): State<Console>) -> Response {
    // The login form needs the style too; it holds nothing secret.
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}

/// Everything the page shows at first: the team, the requests, the tasks.
async fn state(State(console): State<Console>, _: Operator) -> Response {
    match snapshot(&console.hub).await {
        Ok(value) => no_store(Json(value).into_response()),
        Err(e) => hub_failed(e),
    }
}

#[derive(Deserialize)]
struct RequestAsk {
    request_id: String,
}

/// One request whole, content and all: what its card and its page show
/// (the state has only its brief).
async fn request(
    State(console): State<Console>,
    _: Operator,
    Query(ask): Query<RequestAsk>,
) -> Response {
    let request_id = match RequestId::existing("request_id", &ask.request_id) {
        Ok(id) => id,
        Err(e) => return failed(e, StatusCode::BAD_REQUEST),
    };
    let found: Result<CoreRequest, HubError> = console
        .hub
        .apply(
            operator(),
            Call::Operator,
            Ok(Op::GetRequest { request_id }),
        )
        .await;
    match found {
        Ok(request) => {
            use shared::wire::ToPb;
            no_store(Json(render::request_json(&request.to_pb())).into_response())
        }
        Err(e) => hub_failed(e),
    }
}

/// The review queue's figures (`lead stats`): what waits now, each kind of
/// reviewer's time on a request, the time to a decision.
async fn stats(State(console): State<Console>, _: Operator) -> Response {
    match all_requests(&console.hub).await {
        Ok(requests) => {
            let timed: Vec<_> = requests.iter().map(crate::render::timed).collect();
            let stats = crate::stats::of(&timed, shared::auth::now_unix_ms());
            no_store(Json(json!(stats)).into_response())
        }
        Err(e) => hub_failed(e),
    }
}

/// Every request the lead keeps, page after page, as the wire has them.
async fn all_requests(hub: &HubHandle) -> Result<Vec<shared::pb::ProtocolState>, HubError> {
    let mut requests = Vec::new();
    let mut token = String::new();
    loop {
        let page: Listed<CoreRequest> = hub
            .apply(
                operator(),
                Call::Operator,
                Ok(Op::ListRequests {
                    status: None,
                    kind: None,
                    page: next_page(&token, REQUESTS)?,
                }),
            )
            .await?;
        let (page, next) = crate::paging::render(page, REQUESTS, CoreRequest::to_pb);
        requests.extend(page);
        if next.is_empty() {
            return Ok(requests);
        }
        token = next;
    }
}

async fn snapshot(hub: &HubHandle) -> Result<Value, HubError> {
    let mut members = Vec::new();
    let mut token = String::new();
    let (team_usage, other_usage) = loop {
        let page: TeamPage = hub
            .apply(
                operator(),
                Call::Operator,
                Ok(Op::ListTeam {
                    page: next_page(&token, MEMBERS)?,
                }),
            )
            .await?;
        let TeamPage {
            members: listed,
            team_usage,
            others,
        } = page;
        let (listed, next) = crate::paging::render(listed, MEMBERS, ToPb::to_pb);
        members.extend(listed.iter().map(render::member_json));
        if next.is_empty() {
            let others: Vec<Value> = others
                .iter()
                .map(|(name, usage)| json!({ "name": name, "usage": render::usage_value(&usage.to_pb()) }))
                .collect();
            break (render::usage_value(&team_usage.to_pb()), others);
        }
        token = next;
    };
    let requests: Vec<Value> = all_requests(hub)
        .await?
        .iter()
        .map(brief::brief_json)
        .collect();
    let mut tasks = Vec::new();
    let mut token = String::new();
    loop {
        let page: Listed<mesh_core::tasks::Task> = hub
            .apply(
                operator(),
                Call::Operator,
                Ok(Op::ListTasks {
                    status: None,
                    page: next_page(&token, crate::paging::TASKS)?,
                }),
            )
            .await?;
        let (page, next) = crate::paging::render(page, crate::paging::TASKS, |t| t.to_pb());
        tasks.extend(page.iter().map(render::task_json));
        if next.is_empty() {
            break;
        }
        token = next;
    }
    Ok(json!({
        "members": members, "requests": requests, "tasks": tasks,
        "team_usage": team_usage, "other_usage": other_usage,
    }))
}

/// The hub's events, live, as server-sent events (one JSON object each).
async fn events(
    State(console): State<Console>,
    axum::extract::ConnectInfo(conn): axum::extract::ConnectInfo<ConnInfo>,
    _: Operator,
) -> Response {
    let watch = |reply| Command::Watch {
        claim: operator(),
        reply,
    };
    let events = match console.hub.call(watch).await {
        Ok(events) => events,
        Err(e) => return hub_failed(e),
    };
    // A client that reads nothing never sees the stream's end: its
    // connection (HTTP/1.1: this stream's alone) is closed instead.
    tokio::spawn(events.watchdog(crate::outbox::RESET_AFTER, move || {
        tracing::warn!("a console event stream took nothing after it was ended or filled (--stream-max-bytes); its connection is closed");
        conn.state.close();
    }));
    let stream = events.map(|event| {
        let data = match event {
            Ok(event) => render::event_json(&shared::wire::event(event.0, &event.1)),
            Err(end) => json!({"error": end.message()}),
        };
        Ok::<_, Infallible>(Event::default().data(data.to_string()))
    });
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response();
    // An event stream has its connection to itself: once it ends (the
    // reader fell too far behind, the lead stops), the connection closes
    // too, and the browser's EventSource opens a new one.
    response
        .headers_mut()
        .insert(header::CONNECTION, "close".parse().expect("valid"));
    response
}

#[derive(Deserialize)]
struct Approve {
    request_id: String,
    #[serde(default)]
    mode: String,
    #[serde(default)]
    write_paths: Vec<String>,
    #[serde(default)]
    feedback: String,
    #[serde(default)]
    allow_overlap: bool,
}

async fn approve(
    State(console): State<Console>,
    _: Operator,
    Json(form): Json<Approve>,
) -> Response {
    let mode = match form.mode.as_str() {
        "" | "accept-edits" => Mode::AcceptEdits,
        "default" => Mode::Default,
        "bypass" => Mode::Bypass,
        other => {
            return failed(
                format!("mode: {other:?} is not accept-edits, default or bypass"),
                StatusCode::BAD_REQUEST,
            )
        }
    };
    let verdict = limits::check("feedback", &form.feedback, limits::REASON)
        .and_then(|()| Grant::checked("grant", mode, form.write_paths, None))
        .map(|grant| PlanVerdict::Approve {
            grant,
            feedback: form.feedback,
            allow_overlap: form.allow_overlap,
        });
    review_plan(&console, &form.request_id, verdict).await
}

/// An operator's decision on a plan, made in the console.
async fn review_plan(
    console: &Console,
    request_id: &str,
    verdict: Result<PlanVerdict, FieldError>,
) -> Response {
    let op = RequestId::existing("request_id", request_id)
        .and_then(|request_id| {
            Ok(Op::ReviewPlan {
                request_id,
                verdict: verdict?,
                by: "operator (console)".into(),
            })
        })
        .map_err(HubError::from);
    decided(
        console
            .hub
            .apply(operator(), Call::Operator, op)
            .await
            .map(decision_json),
    )
}

#[derive(Deserialize)]
struct Reject {
    request_id: String,
    feedback: String,
}

async fn reject(State(console): State<Console>, _: Operator, Json(form): Json<Reject>) -> Response {
    let verdict = limits::check("feedback", &form.feedback, limits::REASON)
        .and_then(|()| PlanVerdict::reject(form.feedback));
    review_plan(&console, &form.request_id, verdict).await
}

#[derive(Deserialize)]
struct Permission {
    request_id: String,
    approve: bool,
    #[serde(default)]
    feedback: String,
}

async fn permission(
    State(console): State<Console>,
    _: Operator,
    Json(form): Json<Permission>,
) -> Response {
    let op = RequestId::existing("request_id", &form.request_id)
        .and_then(|request_id| {
            limits::check("feedback", &form.feedback, limits::REASON)?;
            Ok(Op::ReviewPermission {
                request_id,
                approve: form.approve,
                feedback: form.feedback,
                by: "operator (console)".into(),
            })
        })
        .map_err(HubError::from);
    decided(
        console
            .hub
            .apply(operator(), Call::Operator, op)
            .await
            .map(decision_json),
    )
}

/// What a page of the event history is asked for (every field optional).
#[derive(Deserialize, Default)]
struct HistoryAsk {
    member: Option<String>,
    kind: Option<String>,
    /// Unix ms.
    since: Option<i64>,
    until: Option<i64>,
    q: Option<String>,
    before: Option<u64>,
    limit: Option<usize>,
}

/// A page of the event history, newest first: `{ entries: [{ id, event }],
/// next_before }`; `next_before` (absent on the last page) asks for the
/// older ones.
async fn history(
    State(console): State<Console>,
    _: Operator,
    Query(ask): Query<HistoryAsk>,
) -> Response {
    let nonempty = |s: Option<String>| s.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
    let query = crate::history::Query {
        member: nonempty(ask.member),
        kind: nonempty(ask.kind),
        since: ask.since,
        until: ask.until,
        text: nonempty(ask.q).map(|q| q.to_lowercase()),
        before: ask.before,
        limit: ask.limit.unwrap_or(100),
    };
    match console
        .hub
        .call(|reply| Command::History { query, reply })
        .await
    {
        Ok(page) => {
            let entries: Vec<Value> = page
                .entries
                .iter()
                .map(|e| {
                    let event = render::decode_event(&e.event)
                        .map_or(Value::Null, |event| render::event_json(&event));
                    json!({ "id": e.id, "event": event })
                })
                .collect();
            no_store(
                Json(json!({ "entries": entries, "next_before": page.next_before }))
                    .into_response(),
            )
        }
        Err(e) => hub_failed(e),
    }
}

#[derive(Deserialize)]
struct FileAsk {
    request_id: String,
}

/// The most of a file the console shows a change against.
const FILE_SHOWN: u64 = 256 * 1024;

/// The file a pending `write_file` permission request would write, as it
/// is now, for the console to show the change: `{ exists, content }`. Only
/// where the lead can read it (a teammate it spawned, inside its
/// workspace); 404 otherwise. Read off the hub.
async fn write_target(
    State(console): State<Console>,
    _: Operator,
    Query(ask): Query<FileAsk>,
) -> Response {
    let Ok(request_id) = RequestId::existing("request_id", &ask.request_id) else {
        return failed("request_id: is required", StatusCode::BAD_REQUEST);
    };
    let target = match console
        .hub
        .call(|reply| Command::WriteTarget { request_id, reply })
        .await
    {
        Ok(Some(target)) => target,
        // Not an error of the asker's: the page says the file cannot be
        // shown (a 404 would be a failed load in the browser's console).
        Ok(None) => return unreadable("the member's workspace is not on this lead's machine"),
        Err(e) => return hub_failed(e),
    };
    let (workspace, path) = target;
    let read = tokio::task::spawn_blocking(move || -> Option<Option<String>> {
        let root = workspace.canonicalize().ok()?;
        let joined = root.join(&path);
        let Ok(real) = joined.canonicalize() else {
            // Not there: a new file (if its directory is inside).
            return Some(None);
        };
        if !real.starts_with(&root) || !real.is_file() {
            return None;
        }
        let meta = std::fs::metadata(&real).ok()?;
        if meta.len() > FILE_SHOWN {
            return None;
        }
        String::from_utf8(std::fs::read(&real).ok()?).ok().map(Some)
    })
    .await
    .ok()
    .flatten();
    match read {
        Some(Some(content)) => no_store(
            Json(json!({ "exists": true, "readable": true, "content": content })).into_response(),
        ),
        Some(None) => no_store(
            Json(json!({ "exists": false, "readable": true, "content": "" })).into_response(),
        ),
        None => unreadable("not a text file of at most 256 KiB inside the workspace"),
    }
}

/// `/api/file`'s answer for a file the lead cannot show, and why.
fn unreadable(why: &str) -> Response {
    no_store(Json(json!({ "exists": null, "readable": false, "why": why })).into_response())
}

/// A decision on a result or an amendment.
#[derive(Deserialize)]
struct Decide {
    request_id: String,
    /// `result` or `amendment`.
    kind: String,
    approve: bool,
    #[serde(default)]
    feedback: String,
}

async fn decide(State(console): State<Console>, _: Operator, Json(form): Json<Decide>) -> Response {
    let by = "operator (console)";
    let op = RequestId::existing("request_id", &form.request_id).and_then(|request_id| match form
        .kind
        .as_str()
    {
        "result" => Op::review_result(request_id, form.approve, form.feedback, by),
        "amendment" => Op::review_amendment(request_id, form.approve, form.feedback, by),
        other => Err(FieldError::new(
            "kind",
            format!("{other:?} is not result or amendment"),
        )),
    });
    let op = op.map_err(HubError::from);
    decided(
        console
            .hub
            .apply(operator(), Call::Operator, op)
            .await
            .map(decision_json),
    )
}

#[derive(Deserialize)]
struct Shutdown {
    name: String,
    #[serde(default)]
    reason: String,
}

async fn shutdown(
    State(console): State<Console>,
    _: Operator,
    Json(form): Json<Shutdown>,
) -> Response {
    let op = Name::parse("target", &form.name)
        .and_then(|target| {
            limits::check("reason", &form.reason, limits::REASON)?;
            Ok(Op::RequestShutdown {
                request_id: RequestId::generate(),
                target,
                reason: form.reason,
                deadline_unix_ms: None,
            })
        })
        .map_err(HubError::from);
    decided(
        console
            .hub
            .apply(operator(), Call::Operator, op)
            .await
            .map(|id: RequestId| json!({"request_id": id.to_string()})),
    )
}

/// A decided request, as the page hears of its decision.
fn decision_json(request: Request) -> Value {
    json!({
        "request_id": request.id().to_string(),
        "approve": request.status == Status::Approved,
    })
}

/// Who the console calls the hub as: it let only the operator in.
fn operator() -> Claim {
    Claim::Known(Caller::Operator)
}

/// The page after the one whose `next_page_token` was `token` (empty: the first).
fn next_page(token: &str, prefix: &'static str) -> Result<PageAsk, HubError> {
    Ok(Page::parse(0, token, prefix)?.ask())
}

/// A hub call's result as the answer.
fn decided(result: Result<Value, HubError>) -> Response {
    match result {
        Ok(value) => Json(value).into_response(),
        Err(e) => hub_failed(e),
    }
}
