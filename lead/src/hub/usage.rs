//! The hub's usage commands: what members' models used (`ReportUsage`),
//! their budgets (`SetBudget`, and at `Join`), and what the lead's model
//! reviewer used. The rule (a process's cumulative totals per epoch, counted
//! once; budgets' precedence) is the core's [`mesh_core::usage::Ledger`]; here
//! it is wired to the members, the inboxes and the watchers.

use mesh_core::{
    effect::Notice,
    usage::{Standing, Usage},
};

use super::Hub;

impl Hub {
    /// What the model reviewer `reviewer` (e.g. `model gpt-4o-mini`) used
    /// in one more call: added to its totals for this lead's life (its
    /// epoch), which count as a report would.
    pub(super) fn reviewer_used(&mut self, reviewer: &str, used: Usage) {
        let name = format!("reviewer ({reviewer})");
        let (totals, epoch) = self.workers.reviewer_used(&name, used);
        let standing = self.team.usage.report(&name, false, epoch, totals);
        self.emit_usage(&name, &standing);
    }

    /// Tells the watchers how `name`'s usage stands.
    fn emit_usage(&mut self, name: &str, standing: &Standing) {
        self.emit(Notice::Usage {
            name: name.to_owned(),
            standing: *standing,
        });
    }
}
