//! Who is on the team: each member's identity, grant mode and life, the
//! session tokens (by their digest) that place a caller, the join order,
//! and the grace periods running for the disconnected, as one pure value.
//! What an inbox holds, and the streams that carry it, are the lead's
//! runtime's; the core says which `seq` a new envelope gets.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use sha2::Digest as _;

use crate::{
    grant::Mode,
    lifecycle::{Event, Lifecycle},
    names::Name,
};

/// Grace periods ending within this long of one that ends now end with it:
/// members that joined (or lost the lead) together leave together, and the
/// team hears of them in one notice.
pub const GRACE_BATCH_MS: i64 = 100;

/// What is kept of a session token, to place the calls that carry it:
/// SHA-256, in lower-case hex.
pub fn token_hash(token: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = sha2::Sha256::digest(token.as_bytes());
    let mut hex = String::with_capacity(digest.len() * 2);
    for byte in digest {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    hex
}

/// One member of the team.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Stable id, new for every join.
    pub id: String,
    /// Its name, unique among active members.
    pub name: Name,
    /// Free-text role, for people.
    pub role: String,
    /// The digest of the session token its join returned. Kept once it
    /// terminated, so that a retried answer to its shutdown is recognised.
    pub token_hash: Option<String>,
    /// The mode of its current grant.
    pub mode: Mode,
    /// Where it is in its life: the one source of its status, its
    /// idleness, its grace period and its end.
    pub life: Lifecycle,
    /// Join order, for listing and paging.
    pub order: u64,
    /// The last `seq` its inbox handed out.
    pub last_seq: u64,
    /// Why it last said it is idle (meaningful while it is idle).
    pub idle_reason: String,
    /// How it confines its commands, as it said at join.
    pub sandbox: Option<crate::sandbox::Sandbox>,
    /// How its model's replies are held to one call, as it said at join.
    pub decoding: Option<crate::decoding::Decoding>,
}

impl Member {
    /// Whether it left for good.
    pub fn terminated(&self) -> bool {
        self.life.is_terminated()
    }

    /// As the store keeps it.
    pub fn record(&self) -> MemberRecord {
        MemberRecord {
            name: self.name.to_string(),
            member_id: self.id.clone(),
            role: self.role.clone(),
            token_hash: self.token_hash.clone(),
            mode: self.mode,
            idle: self.life.is_idle(),
            idle_reason: self.idle_reason.clone(),
            sandbox: self.sandbox.clone(),
            decoding: self.decoding.clone(),
            terminated: self.life.is_terminated(),
            last_seq: self.last_seq,
            order: self.order,
        }
    }
}

/// A member as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRecord {
    /// Its name.
    pub name: String,
    /// Its id from its join.
    pub member_id: String,
    /// Its role.
    pub role: String,
    /// The digest of its session token.
    pub token_hash: Option<String>,
    /// Its grant's mode.
    pub mode: Mode,
    /// Whether it said it is idle.
    pub idle: bool,
    /// Why it last said so.
    pub idle_reason: String,
    /// Whether it left for good.
    pub terminated: bool,
    /// The last `seq` its inbox handed out (envelopes stored since may
    /// carry later ones: see [`Members::saw_seq`]).
    pub last_seq: u64,
    /// Join order.
    pub order: u64,
    /// How it confines its commands, as it said at join.
    pub sandbox: Option<crate::sandbox::Sandbox>,
    /// How its model's replies are held to one call, as it said at join.
    pub decoding: Option<crate::decoding::Decoding>,
}

