//! The hub's clock, and durations as the core counts time.

use std::time::Duration;

use shared::auth::now_unix_ms;

/// The hub's time: unix milliseconds that advance with tokio's clock, read
/// once from the system clock when the hub starts. Everything the hub
/// decides by time (deadlines, grace periods, retention, stuck streams) reads
/// it, so tests run the hub on tokio's paused clock and advance it instead of
/// waiting.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    /// The unix time at `base`.
    base_unix_ms: i64,
    /// When the clock started.
    base: tokio::time::Instant,
}

impl Clock {
    /// A clock that reads the system's time now.
    pub(crate) fn start() -> Self {
        Self {
            base_unix_ms: now_unix_ms(),
            base: tokio::time::Instant::now(),
        }
    }

    /// The time now, in unix milliseconds.
    pub(crate) fn now(&self) -> i64 {
        self.base_unix_ms + i64::try_from(self.base.elapsed().as_millis()).unwrap_or(i64::MAX / 2)
    }
}

/// `duration` in milliseconds, as the core counts time.
pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX / 2)
}
