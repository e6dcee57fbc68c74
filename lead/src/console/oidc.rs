//! Signing in to the console at the identity provider: the
//! authorization-code flow with PKCE (`lead serve --oidc-issuer`, the
//! console on). `/oidc/login` sends the browser to the provider with a
//! fresh `state`, `nonce` and PKCE challenge; what the lead keeps of the
//! flow (the verifier, the nonce) stays on the lead, keyed by `state`, at
//! most [`MAX_FLOWS`] of them and none past [`FLOW_LIFE`]. The browser gets
//! only a cookie that binds the flow to it (`SameSite=Lax`, so that it
//! comes back with the provider's redirect), so that a code someone else
//! got cannot be fed to this browser. `/oidc/callback` exchanges the code,
//! checks the ID token as every provider token is checked
//! ([`crate::callers::oidc::Verifier`]) and its nonce, and opens a session
//! for the person, until the token expires.
//!
//! The session cookie is `SameSite=Strict`, and the callback is the end of
//! a navigation the provider's site began: a browser does not send a Strict
//! cookie on a redirect within that chain, so the callback answers with a
//! page of the console's own that moves on to the queue (a meta refresh, a
//! navigation the console's page begins), where the cookie is sent.

use std::{
    collections::{HashMap, VecDeque},
    sync::Mutex,
    time::{Duration, Instant},
};

use axum::{
    extract::{Query, State},
    http::{header, HeaderMap, StatusCode},
    response::{Html, IntoResponse, Redirect, Response},
};
use serde::Deserialize;

use super::{
    answers::no_store,
    assets::{escape, login_page},
    provider::{self, Endpoints},
    session::cookie,
    Console, COOKIE,
};
use crate::callers::oidc::Rejected;

/// The most sign-ins begun and not finished that are kept (the oldest go
/// first).
const MAX_FLOWS: usize = 1_000;
/// How long a sign-in begun may take to come back.
const FLOW_LIFE: Duration = Duration::from_secs(600);
/// The cookie that binds a sign-in begun to the browser that began it.
const BINDING: &str = "mesh_oidc";

/// How the console signs people in at the identity provider.
#[derive(Clone)]
pub struct SignIn {
    /// `--oidc-issuer`.
    pub issuer: String,
    /// `--oidc-client-id` (default: `--oidc-audience`).
    pub client_id: String,
    /// `--oidc-client-secret-file`'s secret: a confidential client
    /// (`client_secret_basic`); none: a public one (PKCE alone).
    pub client_secret: Option<String>,
    /// `<console URL>oidc/callback`.
    pub redirect_uri: String,
    /// `--oidc-scopes`: what is asked for (the ID token's claims).
    pub scopes: String,
}

impl std::fmt::Debug for SignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignIn")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("confidential", &self.client_secret.is_some())
            .field("redirect_uri", &self.redirect_uri)
            .finish()
    }
}

impl SignIn {
    /// The provider's host (and port), as the login page names it.
    pub(super) fn host(&self) -> String {
        reqwest::Url::parse(&self.issuer)
            .ok()
            .and_then(|url| {
                let host = url.host_str()?.to_owned();
                Some(match url.port() {
                    Some(port) => format!("{host}:{port}"),
                    None => host,
                })
            })
            .unwrap_or_else(|| self.issuer.clone())
    }
}

/// What the lead keeps of one sign-in begun.
struct Flow {
    verifier: String,
    nonce: String,
    binding: String,
    begun: Instant,
}

/// The console's sign-ins: the provider's endpoints once known, and the
/// flows begun, by `state`, oldest first.
pub(super) struct Flows {
    pub(super) sign_in: SignIn,
    http: reqwest::Client,
    endpoints: tokio::sync::OnceCell<Endpoints>,
    begun: Mutex<(HashMap<String, Flow>, VecDeque<String>)>,
}

impl Flows {
    pub(super) fn new(sign_in: SignIn) -> Result<Flows, String> {
        Ok(Flows {
            sign_in,
            http: provider::http_client()?,
            endpoints: tokio::sync::OnceCell::new(),
            begun: Mutex::default(),
        })
    }

    /// The provider's endpoints, from its discovery document (read once it
    /// answers).
    async fn endpoints(&self) -> Result<&Endpoints, String> {
        self.endpoints
            .get_or_try_init(|| provider::discover(&self.http, &self.sign_in.issuer))
            .await
    }