/// Every member, by name, in the order they joined.
#[derive(Debug, Default, Clone)]
pub struct Members {
    /// Members by name (a terminated member stays until its name is
    /// reused, or it is forgotten).
    members: HashMap<String, Member>,
    /// Names by join order.
    order: BTreeMap<u64, String>,
    /// Token digest to name, for active members.
    sessions: HashMap<String, String>,
    /// Token digest to name, for terminated members: only a retried answer
    /// to their shutdown is accepted from these.
    retired: HashMap<String, String>,
    /// Members not terminated.
    active: usize,
    /// The next join order number.
    next_order: u64,
    /// Disconnected members by the end of their grace period.
    grace: BTreeSet<(i64, String)>,
    /// Names whose record changed since the last [`Members::take_changed`].
    touched: HashSet<String>,
}

impl Members {
    /// The members as stored: every one not terminated is disconnected
    /// until it comes back, by `grace_until`; a terminated one counts its
    /// retention from `now`.
    pub fn restore(records: Vec<MemberRecord>, now: i64, grace_until: i64) -> Result<Self, String> {
        let mut members = Members::default();
        for record in records {
            let name = Name::parse("name", &record.name).map_err(|e| e.to_string())?;
            let member = Member {
                id: record.member_id,
                name,
                role: record.role,
                token_hash: record.token_hash,
                mode: record.mode,
                life: Lifecycle::restored(record.idle, record.terminated, now, grace_until),
                order: record.order,
                last_seq: record.last_seq,
                idle_reason: record.idle_reason,
                sandbox: record.sandbox,
                decoding: record.decoding,
            };
            members.next_order = members.next_order.max(record.order + 1);
            members.insert(member);
        }
        members.touched.clear();
        Ok(members)
    }

    /// A member by name.
    pub fn get(&self, name: &str) -> Option<&Member> {
        self.members.get(name)
    }

    /// Whether `name` is an active member.
    pub fn is_active(&self, name: &str) -> bool {
        self.get(name).is_some_and(|m| !m.terminated())
    }

    /// The active member whose session token has digest `token_hash`.
    pub fn by_token_hash(&self, token_hash: &str) -> Option<&str> {
        self.sessions.get(token_hash).map(String::as_str)
    }

    /// The terminated member whose session token had digest `token_hash`.
    pub fn by_retired_hash(&self, token_hash: &str) -> Option<&str> {
        self.retired.get(token_hash).map(String::as_str)
    }

    /// How many members are not terminated.
    pub fn active(&self) -> usize {
        self.active
    }

    /// Every member, in join order.
    pub fn iter(&self) -> impl Iterator<Item = &Member> {
        self.order.values().filter_map(|n| self.members.get(n))
    }

    /// Every member that joined after join order `after` (all for `None`).
    pub fn iter_after(&self, after: Option<u64>) -> impl Iterator<Item = &Member> {
        let start = after.map_or(0, |after| after.saturating_add(1));
        self.order
            .range(start..)
            .filter_map(|(_, n)| self.members.get(n))
    }

    /// Names of active members other than `except`, in join order.
    pub fn active_names_except(&self, except: &str) -> Vec<String> {
        self.iter()
            .filter(|m| !m.terminated() && m.name.as_str() != except)
            .map(|m| m.name.to_string())
            .collect()
    }

    /// A new member in plan mode, with the id and the token digest the edge
    /// made; it has until `grace_until` to open its inbox. A terminated
    /// member of that name is replaced (`true`: its inbox must go too).
    pub fn join(
        &mut self,
        name: Name,
        role: String,
        member_id: String,
        token_hash: String,
        grace_until: i64,
    ) -> bool {
        let reused = self.members.contains_key(name.as_str());
        let order = self.next_order;
        self.next_order += 1;
        self.insert(Member {
            id: member_id,
            name,
            role,
            token_hash: Some(token_hash),
            mode: Mode::Plan,
            life: Lifecycle::joined(grace_until),
            order,
            last_seq: 0,
            idle_reason: String::new(),
            sandbox: None,
            decoding: None,
        });
        reused
    }

    /// Records how `name` confines its commands (a change for the store).
    pub fn set_sandbox(&mut self, name: &str, sandbox: Option<crate::sandbox::Sandbox>) {
        if let Some(member) = self.members.get_mut(name) {
            if member.sandbox != sandbox {
                member.sandbox = sandbox;
                self.touched.insert(name.to_owned());
            }
        }
    }

