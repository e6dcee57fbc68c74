//! The webhook sink: the [`Notice`] POSTed as JSON, signed as GitHub signs
//! its hooks. Headers: `Content-Type: application/json`, `X-Mesh-Event:
//! waiting|escalated`, `X-Mesh-Delivery: <uuid>` (the same on every
//! attempt of one delivery), and, when the sink has a secret,
//! `X-Mesh-Signature-256: sha256=<hex>`: the lowercase hex HMAC-SHA256 of
//! the raw body under the secret.

use hmac::{Hmac, Mac};
use reqwest::{
    header::{HeaderMap, HeaderName, HeaderValue},
    Url,
};
use sha2::Sha256;

use crate::{
    http,
    notice::Notice,
    retry::with_retries,
    sink::Secret,
    stats::{bump, SinkCounters},
};

/// The header naming the event.
pub const EVENT_HEADER: &str = "x-mesh-event";
/// The header naming the delivery.
pub const DELIVERY_HEADER: &str = "x-mesh-delivery";
/// The header holding the signature.
pub const SIGNATURE_HEADER: &str = "x-mesh-signature-256";

/// `sha256=` and the lowercase hex HMAC-SHA256 of `body` under `secret`:
/// what `X-Mesh-Signature-256` holds, as GitHub's `X-Hub-Signature-256`.
pub fn signature_256(secret: &[u8], body: &[u8]) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        unreachable!("HMAC takes a key of any length");
    };
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256=");
    for byte in digest {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// A webhook sink, ready to post.
#[derive(Debug)]
pub(crate) struct Webhook {
    pub(crate) client: reqwest::Client,
    pub(crate) url: Url,
    pub(crate) secret: Option<Secret>,
}

impl Webhook {
    /// Posts `notice`, trying again as [`crate::retry`] says.
    pub(crate) async fn deliver(&self, notice: &Notice, counters: &SinkCounters) {
        let delivery = uuid::Uuid::new_v4().to_string();
        let what = format!("webhook {} for {}", delivery, notice.request_id);
        let body = match serde_json::to_vec(notice) {
            Ok(body) => body,
            Err(e) => {
                // Plain strings and numbers: this does not happen.
                bump(&counters.failed);
                tracing::warn!(delivery = what, "cannot encode the notice: {e}");
                return;
            }
        };
        let headers = self.headers(notice, &delivery, &body);
        with_retries(&what, counters, || {
            http::post(&self.client, &self.url, headers.clone(), &body)
        })
        .await;
    }

    fn headers(&self, notice: &Notice, delivery: &str, body: &[u8]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let mut put = |name: &'static str, value: &str| {
            if let Ok(value) = HeaderValue::from_str(value) {
                headers.insert(HeaderName::from_static(name), value);
            }
        };
        put(EVENT_HEADER, notice.event.name());
        put(DELIVERY_HEADER, delivery);
        if let Some(secret) = &self.secret {
            put(SIGNATURE_HEADER, &signature_256(secret.0.as_bytes(), body));
        }
        headers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example in GitHub's "Validating webhook deliveries".
    #[test]
    fn signs_githubs_example_as_github_does() {
        assert_eq!(
            signature_256(b"It's a Secret to Everybody", b"Hello, World!"),
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
        );
    }
}