    /// Keeps `flow` under `state`, dropping the expired and, past
    /// [`MAX_FLOWS`], the oldest.
    fn begin(&self, state: String, flow: Flow) {
        let Ok(mut begun) = self.begun.lock() else {
            return;
        };
        let (by_state, order) = &mut *begun;
        while let Some(oldest) = order.front() {
            let expired = by_state
                .get(oldest)
                .is_none_or(|f| f.begun.elapsed() >= FLOW_LIFE);
            if !expired && order.len() < MAX_FLOWS {
                break;
            }
            if let Some(oldest) = order.pop_front() {
                by_state.remove(&oldest);
            }
        }
        by_state.insert(state.clone(), flow);
        order.push_back(state);
    }

    /// The flow begun under `state`, taken (a code is exchanged once), if it
    /// has not expired.
    fn take(&self, state: &str) -> Option<Flow> {
        let mut begun = self.begun.lock().ok()?;
        let (by_state, order) = &mut *begun;
        let flow = by_state.remove(state)?;
        order.retain(|s| s != state);
        (flow.begun.elapsed() < FLOW_LIFE).then_some(flow)
    }
}

/// `/oidc/login`: to the provider's sign-in, with a new flow's state,
/// nonce and PKCE challenge; the binding cookie set.
pub(super) async fn start(State(console): State<Console>) -> Response {
    let Some(flows) = console.sign_in.clone() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let endpoints = match flows.endpoints().await {
        Ok(endpoints) => endpoints,
        Err(why) => return login_page(&console, Some(&why), StatusCode::BAD_GATEWAY),
    };
    let Some(authorization) = &endpoints.authorization else {
        let why = format!("{} names no authorization endpoint", flows.sign_in.issuer);
        return login_page(&console, Some(&why), StatusCode::BAD_GATEWAY);
    };
    let state = shared::auth::new_token();
    let flow = Flow {
        verifier: shared::auth::new_token(),
        nonce: shared::auth::new_token(),
        binding: shared::auth::new_token(),
        begun: Instant::now(),
    };
    let sign_in = &flows.sign_in;
    let url = reqwest::Url::parse_with_params(
        authorization,
        &[
            ("response_type", "code"),
            ("client_id", &sign_in.client_id),
            ("redirect_uri", &sign_in.redirect_uri),
            ("scope", &sign_in.scopes),
            ("state", &state),
            ("nonce", &flow.nonce),
            ("code_challenge", &provider::pkce_challenge(&flow.verifier)),
            ("code_challenge_method", "S256"),
        ],
    );
    let url = match url {
        Ok(url) => url,
        Err(e) => {
            let why = format!("the provider's authorization endpoint {authorization:?}: {e}");
            return login_page(&console, Some(&why), StatusCode::BAD_GATEWAY);
        }
    };
    let binding = console.set_cookie(
        BINDING,
        &flow.binding,
        "Lax",
        "/oidc",
        Some(FLOW_LIFE.as_secs()),
    );
    flows.begin(state, flow);
    let mut response = Redirect::to(url.as_str()).into_response();
    response.headers_mut().insert(header::SET_COOKIE, binding);
    no_store(response)
}

