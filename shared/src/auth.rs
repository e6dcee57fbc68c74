//! Bearer tokens in `authorization` metadata, for clients and the server.

use tonic::{metadata::MetadataValue, service::Interceptor, Request, Status};

/// The bearer token a request carries, if any.
pub fn bearer<T>(request: &Request<T>) -> Option<&str> {
    request
        .metadata()
        .get("authorization")?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
}

/// A client interceptor that adds `authorization: Bearer <token>` to every
/// call, and the current trace context when exporting telemetry.
#[derive(Clone)]
pub struct BearerToken {
    /// The header value, parsed once.
    value: MetadataValue<tonic::metadata::Ascii>,
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(..)")
    }
}

impl BearerToken {
    /// Fails when the token holds characters a header cannot carry.
    pub fn new(token: &str) -> Result<Self, Status> {
        let value = format!("Bearer {token}")
            .parse()
            .map_err(|_| Status::invalid_argument("token: not valid in an HTTP header"))?;
        Ok(Self { value })
    }
}

impl Interceptor for BearerToken {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        request
            .metadata_mut()
            .insert("authorization", self.value.clone());
        // The caller's trace, when exporting (`traceparent`).
        if mesh_telemetry::enabled() {
            mesh_telemetry::inject(&opentelemetry::Context::current(), request.metadata_mut());
        }
        Ok(request)
    }
}

/// Whether `given` is `expected`, compared in constant time (how long it
/// takes says nothing of how much of a secret token was right).
pub fn same_token(given: &str, expected: &str) -> bool {
    use subtle::ConstantTimeEq;
    bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
}

/// Milliseconds since the Unix epoch, from the system clock.
pub fn now_unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A fresh secret token: 244 random bits from the OS generator, as 64 hex digits.
pub fn new_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_match_only_exactly() {
        let token = new_token();
        assert_eq!(token.len(), 64);
        assert!(same_token(&token, &token.clone()));
        assert!(!same_token(&token[..63], &token));
        assert!(!same_token("", &token));
        assert!(!same_token(&new_token(), &token));
    }
}
