//! Operator commands: `lead team`, `requests`, `tasks`, `stats`, `audit`,
//! `diff`, `shutdown`, `budget`, `watch`, `spawn` (the decisions are
//! `decide.rs`; signing in at the identity provider, `lead login --oidc`,
//! is `login.rs`). Each talks to a running lead over gRPC, with the token
//! [`Target`] finds.

use std::{io::Write, path::PathBuf};

use shared::{
    auth::{now_unix_ms, BearerToken},
    leads::{Follow, Leads},
    pb::{self, operator_client::OperatorClient},
    transport::ClientTls,
};
use tokio_stream::StreamExt;
use tonic::service::interceptor::InterceptedService;

use crate::{
    render,
    state::{StateDir, OPERATOR_TOKEN_FILE},
};

pub mod audit;
pub mod decide;
pub mod gc;
pub mod login;
pub mod serve;
mod spawn;
pub mod status;
pub mod store;
pub mod tasks;
pub use spawn::{spawn, SpawnArgs};

/// An operator client with its token attached, talking to the active lead.
pub type Operator = OperatorClient<InterceptedService<Follow, BearerToken>>;

/// Why an operator command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The lead could not be found or reached.
    #[error("{0}")]
    Connect(String),
    /// The lead refused the call.
    #[error("{}: {}", .0.code().description(), .0.message())]
    Status(#[from] tonic::Status),
    /// Bad input on the command line.
    #[error("{0}")]
    Usage(String),
    /// A spawned teammate did not join: it ended first, or took too long.
    #[error("{0}")]
    NotJoined(String),
    /// Writing the output failed.
    #[error("output: {0}")]
    Io(#[from] std::io::Error),
    /// `lead store copy` was refused or failed.
    #[error(transparent)]
    Copy(#[from] crate::store::CopyError),
}

/// Where the lead is and how to authenticate to it: the flags of every
/// command that talks to a running lead.
#[derive(Debug, Clone, clap::Args)]
pub struct Target {
    /// The lead's state dir, where its address and operator token are.
    #[arg(long, env = "MESH_STATE_DIR", default_value = ".mesh")]
    pub state_dir: PathBuf,
    /// The lead's URL (instead of <state-dir>/lead.addr); with several
    /// leads on one database, each of them (repeated, or comma-separated):
    /// the command talks to the active one.
    #[arg(long, value_delimiter = ',')]
    pub lead: Vec<String>,
    /// The operator token (instead of <state-dir>/operator.token).
    #[arg(long, env = "MESH_OPERATOR_TOKEN", hide_env_values = true)]
    pub operator_token: Option<String>,
    /// The file `lead login --oidc` keeps its token in (default:
    /// $XDG_CONFIG_HOME/mesh/token, used when neither --operator-token nor
    /// <state-dir>/operator.token gives one).
    #[arg(long, env = "MESH_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    // For an `https://` lead: what to trust and which certificate to show.
    #[command(flatten)]
    pub tls: ClientTls,
}

/// The operator token and the lead URLs `target` names (the flags, else
/// the state dir's).
fn token_and_urls(target: &Target) -> Result<(String, Vec<String>), CliError> {
    let state = StateDir::open(&target.state_dir);
    let urls = if target.lead.is_empty() {
        vec![state.read_url().map_err(|e| {
            CliError::Connect(format!(
                "no running lead found ({e}); start one with `lead serve` or pass --lead URL"
            ))
        })?]
    } else {
        target.lead.clone()
    };
    let token = target.operator_token.clone();
    Ok((token.map_or_else(|| token_of(target, &state), Ok)?, urls))
}

/// The token when no --operator-token is given: the one `lead login
/// --oidc` kept in --token-file, else the state dir's operator token, else
/// the one `lead login --oidc` kept where it keeps it by default.
fn token_of(target: &Target, state: &StateDir) -> Result<String, CliError> {
    if let Some(path) = &target.token_file {
        return login::stored_token(path)?.ok_or_else(|| {
            CliError::Connect(format!(
                "no token in {} (--token-file); sign in with `lead login --oidc`",
                path.display()
            ))
        });
    }
    let own = match state.read_token(OPERATOR_TOKEN_FILE) {
        Ok(token) => return Ok(token),
        Err(e) => e,
    };
    let stored = login::token_file(None)
        .ok()
        .map(|path| login::stored_token(&path))
        .transpose()?
        .flatten();
    stored.ok_or_else(|| {
        CliError::Connect(format!(
            "no operator token ({own}); pass --operator-token or MESH_OPERATOR_TOKEN, or sign \
             in with `lead login --oidc`"
        ))
    })
}

/// Connects to the lead named by `target`: the active one, when it names
/// several.
pub async fn connect(target: &Target) -> Result<Operator, CliError> {
    let (token, urls) = token_and_urls(target)?;
    let leads =
        Leads::new(&urls, target.tls.clone()).map_err(|e| CliError::Connect(e.to_string()))?;
    let lead = Follow::connect(leads)
        .await
        .map_err(|e| CliError::Connect(format!("cannot reach the lead: {e}")))?;
    Ok(OperatorClient::with_interceptor(
        lead,
        BearerToken::new(&token)?,
    ))
}

/// `lead team`: every member, with what its model used and its budget;
/// then, once any model was used, the team's total and the other users of
/// a model (the lead's reviewer).
pub async fn team(client: &mut Operator, json: bool) -> Result<String, CliError> {
    let mut members = Vec::new();
    let mut page_token = String::new();
    let (team_usage, others) = loop {
        let page = client
            .list_team(pb::ListTeamRequest {
                page_token: page_token.clone(),
                ..Default::default()
            })
            .await?
            .into_inner();
        members.extend(page.members);
        if page.next_page_token.is_empty() || page.next_page_token == page_token {
            // Every page carries the summary; the last one's is the newest.
            break (page.team_usage.unwrap_or_default(), page.other_usage);
        }
        page_token = page.next_page_token;
    };
    if json {
        return Ok(render::json_text(&serde_json::Value::Array(
            members.iter().map(render::member_json).collect(),
        )) + "\n");
    }
    let mut rows = vec![vec![
        "NAME".into(),
        "ROLE".into(),
        "STATUS".into(),
        "MODE".into(),
        "SANDBOX".into(),
        "TOKENS".into(),
        "CALLS".into(),
        "BUDGET".into(),
        "MEMBER ID".into(),
    ]];
    rows.extend(members.iter().map(|m| {
        let used = m.usage.unwrap_or_default();
        vec![
            m.name.clone(),
            m.role.clone(),
            if m.joining {
                "joining".to_owned()
            } else {
                render::member_status(m.status)
            },
            render::mode(m.mode),
            render::sandbox(m.sandbox.as_ref()),
            render::tokens(&used).to_string(),
            used.calls.to_string(),
            render::budget(m.token_budget),
            m.member_id.clone(),
        ]
    }));
    let mut out = render::table(&rows);
    for m in members.iter() {
        let unconfined = m.sandbox.as_ref().is_some_and(|s| s.kind == "none");
        if unconfined && m.status != pb::MemberStatus::Terminated as i32 {
            let line = format!("{} runs its commands unconfined (--sandbox none)", m.name);
            out.push_str(&format!("{}\n", mesh_core::display::Escaped(&line)));
        }
    }
    for m in members.iter() {
        if let Some(d) = m.decoding.as_ref() {
            if m.status != pb::MemberStatus::Terminated as i32 {
                out.push_str(&render::decoding_line(&m.name, d));
            }
        }
    }
    for m in members.iter().filter(|m| !m.idle_reason.is_empty()) {
        let line = format!("{} is idle: {}", m.name, render::Quoted(&m.idle_reason));
        out.push_str(&format!("{}\n", mesh_core::display::Escaped(&line)));
    }
    if team_usage != pb::Usage::default() || !others.is_empty() {
        for other in &others {
            let line = render::usage_line(&pb::MemberUsage {
                name: other.name.clone(),
                total: other.usage,
                token_budget: 0,
            });
            out.push_str(&format!(
                "{}: {line}\n",
                mesh_core::display::Escaped(&other.name)
            ));
        }
        let line = render::usage_line(&pb::MemberUsage {
            name: String::new(),
            total: Some(team_usage),
            token_budget: 0,
        });
        out.push_str(&format!("team total: {line}\n"));
    }
    Ok(out)
}

/// `lead budget NAME TOKENS`: sets a member's token budget (0 removes it);
/// prints how it stands now.
pub async fn budget(
    client: &mut Operator,
    name: String,
    token_budget: u64,
) -> Result<String, CliError> {
    let status = client
        .set_budget(pb::SetBudgetRequest {
            name: name.clone(),
            token_budget,
        })
        .await?
        .into_inner();
    let line = render::usage_line(&pb::MemberUsage {
        name: name.clone(),
        total: status.total,
        token_budget: status.token_budget,
    });
    let none = if status.token_budget == 0 {
        "; no budget"
    } else {
        ""
    };
    Ok(format!("{name}: {line}{none}\n"))
}

/// Every request the lead keeps (only the pending ones, if `pending`),
/// page after page.
async fn all_requests(
    client: &mut Operator,
    pending: bool,
) -> Result<Vec<pb::ProtocolState>, CliError> {
    let status = if pending {
        pb::RequestStatus::Pending as i32
    } else {
        0
    };
    let mut requests = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = client
            .list_requests(pb::ListRequestsRequest {
                status,
                page_token: page_token.clone(),
                ..Default::default()
            })
            .await?
            .into_inner();
        requests.extend(page.requests);
        if page.next_page_token.is_empty() || page.next_page_token == page_token {
            break;
        }
        page_token = page.next_page_token;
    }
    Ok(requests)
}

/// `lead stats`: the review queue measured, from the requests the lead
/// keeps ([`crate::stats`]); JSON with `json`.
pub async fn stats(client: &mut Operator, json: bool) -> Result<String, CliError> {
    let requests = all_requests(client, false).await?;
    let timed: Vec<_> = requests.iter().map(render::timed).collect();
    let stats = crate::stats::of(&timed, shared::auth::now_unix_ms());
    if json {
        return Ok(render::json_text(&serde_json::json!(stats)) + "\n");
    }
    Ok(crate::stats::render(&stats))
}

/// `lead requests`.
pub async fn requests(
    client: &mut Operator,
    pending: bool,
    json: bool,
) -> Result<String, CliError> {
    let requests = all_requests(client, pending).await?;
    if json {
        return Ok(render::json_text(&serde_json::Value::Array(
            requests.iter().map(render::request_json).collect(),
        )) + "\n");
    }
    // Who handed in the task a request is for, when it came from outside (A2A).
    let handed_in: std::collections::HashMap<String, String> = tasks::all_tasks(client)
        .await?
        .into_iter()
        .filter_map(|t| {
            let by = t.origin?.by;
            (!by.is_empty()).then_some((t.task_id, by))
        })
        .collect();
    let mut rows = vec![vec![
        "REQUEST ID".into(),
        "TYPE".into(),
        "FROM".into(),
        "TO".into(),
        "STATUS".into(),
        "DETAIL".into(),
    ]];
    rows.extend(requests.iter().map(|r| {
        let mut detail = if r.feedback.is_empty() {
            summary(&r.payload_json)
        } else {
            r.feedback.clone()
        };
        if let Some(line) = render::reviews_line(r) {
            detail = format!("{detail} {line}");
        }
        if !r.waits_for.is_empty() {
            detail = format!("{detail} (waits for {})", r.waits_for.join(", "));
        }
        if let Some((task, by)) =
            task_of(&r.payload_json).and_then(|task| handed_in.get(&task).map(|by| (task, by)))
        {
            detail = format!("{detail} (task {task}, handed in by {by})");
        }
        vec![
            r.request_id.clone(),
            render::request_type(r.r#type),
            r.sender.clone(),
            r.target.clone(),
            render::request_status(r.status),
            detail,
        ]
    }));
    Ok(render::table(&rows))
}

/// The task a request's payload names (a plan's or a result's), if any.
fn task_of(payload_json: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(payload_json).ok()?;
    ["/plan/task_id", "/result/task_id", "/task_id"]
        .iter()
        .find_map(|at| value.pointer(at).and_then(|t| t.as_str()))
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
}

/// A request's payload in a few words.
fn summary(payload_json: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(payload_json).unwrap_or_default();
    if let Some(summary) = value.pointer("/plan/summary").and_then(|s| s.as_str()) {
        // Conflicts first: a reviewer must not miss them.
        let mut detail = String::new();
        for overlap in value["overlaps"].as_array().into_iter().flatten() {
            let files: Vec<&str> = overlap["files"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| f.as_str())
                .collect();
            detail.push_str(&format!(
                "[overlaps {}: {}] ",
                overlap["member"].as_str().unwrap_or_default(),
                files.join(", ")
            ));
        }
        return detail + summary;
    }
    if let (Some(why), Some(files)) = (
        value.get("why").and_then(|w| w.as_str()),
        value.get("files").and_then(|f| f.as_array()),
    ) {
        let files: Vec<&str> = files.iter().filter_map(|f| f.as_str()).collect();
        let mut detail = String::new();
        for held in value["held_by_others"].as_array().into_iter().flatten() {
            detail.push_str(&format!("[held by {}] ", held.as_str().unwrap_or_default()));
        }
        return format!("{detail}amends with +{}: {why}", files.join(", +"));
    }
    if let Some(result) = value.get("result") {
        let files: Vec<pb::FileChange> = result["files"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|f| pb::FileChange {
                path: f["path"].as_str().unwrap_or_default().to_owned(),
                added: f["added"]
                    .as_u64()
                    .unwrap_or(0)
                    .try_into()
                    .unwrap_or(u32::MAX),
                removed: f["removed"]
                    .as_u64()
                    .unwrap_or(0)
                    .try_into()
                    .unwrap_or(u32::MAX),
                binary: f["binary"].as_bool().unwrap_or(false),
            })
            .collect();
        let mut detail = String::new();
        let outside: Vec<&str> = value["outside_grant"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p.as_str())
            .collect();
        if !outside.is_empty() {
            detail.push_str(&format!("[outside the grant: {}] ", outside.join(", ")));
        }
        return format!(
            "{detail}{}: {}",
            result["summary"].as_str().unwrap_or_default(),
            render::diff_stat(&files)
        );
    }
    for key in ["reason", "tool"] {
        if let Some(text) = value.get(key).and_then(|s| s.as_str()) {
            return text.to_owned();
        }
    }
    String::new()
}

/// `lead diff ID`: a result's diff, as submitted.
pub async fn diff(client: &mut Operator, request_id: String) -> Result<String, CliError> {
    let request = client
        .get_request(pb::GetRequestRequest { request_id })
        .await?
        .into_inner();
    if request.r#type != pb::RequestType::Result as i32 {
        return Err(CliError::Usage(format!(
            "{} is a {} request; only results have a diff",
            request.request_id,
            render::request_type(request.r#type)
        )));
    }
    let payload: serde_json::Value =
        serde_json::from_str(&request.payload_json).unwrap_or_default();
    Ok(payload
        .pointer("/result/diff")
        .and_then(|d| d.as_str())
        .unwrap_or_default()
        .to_owned())
}

/// `lead shutdown`: asks and prints the request id at once, then (unless
/// `wait` is false) waits for the answer or the deadline and says how it
/// ended.
pub async fn shutdown(
    client: &mut Operator,
    name: String,
    reason: String,
    deadline_secs: Option<u64>,
    wait: bool,
) -> Result<String, CliError> {
    let deadline_unix_ms = match deadline_secs {
        Some(secs) => {
            now_unix_ms() + i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX / 2)
        }
        None => 0,
    };
    // Watch first, so the answer cannot slip by between the request and the wait.
    let mut events = if wait {
        Some(client.watch(pb::WatchRequest {}).await?.into_inner())
    } else {
        None
    };
    let ticket = client
        .request_shutdown(pb::ShutdownRequest {
            request_id: String::new(),
            target: name.clone(),
            reason,
            deadline_unix_ms,
            traceparent: String::new(),
        })
        .await?
        .into_inner();
    let asked = format!("asked {name} to shut down: request {}\n", ticket.request_id);
    let Some(events) = events.as_mut() else {
        return Ok(asked);
    };
    // The id comes at once, so the operator can follow the request (`lead
    // requests`, `lead watch`) while this waits for the outcome.
    let mut out = std::io::stdout().lock();
    out.write_all(asked.as_bytes())?;
    out.flush()?;
    drop(out);
    while let Some(event) = events.next().await {
        if let Some(pb::event::Kind::Request(r)) = event?.kind {
            if r.request_id != ticket.request_id || r.status == pb::RequestStatus::Pending as i32 {
                continue;
            }
            let how = match pb::RequestStatus::try_from(r.status) {
                Ok(pb::RequestStatus::Approved) => format!("{name} agreed to shut down"),
                Ok(pb::RequestStatus::Rejected) => format!("{name} refused to shut down"),
                _ => format!("{name} did not answer in time (expired)"),
            };
            let reason = if r.feedback.is_empty() {
                String::new()
            } else {
                format!(": {}", mesh_core::display::escape(&r.feedback))
            };
            return Ok(format!("{how}{reason} [request {}]\n", r.request_id));
        }
    }
    Err(CliError::Connect(
        "the lead closed the event stream before the answer came".into(),
    ))
}

/// How long `lead watch` looks for the active lead after its stream ended
/// UNAVAILABLE (the lead stepped down, or its connection went) before it
/// gives up: past a lease's lapse and the takeover.
const WATCH_FOLLOW: std::time::Duration = std::time::Duration::from_secs(60);

/// `lead watch`: prints every event until the lead stops. When the stream
/// ends UNAVAILABLE (the lead stepped down, or went), it follows the active
/// lead and watches there, saying so; events between are not replayed.
pub async fn watch(client: &mut Operator, json: bool) -> Result<(), CliError> {
    let mut events = client.watch(pb::WatchRequest {}).await?.into_inner();
    // The lead registers a watcher before it answers, so from here on nothing is missed.
    eprintln!("watching the lead; one line per event (Ctrl-C to stop)");
    let mut out = std::io::stdout().lock();
    loop {
        let event = match events.next().await {
            None => return Ok(()),
            Some(Ok(event)) => event,
            Some(Err(status)) if status.code() == tonic::Code::Unavailable => {
                eprintln!(
                    "the lead's stream ended ({}); following the active lead",
                    status.message()
                );
                events = follow(client).await?;
                eprintln!("watching the active lead; events in between are not shown");
                continue;
            }
            Some(Err(status)) => return Err(status.into()),
        };
        let line = if json {
            render::json_text(&render::event_json(&event))
        } else {
            render::event_line(&event)
        };
        writeln!(out, "{line}")?;
        out.flush()?;
    }
}

/// A new event stream from whichever lead is active, within [`WATCH_FOLLOW`].
async fn follow(client: &mut Operator) -> Result<tonic::Streaming<pb::Event>, CliError> {
    let until = tokio::time::Instant::now() + WATCH_FOLLOW;
    let mut pause = std::time::Duration::from_millis(100);
    loop {
        match client.watch(pb::WatchRequest {}).await {
            Ok(events) => return Ok(events.into_inner()),
            Err(status)
                if status.code() == tonic::Code::Unavailable
                    && tokio::time::Instant::now() + pause < until =>
            {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_secs(2));
            }
            Err(status) => return Err(status.into()),
        }
    }
}
