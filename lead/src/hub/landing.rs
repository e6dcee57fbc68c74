//! Landing approved results (`lead serve --repo`): the core asks with
//! [`mesh_core::effect::Effect::Land`]; here the job goes to the lander, one
//! task off the hub that runs git ([`crate::git::Repo::land`]) one landing
//! at a time, and its outcome comes back as `Landed`, the lead's own.
//! When the hub starts, the lander first settles what a lead that stopped
//! left: a pending result the team branch already has is answered as
//! landed; an approved one that had not landed is landed now.

use std::sync::Arc;

use mesh_core::{
    access::{Call, Caller},
    names::RequestId,
    op::Landed,
    protocol::{Kind, Status},
    result::Landing,
};
use tokio::sync::mpsc;

use super::{Claim, Command, Hub, HubHandle};
use crate::git::{LandAsk, Repo};

/// What the lander is asked.
#[derive(Debug)]
pub(crate) enum LandJob {
    /// Land this result.
    Land(LandAsk),
    /// At start: the pending results, and whether each was approved
    /// (being landed) when the lead stopped.
    Settle(Vec<(RequestId, Option<LandAsk>)>),
}

/// The most landings queued; past it a landing fails at once.
const QUEUE: usize = 1024;

/// Starts the lander for `repo`; outcomes go to the hub through `hub`.
pub(crate) fn start(repo: Arc<Repo>, hub: HubHandle) -> mpsc::Sender<LandJob> {
    let (tx, mut rx) = mpsc::channel::<LandJob>(QUEUE);
    tokio::spawn(async move {
        while let Some(job) = rx.recv().await {
            match job {
                LandJob::Land(ask) => {
                    let landing = crate::telemetry::landing(&ask.request_id, repo.land(&ask)).await;
                    report(&hub, &ask.request_id, landing);
                }
                LandJob::Settle(pending) => {
                    for (id, ask) in pending {
                        match (repo.landed(id.as_str()).await, ask) {
                            (Ok(Some(commit)), _) => {
                                tracing::info!(request_id = %id, %commit, "a result landed before the lead stopped");
                                report(&hub, id.as_str(), Landing::Merged { commit });
                            }
                            (Ok(None), Some(ask)) => {
                                tracing::info!(request_id = %id, "landing an approved result the lead had not landed");
                                let landing = repo.land(&ask).await;
                                report(&hub, &ask.request_id, landing);
                            }
                            (Ok(None), None) => {}
                            (Err(e), _) => {
                                tracing::warn!(request_id = %id, error = %e, "cannot tell whether a result landed");
                            }
                        }
                    }
                }
            }
        }
    });
    tx
}

fn report(hub: &HubHandle, request_id: &str, landing: Landing) {
    let Ok(request_id) = RequestId::existing("request_id", request_id) else {
        return;
    };
    hub.notify(Command::Landed {
        request_id,
        landing,
    });
}

impl Hub {
    /// What landing result `id` needs, from its request.
    fn land_ask(&self, id: &RequestId) -> Option<LandAsk> {
        let request = self.team.requests.get(id)?;
        let payload = request.result_payload();
        Some(LandAsk {
            request_id: id.to_string(),
            base: payload.result.base,
            commit: payload.result.commit,
            task_id: payload.result.task_id,
            plan_id: payload.plan_id,
            summary: payload.result.summary,
            author: request.opening.sender.clone(),
        })
    }

    /// `Effect::Land`: hands result `id` to the lander.
    pub(super) fn land(&mut self, id: &RequestId) {
        let Some(ask) = self.land_ask(id) else {
            return;
        };
        let sent = self.workers.land(LandJob::Land(ask));
        if let Err(why) = sent {
            self.landed(id.clone(), Landing::Failed(why.into()));
        }
    }

    /// The lander's outcome for result `id`: the core answers it.
    pub(super) fn landed(&mut self, request_id: RequestId, landing: Landing) {
        let op = Landed {
            request_id,
            landing,
        };
        if let Err(e) = self.apply(Claim::Known(Caller::Lead), Call::Lead, Ok(op)) {
            tracing::warn!(error = %e, "a landing's outcome was not recorded");
        }
    }

    /// Starts the lander, and has it settle the results a stopped lead
    /// left pending.
    pub(super) fn start_lander(&mut self) {
        let Some(repo) = self.config.repo.clone() else {
            return;
        };
        let lands = start(repo, self.handle.clone());
        let landing = self.team.landings();
        let pending: Vec<(RequestId, Option<LandAsk>)> = self
            .team
            .requests
            .iter()
            .filter(|r| r.opening.kind == Kind::Result && r.status == Status::Pending)
            .map(|r| {
                let ask = landing
                    .contains(r.id())
                    .then(|| self.land_ask(r.id()))
                    .flatten();
                (r.id().clone(), ask)
            })
            .collect();
        if !pending.is_empty() {
            let _ = lands.try_send(LandJob::Settle(pending));
        }
        self.workers.lands = Some(lands);
    }
}
