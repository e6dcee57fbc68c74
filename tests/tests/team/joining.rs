//! A teammate that cannot join says why: every failed attempt to reach the
//! lead is a warning with its cause (certificate, refused, name);
//! `lead spawn` waits until the child has joined or says why it has not; the
//! event stream says when a spawned child exits before joining.

#![allow(clippy::unwrap_used)]

use std::process::Stdio;

use mesh_tests::{bin, pki::Pki, within, Events, Lead};
use shared::pb;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::Command,
};

/// Starts a teammate that dials `url` (trusting `ca`, if given) and returns
/// the first `n` warnings on its stderr that contain `needle`.
async fn warnings(
    lead: &Lead,
    url: &str,
    ca: Option<&std::path::Path>,
    needle: &str,
    n: usize,
) -> Vec<String> {
    let script = lead.script("bob", "");
    let mut command = Command::new(bin("teammate"));
    command
        .args([
            "--lead",
            url,
            "--name",
            "bob",
            "--role",
            "coder",
            "--workspace",
        ])
        .arg(lead.workspace("bob"))
        .arg("--script")
        .arg(script)
        .env("MESH_JOIN_TOKEN", &lead.join_token)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(ca) = ca {
        command.arg("--ca").arg(ca);
    }
    let mut child = command.spawn().expect("start teammate");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut found = Vec::new();
    within(
        &format!("{n} warnings with {needle:?} from a teammate dialling {url}"),
        async {
            while found.len() < n {
                let line = lines
                    .next_line()
                    .await
                    .expect("read")
                    .expect("a line before the teammate exits");
                if line.contains("WARN") && line.contains(needle) {
                    found.push(line);
                }
            }
        },
    )
    .await;
    found
}

#[tokio::test]
async fn every_failed_attempt_to_reach_the_lead_is_a_warning_with_its_cause() {
    let pki = Pki::new();
    let mut flags = pki.server_args();
    flags.extend(["--http".into(), "off".into()]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let lead = Lead::start(&flags).await;
    // A CA that did not sign the lead's certificate.
    let untrusted = warnings(
        &lead,
        &lead.url,
        Some(&pki.cert("other-ca")),
        "certificate",
        2,
    )
    .await;
    assert!(untrusted[0].contains(&lead.url), "{untrusted:?}");
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    warnings(&lead, &url, None, "refused", 2).await;
    // A name that does not resolve.
    warnings(&lead, "http://no-such-host.invalid:7447", None, "dns", 1).await;
}

#[tokio::test]
async fn lead_spawn_says_why_a_child_has_not_joined() {
    // Without `lead serve --ca` the lead's teammates trust its own
    // certificate file, which a CA signed: they cannot verify the lead. The
    // operator's CLI trusts the CA through the system's roots
    // (SSL_CERT_FILE), not `--ca`, so it has no CA to hand the child.
    let pki = Pki::new();
    let mut lead = Lead::start(
        &pki.server_args()
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    )
    .await;
    lead.tls = shared::transport::ClientTls::default();
    let script = lead.script("bob", "");
    let output = within(
        "lead spawn",
        lead.cli_command(&[
            "spawn",
            "bob",
            "--role",
            "coder",
            "--script",
            script.to_str().unwrap(),
            "--wait",
            "2",
        ])
        .env_remove("MESH_TLS_CA")
        .env("SSL_CERT_FILE", pki.cert("ca"))
        .output(),
    )
    .await
    .unwrap();
    let (ok, out, err) = (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    );
    assert!(!ok, "{out}{err}");
    assert!(
        err.contains("bob (pid ") && err.contains(") has not joined within 2s"),
        "{err}"
    );
    assert!(err.contains("certificate"), "its log says why: {err}");
    assert!(err.contains("bob.log"), "where its log is: {err}");
}

#[tokio::test]
async fn a_child_that_exits_before_joining_is_an_event_and_lead_spawn_says_so() {
    let lead = Lead::start(&["--http", "off"]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let broken = lead.script("carol", "[[plans]]\nsummary = 3\n");
    let (ok, out, err) = lead
        .cli(&[
            "spawn",
            "carol",
            "--role",
            "coder",
            "--script",
            broken.to_str().unwrap(),
        ])
        .await;
    assert!(!ok, "{out}{err}");
    assert!(
        err.contains(") exited before joining: exited with status 2"),
        "{err}"
    );
    assert!(err.contains("summary"), "its log says why: {err}");
    let exited = events
        .find("carol's exit", |kind| match kind {
            pb::event::Kind::ChildExited(c) if c.name == "carol" => Some(c.clone()),
            _ => None,
        })
        .await;
    assert!(!exited.joined, "{exited:?}");
    assert_eq!(exited.how, "exited with status 2");
    assert!(exited.log_tail.contains("summary"), "{exited:?}");

    // One that joins: `lead spawn` returns once it has, and its exit later
    // is an event too, after joining.
    let fine = lead.script("dave", "[shutdown]\napprove = true\n");
    let (ok, out, err) = lead
        .cli(&[
            "spawn",
            "dave",
            "--role",
            "coder",
            "--script",
            fine.to_str().unwrap(),
        ])
        .await;
    assert!(ok, "{out}{err}");
    assert!(out.starts_with("spawned dave (pid "), "{out}");
    let team = mesh_tests::team(&mut operator).await;
    assert!(
        team.iter().any(|m| m.name == "dave"),
        "joined before spawn returned: {team:?}"
    );
    let (ok, out, err) = lead.cli(&["shutdown", "dave"]).await;
    assert!(ok, "{out}{err}");
    let exited = events
        .find("dave's exit", |kind| match kind {
            pb::event::Kind::ChildExited(c) if c.name == "dave" => Some(c.clone()),
            _ => None,
        })
        .await;
    assert!(exited.joined, "{exited:?}");
}
