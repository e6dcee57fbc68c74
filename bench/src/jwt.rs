//! What verifying a person's token costs (issue 58): the manual handshake
//! (a teammate's plan approved by an operator program watching the lead)
//! with the operator calling on the static operator token, then on an ID
//! token from an OpenID issuer, on the same lead in one run. The issuer is
//! the bench's own, on loopback: a discovery document and a JWKS served
//! over real HTTP, its tokens signed ES256 and RS256 (as identity providers
//! sign them) with keys made at bench time.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::{routing::get, Json, Router};
use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rsa::{pkcs1::EncodeRsaPrivateKey, traits::PublicKeyParts};
use serde_json::json;

use crate::{
    mesh,
    stats::{Report, Samples},
    Counts,
};

/// How many turns each token has in a run.
const ROUNDS: usize = 4;

/// The bench's issuer: its URL and its signing keys.
struct Issuer {
    url: String,
    keys: Vec<(Algorithm, &'static str, EncodingKey)>,
    _server: tokio::task::JoinHandle<()>,
}

impl Issuer {
    /// Serves the discovery document and the JWKS on a free loopback port.
    async fn start() -> anyhow::Result<Issuer> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let ec = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
        let point = ec.public_key_raw();
        let (x, y) = point
            .get(1..33)
            .zip(point.get(33..65))
            .ok_or_else(|| anyhow::anyhow!("not an uncompressed P-256 point"))?;
        let rsa = rsa::RsaPrivateKey::new(&mut rand::thread_rng(), 2048)?;
        let (n, e) = (rsa.n().to_bytes_be(), rsa.e().to_bytes_be());
        let jwks = json!({"keys": [
            {"kty": "EC", "crv": "P-256", "kid": "bench-es256", "alg": "ES256", "use": "sig",
             "x": URL_SAFE_NO_PAD.encode(x), "y": URL_SAFE_NO_PAD.encode(y)},
            {"kty": "RSA", "kid": "bench-rs256", "alg": "RS256", "use": "sig",
             "n": URL_SAFE_NO_PAD.encode(n), "e": URL_SAFE_NO_PAD.encode(e)},
        ]});
        let discovery = json!({"issuer": url, "jwks_uri": format!("{url}/jwks")});
        let app = Router::new()
            .route(
                "/.well-known/openid-configuration",
                get(move || async move { Json(discovery) }),
            )
            .route("/jwks", get(move || async move { Json(jwks) }));
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Issuer {
            url,
            keys: vec![
                (
                    Algorithm::ES256,
                    "bench-es256",
                    EncodingKey::from_ec_der(&ec.serialize_der()),
                ),
                (
                    Algorithm::RS256,
                    "bench-rs256",
                    EncodingKey::from_rsa_der(rsa.to_pkcs1_der()?.as_bytes()),
                ),
            ],
            _server: server,
        })
    }

    /// An ID token for the bench's admin, for audience `mesh`, valid for an
    /// hour, signed with `alg`.
    fn token(&self, alg: Algorithm) -> anyhow::Result<String> {
        let (_, kid, key) = self
            .keys
            .iter()
            .find(|(a, _, _)| *a == alg)
            .ok_or_else(|| anyhow::anyhow!("no {alg:?} key"))?;
        let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
        let claims = json!({
            "iss": self.url, "aud": "mesh", "sub": "bench", "email": "bench@example.com",
            "groups": ["admins"], "iat": now, "exp": now + 3600,
        });
        let mut header = Header::new(alg);
        header.kid = Some((*kid).to_owned());
        Ok(jsonwebtoken::encode(&header, &claims, key)?)
    }
}

/// The manual handshake with a static operator token, then with an ES256
/// and an RS256 ID token, on one sqlite lead that takes the bench's issuer.
pub(crate) async fn measure(counts: &Counts, report: &mut Report) -> anyhow::Result<()> {
    let issuer = Issuer::start().await?;
    let flags = [
        "--approval",
        "manual",
        "--oidc-issuer",
        &issuer.url,
        "--oidc-audience",
        "mesh",
        "--oidc-role",
        "admins=admin",
    ];
    let (_server, lead) = crate::start_lead("sqlite", &flags).await?;
    let tokens = [
        ("static token", lead.operator.clone()),
        ("JWT ES256", issuer.token(Algorithm::ES256)?),
        ("JWT RS256", issuer.token(Algorithm::RS256)?),
    ];
    // Rounds, each token's turn in a rotating order, so that what drifts
    // over a run (the store growing, the machine's other work) falls on
    // each alike; each token's figure is over all its rounds.
    let n = counts.handshakes / 2 / ROUNDS;
    let mut samples: Vec<Samples> = tokens
        .iter()
        .map(|_| Samples::with_capacity(n * ROUNDS))
        .collect();
    for round in 0..ROUNDS {
        for turn in 0..tokens.len() {
            let i = (round + turn) % tokens.len();
            let as_operator = mesh::Lead {
                operator: tokens[i].1.clone(),
                ..lead.clone()
            };
            let operator = mesh::run_operator(as_operator).await?;
            let name = format!("jwt{round}x{i}");
            let (taken, _) = mesh::handshakes_sequential(&lead, &name, n).await?;
            operator.abort();
            samples[i].extend(taken);
        }
    }
    for ((what, _), samples) in tokens.iter().zip(samples) {
        report.add(
            &format!("[sqlite] handshake manual, operator on {what} p50"),
            "us",
            samples.quantile_us(0.5),
        );
    }
    Ok(())
}

/// What the bench prints of it: each JWT's handshake against the static
/// token's (the aim: verification costs at most 10%).
pub(crate) fn print(report: &Report) {
    let name = |what: &str| format!("[sqlite] handshake manual, operator on {what} p50");
    let Some(plain) = report.median(&name("static token")) else {
        return;
    };
    for what in ["JWT ES256", "JWT RS256"] {
        if let Some(jwt) = report.median(&name(what)) {
            println!(
                "\noperator on a {what} (sqlite): manual handshake p50 {jwt:.0} us against \
                 {plain:.0} us on the static token ({:+.1}%, the aim: at most +10%)",
                (jwt / plain - 1.0) * 100.0
            );
        }
    }
}