    /// Records how `name`'s model's replies are held to one call (a change
    /// for the store).
    pub fn set_decoding(&mut self, name: &str, decoding: Option<crate::decoding::Decoding>) {
        if let Some(member) = self.members.get_mut(name) {
            if member.decoding != decoding {
                member.decoding = decoding;
                self.touched.insert(name.to_owned());
            }
        }
    }

    /// Adds (or, for a terminated name, replaces) a member.
    fn insert(&mut self, member: Member) {
        let name = member.name.to_string();
        self.remove(&name);
        if !member.terminated() {
            self.active += 1;
        }
        if let Some(hash) = &member.token_hash {
            if member.terminated() {
                self.retired.insert(hash.clone(), name.clone());
            } else {
                self.sessions.insert(hash.clone(), name.clone());
            }
        }
        if let Some(until) = member.life.grace_until() {
            self.grace.insert((until, name.clone()));
        }
        self.order.insert(member.order, name.clone());
        self.members.insert(name.clone(), member);
        self.touched.insert(name);
    }

    /// Forgets a member for good (a terminated one whose retention passed).
    pub fn remove(&mut self, name: &str) {
        if let Some(member) = self.members.remove(name) {
            if !member.terminated() {
                self.active -= 1;
            }
            if let Some(until) = member.life.grace_until() {
                self.grace.remove(&(until, name.to_owned()));
            }
            self.order.remove(&member.order);
            if let Some(hash) = &member.token_hash {
                self.retired.remove(hash);
                self.sessions.remove(hash);
            }
        }
        self.touched.remove(name);
    }

    /// Applies `event` to `name`'s life, keeping the grace periods, the
    /// active count and the tokens in step: `None` for no such member, else
    /// whether its state changed. Its record is rewritten only when what it
    /// holds (idle, terminated) changed; a member that terminates has its
    /// session token retired.
    pub fn on_life(&mut self, name: &str, event: Event) -> Option<bool> {
        let member = self.members.get_mut(name)?;
        let before = member.life;
        let changed = member.life.on(event);
        let after = member.life;
        if before.grace_until() != after.grace_until() {
            if let Some(old) = before.grace_until() {
                self.grace.remove(&(old, name.to_owned()));
            }
            if let Some(until) = after.grace_until() {
                self.grace.insert((until, name.to_owned()));
            }
        }
        if !before.is_terminated() && after.is_terminated() {
            self.active -= 1;
            if let Some(hash) = member.token_hash.clone() {
                self.sessions.remove(&hash);
                self.retired.insert(hash, name.to_owned());
            }
        }
        if before.is_idle() != after.is_idle() || before.is_terminated() != after.is_terminated() {
            self.touched.insert(name.to_owned());
        }
        Some(changed)
    }

    /// `name` said it is idle, for `reason`: whether its record changed
    /// (it was not idle, or said so for another reason).
    pub fn report_idle(&mut self, name: &str, reason: String) -> bool {
        let Some(member) = self.members.get_mut(name) else {
            return false;
        };
        let new_reason = member.idle_reason != reason;
        member.idle_reason = reason;
        let was_idle = member.life.is_idle();
        self.on_life(name, Event::ReportedIdle);
        let now_idle = self.get(name).is_some_and(|m| m.life.is_idle());
        if new_reason {
            self.touched.insert(name.to_owned());
        }
        new_reason || was_idle != now_idle
    }

    /// Sets `name`'s grant mode.
    pub fn set_mode(&mut self, name: &str, mode: Mode) {
        if let Some(member) = self.members.get_mut(name) {
            if member.mode != mode {
                member.mode = mode;
                self.touched.insert(name.to_owned());
            }
        }
    }

