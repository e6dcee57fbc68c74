//! Signing in at the tests' OpenID provider: in Chromium, through the
//! provider's own login page, to the console's queue with the person's name
//! shown, where she decides and the audit names her; a console POST with
//! her session's cookie but not its CSRF token is refused, and the login
//! form posted from another origin too; `lead login --oidc` gets a token by
//! the device flow that the operator commands then use.
//!
//! The console is opened at `localhost` and the provider is at
//! `127.0.0.1`: two sites, so the provider's redirect back is a cross-site
//! navigation, as it is in production, and the SameSite=Strict session
//! cookie is sent only because the callback lands on a page of the
//! console's own first.

use crate::common::{audit_of, lead_of};
use std::{os::unix::fs::PermissionsExt, process::Stdio};

use mesh_tests::{
    bin,
    oidc::{OidcClient, OidcProvider, OidcSetup, LOGIN_INPUT, PASSWORD_INPUT, SUBMIT_BUTTON},
    webdriver::{http_client, shots, Browser},
    within, Events, Lead,
};
use serde_json::json;
use shared::pb;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::Command,
};

/// The status of request `request_id`.
async fn status_of(lead: &Lead, request_id: &str) -> i32 {
    let mut operator = lead.operator().await;
    within(
        "GetRequest",
        operator.get_request(pb::GetRequestRequest {
            request_id: request_id.into(),
        }),
    )
    .await
    .expect("GetRequest")
    .into_inner()
    .status
}

#[tokio::test]
async fn a_person_signs_in_at_the_provider_in_chromium_decides_and_csrf_is_refused() {
    // The client `mesh` may come back to the console at localhost too.
    let mut setup = OidcSetup::default();
    setup.clients[0].redirect_uris = vec![
        "http://127.0.0.1/oidc/callback".into(),
        "http://localhost/oidc/callback".into(),
    ];
    assert_eq!(setup.clients[0].id, OidcClient::new("mesh").id);
    let provider = OidcProvider::start_with(setup).await;
    // The console is at http://localhost:PORT/ (the host of --advertise).
    let lead = lead_of(&provider, &["--advertise", "http://localhost"]).await;
    let console = lead.console.clone().expect("the console is on");
    assert!(console.starts_with("http://localhost:"), "{console}");
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut bob = lead.join("bob").await;
    let first = bob
        .submit(
            &uuid::Uuid::new_v4().to_string(),
            "Index the orders",
            &["db/orders.sql"],
        )
        .await
        .expect("SubmitPlan");
    let second = bob
        .submit(
            &uuid::Uuid::new_v4().to_string(),
            "Vacuum the logs",
            &["db/logs.sql"],
        )
        .await
        .expect("SubmitPlan");

    // The login page offers the provider; its own page signs alice in.
    let browser = Browser::start(1280, 800).await;
    browser.open(&console).await;
    let provider_host = provider.issuer().trim_start_matches("http://").to_owned();
    let sign_in = browser
        .wait_for("#oidc-login", &format!("Sign in with {provider_host}"))
        .await;
    browser.click(&sign_in).await;
    let login = browser.wait_for(LOGIN_INPUT, "").await;
    browser.type_into(&login, "alice").await;
    let password = browser.wait_for(PASSWORD_INPUT, "").await;
    browser.type_into(&password, "any password").await;
    browser
        .click(&browser.wait_for(SUBMIT_BUTTON, "Sign-in").await)
        .await;
    // A native client is asked to confirm, every time.
    browser
        .click(&browser.wait_for(SUBMIT_BUTTON, "Continue").await)
        .await;

    // Back on the console's queue, as alice.
    browser
        .wait_for("#me", "alice@example.com (reviewer)")
        .await;
    browser.wait_for("#live", "live").await;
    let card = browser
        .wait_for("[data-testid=plan]", "Index the orders")
        .await;
    browser.scroll_to("header").await;
    browser.screenshot(&shots().join("signed-in.png")).await;
    let at = browser.execute("return location.href;", vec![]).await;
    assert_eq!(at.as_str(), Some(console.as_str()), "the queue, at /");
    // What the provider's pages said is theirs; from here on the console's.
    let _ = browser.script_errors().await;

    // She approves from the page (its POST carries the CSRF token); the
    // audit names her.
    browser
        .click(&browser.within(&card, "[data-testid=approve]").await)
        .await;
    events
        .request("the first plan approved", |r| {
            r.request_id == first && r.status == pb::RequestStatus::Approved as i32
        })
        .await;
    let entry = audit_of(&lead, &first).await;
    assert_eq!(entry["person"]["name"], "alice@example.com", "{entry}");
    assert_eq!(entry["person"]["issuer"], provider.issuer(), "{entry}");
    assert_eq!(entry["person"]["role"], "reviewer", "{entry}");

    // Her session's cookie without the CSRF token is refused, naming the
    // header; with a wrong one too; with the page's own, it decides.
    let cookie = browser
        .cookie("mesh_console")
        .await
        .expect("the session cookie");
    let csrf = browser
        .execute(
            "return document.querySelector('meta[name=\"csrf-token\"]').content;",
            vec![],
        )
        .await
        .as_str()
        .expect("the page's CSRF token")
        .to_owned();
    assert_eq!(csrf.len(), 64, "{csrf}");
    let http = http_client(reqwest::Client::builder());
    let api = console.replacen("localhost", "127.0.0.1", 1);
    let approve = |token: Option<&str>| {
        let mut request = http
            .post(format!("{api}api/approve"))
            .header("cookie", format!("mesh_console={cookie}"))
            .json(&json!({"request_id": second}));
        if let Some(token) = token {
            request = request.header("x-csrf-token", token);
        }
        within("POST /api/approve", request.send())
    };
    let refused = approve(None).await.expect("the console answers");
    assert_eq!(refused.status(), 403);
    let said = refused.text().await.unwrap_or_default();
    assert!(said.contains("X-CSRF-Token"), "{said}");
    let wrong = approve(Some("0123456789abcdef")).await.expect("answers");
    assert_eq!(wrong.status(), 403);
    assert_eq!(
        status_of(&lead, &second).await,
        pb::RequestStatus::Pending as i32,
        "nothing was decided without the token"
    );
    let taken = approve(Some(&csrf)).await.expect("answers");
    let status = taken.status();
    assert_eq!(status, 200, "{}", taken.text().await.unwrap_or_default());
    assert_eq!(
        audit_of(&lead, &second).await["person"]["name"],
        "alice@example.com"
    );

    // The token login form, posted from another origin, is refused before
    // the token is read; from the console's own origin it is taken.
    let no_redirects =
        http_client(reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()));
    let form = |origin: String| {
        no_redirects
            .post(format!("{api}login"))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("origin", origin)
            .body(format!("token={}", lead.operator_token))
            .send()
    };
    let forged = within("POST /login", form("http://evil.example".into()))
        .await
        .expect("answers");
    assert_eq!(forged.status(), 403);
    assert!(forged.headers().get("set-cookie").is_none());
    let own = within("POST /login", form(api.trim_end_matches('/').to_owned()))
        .await
        .expect("answers");
    assert_eq!(own.status(), 303);

    // Signing out: the session ends, and the page is the login form again.
    browser
        .click(&browser.wait_for("#sign-out", "Sign out").await)
        .await;
    browser.wait_for("#oidc-login", "Sign in with").await;
    let after = within(
        "GET /api/state",
        http.get(format!("{api}api/state"))
            .header("cookie", format!("mesh_console={cookie}"))
            .send(),
    )
    .await
    .expect("answers");
    assert_eq!(after.status(), 401);
    let errors = browser.script_errors().await;
    assert!(errors.is_empty(), "{errors:?}");
    browser.quit().await;
}

