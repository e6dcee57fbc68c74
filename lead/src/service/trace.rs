//! A call's server span: the request it opens traced from here, the one it
//! answers its parent.

use mesh_core::names::RequestId;
use tonic::Status;

/// Which request a call is about, for its span.
pub(super) enum About<'a> {
    /// It opens request `id` (a UUID as the client gave it) of `kind`: the
    /// request's trace starts from the caller's.
    Opens(&'a str, mesh_core::protocol::Kind),
    /// It answers or decides request `id`: its span joins that request's
    /// trace.
    Answers(&'a str),
}

/// A call's server span, begun.
pub(super) struct Begun {
    /// The span's context: the call runs in it.
    cx: opentelemetry::Context,
    /// The request the call opens, traced from here.
    opened: Option<String>,
}

/// Begins the server span `method` of one call when exporting telemetry
/// ([`crate::telemetry`]; `None`, having done nothing, when not): a request
/// it opens is traced from here; one it answers is its parent.
pub(super) fn begin(
    method: &'static str,
    metadata: &tonic::metadata::MetadataMap,
    about: About<'_>,
) -> Option<Begun> {
    if !mesh_telemetry::enabled() {
        return None;
    }
    // As the hub will name the request (a UUID's canonical spelling).
    let canonical = |id: &str| {
        RequestId::existing("request_id", id)
            .ok()
            .map(|id| id.to_string())
    };
    let (opened, answers) = match about {
        About::Opens(id, kind) => {
            use opentelemetry::trace::TraceContextExt as _;
            let caller = mesh_telemetry::extract(metadata);
            let opened = canonical(id).filter(|id| crate::telemetry::opened(id, kind, &caller));
            // A caller that sends no trace: the call is a span of the
            // request's own.
            let parent = opened.clone().filter(|_| !caller.has_active_span());
            (opened, parent)
        }
        About::Answers(id) => (None, canonical(id)),
    };
    let cx = crate::telemetry::rpc(method, metadata, answers.as_deref());
    Some(Begun { cx, opened })
}

/// Runs one call in its span, if one was begun; a request it opened is
/// forgotten again if the call fails.
pub(super) async fn traced<R>(
    begun: Option<Begun>,
    call: impl std::future::Future<Output = Result<R, Status>>,
) -> Result<R, Status> {
    use opentelemetry::context::FutureExt as _;
    let Some(begun) = begun else {
        return call.await;
    };
    let result = call.with_context(begun.cx.clone()).await;
    crate::telemetry::rpc_done(&begun.cx, &result);
    if let (Some(id), Err(_)) = (&begun.opened, &result) {
        crate::telemetry::abandoned(id);
    }
    result
}
