//! Requests on the wire: their kinds and states, the protocol's state of
//! one (`ProtocolState`) with its reviews, a plan, and the answers the
//! teammate and the operator see.

use crate::{pb, plan::Plan};
use mesh_core::{
    grant::Grant,
    protocol::{Kind, Request, ReviewStep, Status},
};
use prost::UnknownEnumValue;

use super::ToPb;

impl ToPb for Kind {
    type Pb = pb::RequestType;
    fn to_pb(&self) -> pb::RequestType {
        match self {
            Kind::PlanApproval => pb::RequestType::PlanApproval,
            Kind::Shutdown => pb::RequestType::Shutdown,
            Kind::Permission => pb::RequestType::Permission,
            Kind::Result => pb::RequestType::Result,
            Kind::Amendment => pb::RequestType::Amendment,
        }
    }
}

/// [`Kind`] from the wire: UNSPECIFIED is no kind (an error of 0). From a
/// number, `pb::RequestType::try_from(n).and_then(Kind::try_from)`.
impl TryFrom<pb::RequestType> for Kind {
    type Error = UnknownEnumValue;
    fn try_from(value: pb::RequestType) -> Result<Self, UnknownEnumValue> {
        match value {
            pb::RequestType::PlanApproval => Ok(Kind::PlanApproval),
            pb::RequestType::Shutdown => Ok(Kind::Shutdown),
            pb::RequestType::Permission => Ok(Kind::Permission),
            pb::RequestType::Result => Ok(Kind::Result),
            pb::RequestType::Amendment => Ok(Kind::Amendment),
            pb::RequestType::Unspecified => Err(UnknownEnumValue(value as i32)),
        }
    }
}

impl ToPb for Status {
    type Pb = pb::RequestStatus;
    fn to_pb(&self) -> pb::RequestStatus {
        match self {
            Status::Pending => pb::RequestStatus::Pending,
            Status::Approved => pb::RequestStatus::Approved,
            Status::Rejected => pb::RequestStatus::Rejected,
            Status::Expired => pb::RequestStatus::Expired,
        }
    }
}

/// [`Status`] from the wire: UNSPECIFIED is no status (an error of 0). From
/// a number, `pb::RequestStatus::try_from(n).and_then(Status::try_from)`.
impl TryFrom<pb::RequestStatus> for Status {
    type Error = UnknownEnumValue;
    fn try_from(value: pb::RequestStatus) -> Result<Self, UnknownEnumValue> {
        match value {
            pb::RequestStatus::Pending => Ok(Status::Pending),
            pb::RequestStatus::Approved => Ok(Status::Approved),
            pb::RequestStatus::Rejected => Ok(Status::Rejected),
            pb::RequestStatus::Expired => Ok(Status::Expired),
            pb::RequestStatus::Unspecified => Err(UnknownEnumValue(value as i32)),
        }
    }
}

impl ToPb for ReviewStep {
    type Pb = pb::ReviewStep;
    fn to_pb(&self) -> pb::ReviewStep {
        pb::ReviewStep {
            reviewer: self.reviewer.clone(),
            verdict: self.verdict.clone(),
            words: self.words.clone(),
            at_unix_ms: self.at_unix_ms,
        }
    }
}

impl ToPb for Request {
    type Pb = pb::ProtocolState;
    fn to_pb(&self) -> pb::ProtocolState {
        pb::ProtocolState {
            payload_json: self.opening.payload_json.clone(),
            ..request_without_payload(self)
        }
    }
}

/// `request` for the wire without its payload (not copied), as the event
/// history keeps it.
pub fn request_without_payload(request: &Request) -> pb::ProtocolState {
    pb::ProtocolState {
        request_id: request.opening.id.to_string(),
        r#type: request.opening.kind.to_pb() as i32,
        sender: request.opening.sender.clone(),
        target: request.opening.target.clone(),
        status: request.status.to_pb() as i32,
        payload_json: String::new(),
        feedback: request.feedback.clone(),
        created_at_unix_ms: request.created_at_unix_ms,
        resolved_at_unix_ms: request.resolved_at_unix_ms.unwrap_or(0),
        reviews: request.reviews.iter().map(ReviewStep::to_pb).collect(),
        waits_for: request.waits_for.clone(),
        grant: request
            .decision
            .as_ref()
            .and_then(|d| d.grant.as_ref())
            .map(Grant::to_pb),
    }
}

impl ToPb for Plan {
    type Pb = pb::Plan;
    fn to_pb(&self) -> pb::Plan {
        pb::Plan {
            summary: self.summary.clone(),
            steps: self.steps.clone(),
            files: self.files.clone(),
            tests: self.tests.clone(),
            body: self.body.clone(),
            task_id: self.task_id.clone(),
        }
    }
}

impl From<&pb::Plan> for Plan {
    fn from(plan: &pb::Plan) -> Self {
        Self {
            summary: plan.summary.clone(),
            steps: plan.steps.clone(),
            files: plan.files.clone(),
            tests: plan.tests.clone(),
            body: plan.body.clone(),
            task_id: plan.task_id.clone(),
        }
    }
}

/// The answer to a plan request, as the teammate and the operator see it.
pub fn plan_response(request: &Request) -> pb::PlanApprovalResponse {
    pb::PlanApprovalResponse {
        request_id: request.id().to_string(),
        approve: request.status == Status::Approved,
        feedback: request.feedback.clone(),
        grant: request
            .decision
            .as_ref()
            .and_then(|d| d.grant.as_ref())
            .map(Grant::to_pb),
    }
}

/// The answer to a permission request, as the teammate and the operator see it.
pub fn permission_response(request: &Request) -> pb::PermissionResponse {
    pb::PermissionResponse {
        request_id: request.id().to_string(),
        approve: request.status == Status::Approved,
        feedback: request.feedback.clone(),
    }
}
