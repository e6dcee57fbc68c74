//! What the page reads: the state at load (the team, the requests' briefs,
//! the tasks), one request whole, the review queue's figures, the event
//! history a page at a time, and the file a permission would write.

use axum::{
    extract::{Query, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use mesh_core::{
    names::RequestId,
    op::{GetRequest, ListRequests, ListTasks, ListTeam, PageAsk},
    protocol::Request as CoreRequest,
    team::{Listed, TeamPage},
    usage::Usage,
};
use serde::Deserialize;
use serde_json::{json, Value};

use super::{
    answers::{failed, hub_failed, no_store},
    brief, json,
    session::Operator,
    Console,
};
use crate::{
    error::HubError,
    hub::{Claim, Command, HubHandle, HubOp},
    paging::MAX_PAGE_SIZE,
    render,
};

/// Everything the page shows at first: the team, the requests, the tasks.
pub(super) async fn state(State(console): State<Console>, _: Operator) -> Response {
    match snapshot(&console.hub).await {
        Ok(value) => no_store(Json(value).into_response()),
        Err(e) => hub_failed(e),
    }
}

#[derive(Deserialize)]
pub(super) struct RequestAsk {
    request_id: String,
}

/// One request whole, content and all: what its card and its page show
/// (the state has only its brief).
pub(super) async fn request(
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
        .operate(Claim::operator(), Ok(GetRequest { request_id }))
        .await;
    match found {
        Ok(request) => no_store(Json(json::request_json(&request)).into_response()),
        Err(e) => hub_failed(e),
    }
}

/// The review queue's figures (`lead stats`): what waits now, each kind of
/// reviewer's time on a request, the time to a decision.
pub(super) async fn stats(State(console): State<Console>, _: Operator) -> Response {
    match all_requests(&console.hub).await {
        Ok(requests) => {
            let timed: Vec<_> = requests.iter().map(crate::stats::timed).collect();
            let stats = crate::stats::of(&timed, shared::auth::now_unix_ms());
            no_store(Json(json!(stats)).into_response())
        }
        Err(e) => hub_failed(e),
    }
}

/// A list's first page, as many entries as a page holds.
const FIRST: PageAsk = PageAsk {
    after: None,
    size: MAX_PAGE_SIZE,
};

/// The page after `listed`; `None` after the last.
fn page_after<T>(listed: &Listed<T>) -> Option<PageAsk> {
    let (last, _) = listed.entries.last().filter(|_| listed.more)?;
    Some(PageAsk {
        after: Some(*last),
        ..FIRST
    })
}

/// Every entry of a list, page after page: `op` asks for one page.
async fn every<T, O: HubOp<Reply = Listed<T>>>(
    hub: &HubHandle,
    op: impl Fn(PageAsk) -> O,
) -> Result<Vec<T>, HubError> {
    let mut all = Vec::new();
    let mut page = Some(FIRST);
    while let Some(ask) = page {
        let listed: Listed<T> = hub.operate(Claim::operator(), Ok(op(ask))).await?;
        page = page_after(&listed);
        all.extend(listed.entries.into_iter().map(|(_, entry)| entry));
    }
    Ok(all)
}

/// Every request the lead keeps.
async fn all_requests(hub: &HubHandle) -> Result<Vec<CoreRequest>, HubError> {
    every(hub, |page| ListRequests {
        status: None,
        kind: None,
        page,
    })
    .await
}

/// Every member, every page; the team's usage and the others' as the last
/// page has them.
async fn team(
    hub: &HubHandle,
) -> Result<
    (
        Vec<mesh_core::effect::MemberView>,
        Usage,
        Vec<(String, Usage)>,
    ),
    HubError,
> {
    let mut members = Vec::new();
    let mut team_usage = Usage::default();
    let mut others: Vec<(String, Usage)> = Vec::new();
    let mut page = Some(FIRST);
    while let Some(ask) = page {
        let listed: TeamPage = hub
            .operate(Claim::operator(), Ok(ListTeam { page: ask }))
            .await?;
        page = page_after(&listed.members);
        members.extend(listed.members.entries.into_iter().map(|(_, m)| m));
        (team_usage, others) = (listed.team_usage, listed.others);
    }
    Ok((members, team_usage, others))
}

async fn snapshot(hub: &HubHandle) -> Result<Value, HubError> {
    let (members, team_usage, others) = team(hub).await?;
    let members: Vec<Value> = members.iter().map(json::member_json).collect();
    let team_usage = json::usage_json(&team_usage);
    let other_usage: Vec<Value> = others
        .iter()
        .map(|(name, usage)| json!({ "name": name, "usage": json::usage_json(usage) }))
        .collect();
    let requests: Vec<Value> = all_requests(hub)
        .await?
        .iter()
        .map(brief::brief_json)
        .collect();
    let tasks: Vec<Value> = every(hub, |page| ListTasks { status: None, page })
        .await?
        .iter()
        .map(json::task_json)
        .collect();
    Ok(json!({
        "members": members, "requests": requests, "tasks": tasks,
        "team_usage": team_usage, "other_usage": other_usage,
    }))
}

/// What a page of the event history is asked for (every field optional).
#[derive(Deserialize, Default)]
pub(super) struct HistoryAsk {
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
pub(super) async fn history(
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
        text: nonempty(ask.q).map(|q| crate::history::Text {
            needle: q.to_lowercase(),
            line: |entry| {
                crate::store::history_event(entry)
                    .ok()
                    .map(|event| render::event_line(&event))
            },
        }),
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
                    let event = crate::store::history_event(e)
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
pub(super) struct FileAsk {
    request_id: String,
}

/// The most of a file the console shows a change against.
const FILE_SHOWN: u64 = 256 * 1024;

/// The file a pending `write_file` permission request would write, as it
/// is now, for the console to show the change: `{ exists, content }`. Only
/// where the lead can read it (a teammate it spawned, inside its
/// workspace); 404 otherwise. Read off the hub.
pub(super) async fn write_target(
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
