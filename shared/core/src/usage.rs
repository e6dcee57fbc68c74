//! What each model user (a member, or the lead's model reviewer) has used,
//! and each member's token budget, as a [`Ledger`] of [`Account`]s.
//!
//! The rule: a process reports its *cumulative* totals under an epoch (a
//! string naming the process, the same for its life). Per epoch the ledger
//! keeps the highest of each field ever reported, so a retried or stale
//! report counts nothing twice; a user's total is the sum over its epochs,
//! so a new process under the same name adds to what the earlier ones used.
//!
//! ```text
//!   report(alice, e1, 100)  -> total 100
//!   report(alice, e1, 100)  -> total 100   (a retry)
//!   report(alice, e1,  90)  -> total 100   (stale: the max is kept)
//!   report(alice, e2,  50)  -> total 150   (a new process adds)
//! ```
//!
//! An account keeps at most [`MAX_EPOCHS`] epochs; past that the one seen
//! first is folded into the account's `settled` usage (a process that old
//! has long ended: one member holds a name at a time), so a peer cannot make
//! the lead hold an epoch per report.
//!
//! A member's budget is the one the operator set for its name
//! ([`Ledger::set_budget`]), else the one it joined with, else the lead's
//! default ([`Ledger::join`]). Budget 0 is none.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::FieldError;

/// The most bytes of an epoch (`UsageReport.epoch`).
pub const EPOCH_MAX: usize = 128;
/// The most epochs one account keeps apart; older ones are folded into
/// its settled usage.
pub const MAX_EPOCHS: usize = 64;

/// What a model was used for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens sent to the model.
    pub prompt_tokens: u64,
    /// Tokens the model answered with.
    pub completion_tokens: u64,
    /// Model calls made.
    pub calls: u64,
    /// Time spent waiting for the model, in milliseconds.
    pub model_ms: u64,
}

impl Usage {
    /// Prompt and completion tokens together (what a budget bounds).
    pub fn tokens(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }

    /// Each field's larger value.
    pub fn max(self, other: Usage) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens.max(other.prompt_tokens),
            completion_tokens: self.completion_tokens.max(other.completion_tokens),
            calls: self.calls.max(other.calls),
            model_ms: self.model_ms.max(other.model_ms),
        }
    }

    /// Both together, field by field (saturating: a peer's absurd numbers
    /// cannot wrap).
    pub fn plus(self, other: Usage) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens.saturating_add(other.prompt_tokens),
            completion_tokens: self
                .completion_tokens
                .saturating_add(other.completion_tokens),
            calls: self.calls.saturating_add(other.calls),
            model_ms: self.model_ms.saturating_add(other.model_ms),
        }
    }
}

/// A user's totals over every epoch, and its budget.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Standing {
    /// Its usage over every epoch.
    pub total: Usage,
    /// Its budget in tokens; 0: none.
    pub token_budget: u64,
}

/// One model user's record, as the store keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Account {
    /// The member's name, or what the other user is called (e.g.
    /// `reviewer (model gpt-4o-mini)`).
    pub name: String,
    /// Whether it is a member's (else another user of a model, shown apart).
    pub member: bool,
    /// What the epochs folded away used.
    #[serde(default)]
    pub settled: Usage,
    /// The highest totals reported per epoch, the epoch seen first first.
    #[serde(default)]
    pub epochs: Vec<(String, Usage)>,
    /// The budget the operator set for the name, if any: it wins at `Join`.
    #[serde(default)]
    pub operator_budget: Option<u64>,
    /// The budget in force; 0: none.
    #[serde(default)]
    pub token_budget: u64,
}

impl Account {
    /// Its usage over every epoch.
    pub fn total(&self) -> Usage {
        self.epochs
            .iter()
            .fold(self.settled, |sum, (_, used)| sum.plus(*used))
    }

    /// Its totals and budget.
    pub fn standing(&self) -> Standing {
        Standing {
            total: self.total(),
            token_budget: self.token_budget,
        }
    }