    /// The `seq` of the next envelope to `name`'s inbox. The record is not
    /// rewritten for it: the stored envelope carries its `seq`.
    pub fn next_seq(&mut self, name: &str) -> Option<u64> {
        let member = self.members.get_mut(name)?;
        member.last_seq += 1;
        Some(member.last_seq)
    }

    /// A stored envelope to `name` carries `seq`: its inbox handed out at
    /// least that many.
    pub fn saw_seq(&mut self, name: &str, seq: u64) {
        if let Some(member) = self.members.get_mut(name) {
            member.last_seq = member.last_seq.max(seq);
        }
    }

    /// When the first grace period running ends.
    pub fn next_grace(&self) -> Option<i64> {
        self.grace.first().map(|(at, _)| *at)
    }

    /// The members whose grace period is over by `now`, taking in those
    /// that end within [`GRACE_BATCH_MS`] of it, in the order they end:
    /// each is to be terminated. Their periods leave the index.
    pub fn take_lapsed(&mut self, now: i64) -> Vec<String> {
        let mut lapsed = Vec::new();
        while let Some((at, name)) = self.grace.first().cloned() {
            if at > now + GRACE_BATCH_MS {
                break;
            }
            self.grace.pop_first();
            if self
                .members
                .get(&name)
                .is_some_and(|m| m.life.lapses_by(at))
            {
                lapsed.push(name);
            }
        }
        lapsed
    }

