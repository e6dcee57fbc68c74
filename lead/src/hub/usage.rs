//! The hub's usage commands: what members' models used (`ReportUsage`),
//! their budgets (`SetBudget`, and at `Join`), and what the lead's model
//! reviewer used. The rule (a process's cumulative totals per epoch, counted
//! once; budgets' precedence) is the core's [`shared::usage::Ledger`]; here
//! it is wired to the members, the inboxes and the watchers.

use shared::{
    names::{Name, LEAD},
    pb::{self, envelope::Body},
    usage::{Standing, Usage},
    wire::{member_usage, ToPb},
};

use super::Hub;
use crate::error::HubError;
use shared::members::Member;

impl Hub {
    /// A member as the wire shows it, with what its model used, its budget
    /// and what it holds now.
    pub(super) fn member_pb(&self, member: &Member) -> pb::Member {
        let standing = self.team.usage.standing(member.name.as_str());
        pb::Member {
            usage: Some(standing.total.to_pb()),
            token_budget: standing.token_budget,
            holds: self
                .team
                .holds
                .get(member.name.as_str())
                .map(|h| h.paths.clone())
                .unwrap_or_default(),
            ..member.to_pb()
        }
    }

    /// `ReportUsage`: the caller's process `epoch` has used `totals` so far.
    pub(super) fn report_usage(&mut self, name: &str, epoch: &str, totals: Usage) -> Standing {
        let before = self.team.usage.standing(name);
        let standing = self.team.usage.report(name, true, epoch, totals);
        if standing != before {
            self.emit_usage(name, &standing);
        }
        standing
    }

    /// `SetBudget`: the operator sets `name`'s budget (0: none). The member,
    /// unless terminated, hears it in its inbox.
    pub(super) fn set_budget(
        &mut self,
        name: &Name,
        token_budget: u64,
    ) -> Result<Standing, HubError> {
        let name = name.as_str();
        let member = self.team.members.get(name);
        let known = member.is_some() || self.team.usage.get(name).is_some_and(|a| a.member);
        if !known {
            return Err(HubError::NotFound(format!(
                "name: no member {name:?} has joined"
            )));
        }
        let active = member.is_some_and(|m| !m.terminated());
        let standing = self.team.usage.set_budget(name, token_budget);
        tracing::info!(member = %name, token_budget, "token budget set");
        if active {
            self.deliver(
                LEAD,
                name,
                None,
                Body::BudgetChanged(pb::BudgetChanged { token_budget }),
            );
        }
        self.emit_usage(name, &standing);
        Ok(standing)
    }

    /// What the model reviewer `reviewer` (e.g. `model gpt-4o-mini`) used
    /// in one more call: added to its totals for this lead's life (its
    /// epoch), which count as a report would.
    pub(super) fn reviewer_used(&mut self, reviewer: &str, used: Usage) {
        let name = format!("reviewer ({reviewer})");
        let totals = self.reviewer_totals.entry(name.clone()).or_default();
        *totals = totals.plus(used);
        let totals = *totals;
        let epoch = self.reviewer_epoch.clone();
        let standing = self.team.usage.report(&name, false, &epoch, totals);
        self.emit_usage(&name, &standing);
    }

    /// Tells the watchers how `name`'s usage stands.
    fn emit_usage(&mut self, name: &str, standing: &Standing) {
        self.emit(pb::event::Kind::Usage(member_usage(name, standing)));
    }

    /// What `ListTeam` shows of usage on every page: the whole team's, and
    /// that of the users of a model that are not members.
    pub(super) fn usage_summary(&self) -> (pb::Usage, Vec<pb::NamedUsage>) {
        let others = self
            .team
            .usage
            .iter()
            .filter(|a| !a.member)
            .map(|a| pb::NamedUsage {
                name: a.name.clone(),
                usage: Some(a.total().to_pb()),
            })
            .collect();
        (self.team.usage.team_total().to_pb(), others)
    }
}
