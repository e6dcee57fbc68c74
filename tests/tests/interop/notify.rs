//! Notifications out (`mesh-notify`) against real receivers on loopback: an
//! HTTP server that checks each webhook's signature with HMAC-SHA256 of its
//! own making, as a GitHub receiver does, and answers as told (503 and 429
//! before a 200 to prove the retries, a 400 that must not be tried again);
//! Slack's Block Kit shape; mail through a real SMTP server (aiosmtpd,
//! `tests/notify/smtp_server.py`) to the owners' addresses; an escalation
//! after a real second, for the request still waiting and not for the one
//! settled.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use mesh_notify::{Config, Event, Notice, Notifier};
use mesh_tests::{
    notify::{hmac_sha256_hex, Hit, MailServer, Receiver, SECRET},
    within,
};

fn notice(id: &str, kind: &str, paths: &[&str], owners: &[&str]) -> Notice {
    Notice {
        event: Event::Waiting,
        request_id: id.into(),
        kind: kind.into(),
        member: "alice".into(),
        title: format!("Add an index to orders ({id})"),
        paths: paths.iter().map(|p| p.to_string()).collect(),
        waits_for: owners.iter().map(|o| format!("{o}: 0 of 1")).collect(),
        owners: owners.iter().map(|o| o.to_string()).collect(),
        url: format!("http://127.0.0.1:8080/console/requests/{id}"),
        at_unix_ms: 1_700_000_000_000,
    }
}

fn webhook_config(url: &str, route: &str) -> Config {
    let text = format!(
        "[[sink]]\nname = \"hooks\"\nkind = \"webhook\"\nurl = \"{url}\"\n\
         secret_env = \"NOTIFY_TEST_SECRET\"\n\n[[route]]\nsinks = [\"hooks\"]\n{route}\n"
    );
    Config::parse_with_env(&text, &|name| {
        (name == "NOTIFY_TEST_SECRET").then(|| SECRET.to_owned())
    })
    .unwrap()
}

#[test]
fn the_receivers_hmac_is_githubs() {
    // The example of GitHub's "Validating webhook deliveries".
    assert_eq!(
        hmac_sha256_hex(SECRET.as_bytes(), b"Hello, World!"),
        "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    );
}

#[tokio::test]
async fn webhooks_are_signed_as_github_signs_and_go_where_the_route_says() {
    let mut receiver = Receiver::start(&[]).await;
    let route = "kinds = [\"plan\"]\npaths = [\"db/**\"]\nowners = [\"@dba\"]";
    let notifier = Notifier::start(webhook_config(&receiver.url, route));
    notifier.waiting(notice("r1", "plan", &["db/schema.sql"], &["@dba", "carol"]));
    notifier.waiting(notice("r2", "result", &["db/schema.sql"], &["@dba"]));
    notifier.waiting(notice("r3", "plan", &["src/db.rs"], &["@dba"]));
    notifier.waiting(notice("r4", "plan", &["db/schema.sql"], &["carol"]));
    notifier.waiting(notice(
        "r5",
        "plan",
        &["README.md", "db/m/1.sql"],
        &["@dba"],
    ));
    within("the deliveries", notifier.flush()).await;

    let mut deliveries = Vec::new();
    for expected in ["r1", "r5"] {
        let hit = receiver.next().await;
        assert!(hit.signed(), "a bad signature: {hit:?}");
        assert_eq!(hit.header("content-type"), "application/json");
        assert_eq!(hit.header("x-mesh-event"), "waiting");
        let delivery = hit.header("x-mesh-delivery").to_owned();
        assert_eq!(delivery.len(), 36, "a UUID: {delivery}");
        let body = hit.json();
        assert_eq!(body["event"], "waiting");
        assert_eq!(body["request_id"], expected);
        assert_eq!(body["kind"], "plan");
        assert_eq!(body["member"], "alice");
        assert_eq!(body["owners"][0], "@dba");
        assert_eq!(
            body["url"],
            format!("http://127.0.0.1:8080/console/requests/{expected}")
        );
        let back: Notice = serde_json::from_value(body).unwrap();
        assert_eq!(back.request_id, expected);
        deliveries.push(delivery);
    }
    assert_ne!(deliveries[0], deliveries[1]);
    assert!(receiver.none_left(), "r2, r3 and r4 match no route");
    let stats = notifier.stats().sinks["hooks"];
    assert_eq!((stats.sent, stats.failed, stats.retried), (2, 0, 0));
}

#[tokio::test]
async fn a_503_and_a_429_are_tried_again_after_a_backoff_and_a_400_is_not() {
    let mut receiver = Receiver::start(&[
        (429, Some("2")),
        (503, None),
        (200, None),
        (400, None),
        (200, None),
    ])
    .await;
    let notifier = Notifier::start(webhook_config(&receiver.url, ""));
    notifier.waiting(notice("r1", "plan", &[], &[]));
    notifier.waiting(notice("r2", "plan", &[], &[]));
    notifier.waiting(notice("r3", "plan", &[], &[]));
    within("the deliveries", notifier.flush()).await;

    let tries: Vec<Hit> = vec![
        receiver.next().await,
        receiver.next().await,
        receiver.next().await,
    ];
    let answered: Vec<u16> = tries.iter().map(|h| h.answered).collect();
    assert_eq!(answered, [429, 503, 200]);
    for hit in &tries {
        assert!(hit.signed());
        assert_eq!(hit.json()["request_id"], "r1");
        // One delivery, however many attempts.
        assert_eq!(
            hit.header("x-mesh-delivery"),
            tries[0].header("x-mesh-delivery")
        );
    }
    // Retry-After: 2 over the first backoff (0.5 s); then 1 s.
    assert!(tries[1].at - tries[0].at >= Duration::from_secs(2));
    assert!(tries[2].at - tries[1].at >= Duration::from_secs(1));

    let refused = receiver.next().await;
    assert_eq!(
        (refused.answered, &refused.json()["request_id"]),
        (400, &"r2".into())
    );
    let last = receiver.next().await;
    assert_eq!(
        (last.answered, &last.json()["request_id"]),
        (200, &"r3".into())
    );
    assert!(receiver.none_left(), "the 400 was tried again");
    let stats = notifier.stats().sinks["hooks"];
    assert_eq!((stats.sent, stats.failed, stats.retried), (2, 1, 2));
}

#[tokio::test]
async fn slack_gets_block_kit_with_a_link_to_the_console() {
    let mut receiver = Receiver::start(&[]).await;
    let text = format!(
        "[[sink]]\nname = \"slack\"\nkind = \"slack\"\nurl = \"{}\"\n[[route]]\nsinks = [\"slack\"]\n",
        receiver.url
    );
    let notifier = Notifier::start(Config::parse_with_env(&text, &|_| None).unwrap());
    let mut sent = notice("r1", "permission", &["db/a.sql", "db/b.sql"], &["@dba"]);
    sent.title = "Run <migrations> & seed".into();
    notifier.waiting(sent);
    let hit = receiver.next().await;
    assert!(hit.headers.get("x-mesh-signature-256").is_none());
    let body = hit.json();
    assert_eq!(body["text"], "alice's permission waits for @dba");
    let blocks = body["blocks"].as_array().expect("a blocks array");
    let of_type = |t: &str| {
        blocks
            .iter()
            .find(|b| b["type"] == t)
            .unwrap_or_else(|| panic!("no {t} block in {body}"))
    };
    assert_eq!(of_type("header")["text"]["type"], "plain_text");
    assert_eq!(of_type("header")["text"]["text"], "Run <migrations> & seed");
    let fields: Vec<&str> = of_type("section")["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "*Member*\nalice",
            "*Kind*\npermission",
            "*Waits for*\n@dba: 0 of 1",
            "*Paths*\ndb/a.sql\ndb/b.sql"
        ]
    );
    let button = &of_type("actions")["elements"][0];
    assert_eq!(button["type"], "button");
    assert_eq!(button["text"]["text"], "Review in the console");
    assert_eq!(button["url"], "http://127.0.0.1:8080/console/requests/r1");
    let context = of_type("context")["elements"][0]["text"].as_str().unwrap();
    assert!(context.contains("sign in to decide"), "{context}");
}

