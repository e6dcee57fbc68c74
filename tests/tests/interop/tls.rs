//! TLS and mutual TLS with certificates made at test time (rcgen): the
//! teammate, the CLI, `lead spawn` and the console over `https://`; plain
//! text against a TLS lead and untrusted or missing certificates fail in the
//! handshake; a lead refuses to listen beyond loopback in plain text.

#![allow(clippy::unwrap_used)]

use mesh_tests::{bin, is, pki::Pki, within, Events, Lead};
use shared::{
    pb::{self, RequestStatus},
    transport::ClientTls,
};
use tokio::process::Command;

const PLAN_THEN_WORK: &str = r#"
[[plans]]
summary = "Add the auth module"
files = ["src/auth.rs"]
tests = ["tests/auth.rs"]

[[actions]]
phase = "work"
tool = "write_file"
path = "src/auth.rs"
content = "pub fn login() {}\n"
"#;

/// A TLS lead (`--tls-cert`, `--tls-key`, `extra`) whose harness clients
/// trust the test CA and show `identity`'s certificate.
async fn tls_lead(pki: &Pki, identity: Option<&str>, extra: &[&str]) -> Lead {
    let mut flags = pki.server_args();
    flags.extend(extra.iter().map(|f| f.to_string()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut lead = Lead::start(&flags).await;
    lead.tls = pki.client(identity);
    lead
}

/// Calls `ListTeam` over a channel set up by `tls` for `url`; the error's
/// text if the connection or the call fails.
async fn list_team(url: &str, tls: &ClientTls, token: &str) -> Result<usize, String> {
    let endpoint = tls.endpoint(url).map_err(|e| e.to_string())?;
    let channel = within("a connection attempt", endpoint.connect())
        .await
        .map_err(|e| format!("{e:?}"))?;
    let mut client = pb::operator_client::OperatorClient::with_interceptor(
        channel,
        shared::auth::BearerToken::new(token).unwrap(),
    );
    within("ListTeam", client.list_team(pb::ListTeamRequest::default()))
        .await
        .map(|r| r.into_inner().members.len())
        .map_err(|s| format!("{s:?}"))
}

#[tokio::test]
async fn a_teammate_and_the_cli_work_over_tls() {
    let pki = Pki::new();
    let lead = tls_lead(&pki, None, &[]).await;
    assert!(lead.url.starts_with("https://"), "{}", lead.url);
    assert!(
        std::fs::read_to_string(lead.state_dir().join("lead.url"))
            .unwrap()
            .starts_with("https://"),
        "the CLI finds the lead's https:// URL in the state dir"
    );
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut alice = lead.teammate("alice", PLAN_THEN_WORK);
    let plan = events
        .request("alice's plan, over TLS", |r| {
            r.sender == "alice" && is(r.status, RequestStatus::Pending)
        })
        .await;

    // The CLI reads lead.url and trusts --ca (the harness passes it).
    let (ok, out, err) = lead.cli(&["approve", &plan.request_id]).await;
    assert!(ok, "{out}{err}");
    events
        .tool_call("alice's write", |t| t.member == "alice" && t.allowed)
        .await;
    assert_eq!(
        std::fs::read_to_string(alice.workspace.join("src/auth.rs")).unwrap(),
        "pub fn login() {}\n"
    );
    let (ok, out, err) = lead.cli(&["team"]).await;
    assert!(ok && out.contains("alice"), "{out}{err}");

    // Without --ca the CLI trusts the system's roots, which did not sign
    // this certificate (or there are none): it fails, saying why.
    let mut untrusting = std::process::Command::new(bin("lead"));
    untrusting
        .args(["team", "--state-dir"])
        .arg(lead.state_dir())
        .env("MESH_OPERATOR_TOKEN", &lead.operator_token)
        .env_remove("MESH_TLS_CA");
    let output = untrusting.output().unwrap();
    assert!(!output.status.success());
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("cannot reach the lead") || err.contains("TLS"),
        "{err}"
    );

    let (ok, out, err) = lead.cli(&["shutdown", "alice", "--reason", "done"]).await;
    assert!(ok, "{out}{err}");
    assert!(within("alice to exit", alice.exit()).await.success());
}

#[tokio::test]
async fn plain_text_against_a_tls_lead_fails_cleanly() {
    let pki = Pki::new();
    let lead = tls_lead(&pki, None, &[]).await;
    let plain = format!("http://{}", lead.addr);
    let error = list_team(&plain, &ClientTls::default(), &lead.operator_token)
        .await
        .expect_err("plain text must not reach a TLS lead");
    assert!(!error.is_empty());
    // A client that does not trust the certificate is refused too.
    let stranger_trust = ClientTls {
        ca: Some(pki.cert("other-ca")),
        ..ClientTls::default()
    };
    let error = list_team(&lead.url, &stranger_trust, &lead.operator_token)
        .await
        .expect_err("an untrusted certificate must be refused");
    assert!(error.to_lowercase().contains("certificate"), "{error}");
    // The lead kept serving through both.
    assert_eq!(
        list_team(&lead.url, &lead.tls, &lead.operator_token).await,
        Ok(0)
    );
    // And a plain-text teammate gives up on the lead, not on its script,
    // saying what to do, and does not hang.
    let script = lead.script("plain", PLAN_THEN_WORK);
    let mut teammate = Command::new(bin("teammate"));
    teammate
        .args(["--lead", &plain, "--name", "plain", "--script"])
        .arg(&script)
        .args(["--lead-gone-limit", "1", "--workspace"])
        .arg(lead.workspace("plain"))
        .env("MESH_JOIN_TOKEN", &lead.join_token)
        .kill_on_drop(true);
    let output = within("the plain-text teammate to give up", teammate.output())
        .await
        .unwrap();
    assert!(!output.status.success());
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("dial https://"), "{err}");
}

