//! What a model teammate has used, and its budget. The teammate counts its
//! own process's use (one *epoch*, reported to the lead as cumulative
//! totals); the lead adds what earlier processes under the same name used
//! and says the budget (`ReportUsage`, `Join`, `BudgetChanged`). Pure.

use std::time::Duration;

use mesh_core::usage::{Standing, Usage};

/// Tokens used, and the budget.
#[derive(Debug, Clone, Default)]
pub struct Meter {
    /// This process's totals.
    mine: Usage,
    /// The totals last taken for a report.
    reported: Usage,
    /// Tokens the member used beyond `reported`, as the lead last said
    /// (earlier processes under its name).
    before: u64,
    /// Tokens it may use in all; `None`: no budget.
    budget: Option<u64>,
    /// Of this process's prompt tokens, those the server's cache served.
    cached: u64,
}

impl Meter {
    /// A meter with the teammate's own budget (until the lead says).
    pub fn new(budget: Option<u64>) -> Self {
        Self {
            budget: budget.filter(|b| *b > 0),
            ..Self::default()
        }
    }

    /// One model call: its tokens and how long it took.
    pub fn add(&mut self, prompt: u64, completion: u64, took: Duration) {
        let m = &mut self.mine;
        m.prompt_tokens = m.prompt_tokens.saturating_add(prompt);
        m.completion_tokens = m.completion_tokens.saturating_add(completion);
        m.calls = m.calls.saturating_add(1);
        m.model_ms = m
            .model_ms
            .saturating_add(u64::try_from(took.as_millis()).unwrap_or(u64::MAX));
    }

    /// Prompt tokens the server's cache served (counted in `add` already).
    pub fn add_cached(&mut self, tokens: u64) {
        self.cached = self.cached.saturating_add(tokens);
    }

    /// This process's totals.
    pub fn mine(&self) -> &Usage {
        &self.mine
    }

    /// Of this process's prompt tokens, those the server's cache served.
    pub fn cached(&self) -> u64 {
        self.cached
    }

    /// Tokens the member has used in all.
    pub fn used(&self) -> u64 {
        self.before.saturating_add(self.mine.tokens())
    }

    /// Its budget.
    pub fn budget(&self) -> Option<u64> {
        self.budget
    }

    /// Whether the budget is spent: no more model calls.
    pub fn spent(&self) -> bool {
        self.budget.is_some_and(|b| self.used() >= b)
    }

    /// This process's totals, if they changed since last taken.
    pub fn take_report(&mut self) -> Option<Usage> {
        if self.mine == self.reported {
            return None;
        }
        self.reported = self.mine;
        Some(self.mine)
    }

    /// The lead's word, answering the last report (or the join, before any):
    /// the member's totals, which count what was reported, and its budget.
    pub fn heard(&mut self, status: &Standing) {
        self.before = status.total.tokens().saturating_sub(self.reported.tokens());
        self.set_budget(status.token_budget);
    }

    /// The operator set the budget (0: none).
    pub fn set_budget(&mut self, budget: u64) {
        self.budget = (budget > 0).then_some(budget);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(total: u64, budget: u64) -> Standing {
        Standing {
            total: Usage {
                prompt_tokens: total,
                ..Default::default()
            },
            token_budget: budget,
        }
    }

    #[test]
    fn a_budget_is_spent_raised_and_spent_again() {
        let mut meter = Meter::new(Some(1_000));
        assert!(!meter.spent());
        meter.add(600, 100, Duration::from_millis(5));
        assert_eq!(meter.used(), 700);
        let report = meter.take_report().expect("changed");
        assert_eq!(
            (report.prompt_tokens, report.calls, report.model_ms),
            (600, 1, 5)
        );
        assert_eq!(meter.take_report(), None, "nothing new");
        meter.heard(&status(700, 1_000));
        meter.add(300, 0, Duration::ZERO);
        assert!(meter.spent());
        meter.set_budget(5_000);
        assert!(!meter.spent());
        meter.set_budget(0);
        assert_eq!(meter.budget(), None);
        assert!(!meter.spent());
    }

    #[test]
    fn what_earlier_processes_used_counts_against_the_budget() {
        let mut meter = Meter::new(None);
        // Joined: the name used 900 before, and the lead's default is 1,000.
        meter.heard(&status(900, 1_000));
        assert_eq!(meter.used(), 900);
        meter.add(50, 50, Duration::ZERO);
        assert!(meter.spent());
        // The report's answer counts the report: nothing twice.
        meter.take_report();
        meter.heard(&status(1_000, 1_000));
        assert_eq!(meter.used(), 1_000);
        // A lead without usage says nothing: the process's own count stands.
        let mut alone = Meter::new(Some(10));
        alone.add(11, 0, Duration::ZERO);
        assert!(alone.spent());
    }
}
