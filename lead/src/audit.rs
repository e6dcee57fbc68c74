//! The audit trail: every decision (a plan, a permission, a result, an
//! amendment, a shutdown, a budget) with who decided and the digest of what
//! was decided, appended to a hash chain in the store. Each entry carries
//! the hash of the one before, and its own hash over everything it says, so
//! an entry edited, dropped or reordered afterwards breaks the chain where
//! it was touched ([`verify`], `lead audit verify FILE`).
//!
//! The hub shows it the team's changes of each batch ([`Trail::observe`]):
//! a request seen resolved for the first time is a decision; a member's
//! budget that differs from the last one seen is one too.

use std::collections::{HashMap, HashSet, VecDeque};

use mesh_core::{
    access::{Person, Role},
    protocol::{Kind, Request, Status},
    team::Change as TeamChange,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The most entries the running lead keeps at hand for `ListAudit` (the
/// store keeps every one).
pub(crate) const KEPT: usize = 100_000;

/// One decision, as the trail keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Its place in the trail, from 1.
    pub seq: u64,
    /// When it was recorded (unix ms).
    pub at_unix_ms: i64,
    /// `plan_approval`, `permission`, `result`, `amendment`, `shutdown`,
    /// `budget`.
    pub what: String,
    /// The request's id, or the member whose budget it is.
    pub subject: String,
    /// `approved`, `rejected`, `expired`, or the budget set.
    pub decision: String,
    /// Who decided: `operator`, `operator NAME` (a named operator token),
    /// `operator (console)`, `policy`, `auto`, `program NAME`, `model NAME`,
    /// `merge`, `member NAME` (a shutdown's answer), `deadline` (expired
    /// by its deadline), `lead` (another expiry).
    pub by: String,
    /// The operator who decided, where one did: who vouched for them (the
    /// identity provider, or none for a token of the lead's), their
    /// subject there, their name and the role that let them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub person: Option<Decider>,
    /// The owners rule (`--owners`) each owner's approval counted for, as
    /// `PATTERN: NAME`, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owners: Vec<String>,
    /// The words that came with it.
    pub feedback: String,
    /// SHA-256 of what was decided (the request's payload), hex.
    pub content_sha256: String,
    /// The hash of the entry before (empty for the first).
    pub prev: String,
    /// SHA-256 over this entry with `hash` empty, hex.
    pub hash: String,
}

/// Who decided, as the trail names them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decider {
    /// The identity provider that vouched for them (none: a token of the
    /// lead's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// Their subject (`sub`) at that provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// Their name.
    pub name: String,
    /// Their role: viewer, reviewer or admin.
    pub role: Role,
}

impl From<&Person> for Decider {
    fn from(person: &Person) -> Self {
        Decider {
            issuer: person.issuer.clone(),
            subject: person.subject.clone(),
            name: person.name.clone(),
            role: person.role,
        }
    }
}

impl Entry {
    /// The hash this entry must carry.
    pub fn computed_hash(&self) -> String {
        let mut bare = self.clone();
        bare.hash = String::new();
        let bytes = serde_json::to_vec(&bare).unwrap_or_default();
        hex(&bytes)
    }

    /// Sets `hash` (over the entry as JSON with `hash` empty) and returns
    /// the entry as JSON, as the store keeps it: one encoding for both, the
    /// hash spliced into the last field.
    fn seal(&mut self) -> String {
        const EMPTY_HASH: &str = "\"hash\":\"\"}";
        self.hash = String::new();
        let bare = serde_json::to_string(&*self).unwrap_or_default();
        self.hash = hex(bare.as_bytes());
        match bare.strip_suffix(EMPTY_HASH) {
            Some(head) => format!("{head}\"hash\":\"{}\"}}", self.hash),
            None => serde_json::to_string(&*self).unwrap_or_default(),
        }
    }
}

/// A decision as the store appends it: its place and its JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// Its place in the trail.
    pub seq: u64,
    /// The entry as JSON, hash and all.
    pub json: String,
}

