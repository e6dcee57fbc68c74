//! The wire's requests as the core's ops: each function checks what the
//! core cannot (sizes, shapes, ids, enum numbers), names the field at
//! fault, and hands over the op in the core's words (each its own type, a
//! [`mesh_core::team::Op`]). The gRPC services
//! use them; so does the model reviewer, whose verdict arrives as a
//! `PlanReview`.

use mesh_core::{
    error::FieldError,
    grant::{Grant, Mode},
    limits,
    names::{Name, RequestId},
    op::{
        Ack, ClaimTask, CompleteTask, CreateTask, Decide, GetRequest, Join, Leave, ListRequests,
        ListTasks, ListTeam, PlanVerdict, ReportIdle, ReportToolCall, ReportUsage,
        RequestAmendment, RequestPermission, RequestShutdown, RespondShutdown, ReviewAmendment,
        ReviewPermission, ReviewPlan, ReviewResult, SetBudget, SubmitPlan, SubmitResult,
    },
    protocol::{Kind, Status},
    tasks::{NewTask, TaskStatus},
    usage::Usage,
};
use shared::{
    pb,
    plan::{self, Plan},
};

use crate::{
    error::HubError,
    hub::SendText,
    paging::{Page, MEMBERS, REQUESTS, TASKS},
};

/// `SubmitPlan`.
pub(crate) fn submit_plan(request: pb::PlanApprovalRequest) -> Result<SubmitPlan, HubError> {
    plan::validate("plan", request.plan.as_ref())?;
    let request_id = RequestId::for_new("request_id", &request.request_id)?;
    let supersedes = match request.supersedes.as_str() {
        "" => None,
        old => Some(RequestId::existing("supersedes", old)?),
    };
    Ok(SubmitPlan {
        request_id,
        plan: Plan::from(&request.plan.unwrap_or_default()),
        supersedes,
    })
}

/// `SubmitResult`'s fields, checked before git sees them: the request id,
/// the task, the base (a commit id in hex), the summary, the diff and the
/// test output within their limits.
pub(crate) fn check_result(request: &pb::ResultRequest) -> Result<(), HubError> {
    RequestId::for_new("request_id", &request.request_id)?;
    if request.task_id.is_empty() {
        return Err(FieldError::new(
            "task_id",
            "is required: the claimed task this is the result of",
        )
        .into());
    }
    limits::check("task_id", &request.task_id, limits::ID)?;
    let hex = request.base.len() >= 4
        && request.base.len() <= 64
        && request.base.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex {
        return Err(
            FieldError::new("base", "must be the commit id (hex) the change is against").into(),
        );
    }
    if request.summary.trim().is_empty() {
        return Err(
            FieldError::new("summary", "is required: it is the landed commit's message").into(),
        );
    }
    limits::check("summary", &request.summary, limits::REASON)?;
    if request.diff.is_empty() {
        return Err(
            FieldError::new("diff", "is required: git diff --binary BASE of the work").into(),
        );
    }
    limits::check("diff", &request.diff, limits::DIFF)?;
    limits::check("test_output", &request.test_output, limits::TEXT)?;
    if !request.supersedes.is_empty() {
        RequestId::existing("supersedes", &request.supersedes)?;
    }
    Ok(())
}

/// `SubmitResult`, once the edge made a commit of the diff.
pub(crate) fn submit_result(
    request: pb::ResultRequest,
    prepared: crate::git::Prepared,
) -> Result<SubmitResult, HubError> {
    let request_id = RequestId::for_new("request_id", &request.request_id)?;
    let supersedes = match request.supersedes.as_str() {
        "" => None,
        old => Some(RequestId::existing("supersedes", old)?),
    };
    Ok(SubmitResult {
        request_id,
        result: Box::new(mesh_core::result::WorkResult {
            task_id: request.task_id,
            base: request.base,
            commit: prepared.commit,
            summary: request.summary,
            diff: request.diff,
            test_output: request.test_output,
            files: prepared.files,
        }),
        supersedes,
    })
}

