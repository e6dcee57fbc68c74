//! Trying a delivery again: at most [`TRIES`] attempts, waiting 0.5 s, 1 s,
//! 2 s and 4 s between them (longer when the receiver says `Retry-After`,
//! up to [`MOST_WAIT`]), and only after a failure that may pass (a
//! connection error, a timeout, a 5xx, a 429, a mail server's 4xx).

use std::{future::Future, time::Duration};

use crate::stats::{bump, SinkCounters};

/// The most attempts one delivery gets.
pub const TRIES: u32 = 5;
/// The wait before the second attempt; each later wait doubles it.
pub const FIRST_WAIT: Duration = Duration::from_millis(500);
/// The longest wait between attempts, `Retry-After` included.
pub const MOST_WAIT: Duration = Duration::from_secs(60);

/// How one attempt went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Accepted.
    Sent,
    /// Refused for good: trying again would be refused again.
    Permanent(String),
    /// Failed in a way that may pass; the receiver may say when to come back.
    Transient {
        why: String,
        retry_after: Option<Duration>,
    },
}

/// The wait after the `failed`th failed attempt (from 1).
pub(crate) fn wait(failed: u32, retry_after: Option<Duration>) -> Duration {
    let backoff = FIRST_WAIT.saturating_mul(1 << failed.saturating_sub(1).min(16));
    backoff.max(retry_after.unwrap_or_default()).min(MOST_WAIT)
}

/// Runs `attempt` until it is sent, refused for good or out of tries,
/// counting in `counters`; `what` names the delivery in the log.
pub(crate) async fn with_retries<F, Fut>(what: &str, counters: &SinkCounters, mut attempt: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Outcome>,
{
    for tried in 1..=TRIES {
        match attempt().await {
            Outcome::Sent => {
                bump(&counters.sent);
                tracing::debug!(delivery = what, tries = tried, "notification sent");
                return;
            }
            Outcome::Permanent(why) => {
                bump(&counters.failed);
                tracing::warn!(delivery = what, tries = tried, %why, "notification refused");
                return;
            }
            Outcome::Transient { why, retry_after } if tried < TRIES => {
                let pause = wait(tried, retry_after);
                tracing::debug!(delivery = what, tries = tried, %why, ?pause, "notification failed; trying again");
                bump(&counters.retried);
                tokio::time::sleep(pause).await;
            }
            Outcome::Transient { why, .. } => {
                bump(&counters.failed);
                tracing::warn!(delivery = what, tries = tried, %why, "notification failed; out of tries");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_and_retry_after_lengthens_them_up_to_the_cap() {
        let waits: Vec<_> = (1..TRIES).map(|n| wait(n, None)).collect();
        assert_eq!(
            waits,
            [500, 1000, 2000, 4000].map(Duration::from_millis).to_vec()
        );
        assert_eq!(
            wait(1, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            wait(3, Some(Duration::from_secs(1))),
            Duration::from_secs(2)
        );
        assert_eq!(wait(1, Some(Duration::from_secs(3600))), MOST_WAIT);
    }

    #[tokio::test(start_paused = true)]
    async fn a_passing_failure_is_tried_again_and_a_lasting_one_is_not() {
        let counters = SinkCounters::default();
        let mut left = 2;
        with_retries("test", &counters, || {
            let outcome = if left > 0 {
                left -= 1;
                Outcome::Transient {
                    why: "503".into(),
                    retry_after: None,
                }
            } else {
                Outcome::Sent
            };
            async move { outcome }
        })
        .await;
        let read = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!((read(&counters.sent), read(&counters.retried)), (1, 2));

        let mut tries = 0;
        with_retries("test", &counters, || {
            tries += 1;
            async { Outcome::Permanent("400".into()) }
        })
        .await;
        assert_eq!((tries, read(&counters.failed)), (1, 1));

        let mut tries = 0;
        with_retries("test", &counters, || {
            tries += 1;
            async {
                Outcome::Transient {
                    why: "down".into(),
                    retry_after: None,
                }
            }
        })
        .await;
        assert_eq!((tries, read(&counters.failed)), (TRIES, 2));
    }
}
