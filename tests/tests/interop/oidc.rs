//! The tests' OpenID provider (`tests/src/oidc.rs`: npm's `oidc-provider`,
//! the real one) does what the lead's OpenID tests count on: sign-ins
//! through its own pages give ID tokens signed RS256, ES256 and EdDSA with
//! the issuer, audience, email and groups; their kids are in the JWKS its
//! discovery document names; userinfo carries the same claims; forged
//! tokens expire, name another issuer or an unknown kid; a restart rotates
//! the keys on the same issuer; and the device flow hands out a user code
//! that a person's approval turns into tokens.

#![allow(clippy::unwrap_used)]

use mesh_tests::oidc::{jwt_claims, jwt_header, Forge, OidcProvider, DEVICE_GRANT, SCOPES};
use serde_json::json;

fn now() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(since.as_secs()).unwrap()
}

#[tokio::test]
async fn sign_ins_give_id_tokens_the_jwks_verifies_and_a_restart_rotates_the_keys() {
    let provider = OidcProvider::start().await;
    let issuer = provider.issuer().to_owned();
    assert!(issuer.starts_with("http://127.0.0.1:"), "{issuer}");
    let discovery = provider.discovery().await;
    assert_eq!(discovery["issuer"], json!(issuer));
    assert!(discovery["jwks_uri"].as_str().unwrap().starts_with(&issuer));
    let kids = provider.kids().await;
    assert_eq!(kids.len(), 3, "{kids:?}");

    for alg in ["RS256", "ES256", "EdDSA"] {
        let tokens = provider.login_with_alg("alice", "mesh", alg).await;
        let header = jwt_header(&tokens.id_token);
        assert_eq!(header["alg"], json!(alg));
        let kid = header["kid"].as_str().unwrap();
        assert!(kids.iter().any(|k| k == kid), "{kid} not in {kids:?}");
        let claims = jwt_claims(&tokens.id_token);
        assert_eq!(claims["iss"], json!(issuer));
        assert_eq!(claims["aud"], json!("mesh"));
        assert_eq!(claims["sub"], json!("alice"));
        assert_eq!(claims["email"], json!("alice@example.com"));
        assert_eq!(claims["preferred_username"], json!("alice"));
        assert_eq!(claims["groups"], json!(["reviewers"]));
        assert!(claims["exp"].as_i64().unwrap() > now());
    }

    // The client's own algorithm again after those, and other accounts.
    let dora = provider.login("dora", "mesh").await;
    assert_eq!(jwt_header(&dora.id_token)["alg"], json!("RS256"));
    assert_eq!(jwt_claims(&dora.id_token)["groups"], json!(["dba"]));
    let userinfo = userinfo(&provider, &dora.access_token).await;
    assert_eq!(userinfo["sub"], json!("dora"));
    assert_eq!(userinfo["email"], json!("dora@example.com"));
    assert_eq!(userinfo["groups"], json!(["dba"]));

    // Another audience: the confidential client `other`.
    let other = provider.login("victor", "other").await;
    let claims = jwt_claims(&other.id_token);
    assert_eq!(claims["aud"], json!("other"));
    assert_eq!(claims["groups"], json!(["viewers"]));

    let rotated = provider.restart_with_new_keys().await;
    assert_eq!(rotated.issuer(), issuer);
    let new_kids = rotated.kids().await;
    assert_eq!(new_kids.len(), 3);
    assert!(
        new_kids.iter().all(|k| !kids.contains(k)),
        "{new_kids:?} after {kids:?}"
    );
    let tokens = rotated.login("adam", "mesh").await;
    let kid = jwt_header(&tokens.id_token)["kid"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(new_kids.contains(&kid), "{kid} not in {new_kids:?}");
    assert_eq!(jwt_claims(&tokens.id_token)["groups"], json!(["admins"]));
}

#[tokio::test]
async fn forged_tokens_expire_name_another_issuer_or_an_unknown_key() {
    let provider = OidcProvider::start().await;
    let kids = provider.kids().await;

    let expired = provider
        .forge(&Forge {
            exp_offset: -3600,
            ..Forge::new("alice")
        })
        .await;
    let header = jwt_header(&expired);
    assert_eq!(header["alg"], json!("RS256"));
    assert!(kids.iter().any(|k| *k == header["kid"]), "{header}");
    let claims = jwt_claims(&expired);
    assert!(claims["exp"].as_i64().unwrap() < now(), "{claims}");
    assert!(claims["iat"].as_i64().unwrap() < claims["exp"].as_i64().unwrap());
    assert_eq!(claims["iss"], json!(provider.issuer()));
    assert_eq!(claims["aud"], json!("mesh"));
    assert_eq!(claims["groups"], json!(["reviewers"]));

    let elsewhere = provider
        .forge(&Forge {
            iss: Some("http://127.0.0.1:1".into()),
            alg: "ES256".into(),
            groups: Some(vec!["admins".into(), "dba".into()]),
            ..Forge::new("victor")
        })
        .await;
    let claims = jwt_claims(&elsewhere);
    assert_eq!(claims["iss"], json!("http://127.0.0.1:1"));
    assert_eq!(claims["groups"], json!(["admins", "dba"]));
    assert!(claims["exp"].as_i64().unwrap() > now());
    assert_eq!(jwt_header(&elsewhere)["alg"], json!("ES256"));

    let unknown = provider
        .forge(&Forge {
            unknown_key: true,
            alg: "EdDSA".into(),
            ..Forge::new("alice")
        })
        .await;
    let header = jwt_header(&unknown);
    assert_eq!(header["alg"], json!("EdDSA"));
    assert!(!kids.iter().any(|k| *k == header["kid"]), "{header}");
}

#[tokio::test]
async fn the_device_flow_gives_a_user_code_and_tokens_once_approved() {
    let provider = OidcProvider::start().await;
    let discovery = provider.discovery().await;
    let endpoint = discovery["device_authorization_endpoint"].as_str().unwrap();
    let path = endpoint.strip_prefix(provider.issuer()).unwrap();
    let (status, device) = provider
        .post_form(path, &[("client_id", "mesh"), ("scope", SCOPES)])
        .await;
    assert_eq!(status, 200, "{device}");
    let user_code = device["user_code"].as_str().unwrap();
    let device_code = device["device_code"].as_str().unwrap();
    assert_eq!(device["verification_uri"], json!(provider.url("/device")));
    assert!(device["verification_uri_complete"]
        .as_str()
        .unwrap()
        .contains("user_code="));

    let poll = [
        ("client_id", "mesh"),
        ("grant_type", DEVICE_GRANT),
        ("device_code", device_code),
    ];
    let (status, pending) = provider.post_form("/token", &poll).await;
    assert_eq!(status, 400);
    assert_eq!(pending["error"], json!("authorization_pending"));

    provider.approve_device(user_code, "dan").await;
    let (status, tokens) = provider.post_form("/token", &poll).await;
    assert_eq!(status, 200, "{tokens}");
    let claims = jwt_claims(tokens["id_token"].as_str().unwrap());
    assert_eq!(claims["aud"], json!("mesh"));
    assert_eq!(claims["sub"], json!("dan"));
    assert_eq!(claims["groups"], json!(["dba"]));
}

/// The provider's userinfo for `access_token`.
async fn userinfo(provider: &OidcProvider, access_token: &str) -> serde_json::Value {
    let discovery = provider.discovery().await;
    let endpoint = discovery["userinfo_endpoint"].as_str().unwrap();
    let response = mesh_tests::webdriver::http_client(reqwest::Client::builder())
        .get(endpoint)
        .bearer_auth(access_token)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    response.json().await.unwrap()
}
