//! What `run_command` can reach without a sandbox (`--sandbox none`, asked
//! for by name; tests/tests/sandbox/sandbox.rs has the default), end to end: real
//! `lead` and `teammate` processes over loopback.
//! A command finds no join token in the teammate's `/proc/PID/environ` or
//! `cmdline`, whether the token came in the environment or on the command
//! line; a command of another unprivileged user's teammate cannot even open
//! its `environ` (the teammate is undumpable); and what a command starts in a
//! session of its own (`setsid`) dies with the command, whether it ends or
//! times out.

use std::{os::unix::fs::MetadataExt, path::Path, process::Stdio, time::Duration};

use mesh_tests::{bin, process_running, Events, Lead, Teammate};
use tokio::process::Command;

/// How long an escaped process may take to die: well under its own `sleep
/// 25`, so one that outlives its command is caught.
const DEATH_DEADLINE: Duration = Duration::from_secs(10);

/// Approves `name`'s pending plan with mode BYPASS (commands run unasked).
async fn approve(lead: &Lead, events: &mut Events, name: &str) {
    let plan = events.pending_plan(name).await;
    let (ok, out, err) = lead
        .cli(&["approve", &plan.request_id, "--mode", "bypass"])
        .await;
    assert!(ok, "{out}{err}");
}

/// Asks `name` to shut down and waits until it exits 0.
async fn shuts_down(lead: &Lead, name: &str, teammate: &mut Teammate) {
    let (ok, out, err) = lead.cli(&["shutdown", name]).await;
    assert!(ok, "{out}{err}");
    let status = teammate.exit().await;
    assert!(status.success(), "{name} exits 0, not {status:?}");
}

/// A file the command wrote in the workspace, as text.
fn written(workspace: &Path, name: &str) -> String {
    let bytes = std::fs::read(workspace.join(name))
        .unwrap_or_else(|e| panic!("{name} in the workspace: {e}"));
    String::from_utf8_lossy(&bytes).replace('\0', " ")
}

#[tokio::test]
async fn a_command_finds_no_token_in_the_teammates_environ_or_cmdline() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let script = r#"
[[plans]]
summary = "Look at the teammate's own process"
files = ["environ"]

[[actions]]
phase = "work"
tool = "run_command"
command = "cat /proc/$PPID/environ > environ 2> environ.err; cat /proc/$PPID/cmdline > cmdline"
"#;
    // The token both ways: in MESH_JOIN_TOKEN (the harness sets it) and on
    // the command line, where clap takes it from.
    let mut ann = lead.teammate_with(
        "ann",
        script,
        &["--join-token", &lead.join_token, "--sandbox", "none"],
    );
    approve(&lead, &mut events, "ann").await;
    let report = events
        .tool_call("ann's command", |t| {
            t.member == "ann" && t.tool == "run_command"
        })
        .await;
    assert!(report.allowed, "{}", report.outcome);
    assert!(!report.outcome.contains(&lead.join_token));

    let cmdline = written(&ann.workspace, "cmdline");
    assert!(cmdline.contains("--join-token"), "{cmdline}");
    assert!(!cmdline.contains(&lead.join_token), "{cmdline}");
    let environ = written(&ann.workspace, "environ");
    assert!(!environ.contains(&lead.join_token), "{environ}");
    if environ.is_empty() {
        // Run as an unprivileged user: the undumpable teammate's environ
        // is closed to its commands.
        let err = written(&ann.workspace, "environ.err");
        assert!(err.contains("Permission denied"), "{err}");
    } else {
        // Run as root, which opens it anyway: the value is gone from it.
        assert!(environ.contains("MESH_JOIN_TOKEN=*"), "{environ}");
    }
    shuts_down(&lead, "ann", &mut ann).await;
}

#[tokio::test]
async fn a_command_of_an_unprivileged_teammate_cannot_open_its_environ() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let script = r#"
[[plans]]
summary = "Read the teammate's environment and memory map"
files = ["environ"]

