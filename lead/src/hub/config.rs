//! How the hub behaves: who decides plan approvals, and every bound and
//! period `lead serve`'s flags set (`HubConfig`, its defaults the core's).

use std::time::Duration;

use mesh_core::{policy::Policy, team::Rules};

use crate::{children::Spawner, hub::PendingBudget};

/// Who decides plan approvals.
#[derive(Debug, Clone)]
pub enum Approval {
    /// Requests wait for an operator.
    Manual,
    /// Every plan is approved at once (for demos).
    Auto,
    /// A policy file's criteria decide.
    Policy(Policy),
    /// A model reviews each plan (`--approval model:FILE`), in tasks of its
    /// own that the hub hands jobs to; it answers as an operator would.
    /// Undecided plans stay pending.
    Model(std::sync::Arc<crate::reviewer::Reviewer>),
    /// A chain of reviewers (`--approval chain:FILE`): stages tried in
    /// order; what they cannot decide waits for an operator.
    Chain(std::sync::Arc<crate::chain::Chain>),
}

/// How the hub behaves.
#[derive(Debug, Clone)]
pub struct HubConfig {
    /// Who decides plan approvals.
    pub approval: Approval,
    /// Who owns which paths (`--owners`).
    pub owners: std::sync::Arc<mesh_core::owners::Owners>,
    /// Who is told that a review waits (`--notify`), with the console's
    /// address their notices link to.
    pub notify: Option<(mesh_notify::Notifier, String)>,
    /// The deadline of a shutdown request that names none.
    pub shutdown_deadline: Duration,
    /// The most unacknowledged envelopes one inbox holds before `Send` to it fails.
    pub max_inbox: usize,
    /// The most bytes of unacknowledged envelopes one inbox holds.
    pub max_inbox_bytes: usize,
    /// The most bytes of unacknowledged envelopes all inboxes hold together
    /// (a body shared by a fan-out counted once).
    pub max_held_bytes: usize,
    /// How long a member with an open inbox stream may leave an envelope
    /// unacknowledged before it is treated as stuck: its stream is ended and it
    /// is DISCONNECTED (it may reconnect and resume).
    pub ack_timeout: Duration,
    /// How long resolved requests and terminated members are kept.
    pub retention: Duration,
    /// How to start teammates; `None` where the lead cannot (tests of the hub).
    pub spawner: Option<Spawner>,
    /// How long a disconnected member may stay away before it is TERMINATED.
    pub grace: Duration,
    /// When the lead stops: how long spawned teammates have to agree to shut
    /// down before they are stopped by signal.
    pub stop_wait: Duration,
    /// Whether another lead may go on with this store (PostgreSQL): when a
    /// commit fails, the children are left running for it.
    pub shared_store: bool,
    /// The most members not terminated; a `Join` past it is RESOURCE_EXHAUSTED.
    pub max_members: usize,
    /// `Join` attempts per second, on average ...
    pub join_rate: f64,
    /// ... and at once.
    pub join_burst: u32,
    /// The most bytes one response stream (an inbox, a watcher, the
    /// console's events) holds that its client has not read: an inbox waits
    /// for its reader, a watcher is dropped.
    pub stream_max_bytes: usize,
    /// What the pending requests one member opened may hold ...
    pub pending_per_member: PendingBudget,
    /// ... and what those of every member together may.
    pub pending_total: PendingBudget,
    /// The most bytes of resolved requests kept for the record (within
    /// `retention`); past it the oldest are forgotten first.
    pub retained_max_bytes: usize,
    /// The token budget of a member that joins with none of its own and
    /// none the operator set; 0: none.
    pub token_budget: u64,
    /// The team's repository (`--repo`): results are reviewed and landed.
    pub repo: Option<std::sync::Arc<crate::git::Repo>>,
    /// What a task that names none has reviewed (`--review`).
    pub review: mesh_core::tasks::Review,
    /// No plan of a member whose commands run unconfined is approved
    /// (`--require-sandbox`).
    pub require_sandbox: bool,
}

impl Default for HubConfig {
    fn default() -> Self {
        // The core's rules have the same defaults.
        let rules = Rules::default();
        Self {
            approval: Approval::Manual,
            owners: Default::default(),
            notify: None,
            shutdown_deadline: Duration::from_millis(rules.shutdown_deadline_ms.unsigned_abs()),
            max_inbox: 10_000,
            max_inbox_bytes: 16 * 1024 * 1024,
            max_held_bytes: 1024 * 1024 * 1024,
            ack_timeout: Duration::from_secs(120),
            retention: Duration::from_secs(24 * 3600),
            spawner: None,
            grace: Duration::from_millis(rules.grace_ms.unsigned_abs()),
            stop_wait: Duration::from_secs(5),
            shared_store: false,
            max_members: rules.max_members,
            join_rate: 200.0,
            join_burst: 1_000,
            stream_max_bytes: 4 * 1024 * 1024,
            pending_per_member: rules.pending_per_member,
            pending_total: rules.pending_total,
            retained_max_bytes: 256 * 1024 * 1024,
            token_budget: rules.token_budget,
            repo: None,
            review: rules.review,
            require_sandbox: rules.require_sandbox,
        }
    }
}
