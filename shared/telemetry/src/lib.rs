//! OpenTelemetry for both binaries: traces and metrics exported over
//! OTLP/gRPC to a collector (Jaeger, Grafana Tempo, an OpenTelemetry
//! Collector), and W3C trace context carried across processes in gRPC
//! metadata (`traceparent`).
//!
//! Off unless an endpoint is given (`--otlp-endpoint`, or the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT`): then nothing is exported, and every
//! place that would record asks [`enabled`] first, one relaxed load.
//!
//! The standard variables the SDK reads still apply: `OTEL_SERVICE_NAME`
//! (over the binary's own name), `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_BSP_SCHEDULE_DELAY` (how often spans are sent),
//! `OTEL_METRIC_EXPORT_INTERVAL` (how often metrics are).

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, SystemTime},
};

use opentelemetry::{
    global::{self, BoxedTracer},
    metrics::Meter,
    propagation::{Extractor, Injector},
    trace::{Span as _, SpanKind, TraceContextExt as _, Tracer as _},
    Context, KeyValue,
};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::{
    metrics::SdkMeterProvider, propagation::TraceContextPropagator, trace::SdkTracerProvider,
    Resource,
};
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};

/// Whether an exporter was started: checked before anything is recorded.
static ON: AtomicBool = AtomicBool::new(false);

/// The instrumentation scope of every span and instrument mesh makes.
const SCOPE: &str = "mesh";

/// Whether traces and metrics are being exported.
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The running exporter; [`Exporter::shutdown`] sends what is left.
#[derive(Debug)]
struct Exporter {
    traces: SdkTracerProvider,
    metrics: SdkMeterProvider,
}

/// Starts exporting traces and metrics to the OTLP/gRPC collector at
/// `endpoint` (e.g. `http://localhost:4317`) as `service` (unless
/// `OTEL_SERVICE_NAME` names it). Call it inside the Tokio runtime: the
/// exporter's gRPC client lives on it.
fn start(service: &str, endpoint: &str) -> Result<Exporter, String> {
    let endpoint = endpoint.trim();
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(format!(
            "otlp-endpoint: {endpoint:?} is not an http:// or https:// URL \
             (an OTLP/gRPC collector, e.g. http://localhost:4317)"
        ));
    }
    let mut resource = Resource::builder();
    if std::env::var("OTEL_SERVICE_NAME").map_or(true, |v| v.trim().is_empty()) {
        resource = resource.with_service_name(service.to_owned());
    }
    let resource = resource.build();
    let spans = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .with_timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| format!("otlp-endpoint: cannot make the span exporter: {e}"))?;
    let traces = SdkTracerProvider::builder()
        .with_batch_exporter(spans)
        .with_resource(resource.clone())
        .build();
    let metric_exporter = opentelemetry_otlp::MetricExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .with_timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| format!("otlp-endpoint: cannot make the metric exporter: {e}"))?;
    let metrics = SdkMeterProvider::builder()
        .with_periodic_exporter(metric_exporter)
        .with_resource(resource)
        .build();
    global::set_text_map_propagator(TraceContextPropagator::new());
    global::set_tracer_provider(traces.clone());
    global::set_meter_provider(metrics.clone());
    ON.store(true, Ordering::Relaxed);
    Ok(Exporter { traces, metrics })
}

impl Exporter {
    /// Sends the spans and metrics not sent yet and stops. It blocks (up to
    /// the exporter's timeout): call it off the runtime's workers, e.g. in
    /// `spawn_blocking`.
    fn shutdown(self) {
        ON.store(false, Ordering::Relaxed);
        if let Err(e) = self.traces.shutdown() {
            tracing::warn!(error = %e, "otlp: the last spans were not sent");
        }
        if let Err(e) = self.metrics.shutdown() {
            tracing::warn!(error = %e, "otlp: the last metrics were not sent");
        }
    }
}

/// Runs `work` while exporting as `service` to `endpoint` (none, or an
/// empty one: not exporting), then sends what is left; an error (naming
/// the flag's value) if the exporter cannot start.
pub async fn exporting<T>(
    service: &str,
    endpoint: Option<&str>,
    work: impl std::future::Future<Output = T>,
) -> Result<T, String> {
    let exporter = match endpoint.filter(|e| !e.trim().is_empty()) {
        Some(endpoint) => Some(start(service, endpoint).map_err(|e| format!("--{e}"))?),
        None => None,
    };
    let out = work.await;
    if let Some(exporter) = exporter {
        let _ = tokio::task::spawn_blocking(move || exporter.shutdown()).await;
    }
    Ok(out)
}