[[actions]]
phase = "work"
tool = "run_command"
command = "id -u > uid; cat /proc/$PPID/environ > environ 2> environ.err; cat /proc/$PPID/maps > maps 2> maps.err"
"#;
    // A teammate of an unprivileged user: this one if the test is not root,
    // else nobody (65534), in a directory of its own that it can use.
    let root = std::fs::metadata("/proc/self").expect("/proc/self").uid() == 0;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).expect("workspace");
    let script_path = dir.path().join("bo.toml");
    std::fs::write(&script_path, script).expect("script");
    let mut command = Command::new(bin("teammate"));
    command
        .args([
            "--lead",
            &lead.url,
            "--name",
            "bo",
            "--sandbox",
            "none",
            "--script",
        ])
        .arg(&script_path)
        .arg("--workspace")
        .arg(&workspace)
        .env("MESH_JOIN_TOKEN", &lead.join_token)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    if root {
        std::os::unix::fs::chown(&workspace, Some(65534), Some(65534)).expect("chown");
        command.uid(65534).gid(65534);
    }
    let mut bo = Teammate {
        child: command.spawn().expect("start teammate"),
        workspace: workspace.clone(),
    };
    approve(&lead, &mut events, "bo").await;
    let report = events
        .tool_call("bo's command", |t| {
            t.member == "bo" && t.tool == "run_command"
        })
        .await;
    assert!(report.allowed, "{}", report.outcome);

    assert_ne!(written(&workspace, "uid").trim(), "0");
    for file in ["environ", "maps"] {
        let read = written(&workspace, file);
        assert!(
            read.is_empty(),
            "the command read the teammate's {file}: {read}"
        );
        let err = written(&workspace, &format!("{file}.err"));
        assert!(err.contains("Permission denied"), "{file}: {err}");
    }
    shuts_down(&lead, "bo", &mut bo).await;
}

/// Waits until no process has `marker` as an argument and `pid` is gone
/// (or a zombie), for at most [`DEATH_DEADLINE`].
async fn dies(pid: i32, marker: &str) {
    let gone = || match shared::procfs::Stat::of(&pid.to_string()) {
        None => true,
        Some(stat) => stat.field::<char>(3) == Some('Z'),
    };
    let waited = tokio::time::timeout(DEATH_DEADLINE, async {
        while !gone() || process_running(marker) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "{marker} (pid {pid}) outlived its command by {DEATH_DEADLINE:?}"
    );
}

#[tokio::test]
async fn what_a_command_starts_in_a_session_of_its_own_dies_with_it() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let run = uuid::Uuid::new_v4().simple().to_string();
    let ended = format!("mesh-escaped-ended-{run}");
    let timed = format!("mesh-escaped-timed-{run}");
    // Each command leaves a process in a session of its own and waits until
    // it has started (it wrote its PID); the second then hangs past its
    // time limit.
    let script = r#"
[[plans]]
summary = "Leave sleepers in sessions of their own"
files = ["out.txt"]

[[actions]]
phase = "work"
tool = "run_command"
command = "setsid sh -c 'echo $$ > ended.pid; sleep 25; true' ENDED >/dev/null 2>&1 & while [ ! -s ended.pid ]; do sleep 0.01; done; echo left"

[[actions]]
phase = "work"
tool = "run_command"
command = "setsid sh -c 'echo $$ > timed.pid; sleep 25; true' TIMED >/dev/null 2>&1 & while [ ! -s timed.pid ]; do sleep 0.01; done; sleep 1000"
"#
    .replace("ENDED", &ended)
    .replace("TIMED", &timed);
    let mut cy = lead.teammate_with(
        "cy",
        &script,
        &["--command-timeout", "5", "--sandbox", "none"],
    );
    approve(&lead, &mut events, "cy").await;
    let pid_in = |file: &str| -> i32 {
        written(&cy.workspace, file)
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{file}: {e}"))
    };

    let first = events
        .tool_call("the command that ends", |t| {
            t.member == "cy" && t.args_json.contains("ended.pid")
        })
        .await;
    assert!(
        first.outcome.contains("exit status: 0"),
        "{}",
        first.outcome
    );
    dies(pid_in("ended.pid"), &ended).await;

    let second = events
        .tool_call("the command that times out", |t| {
            t.member == "cy" && t.args_json.contains("timed.pid")
        })
        .await;
    assert!(second.outcome.contains("timed out"), "{}", second.outcome);
    dies(pid_in("timed.pid"), &timed).await;

    shuts_down(&lead, "cy", &mut cy).await;
    assert!(!process_running(&ended) && !process_running(&timed));
}
