//! Telling people a review waits for them (`lead serve --notify FILE`): the
//! hub shows this observer each batch's changed requests; a request that
//! waits for a person, or whose owners still owed changed, is handed to
//! the notifier ([`mesh_notify`]: webhooks, Slack, mail, escalation), and
//! one that was decided settles its escalations. A notice only links to the
//! request's console page: nothing is decided by following it.

use std::{collections::HashMap, sync::Arc};

use mesh_core::{
    owners::Owners,
    protocol::{Kind, Request, Status},
    team::{paths_of, tally_of, Change},
};
use mesh_notify::{Event, Notice, Notifier};

/// The notifier, and what it was last told of each waiting request.
#[derive(Debug)]
pub(crate) struct Notices {
    notifier: Notifier,
    owners: Arc<Owners>,
    /// The console's address (`http://host:port/`), for links.
    console: String,
    /// Whether every request waits for a person (`--approval manual`):
    /// otherwise only those a machine handed on to one, or its owners hold.
    manual: bool,
    /// Each waiting request's owed owners as last told.
    told: HashMap<String, Vec<String>>,
}

impl Notices {
    pub(crate) fn new(
        notifier: Notifier,
        owners: Arc<Owners>,
        console: String,
        manual: bool,
    ) -> Self {
        Self {
            notifier,
            owners,
            console,
            manual,
            told: HashMap::new(),
        }
    }

    /// The requests among a batch's `changes`, seen `now` (unix ms).
    pub(crate) fn observe<'a>(&mut self, changes: impl Iterator<Item = &'a Change>, now: i64) {
        for change in changes {
            match change {
                Change::Request(r) if r.status == Status::Pending => self.pending(r, now),
                Change::Request(r) => self.settled(r.id().as_str()),
                Change::RequestForgotten(id) => self.settled(id.as_str()),
                _ => {}
            }
        }
    }

    fn settled(&mut self, id: &str) {
        if self.told.remove(id).is_some() {
            self.notifier.settled(id);
        }
    }

    fn pending(&mut self, r: &Request, now: i64) {
        if r.opening.kind == Kind::Shutdown || r.is_landing() {
            return;
        }
        let tally = tally_of(&self.owners, r);
        let waits_for = tally.as_ref().map(|t| t.waits_for()).unwrap_or_default();
        let for_a_person = self.manual
            || tally.is_some()
            || r.reviews.last().is_some_and(|s| s.verdict == "waits");
        let id = r.id().to_string();
        if !for_a_person || self.told.get(&id) == Some(&waits_for) {
            return;
        }
        let owners = tally
            .map(|t| {
                t.rules
                    .iter()
                    .filter(|(rule, names)| names.len() < rule.count)
                    .flat_map(|(rule, _)| rule.owners.iter().map(ToString::to_string))
                    .collect()
            })
            .unwrap_or_default();
        self.notifier.waiting(Notice {
            event: Event::Waiting,
            request_id: id.clone(),
            kind: kind_name(r.opening.kind).into(),
            member: r.opening.sender.clone(),
            title: title(r),
            paths: paths_of(r),
            waits_for: waits_for.clone(),
            owners,
            url: format!("{}#/requests/{id}", self.console),
            at_unix_ms: u64::try_from(now).unwrap_or_default(),
        });
        self.told.insert(id, waits_for);
    }
}

/// How a notice names a request's kind.
fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::PlanApproval => "plan",
        Kind::Permission => "permission",
        Kind::Result => "result",
        Kind::Amendment => "amendment",
        Kind::Shutdown => "shutdown",
    }
}

/// One line: what `r` asks.
fn title(r: &Request) -> String {
    let line = match r.opening.kind {
        Kind::PlanApproval => format!("plan: {}", r.plan().summary),
        Kind::Permission => {
            let tool = serde_json::from_str::<serde_json::Value>(&r.opening.payload_json)
                .ok()
                .and_then(|p| p.get("tool")?.as_str().map(str::to_owned))
                .unwrap_or_default();
            match paths_of(r).first() {
                Some(path) => format!("{tool} {path}"),
                None => tool,
            }
        }
        Kind::Result => format!("result of {}", paths_of(r).join(", ")),
        Kind::Amendment => format!("amendment: {}", paths_of(r).join(", ")),
        Kind::Shutdown => "shutdown".into(),
    };
    mesh_core::limits::cut(line.lines().next().unwrap_or_default(), 200)
}
