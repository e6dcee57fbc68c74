//! Members on the wire: who each is, its status, what it used and may use,
//! and the answer to a join.

use crate::pb;
use mesh_core::{
    effect::MemberView,
    grant::Grant,
    lifecycle,
    op::Joined,
    usage::{Standing, Usage},
};

use super::ToPb;

impl ToPb for lifecycle::Status {
    type Pb = pb::MemberStatus;
    fn to_pb(&self) -> pb::MemberStatus {
        use pb::MemberStatus as P;
        match self {
            lifecycle::Status::Working => P::Working,
            lifecycle::Status::Idle => P::Idle,
            lifecycle::Status::Disconnected => P::Disconnected,
            lifecycle::Status::ShuttingDown => P::ShuttingDown,
            lifecycle::Status::Terminated => P::Terminated,
        }
    }
}

impl ToPb for mesh_core::members::Member {
    type Pb = pb::Member;
    /// Who it is, its status and its mode; what it used and holds are the
    /// team's to add.
    fn to_pb(&self) -> pb::Member {
        pb::Member {
            member_id: self.id.clone(),
            name: self.name.to_string(),
            role: self.role.clone(),
            status: self.life.status().to_pb() as i32,
            mode: self.mode.to_pb() as i32,
            joining: self.life.is_joining(),
            idle_reason: if self.life.is_idle() {
                self.idle_reason.clone()
            } else {
                String::new()
            },
            sandbox: self.sandbox.as_ref().map(ToPb::to_pb),
            decoding: self.decoding.as_ref().map(ToPb::to_pb),
            ..Default::default()
        }
    }
}

impl ToPb for mesh_core::sandbox::Sandbox {
    type Pb = pb::Sandbox;
    fn to_pb(&self) -> pb::Sandbox {
        pb::Sandbox {
            kind: self.kind.as_str().to_owned(),
            confines: self
                .confines
                .iter()
                .map(|c| c.as_str().to_owned())
                .collect(),
            detail: self.detail.clone(),
        }
    }
}

impl ToPb for mesh_core::decoding::Decoding {
    type Pb = pb::Decoding;
    fn to_pb(&self) -> pb::Decoding {
        pb::Decoding {
            model: self.model.clone(),
            server: self.server.as_str().to_owned(),
            constrain: self.constrain.as_str().to_owned(),
            why: self.why.clone(),
        }
    }
}

impl ToPb for Usage {
    type Pb = pb::Usage;
    fn to_pb(&self) -> pb::Usage {
        pb::Usage {
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
            calls: self.calls,
            model_ms: self.model_ms,
        }
    }
}

impl From<&pb::Usage> for Usage {
    fn from(u: &pb::Usage) -> Self {
        Self {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            calls: u.calls,
            model_ms: u.model_ms,
        }
    }
}

impl ToPb for Standing {
    type Pb = pb::UsageStatus;
    fn to_pb(&self) -> pb::UsageStatus {
        pb::UsageStatus {
            total: Some(self.total.to_pb()),
            token_budget: self.token_budget,
        }
    }
}

/// `name`'s standing as a `Watch` event's body.
pub fn member_usage(name: &str, standing: &Standing) -> pb::MemberUsage {
    pb::MemberUsage {
        name: name.to_owned(),
        total: Some(standing.total.to_pb()),
        token_budget: standing.token_budget,
    }
}

impl ToPb for MemberView {
    type Pb = pb::Member;
    fn to_pb(&self) -> pb::Member {
        pb::Member {
            usage: Some(self.standing.total.to_pb()),
            token_budget: self.standing.token_budget,
            holds: self.holds.clone(),
            ..self.member.to_pb()
        }
    }
}

impl ToPb for Joined {
    type Pb = pb::JoinResponse;
    fn to_pb(&self) -> pb::JoinResponse {
        pb::JoinResponse {
            member_id: self.member_id.clone(),
            session_token: self.session_token.clone(),
            grant: Some(Grant::plan().to_pb()),
            usage: Some(self.standing.to_pb()),
        }
    }
}