/// `RequestAmendment`.
pub(crate) fn request_amendment(
    request: pb::AmendmentRequest,
) -> Result<RequestAmendment, HubError> {
    let request_id = RequestId::for_new("request_id", &request.request_id)?;
    for (field, items) in [("files", &request.files), ("steps", &request.steps)] {
        if items.len() > limits::LIST_ITEMS {
            return Err(FieldError::new(
                field,
                format!(
                    "has {} items; the limit is {}",
                    items.len(),
                    limits::LIST_ITEMS
                ),
            )
            .into());
        }
        for (i, item) in items.iter().enumerate() {
            limits::check(
                &format!("{field}[{i}]"),
                item,
                limits::GLOB.max(limits::REASON),
            )?;
        }
    }
    for (i, file) in request.files.iter().enumerate() {
        limits::check(&format!("files[{i}]"), file, limits::GLOB)?;
    }
    limits::check("why", &request.why, limits::REASON)?;
    Ok(RequestAmendment {
        request_id,
        files: request.files,
        steps: request.steps,
        why: request.why,
    })
}

/// `ReviewAmendment`, decided by `by`.
pub(crate) fn review_amendment(
    review: pb::AmendmentReview,
    by: &str,
) -> Result<ReviewAmendment, HubError> {
    let request_id = RequestId::existing("request_id", &review.request_id)?;
    Ok(ReviewAmendment::new(
        request_id,
        review.approve,
        review.feedback,
        by,
    )?)
}

/// `ReviewResult`, decided by `by`.
pub(crate) fn review_result(review: pb::ResultReview, by: &str) -> Result<ReviewResult, HubError> {
    let request_id = RequestId::existing("request_id", &review.request_id)?;
    Ok(ReviewResult::new(
        request_id,
        review.approve,
        review.feedback,
        by,
    )?)
}

/// `RequestPermission`.
pub(crate) fn request_permission(
    request: pb::PermissionRequest,
) -> Result<RequestPermission, HubError> {
    if request.tool.is_empty() {
        return Err(FieldError::new("tool", "is required").into());
    }
    limits::check("tool", &request.tool, limits::TOOL)?;
    limits::check("args_json", &request.args_json, limits::ARGS_JSON)?;
    let args: serde_json::Value = if request.args_json.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::from_str(&request.args_json)
            .map_err(|e| FieldError::new("args_json", format!("is not JSON: {e}")))?
    };
    let request_id = RequestId::for_new("request_id", &request.request_id)?;
    let path = args.get("path").and_then(|p| p.as_str()).map(str::to_owned);
    Ok(RequestPermission {
        request_id,
        tool: request.tool,
        args_json: request.args_json,
        path,
    })
}

/// `ReviewPlan`, decided by `by`.
pub(crate) fn review_plan(review: pb::PlanReview, by: &str) -> Result<ReviewPlan, HubError> {
    let request_id = RequestId::existing("request_id", &review.request_id)?;
    limits::check("feedback", &review.feedback, limits::REASON)?;
    let verdict = if review.approve {
        let grant = match &review.grant {
            Some(grant) => Grant::try_from(grant)?,
            None => Grant::of_plan(Mode::AcceptEdits),
        };
        PlanVerdict::Approve {
            grant,
            feedback: review.feedback,
            allow_overlap: !review.refuse_overlap,
        }
    } else {
        PlanVerdict::reject(review.feedback)?
    };
    Ok(ReviewPlan {
        request_id,
        verdict,
        by: by.to_owned(),
    })
}

/// `Decide`, by `by`: the core reviews the request as its kind says (and
/// checks the feedback as that review does).
pub(crate) fn decide(decide: pb::DecideRequest, by: &str) -> Result<Decide, HubError> {
    let request_id = RequestId::existing("request_id", &decide.request_id)?;
    let grant = decide.grant.as_ref().map(Grant::try_from).transpose()?;
    let kind = match decide.r#type {
        0 => None,
        n => Some(
            pb::RequestType::try_from(n)
                .and_then(Kind::try_from)
                .map_err(|_| FieldError::new("type", format!("{n} is not a RequestType")))?,
        ),
    };
    Ok(Decide {
        request_id,
        approve: decide.approve,
        feedback: decide.feedback,
        grant,
        allow_overlap: !decide.refuse_overlap,
        by: by.to_owned(),
        kind,
    })
}

/// `ReviewPermission`, by `by`.
pub(crate) fn review_permission(
    review: pb::PermissionReview,
    by: &str,
) -> Result<ReviewPermission, HubError> {
    let request_id = RequestId::existing("request_id", &review.request_id)?;
    limits::check("feedback", &review.feedback, limits::REASON)?;
    Ok(ReviewPermission {
        request_id,
        approve: review.approve,
        feedback: review.feedback,
        by: by.to_owned(),
    })
}