/// The trail as the hub appends to it.
#[derive(Debug)]
pub(crate) struct Trail {
    /// The newest entries.
    recent: VecDeque<Entry>,
    /// The hash of the newest entry.
    last_hash: String,
    /// The next entry's seq.
    next_seq: u64,
    /// Requests already decided in the trail (forgotten with the request).
    decided: HashSet<String>,
    /// Each member's budget as last seen.
    budgets: HashMap<String, u64>,
    /// Whether the store keeps the trail: then each entry is sealed (its
    /// hash and JSON) as it is appended, for the decision's own commit.
    /// A store that keeps nothing (memory) has the newest entries sealed
    /// only when the trail is read.
    stored: bool,
    /// How many of the newest entries in `recent` are not sealed yet.
    unsealed: usize,
    /// The most entries `recent` holds ([`KEPT`]).
    keep: usize,
}

impl Default for Trail {
    /// An empty trail the store keeps.
    fn default() -> Self {
        Self::restore(true, Vec::new(), std::iter::empty(), std::iter::empty())
    }
}

impl Trail {
    /// The trail as the store kept it (`kept`: its newest entries, oldest
    /// first), knowing which requests are resolved already and the budgets
    /// as they stand.
    pub(crate) fn restore<'a>(
        stored: bool,
        kept: Vec<Entry>,
        requests: impl Iterator<Item = &'a Request>,
        budgets: impl Iterator<Item = (String, u64)>,
    ) -> Self {
        let last_hash = kept.last().map(|e| e.hash.clone()).unwrap_or_default();
        let next_seq = kept.last().map_or(1, |e| e.seq + 1);
        let mut recent = VecDeque::from(kept);
        // Room for all it will keep, taken once: address space, not memory,
        // until used; a deque grown by doubling copied itself each time (a
        // percent of the lead's CPU on a fresh lead's plan handshakes).
        recent.reserve(KEPT.saturating_sub(recent.len()));
        Self {
            recent,
            last_hash,
            next_seq,
            decided: requests
                .filter(|r| r.status.is_terminal())
                .map(|r| r.id().to_string())
                .collect(),
            budgets: budgets.collect(),
            stored,
            unsealed: 0,
            keep: KEPT,
        }
    }

    /// The decisions the team's `changes` make, appended: what the store
    /// must keep of them (nothing if it keeps no trail).
    pub(crate) fn observe<'a>(
        &mut self,
        changes: impl Iterator<Item = &'a TeamChange>,
        now: i64,
    ) -> Vec<Sealed> {
        let mut out = Vec::new();
        for change in changes {
            match change {
                TeamChange::Request(r)
                    if r.status.is_terminal() && self.decided.insert(r.id().to_string()) =>
                {
                    let (what, by) = decided_by(r);
                    out.extend(self.append(now, what, r.id().to_string(), r.status, by, r));
                }
                TeamChange::RequestForgotten(id) => {
                    self.decided.remove(id.as_str());
                }
                // The budget an operator set (`SetBudget`); usage reports
                // change the account too, and are no decision.
                TeamChange::Usage(account) if account.member => {
                    let name = account.name.clone();
                    let budget = account.operator_budget.unwrap_or(0);
                    let before = self.budgets.insert(name.clone(), budget);
                    if before.is_some_and(|b| b != budget)
                        || (before.is_none() && account.operator_budget.is_some())
                    {
                        let entry = self.push(Entry {
                            seq: 0,
                            at_unix_ms: now,
                            what: "budget".into(),
                            subject: name,
                            decision: format!("budget {budget}"),
                            by: "operator".into(),
                            person: None,
                            owners: Vec::new(),
                            feedback: String::new(),
                            content_sha256: String::new(),
                            prev: String::new(),
                            hash: String::new(),
                        });
                        out.extend(entry);
                    }
                }
                _ => {}
            }
        }
        out
    }

    fn append(
        &mut self,
        now: i64,
        what: &str,
        subject: String,
        status: Status,
        by: String,
        request: &Request,
    ) -> Option<Sealed> {
        let decision = match status {
            Status::Approved => "approved",
            Status::Rejected => "rejected",
            Status::Expired => "expired",
            Status::Pending => "pending",
        };
        self.push(Entry {
            seq: 0,
            at_unix_ms: now,
            what: what.into(),
            subject,
            decision: decision.into(),
            by,
            person: deciding_person(request).map(Decider::from),
            owners: request
                .reviews
                .iter()
                .flat_map(|s| {
                    let name = s
                        .person
                        .as_ref()
                        .map_or(s.reviewer.as_str(), |p| p.name.as_str());
                    s.owner_rules
                        .iter()
                        .map(move |rule| format!("{rule}: {name}"))
                })
                .collect(),
            feedback: mesh_core::limits::cut(&request.feedback, 2_000),
            content_sha256: hex(request.opening.payload_json.as_bytes()),
            prev: String::new(),
            hash: String::new(),
        })
    }

    /// Appends `entry`: sealed and chained on now, for the store, if the
    /// store keeps the trail; otherwise as it stands, sealed when read.
    fn push(&mut self, mut entry: Entry) -> Option<Sealed> {
        entry.seq = self.next_seq;
        self.next_seq += 1;
        let sealed = if self.stored {
            let json = chain(&mut self.last_hash, &mut entry);
            Some(Sealed {
                seq: entry.seq,
                json,
            })
        } else {
            if self.unsealed >= self.recent.len() && self.recent.len() >= self.keep {
                // The oldest is about to go: its hash must be known first.
                self.seal_all();
            }
            self.unsealed += 1;
            None
        };
        self.recent.push_back(entry);
        while self.recent.len() > self.keep {
            self.recent.pop_front();
        }
        sealed
    }

    /// Seals the entries not sealed yet, oldest first.
    fn seal_all(&mut self) {
        let first = self.recent.len() - self.unsealed.min(self.recent.len());
        for entry in self.recent.range_mut(first..) {
            chain(&mut self.last_hash, entry);
        }
        self.unsealed = 0;
    }

    /// The seq the next entry will have.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The newest `n` entries, oldest first (the newest not sealed, if
    /// the store keeps no trail).
    pub(crate) fn newest(&self, n: usize) -> impl Iterator<Item = &Entry> {
        self.recent.iter().skip(self.recent.len().saturating_sub(n))
    }

    /// The entries after `after_seq` recorded at or after `since`, oldest
    /// first, at most `limit`.
    pub(crate) fn page(&mut self, since: i64, after_seq: u64, limit: usize) -> Vec<Entry> {
        self.seal_all();
        self.recent
            .iter()
            .filter(|e| e.seq > after_seq && e.at_unix_ms >= since)
            .take(limit)
            .cloned()
            .collect()
    }
}