    /// Takes `totals`, cumulative for `epoch`: each field's highest value is
    /// kept. Whether anything changed.
    fn report(&mut self, epoch: &str, totals: Usage) -> bool {
        if let Some((_, kept)) = self.epochs.iter_mut().find(|(e, _)| e == epoch) {
            let new = kept.max(totals);
            let changed = new != *kept;
            *kept = new;
            return changed;
        }
        self.epochs.push((epoch.to_owned(), totals));
        while self.epochs.len() > MAX_EPOCHS {
            let (_, folded) = self.epochs.remove(0);
            self.settled = self.settled.plus(folded);
        }
        true
    }
}

/// Checks a report's epoch: 1 to [`EPOCH_MAX`] bytes.
pub fn check_epoch(epoch: &str) -> Result<(), FieldError> {
    if epoch.is_empty() {
        return Err(FieldError::new("epoch", "is required"));
    }
    crate::limits::check("epoch", epoch, EPOCH_MAX)
}

/// Every model user's account, and which changed since the store last
/// took them.
#[derive(Debug, Default)]
pub struct Ledger {
    /// Accounts by name.
    accounts: BTreeMap<String, Account>,
    /// Names whose account changed since [`Ledger::take_changed`].
    changed: BTreeSet<String>,
}

impl Ledger {
    /// The ledger as stored.
    pub fn restore(accounts: Vec<Account>) -> Self {
        Self {
            accounts: accounts.into_iter().map(|a| (a.name.clone(), a)).collect(),
            changed: BTreeSet::new(),
        }
    }

    /// `name`'s account, if it has one.
    pub fn get(&self, name: &str) -> Option<&Account> {
        self.accounts.get(name)
    }

    /// `name`'s totals and budget (nothing used, no budget, if unknown).
    pub fn standing(&self, name: &str) -> Standing {
        self.accounts
            .get(name)
            .map(Account::standing)
            .unwrap_or_default()
    }

    /// `name`'s account, made if it has none.
    fn account(&mut self, name: &str, member: bool) -> &mut Account {
        self.accounts
            .entry(name.to_owned())
            .or_insert_with(|| Account {
                name: name.to_owned(),
                member,
                ..Account::default()
            })
    }

    /// A member joins: its budget is the operator's for its name, else
    /// `requested` (nonzero), else `default`. Its standing.
    pub fn join(&mut self, name: &str, requested: u64, default: u64) -> Standing {
        let account = self.account(name, true);
        account.member = true;
        account.token_budget =
            account
                .operator_budget
                .unwrap_or(if requested > 0 { requested } else { default });
        self.changed.insert(name.to_owned());
        self.standing(name)
    }

    /// What `name` reports its process `epoch` has used so far (cumulative):
    /// a retry or a stale report changes nothing. `member`: whether `name`
    /// is a member's. Its standing.
    pub fn report(&mut self, name: &str, member: bool, epoch: &str, totals: Usage) -> Standing {
        if self.account(name, member).report(epoch, totals) {
            self.changed.insert(name.to_owned());
        }
        self.standing(name)
    }

    /// The operator sets `name`'s budget (0: none, and the name's next
    /// `Join` takes its own or the default). Its standing.
    pub fn set_budget(&mut self, name: &str, token_budget: u64) -> Standing {
        let account = self.account(name, true);
        account.operator_budget = (token_budget > 0).then_some(token_budget);
        account.token_budget = token_budget;
        self.changed.insert(name.to_owned());
        self.standing(name)
    }