/// `ListRequests`: status and type UNSPECIFIED match any.
pub(crate) fn list_requests(filter: pb::ListRequestsRequest) -> Result<ListRequests, HubError> {
    let status = match filter.status {
        0 => None,
        n => Some(
            pb::RequestStatus::try_from(n)
                .and_then(Status::try_from)
                .map_err(|_| FieldError::new("status", format!("{n} is not a RequestStatus")))?,
        ),
    };
    let kind = match filter.r#type {
        0 => None,
        n => Some(
            pb::RequestType::try_from(n)
                .and_then(Kind::try_from)
                .map_err(|_| FieldError::new("type", format!("{n} is not a RequestType")))?,
        ),
    };
    Ok(ListRequests {
        status,
        kind,
        page: Page::parse(filter.page_size, &filter.page_token, REQUESTS)?.ask(),
    })
}

/// `GetRequest`.
pub(crate) fn get_request(request: pb::GetRequestRequest) -> Result<GetRequest, HubError> {
    Ok(GetRequest {
        request_id: RequestId::existing("request_id", &request.request_id)?,
    })
}

/// `CreateTask`: the task board checks its fields (the core's one check).
pub(crate) fn create_task(request: pb::CreateTaskRequest) -> Result<CreateTask, HubError> {
    Ok(CreateTask {
        task_id: uuid::Uuid::new_v4().to_string(),
        task: NewTask {
            subject: request.subject,
            description: request.description,
            blocked_by: request.blocked_by,
            files: request.files,
            review: shared::wire::review_from_pb("review", request.review)?,
            origin: Default::default(),
        },
    })
}

/// `ListTasks`, of either service.
pub(crate) fn list_tasks(request: pb::ListTasksRequest) -> Result<ListTasks, HubError> {
    Ok(ListTasks {
        status: pb::TaskStatus::try_from(request.status)
            .and_then(TaskStatus::try_from)
            .ok(),
        page: Page::parse(request.page_size, &request.page_token, TASKS)?.ask(),
    })
}

/// `ClaimTask`: no id claims the oldest claimable task.
pub(crate) fn claim_task(request: pb::ClaimTaskRequest) -> Result<ClaimTask, HubError> {
    limits::check("task_id", &request.task_id, limits::ID)?;
    Ok(ClaimTask {
        task_id: (!request.task_id.is_empty()).then_some(request.task_id),
    })
}

