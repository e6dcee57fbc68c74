//! The gRPC services: thin. Each RPC checks the caller's token, validates
//! what it can alone, sends a command to the hub and maps the reply.

use std::{
    pin::Pin,
    task::{Context, Poll},
};

use mesh_core::{
    access::{Call, Caller},
    names::RequestId,
    op::{Joined, Op, Sent},
    tasks::Task,
    usage::Standing,
};
use mesh_core::{
    protocol::Request as CoreRequest,
    team::{Listed, TeamPage},
};
use shared::{
    auth::{bearer, same_token},
    pb,
    wire::{permission_response, plan_response, ToPb},
};
use tokio_stream::{Stream, StreamExt as _};
use tonic::{Request, Response, Status};

use crate::{
    error::HubError,
    from_wire,
    hub::{Answered, Claim, Command, HubHandle},
    paging::{self, MEMBERS, REQUESTS, TASKS},
};

/// A page of tasks, for the wire.
pub(crate) fn tasks_page(listed: Listed<Task>) -> pb::ListTasksResponse {
    let (tasks, next_page_token) = paging::render(listed, TASKS, Task::to_pb);
    pb::ListTasksResponse {
        tasks,
        next_page_token,
    }
}

/// A page of requests, for the wire.
pub(crate) fn requests_page(listed: Listed<CoreRequest>) -> pb::ListRequestsResponse {
    let (requests, next_page_token) = paging::render(listed, REQUESTS, CoreRequest::to_pb);
    pb::ListRequestsResponse {
        requests,
        next_page_token,
    }
}

/// A page of the team, for the wire.
pub(crate) fn team_page(page: TeamPage) -> pb::ListTeamResponse {
    let (members, next_page_token) = paging::render(page.members, MEMBERS, ToPb::to_pb);
    pb::ListTeamResponse {
        members,
        next_page_token,
        team_usage: Some(page.team_usage.to_pb()),
        other_usage: page
            .others
            .into_iter()
            .map(|(name, usage)| pb::NamedUsage {
                name,
                usage: Some(usage.to_pb()),
            })
            .collect(),
    }
}

/// The tokens the lead accepts, fixed at start.
#[derive(Clone)]
pub struct Tokens {
    /// For `Join`.
    pub join: String,
    /// For every `Operator` call.
    pub operator: String,
    /// Named operator tokens (`--operator-token NAME=TOKEN`): for every
    /// `Operator` call too, and the trail says who decided.
    pub named: Vec<(String, String)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tokens(..)")
    }
}

/// `mesh.v1.Lead`, for teammates.
#[derive(Debug, Clone)]
pub(crate) struct LeadService {
    /// The hub.
    pub(crate) hub: HubHandle,
    /// The join and operator tokens.
    pub(crate) tokens: Tokens,
    /// The team's repository (`--repo`).
    pub(crate) repo: Option<std::sync::Arc<crate::git::Repo>>,
}

/// `mesh.v1.Operator`, for operators.
#[derive(Debug, Clone)]
pub(crate) struct OperatorService {
    /// The hub.
    pub(crate) hub: HubHandle,
    /// The join and operator tokens.
    pub(crate) tokens: Tokens,
}

/// The token a request carries, if it carries one as `Bearer <token>`.
fn token_of<T>(request: &Request<T>) -> Option<String> {
    bearer(request)
        .filter(|token| !token.is_empty())
        .map(str::to_owned)
}

/// Who presents `token`, as far as the lead's own tokens tell: `None` for a
/// token that only the roster can place (a member's session, or unknown).
fn static_caller(token: Option<&str>, tokens: &Tokens) -> Option<Caller> {
    match token {
        None => Some(Caller::Anonymous),
        Some(token) if same_token(token, &tokens.operator) => Some(Caller::Operator),
        Some(token) if tokens.named.iter().any(|(_, t)| same_token(token, t)) => {
            Some(Caller::Operator)
        }
        Some(token) if same_token(token, &tokens.join) => Some(Caller::Joiner),
        Some(_) => None,
    }
}

/// Who the request's token names as far as the lead's own tokens tell;
/// any other token is a session, for the hub to place.
fn claim_of<T>(request: &Request<T>, tokens: &Tokens) -> Claim {
    let token = token_of(request);
    match static_caller(token.as_deref(), tokens) {
        Some(caller) => Claim::Known(caller),
        None => Claim::Session(token.unwrap_or_default()),
    }
}

