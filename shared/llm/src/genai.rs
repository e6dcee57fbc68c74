//! A model call as the OpenTelemetry GenAI semantic conventions describe
//! it: a client span `chat MODEL` with `gen_ai.*` attributes (model, tokens
//! in and out, why the reply ended), and the conventions' two client
//! metrics, `gen_ai.client.token.usage` and
//! `gen_ai.client.operation.duration`.

use std::{sync::OnceLock, time::Instant};

use opentelemetry::{
    metrics::Histogram,
    trace::{SpanKind, Status, TraceContextExt as _, Tracer as _},
    Context, KeyValue,
};

use super::{ChatError, Reply};
use mesh_telemetry as telemetry;

/// The conventions' instruments, made once.
struct Instruments {
    tokens: Histogram<u64>,
    duration: Histogram<f64>,
}

fn instruments() -> &'static Instruments {
    static MADE: OnceLock<Instruments> = OnceLock::new();
    MADE.get_or_init(|| {
        let meter = telemetry::meter();
        Instruments {
            tokens: meter
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Tokens used by one model call, by gen_ai.token.type")
                .build(),
            duration: meter
                .f64_histogram("gen_ai.client.operation.duration")
                .with_unit("s")
                .with_description("How long one model call took")
                .build(),
        }
    })
}

/// A model call being made.
pub(super) struct Call {
    cx: Context,
    started: Instant,
    common: Vec<KeyValue>,
}

impl Call {
    /// The span of a call to `model` at `url`, started now.
    pub(super) fn start(model: &str, url: &str) -> Self {
        let host = reqwest::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_default();
        let common = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.provider.name", "openai"),
            KeyValue::new("gen_ai.request.model", model.to_owned()),
            KeyValue::new("server.address", host),
        ];
        let tracer = telemetry::tracer();
        let span = tracer
            .span_builder(format!("chat {model}"))
            .with_kind(SpanKind::Client)
            .with_attributes(common.clone())
            .start(&tracer);
        Self {
            cx: Context::current_with_span(span),
            started: Instant::now(),
            common,
        }
    }

    /// Ends the span with what the call came to.
    pub(super) fn end(self, result: &Result<Reply, ChatError>) {
        let span = self.cx.span();
        let took = self.started.elapsed().as_secs_f64();
        match result {
            Ok(reply) => {
                if let Some(reason) = &reply.finish_reason {
                    span.set_attribute(KeyValue::new(
                        "gen_ai.response.finish_reasons",
                        opentelemetry::Value::Array(
                            vec![opentelemetry::StringValue::from(reason.clone())].into(),
                        ),
                    ));
                }
                if let Some(usage) = reply.usage {
                    let input = i64::try_from(usage.prompt_tokens).unwrap_or(i64::MAX);
                    let output = i64::try_from(usage.completion_tokens).unwrap_or(i64::MAX);
                    span.set_attribute(KeyValue::new("gen_ai.usage.input_tokens", input));
                    span.set_attribute(KeyValue::new("gen_ai.usage.output_tokens", output));
                    let made = instruments();
                    for (kind, count) in [
                        ("input", usage.prompt_tokens),
                        ("output", usage.completion_tokens),
                    ] {
                        let mut attributes = self.common.clone();
                        attributes.push(KeyValue::new("gen_ai.token.type", kind));
                        made.tokens.record(count, &attributes);
                    }
                }
                instruments().duration.record(took, &self.common);
            }
            Err(e) => {
                let kind = match e {
                    ChatError::Refused { .. } => "refused",
                    ChatError::Setup(_) => "setup",
                    _ => "failed",
                };
                span.set_attribute(KeyValue::new("error.type", kind));
                span.set_status(Status::error(e.to_string()));
                let mut attributes = self.common.clone();
                attributes.push(KeyValue::new("error.type", kind));
                instruments().duration.record(took, &attributes);
            }
        }
        span.end();
    }
}
