//! What the notifier has done, counted: notices dropped at its door, and
//! per sink what was sent, failed, dropped and retried. The counters are
//! atomics the tasks bump; [`Stats`] is a copy of them.

use std::{
    collections::BTreeMap,
    sync::atomic::{AtomicU64, Ordering},
};

/// A warning is logged for the first drop and then once every this many.
pub(crate) const WARN_EVERY: u64 = 1000;

/// The counts at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Notices refused because the notifier's queue was full.
    pub dropped: u64,
    /// Escalations that fired (the request still waited).
    pub escalated: u64,
    /// Per sink, by name.
    pub sinks: BTreeMap<String, SinkStats>,
}

/// One sink's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SinkStats {
    /// Deliveries the sink accepted (a 2xx, a mail the server took).
    pub sent: u64,
    /// Deliveries given up on: refused for good, or out of tries.
    pub failed: u64,
    /// Deliveries dropped because the sink's own queue was full.
    pub dropped: u64,
    /// Attempts made again after a failure that may pass.
    pub retried: u64,
}

/// One sink's live counters.
#[derive(Debug, Default)]
pub(crate) struct SinkCounters {
    pub(crate) sent: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) retried: AtomicU64,
}

impl SinkCounters {
    fn read(&self) -> SinkStats {
        SinkStats {
            sent: self.sent.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            retried: self.retried.load(Ordering::Relaxed),
        }
    }
}

/// All the live counters.
#[derive(Debug)]
pub(crate) struct Counters {
    pub(crate) dropped: AtomicU64,
    pub(crate) escalated: AtomicU64,
    /// In the config's order of sinks.
    pub(crate) sinks: Vec<(String, SinkCounters)>,
}

impl Counters {
    pub(crate) fn new(sinks: impl Iterator<Item = String>) -> Counters {
        Counters {
            dropped: AtomicU64::new(0),
            escalated: AtomicU64::new(0),
            sinks: sinks.map(|n| (n, SinkCounters::default())).collect(),
        }
    }

    pub(crate) fn read(&self) -> Stats {
        Stats {
            dropped: self.dropped.load(Ordering::Relaxed),
            escalated: self.escalated.load(Ordering::Relaxed),
            sinks: self
                .sinks
                .iter()
                .map(|(name, c)| (name.clone(), c.read()))
                .collect(),
        }
    }
}

/// Adds one to `counter`; returns the new count.
pub(crate) fn bump(counter: &AtomicU64) -> u64 {
    counter.fetch_add(1, Ordering::Relaxed) + 1
}

/// Whether the `count`th drop is one to log.
pub(crate) fn worth_a_warning(count: u64) -> bool {
    count % WARN_EVERY == 1
}