impl LeadService {
    /// `SubmitResult`, in its span.
    async fn submit_result_traced(
        &self,
        request: Request<pb::ResultRequest>,
    ) -> Result<Response<pb::SubmitResultResponse>, Status> {
        // The caller is placed first: nobody unknown makes git work.
        self.admitted(&request, "SubmitResult").await?;
        let Some(repo) = self.repo.clone() else {
            return Err(HubError::FailedPrecondition(
                "SubmitResult: the lead has no team repository (lead serve --repo); complete the \
                 task with CompleteTask"
                    .into(),
            )
            .into());
        };
        from_wire::check_result(request.get_ref())?;
        let ask = request.get_ref();
        let prepared = repo
            .prepare(&ask.base, &ask.diff, &ask.summary)
            .await
            .map_err(|e| match e {
                crate::git::PrepareError::Invalid(field, problem) => {
                    HubError::from(mesh_core::error::FieldError::new(field, problem))
                }
                crate::git::PrepareError::Git(e) => HubError::Internal(e.to_string()),
            })?;
        self.apply(
            request,
            "SubmitResult",
            |r| from_wire::submit_result(r, prepared),
            |id: RequestId| pb::SubmitResultResponse {
                request_id: id.to_string(),
            },
        )
        .await
    }

    /// Applies the op `translate` makes of the request, for the caller its
    /// token names, as `Lead.<rpc>`.
    async fn apply<T, A: Answered, R>(
        &self,
        request: Request<T>,
        rpc: &'static str,
        translate: impl FnOnce(T) -> Result<Op, HubError>,
        render: impl FnOnce(A) -> R,
    ) -> Result<Response<R>, Status> {
        self.apply_at(request, Call::Teammate(rpc), translate, render)
            .await
    }

    /// Whether the caller may call `Lead.<rpc>` (asked of the hub, which
    /// places a session), for work done before the op.
    async fn admitted<T>(&self, request: &Request<T>, rpc: &'static str) -> Result<(), Status> {
        let claim = claim_of(request, &self.tokens);
        self.hub
            .call(|reply| Command::Admit {
                claim,
                door: Call::Teammate(rpc),
                reply,
            })
            .await?;
        Ok(())
    }

    /// [`Self::apply`] for an op that answers nothing but success.
    async fn done<T, R: Default>(
        &self,
        request: Request<T>,
        rpc: &'static str,
        translate: impl FnOnce(T) -> Result<Op, HubError>,
    ) -> Result<Response<R>, Status> {
        self.apply(request, rpc, translate, |()| R::default()).await
    }

    /// Applies the op `translate` makes of the request, for the caller its
    /// token names, come in at `door`.
    async fn apply_at<T, A: Answered, R>(
        &self,
        request: Request<T>,
        door: Call<'static>,
        translate: impl FnOnce(T) -> Result<Op, HubError>,
        render: impl FnOnce(A) -> R,
    ) -> Result<Response<R>, Status> {
        let claim = claim_of(&request, &self.tokens);
        let op = translate(request.into_inner());
        Ok(Response::new(render(
            self.hub.apply(claim, door, op).await?,
        )))
    }
}

/// An inbox stream that tells the hub when the client goes away, and that the
/// hub can end early with a status (replaced by a newer stream, stuck).
struct InboxStream {
    /// Envelopes from the hub, ending with the status the hub ended the
    /// stream with, if it did.
    inner: crate::outbox::Receiver<crate::inboxes::Entry>,
    /// Whom to tell, and about which stream.
    hub: HubHandle,
    /// The member.
    name: String,
    /// This stream's id.
    stream_id: u64,
}

impl Stream for InboxStream {
    type Item = Result<pb::Envelope, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_next(cx);
        let to = &this.name;
        polled.map(|item| item.map(|r| r.map(|e| envelope(&e, to)).map_err(Status::from)))
    }
}

impl Drop for InboxStream {
    fn drop(&mut self) {
        self.hub.notify(Command::StreamClosed {
            name: std::mem::take(&mut self.name),
            stream_id: self.stream_id,
        });
    }
}

