//! The lead's traces and metrics ([`mesh_telemetry`] exports them; all
//! of this is skipped when it is off).
//!
//! **Traces.** A request's trace starts where its sender's call came from
//! (`traceparent` in the call's metadata). The edge opens the request's
//! span ([`opened`]) before the hub sees it: `plan_approval review`,
//! `result review`, `permission review`, `amendment review`, `shutdown`.
//! It lives until the request is resolved. The hub shows each batch's
//! changes to [`Tracer::observe`], which records each reviewer's step as a
//! child span (`review policy`, `review program NAME`, `review model NAME`,
//! `review operator NAME`: from the step before, or from the moment a
//! person was asked, to its verdict) and ends the request's span with its
//! decision. What runs off the hub for a request (a program or model stage,
//! a model's call, a landing) runs in the request's context
//! ([`context`]), so its spans are children too; so are the operator's
//! calls that decide it and a member's answer to a shutdown ([`rpc`]).
//!
//! **Metrics.** `mesh.review.wait` (each reviewer's time on a request, by
//! reviewer kind: policy, program, model, human, ...), `mesh.decisions` (by
//! kind, reviewer and verdict), `mesh.requests.pending` (by kind),
//! `mesh.members` (by status), `mesh.inbox.envelopes` and
//! `mesh.inbox.bytes` (by member), `mesh.store.commits` and
//! `mesh.store.commit.duration`, `mesh.tokens` (by member and type).

use std::{
    collections::{HashMap, VecDeque},
    sync::{Mutex, OnceLock},
};

use mesh_core::{
    protocol::{Kind, Request, Status},
    team::Change as TeamChange,
};
use mesh_telemetry::{self as telemetry, enabled};
use opentelemetry::{
    metrics::{Counter, Gauge, Histogram},
    trace::{SpanKind, Status as SpanStatus, TraceContextExt as _},
    Context, KeyValue,
};
use tonic::metadata::MetadataMap;

use crate::stats::{kind_name, reviewer_kind, step_times};

/// Requests traced at once; past it the oldest's span is ended unresolved.
const TRACED: usize = 10_000;

/// A verdict's short name.
fn status_name(status: Status) -> &'static str {
    match status {
        Status::Pending => "pending",
        Status::Approved => "approved",
        Status::Rejected => "rejected",
        Status::Expired => "expired",
    }
}

/// A request being traced.
struct Traced {
    /// Its span's context.
    cx: Context,
    /// Its review steps already recorded.
    steps: usize,
    /// When the last recorded step ended (unix ms).
    last_at: i64,
    /// Whether its sender is on its span yet.
    labeled: bool,
}

/// The requests being traced, and their ids oldest first.
#[derive(Default)]
struct Traces {
    open: HashMap<String, Traced>,
    order: VecDeque<String>,
}

fn traces() -> &'static Mutex<Traces> {
    static TRACES: OnceLock<Mutex<Traces>> = OnceLock::new();
    TRACES.get_or_init(Default::default)
}

fn lock() -> std::sync::MutexGuard<'static, Traces> {
    traces().lock().unwrap_or_else(|p| p.into_inner())
}

/// A request `id` of `kind` arrives, its caller's trace in `parent`: opens
/// its span. False if it was open already (a retry keeps the first).
pub(crate) fn opened(id: &str, kind: Kind, parent: &Context) -> bool {
    if !enabled() {
        return false;
    }
    let mut traces = lock();
    if traces.open.contains_key(id) {
        return false;
    }
    let name = match kind {
        Kind::Shutdown => "shutdown".to_owned(),
        other => format!("{} review", kind_name(other)),
    };
    let now = shared::auth::now_unix_ms();
    let cx = telemetry::child_at(
        parent,
        name,
        now,
        vec![
            KeyValue::new("mesh.request.id", id.to_owned()),
            KeyValue::new("mesh.request.kind", kind_name(kind)),
        ],
    );
    traces.open.insert(
        id.to_owned(),
        Traced {
            cx,
            steps: 0,
            last_at: now,
            labeled: false,
        },
    );
    traces.order.push_back(id.to_owned());
    // `order` keeps ids already resolved until here: they are skipped, and
    // dropped in one pass once they outnumber the open ones.
    let Traces { open, order } = &mut *traces;
    while open.len() > TRACED {
        let Some(oldest) = order.pop_front() else {
            break;
        };
        if let Some(gone) = open.remove(&oldest) {
            gone.cx.span().end();
        }
    }
    if order.len() > 2 * TRACED {
        order.retain(|id| open.contains_key(id));
    }
    true
}

