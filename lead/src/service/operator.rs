//! `mesh.v1.Operator`, the operators' service: the decisions (signed by a
//! named operator's token), the lists, the audit trail, shutdown, the
//! events, tasks, spawning and budgets.

use mesh_core::{
    access::{Call, Role},
    names::RequestId,
    tasks::Task,
    usage::Standing,
};
use shared::{
    pb,
    wire::{permission_response, plan_response, ToPb},
};
use tokio_stream::StreamExt as _;
use tonic::{Request, Response, Status};

use super::{
    pages::{requests_page, tasks_page, team_page},
    trace::{begin, traced, About},
    BoxStream, OperatorService,
};
use crate::{
    callers::{claim_of, signer},
    error::HubError,
    from_wire,
    hub::{Command, HubOp},
};

impl OperatorService {
    /// Applies the op `translate` makes of the request, for the caller its
    /// token names, as an `Operator` call.
    async fn apply<T, O: HubOp, R>(
        &self,
        request: Request<T>,
        translate: impl FnOnce(T) -> Result<O, HubError>,
        render: impl FnOnce(O::Reply) -> R,
    ) -> Result<Response<R>, Status> {
        self.signed(request, |ask, _| translate(ask), render).await
    }

    /// [`Self::apply`] for a decision, which `translate` signs with the
    /// caller's name as the history shows it ([`signer`]).
    async fn signed<T, O: HubOp, R>(
        &self,
        request: Request<T>,
        translate: impl FnOnce(T, &str) -> Result<O, HubError>,
        render: impl FnOnce(O::Reply) -> R,
    ) -> Result<Response<R>, Status> {
        let claim = claim_of(&request, &self.tokens).await;
        let op = translate(request.into_inner(), &signer(&claim));
        Ok(Response::new(render(self.hub.operate(claim, op).await?)))
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
            self.signed(
                request,
                from_wire::review_plan,
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
            self.signed(
                request,
                from_wire::review_result,
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
        let claim = claim_of(&request, &self.tokens).await;
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
            self.signed(
                request,
                from_wire::review_amendment,
                |r: mesh_core::protocol::Request| r.to_pb(),
            )
            .await
        })
        .await
    }

    async fn get_leadership(
        &self,
        request: Request<pb::GetLeadershipRequest>,
    ) -> Result<Response<pb::Leadership>, Status> {
        let claim = claim_of(&request, &self.tokens).await;
        self.hub
            .call(|reply| Command::Admit {
                claim,
                door: Call::Operator(Role::Viewer),
                reply,
            })
            .await?;
        Ok(Response::new(leadership(&self.standing.borrow())))
    }

    async fn decide(
        &self,
        request: Request<pb::DecideRequest>,
    ) -> Result<Response<pb::ProtocolState>, Status> {
        let about = About::Answers(&request.get_ref().request_id);
        let begun = begin("mesh.v1.Operator/Decide", request.metadata(), about);
        traced(begun, async {
            self.signed(
                request,
                from_wire::decide,
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
            self.signed(request, from_wire::request_shutdown, |id: RequestId| {
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
            self.signed(
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
        let claim = claim_of(&request, &self.tokens).await;
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
        let claim = claim_of(&request, &self.tokens).await;
        let request = from_wire::spawn(request.into_inner());
        let spawned = self
            .hub
            .call(|reply| Command::Spawn {
                claim,
                request: Box::new(request),
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

/// What `GetLeadership` answers.
fn leadership(now: &crate::leadership::Standing) -> pb::Leadership {
    use crate::leadership::Role;
    pb::Leadership {
        role: match now.role {
            Role::Sole => pb::LeadRole::Sole,
            Role::Active => pb::LeadRole::Active,
            Role::Standby => pb::LeadRole::Standby,
        } as i32,
        url: now.url.clone(),
        epoch: now.epoch,
        lease_expires_unix_ms: now.lease_expires_unix_ms,
        store: now.store.clone(),
        leader_url: now.leader_url.clone(),
        leader_console: now.leader_console.clone(),
    }
}