#[tokio::test]
async fn mail_reaches_the_owners_through_a_real_smtp_server_and_a_451_is_tried_again() {
    let mut server = MailServer::start(1).await;
    let text = format!(
        "[[sink]]\nname = \"mail\"\nkind = \"smtp\"\nserver = \"127.0.0.1:{}\"\n\
         from = \"mesh <mesh@example.com>\"\ntls = \"none\"\n\
         [people]\n\"@dba\" = [\"dba@example.com\", \"Dana <dana@example.com>\"]\n\
         carol = \"carol@example.com\"\n\
         [[route]]\nsinks = [\"mail\"]\n",
        server.port
    );
    let notifier = Notifier::start(Config::parse_with_env(&text, &|_| None).unwrap());
    notifier.waiting(notice("r1", "plan", &["db/schema.sql"], &["@dba"]));

    let deferred = server.next().await;
    assert_eq!(deferred["deferred"], true, "{deferred}");
    let mail = server.next().await;
    assert_eq!(mail["mail_from"], "mesh@example.com");
    assert_eq!(
        mail["rcpt_tos"],
        serde_json::json!(["dba@example.com", "dana@example.com"])
    );
    assert_eq!(mail["subject"], "[mesh] alice's plan waits for @dba");
    let body = mail["body"].as_str().unwrap();
    for needed in [
        "http://127.0.0.1:8080/console/requests/r1",
        "Add an index to orders (r1)",
        "@dba: 0 of 1",
        "db/schema.sql",
        "sign in to decide",
    ] {
        assert!(
            body.contains(needed),
            "the mail should say {needed:?}:\n{body}"
        );
    }
    within("the mail", notifier.flush()).await;
    let stats = notifier.stats().sinks["mail"];
    assert_eq!((stats.sent, stats.failed, stats.retried), (1, 0, 1));
}

#[tokio::test]
async fn an_escalation_fires_after_a_real_second_for_a_request_still_waiting_only() {
    let mut receiver = Receiver::start(&[]).await;
    let notifier = Notifier::start(webhook_config(&receiver.url, "after = \"1s\""));
    let begun = Instant::now();
    notifier.waiting(notice("settled", "plan", &[], &["@dba"]));
    // Once flushed, the worker has seen it: its timer is armed.
    within("the worker", notifier.flush()).await;
    notifier.settled("settled");
    notifier.waiting(notice("waiting", "plan", &[], &["@dba"]));

    // Had the settled request's timer fired, it would have come first: it
    // was armed first, and the sink delivers in order.
    let hit = receiver.next().await;
    assert!(begun.elapsed() >= Duration::from_secs(1));
    assert!(hit.signed());
    assert_eq!(hit.header("x-mesh-event"), "escalated");
    let body = hit.json();
    assert_eq!(
        (&body["event"], &body["after"], &body["request_id"]),
        (&"escalated".into(), &"1s".into(), &"waiting".into())
    );
    within("the deliveries", notifier.flush()).await;
    assert!(receiver.none_left());
    assert_eq!(notifier.stats().escalated, 1);
}
