//! The review queue measured: what waits now and for how long, each kind
//! of reviewer's time on a request, and the time to a decision, from the
//! requests the lead keeps (`lead stats`, the console's queue). A person
//! among machine stages shows here as the long wait it is.

use std::collections::BTreeMap;

use mesh_core::protocol::{Kind, Request, Status};
use serde::Serialize;

/// The short name of a request's kind, as the audit trail, spans and
/// metrics say it (`plan_approval`, ...).
pub fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::PlanApproval => "plan_approval",
        Kind::Permission => "permission",
        Kind::Result => "result",
        Kind::Amendment => "amendment",
        Kind::Shutdown => "shutdown",
    }
}

/// What kind of reviewer a step's `reviewer` is: `policy`, `program`,
/// `model`, `human` (an operator, however it decided), `auto`, `merge`,
/// `member`, `lead`.
pub fn reviewer_kind(reviewer: &str) -> &str {
    match reviewer.split_whitespace().next().unwrap_or("") {
        "operator" | "human" => "human",
        "" => "unknown",
        other => other,
    }
}

/// Each reviewer's time on a request opened at `created` (unix ms), from
/// its steps `(reviewer, verdict, at)` in order: from the step before (or
/// the opening, or a person being asked: a `waits` step) to its verdict,
/// in milliseconds.
pub fn step_times<'a>(
    created: i64,
    steps: impl Iterator<Item = (&'a str, &'a str, i64)>,
) -> Vec<(&'a str, i64)> {
    let mut last = created;
    let mut out = Vec::new();
    for (reviewer, verdict, at) in steps {
        let took = (at - last).max(0);
        last = at;
        if verdict != "waits" {
            out.push((reviewer, took));
        }
    }
    out
}

/// The queue as it stands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// What waits now, by kind of request.
    pub pending: Vec<Pending>,
    /// Each kind of reviewer's time on a request.
    pub reviewers: Vec<Waits>,
    /// From a request's opening to its decision, by kind of request.
    pub decided: Vec<Waits>,
}

/// Requests of one kind waiting now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Pending {
    /// `plan_approval`, `permission`, `result`, `amendment`, `shutdown`.
    pub kind: String,
    pub count: u64,
    /// Of them, those a person has been asked to decide.
    pub with_a_person: u64,
    /// How long the oldest has waited (ms).
    pub oldest_ms: i64,
}

/// A distribution of times, in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Waits {
    /// The reviewer's kind, or the request's.
    pub of: String,
    pub count: u64,
    pub p50_ms: i64,
    pub p90_ms: i64,
    pub max_ms: i64,
}

/// What the figures need of a request: its kind, whether it waits, when it
/// was opened and decided, and its reviewers' steps `(reviewer, verdict,
/// at)` in order. Each adapter makes it from what it has ([`timed`] from
/// the core's request, `render::timed` from the wire's `ProtocolState`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timed {
    /// `plan_approval`, `permission`, `result`, `amendment`, `shutdown`.
    pub kind: String,
    pub pending: bool,
    pub created_at_unix_ms: i64,
    /// 0 while it waits.
    pub resolved_at_unix_ms: i64,
    pub steps: Vec<(String, String, i64)>,
}

/// What the figures need of a request, from the core's (the console's).
pub fn timed(request: &Request) -> Timed {
    Timed {
        kind: kind_name(request.opening.kind).to_owned(),
        pending: request.status == Status::Pending,
        created_at_unix_ms: request.created_at_unix_ms,
        resolved_at_unix_ms: request.resolved_at_unix_ms.unwrap_or(0),
        steps: request
            .reviews
            .iter()
            .map(|s| (s.reviewer.clone(), s.verdict.clone(), s.at_unix_ms))
            .collect(),
    }
}

/// The queue's figures from `requests`, at `now` (unix ms).
pub fn of(requests: &[Timed], now: i64) -> Stats {
    let mut pending: BTreeMap<String, Pending> = BTreeMap::new();
    let mut reviewers: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let mut decided: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for r in requests {
        let kind = r.kind.clone();
        let steps = r
            .steps
            .iter()
            .map(|(reviewer, verdict, at)| (reviewer.as_str(), verdict.as_str(), *at));
        for (reviewer, took) in step_times(r.created_at_unix_ms, steps) {
            reviewers
                .entry(reviewer_kind(reviewer).to_owned())
                .or_default()
                .push(took);
        }
        if r.pending {
            let entry = pending.entry(kind.clone()).or_insert_with(|| Pending {
                kind,
                ..Default::default()
            });
            entry.count += 1;
            if r.steps
                .last()
                .is_none_or(|(_, verdict, _)| verdict == "waits")
            {
                entry.with_a_person += 1;
            }
            entry.oldest_ms = entry.oldest_ms.max(now - r.created_at_unix_ms);
        } else if r.resolved_at_unix_ms > 0 {
            decided
                .entry(kind)
                .or_default()
                .push((r.resolved_at_unix_ms - r.created_at_unix_ms).max(0));
        }
    }
    Stats {
        pending: pending.into_values().collect(),
        reviewers: reviewers
            .into_iter()
            .map(|(of, times)| waits(of, times))
            .collect(),
        decided: decided
            .into_iter()
            .map(|(of, times)| waits(of, times))
            .collect(),
    }
}

fn waits(of: String, mut times: Vec<i64>) -> Waits {
    times.sort_unstable();
    // Nearest rank.
    let rank = |p: usize| times[((times.len() * p).div_ceil(100)).clamp(1, times.len()) - 1];
    Waits {
        of,
        count: times.len() as u64,
        p50_ms: rank(50),
        p90_ms: rank(90),
        max_ms: times.last().copied().unwrap_or(0),
    }
}

