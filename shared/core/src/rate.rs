//! A token bucket: at most `burst` events at once, refilled at `per_second`.
//! Pure: the time comes in as an argument.

/// How often something may happen.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    /// The most tokens it holds.
    burst: f64,
    /// Tokens added per millisecond.
    per_ms: f64,
    /// Tokens now.
    tokens: f64,
    /// When `tokens` was counted (unix ms).
    at: i64,
}

/// The burst a rate allows where none is given: five seconds' worth, at
/// least one (1,000 at 200 a second).
pub fn default_burst(per_second: f64) -> u32 {
    // Saturating: a rate past u32::MAX / 5 a second is unbounded anyway.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let burst = (per_second * 5.0).ceil().clamp(1.0, f64::from(u32::MAX)) as u32;
    burst
}

impl TokenBucket {
    /// A full bucket of `burst` (at least 1) refilled at `per_second`.
    pub fn new(per_second: f64, burst: u32, now: i64) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            burst,
            per_ms: per_second.max(0.0) / 1000.0,
            tokens: burst,
            at: now,
        }
    }

    /// Takes a token at `now`; `false` if there is none.
    pub fn take(&mut self, now: i64) -> bool {
        let elapsed = now.saturating_sub(self.at).max(0);
        // Precision is not at stake: milliseconds fit an f64 exactly.
        #[allow(clippy::cast_precision_loss)]
        let refill = elapsed as f64 * self.per_ms;
        self.tokens = (self.tokens + refill).min(self.burst);
        self.at = self.at.max(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_burst_follows_the_rate() {
        assert_eq!(default_burst(200.0), 1_000);
        assert_eq!(default_burst(2.0), 10);
        assert_eq!(default_burst(0.0), 1);
        assert_eq!(default_burst(0.1), 1);
        assert_eq!(default_burst(1e12), u32::MAX);
    }

    #[test]
    fn a_burst_then_the_rate() {
        let mut bucket = TokenBucket::new(2.0, 3, 0);
        assert!((0..3).all(|_| bucket.take(0)), "the burst");
        assert!(!bucket.take(0), "then nothing");
        assert!(!bucket.take(499), "half a token is not one");
        assert!(bucket.take(500), "one token per 500 ms");
        assert!(!bucket.take(500));
        // A long pause refills up to the burst, not beyond.
        assert!((0..3).all(|_| bucket.take(60_000)));
        assert!(!bucket.take(60_000));
        // A clock that goes back refills nothing.
        assert!(!bucket.take(1_000));
    }

    #[test]
    fn a_zero_rate_allows_only_the_burst() {
        let mut bucket = TokenBucket::new(0.0, 0, 0);
        assert!(bucket.take(0));
        assert!(!bucket.take(i64::MAX / 2));
    }
}
