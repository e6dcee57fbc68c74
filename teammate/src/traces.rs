//! The teammate's spans, when it exports telemetry (`--otlp-endpoint`;
//! everything here does nothing otherwise).
//!
//! Each plan it submits is a trace: `submit_plan` is its root, from the
//! submission to the decision reaching the teammate. The `SubmitPlan` call
//! carries it to the lead (`traceparent`), whose review spans join it.
//! Once approved, what the teammate does under the plan's grant joins the
//! same trace: its first gated call (`execute_tool write_file`, say), an
//! amendment it asks for, and its result (`submit_result`, until the
//! answer: landed, conflicting, or rejected).

use mesh_telemetry::{self as telemetry, enabled};
use opentelemetry::{
    trace::{SpanKind, Status, TraceContextExt as _},
    Context, KeyValue,
};

/// The spans the session keeps open.
#[derive(Debug, Default)]
pub(crate) struct Traces {
    /// The plan under review: its request id and span.
    plan: Option<(String, Context)>,
    /// The approved plan's span: what is done under its grant joins it.
    grant: Option<Context>,
    /// Whether a gated call under the grant was traced yet.
    wrote: bool,
}

impl Traces {
    /// A plan is being submitted as `request_id` by `member`: its trace's
    /// root, the context its `SubmitPlan` call runs in.
    pub(crate) fn submitting(&mut self, request_id: &str, member: &str, summary: &str) -> Context {
        if !enabled() {
            return Context::new();
        }
        if let Some((_, old)) = self.plan.take() {
            old.span().end();
        }
        let cx = telemetry::child(
            &Context::new(),
            "submit_plan",
            SpanKind::Client,
            vec![
                KeyValue::new("mesh.request.id", request_id.to_owned()),
                KeyValue::new("mesh.request.kind", "plan_approval"),
                KeyValue::new("mesh.member", member.to_owned()),
                KeyValue::new("mesh.plan.summary", mesh_core::limits::cut(summary, 200)),
            ],
        );
        self.plan = Some((request_id.to_owned(), cx.clone()));
        cx
    }

    /// The lead would not take the plan: its trace ends there.
    pub(crate) fn refused(&mut self, why: &str) {
        if let Some((_, cx)) = self.plan.take() {
            let span = cx.span();
            span.set_status(Status::error(why.to_owned()));
            span.end();
        }
    }

    /// The decision on plan `request_id` arrived.
    pub(crate) fn decided(&mut self, request_id: &str, approved: bool, feedback: &str) {
        let Some((id, cx)) = self.plan.take() else {
            return;
        };
        if id != request_id {
            self.plan = Some((id, cx));
            return;
        }
        let span = cx.span();
        span.set_attribute(KeyValue::new(
            "mesh.decision",
            if approved { "approved" } else { "rejected" },
        ));
        if !feedback.is_empty() {
            span.set_attribute(KeyValue::new(
                "mesh.feedback",
                mesh_core::limits::cut(feedback, 500),
            ));
        }
        span.end();
        if approved {
            self.grant = Some(cx);
            self.wrote = false;
        }
    }

    /// A gated call `tool` is about to be cleared and run: the first under
    /// the grant is a span of the plan's trace (`execute_tool TOOL`); any
    /// other runs in no trace.
    pub(crate) fn gated(&mut self, tool: &str) -> Context {
        match &self.grant {
            Some(grant) if !self.wrote => {
                self.wrote = true;
                telemetry::child(
                    grant,
                    format!("execute_tool {tool}"),
                    SpanKind::Internal,
                    vec![
                        KeyValue::new("gen_ai.operation.name", "execute_tool"),
                        KeyValue::new("gen_ai.tool.name", tool.to_owned()),
                    ],
                )
            }
            _ => Context::new(),
        }
    }

    /// A span `name` under the approved plan's grant (a root when there is
    /// none), started now.
    pub(crate) fn under_grant(&self, name: &'static str, attributes: Vec<KeyValue>) -> Context {
        if !enabled() {
            return Context::new();
        }
        let parent = self.grant.clone().unwrap_or_default();
        telemetry::child(&parent, name, SpanKind::Client, attributes)
    }

    /// The task is done: its grant has ended.
    pub(crate) fn task_done(&mut self) {
        self.grant = None;
    }
}

/// A shutdown request that arrived at `arrived_unix_ms` with the lead's
/// trace (`traceparent`; nothing is traced without it) is being answered
/// now: `answer_shutdown`, a child of the lead's `shutdown` span, from its
/// arrival to the answer the lead took, with `finish_current_call` in it,
/// the wait for the call in progress (and what was read before it) to end.
/// The context the answer runs in.
pub(crate) fn answering_shutdown(
    request_id: &str,
    traceparent: &str,
    member: &str,
    arrived_unix_ms: i64,
) -> Context {
    let parent = telemetry::from_traceparent(traceparent);
    if !parent.span().span_context().is_valid() {
        return Context::new();
    }
    let cx = telemetry::child_at(
        &parent,
        "answer_shutdown",
        arrived_unix_ms,
        vec![
            KeyValue::new("mesh.request.id", request_id.to_owned()),
            KeyValue::new("mesh.request.kind", "shutdown"),
            KeyValue::new("mesh.member", member.to_owned()),
        ],
    );
    telemetry::record(
        &cx,
        "finish_current_call",
        arrived_unix_ms,
        shared::auth::now_unix_ms(),
        Vec::new(),
    );
    cx
}

/// Ends an `answer_shutdown` span with the answer: agreed or refused, and
/// why.
pub(crate) fn answered_shutdown(
    cx: &Context,
    approve: bool,
    reason: &str,
    taken: Result<(), &str>,
) {
    if !enabled() || !cx.has_active_span() {
        return;
    }
    let span = cx.span();
    span.set_attribute(KeyValue::new(
        "mesh.decision",
        if approve { "agreed" } else { "refused" },
    ));
    if !reason.is_empty() {
        span.set_attribute(KeyValue::new(
            "mesh.reason",
            mesh_core::limits::cut(reason, 300),
        ));
    }
    if let Err(why) = taken {
        span.set_status(Status::error(mesh_core::limits::cut(why, 300)));
    }
    span.end();
}

/// Ends the span in `cx` (if any) with how its work ended.
pub(crate) fn end(cx: &Context, outcome: Result<&str, &str>) {
    if !enabled() || !cx.has_active_span() {
        return;
    }
    let span = cx.span();
    match outcome {
        Ok(said) => span.set_attribute(KeyValue::new(
            "mesh.outcome",
            mesh_core::limits::cut(said, 300),
        )),
        Err(why) => span.set_status(Status::error(mesh_core::limits::cut(why, 300))),
    }
    span.end();
}