    /// Every account, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Account> {
        self.accounts.values()
    }

    /// Everyone's usage together, members' and others'.
    pub fn team_total(&self) -> Usage {
        self.accounts
            .values()
            .fold(Usage::default(), |sum, a| sum.plus(a.total()))
    }

    /// The accounts changed since the last call, by name.
    pub fn take_changed(&mut self) -> Vec<Account> {
        std::mem::take(&mut self.changed)
            .into_iter()
            .filter_map(|name| self.accounts.get(&name).cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn used(tokens: u64, calls: u64) -> Usage {
        Usage {
            prompt_tokens: tokens,
            completion_tokens: tokens / 2,
            calls,
            model_ms: calls * 100,
        }
    }

    #[test]
    fn a_retried_or_stale_report_counts_nothing_twice_and_a_new_epoch_adds() {
        let mut ledger = Ledger::default();
        let first = ledger.report("alice", true, "e1", used(100, 2));
        assert_eq!(first.total, used(100, 2));
        assert_eq!(ledger.take_changed().len(), 1);
        assert_eq!(ledger.report("alice", true, "e1", used(100, 2)), first);
        assert!(ledger.take_changed().is_empty(), "a retry changes nothing");
        assert_eq!(ledger.report("alice", true, "e1", used(90, 1)), first);
        assert!(ledger.take_changed().is_empty(), "a stale report neither");
        let later = ledger.report("alice", true, "e2", used(50, 1));
        assert_eq!(later.total, used(150, 3));
        // Fields are kept apart: a report higher in one field only.
        let odd = Usage {
            calls: 10,
            ..Usage::default()
        };
        assert_eq!(ledger.report("alice", true, "e2", odd).total.calls, 12);
        assert_eq!(ledger.team_total().calls, 12);
    }

    #[test]
    fn absurd_numbers_saturate() {
        let mut ledger = Ledger::default();
        let huge = Usage {
            prompt_tokens: u64::MAX,
            completion_tokens: u64::MAX,
            calls: u64::MAX,
            model_ms: u64::MAX,
        };
        ledger.report("alice", true, "e1", huge);
        let standing = ledger.report("alice", true, "e2", huge);
        assert_eq!(standing.total, huge);
        assert_eq!(standing.total.tokens(), u64::MAX);
    }

    #[test]
    fn epochs_past_the_bound_are_folded_and_still_counted() {
        let mut ledger = Ledger::default();
        for i in 0..(MAX_EPOCHS as u64 + 10) {
            ledger.report("alice", true, &format!("e{i}"), used(1, 1));
        }
        let account = ledger.get("alice").expect("account");
        assert_eq!(account.epochs.len(), MAX_EPOCHS);
        assert_eq!(account.settled.calls, 10);
        assert_eq!(account.total().calls, MAX_EPOCHS as u64 + 10);
    }

    #[test]
    fn the_operators_budget_wins_then_the_members_then_the_default() {
        let mut ledger = Ledger::default();
        assert_eq!(ledger.join("alice", 0, 1_000).token_budget, 1_000);
        assert_eq!(ledger.join("alice", 500, 1_000).token_budget, 500);
        assert_eq!(ledger.set_budget("alice", 9_000).token_budget, 9_000);
        assert_eq!(ledger.join("alice", 500, 1_000).token_budget, 9_000);
        // Removed: none now; the next join takes its own or the default.
        assert_eq!(ledger.set_budget("alice", 0).token_budget, 0);
        assert_eq!(ledger.join("alice", 0, 1_000).token_budget, 1_000);
    }

    #[test]
    fn a_restored_ledger_is_the_same_ledger() {
        let mut ledger = Ledger::default();
        ledger.join("alice", 0, 100);
        ledger.report("alice", true, "e1", used(10, 1));
        ledger.report("reviewer (model m)", false, "lead-1", used(5, 1));
        let stored = ledger.take_changed();
        let restored = Ledger::restore(stored);
        assert_eq!(restored.standing("alice"), ledger.standing("alice"));
        assert_eq!(restored.team_total(), ledger.team_total());
        assert!(!restored.get("reviewer (model m)").expect("kept").member);
    }

    #[test]
    fn epochs_are_checked() {
        assert!(check_epoch("").is_err());
        assert!(check_epoch(&"e".repeat(EPOCH_MAX)).is_ok());
        let err = check_epoch(&"e".repeat(EPOCH_MAX + 1)).expect_err("long");
        assert_eq!(err.field, "epoch");
    }
}
