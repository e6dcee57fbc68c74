//! Telling the team who left: terminations wait here and go out together,
//! in one `TeammateTerminated`, at a rate that keeps many members ending at
//! once from making one fan-out each.

use mesh_core::effect::{Ended, Message};

/// Termination notices the lead hands out per second at most, in recipients:
/// a notice to `n` members holds the next one back `n / NOTICE_RATE`
/// seconds; terminations meanwhile wait and go out together, in one notice.
const NOTICE_RATE: i64 = 100_000;

/// Terminations not yet told to the team.
#[derive(Debug, Default)]
pub(crate) struct Terminations {
    /// Not yet told, oldest first.
    ended: Vec<Ended>,
    /// When the next notice may go out.
    ready_at: i64,
}

impl Terminations {
    /// `ended` waits for the next notice.
    pub(crate) fn push(&mut self, ended: Ended) {
        self.ended.push(ended);
    }

    /// When a notice is waiting to go out.
    pub(crate) fn due(&self) -> Option<i64> {
        (!self.ended.is_empty()).then_some(self.ready_at)
    }

    /// The notice of every termination waiting, if one may go out `now` to
    /// `recipients` members: the next waits `recipients / NOTICE_RATE`
    /// seconds.
    pub(crate) fn take_due(&mut self, now: i64, recipients: usize) -> Option<Message> {
        if self.ended.is_empty() || self.ready_at > now {
            return None;
        }
        let hold = i64::try_from(recipients).unwrap_or(i64::MAX) * 1000 / NOTICE_RATE;
        self.ready_at = now + hold;
        Some(Message::Terminated(std::mem::take(&mut self.ended)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(name: &str) -> Ended {
        Ended {
            name: name.into(),
            reason: "done".into(),
        }
    }

    #[test]
    fn terminations_while_a_notice_holds_go_out_together_after_it() {
        let mut terminations = Terminations::default();
        assert_eq!(terminations.due(), None);
        assert_eq!(terminations.take_due(0, 10), None);
        terminations.push(ended("a"));
        assert_eq!(terminations.due(), Some(0));
        // To 200,000 members: the next notice waits two seconds.
        let first = terminations.take_due(5, 200_000);
        assert!(matches!(first, Some(Message::Terminated(ref e)) if e.len() == 1));
        assert_eq!(terminations.due(), None);
        terminations.push(ended("b"));
        terminations.push(ended("c"));
        assert_eq!(terminations.due(), Some(2_005));
        assert_eq!(terminations.take_due(2_004, 1), None);
        let Some(Message::Terminated(both)) = terminations.take_due(2_005, 1) else {
            panic!("the held terminations go out once the hold passed");
        };
        let names: Vec<&str> = both.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["b", "c"]);
    }
}
