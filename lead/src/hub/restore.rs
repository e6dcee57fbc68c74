//! Loading the hub from what the store kept: the members (every one
//! disconnected, its grace period starting now), the inboxes, the history,
//! the audit trail, and the core's team restored with the lead's rules and
//! approval mode.

use mesh_core::{
    members::Members,
    tasks::TaskBoard,
    team::{Approval as CoreApproval, ReviewChain, Rules, Team},
};
use tokio::sync::mpsc;

use super::{
    chain, clock::millis, Approval, Clock, Command, Hub, HubConfig, HubHandle, Processes, Record,
    Terminations, Watchers, Workers,
};
use crate::{
    committer::Committer,
    inboxes::Inboxes,
    notices::Notices,
    store::{Snapshot, Storage, StoreError},
};

/// Loads the hub's state from `storage`, whose committer starts.
pub(crate) async fn load(
    config: HubConfig,
    storage: Storage,
) -> Result<(Hub, mpsc::Receiver<Command>), StoreError> {
    let keeps_record = storage.keeps_record();
    let (snapshot, committer) = Committer::start(storage).await?;
    restore(config, snapshot, committer, keeps_record)
}

/// Loads the hub's state from a store that does not block, in the hub's
/// task: for the hub's own tests.
#[cfg(test)]
pub(crate) fn load_inline(
    config: HubConfig,
    mut store: Box<dyn crate::store::Store>,
) -> Result<(Hub, mpsc::Receiver<Command>), StoreError> {
    let keeps_record = store.keeps_record();
    let snapshot = store.load()?;
    restore(config, snapshot, Committer::Inline(store), keeps_record)
}

/// The hub, from what a store kept.
fn restore(
    config: HubConfig,
    mut snapshot: Snapshot,
    committer: Committer,
    keeps_record: bool,
) -> Result<(Hub, mpsc::Receiver<Command>), StoreError> {
    let next_body_id = snapshot
        .bodies
        .iter()
        .map(|(id, _)| id + 1)
        .max()
        .unwrap_or(1);
    let clock = Clock::start();
    let now = clock.now();
    let grace_until = now + millis(config.grace);
    // Everyone is disconnected until they come back; the grace period
    // starts now.
    let decode = |detail| StoreError::Decode {
        what: "member",
        detail,
    };
    let mut members = Members::restore(std::mem::take(&mut snapshot.members), now, grace_until)
        .map_err(decode)?;
    let inboxes = Inboxes::restore(&mut snapshot, &mut members).map_err(decode)?;
    let history = crate::history::History::restore(
        std::mem::take(&mut snapshot.history),
        crate::history::MAX_ENTRIES,
    );
    let audit_kept = std::mem::take(&mut snapshot.audit);
    let budgets: Vec<(String, u64)> = snapshot
        .usage
        .iter()
        .filter(|a| a.member)
        .map(|a| (a.name.clone(), a.operator_budget.unwrap_or(0)))
        .collect();
    let team = Team::restore(
        std::mem::take(&mut snapshot.requests),
        std::mem::take(&mut snapshot.tasks),
        TaskBoard::DEFAULT_MAX_TASKS,
        snapshot.holds.take(),
        |name| members.is_active(name),
    )
    .with_usage(std::mem::take(&mut snapshot.usage))
    .with_members(members)
    .with_rules(Rules {
        pending_per_member: config.pending_per_member,
        pending_total: config.pending_total,
        shutdown_deadline_ms: millis(config.shutdown_deadline),
        grace_ms: millis(config.grace),
        max_members: config.max_members,
        token_budget: config.token_budget,
        repo: config.repo.is_some(),
        review: config.review,
        require_sandbox: config.require_sandbox,
    })
    .with_approval(match &config.approval {
        Approval::Manual => CoreApproval::Manual,
        Approval::Auto => CoreApproval::Auto,
        Approval::Policy(policy) => CoreApproval::Policy(policy.clone()),
        Approval::Model(_) => CoreApproval::Model,
        Approval::Chain(chain) => CoreApproval::Chain(std::sync::Arc::new(ReviewChain {
            stages: chain::stage_kinds(chain),
            rule: chain.rule().clone(),
            results: chain.results().map(|results| {
                std::sync::Arc::new(ReviewChain {
                    stages: chain::stage_kinds(results),
                    rule: results.rule().clone(),
                    results: None,
                })
            }),
        })),
    })
    .with_owners(config.owners.clone());
    let audit = crate::audit::Trail::restore(
        keeps_record,
        audit_kept,
        team.requests.iter(),
        budgets.into_iter(),
    );
    let (tx, rx) = mpsc::channel(4096);
    let stream_max_bytes = config.stream_max_bytes;
    let joins = mesh_core::rate::TokenBucket::new(config.join_rate, config.join_burst, now);
    let notices = config.notify.clone().map(|(notifier, console)| {
        let manual = matches!(config.approval, Approval::Manual);
        Notices::new(notifier, config.owners.clone(), console, manual)
    });
    let hub = Hub {
        clock,
        config,
        inboxes,
        team,
        committer,
        changes: Vec::new(),
        forming: crate::committer::Forming::default(),
        watchers: Watchers::new(stream_max_bytes),
        processes: Processes::default(),
        next_stream_id: 0,
        stopping_until: None,
        next_body_id,
        terminations: Terminations::default(),
        next_sweep: 0,
        handle: HubHandle::new(tx),
        joins,
        workers: Workers::default(),
        record: Record::restore(keeps_record, history, audit).telling(notices),
    };
    if hub.team.members.iter().next().is_some() {
        tracing::info!(
            members = hub.team.members.iter().count(),
            requests = hub.team.requests.iter().count(),
            "restored state"
        );
    }
    Ok((hub, rx))
}