#[tokio::test]
async fn with_a_client_ca_only_its_certificates_get_in() {
    let pki = Pki::new();
    let ca = pki.cert("ca").display().to_string();
    // The lead's own teammates (`lead spawn`) show the client certificate.
    let client_cert = pki.cert("client").display().to_string();
    let client_key = pki.key("client").display().to_string();
    let lead = tls_lead(
        &pki,
        Some("client"),
        &[
            "--client-ca",
            &ca,
            "--ca",
            &ca,
            "--cert",
            &client_cert,
            "--key",
            &client_key,
        ],
    )
    .await;

    let error = list_team(&lead.url, &pki.client(None), &lead.operator_token)
        .await
        .expect_err("no client certificate");
    assert!(!error.is_empty());
    let error = list_team(
        &lead.url,
        &pki.client(Some("stranger")),
        &lead.operator_token,
    )
    .await
    .expect_err("a certificate from another CA");
    assert!(!error.is_empty());
    assert_eq!(
        list_team(&lead.url, &pki.client(Some("client")), &lead.operator_token).await,
        Ok(0)
    );

    // A teammate with the right certificate joins and works.
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut alice = lead.teammate("alice", PLAN_THEN_WORK);
    events
        .request("alice's plan, over mTLS", |r| {
            r.sender == "alice" && is(r.status, RequestStatus::Pending)
        })
        .await;

    // `lead spawn` over mTLS; the spawned teammate dials https:// with the
    // certificate the lead was given for its own teammates.
    let script = lead.script("bob", PLAN_THEN_WORK);
    let (ok, out, err) = lead
        .cli(&[
            "spawn",
            "bob",
            "--role",
            "coder",
            "--script",
            &script.display().to_string(),
        ])
        .await;
    assert!(ok, "{out}{err}");
    events
        .request("bob's plan, from a spawned teammate over mTLS", |r| {
            r.sender == "bob" && is(r.status, RequestStatus::Pending)
        })
        .await;
    let (ok, out, err) = lead.cli(&["shutdown", "alice"]).await;
    assert!(ok, "{out}{err}");
    assert!(within("alice to exit", alice.exit()).await.success());
}