/// Links `entry` to the entry whose hash is `last_hash` and seals it; the
/// hash it chains on becomes `entry`'s. Its JSON.
fn chain(last_hash: &mut String, entry: &mut Entry) -> String {
    entry.prev = std::mem::take(last_hash);
    let json = entry.seal();
    last_hash.clone_from(&entry.hash);
    json
}

/// SHA-256 of `bytes`, lower-case hex.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(64);
    for byte in Sha256::digest(bytes) {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 15)]));
    }
    out
}

/// What a resolved request was, and who decided it.
pub(crate) fn decided_by(r: &Request) -> (&'static str, String) {
    let what = crate::stats::kind_name(r.opening.kind);
    let by = match (r.status, r.opening.kind) {
        // Its deadline passed, or the lead expired it (its asker left,
        // a newer one superseded it).
        (Status::Expired, _) if r.feedback.starts_with("deadline passed") => "deadline".to_owned(),
        (Status::Expired, _) => "lead".to_owned(),
        (_, Kind::Shutdown) => format!("member {}", r.opening.target),
        _ => r
            .reviews
            .iter()
            .rev()
            .find(|s| matches!(s.verdict.as_str(), "approve" | "reject" | "error"))
            .map_or_else(|| "operator".to_owned(), |s| s.reviewer.clone()),
    };
    (what, by)
}

/// The operator whose word decided `r`: the newest review step an operator
/// signed, unless a machine or an expiry decided it.
fn deciding_person(r: &Request) -> Option<&Person> {
    if r.status == Status::Expired || r.opening.kind == Kind::Shutdown {
        return None;
    }
    let last = r
        .reviews
        .iter()
        .rev()
        .find(|s| matches!(s.verdict.as_str(), "approve" | "reject" | "error"))?;
    match &last.person {
        Some(person) => Some(person),
        // A result is decided by its merge, after the operator's approval.
        None if last.reviewer == "merge" => r.reviews.iter().rev().find_map(|s| s.person.as_ref()),
        None => None,
    }
}