/// An inbox entry as the wire carries it to `to`.
pub(crate) fn envelope(entry: &crate::inboxes::Entry, to: &str) -> pb::Envelope {
    let mut body = entry.payload.body().to_pb();
    // A shutdown request carries its trace: the teammate's answer joins it.
    if let pb::envelope::Body::ShutdownRequest(request) = &mut body {
        request.traceparent = crate::telemetry::traceparent(&request.request_id);
    }
    pb::Envelope {
        seq: entry.seq,
        message_id: entry.message_id.clone(),
        from: entry.from.clone(),
        to: to.to_owned(),
        sent_at_unix_ms: entry.sent_at_unix_ms,
        body: Some(body),
    }
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// Which request a call is about, for its span.
enum About<'a> {
    /// It opens request `id` (a UUID as the client gave it) of `kind`: the
    /// request's trace starts from the caller's.
    Opens(&'a str, mesh_core::protocol::Kind),
    /// It answers or decides request `id`: its span joins that request's
    /// trace.
    Answers(&'a str),
}

/// A call's server span, begun.
struct Begun {
    /// The span's context: the call runs in it.
    cx: opentelemetry::Context,
    /// The request the call opens, traced from here.
    opened: Option<String>,
}

/// Begins the server span `method` of one call when exporting telemetry
/// ([`crate::telemetry`]; `None`, having done nothing, when not): a request
/// it opens is traced from here; one it answers is its parent.
fn begin(
    method: &'static str,
    metadata: &tonic::metadata::MetadataMap,
    about: About<'_>,
) -> Option<Begun> {
    if !mesh_telemetry::enabled() {
        return None;
    }
    // As the hub will name the request (a UUID's canonical spelling).
    let canonical = |id: &str| {
        RequestId::existing("request_id", id)
            .ok()
            .map(|id| id.to_string())
    };
    let (opened, answers) = match about {
        About::Opens(id, kind) => {
            use opentelemetry::trace::TraceContextExt as _;
            let caller = mesh_telemetry::extract(metadata);
            let opened = canonical(id).filter(|id| crate::telemetry::opened(id, kind, &caller));
            // A caller that sends no trace: the call is a span of the
            // request's own.
            let parent = opened.clone().filter(|_| !caller.has_active_span());
            (opened, parent)
        }
        About::Answers(id) => (None, canonical(id)),
    };
    let cx = crate::telemetry::rpc(method, metadata, answers.as_deref());
    Some(Begun { cx, opened })
}

/// Runs one call in its span, if one was begun; a request it opened is
/// forgotten again if the call fails.
async fn traced<R>(
    begun: Option<Begun>,
    call: impl std::future::Future<Output = Result<R, Status>>,
) -> Result<R, Status> {
    use opentelemetry::context::FutureExt as _;
    let Some(begun) = begun else {
        return call.await;
    };
    let result = call.with_context(begun.cx.clone()).await;
    crate::telemetry::rpc_done(&begun.cx, &result);
    if let (Some(id), Err(_)) = (&begun.opened, &result) {
        crate::telemetry::abandoned(id);
    }
    result
}

#[tonic::async_trait]
impl pb::lead_server::Lead for LeadService {
    async fn join(
        &self,
        request: Request<pb::JoinRequest>,
    ) -> Result<Response<pb::JoinResponse>, Status> {
        self.apply_at(request, Call::Join, from_wire::join, |j: Joined| j.to_pb())
            .await
    }

    type InboxStream = BoxStream<pb::Envelope>;

    async fn inbox(
        &self,
        request: Request<pb::InboxRequest>,
    ) -> Result<Response<Self::InboxStream>, Status> {
        let claim = claim_of(&request, &self.tokens);
        let after_seq = request.into_inner().after_seq;
        let (name, stream_id, envelopes) = self
            .hub
            .call(|reply| Command::Inbox {
                claim,
                after_seq,
                reply,
            })
            .await?;
        envelopes.reset_when_stuck();
        let stream = InboxStream {
            inner: envelopes,
            hub: self.hub.clone(),
            name,
            stream_id,
        };
        Ok(Response::new(Box::pin(stream)))
    }

    async fn ack(
        &self,
        request: Request<pb::AckRequest>,
    ) -> Result<Response<pb::AckResponse>, Status> {
        self.done(request, "Ack", from_wire::ack).await
    }

    async fn send(
        &self,
        request: Request<pb::SendRequest>,
    ) -> Result<Response<pb::SendResponse>, Status> {
        self.apply(request, "Send", from_wire::send, |s: Sent| s.to_pb())
            .await
    }

    async fn submit_plan(
        &self,
        request: Request<pb::PlanApprovalRequest>,
    ) -> Result<Response<pb::SubmitPlanResponse>, Status> {
        let about = About::Opens(
            &request.get_ref().request_id,
            mesh_core::protocol::Kind::PlanApproval,
        );
        let begun = begin("mesh.v1.Lead/SubmitPlan", request.metadata(), about);
        traced(begun, async {
            self.apply(
                request,
                "SubmitPlan",
                from_wire::submit_plan,
                |id: RequestId| pb::SubmitPlanResponse {
                    request_id: id.to_string(),
                },
            )
            .await
        })
        .await
    }

    async fn submit_result(
        &self,
        request: Request<pb::ResultRequest>,
    ) -> Result<Response<pb::SubmitResultResponse>, Status> {
        let about = About::Opens(
            &request.get_ref().request_id,
            mesh_core::protocol::Kind::Result,
        );
        let begun = begin("mesh.v1.Lead/SubmitResult", request.metadata(), about);
        traced(begun, async { self.submit_result_traced(request).await }).await
    }

    async fn request_amendment(
        &self,
        request: Request<pb::AmendmentRequest>,
    ) -> Result<Response<pb::RequestAmendmentResponse>, Status> {
        let about = About::Opens(
            &request.get_ref().request_id,
            mesh_core::protocol::Kind::Amendment,
        );
        let begun = begin("mesh.v1.Lead/RequestAmendment", request.metadata(), about);
        traced(begun, async {
            self.apply(
                request,
                "RequestAmendment",
                from_wire::request_amendment,
                |id: RequestId| pb::RequestAmendmentResponse {
                    request_id: id.to_string(),
                },
            )
            .await
        })
        .await
    }

    async fn get_repo(
        &self,
        request: Request<pb::GetRepoRequest>,
    ) -> Result<Response<pb::RepoState>, Status> {
        self.admitted(&request, "GetRepo").await?;
        let Some(repo) = self.repo.clone() else {
            return Err(HubError::FailedPrecondition(
                "GetRepo: the lead has no team repository (lead serve --repo)".into(),
            )
            .into());
        };
        let head = repo
            .head()
            .await
            .map_err(|e| HubError::Internal(e.to_string()))?;
        Ok(Response::new(pb::RepoState {
            branch: repo.branch().to_owned(),
            head,
            path: repo.path().display().to_string(),
        }))
    }

    async fn respond_shutdown(
        &self,
        request: Request<pb::ShutdownResponse>,
    ) -> Result<Response<pb::RespondShutdownResponse>, Status> {
        let about = About::Answers(&request.get_ref().request_id);
        let begun = begin("mesh.v1.Lead/RespondShutdown", request.metadata(), about);
        traced(begun, async {
            self.done(request, "RespondShutdown", from_wire::respond_shutdown)
                .await
        })
        .await
    }

    async fn request_permission(
        &self,
        request: Request<pb::PermissionRequest>,
    ) -> Result<Response<pb::RequestPermissionResponse>, Status> {
        let about = About::Opens(
            &request.get_ref().request_id,
            mesh_core::protocol::Kind::Permission,
        );
        let begun = begin("mesh.v1.Lead/RequestPermission", request.metadata(), about);
        traced(begun, async {
            self.apply(
                request,
                "RequestPermission",
                from_wire::request_permission,
                |id: RequestId| pb::RequestPermissionResponse {
                    request_id: id.to_string(),
                },
            )
            .await
        })
        .await
    }

    async fn report_idle(
        &self,
        request: Request<pb::IdleNotification>,
    ) -> Result<Response<pb::ReportIdleResponse>, Status> {
        self.done(request, "ReportIdle", from_wire::report_idle)
            .await
    }

    async fn report_usage(
        &self,
        request: Request<pb::UsageReport>,
    ) -> Result<Response<pb::UsageStatus>, Status> {
        self.apply(
            request,
            "ReportUsage",
            from_wire::report_usage,
            |s: Standing| s.to_pb(),
        )
        .await
    }

    async fn report_tool_call(
        &self,
        request: Request<pb::ToolCallReport>,
    ) -> Result<Response<pb::ReportToolCallResponse>, Status> {
        self.done(request, "ReportToolCall", from_wire::report_tool_call)
            .await
    }

    async fn leave(
        &self,
        request: Request<pb::LeaveRequest>,
    ) -> Result<Response<pb::LeaveResponse>, Status> {
        self.done(request, "Leave", from_wire::leave).await
    }

    async fn list_tasks(
        &self,
        request: Request<pb::ListTasksRequest>,
    ) -> Result<Response<pb::ListTasksResponse>, Status> {
        self.apply(request, "ListTasks", from_wire::list_tasks, tasks_page)
            .await
    }

    async fn claim_task(
        &self,
        request: Request<pb::ClaimTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        self.apply(request, "ClaimTask", from_wire::claim_task, |t: Task| {
            t.to_pb()
        })
        .await
    }

    async fn complete_task(
        &self,
        request: Request<pb::CompleteTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        self.apply(
            request,
            "CompleteTask",
            from_wire::complete_task,
            |t: Task| t.to_pb(),
        )
        .await
    }
}

impl OperatorService {
    /// Applies the op `translate` makes of the request, for the caller its
    /// token names, as an `Operator` call.
    async fn apply<T, A: Answered, R>(
        &self,
        request: Request<T>,
        translate: impl FnOnce(T) -> Result<Op, HubError>,
        render: impl FnOnce(A) -> R,
    ) -> Result<Response<R>, Status> {
        let claim = claim_of(&request, &self.tokens);
        let name = token_of(&request).and_then(|token| {
            self.tokens
                .named
                .iter()
                .find(|(_, t)| same_token(&token, t))
                .map(|(name, _)| name.clone())
        });
        let op = translate(request.into_inner()).map(|op| match name {
            Some(name) => signed(op, &name),
            None => op,
        });
        Ok(Response::new(render(
            self.hub.apply(claim, Call::Operator, op).await?,
        )))
    }
}

/// `op`, decided by the operator `name` (a named operator token): the
/// request's history, and so the audit trail, says who.
fn signed(op: Op, name: &str) -> Op {
    let by = format!("operator {name}");
    match op {
        Op::ReviewPlan {
            request_id,
            verdict,
            ..
        } => Op::ReviewPlan {
            request_id,
            verdict,
            by,
        },
        Op::ReviewPermission {
            request_id,
            approve,
            feedback,
            ..
        } => Op::ReviewPermission {
            request_id,
            approve,
            feedback,
            by,
        },
        Op::ReviewResult {
            request_id,
            approve,
            feedback,
            ..
        } => Op::ReviewResult {
            request_id,
            approve,
            feedback,
            by,
        },
        Op::ReviewAmendment {
            request_id,
            approve,
            feedback,
            ..
        } => Op::ReviewAmendment {
            request_id,
            approve,
            feedback,
            by,
        },
        other => other,
    }
}

#[tonic::async_trait]
impl pb::operator_server::Operator for OperatorService {
    async fn review_plan(
        &self,
        request: Request<pb::PlanReview>,
    ) -> Result<Response<pb::PlanApprovalResponse>, Status> {
        let about = About::Answers(&request.get_ref().request_id);
        let begun = begin("mesh.v1.Operator/ReviewPlan", request.metadata(), about);
        traced(begun, async {
            self.apply(
                request,
                |review| from_wire::review_plan(review, "operator"),
                |r: mesh_core::protocol::Request| plan_response(&r),
            )
            .await
        })
        .await
    }

    async fn review_result(
        &self,
        request: Request<pb::ResultReview>,
    ) -> Result<Response<pb::ProtocolState>, Status> {
        let about = About::Answers(&request.get_ref().request_id);
        let begun = begin("mesh.v1.Operator/ReviewResult", request.metadata(), about);
        traced(begun, async {
            self.apply(
                request,
                |review| from_wire::review_result(review, "operator"),
                |r: mesh_core::protocol::Request| r.to_pb(),
            )
            .await
        })
        .await
    }

    async fn list_audit(
        &self,
        request: Request<pb::ListAuditRequest>,
    ) -> Result<Response<pb::ListAuditResponse>, Status> {
        let claim = claim_of(&request, &self.tokens);
        let ask = request.into_inner();
        let limit = match ask.page_size {
            0 => 1_000,
            n => usize::try_from(n).unwrap_or(1_000).min(1_000),
        };
        let entries = self
            .hub
            .call(|reply| Command::Audit {
                claim,
                since: ask.since_unix_ms,
                after_seq: ask.after_seq,
                limit,
                reply,
            })
            .await?;
        let last_seq = entries.last().map_or(0, |e| e.seq);
        let entries = entries
            .iter()
            .map(|e| serde_json::to_string(e).map_err(|e| HubError::Internal(e.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Response::new(pb::ListAuditResponse { entries, last_seq }))
    }

    async fn review_amendment(
        &self,
        request: Request<pb::AmendmentReview>,
    ) -> Result<Response<pb::ProtocolState>, Status> {
        let about = About::Answers(&request.get_ref().request_id);
        let begun = begin(
            "mesh.v1.Operator/ReviewAmendment",
            request.metadata(),
            about,
        );
        traced(begun, async {
            self.apply(
                request,
                |review| from_wire::review_amendment(review, "operator"),
                |r: mesh_core::protocol::Request| r.to_pb(),
            )
            .await
        })
        .await
    }

    async fn request_shutdown(
        &self,
        request: Request<pb::ShutdownRequest>,
    ) -> Result<Response<pb::ShutdownTicket>, Status> {
        let mut request = request;
        if request.get_ref().request_id.is_empty() {
            // The lead names the request here rather than in the hub, so
            // that its trace can start before the hub sees it.
            request.get_mut().request_id = RequestId::generate().to_string();
        }
        let about = About::Opens(
            &request.get_ref().request_id,
            mesh_core::protocol::Kind::Shutdown,
        );
        let begun = begin(
            "mesh.v1.Operator/RequestShutdown",
            request.metadata(),
            about,
        );
        traced(begun, async {
            self.apply(request, from_wire::request_shutdown, |id: RequestId| {
                pb::ShutdownTicket {
                    request_id: id.to_string(),
                }
            })
            .await
        })
        .await
    }

    async fn review_permission(
        &self,
        request: Request<pb::PermissionReview>,
    ) -> Result<Response<pb::PermissionResponse>, Status> {
        let about = About::Answers(&request.get_ref().request_id);
        let begun = begin(
            "mesh.v1.Operator/ReviewPermission",
            request.metadata(),
            about,
        );
        traced(begun, async {
            self.apply(
                request,
                from_wire::review_permission,
                |r: mesh_core::protocol::Request| permission_response(&r),
            )
            .await
        })
        .await
    }

    async fn list_team(
        &self,
        request: Request<pb::ListTeamRequest>,
    ) -> Result<Response<pb::ListTeamResponse>, Status> {
        self.apply(request, from_wire::list_team, team_page).await
    }

    async fn list_requests(
        &self,
        request: Request<pb::ListRequestsRequest>,
    ) -> Result<Response<pb::ListRequestsResponse>, Status> {
        self.apply(request, from_wire::list_requests, requests_page)
            .await
    }

    async fn get_request(
        &self,
        request: Request<pb::GetRequestRequest>,
    ) -> Result<Response<pb::ProtocolState>, Status> {
        self.apply(
            request,
            from_wire::get_request,
            |r: mesh_core::protocol::Request| r.to_pb(),
        )
        .await
    }

    type WatchStream = BoxStream<pb::Event>;

    async fn watch(
        &self,
        request: Request<pb::WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let claim = claim_of(&request, &self.tokens);
        let events = self
            .hub
            .call(|reply| Command::Watch { claim, reply })
            .await?;
        events.reset_when_stuck();
        Ok(Response::new(Box::pin(events.map(|event| {
            event
                .map(|e| shared::wire::event(e.0, &e.1))
                .map_err(Status::from)
        }))))
    }

    async fn create_task(
        &self,
        request: Request<pb::CreateTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        self.apply(request, from_wire::create_task, |t: Task| t.to_pb())
            .await
    }

    async fn list_tasks(
        &self,
        request: Request<pb::ListTasksRequest>,
    ) -> Result<Response<pb::ListTasksResponse>, Status> {
        self.apply(request, from_wire::list_tasks, tasks_page).await
    }

    async fn spawn_teammate(
        &self,
        request: Request<pb::SpawnTeammateRequest>,
    ) -> Result<Response<pb::SpawnTeammateResponse>, Status> {
        let claim = claim_of(&request, &self.tokens);
        let request = from_wire::spawn(request.into_inner());
        let spawned = self
            .hub
            .call(|reply| Command::Spawn {
                claim,
                request,
                reply,
            })
            .await?;
        Ok(Response::new(pb::SpawnTeammateResponse {
            pid: spawned.pid,
            log_path: spawned.log_path,
        }))
    }

    async fn set_budget(
        &self,
        request: Request<pb::SetBudgetRequest>,
    ) -> Result<Response<pb::UsageStatus>, Status> {
        self.apply(request, from_wire::set_budget, |s: Standing| s.to_pb())
            .await
    }
}
