//! Notifications out of a real lead (`--notify`): a plan under `db/**`
//! waits for the DBAs, and a webhook receiver gets the notice signed as
//! GitHub signs its hooks, with who it waits for and a link to its console
//! page; a real SMTP server (aiosmtpd) gets the mail to the DBAs' address;
//! after the route's `after`, the escalation route hears of it.

use mesh_tests::{
    notify::{MailServer, Receiver},
    oidc::OidcProvider,
    Lead,
};

#[tokio::test]
async fn the_owners_hear_of_a_plan_by_webhook_and_mail_and_it_escalates_after_a_while() {
    let provider = OidcProvider::start().await;
    let mut hooks = Receiver::start(&[]).await;
    let mut escalations = Receiver::start(&[]).await;
    let mut mail = MailServer::start(0).await;
    let dir = tempfile::tempdir().expect("a tempdir");
    let owners = dir.path().join("OWNERS");
    std::fs::write(&owners, "db/** @dba\n").expect("the owners file");
    let notify = dir.path().join("notify.toml");
    std::fs::write(
        &notify,
        format!(
            r#"
[[sink]]
name = "hooks"
kind = "webhook"
url = "{hooks}"
secret = "{secret}"

[[sink]]
name = "later"
kind = "webhook"
url = "{later}"
secret = "{secret}"

[[sink]]
name = "mail"
kind = "smtp"
server = "127.0.0.1:{port}"
from = "mesh <mesh@example.com>"
tls = "none"

[people]
"@dba" = "dba@example.com"

[[route]]
owners = ["@dba"]
sinks = ["hooks", "mail"]

[[route]]
kinds = ["plan"]
paths = ["db/**"]
sinks = ["later"]
after = "2s"
"#,
            hooks = hooks.url,
            later = escalations.url,
            secret = mesh_tests::notify::SECRET,
            port = mail.port,
        ),
    )
    .expect("the notify file");
    let lead = Lead::start(&[
        "--oidc-issuer",
        provider.issuer(),
        "--oidc-audience",
        "mesh",
        "--oidc-role",
        "dba=reviewer",
        "--owners",
        &owners.display().to_string(),
        "--notify",
        &notify.display().to_string(),
    ])
    .await;
    let console = lead.console.clone().expect("a console");
    let mut bob = lead.join("bob").await;
    let id = "0b0e5a11-0000-4000-8000-0000000000aa";
    bob.submit(id, "an index on orders", &["db/schema.sql"])
        .await
        .expect("SubmitPlan");

    let hit = hooks.next().await;
    assert!(hit.signed(), "the signature: {:?}", hit.headers);
    assert_eq!(hit.header("x-mesh-event"), "waiting");
    let notice = hit.json();
    assert_eq!(notice["request_id"], id, "{notice}");
    assert_eq!(notice["kind"], "plan", "{notice}");
    assert_eq!(notice["member"], "bob", "{notice}");
    assert_eq!(
        notice["waits_for"],
        serde_json::json!(["@dba: 0 of 1"]),
        "{notice}"
    );
    assert_eq!(
        notice["url"],
        format!("{console}#/requests/{id}"),
        "{notice}"
    );
    assert!(
        notice["title"]
            .as_str()
            .is_some_and(|t| t.contains("an index on orders")),
        "{notice}"
    );

    let message = mail.next().await;
    assert_eq!(
        message["rcpt_tos"],
        serde_json::json!(["dba@example.com"]),
        "{message}"
    );
    let body = message["body"].as_str().unwrap_or_default();
    assert!(
        body.contains(&format!("{console}#/requests/{id}")),
        "{body}"
    );

    // Still waiting after the route's two seconds: the escalation.
    let escalated = escalations.next().await;
    assert!(escalated.signed());
    assert_eq!(escalated.header("x-mesh-event"), "escalated");
    assert_eq!(escalated.json()["request_id"], id);
}
