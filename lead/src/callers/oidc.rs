//! Operators from the company's identity provider (`--oidc-issuer`): an ID
//! or access token the provider signed names a person, whose role comes from
//! the groups it says they are in. The provider's keys are found through its
//! discovery document and fetched again when a token names a key not seen
//! yet (at most once every [`REFETCH_EVERY`]), so a key the provider rotated
//! is taken without a restart.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use jsonwebtoken::{jwk::Jwk, Algorithm, DecodingKey, Validation};
use mesh_core::access::{Person, Role};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::{Mutex, RwLock};

/// The least time between two fetches of the provider's keys.
pub(crate) const REFETCH_EVERY: Duration = Duration::from_secs(10);

/// How far a clock may be off: a token this much past its expiry, or this
/// much before its not-before, is still taken.
const LEEWAY_SECS: u64 = 30;

/// The signatures taken.
const ALGORITHMS: [Algorithm; 3] = [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];

/// How a person's token is read (`lead serve --oidc-*`).
#[derive(Debug, Clone)]
pub struct OidcConfig {
    /// `--oidc-issuer`: the provider, as its tokens' `iss` says it.
    pub issuer: String,
    /// `--oidc-audience`: what a token's `aud` must hold.
    pub audience: String,
    /// `--oidc-name-claim`: the claim that names a person (none: `email`,
    /// else `preferred_username`, else `sub`).
    pub name_claim: Option<String>,
    /// `--oidc-role GROUP=ROLE`: a person in GROUP (their `groups` or
    /// `roles` claim) has ROLE; the highest of theirs counts.
    pub roles: Vec<(String, Role)>,
}

/// Why a token was not taken: said back to the caller as UNAUTHENTICATED
/// (or PERMISSION_DENIED, for a person with no role).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Rejected {
    /// Not a token of this provider's, or not valid now.
    Token(String),
    /// A valid token whose person has no role here.
    NoRole(String),
}

/// The provider's keys by `kid` (read once, when fetched), and when they
/// were fetched.
#[derive(Default)]
struct Keys {
    by_kid: HashMap<String, DecodingKey>,
    fetched: Option<Instant>,
}

/// Checks tokens against one provider.
pub struct Verifier {
    config: OidcConfig,
    http: reqwest::Client,
    /// The discovery document's `jwks_uri`, once known.
    jwks_uri: Mutex<Option<String>>,
    keys: RwLock<Keys>,
    /// Tokens verified already, with their person and expiry (unix s): a
    /// client calls with the same token until it expires, and a signature
    /// is checked once. At most [`VERIFIED_KEPT`]; emptied when full.
    verified: std::sync::Mutex<HashMap<String, (Person, u64)>>,
}

/// The most verified tokens remembered.
const VERIFIED_KEPT: usize = 10_000;

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("issuer", &self.config.issuer)
            .finish_non_exhaustive()
    }
}

/// What the lead reads of a token's claims.
#[derive(Debug, Deserialize)]
struct Claims {
    sub: String,
    #[serde(flatten)]
    rest: HashMap<String, Value>,
}

impl Verifier {
    /// A verifier for `config`'s provider; its keys are fetched on first use.
    pub(crate) fn new(config: OidcConfig) -> Result<Verifier, String> {
        // reqwest's rustls needs a process-wide crypto provider; the first
        // to install one wins.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("--oidc-issuer: an HTTP client: {e}"))?;
        Ok(Verifier {
            config,
            http,
            jwks_uri: Mutex::new(None),
            keys: RwLock::new(Keys::default()),
            verified: std::sync::Mutex::default(),
        })
    }

    /// The provider's keys, fetched now: at start, so that a provider the
    /// lead cannot reach is said at once (the lead serves on and tries
    /// again at the first token).
    pub(crate) async fn warm(&self) -> Result<usize, String> {
        self.refetch(true).await?;
        Ok(self.keys.read().await.by_kid.len())
    }

