//! The queues of the work that runs off the hub: the model reviewer's
//! plans (`--approval model:FILE`), the chain's stages (`--approval
//! chain:FILE`) and the lander's results (`--repo`), and what the lead's own
//! reviewer used. A queue that is missing, full or closed refuses a job at
//! once, in words the hub tells the team: the hub never waits on a worker.

use std::collections::HashMap;

use mesh_core::usage::Usage;
use tokio::sync::mpsc;

use super::landing::LandJob;
use crate::{chain::stages::StageJob, reviewer::Job};

/// The workers' queues, each present while its worker runs.
#[derive(Debug)]
pub(crate) struct Workers {
    /// Plans for the model reviewer.
    pub(super) reviews: Option<mpsc::Sender<Job>>,
    /// Stages to run outside the hub.
    pub(super) stages: Option<mpsc::Sender<StageJob>>,
    /// The lander's queue.
    pub(super) lands: Option<mpsc::Sender<LandJob>>,
    /// Names this lead process's model calls (the reviewer's) in the usage
    /// ledger: made at start, so a restarted lead's calls add to the last.
    reviewer_epoch: String,
    /// What the model reviewer used since this lead started, by account name.
    reviewer_totals: HashMap<String, Usage>,
}

impl Default for Workers {
    fn default() -> Self {
        Self {
            reviews: None,
            stages: None,
            lands: None,
            reviewer_epoch: uuid::Uuid::new_v4().to_string(),
            reviewer_totals: HashMap::new(),
        }
    }
}

/// What a refused job is told: the queue is full, its worker stopped, or
/// none runs.
type Refusals = [&'static str; 3];

/// Queues `job` on `queue`, or says why not, in `refusals`' words.
fn queue<T>(
    queue: Option<&mpsc::Sender<T>>,
    job: T,
    [full, stopped, missing]: Refusals,
) -> Result<(), &'static str> {
    match queue {
        Some(tx) => tx.try_send(job).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => full,
            mpsc::error::TrySendError::Closed(_) => stopped,
        }),
        None => Err(missing),
    }
}

impl Workers {
    /// Hands a plan to the model reviewer.
    pub(crate) fn review(&self, job: Job) -> Result<(), &'static str> {
        let words = [
            "the reviewer has too many plans queued",
            "the reviewer has stopped",
            "the reviewer is not running",
        ];
        queue(self.reviews.as_ref(), job, words)
    }

    /// Hands a chain stage to the stage runner.
    pub(crate) fn stage(&self, job: StageJob) -> Result<(), &'static str> {
        let words = [
            "too many stages are queued",
            "the stage runner has stopped",
            "the stage runner is not running",
        ];
        queue(self.stages.as_ref(), job, words)
    }

    /// Hands a result to the lander.
    pub(crate) fn land(&self, job: LandJob) -> Result<(), &'static str> {
        let words = [
            "too many landings are queued",
            "the lander has stopped",
            "this lead has no team repository",
        ];
        queue(self.lands.as_ref(), job, words)
    }

    /// The reviewer `name` used `used` in one more call: its totals for
    /// this lead's life, and the epoch they count in.
    pub(crate) fn reviewer_used(&mut self, name: &str, used: Usage) -> (Usage, &str) {
        let totals = self.reviewer_totals.entry(name.to_owned()).or_default();
        *totals = totals.plus(used);
        (*totals, &self.reviewer_epoch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_without_a_worker_or_with_a_full_or_closed_queue_is_refused_in_words() {
        let words = ["full", "stopped", "missing"];
        let none: Option<&mpsc::Sender<u8>> = None;
        assert_eq!(queue(none, 1, words), Err("missing"));
        let (tx, rx) = mpsc::channel(1);
        assert_eq!(queue(Some(&tx), 1, words), Ok(()));
        assert_eq!(queue(Some(&tx), 2, words), Err("full"));
        drop(rx);
        assert_eq!(queue(Some(&tx), 3, words), Err("stopped"));
        let workers = Workers::default();
        assert_eq!(
            workers.land(LandJob::Settle(Vec::new())),
            Err("this lead has no team repository")
        );
    }

    #[test]
    fn the_reviewer_s_calls_add_up_in_one_epoch() {
        let mut workers = Workers::default();
        let one = Usage {
            prompt_tokens: 10,
            completion_tokens: 2,
            ..Usage::default()
        };
        let (first, epoch) = workers.reviewer_used("reviewer (m)", one);
        let epoch = epoch.to_owned();
        assert_eq!(first, one);
        let (second, again) = workers.reviewer_used("reviewer (m)", one);
        assert_eq!(second, one.plus(one));
        assert_eq!(again, epoch);
        let (other, _) = workers.reviewer_used("reviewer (n)", one);
        assert_eq!(other, one);
    }
}