/// The call that opened request `id` failed: it never existed.
pub(crate) fn abandoned(id: &str) {
    let mut traces = lock();
    if let Some(gone) = traces.open.remove(id) {
        let span = gone.cx.span();
        span.set_status(SpanStatus::error("the call that opened it failed"));
        span.end();
    }
}

/// The context of request `id`'s span, if it is traced: what runs for it
/// off the hub runs in it.
pub(crate) fn context(id: &str) -> Option<Context> {
    if !enabled() {
        return None;
    }
    lock().open.get(id).map(|t| t.cx.clone())
}

/// Request `id`'s span as a W3C `traceparent` (empty when it is not
/// traced): what a shutdown request's envelope carries to its teammate.
pub(crate) fn traceparent(id: &str) -> String {
    context(id).map_or_else(String::new, |cx| telemetry::traceparent(&cx))
}

/// The server span of one RPC, `mesh.v1.SERVICE/METHOD`: a child of the
/// request it decides or answers, when `request_id` is traced, else of the
/// caller's trace in `metadata`. The empty context when off.
pub(crate) fn rpc(
    method: &'static str,
    metadata: &MetadataMap,
    request_id: Option<&str>,
) -> Context {
    if !enabled() {
        return Context::new();
    }
    let parent = request_id
        .and_then(context)
        .unwrap_or_else(|| telemetry::extract(metadata));
    let (service, name) = method.split_once('/').unwrap_or(("", method));
    telemetry::child(
        &parent,
        method,
        SpanKind::Server,
        vec![
            KeyValue::new("rpc.system", "grpc"),
            KeyValue::new("rpc.service", service.to_owned()),
            KeyValue::new("rpc.method", name.to_owned()),
        ],
    )
}

/// Ends an RPC's span with how the call ended.
pub(crate) fn rpc_done<T>(cx: &Context, result: &Result<T, tonic::Status>) {
    if !enabled() {
        return;
    }
    let span = cx.span();
    match result {
        Ok(_) => span.set_attribute(KeyValue::new("rpc.grpc.status_code", 0_i64)),
        Err(status) => {
            span.set_attribute(KeyValue::new(
                "rpc.grpc.status_code",
                i64::from(status.code() as i32),
            ));
            span.set_status(SpanStatus::error(status.message().to_owned()));
        }
    }
    span.end();
}

/// Lands result `request_id` (`land`) in a `land` span of its trace, when
/// exporting: the merge, the commit and the branch's move.
pub(crate) async fn landing(
    request_id: &str,
    land: impl std::future::Future<Output = mesh_core::result::Landing>,
) -> mesh_core::result::Landing {
    use mesh_core::result::Landing;
    use opentelemetry::context::FutureExt as _;
    let Some(parent) = context(request_id) else {
        return land.await;
    };
    let cx = telemetry::child(
        &parent,
        "land",
        SpanKind::Internal,
        vec![KeyValue::new("mesh.request.id", request_id.to_owned())],
    );
    let landing = land.with_context(cx.clone()).await;
    let span = cx.span();
    match &landing {
        Landing::Merged { commit } => {
            span.set_attribute(KeyValue::new("mesh.landing", "merged"));
            span.set_attribute(KeyValue::new("vcs.ref.head.revision", commit.clone()));
        }
        Landing::Conflict { paths, .. } => {
            span.set_attribute(KeyValue::new("mesh.landing", "conflict"));
            span.set_attribute(KeyValue::new("mesh.conflicts", paths.join(", ")));
        }
        Landing::Failed(why) => {
            span.set_attribute(KeyValue::new("mesh.landing", "failed"));
            span.set_status(SpanStatus::error(why.clone()));
        }
    }
    span.end();
    landing
}

/// The instruments, made once.
struct Instruments {
    wait: Histogram<f64>,
    decisions: Counter<u64>,
    pending: Gauge<u64>,
    members: Gauge<u64>,
    inbox_envelopes: Gauge<u64>,
    inbox_bytes: Gauge<u64>,
    commits: Counter<u64>,
    commit_duration: Histogram<f64>,
    tokens: Counter<u64>,
}