    /// The person `token` names, if the provider signed it for this lead's
    /// audience and it is valid now.
    pub(crate) async fn verify(&self, token: &str) -> Result<Person, Rejected> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if let Ok(verified) = self.verified.lock() {
            if let Some((person, exp)) = verified.get(token) {
                if now <= exp.saturating_add(LEEWAY_SECS) {
                    return Ok(person.clone());
                }
            }
        }
        let (person, exp) = self.check(token).await?;
        if let Ok(mut verified) = self.verified.lock() {
            if verified.len() >= VERIFIED_KEPT {
                verified.clear();
            }
            verified.insert(token.to_owned(), (person.clone(), exp));
        }
        Ok(person)
    }

    /// [`Self::verify`] without remembering: the person and the token's
    /// expiry (unix s).
    async fn check(&self, token: &str) -> Result<(Person, u64), Rejected> {
        let bad = |why: &str| Rejected::Token(format!("authorization: the identity token {why}"));
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| bad(&format!("is malformed: {e}")))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(bad(&format!(
                "is signed with {:?}; RS256, ES256 or EdDSA are taken",
                header.alg
            )));
        }
        // Whose token it claims to be, before looking for its key: a
        // token of another provider's is named as that, not as a key
        // this one does not publish.
        let issuer = unverified_issuer(token);
        if issuer.as_deref() != Some(self.config.issuer.as_str()) {
            return Err(bad(&format!(
                "is from another issuer ({}, not {:?})",
                issuer.map_or_else(|| "none".to_owned(), |i| format!("{i:?}")),
                self.config.issuer
            )));
        }
        let kid = header
            .kid
            .ok_or_else(|| bad("names no key (kid); the provider's tokens do"))?;
        let key = self.key(&kid).await.map_err(|e| bad(&e))?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_SECS;
        let data = jsonwebtoken::decode::<Claims>(token, &key, &validation).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind as K;
            match e.kind() {
                K::ExpiredSignature => bad("has expired"),
                K::ImmatureSignature => bad("is not valid yet (nbf)"),
                K::InvalidAudience => bad(&format!(
                    "is for another audience (not {:?})",
                    self.config.audience
                )),
                K::InvalidIssuer => bad(&format!(
                    "is from another issuer (not {:?})",
                    self.config.issuer
                )),
                K::InvalidSignature => bad("has a signature that does not verify"),
                _ => bad(&format!("is not valid: {e}")),
            }
        })?;
        let exp = data
            .claims
            .rest
            .get("exp")
            .and_then(Value::as_u64)
            .unwrap_or_default();
        Ok((self.person(data.claims)?, exp))
    }

    /// The person `claims` name, with their role.
    fn person(&self, claims: Claims) -> Result<Person, Rejected> {
        let text = |claim: &str| {
            claims
                .rest
                .get(claim)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let name = match &self.config.name_claim {
            Some(claim) if claim == "sub" => Some(claims.sub.clone()),
            Some(claim) => text(claim),
            None => text("email")
                .or_else(|| text("preferred_username"))
                .or_else(|| Some(claims.sub.clone())),
        }
        .ok_or_else(|| {
            Rejected::Token(format!(
                "authorization: the identity token has no {:?} claim to name its person",
                self.config.name_claim.as_deref().unwrap_or_default()
            ))
        })?;
        let groups: Vec<String> = ["groups", "roles"]
            .iter()
            .filter_map(|claim| claims.rest.get(*claim))
            .flat_map(|value| match value {
                Value::Array(items) => items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
                Value::String(one) => vec![one.clone()],
                _ => Vec::new(),
            })
            .collect();
        let role = self
            .config
            .roles
            .iter()
            .filter(|(group, _)| groups.contains(group))
            .map(|(_, role)| *role)
            .max()
            .ok_or_else(|| {
                Rejected::NoRole(format!(
                    "authorization: {name} has no role here: none of their groups ({}) is given one by --oidc-role",
                    groups.join(", ")
                ))
            })?;
        Ok(Person {
            name,
            role,
            issuer: Some(self.config.issuer.clone()),
            subject: Some(claims.sub),
            groups,
        })
    }

    /// The key `kid` names, fetching the provider's keys again if it is not
    /// known yet (at most once every [`REFETCH_EVERY`]).
    async fn key(&self, kid: &str) -> Result<DecodingKey, String> {
        if let Some(key) = self.keys.read().await.by_kid.get(kid) {
            return Ok(key.clone());
        }
        self.refetch(false).await?;
        match self.keys.read().await.by_kid.get(kid) {
            Some(key) => Ok(key.clone()),
            None => Err(format!(
                "is signed by a key the provider does not publish (kid {kid:?})"
            )),
        }
    }

    /// Fetches the provider's keys, unless they were fetched less than
    /// [`REFETCH_EVERY`] ago (`force`: even then).
    async fn refetch(&self, force: bool) -> Result<(), String> {
        let mut uri = self.jwks_uri.lock().await;
        if !force {
            let keys = self.keys.read().await;
            if keys.fetched.is_some_and(|at| at.elapsed() < REFETCH_EVERY) {
                return Ok(());
            }
        }
        let jwks_uri = match uri.as_ref() {
            Some(known) => known.clone(),
            None => {
                let found = self.discover().await?;
                *uri = Some(found.clone());
                found
            }
        };
        let fetched = self.fetch_keys(&jwks_uri).await;
        let mut keys = self.keys.write().await;
        keys.fetched = Some(Instant::now());
        keys.by_kid = fetched?;
        Ok(())
    }

    /// The `jwks_uri` of the provider's discovery document.
    async fn discover(&self) -> Result<String, String> {
        let url = format!(
            "{}/.well-known/openid-configuration",
            self.config.issuer.trim_end_matches('/')
        );
        let document: Value = self.get_json(&url).await?;
        if document.get("issuer").and_then(Value::as_str) != Some(self.config.issuer.as_str()) {
            return Err(format!(
                "could not be checked: {url} names another issuer than {:?}",
                self.config.issuer
            ));
        }
        document
            .get("jwks_uri")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("could not be checked: {url} names no jwks_uri"))
    }

    /// The signing keys at `jwks_uri` that name a `kid`, by it; a key of a
    /// kind the lead does not read is left out.
    async fn fetch_keys(&self, jwks_uri: &str) -> Result<HashMap<String, DecodingKey>, String> {
        let set: Value = self.get_json(jwks_uri).await?;
        let keys = set
            .get("keys")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("could not be checked: {jwks_uri} holds no keys"))?;
        Ok(keys
            .iter()
            .filter_map(|key| serde_json::from_value::<Jwk>(key.clone()).ok())
            .filter_map(|jwk| {
                let key = DecodingKey::from_jwk(&jwk).ok()?;
                Some((jwk.common.key_id.clone()?, key))
            })
            .collect())
    }

    async fn get_json(&self, url: &str) -> Result<Value, String> {
        let unreachable = |e: &dyn std::fmt::Display| {
            format!("could not be checked: the provider at {url} did not answer ({e})")
        };
        let response = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| unreachable(&e))?;
        if !response.status().is_success() {
            return Err(unreachable(&response.status()));
        }
        response.json().await.map_err(|e| unreachable(&e))
    }
}

