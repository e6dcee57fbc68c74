//! What a teammate has processed of its inbox, so that a redelivery (the
//! reader resuming after a broken stream, the lead delivering again what was
//! not acknowledged) is not acted on twice: the last `seq`, and the message
//! ids of the last [`REMEMBERED_IDS`] envelopes. Pure: no I/O, no clock.

use std::collections::{HashSet, VecDeque};

/// The most message ids remembered for deduplication.
const REMEMBERED_IDS: usize = 4_096;

/// The envelopes processed, as far as deduplication needs them.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// The last `seq` processed.
    last_seq: u64,
    /// Message ids processed.
    ids: HashSet<String>,
    /// The same ids, oldest first.
    order: VecDeque<String>,
}

impl Seen {
    /// The last `seq` processed.
    pub(crate) fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Whether the envelope `seq` with message id `id` is new: after the last
    /// one processed, and its id not processed before (it is remembered now).
    pub(crate) fn is_new(&mut self, seq: u64, id: &str) -> bool {
        seq > self.last_seq && self.remember(id)
    }

    /// The envelope `seq` was processed.
    pub(crate) fn processed(&mut self, seq: u64) {
        self.last_seq = seq;
    }

    /// Records a message id; `false` if it was processed before. An empty id
    /// is never a redelivery; past [`REMEMBERED_IDS`], the oldest id is
    /// forgotten.
    fn remember(&mut self, id: &str) -> bool {
        if id.is_empty() {
            return true;
        }
        if !self.ids.insert(id.to_owned()) {
            return false;
        }
        self.order.push_back(id.to_owned());
        if self.order.len() > REMEMBERED_IDS {
            if let Some(old) = self.order.pop_front() {
                self.ids.remove(&old);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redelivery_is_recognised_by_seq_then_by_message_id() {
        let mut seen = Seen::default();
        assert!(seen.is_new(5, "a"));
        seen.processed(5);
        assert_eq!(seen.last_seq(), 5);
        assert!(!seen.is_new(5, "b"), "the same seq");
        assert!(!seen.is_new(4, "c"), "an older seq, whatever its id");
        assert!(
            !seen.is_new(6, "a"),
            "a newer seq with an id processed before"
        );
        assert!(seen.is_new(6, "d"));
        // An id is remembered even before its envelope is processed...
        assert!(!seen.is_new(7, "d"));
        // ...but not when the seq alone told: "c" came with an old seq.
        assert!(seen.is_new(7, "c"));
    }

    #[test]
    fn an_envelope_without_an_id_is_told_by_its_seq_alone() {
        let mut seen = Seen::default();
        assert!(seen.is_new(1, ""));
        seen.processed(1);
        assert!(seen.is_new(2, ""));
        assert!(!seen.is_new(1, ""));
        assert!(seen.ids.is_empty() && seen.order.is_empty());
    }

    #[test]
    fn remembered_ids_are_bounded_and_the_oldest_forgotten_first() {
        let mut seen = Seen::default();
        for i in 0..=REMEMBERED_IDS {
            assert!(seen.remember(&format!("id{i}")));
        }
        assert_eq!(seen.ids.len(), REMEMBERED_IDS);
        assert_eq!(seen.order.len(), REMEMBERED_IDS);
        assert!(
            !seen.remember(&format!("id{REMEMBERED_IDS}")),
            "the newest is kept"
        );
        assert!(!seen.remember("id1"), "the second oldest is kept");
        assert!(seen.remember("id0"), "the oldest was forgotten");
        assert!(!seen.remember("id0"), "and is remembered again");
        assert!(seen.remember("id1"), "which pushed out the next oldest");
        assert_eq!(seen.ids.len(), REMEMBERED_IDS);
    }
}
