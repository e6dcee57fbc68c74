//! What the hub keeps for the record as the team changes, beside the
//! team's own state: the event history (the console's log), the audit
//! trail (every decision, hash-chained) and what traces and metrics say.
//! Each sees every notice and every batch; none decides anything.

use mesh_core::effect::Notice;

use crate::{
    audit::Trail,
    history::{History, Page, Query},
    notices::Notices,
    store::Change,
    telemetry::Tracer,
};

/// The hub's observers.
#[derive(Debug)]
pub(crate) struct Record {
    /// What happened, kept for the console's event log.
    history: History,
    /// History entries (and trims) not given to the store yet: they go
    /// with the first commit after a second's sweep, or once there are
    /// [`crate::history::UNSAVED_MAX`], or as the lead stops. None if the
    /// store keeps no history.
    unsaved: Option<Vec<Change>>,
    /// Every decision, hash-chained.
    audit: Trail,
    /// What traces and metrics say of the team's changes (when exporting).
    tracer: Tracer,
    /// Who is told that a review waits (`--notify`).
    notices: Option<Notices>,
}

impl Record {
    /// The record as the store kept it; `stored`: whether the store keeps
    /// it.
    pub(crate) fn restore(stored: bool, history: History, audit: Trail) -> Self {
        Self {
            history,
            unsaved: stored.then(room_for_a_second),
            audit,
            tracer: Tracer::default(),
            notices: None,
        }
    }

    /// The record, telling people through `notices` too.
    pub(crate) fn telling(mut self, notices: Option<Notices>) -> Self {
        self.notices = notices;
        self
    }

    /// Notes `notice`, which happened `at`, in the history; the history's
    /// changes to store now, if enough waited (a decision's commit writes
    /// no history page otherwise: see history.rs).
    pub(crate) fn notice(&mut self, at: i64, notice: Notice) -> Vec<Change> {
        let recorded = self.history.record(at, notice);
        if let (Some((entry, trim)), Some(unsaved)) = (recorded, &mut self.unsaved) {
            unsaved.push(Change::History(entry));
            if let Some(below) = trim {
                unsaved.push(Change::HistoryTrim(below));
            }
            if unsaved.len() >= crate::history::UNSAVED_MAX {
                return self.unsaved();
            }
        }
        Vec::new()
    }

    /// The history's changes not stored yet (each second, and as the lead
    /// stops).
    pub(crate) fn unsaved(&mut self) -> Vec<Change> {
        match &mut self.unsaved {
            Some(waiting) => std::mem::replace(waiting, room_for_a_second()),
            None => Vec::new(),
        }
    }

    /// A batch of `changes` is closing `now`: the audit trail's entries
    /// for its decisions join it, and the tracer hears of it.
    pub(crate) fn seal(&mut self, changes: &mut Vec<Change>, now: i64) {
        let team = || {
            changes.iter().filter_map(|c| match c {
                Change::Team(team) => Some(team),
                _ => None,
            })
        };
        let seq = self.audit.next_seq();
        let decided = self.audit.observe(team(), now);
        if mesh_telemetry::enabled() {
            let appended = usize::try_from(self.audit.next_seq() - seq).unwrap_or(usize::MAX);
            let first: Vec<&str> = self
                .audit
                .newest(appended)
                .filter(|e| e.what != "budget")
                .map(|e| e.subject.as_str())
                .collect();
            self.tracer.observe(team(), &first);
        }
        if let Some(notices) = &mut self.notices {
            notices.observe(team(), now);
        }
        changes.extend(decided.into_iter().map(Change::Audit));
    }

    /// A page of the audit trail.
    pub(crate) fn audit_page(
        &mut self,
        since: i64,
        after_seq: u64,
        limit: usize,
    ) -> Vec<crate::audit::Entry> {
        self.audit.page(since, after_seq, limit)
    }

    /// A page of the event history.
    pub(crate) fn history(&self, query: &Query) -> Page {
        self.history.query(query)
    }
}

/// Room for a second's history at once: grown from nothing each second, a
/// vector of changes copied itself over and over (a percent of the lead's
/// CPU on the plan handshake).
fn room_for_a_second() -> Vec<Change> {
    Vec::with_capacity(crate::history::UNSAVED_MAX + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(n: u64) -> Notice {
        Notice::Usage {
            name: format!("m{n}"),
            standing: mesh_core::usage::Standing::default(),
        }
    }

    #[test]
    fn history_waits_unsaved_until_enough_waited_or_asked_for() {
        let mut record =
            Record::restore(true, History::restore(Vec::new(), 10_000), Trail::default());
        let max = u64::try_from(crate::history::UNSAVED_MAX).unwrap_or(u64::MAX);
        for n in 1..max {
            assert!(record.notice(0, usage(n)).is_empty(), "flushed at {n}");
        }
        let flushed = record.notice(0, usage(max));
        assert_eq!(flushed.len(), crate::history::UNSAVED_MAX);
        assert!(record.unsaved().is_empty());
        let _ = record.notice(0, usage(1));
        assert_eq!(record.unsaved().len(), 1);
        let page = record.history(&Query {
            limit: 5,
            ..Query::default()
        });
        assert_eq!(page.entries.len(), 5);
    }

    #[test]
    fn a_record_no_store_keeps_queues_nothing_for_it() {
        let mut record = Record::restore(
            false,
            History::restore(Vec::new(), 10_000),
            Trail::default(),
        );
        let max = u64::try_from(crate::history::UNSAVED_MAX).unwrap_or(u64::MAX);
        for n in 1..=max {
            assert!(record.notice(0, usage(n)).is_empty());
        }
        assert!(record.unsaved().is_empty());
        let all = record.history(&Query {
            limit: crate::history::MAX_PAGE,
            ..Query::default()
        });
        assert_eq!(
            all.entries.len(),
            crate::history::MAX_PAGE,
            "the history has them"
        );
    }
}
