//! One request as the tracker keeps it: which protocol, where it stands,
//! who answers it, what opened it, its answer and its reviewers' words.

use std::fmt;

use crate::{grant::Grant, names::RequestId, plan::Plan};

/// Which protocol a request belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A teammate asks the operator to approve its plan.
    PlanApproval,
    /// The operator asks a teammate to shut down.
    Shutdown,
    /// A teammate asks the operator to run one gated tool call.
    Permission,
    /// A teammate asks for its finished work to be merged into the team
    /// branch (`lead serve --repo`).
    Result,
    /// A teammate with an approved plan asks to add to it.
    Amendment,
}

impl Kind {
    /// The name the contract gives it (`REQUEST_TYPE_PLAN_APPROVAL`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::PlanApproval => "REQUEST_TYPE_PLAN_APPROVAL",
            Kind::Shutdown => "REQUEST_TYPE_SHUTDOWN",
            Kind::Permission => "REQUEST_TYPE_PERMISSION",
            Kind::Result => "REQUEST_TYPE_RESULT",
            Kind::Amendment => "REQUEST_TYPE_AMENDMENT",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Waiting for its answer.
    Pending,
    /// Answered yes.
    Approved,
    /// Answered no.
    Rejected,
    /// The deadline passed, or the party that must answer left.
    Expired,
}

impl Status {
    /// Whether the request is resolved for good.
    pub fn is_terminal(self) -> bool {
        self != Status::Pending
    }

    /// The name the contract gives it (`REQUEST_STATUS_PENDING`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "REQUEST_STATUS_PENDING",
            Status::Approved => "REQUEST_STATUS_APPROVED",
            Status::Rejected => "REQUEST_STATUS_REJECTED",
            Status::Expired => "REQUEST_STATUS_EXPIRED",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who answers a request: the operator (for plans and permissions) or one
/// member (for a shutdown).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Party {
    /// Whoever holds the operator token.
    Operator,
    /// The member of that name.
    Member(String),
}

impl fmt::Display for Party {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Party::Operator => f.write_str("the operator"),
            Party::Member(name) => write!(f, "member {name:?}"),
        }
    }
}

/// An answer to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Yes or no.
    pub approve: bool,
    /// Feedback on a plan or permission; the reason of a shutdown answer.
    pub feedback: String,
    /// The grant an approved plan carries.
    pub grant: Option<Grant>,
}

/// What a new request says; the tracker adds its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opening {
    /// The id the sender chose or the lead made.
    pub id: RequestId,
    /// The protocol.
    pub kind: Kind,
    /// Who asks (a member name, or `lead`).
    pub sender: String,
    /// Who is asked (a member name, or `lead`).
    pub target: String,
    /// The request as JSON, for operators; also what a reused id is compared on.
    pub payload_json: String,
    /// When the request expires unanswered, if ever.
    pub deadline_unix_ms: Option<i64>,
}

/// One request and where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// What was asked.
    pub opening: Opening,
    /// Where it stands.
    pub status: Status,
    /// The answer, once there is one (none for EXPIRED).
    pub decision: Option<Decision>,
    /// Feedback or reason: the answer's, or why it expired.
    pub feedback: String,
    /// When it was opened.
    pub created_at_unix_ms: i64,
    /// When it was resolved.
    pub resolved_at_unix_ms: Option<i64>,
    /// What each reviewer said of it, oldest first.
    pub reviews: Vec<ReviewStep>,
    /// Who it still waits for, where owners rules cover its paths: a rule
    /// each (`@dba: 1 of 2`). Worked out from the owners file and its
    /// reviews when it is read; never stored.
    pub waits_for: Vec<String>,
}