/// The `iss` a JWT's payload says, unverified: only to name whose token a
/// refused one claims to be.
fn unverified_issuer(token: &str) -> Option<String> {
    use base64::Engine as _;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: Value = serde_json::from_slice(&bytes).ok()?;
    claims.get("iss")?.as_str().map(str::to_owned)
}

/// Whether `token` is shaped as a JWT (three dot-separated parts); the
/// lead's own tokens never are.
pub(crate) fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3 && token.starts_with("eyJ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verifier(roles: &[(&str, Role)], name_claim: Option<&str>) -> Verifier {
        Verifier::new(OidcConfig {
            issuer: "http://127.0.0.1:1".into(),
            audience: "mesh".into(),
            name_claim: name_claim.map(str::to_owned),
            roles: roles.iter().map(|(g, r)| ((*g).to_owned(), *r)).collect(),
        })
        .expect("a client")
    }

    fn claims(json: Value) -> Claims {
        serde_json::from_value(json).expect("claims")
    }

    #[test]
    fn a_person_is_named_by_email_then_username_then_sub_and_has_their_highest_role() {
        let v = verifier(&[("dba", Role::Reviewer), ("admins", Role::Admin)], None);
        let person = v
            .person(claims(serde_json::json!({
                "sub": "u1", "email": "dora@example.com", "preferred_username": "dora",
                "groups": ["dba", "admins"],
            })))
            .expect("a person");
        assert_eq!(person.name, "dora@example.com");
        assert_eq!(person.role, Role::Admin);
        assert_eq!(person.subject.as_deref(), Some("u1"));
        let person = v
            .person(claims(serde_json::json!({
                "sub": "u2", "preferred_username": "dan", "roles": "dba",
            })))
            .expect("a person");
        assert_eq!((person.name.as_str(), person.role), ("dan", Role::Reviewer));
        let nobody = v.person(claims(serde_json::json!({"sub": "u3", "groups": ["x"]})));
        assert!(
            matches!(&nobody, Err(Rejected::NoRole(m)) if m.contains("u3 has no role")),
            "{nobody:?}"
        );
        let by_sub = verifier(&[("x", Role::Viewer)], Some("sub"))
            .person(claims(
                serde_json::json!({"sub": "u4", "email": "e@x", "groups": ["x"]}),
            ))
            .expect("a person");
        assert_eq!(by_sub.name, "u4");
    }

    #[test]
    fn only_jwt_shaped_tokens_are_taken_for_the_provider() {
        assert!(looks_like_jwt("eyJhbGciOi.eyJzdWIi.c2ln"));
        assert!(!looks_like_jwt("0123456789abcdef0123456789abcdef"));
        assert!(!looks_like_jwt("eyJ.only-two"));
    }
}
