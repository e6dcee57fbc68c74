//! The owners' say on a request (`--owners`): an approval of a request
//! whose paths fall under owners rules decides it only once the owners of
//! every such rule have approved; until then the approval is recorded (as
//! counting for the rules its operator owns, or as not counting) and the
//! request waits. A machine's approval (a policy, the approval mode, a
//! model, a chain's stage) never stands for the owners. Rejections are not
//! held: any reviewer's ends the request.

use super::{Signer, Team};
use crate::{
    access::Person,
    effect::Effect,
    names::RequestId,
    owners::{Owners, Tally},
    protocol::{Kind, Request, Status},
};

/// The owners' tally of `request` under `owners`: none where no rule
/// covers its paths.
pub fn tally_of<'a>(owners: &'a Owners, request: &Request) -> Option<Tally<'a>> {
    if owners.is_empty() {
        return None;
    }
    let rules = owners.rules_for(&paths_of(request));
    if rules.is_empty() {
        return None;
    }
    let counted = request.reviews.iter().flat_map(|step| {
        let who = step.person.as_ref().map(|p| p.name.as_str());
        step.owner_rules
            .iter()
            .filter_map(move |rule| Some((rule.as_str(), who?)))
    });
    Some(Tally::new(rules, counted))
}

impl Team {
    /// The owners' tally of `request`: none where no owners rule covers
    /// its paths.
    pub fn owners_of<'a>(&'a self, request: &Request) -> Option<Tally<'a>> {
        tally_of(&self.owners, request)
    }

    /// Sets what `request` still waits for from its owners, if it is
    /// pending under owners rules (`@dba: 1 of 2`).
    pub fn show_owed(&self, request: &mut Request) {
        request.waits_for = match request.status {
            Status::Pending => self
                .owners_of(request)
                .map(|tally| tally.waits_for())
                .unwrap_or_default(),
            _ => Vec::new(),
        };
    }

    /// Request `id` as it stands while it waits for its owners: the reply
    /// to an approval [`Team::held_for_owners`] held.
    pub(super) fn held_reply(&self, id: &RequestId) -> Result<Request, crate::refusal::CoreError> {
        let mut request = self.requests.get(id).cloned().ok_or_else(|| {
            crate::refusal::CoreError::NotFound(format!("request_id: no request {id}"))
        })?;
        self.show_owed(&mut request);
        Ok(request)
    }

    /// The owners rules `person`'s approval of request `id` counts for now.
    pub(super) fn owners_counted(&self, id: &RequestId, person: &Person) -> Vec<String> {
        self.requests
            .get(id)
            .and_then(|r| self.owners_of(r))
            .map(|tally| tally.counts_for(person))
            .unwrap_or_default()
    }

    /// Whether an approval of `id` by `by` must wait for owners instead of
    /// deciding it: then it is recorded in the request's history (counting
    /// for the rules its operator owns, or not counting) and nothing else
    /// happens. False where no owners rule covers the request, or this
    /// approval is the last its owners owed.
    pub(super) fn held_for_owners(
        &mut self,
        id: &RequestId,
        by: Signer<'_>,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> bool {
        let Some(request) = self
            .requests
            .get(id)
            .filter(|r| r.status == Status::Pending)
        else {
            return false;
        };
        let Some(tally) = self.owners_of(request) else {
            return false;
        };
        let (name, person) = by;
        let waits = tally.waits_for().join(", ");
        let (verdict, words) = match person {
            None => (
                "waits",
                format!("{name} approves; the owners decide: waits for {waits}"),
            ),
            Some(person) => {
                let counts = tally.counts_for(person);
                if counts.is_empty() {
                    (
                        "pass",
                        format!(
                            "{} approves, which does not count: it waits for {waits}",
                            person.name
                        ),
                    )
                } else {
                    let mut after = tally.clone();
                    for (rule, names) in &mut after.rules {
                        if counts.contains(&rule.pattern) {
                            names.push(person.name.clone());
                        }
                    }
                    if after.done() {
                        return false;
                    }
                    (
                        "approve",
                        format!(
                            "counts for {}; it waits for {}",
                            counts.join(", "),
                            after.waits_for().join(", ")
                        ),
                    )
                }
            }
        };
        self.record_signed(id, by, verdict, words, now, effects);
        true
    }
}

/// The paths `request` is about: a plan's or an amendment's files, a
/// result's changed paths, a permission's `path` argument.
pub fn paths_of(request: &Request) -> Vec<String> {
    match request.opening.kind {
        Kind::PlanApproval => request.plan().files,
        Kind::Amendment => request.amendment().files,
        Kind::Result => {
            serde_json::from_str::<crate::result::ResultPayload>(&request.opening.payload_json)
                .map(|p| p.result.paths())
                .unwrap_or_default()
        }
        Kind::Permission => serde_json::from_str::<serde_json::Value>(&request.permission_args())
            .ok()
            .and_then(|args| args.get("path")?.as_str().map(str::to_owned))
            .into_iter()
            .collect(),
        Kind::Shutdown => Vec::new(),
    }
}
