//! The calls on a connection: each counted in progress until its response
//! ends (a call refused UNAUTHENTICATED is not activity), and the
//! transport's own statuses put right.

use std::{
    pin::Pin,
    sync::{atomic::Ordering, Arc},
    task::{Context, Poll},
};

use super::{ConnInfo, ConnState};

/// Counts a call in progress on its connection until dropped; then the
/// connection's idle clock starts again, unless the call was refused for
/// want of a token.
#[derive(Debug)]
struct CallGuard {
    state: Option<Arc<ConnState>>,
    /// The call was refused UNAUTHENTICATED: it is not activity.
    refused: bool,
}

impl CallGuard {
    fn new(state: Option<Arc<ConnState>>) -> Self {
        if let Some(state) = &state {
            state.calls.fetch_add(1, Ordering::AcqRel);
        }
        Self {
            state,
            refused: false,
        }
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if let Some(state) = &self.state {
            if !self.refused {
                state.idle_since_ms.store(state.now_ms(), Ordering::Release);
            }
            state.calls.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// A response body that keeps its call counted until it ends.
struct GuardedBody {
    inner: tonic::body::Body,
    _guard: CallGuard,
}

impl http_body::Body for GuardedBody {
    type Data = bytes::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The layer that counts calls per connection and puts the transport's
/// statuses right.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallsLayer;

impl<S> tower_layer::Layer<S> for CallsLayer {
    type Service = Calls<S>;

    fn layer(&self, inner: S) -> Calls<S> {
        Calls { inner }
    }
}

/// See [`CallsLayer`].
#[derive(Debug, Clone)]
pub struct Calls<S> {
    inner: S,
}

type BoxFuture<T> = Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl<S, B> tower_service::Service<http::Request<B>> for Calls<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>
        + Send,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let state = request
            .extensions()
            .get::<ConnInfo>()
            .map(|info| info.state.clone());
        let guard = CallGuard::new(state);
        let future = self.inner.call(request);
        Box::pin(async move {
            let mut guard = guard;
            let response = future.await?;
            let (mut parts, body) = response.into_parts();
            fix_status(&mut parts.headers);
            if tonic::Status::from_header_map(&parts.headers)
                .is_some_and(|status| status.code() == tonic::Code::Unauthenticated)
            {
                guard.refused = true;
            }
            let body = tonic::body::Body::new(GuardedBody {
                inner: body,
                _guard: guard,
            });
            Ok(http::Response::from_parts(parts, body))
        })
    }
}

/// The longest status message sent.
const STATUS_MESSAGE_MAX: usize = 2048;

/// The transport answers a request over the size limit with OUT_OF_RANGE and
/// one that does not decode with INTERNAL; gRPC's cores answer the first with
/// RESOURCE_EXHAUSTED, and the second is the caller's error: INVALID_ARGUMENT.
/// Also cuts any status message past [`STATUS_MESSAGE_MAX`] bytes: clients
/// bound the header it travels in (tonic's resets the stream past 16 KiB),
/// and no message of the lead's needs more.
fn fix_status(headers: &mut http::HeaderMap) {
    let Some(status) = tonic::Status::from_header_map(headers) else {
        return;
    };
    if status.message().len() > STATUS_MESSAGE_MAX {
        let cut = tonic::Status::new(
            status.code(),
            mesh_core::limits::cut(status.message(), STATUS_MESSAGE_MAX),
        );
        if cut.add_header(headers).is_err() {
            tracing::debug!("could not cut a status message");
        }
        return fix_status(headers);
    }
    let code = match status.code() {
        tonic::Code::OutOfRange
            if status
                .message()
                .starts_with("Error, decoded message length too large") =>
        {
            tonic::Code::ResourceExhausted
        }
        tonic::Code::Internal
            if status
                .message()
                .starts_with("failed to decode Protobuf message") =>
        {
            tonic::Code::InvalidArgument
        }
        _ => return,
    };
    let fixed = tonic::Status::new(code, status.message());
    if fixed.add_header(headers).is_err() {
        tracing::debug!("could not rewrite a transport status");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_statuses_are_put_right_and_others_left_alone() {
        let fixed = |status: tonic::Status| {
            let mut headers = http::HeaderMap::new();
            status.add_header(&mut headers).expect("header");
            fix_status(&mut headers);
            tonic::Status::from_header_map(&headers).expect("status")
        };
        let big = fixed(tonic::Status::out_of_range(
            "Error, decoded message length too large: found 9 bytes",
        ));
        assert_eq!(big.code(), tonic::Code::ResourceExhausted);
        assert!(big.message().starts_with("Error, decoded message length"));
        let garbled = fixed(tonic::Status::internal(
            "failed to decode Protobuf message: invalid wire type",
        ));
        assert_eq!(garbled.code(), tonic::Code::InvalidArgument);
        let ours = fixed(tonic::Status::out_of_range("seq: 5 is past the newest"));
        assert_eq!(ours.code(), tonic::Code::OutOfRange);
        let long = fixed(tonic::Status::not_found("x".repeat(100_000)));
        assert_eq!(long.code(), tonic::Code::NotFound);
        assert!(
            long.message().len() <= STATUS_MESSAGE_MAX,
            "{}",
            long.message().len()
        );
        assert!(long.message().ends_with("[cut: 100000 bytes in all]"));
    }
}