    /// The records changed since the last call, in join order.
    pub fn take_changed(&mut self) -> Vec<MemberRecord> {
        let touched = std::mem::take(&mut self.touched);
        let mut changed: Vec<&Member> = touched
            .iter()
            .filter_map(|name| self.members.get(name))
            .collect();
        changed.sort_by_key(|m| m.order);
        changed.into_iter().map(Member::record).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::Status;

    fn join(members: &mut Members, name: &str, grace_until: i64) -> bool {
        members.join(
            Name::parse("name", name).expect("valid"),
            "coder".into(),
            format!("id-{name}"),
            format!("h-{name}"),
            grace_until,
        )
    }

    #[test]
    fn the_idle_reason_is_recorded_and_restored_and_a_new_one_is_a_change() {
        let mut members = Members::default();
        join(&mut members, "alice", 10);
        members.on_life("alice", Event::StreamOpened);
        members.take_changed();
        assert!(members.report_idle("alice", "done: wrote a.txt".into()));
        assert!(
            !members.report_idle("alice", "done: wrote a.txt".into()),
            "the same again"
        );
        assert!(
            members.report_idle("alice", "waiting".into()),
            "a new reason"
        );
        let records = members.take_changed();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].idle_reason, "waiting");
        assert!(records[0].idle);
        let restored = Members::restore(records, 0, 10).expect("restore");
        assert_eq!(
            restored.get("alice").map(|m| m.idle_reason.as_str()),
            Some("waiting")
        );
    }

    #[test]
    fn a_terminated_name_can_be_reused_and_tokens_follow_the_member() {
        let mut members = Members::default();
        assert!(!join(&mut members, "alice", 10));
        join(&mut members, "bob", 10);
        assert_eq!(members.by_token_hash("h-alice"), Some("alice"));
        members.on_life("alice", Event::Terminate { at: 5 });
        assert_eq!(members.by_token_hash("h-alice"), None);
        assert_eq!(members.by_retired_hash("h-alice"), Some("alice"));
        assert!(join(&mut members, "alice", 20), "a terminated name reused");
        let names: Vec<_> = members.iter().map(|m| m.name.to_string()).collect();
        assert_eq!(names, vec!["bob", "alice"]);
        assert_eq!(members.active_names_except("bob"), vec!["alice"]);
        let after: Vec<_> = members
            .iter_after(Some(1))
            .map(|m| m.name.to_string())
            .collect();
        assert_eq!(after, vec!["alice"]);
        let changed: Vec<_> = members.take_changed().into_iter().map(|r| r.name).collect();
        assert_eq!(changed, vec!["bob", "alice"], "join order");
        members.remove("bob");
        assert!(members.get("bob").is_none());
        assert_eq!(members.by_token_hash("h-bob"), None);
        assert!(members.take_changed().is_empty());
    }

    #[test]
    fn active_members_are_counted_through_every_change() {
        let mut members = Members::default();
        join(&mut members, "alice", 10);
        join(&mut members, "bob", 10);
        assert_eq!(members.active(), 2);
        members.on_life("bob", Event::Terminate { at: 1 });
        members.on_life("bob", Event::Terminate { at: 2 });
        assert_eq!(members.active(), 1);
        join(&mut members, "bob", 10);
        assert_eq!(members.active(), 2, "a terminated name reused");
        members.on_life("alice", Event::Terminate { at: 3 });
        members.remove("alice");
        assert_eq!(members.active(), 1);
        members.remove("bob");
        assert_eq!(members.active(), 0, "an active member forgotten");
    }

    #[test]
    fn grace_periods_lapse_together_within_the_batch_and_not_once_connected() {
        let mut members = Members::default();
        join(&mut members, "alice", 1_000);
        join(&mut members, "bob", 1_050);
        join(&mut members, "carol", 1_500);
        join(&mut members, "dan", 1_000);
        members.on_life("dan", Event::StreamOpened);
        assert_eq!(members.next_grace(), Some(1_000));
        assert!(members.take_lapsed(899).is_empty(), "none within 100 ms");
        assert_eq!(
            members.take_lapsed(950),
            vec!["alice", "bob"],
            "bob's ends within the batch of alice's"
        );
        assert_eq!(members.next_grace(), Some(1_500));
        members.on_life("carol", Event::StreamLost { grace_until: 3_000 });
        members.on_life("carol", Event::StreamOpened);
        members.on_life("carol", Event::StreamLost { grace_until: 4_000 });
        assert_eq!(members.next_grace(), Some(4_000), "the index follows");
        assert!(members.take_lapsed(3_500).is_empty());
        assert_eq!(members.take_lapsed(4_000), vec!["carol"]);
        assert_eq!(members.next_grace(), None);
        assert_eq!(
            members.get("dan").map(|m| m.life.status()),
            Some(Status::Working)
        );
    }

    #[test]
    fn a_restored_team_is_disconnected_with_its_grace_and_keeps_seq_and_tokens() {
        let mut members = Members::default();
        join(&mut members, "alice", 10);
        join(&mut members, "bob", 10);
        members.on_life("alice", Event::StreamOpened);
        members.set_mode("alice", Mode::AcceptEdits);
        assert_eq!(members.next_seq("alice"), Some(1));
        assert_eq!(members.next_seq("alice"), Some(2));
        members.on_life("bob", Event::Terminate { at: 3 });
        let records: Vec<MemberRecord> = members.iter().map(Member::record).collect();
        let mut restored = Members::restore(records, 100, 200).expect("restores");
        restored.saw_seq("alice", 7);
        let alice = restored.get("alice").expect("alice");
        assert_eq!(alice.last_seq, 7);
        assert_eq!(alice.mode, Mode::AcceptEdits);
        assert_eq!(alice.life.status(), Status::Disconnected);
        assert_eq!(restored.by_token_hash("h-alice"), Some("alice"));
        assert_eq!(restored.by_retired_hash("h-bob"), Some("bob"));
        assert_eq!(
            restored.get("bob").and_then(|b| b.life.terminated_at()),
            Some(100)
        );
        assert_eq!(restored.next_grace(), Some(200));
        assert_eq!(restored.active(), 1);
        assert!(restored.take_changed().is_empty(), "nothing new to store");
        assert!(join(&mut restored, "bob", 300));
        assert_eq!(
            restored.get("bob").map(|b| b.order),
            Some(2),
            "order goes on"
        );
    }
}