/// A time for people: `850ms`, `12.4s`, `3m05s`, `2h10m`.
pub fn human_time(ms: i64) -> String {
    match ms {
        ms if ms < 1_000 => format!("{ms}ms"),
        ms if ms < 60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        ms if ms < 3_600_000 => format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60),
        ms => format!("{}h{:02}m", ms / 3_600_000, (ms / 60_000) % 60),
    }
}

/// The figures as `lead stats` prints them.
pub fn render(stats: &Stats) -> String {
    let mut out = String::from("waiting now\n");
    if stats.pending.is_empty() {
        out.push_str("  nothing\n");
    } else {
        out.push_str(&format!(
            "  {:<15} {:>7} {:>13} {:>10}\n",
            "kind", "pending", "with a person", "oldest"
        ));
        for p in &stats.pending {
            out.push_str(&format!(
                "  {:<15} {:>7} {:>13} {:>10}\n",
                p.kind,
                p.count,
                p.with_a_person,
                human_time(p.oldest_ms)
            ));
        }
    }
    for (title, rows) in [
        (
            "each reviewer's time on a request (a person's: from being asked to deciding)",
            &stats.reviewers,
        ),
        ("from a request's opening to its decision", &stats.decided),
    ] {
        out.push_str(&format!("\n{title}\n"));
        if rows.is_empty() {
            out.push_str("  none yet\n");
            continue;
        }
        out.push_str(&format!(
            "  {:<15} {:>7} {:>10} {:>10} {:>10}\n",
            "", "count", "p50", "p90", "max"
        ));
        for w in rows {
            out.push_str(&format!(
                "  {:<15} {:>7} {:>10} {:>10} {:>10}\n",
                w.of,
                w.count,
                human_time(w.p50_ms),
                human_time(w.p90_ms),
                human_time(w.max_ms)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(reviewer: &str, verdict: &str, at: i64) -> (String, String, i64) {
        (reviewer.into(), verdict.into(), at)
    }

    #[derive(Clone, Copy)]
    enum T {
        PlanApproval,
        Permission,
        Result,
    }

    #[derive(Clone, Copy, PartialEq)]
    enum S {
        Pending,
        Approved,
        Rejected,
    }

    fn request(
        kind: T,
        status: S,
        created: i64,
        resolved: i64,
        steps: Vec<(String, String, i64)>,
    ) -> Timed {
        let kind = match kind {
            T::PlanApproval => "plan_approval",
            T::Permission => "permission",
            T::Result => "result",
        };
        Timed {
            kind: kind.into(),
            pending: status == S::Pending,
            created_at_unix_ms: created,
            resolved_at_unix_ms: resolved,
            steps,
        }
    }

    #[test]
    fn a_person_after_machine_stages_is_the_long_wait() {
        let requests = [
            // policy 5 ms, program 100 ms, then a person for 60 s.
            request(
                T::PlanApproval,
                S::Approved,
                1_000,
                61_105,
                vec![
                    step("policy", "pass", 1_005),
                    step("program check.sh", "pass", 1_105),
                    step("human", "waits", 1_105),
                    step("operator alice", "approve", 61_105),
                ],
            ),
            // Manual: the operator decides 2 s after the opening.
            request(
                T::PlanApproval,
                S::Rejected,
                0,
                2_000,
                vec![step("operator", "reject", 2_000)],
            ),
            // Waiting on a person since 10,000; and a machine stage now.
            request(
                T::PlanApproval,
                S::Pending,
                10_000,
                0,
                vec![
                    step("policy", "pass", 10_001),
                    step("human", "waits", 10_001),
                ],
            ),
            request(T::Permission, S::Pending, 90_000, 0, vec![]),
            request(
                T::Result,
                S::Pending,
                95_000,
                0,
                vec![step("policy", "pass", 95_001)],
            ),
        ];
        let stats = of(&requests, 100_000);
        assert_eq!(
            stats.pending,
            [
                Pending {
                    kind: "permission".into(),
                    count: 1,
                    with_a_person: 1,
                    oldest_ms: 10_000
                },
                Pending {
                    kind: "plan_approval".into(),
                    count: 1,
                    with_a_person: 1,
                    oldest_ms: 90_000
                },
                Pending {
                    kind: "result".into(),
                    count: 1,
                    with_a_person: 0,
                    oldest_ms: 5_000
                },
            ]
        );
        let by = |of: &str| stats.reviewers.iter().find(|w| w.of == of).cloned();
        assert_eq!(
            by("human"),
            Some(Waits {
                of: "human".into(),
                count: 2,
                p50_ms: 2_000,
                p90_ms: 60_000,
                max_ms: 60_000
            })
        );
        assert_eq!(by("policy").map(|w| (w.count, w.max_ms)), Some((3, 5)));
        assert_eq!(by("program").map(|w| w.max_ms), Some(100));
        assert_eq!(
            stats.decided,
            [Waits {
                of: "plan_approval".into(),
                count: 2,
                p50_ms: 2_000,
                p90_ms: 60_105,
                max_ms: 60_105
            }]
        );
        let text = render(&stats);
        assert!(text.contains("human"), "{text}");
        assert!(text.contains("1m00s"), "{text}");
    }

    #[test]
    fn times_read_as_people_say_them() {
        assert_eq!(human_time(850), "850ms");
        assert_eq!(human_time(12_400), "12.4s");
        assert_eq!(human_time(185_000), "3m05s");
        assert_eq!(human_time(7_800_000), "2h10m");
    }

    #[test]
    fn nothing_yet_says_so() {
        let text = render(&of(&[], 0));
        assert!(
            text.contains("nothing") && text.contains("none yet"),
            "{text}"
        );
    }
}
