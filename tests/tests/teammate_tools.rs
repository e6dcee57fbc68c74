//! The teammate's tools under hostile workspaces: a FIFO, a hard link to a
//! file outside, a path that leaves; each refused, reported as refused, and
//! the teammate still answers a shutdown.

use mesh_tests::{Events, Lead};
use shared::pb;

#[tokio::test]
async fn hostile_files_are_refused_reported_as_refused_and_the_teammate_answers_a_shutdown() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let outside = lead.dir.path().join("secret.txt");
    std::fs::write(&outside, "TOPSECRET\n").expect("secret");
    let workspace = lead.dir.path().join("ws").join("mallory");
    std::fs::create_dir_all(&workspace).expect("workspace");
    nix::unistd::mkfifo(
        &workspace.join("pipe"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .expect("mkfifo");
    std::fs::hard_link(&outside, workspace.join("linked")).expect("hard link");
    let script = r#"
[[plans]]
summary = "wait here"
files = ["a.rs"]
tests = ["t"]
steps = ["wait"]

[[actions]]
phase = "plan"
tool = "read_file"
path = "pipe"

[[actions]]
phase = "plan"
tool = "read_file"
path = "linked"

[[actions]]
phase = "plan"
tool = "read_file"
path = "../secret.txt"
"#;
    let mut teammate = lead.teammate_with("mallory", script, &[]);
    for (path, why) in [
        ("pipe", "not a regular file"),
        ("linked", "hard links"),
        ("../secret.txt", "leaves the workspace"),
    ] {
        let report = events
            .tool_call(&format!("the read of {path}"), |t| {
                t.member == "mallory" && t.args_json.contains(path)
            })
            .await;
        assert!(!report.allowed, "{path} reported as run: {report:?}");
        assert!(report.outcome.contains(why), "{path}: {}", report.outcome);
        assert!(!report.outcome.contains("TOPSECRET"));
    }
    operator
        .request_shutdown(pb::ShutdownRequest {
            target: "mallory".into(),
            reason: "done".into(),
            ..Default::default()
        })
        .await
        .expect("asked");
    let status = teammate.exit().await;
    assert!(status.success(), "{status:?}");
}