/// The tracer every mesh span comes from.
pub fn tracer() -> BoxedTracer {
    global::tracer(SCOPE)
}

/// The meter every mesh instrument comes from (a no-op one when off).
pub fn meter() -> Meter {
    global::meter(SCOPE)
}

/// Puts `cx`'s span into `metadata` as W3C `traceparent` (and
/// `tracestate`), when exporting.
pub fn inject(cx: &Context, metadata: &mut MetadataMap) {
    if !enabled() || !cx.has_active_span() {
        return;
    }
    global::get_text_map_propagator(|p| p.inject_context(cx, &mut MetadataInjector(metadata)));
}

/// `cx`'s span as a W3C `traceparent` value (empty when not exporting or
/// without a span): for a trace carried in a message rather than a call.
pub fn traceparent(cx: &Context) -> String {
    if !enabled() || !cx.has_active_span() {
        return String::new();
    }
    let mut carrier = std::collections::HashMap::new();
    global::get_text_map_propagator(|p| p.inject_context(cx, &mut carrier));
    carrier.remove("traceparent").unwrap_or_default()
}

/// The remote parent a `traceparent` value names (an empty context when it
/// is empty or malformed, or when not exporting).
pub fn from_traceparent(traceparent: &str) -> Context {
    if !enabled() || traceparent.is_empty() {
        return Context::new();
    }
    let carrier =
        std::collections::HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
    global::get_text_map_propagator(|p| p.extract(&carrier))
}

/// The remote parent a call's metadata names (an empty context when none,
/// or when not exporting).
pub fn extract(metadata: &MetadataMap) -> Context {
    if !enabled() {
        return Context::new();
    }
    global::get_text_map_propagator(|p| p.extract(&MetadataExtractor(metadata)))
}

/// A span `name` started now, a child of `parent` (or a root if it has no
/// span), with `attributes`: the context holding it.
pub fn child(
    parent: &Context,
    name: impl Into<std::borrow::Cow<'static, str>>,
    kind: SpanKind,
    attributes: Vec<KeyValue>,
) -> Context {
    parent.with_span(started(parent, name, kind, None, attributes))
}

/// [`child`], started at `start_unix_ms` rather than now: for a span whose
/// children are recorded from the same millisecond clock.
pub fn child_at(
    parent: &Context,
    name: impl Into<std::borrow::Cow<'static, str>>,
    start_unix_ms: i64,
    attributes: Vec<KeyValue>,
) -> Context {
    let span = started(
        parent,
        name,
        SpanKind::Internal,
        Some(start_unix_ms),
        attributes,
    );
    parent.with_span(span)
}

/// A span that already happened: `name`, from `start` to `end` (unix ms),
/// a child of `parent`.
pub fn record(
    parent: &Context,
    name: impl Into<std::borrow::Cow<'static, str>>,
    start_unix_ms: i64,
    end_unix_ms: i64,
    attributes: Vec<KeyValue>,
) {
    let mut span = started(
        parent,
        name,
        SpanKind::Internal,
        Some(start_unix_ms),
        attributes,
    );
    span.end_with_timestamp(at(end_unix_ms.max(start_unix_ms)));
}

/// A span started (now, or at `start_unix_ms`) under `parent`.
fn started(
    parent: &Context,
    name: impl Into<std::borrow::Cow<'static, str>>,
    kind: SpanKind,
    start_unix_ms: Option<i64>,
    attributes: Vec<KeyValue>,
) -> opentelemetry::global::BoxedSpan {
    let tracer = tracer();
    let mut builder = tracer
        .span_builder(name)
        .with_kind(kind)
        .with_attributes(attributes);
    if let Some(start) = start_unix_ms {
        builder = builder.with_start_time(at(start));
    }
    builder.start_with_context(&tracer, parent)
}

/// A unix time in milliseconds as a `SystemTime`.
pub fn at(unix_ms: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(u64::try_from(unix_ms).unwrap_or(0))
}

struct MetadataInjector<'a>(&'a mut MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(key), Ok(value)) = (
            MetadataKey::from_bytes(key.as_bytes()),
            MetadataValue::try_from(value.as_str()),
        ) {
            self.0.insert(key, value);
        }
    }
}

struct MetadataExtractor<'a>(&'a MetadataMap);

impl Extractor for MetadataExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0
            .keys()
            .filter_map(|k| match k {
                tonic::metadata::KeyRef::Ascii(k) => Some(k.as_str()),
                tonic::metadata::KeyRef::Binary(_) => None,
            })
            .collect()
    }
}