fn instruments() -> &'static Instruments {
    static MADE: OnceLock<Instruments> = OnceLock::new();
    MADE.get_or_init(|| {
        let meter = telemetry::meter();
        Instruments {
            wait: meter
                .f64_histogram("mesh.review.wait")
                .with_unit("s")
                .with_description(
                    "One reviewer's time on a request (a person's: from being asked to \
                     deciding), by mesh.reviewer.kind",
                )
                .with_boundaries(vec![
                    0.001, 0.01, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 14400.0,
                ])
                .build(),
            decisions: meter
                .u64_counter("mesh.decisions")
                .with_description("Requests resolved, by kind, reviewer and verdict")
                .build(),
            pending: meter
                .u64_gauge("mesh.requests.pending")
                .with_description("Requests waiting for their answer, by kind")
                .build(),
            members: meter
                .u64_gauge("mesh.members")
                .with_description(
                    "Members by status: working, idle, disconnected, shutting_down, terminated",
                )
                .build(),
            inbox_envelopes: meter
                .u64_gauge("mesh.inbox.envelopes")
                .with_description("Envelopes a member has not acknowledged")
                .build(),
            inbox_bytes: meter
                .u64_gauge("mesh.inbox.bytes")
                .with_unit("By")
                .with_description("Bytes of envelopes a member has not acknowledged")
                .build(),
            commits: meter
                .u64_counter("mesh.store.commits")
                .with_description("Group commits of the lead's store")
                .build(),
            commit_duration: meter
                .f64_histogram("mesh.store.commit.duration")
                .with_unit("s")
                .with_description("How long one group commit took to be durable")
                .build(),
            tokens: meter
                .u64_counter("mesh.tokens")
                .with_unit("{token}")
                .with_description("Model tokens a member used, by type (input, output)")
                .build(),
        }
    })
}

/// One group commit took `seconds`.
pub(crate) fn committed(seconds: f64) {
    if !enabled() {
        return;
    }
    let made = instruments();
    made.commits.add(1, &[]);
    made.commit_duration.record(seconds, &[]);
}

/// What the lead's state holds now, sampled for the gauges.
#[derive(Debug, Default)]
pub(crate) struct Sample {
    /// Pending requests by kind.
    pub(crate) pending: HashMap<&'static str, u64>,
    /// Members by status.
    pub(crate) members: HashMap<&'static str, u64>,
    /// Each member's inbox: envelopes and bytes not acknowledged.
    pub(crate) inboxes: Vec<(String, u64, u64)>,
}

/// Records a sample of the gauges.
pub(crate) fn sampled(sample: &Sample) {
    if !enabled() {
        return;
    }
    let made = instruments();
    for kind in [
        "plan_approval",
        "permission",
        "result",
        "amendment",
        "shutdown",
    ] {
        let count = sample.pending.get(kind).copied().unwrap_or(0);
        made.pending
            .record(count, &[KeyValue::new("mesh.request.kind", kind)]);
    }
    for status in [
        "working",
        "idle",
        "disconnected",
        "shutting_down",
        "terminated",
    ] {
        let count = sample.members.get(status).copied().unwrap_or(0);
        made.members
            .record(count, &[KeyValue::new("mesh.member.status", status)]);
    }
    for (member, envelopes, bytes) in &sample.inboxes {
        let at = [KeyValue::new("mesh.member", member.clone())];
        made.inbox_envelopes.record(*envelopes, &at);
        made.inbox_bytes.record(*bytes, &at);
    }
}

/// Watches the team's changes for what traces and metrics say of them.
#[derive(Debug, Default)]
pub(crate) struct Tracer {
    /// Each member's token totals as last seen (input, output).
    tokens: HashMap<String, (u64, u64)>,
}