/// What the provider sends the browser back with.
#[derive(Deserialize)]
pub(super) struct Back {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// `/oidc/callback`: the code exchanged, the ID token checked, a session
/// opened; then a page of the console's own that moves on to the queue.
pub(super) async fn callback(
    State(console): State<Console>,
    headers: HeaderMap,
    Query(back): Query<Back>,
) -> Response {
    let Some(flows) = console.sign_in.clone() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let (person, until) = match finish(&console, &flows, &headers, back).await {
        Ok(signed_in) => signed_in,
        Err(why) => {
            tracing::info!(why = %why, "a console sign-in at the identity provider failed");
            return login_page(&console, Some(&why), StatusCode::UNAUTHORIZED);
        }
    };
    tracing::info!(person = %person.name, role = %person.role, "signed in to the console");
    let page = LANDING.replace(
        "{{name}}",
        &escape(&format!("{} ({})", person.name, person.role)),
    );
    let session = console.open_session(person, until);
    let mut response = Html(page).into_response();
    let cookies = response.headers_mut();
    cookies.append(
        header::SET_COOKIE,
        console.set_cookie(COOKIE, &session, "Strict", "/", None),
    );
    cookies.append(
        header::SET_COOKIE,
        console.set_cookie(BINDING, "", "Lax", "/oidc", Some(0)),
    );
    no_store(response)
}

/// The person the provider's answer signs in, and when their session
/// ends; else why not, as the login page says it.
async fn finish(
    console: &Console,
    flows: &Flows,
    headers: &HeaderMap,
    back: Back,
) -> Result<(mesh_core::access::Person, Option<Instant>), String> {
    if let Some(error) = back.error {
        let said = back
            .error_description
            .map_or_else(String::new, |d| format!(": {d}"));
        return Err(format!("The identity provider said {error}{said}."));
    }
    let again = "; sign in again";
    let (Some(code), Some(state)) = (back.code, back.state) else {
        return Err(format!(
            "The provider's answer has no code or state{again}."
        ));
    };
    let flow = flows
        .take(&state)
        .ok_or_else(|| format!("This sign-in has expired, or was not begun here{again}."))?;
    if cookie(headers, BINDING) != Some(flow.binding.as_str()) {
        return Err(format!(
            "This sign-in was begun in another browser (or its cookie is gone){again}."
        ));
    }
    let endpoints = flows.endpoints().await?;
    let sign_in = &flows.sign_in;
    let answer = provider::post_form(
        &flows.http,
        &endpoints.token,
        &sign_in.client_id,
        sign_in.client_secret.as_deref(),
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", &sign_in.redirect_uri),
            ("code_verifier", &flow.verifier),
        ],
    )
    .await
    .map_err(|e| format!("The identity provider did not take the sign-in's code ({e}){again}."))?;
    let id_token = answer
        .get("id_token")
        .and_then(serde_json::Value::as_str)
        .ok_or("The identity provider gave no ID token (is openid among --oidc-scopes?).")?;
    let verifier = console
        .tokens
        .oidc
        .as_ref()
        .ok_or("The lead takes no identity provider's tokens.")?;
    let person = verifier.verify(id_token).await.map_err(|rejected| {
        let (Rejected::Token(why) | Rejected::NoRole(why)) = rejected;
        why.trim_start_matches("authorization: ").to_owned()
    })?;
    let claims = provider::unverified_claims(id_token).unwrap_or_default();
    if claims.get("nonce").and_then(serde_json::Value::as_str) != Some(flow.nonce.as_str()) {
        return Err(format!(
            "The ID token is not this sign-in's (its nonce){again}."
        ));
    }
    let now = shared::auth::now_unix_ms() / 1000;
    let until = claims
        .get("exp")
        .and_then(serde_json::Value::as_i64)
        .map(|exp| Instant::now() + Duration::from_secs(u64::try_from(exp - now).unwrap_or(0)));
    Ok((person, until))
}

/// The page the callback answers with: the session cookie is set, and the
/// console's own page moves on to the queue, where the browser sends it.
const LANDING: &str = r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="0; url=/">
<title>mesh console: signed in</title>
<link rel="stylesheet" href="/app.css">
<link rel="icon" href="data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'%3E%3Ccircle cx='8' cy='8' r='7' fill='%23336'/%3E%3Ccircle cx='8' cy='8' r='3' fill='%23fff'/%3E%3C/svg%3E">
</head>
<body>
<main class="login">
  <h1>mesh console</h1>
  <p id="signed-in">Signed in as {{name}}. <a href="/">On to the console</a></p>
</main>
</body>
</html>
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn flows() -> Flows {
        Flows::new(SignIn {
            issuer: "http://127.0.0.1:1".into(),
            client_id: "mesh".into(),
            client_secret: Some("secret".into()),
            redirect_uri: "http://127.0.0.1:2/oidc/callback".into(),
            scopes: "openid".into(),
        })
        .expect("flows")
    }

    fn flow(begun: Instant) -> Flow {
        Flow {
            verifier: "v".into(),
            nonce: "n".into(),
            binding: "b".into(),
            begun,
        }
    }

    #[test]
    fn a_flow_is_taken_once_and_not_past_its_life() {
        let flows = flows();
        flows.begin("s1".into(), flow(Instant::now()));
        assert!(flows.take("s1").is_some());
        assert!(flows.take("s1").is_none(), "a code is exchanged once");
        if let Some(long_ago) = Instant::now().checked_sub(FLOW_LIFE) {
            flows.begin("s2".into(), flow(long_ago));
            assert!(flows.take("s2").is_none(), "expired");
        }
    }

    #[test]
    fn flows_begun_are_bounded_the_oldest_going_first() {
        let flows = flows();
        for i in 0..=MAX_FLOWS {
            flows.begin(format!("s{i}"), flow(Instant::now()));
        }
        assert!(flows.take("s0").is_none());
        assert!(flows.take(&format!("s{MAX_FLOWS}")).is_some());
        let kept = flows.begun.lock().map(|b| b.0.len()).unwrap_or_default();
        assert_eq!(kept, MAX_FLOWS - 1);
    }

    #[test]
    fn the_secret_is_not_printed_and_the_host_is_named() {
        let flows = flows();
        let shown = format!("{:?}", flows.sign_in);
        assert!(!shown.contains("secret\""), "{shown}");
        assert_eq!(flows.sign_in.host(), "127.0.0.1:1");
    }
}