#[tokio::test]
async fn lead_login_gets_a_token_by_the_device_flow_that_the_cli_then_uses() {
    let provider = OidcProvider::start().await;
    let lead = lead_of(&provider, &[]).await;
    let mut bob = lead.join("bob").await;
    let plan = bob
        .submit(
            &uuid::Uuid::new_v4().to_string(),
            "Add the index",
            &["db/index.sql"],
        )
        .await
        .expect("SubmitPlan");
    let home = tempfile::tempdir().expect("tempdir");
    // No state dir of the lead's, so no operator.token: only the stored
    // token can authenticate.
    let nowhere = tempfile::tempdir().expect("tempdir");
    let cli = |args: &[&str]| {
        let mut command = Command::new(bin("lead"));
        command
            .args(args)
            .env("XDG_CONFIG_HOME", home.path())
            .env_remove("MESH_OPERATOR_TOKEN")
            .env_remove("MESH_TOKEN_FILE")
            .env_remove("MESH_STATE_DIR")
            .current_dir(nowhere.path())
            .kill_on_drop(true);
        command
    };

    let mut login = cli(&[
        "login",
        "--oidc",
        "--issuer",
        provider.issuer(),
        "--client-id",
        "mesh",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("start lead login");
    let mut lines = BufReader::new(login.stdout.take().expect("stdout")).lines();
    let mut said = String::new();
    let code = within("lead login's user code", async {
        loop {
            let line = lines.next_line().await.expect("read").expect("a line");
            said.push_str(&line);
            said.push('\n');
            if let Some(code) = line.split("enter the code ").nth(1) {
                return code.trim().to_owned();
            }
        }
    })
    .await;
    assert!(said.contains(&provider.url("/device")), "{said}");
    assert!(said.contains("user_code="), "{said}");
    provider.approve_device(&code, "dan").await;
    let rest = within("lead login to say who signed in", async {
        let mut rest = String::new();
        while let Some(line) = lines.next_line().await.expect("read") {
            rest.push_str(&line);
            rest.push('\n');
        }
        rest
    })
    .await;
    let status = within("lead login to end", login.wait())
        .await
        .expect("wait");
    assert!(status.success(), "{said}{rest}");
    assert!(rest.contains("Signed in as dan@example.com"), "{rest}");
    assert!(rest.contains("the token expires at "), "{rest}");
    let token = home.path().join("mesh").join("token");
    let mode = std::fs::metadata(&token)
        .expect("the token file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "only its owner reads it");

    // The operator commands use it: dan (dba, a reviewer) approves, and the
    // audit names him.
    let url = lead.url.clone();
    let team = within("lead team", cli(&["team", "--lead", &url]).output())
        .await
        .expect("lead team");
    assert!(
        team.status.success(),
        "{}",
        String::from_utf8_lossy(&team.stderr)
    );
    assert!(String::from_utf8_lossy(&team.stdout).contains("bob"));
    let approve = within(
        "lead approve",
        cli(&["approve", &plan, "--lead", &url]).output(),
    )
    .await
    .expect("lead approve");
    assert!(
        approve.status.success(),
        "{}",
        String::from_utf8_lossy(&approve.stderr)
    );
    let entry = audit_of(&lead, &plan).await;
    assert_eq!(entry["person"]["name"], "dan@example.com", "{entry}");

    // Without it, the command says how to get one.
    std::fs::remove_file(&token).expect("remove the token");
    let none = within("lead team", cli(&["team", "--lead", &url]).output())
        .await
        .expect("lead team");
    assert!(!none.status.success());
    let said = String::from_utf8_lossy(&none.stderr);
    assert!(said.contains("lead login --oidc"), "{said}");
}