impl Tracer {
    /// One batch's team changes; `decided`: the requests first seen resolved
    /// in it (the audit trail's new entries say which).
    pub(crate) fn observe<'a>(
        &mut self,
        changes: impl Iterator<Item = &'a TeamChange>,
        decided: &[&str],
    ) {
        if !enabled() {
            return;
        }
        for change in changes {
            match change {
                TeamChange::Request(r) => {
                    let first = decided.contains(&r.id().as_str());
                    trace_steps(r, first);
                    if first {
                        measure_decision(r);
                    }
                }
                TeamChange::RequestForgotten(id) => {
                    if let Some(gone) = lock().open.remove(id.as_str()) {
                        gone.cx.span().end();
                    }
                }
                TeamChange::Usage(account) if account.member => {
                    let total = account.total();
                    let now = (total.prompt_tokens, total.completion_tokens);
                    let before = self
                        .tokens
                        .insert(account.name.clone(), now)
                        .unwrap_or((0, 0));
                    let member = KeyValue::new("mesh.member", account.name.clone());
                    let made = instruments();
                    for (kind, add) in [
                        ("input", now.0.saturating_sub(before.0)),
                        ("output", now.1.saturating_sub(before.1)),
                    ] {
                        if add > 0 {
                            made.tokens.add(
                                add,
                                &[member.clone(), KeyValue::new("gen_ai.token.type", kind)],
                            );
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// Each reviewer's step of `r` not recorded yet, as spans; its end, if it
/// was `decided` in this batch.
fn trace_steps(r: &Request, decided: bool) {
    let mut traces = lock();
    let Some(traced) = traces.open.get_mut(r.id().as_str()) else {
        return;
    };
    if !traced.labeled {
        traced.labeled = true;
        let span = traced.cx.span();
        span.set_attribute(KeyValue::new("mesh.member", r.opening.sender.clone()));
        if !r.opening.target.is_empty() {
            span.set_attribute(KeyValue::new("mesh.target", r.opening.target.clone()));
        }
    }
    for step in r.reviews.iter().skip(traced.steps) {
        traced.steps += 1;
        if step.verdict == "waits" {
            // A person was asked: their time starts here.
            traced.cx.span().add_event_with_timestamp(
                "handed to a person",
                telemetry::at(step.at_unix_ms),
                vec![KeyValue::new("mesh.review.words", cut(&step.words))],
            );
            traced.last_at = traced.last_at.max(step.at_unix_ms);
            continue;
        }
        telemetry::record(
            &traced.cx,
            format!("review {}", step.reviewer),
            traced.last_at,
            step.at_unix_ms,
            vec![
                KeyValue::new("mesh.review.step", traced.steps as i64),
                KeyValue::new("mesh.reviewer", step.reviewer.clone()),
                KeyValue::new(
                    "mesh.reviewer.kind",
                    reviewer_kind(&step.reviewer).to_owned(),
                ),
                KeyValue::new("mesh.review.verdict", step.verdict.clone()),
                KeyValue::new("mesh.review.words", cut(&step.words)),
            ],
        );
        // The hub's clock may trail the one the span began on by a
        // millisecond: the steps never run backwards.
        traced.last_at = traced.last_at.max(step.at_unix_ms);
    }
    if !decided {
        return;
    }
    let Some(traced) = traces.open.remove(r.id().as_str()) else {
        return;
    };
    let (_, by) = crate::audit::decided_by(r);
    let span = traced.cx.span();
    span.set_attribute(KeyValue::new("mesh.decision", status_name(r.status)));
    span.set_attribute(KeyValue::new("mesh.decided_by", by));
    if !r.feedback.is_empty() {
        span.set_attribute(KeyValue::new("mesh.feedback", cut(&r.feedback)));
    }
    let resolved = r
        .resolved_at_unix_ms
        .unwrap_or_else(shared::auth::now_unix_ms);
    span.end_with_timestamp(telemetry::at(resolved.max(traced.last_at)));
}

/// A request resolved: each reviewer's time on it, and the decision.
fn measure_decision(r: &Request) {
    let made = instruments();
    let kind = KeyValue::new("mesh.request.kind", kind_name(r.opening.kind));
    let steps = r
        .reviews
        .iter()
        .map(|s| (s.reviewer.as_str(), s.verdict.as_str(), s.at_unix_ms));
    for (reviewer, ms) in step_times(r.created_at_unix_ms, steps) {
        made.wait.record(
            ms as f64 / 1000.0,
            &[
                kind.clone(),
                KeyValue::new("mesh.reviewer.kind", reviewer_kind(reviewer).to_owned()),
            ],
        );
    }
    let (_, by) = crate::audit::decided_by(r);
    made.decisions.add(
        1,
        &[
            kind,
            KeyValue::new("mesh.reviewer.kind", reviewer_kind(&by).to_owned()),
            KeyValue::new("mesh.decision", status_name(r.status)),
        ],
    );
}

fn cut(text: &str) -> String {
    mesh_core::limits::cut(text, 500)
}
