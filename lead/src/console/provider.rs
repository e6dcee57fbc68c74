//! The identity provider as a client of it sees it: the endpoints its
//! discovery document names, PKCE's S256 challenge, and the token
//! endpoint's answers. The console's sign-in (the authorization-code flow,
//! [`super::oidc`]) and `lead login --oidc` (the device authorization
//! grant, `lead/src/cli/login.rs`) both use it; the ID token they get is
//! checked by [`crate::callers::oidc::Verifier`] (or, for the CLI's own
//! display, only read).
//!
//! By hand with the workspace's reqwest rather than the `openidconnect`
//! crate: its `reqwest` feature brings reqwest 0.12 beside the workspace's
//! 0.13 (and its own RSA, elliptic-curve and Ed25519 crates beside
//! jsonwebtoken's), for the few requests below.

use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The endpoints of a provider's discovery document that the flows use.
#[derive(Debug, Clone)]
pub(crate) struct Endpoints {
    /// Where a browser signs in (the authorization-code flow).
    pub(crate) authorization: Option<String>,
    /// Where a code, or a device code, is exchanged for tokens.
    pub(crate) token: String,
    /// Where a device asks for a user code (RFC 8628), if the provider
    /// offers the device authorization grant.
    pub(crate) device_authorization: Option<String>,
}

/// An answer of the token endpoint other than tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TokenError {
    /// The provider's OAuth error (`invalid_grant`, `authorization_pending`,
    /// ...), with its description when it gave one.
    Refused {
        error: String,
        description: Option<String>,
    },
    /// The provider did not answer, or not as OAuth says.
    Failed(String),
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenError::Refused {
                error,
                description: Some(description),
            } => write!(f, "{error}: {description}"),
            TokenError::Refused { error, .. } => f.write_str(error),
            TokenError::Failed(why) => f.write_str(why),
        }
    }
}

/// An HTTP client for the provider (reqwest's rustls needs the process's
/// crypto provider installed first).
pub(crate) fn http_client() -> Result<reqwest::Client, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("an HTTP client for the identity provider: {e}"))
}

/// The endpoints `issuer`'s discovery document names; the document must
/// name the same issuer.
pub(crate) async fn discover(http: &reqwest::Client, issuer: &str) -> Result<Endpoints, String> {
    let url = format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    );
    let unreachable =
        |e: &dyn std::fmt::Display| format!("the identity provider at {url} did not answer ({e})");
    let response = http.get(&url).send().await.map_err(|e| unreachable(&e))?;
    if !response.status().is_success() {
        return Err(unreachable(&response.status()));
    }
    let document: Value = response.json().await.map_err(|e| unreachable(&e))?;
    if document.get("issuer").and_then(Value::as_str) != Some(issuer) {
        return Err(format!("{url} names another issuer than {issuer:?}"));
    }
    let text = |field: &str| {
        document
            .get(field)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    Ok(Endpoints {
        authorization: text("authorization_endpoint"),
        token: text("token_endpoint").ok_or_else(|| format!("{url} names no token_endpoint"))?,
        device_authorization: text("device_authorization_endpoint"),
    })
}

/// PKCE's S256 challenge of `verifier` (RFC 7636): base64url(SHA-256).
pub(crate) fn pkce_challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// `pairs` as an `application/x-www-form-urlencoded` body.
pub(crate) fn form(pairs: &[(&str, &str)]) -> String {
    let mut url = reqwest::Url::parse("http://form/").unwrap_or_else(|_| unreachable!());
    url.query_pairs_mut().extend_pairs(pairs);
    url.query().unwrap_or_default().to_owned()
}

/// POSTs `pairs` to `endpoint` (the token endpoint, or the device
/// authorization endpoint), as the client `client_id`, authenticated with
/// `secret` (`client_secret_basic`) when it is confidential: the JSON of a
/// 200, else the provider's OAuth error.
pub(crate) async fn post_form(
    http: &reqwest::Client,
    endpoint: &str,
    client_id: &str,
    secret: Option<&str>,
    pairs: &[(&str, &str)],
) -> Result<Value, TokenError> {
    let mut pairs = pairs.to_vec();
    let mut request = http
        .post(endpoint)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json");
    match secret {
        // RFC 6749 2.3.1: each form-encoded, then HTTP Basic.
        Some(secret) => {
            let encode = |s: &str| form(&[("x", s)]).trim_start_matches("x=").to_owned();
            request = request.basic_auth(encode(client_id), Some(encode(secret)));
        }
        None => pairs.push(("client_id", client_id)),
    }
    let failed = |e: &dyn std::fmt::Display| {
        TokenError::Failed(format!(
            "the identity provider at {endpoint} did not answer ({e})"
        ))
    };
    let response = request
        .body(form(&pairs))
        .send()
        .await
        .map_err(|e| failed(&e))?;
    let status = response.status();
    let body: Value = response.json().await.map_err(|e| failed(&e))?;
    if status.is_success() {
        return Ok(body);
    }
    match body.get("error").and_then(Value::as_str) {
        Some(error) => Err(TokenError::Refused {
            error: error.to_owned(),
            description: body
                .get("error_description")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }),
        None => Err(failed(&status)),
    }
}

/// A JWT's claims, read without checking its signature: for what was
/// checked already (the nonce of a verified ID token) or only shown.
pub(crate) fn unverified_claims(token: &str) -> Option<Value> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pkce_challenge_is_rfc_7636s() {
        // RFC 7636, appendix B.
        assert_eq!(
            pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn forms_are_url_encoded() {
        assert_eq!(
            form(&[
                ("scope", "openid email"),
                ("redirect_uri", "http://h/a?b=c")
            ]),
            "scope=openid+email&redirect_uri=http%3A%2F%2Fh%2Fa%3Fb%3Dc"
        );
    }

    #[test]
    fn a_jwts_claims_are_read() {
        let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(br#"{"sub":"dan","nonce":"n1"}"#);
        let token = format!("eyJhbGciOiJSUzI1NiJ9.{claims}.c2ln");
        let read = unverified_claims(&token).expect("claims");
        assert_eq!(read["nonce"], "n1");
        assert!(unverified_claims("not-a-jwt").is_none());
    }
}
