//! `mesh.v1.Lead`, the teammates' service: joining, the inbox and its
//! messages, the plan, result, amendment, permission and shutdown
//! handshakes, reports, the repository and the tasks.

use mesh_core::{
    access::Call,
    names::RequestId,
    op::{Joined, Sent},
    tasks::Task,
    usage::Standing,
};
use shared::{pb, wire::ToPb};
use tonic::{Request, Response, Status};

use super::{
    inbox::InboxStream,
    pages::tasks_page,
    trace::{begin, traced, About},
    BoxStream, LeadService,
};
use crate::{
    callers::claim_of,
    error::HubError,
    from_wire,
    hub::{Claim, Command, HubOp},
};

impl LeadService {
    /// `SubmitResult`, in its span.
    async fn submit_result_traced(
        &self,
        request: Request<pb::ResultRequest>,
    ) -> Result<Response<pb::SubmitResultResponse>, Status> {
        // The caller is admitted first, once: nobody unknown makes git work.
        let claim = self.admitted(&request, "SubmitResult").await?;
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
        self.apply_as(
            claim,
            request,
            Call::Teammate("SubmitResult"),
            |r| from_wire::submit_result(r, prepared),
            |id: RequestId| pb::SubmitResultResponse {
                request_id: id.to_string(),
            },
        )
        .await
    }

    /// Applies the op `translate` makes of the request, for the caller its
    /// token names, as `Lead.<rpc>`.
    async fn apply<T, O: HubOp, R>(
        &self,
        request: Request<T>,
        rpc: &'static str,
        translate: impl FnOnce(T) -> Result<O, HubError>,
        render: impl FnOnce(O::Reply) -> R,
    ) -> Result<Response<R>, Status> {
        self.apply_at(request, Call::Teammate(rpc), translate, render)
            .await
    }

    /// The caller, admitted to call `Lead.<rpc>` (by the hub, which places
    /// a session), for work done before the op: the op then takes it as it
    /// is ([`Claim::Admitted`]).
    async fn admitted<T>(&self, request: &Request<T>, rpc: &'static str) -> Result<Claim, Status> {
        let claim = claim_of(request, &self.tokens).await;
        let admitted = self
            .hub
            .call(|reply| Command::Admit {
                claim,
                door: Call::Teammate(rpc),
                reply,
            })
            .await?;
        Ok(Claim::Admitted(admitted))
    }

    /// [`Self::apply`] for an op that answers nothing but success.
    async fn done<T, O: HubOp<Reply = ()>, R: Default>(
        &self,
        request: Request<T>,
        rpc: &'static str,
        translate: impl FnOnce(T) -> Result<O, HubError>,
    ) -> Result<Response<R>, Status> {
        self.apply(request, rpc, translate, |()| R::default()).await
    }

    /// Applies the op `translate` makes of the request, for the caller its
    /// token names, come in at `door`.
    async fn apply_at<T, O: HubOp, R>(
        &self,
        request: Request<T>,
        door: Call<'static>,
        translate: impl FnOnce(T) -> Result<O, HubError>,
        render: impl FnOnce(O::Reply) -> R,
    ) -> Result<Response<R>, Status> {
        let claim = claim_of(&request, &self.tokens).await;
        self.apply_as(claim, request, door, translate, render).await
    }

    /// [`Self::apply_at`] for the caller `claim` names.
    async fn apply_as<T, O: HubOp, R>(
        &self,
        claim: Claim,
        request: Request<T>,
        door: Call<'static>,
        translate: impl FnOnce(T) -> Result<O, HubError>,
        render: impl FnOnce(O::Reply) -> R,
    ) -> Result<Response<R>, Status> {
        let op = translate(request.into_inner());
        Ok(Response::new(render(
            self.hub.apply(claim, door, op).await?,
        )))
    }
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
        let claim = claim_of(&request, &self.tokens).await;
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
