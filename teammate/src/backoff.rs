//! Waiting between tries: for the inbox's reader and the client's calls
//! while the lead cannot be reached.

use std::time::{Duration, Instant};

/// Capped exponential backoff with jitter, within an overall limit.
#[derive(Debug)]
pub(crate) struct Backoff {
    /// The next delay before jitter.
    delay: Duration,
    /// When the current run of failures began.
    since: Instant,
    /// How long failures may go on.
    limit: Duration,
}

impl Backoff {
    /// The shortest and longest delays.
    const FIRST: Duration = Duration::from_millis(50);
    const CAP: Duration = Duration::from_secs(2);

    /// Starts a run of failures.
    pub(crate) fn new(limit: Duration) -> Self {
        Self {
            delay: Self::FIRST,
            since: Instant::now(),
            limit,
        }
    }

    /// Sleeps before the next try; `false` once failures have lasted past the limit.
    pub(crate) async fn wait(&mut self) -> bool {
        if self.since.elapsed() >= self.limit {
            return false;
        }
        // Full jitter: between half the delay and the delay.
        let jitter =
            u64::from(uuid::Uuid::new_v4().as_bytes()[0]) * self.delay.as_millis() as u64 / 512;
        tokio::time::sleep(self.delay / 2 + Duration::from_millis(jitter)).await;
        self.delay = (self.delay * 2).min(Self::CAP);
        true
    }

    /// A success ends the run of failures.
    pub(crate) fn reset(&mut self) {
        self.delay = Self::FIRST;
        self.since = Instant::now();
    }
}