/// Checks a trail written as JSON lines: each entry's hash over what it
/// says, and each link to the one before (the first line is taken as it
/// is: an export may start anywhere). The number of entries, or the line
/// (from 1) where it breaks and why.
pub fn verify(text: &str) -> Result<usize, (usize, String)> {
    let mut prev: Option<Entry> = None;
    let mut count = 0;
    for (i, line) in text.lines().enumerate() {
        let at = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let entry: Entry =
            serde_json::from_str(line).map_err(|e| (at, format!("not an audit entry: {e}")))?;
        if entry.computed_hash() != entry.hash {
            return Err((
                at,
                format!(
                    "entry {} was changed: its hash does not match what it says",
                    entry.seq
                ),
            ));
        }
        if let Some(before) = &prev {
            if entry.prev != before.hash {
                return Err((
                    at,
                    format!(
                        "entry {} does not follow entry {}: the chain is broken (an entry was removed, added or reordered)",
                        entry.seq, before.seq
                    ),
                ));
            }
            if entry.seq != before.seq + 1 {
                return Err((
                    at,
                    format!("entry {} follows entry {}", entry.seq, before.seq),
                ));
            }
        }
        count += 1;
        prev = Some(entry);
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(subject: &str) -> Entry {
        Entry {
            seq: 0,
            at_unix_ms: 1,
            what: "plan_approval".into(),
            subject: subject.into(),
            decision: "approved".into(),
            by: "operator alice".into(),
            person: None,
            owners: Vec::new(),
            feedback: String::new(),
            content_sha256: String::new(),
            prev: String::new(),
            hash: String::new(),
        }
    }

    fn entry(trail: &mut Trail, subject: &str) -> Sealed {
        trail
            .push(decision(subject))
            .expect("a stored trail seals at once")
    }

    #[test]
    fn a_trail_no_store_keeps_is_sealed_when_read_into_the_same_chain() {
        let mut stored = Trail::default();
        let mut unstored = Trail {
            stored: false,
            keep: 4,
            ..Trail::default()
        };
        let subjects: Vec<String> = (0..11).map(|i| format!("r{i}")).collect();
        for (i, subject) in subjects.iter().enumerate() {
            let _ = entry(&mut stored, subject);
            assert_eq!(unstored.push(decision(subject)), None, "nothing to store");
            if i == 2 {
                // Read mid-way: the entries so far are sealed, and the
                // ones after chain on to them.
                assert_eq!(unstored.page(0, 0, 10).len(), 3);
            }
        }
        // Eleven pushed through a window of four: the oldest went sealed.
        let page = unstored.page(0, 0, 10);
        let tail: Vec<Entry> = stored.newest(4).cloned().collect();
        assert_eq!(page, tail);
        let lines: Vec<String> = page
            .iter()
            .map(|e| serde_json::to_string(e).expect("json"))
            .collect();
        assert_eq!(verify(&lines.join("\n")), Ok(4));
    }

    #[test]
    fn an_edited_removed_or_reordered_entry_breaks_the_chain_where_it_is() {
        let mut trail = Trail {
            next_seq: 1,
            ..Trail::default()
        };
        let lines: Vec<String> = ["a", "b", "c"]
            .iter()
            .map(|s| {
                let sealed = entry(&mut trail, s);
                // The JSON the store keeps is the entry's, hashed once.
                let kept = trail.newest(1).next().expect("kept");
                assert_eq!(sealed.json, serde_json::to_string(kept).expect("json"));
                assert_eq!(kept.hash, kept.computed_hash());
                sealed.json
            })
            .collect();
        assert_eq!(verify(&lines.join("\n")), Ok(3));
        let edited = lines[1].replace("operator alice", "operator mallory");
        let text = [lines[0].clone(), edited, lines[2].clone()].join("\n");
        assert!(matches!(verify(&text), Err((2, why)) if why.contains("entry 2 was changed")));
        let dropped = [lines[0].clone(), lines[2].clone()].join("\n");
        assert!(matches!(verify(&dropped), Err((2, why)) if why.contains("broken")));
        assert_eq!(
            verify(&lines[1..].join("\n")),
            Ok(2),
            "an export may start anywhere"
        );
    }
}