/// One reviewer's word on a request: a stage of a review chain, or the
/// operator.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReviewStep {
    /// Who: `policy`, `program NAME`, `model NAME`, `human`, `operator`.
    pub reviewer: String,
    /// What: `approve`, `reject`, `pass`, `error`, `waits`.
    pub verdict: String,
    /// Why, in its words.
    pub words: String,
    /// When (unix ms).
    pub at_unix_ms: i64,
    /// The operator who said it, where one did: who they are and what
    /// role let them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub person: Option<crate::access::Person>,
    /// The owners rules (`--owners`) this approval counted for, by their
    /// patterns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owner_rules: Vec<String>,
}

impl Request {
    /// `opening`, just opened at `now`: pending, unanswered.
    pub fn pending(opening: Opening, now: i64) -> Self {
        Self {
            opening,
            status: Status::Pending,
            decision: None,
            feedback: String::new(),
            created_at_unix_ms: now,
            resolved_at_unix_ms: None,
            reviews: Vec::new(),
            waits_for: Vec::new(),
        }
    }

    /// Whether this request's payload (a plan or a result) names task `id`.
    pub fn names_task(&self, id: &str) -> bool {
        let Ok(payload) = serde_json::from_str::<serde_json::Value>(&self.opening.payload_json)
        else {
            return false;
        };
        [&payload, &payload["plan"], &payload["result"]]
            .iter()
            .any(|p| p.get("task_id").and_then(|t| t.as_str()) == Some(id))
    }

    /// Whether this is a result approved and being landed: pending, and its
    /// reviewer's last word an approval (the merge answers it).
    pub fn is_landing(&self) -> bool {
        self.opening.kind == Kind::Result
            && self.status == Status::Pending
            && self
                .reviews
                .last()
                .is_some_and(|step| step.verdict == "approve")
    }

    /// The request id.
    pub fn id(&self) -> &RequestId {
        &self.opening.id
    }

    /// A permission request's `args_json` (empty for any other request).
    pub fn permission_args(&self) -> String {
        #[derive(serde::Deserialize, Default)]
        struct PermissionIn {
            #[serde(default)]
            args_json: String,
        }
        let PermissionIn { args_json } =
            serde_json::from_str(&self.opening.payload_json).unwrap_or_default();
        args_json
    }

    /// The plan in a plan request's payload (empty fields where it has none).
    pub fn plan(&self) -> Plan {
        /// The part of a stored payload this reads; the rest (overlaps) is
        /// skipped, not built.
        #[derive(serde::Deserialize, Default)]
        struct PlanIn {
            #[serde(default)]
            plan: Plan,
        }
        let PlanIn { plan } = serde_json::from_str(&self.opening.payload_json).unwrap_or_default();
        plan
    }

    /// What an approved plan lets its sender hold: the grant's write paths
    /// (the plan's files where the grant names none), and the plan's task.
    /// `None` unless the request carries a grant.
    pub fn hold(&self) -> Option<(Vec<String>, String)> {
        /// The two fields of the plan a hold needs; the rest is skipped,
        /// not built.
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct Held {
            files: Vec<String>,
            task_id: String,
        }
        #[derive(serde::Deserialize, Default)]
        struct HeldIn {
            #[serde(default)]
            plan: Held,
        }
        let grant = self.decision.as_ref()?.grant.as_ref()?;
        let HeldIn { plan } = serde_json::from_str(&self.opening.payload_json).unwrap_or_default();
        let paths = if grant.write_paths.is_empty() {
            plan.files
        } else {
            grant.write_paths.clone()
        };
        Some((paths, plan.task_id))
    }

    /// The party that must answer it.
    pub fn answerer(&self) -> Party {
        match self.opening.kind {
            Kind::PlanApproval | Kind::Permission | Kind::Result | Kind::Amendment => {
                Party::Operator
            }
            Kind::Shutdown => Party::Member(self.opening.target.clone()),
        }
    }
}

impl Opening {
    /// What the request costs the lead to hold, for its budgets of pending
    /// requests: its payload and names, plus a fixed overhead.
    pub fn bytes(&self) -> usize {
        const OVERHEAD: usize = 128;
        OVERHEAD + self.payload_json.len() + self.sender.len() + self.target.len()
    }
}