#[tokio::test]
async fn lead_spawn_hands_its_ca_to_the_child() {
    // The lead's certificate was signed by a CA and `lead serve` was given
    // no --ca: its children trust only its certificate file. The operator's
    // `lead spawn --ca ca.pem` trusts the lead; its child is given that CA.
    let pki = Pki::new();
    let lead = tls_lead(&pki, None, &[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let script = lead.script("bob", PLAN_THEN_WORK);
    let (ok, out, err) = lead
        .cli(&[
            "spawn",
            "bob",
            "--role",
            "coder",
            "--script",
            &script.display().to_string(),
            "--wait",
            "10",
        ])
        .await;
    assert!(ok, "{out}{err}");
    assert!(out.starts_with("spawned bob (pid "), "{out}");
    events
        .request("bob's plan, from a child trusting the spawner's CA", |r| {
            r.sender == "bob" && is(r.status, RequestStatus::Pending)
        })
        .await;

    // What is not certificates is refused, naming the field.
    let mut request = pb::SpawnTeammateRequest {
        name: "carol".into(),
        role: "coder".into(),
        script_path: script.display().to_string(),
        ca_pem: "not a certificate".into(),
        ..Default::default()
    };
    let status = operator.spawn_teammate(request.clone()).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("ca_pem"), "{status:?}");
    request.ca_pem = "x".repeat(65 * 1024);
    let status = operator.spawn_teammate(request).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("ca_pem"), "{status:?}");
    let (ok, out, err) = lead.cli(&["shutdown", "bob"]).await;
    assert!(ok, "{out}{err}");
}

#[tokio::test]
async fn the_console_is_served_over_the_same_tls() {
    let pki = Pki::new();
    let lead = tls_lead(&pki, None, &[]).await;
    let console = lead.console.clone().unwrap();
    assert!(console.starts_with("https://"), "{console}");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = reqwest::Certificate::from_pem(&std::fs::read(pki.cert("ca")).unwrap()).unwrap();
    let client = reqwest::Client::builder()
        .add_root_certificate(ca)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let page = within("the login page", client.get(&console).send())
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("Operator token"));
    let login = within(
        "logging in",
        client
            .post(format!("{console}login"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("token={}", lead.operator_token))
            .send(),
    )
    .await
    .unwrap();
    let cookie = login
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(cookie.contains("Secure"), "{cookie}");
    // Plain HTTP to the console's port does not get the page.
    let plain = console.replacen("https://", "http://", 1);
    let answer = within("plain http to the console", reqwest::get(&plain)).await;
    assert!(
        answer.map(|r| r.status() != 200).unwrap_or(true),
        "plain HTTP must not be served"
    );
}

#[tokio::test]
async fn a_non_loopback_listen_without_tls_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for flags in [
        vec!["--listen", "0.0.0.0:0"],
        vec!["--listen", "127.0.0.1:0", "--http", "0.0.0.0:0"],
    ] {
        let output = std::process::Command::new(bin("lead"))
            .arg("serve")
            .args(&flags)
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .output()
            .unwrap();
        assert!(!output.status.success(), "{flags:?}");
        let err = String::from_utf8_lossy(&output.stderr);
        assert!(
            err.contains("refusing to listen beyond this host without TLS")
                && err.contains("--insecure"),
            "{flags:?}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(output.stdout.is_empty(), "nothing listened: {flags:?}");
    }
    // --insecure accepts it; TLS needs no --insecure.
    let insecure = Lead::start_in(
        tempfile::tempdir().unwrap(),
        "0.0.0.0:0",
        shared::auth::new_token(),
        shared::auth::new_token(),
        &["--insecure", "--http", "off"],
    )
    .await;
    assert!(insecure.addr.starts_with("0.0.0.0:"), "{}", insecure.addr);
    let pki = Pki::new();
    let mut flags = pki.server_args();
    flags.extend(["--http".to_owned(), "off".to_owned()]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let tls = Lead::start_in(
        tempfile::tempdir().unwrap(),
        "0.0.0.0:0",
        shared::auth::new_token(),
        shared::auth::new_token(),
        &flags,
    )
    .await;
    assert!(tls.url.starts_with("https://"), "{}", tls.url);
}