/// `CompleteTask`.
pub(crate) fn complete_task(request: pb::CompleteTaskRequest) -> Result<CompleteTask, HubError> {
    limits::check("task_id", &request.task_id, limits::ID)?;
    limits::check("summary", &request.summary, limits::TEXT)?;
    if request.task_id.is_empty() {
        return Err(FieldError::new("task_id", "is required").into());
    }
    let outputs = request
        .outputs
        .into_iter()
        .enumerate()
        .map(|(i, o)| {
            shared::wire::output_from_pb(o)
                .map_err(|e| FieldError::new(format!("outputs[{i}].content"), e.problem))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(CompleteTask {
        task_id: request.task_id,
        completion: mesh_core::tasks::Completion {
            summary: request.summary,
            outputs,
            reply: request.reply,
        },
    })
}

/// `ReportUsage`.
pub(crate) fn report_usage(report: pb::UsageReport) -> Result<ReportUsage, HubError> {
    mesh_core::usage::check_epoch(&report.epoch)?;
    let totals = report
        .totals
        .as_ref()
        .map(Usage::from)
        .ok_or_else(|| FieldError::new("totals", "is required"))?;
    Ok(ReportUsage {
        epoch: report.epoch,
        totals,
    })
}

/// `SetBudget`.
pub(crate) fn set_budget(request: pb::SetBudgetRequest) -> Result<SetBudget, HubError> {
    Ok(SetBudget {
        name: Name::parse("name", &request.name)?,
        token_budget: request.token_budget,
    })
}

/// `Join`.
pub(crate) fn join(request: pb::JoinRequest) -> Result<Join, HubError> {
    let name = Name::parse("name", &request.name)?;
    limits::check("role", &request.role, limits::ROLE)?;
    if request.role.trim().is_empty() {
        return Err(FieldError::new("role", "is required").into());
    }
    Ok(Join {
        name,
        role: request.role,
        token_budget: request.token_budget,
        member_id: uuid::Uuid::new_v4().to_string(),
        session_token: shared::auth::new_token(),
        sandbox: request
            .sandbox
            .map(|s| mesh_core::sandbox::Sandbox::parse("sandbox", &s.kind, &s.confines, &s.detail))
            .transpose()?,
        decoding: request
            .decoding
            .map(|d| {
                mesh_core::decoding::Decoding::parse(
                    "decoding",
                    &d.model,
                    &d.server,
                    &d.constrain,
                    &d.why,
                )
            })
            .transpose()?,
    })
}

/// `Ack`.
pub(crate) fn ack(request: pb::AckRequest) -> Result<Ack, HubError> {
    Ok(Ack { seq: request.seq })
}

/// `Send`.
pub(crate) fn send(request: pb::SendRequest) -> Result<SendText, HubError> {
    let text = request
        .text
        .ok_or_else(|| FieldError::new("text", "is required"))?;
    limits::check("text.content", &text.content, limits::TEXT)?;
    limits::check("message_id", &request.message_id, limits::ID)?;
    limits::check("to", &request.to, limits::ID)?;
    if request.to.is_empty() {
        return Err(FieldError::new("to", "is required").into());
    }
    Ok(SendText {
        to: request.to,
        message_id: (!request.message_id.is_empty()).then_some(request.message_id),
        content: text.content,
    })
}

/// `ReportIdle`.
pub(crate) fn report_idle(idle: pb::IdleNotification) -> Result<ReportIdle, HubError> {
    limits::check("reason", &idle.reason, limits::REASON)?;
    Ok(ReportIdle {
        reason: idle.reason,
    })
}

/// `ReportToolCall`: over-long fields are cut, not refused, so that every
/// tool call stays on the record.
pub(crate) fn report_tool_call(report: pb::ToolCallReport) -> Result<ReportToolCall, HubError> {
    if report.tool.is_empty() {
        return Err(FieldError::new("tool", "is required").into());
    }
    Ok(ReportToolCall {
        tool: limits::cut(&report.tool, limits::TOOL),
        args_json: limits::cut(&report.args_json, limits::REPORT_ARGS_JSON),
        allowed: report.allowed,
        outcome: limits::cut(&report.outcome, limits::REPORT_OUTCOME),
    })
}

/// `Leave`.
pub(crate) fn leave(request: pb::LeaveRequest) -> Result<Leave, HubError> {
    limits::check("reason", &request.reason, limits::REASON)?;
    Ok(Leave {
        reason: request.reason,
    })
}

/// `RequestShutdown`, asked by `by`: a deadline of 0 is the lead's default.
pub(crate) fn request_shutdown(
    request: pb::ShutdownRequest,
    by: &str,
) -> Result<RequestShutdown, HubError> {
    let target = Name::parse("target", &request.target)?;
    limits::check("reason", &request.reason, limits::REASON)?;
    let request_id = RequestId::for_new("request_id", &request.request_id)?;
    Ok(RequestShutdown {
        request_id,
        target,
        reason: request.reason,
        deadline_unix_ms: (request.deadline_unix_ms != 0).then_some(request.deadline_unix_ms),
        asked_by: by.to_owned(),
    })
}

/// `RespondShutdown`.
pub(crate) fn respond_shutdown(
    response: pb::ShutdownResponse,
) -> Result<RespondShutdown, HubError> {
    let request_id = RequestId::existing("request_id", &response.request_id)?;
    limits::check("reason", &response.reason, limits::REASON)?;
    Ok(RespondShutdown {
        request_id,
        approve: response.approve,
        reason: response.reason,
    })
}

/// `ListTeam`.
pub(crate) fn list_team(request: pb::ListTeamRequest) -> Result<ListTeam, HubError> {
    Ok(ListTeam {
        page: Page::parse(request.page_size, &request.page_token, MEMBERS)?.ask(),
    })
}

/// `SpawnTeammate`: its fields as given; the hub checks them (after the
/// caller), and the launcher checks the files they name.
pub(crate) fn spawn(request: pb::SpawnTeammateRequest) -> crate::launch::SpawnAsk {
    crate::launch::SpawnAsk {
        name: request.name,
        role: request.role,
        script_path: request.script_path,
        workspace: request.workspace,
        teammate_bin: request.teammate_bin,
        model: request.model,
        task: request.task,
        base_url: request.base_url,
        api_key_env: request.api_key_env,
        token_budget: request.token_budget,
        max_tokens: request.max_tokens,
        context_window: request.context_window,
        ca_pem: request.ca_pem,
    }
}
