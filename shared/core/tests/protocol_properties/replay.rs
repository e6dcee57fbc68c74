//! Replay: what the lead writes to its store after each batch (every request
//! touched, every request forgotten) is enough to rebuild the tracker. A
//! tracker restored from that log, as a restarted lead or a second lead
//! reading a replicated store would, holds the same requests in the same
//! order, with the same deadlines and loads.

use mesh_core::protocol::{Request, Tracker};
use proptest::prelude::*;

use crate::{
    config,
    events::{ops, resolve, Call, Effect},
    machine::perform,
    NAMES,
};

/// The store as the lead's SQLite store keeps requests: an upsert keeps a
/// row's place, a delete removes it, an insert goes last (`ORDER BY rowid`).
#[derive(Debug, Default)]
struct Log {
    rows: Vec<Request>,
}

impl Log {
    fn upsert(&mut self, request: Request) {
        match self.rows.iter_mut().find(|r| r.id() == request.id()) {
            Some(row) => *row = request,
            None => self.rows.push(request),
        }
    }

    fn delete(&mut self, id: &mesh_core::names::RequestId) {
        self.rows.retain(|r| r.id() != id);
    }
}

/// Whether two trackers hold the same requests in the same order, with the
/// same deadlines, due requests and loads.
fn same(a: &Tracker, b: &Tracker) -> Result<(), TestCaseError> {
    let requests = |t: &Tracker| t.iter().cloned().collect::<Vec<_>>();
    prop_assert_eq!(requests(a), requests(b));
    prop_assert_eq!(a.next_deadline(), b.next_deadline());
    prop_assert_eq!(a.due(i64::MAX), b.due(i64::MAX));
    prop_assert_eq!(a.pending_total(), b.pending_total());
    prop_assert_eq!(a.resolved_load(), b.resolved_load());
    for name in NAMES {
        prop_assert_eq!(a.pending_load(name), b.pending_load(name));
    }
    Ok(())
}

/// Runs `ops`, committing to a log as the lead does (forgotten ids as they
/// are pruned, touched requests at each commit), and checks after every
/// commit that a tracker restored from the log is the same as the live one.
fn replays(ops: &[crate::events::Op]) -> Result<(), TestCaseError> {
    let mut tracker = Tracker::new();
    let mut log = Log::default();
    for op in ops {
        match resolve(op, &tracker) {
            // The lead commits what it has at each batch...
            Call::TakeTouched => commit(&mut tracker, &mut log),
            // ... and a restart reads the log.
            Call::Restore => {
                commit(&mut tracker, &mut log);
                tracker = Tracker::restore(log.rows.clone());
            }
            call => {
                for effect in perform(&mut tracker, &call) {
                    if let Effect::Pruned(ids) = effect {
                        for id in ids {
                            log.delete(&id);
                        }
                    }
                }
                continue;
            }
        }
        same(&tracker, &Tracker::restore(log.rows.clone()))?;
    }
    commit(&mut tracker, &mut log);
    same(&tracker, &Tracker::restore(log.rows.clone()))
}

/// One batch's changes, as the lead's commit takes them.
fn commit(tracker: &mut Tracker, log: &mut Log) {
    for request in tracker.take_changed() {
        log.upsert(request);
    }
}

proptest! {
    #![proptest_config(config())]

    /// A tracker restored from what was committed is the tracker that
    /// committed it.
    #[test]
    fn the_committed_log_rebuilds_the_tracker(ops in ops()) {
        replays(&ops)?;
    }
}
