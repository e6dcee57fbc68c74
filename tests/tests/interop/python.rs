//! The Python example teammate (grpcio, stubs generated from proto/) against
//! a real lead: it joins, streams its inbox, has a plan rejected by policy,
//! revises it, is approved, and agrees to shut down.

#![allow(clippy::unwrap_used)]

use std::{path::Path, process::Stdio};

use mesh_tests::{is, pki::Pki, python, within, Events, Lead};
use shared::pb::{self, envelope::Body, RequestStatus};
use tokio::process::Command;

#[tokio::test]
async fn the_python_teammate_plans_revises_and_shuts_down() {
    story(None).await;
}

/// The same story with the lead on TLS: the example dials `https://` and
/// trusts the test's CA (`grpc.ssl_channel_credentials`).
#[tokio::test]
async fn the_python_teammate_works_over_tls() {
    story(Some(Pki::new())).await;
}

async fn story(pki: Option<Pki>) {
    let python = python();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/python");
    let scratch = tempfile::tempdir().unwrap();
    let stubs = scratch.path().join("gen");
    let generated = std::process::Command::new(&python)
        .arg(example.join("gen_stubs.py"))
        .arg(&stubs)
        .status()
        .unwrap();
    assert!(generated.success(), "generating the stubs failed");
    let policy = scratch.path().join("policy.toml");
    std::fs::write(&policy, "require_tests = true\n").unwrap();

    let mut flags = vec![
        "--approval".to_owned(),
        format!("policy:{}", policy.display()),
    ];
    if let Some(pki) = &pki {
        flags.extend(pki.server_args());
    }
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut lead = Lead::start(&flags).await;
    let mut py_args = vec![lead.addr.clone()];
    if let Some(pki) = &pki {
        lead.tls = pki.client(None);
        py_args = vec![
            lead.url.clone(),
            "--ca".into(),
            pki.cert("ca").display().to_string(),
        ];
    }
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut observer = lead.join("observer").await;
    observer.open_inbox(0).await;

    let mut py = Command::new(&python)
        .arg(example.join("teammate.py"))
        .arg("--lead")
        .args(&py_args)
        .args(["--name", "py", "--stubs"])
        .arg(&stubs)
        .env("MESH_JOIN_TOKEN", &lead.join_token)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    let plan = |status: RequestStatus| {
        move |r: &pb::ProtocolState| r.sender == "py" && is(r.status, status)
    };
    let rejected = events
        .request("py's first plan rejected", plan(RequestStatus::Rejected))
        .await;
    assert!(
        rejected.feedback.contains("require_tests"),
        "{}",
        rejected.feedback
    );
    let approved = events
        .request("py's revised plan approved", plan(RequestStatus::Approved))
        .await;
    let payload: serde_json::Value = serde_json::from_str(&approved.payload_json).unwrap();
    assert_eq!(payload["supersedes"], rejected.request_id.as_str());
    events.member_in("py", pb::MemberStatus::Idle).await;

    let ticket = operator
        .request_shutdown(pb::ShutdownRequest {
            target: "py".into(),
            reason: "test over".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let output = within("the python teammate to exit", async {
        let status = py.wait().await.unwrap();
        let mut out = String::new();
        tokio::io::AsyncReadExt::read_to_string(py.stdout.as_mut().unwrap(), &mut out)
            .await
            .unwrap();
        (status, out)
    })
    .await;
    assert!(output.0.success(), "{output:?}");
    for line in [
        "plan rejected:",
        "plan approved; mode PERMISSION_MODE_ACCEPT_EDITS",
        "shutdown agreed",
    ] {
        assert!(
            output.1.contains(line),
            "{line:?} missing from:\n{}",
            output.1
        );
    }
    let state = operator
        .get_request(pb::GetRequestRequest {
            request_id: ticket.request_id,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(is(state.status, RequestStatus::Approved));
    let notice = observer
        .next_matching(|e| matches!(e.body, Some(Body::TeammateTerminated(_))))
        .await;
    assert!(matches!(notice.body, Some(Body::TeammateTerminated(t)) if t.name == "py"));
}
