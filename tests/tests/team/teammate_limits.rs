//! A teammate against its own long or hostile input, end to end: real `lead`
//! and `teammate` processes over loopback. Whatever a script asks for (a FIFO,
//! a hard link to a file outside, a 70 KB command, a plan over the limit), the
//! call shows in the operator's `Watch` as refused or cut, and the teammate
//! stays alive to answer a shutdown.

#![allow(clippy::unwrap_used)]

use mesh_core::limits;
use mesh_tests::{is, Events, Lead, Teammate};
use shared::pb::{self, envelope::Body, event::Kind, RequestStatus};

/// Asks `name` to shut down and checks that it agrees and exits 0: it is
/// alive and still answers the lead.
async fn shuts_down(lead: &Lead, name: &str, teammate: &mut Teammate) {
    let (ok, out, err) = lead.cli(&["shutdown", name]).await;
    assert!(ok, "{out}{err}");
    assert!(
        out.contains(&format!("{name} agreed to shut down")),
        "{out}"
    );
    let status = teammate.exit().await;
    assert!(status.success(), "{name} exits 0, not {status:?}");
}

/// `true # xxx…`, `len` bytes in all: a long command that succeeds.
fn long_command(len: usize, filler: char) -> String {
    let mut command = "true # ".to_owned();
    command.extend(std::iter::repeat_n(filler, len - command.len()));
    command
}

/// The marker `limits::cut` ends a cut value with.
fn cut_marker(full_len: usize) -> String {
    format!(" …[cut: {full_len} bytes in all]")
}

#[tokio::test]
async fn reads_of_a_fifo_a_hard_link_and_a_parent_path_are_refused_and_the_teammate_shuts_down() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    // The workspace, planted before the teammate starts: a FIFO, and a hard
    // link to a file beside it, outside.
    let outside = lead.dir.path().join("ws");
    let workspace = outside.join("ivy");
    std::fs::create_dir_all(&workspace).unwrap();
    nix::unistd::mkfifo(
        &workspace.join("pipe"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    std::fs::write(outside.join("secret.txt"), "TOPSECRET\n").unwrap();
    std::fs::hard_link(outside.join("secret.txt"), workspace.join("linked")).unwrap();
    std::fs::write(workspace.join("notes.txt"), "no secret here\n").unwrap();
    let script = r#"
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

[[actions]]
phase = "plan"
tool = "read_file"
path = "."

[[actions]]
phase = "plan"
tool = "search"
pattern = "TOPSECRET"

[[actions]]
phase = "plan"
tool = "read_file"
path = "notes.txt"
"#;
    let mut ivy = lead.teammate("ivy", script);

    for (path, reason) in [
        ("pipe", "pipe: is a FIFO, not a regular file"),
        ("linked", "has 2 hard links"),
        ("../secret.txt", "leaves the workspace"),
        (".", "is a directory"),
    ] {
        let arg = format!("{{\"path\":\"{path}\"}}");
        let report = events
            .tool_call(&format!("the read of {path:?}"), |t| {
                t.member == "ivy" && t.args_json == arg
            })
            .await;
        assert!(!report.allowed, "{path:?} did not run: {report:?}");
        assert!(
            report.outcome.contains(reason),
            "{path:?}: {}",
            report.outcome
        );
        assert!(!report.outcome.contains("TOPSECRET"), "{}", report.outcome);
    }
    let search = events
        .tool_call("the search", |t| t.member == "ivy" && t.tool == "search")
        .await;
    assert!(search.allowed, "{search:?}");
    assert!(
        !search.outcome.contains("TOPSECRET") && !search.outcome.contains("linked"),
        "the search skips the hard link: {}",
        search.outcome
    );
    let notes = events
        .tool_call("the read of notes.txt", |t| {
            t.member == "ivy" && t.args_json.contains("notes.txt")
        })
        .await;
    assert!(
        notes.allowed && notes.outcome.contains("no secret here"),
        "{notes:?}"
    );
    shuts_down(&lead, "ivy", &mut ivy).await;
}

#[tokio::test]
async fn a_70_kb_command_under_bypass_is_reported_cut_with_a_marker() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let command = long_command(70 * 1024, 'x');
    let script = format!(
        r#"
[[plans]]
summary = "Run one long command"
files = ["out.txt"]

[[actions]]
phase = "work"
tool = "run_command"
command = "{command}"
"#
    );
    let mut jack = lead.teammate("jack", &script);
    let plan = events.pending_plan("jack").await;
    let (ok, out, err) = lead
        .cli(&["approve", &plan.request_id, "--mode", "bypass"])
        .await;
    assert!(ok, "{out}{err}");

    let report = events
        .tool_call("the long command's report", |t| {
            t.member == "jack" && t.tool == "run_command"
        })
        .await;
    assert!(report.allowed, "{}", report.outcome);
    assert!(
        report.outcome.contains("exit status: 0"),
        "{}",
        report.outcome
    );
    let full_len = serde_json::json!({ "command": command }).to_string().len();
    assert!(
        report.args_json.len() <= limits::REPORT_ARGS_JSON,
        "{}",
        report.args_json.len()
    );
    assert!(report.args_json.starts_with("{\"command\":\"true # xxx"));
    assert!(
        report.args_json.ends_with(&cut_marker(full_len)),
        "{}",
        &report.args_json[report.args_json.len() - 60..]
    );
    shuts_down(&lead, "jack", &mut jack).await;
}

#[tokio::test]
async fn default_mode_long_commands_are_asked_or_refused_and_the_teammate_carries_on() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let medium = long_command(17 * 1024, 'y');
    let huge = long_command(limits::ARGS_JSON + 1, 'z');
    let script = format!(
        r#"
[[plans]]
summary = "Two long commands, then a write"
files = ["after.txt"]

[[actions]]
phase = "work"
tool = "run_command"
command = "{medium}"

[[actions]]
phase = "work"
tool = "run_command"
command = "{huge}"

[[actions]]
phase = "work"
tool = "write_file"
path = "after.txt"
content = "still here"
"#
    );
    let mut kim = lead.teammate("kim", &script);
    let plan = events.pending_plan("kim").await;
    let (ok, out, err) = lead
        .cli(&["approve", &plan.request_id, "--mode", "default"])
        .await;
    assert!(ok, "{out}{err}");

    // 17 KB is within `limits::ARGS_JSON`: the request carries the whole
    // command to the operator, who denies it. A lead that still holds
    // args_json to a lower limit refuses the request; the teammate then
    // reports the call refused with the lead's message. Either way it does
    // not run, and the teammate lives on.
    enum First {
        Asked(pb::ProtocolState),
        Reported(pb::ToolCallReport),
    }
    let first = events
        .find(
            "the 17 KB command's permission request or report",
            |kind| match kind {
                Kind::Request(r)
                    if r.sender == "kim"
                        && r.r#type == pb::RequestType::Permission as i32
                        && is(r.status, RequestStatus::Pending) =>
                {
                    Some(First::Asked(r.clone()))
                }
                Kind::ToolCall(t) if t.member == "kim" && t.tool == "run_command" => {
                    Some(First::Reported(t.clone()))
                }
                _ => None,
            },
        )
        .await;
    let report = match first {
        First::Asked(request) => {
            assert!(
                request.payload_json.contains(&medium),
                "the operator sees the whole command"
            );
            let (ok, out, err) = lead
                .cli(&[
                    "deny",
                    &request.request_id,
                    "--feedback",
                    "too long to read",
                ])
                .await;
            assert!(ok, "{out}{err}");
            let report = events
                .tool_call("the denied command", |t| {
                    t.member == "kim" && t.tool == "run_command"
                })
                .await;
            assert!(
                report.outcome.contains("too long to read"),
                "{}",
                report.outcome
            );
            report
        }
        First::Reported(report) => {
            assert!(
                report
                    .outcome
                    .contains("the lead refused the permission request: args_json"),
                "{}",
                report.outcome
            );
            report
        }
    };
    assert!(!report.allowed, "{report:?}");

    // Over `limits::ARGS_JSON`: refused here, never sent.
    let refused = events
        .tool_call("the huge command's report", |t| {
            t.member == "kim" && t.tool == "run_command" && t.args_json.contains("zzz")
        })
        .await;
    assert!(!refused.allowed, "{refused:?}");
    assert!(
        refused.outcome.contains("not asked, not run")
            && refused
                .outcome
                .contains(&format!("the {} the lead accepts", limits::ARGS_JSON)),
        "{}",
        refused.outcome
    );
    assert!(refused.args_json.len() <= limits::REPORT_ARGS_JSON);

    // It carries on with the next action.
    let write = events
        .request("the write's permission request", |r| {
            r.sender == "kim"
                && r.r#type == pb::RequestType::Permission as i32
                && is(r.status, RequestStatus::Pending)
                && r.payload_json.contains("after.txt")
        })
        .await;
    let (ok, out, err) = lead.cli(&["allow", &write.request_id]).await;
    assert!(ok, "{out}{err}");
    let wrote = events
        .tool_call("the write", |t| t.member == "kim" && t.tool == "write_file")
        .await;
    assert!(wrote.allowed, "{wrote:?}");
    assert_eq!(
        std::fs::read_to_string(kim.workspace.join("after.txt")).unwrap(),
        "still here"
    );
    let asked = operator
        .list_requests(pb::ListRequestsRequest {
            r#type: pb::RequestType::Permission as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .requests;
    assert!(
        asked.iter().all(|r| !r.payload_json.contains("zzz")),
        "the huge command was never sent"
    );
    shuts_down(&lead, "kim", &mut kim).await;
}

/// A script whose first plan is over `limits::PLAN`, then `rest`.
fn huge_plan_then(rest: &str) -> String {
    let body = "b".repeat(limits::PLAN + 1);
    format!("[[plans]]\nsummary = \"Too big\"\nbody = \"{body}\"\n{rest}")
}

#[tokio::test]
async fn a_plan_the_lead_refuses_is_a_rejection_and_the_next_plan_goes_in() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let script = huge_plan_then("[[plans]]\nsummary = \"Small enough\"\nfiles = [\"a.rs\"]\n");
    let mut lea = lead.teammate("lea", &script);

    let plan = events.pending_plan("lea").await;
    let payload: serde_json::Value = serde_json::from_str(&plan.payload_json).unwrap();
    assert!(plan.payload_json.contains("Small enough"), "{payload}");
    assert_eq!(
        payload["supersedes"], "",
        "the refused plan never existed on the lead: nothing to supersede"
    );
    shuts_down(&lead, "lea", &mut lea).await;
}

#[tokio::test]
async fn a_single_plan_the_lead_refuses_leaves_the_teammate_idle_not_dead() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let mut max = lead.teammate("max", &huge_plan_then(""));

    let reason = events
        .find("max's idle notice", |kind| match kind {
            Kind::Envelope(e) if e.from == "max" => match &e.body {
                Some(Body::IdleNotification(idle)) => Some(idle.reason.clone()),
                _ => None,
            },
            _ => None,
        })
        .await;
    assert!(reason.contains("rejected"), "{reason}");
    shuts_down(&lead, "max", &mut max).await;
}

/// Whether `pid` is gone (or a zombie nobody reaped yet).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// Waits for `pid` to die: SIGKILL lands asynchronously.
async fn dies(pid: i32) {
    mesh_tests::within(&format!("process {pid} to die"), async {
        while !gone(pid) {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
}

/// The number after `key=` in `text`.
fn pid_after(text: &str, key: &str) -> i32 {
    let at = text.find(key).unwrap_or_else(|| panic!("{key} in {text}")) + key.len();
    text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn run_command_gets_a_clean_environment_and_its_process_group_is_killed() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let script = r#"
[[plans]]
summary = "Look around, leave something running, then hang"
files = ["out.txt", "hung.pid"]

[[actions]]
phase = "work"
tool = "run_command"
command = "echo names=$(env | cut -d= -f1 | sort | tr '\n' ' '); echo cwd=$(pwd); sleep 1000 >/dev/null 2>&1 & echo bg=$!"

[[actions]]
phase = "work"
tool = "run_command"
command = "sleep 1000 & echo $! > hung.pid; sleep 1000"
"#;
    let mut lea = lead.teammate_with("lea", script, &["--command-timeout", "1"]);
    let plan = events.pending_plan("lea").await;
    let (ok, out, err) = lead
        .cli(&["approve", &plan.request_id, "--mode", "bypass"])
        .await;
    assert!(ok, "{out}{err}");

    let first = events
        .tool_call("the first command", |t| {
            t.member == "lea" && t.args_json.contains("names=")
        })
        .await;
    assert!(first.allowed, "{}", first.outcome);
    let names = first.outcome.split("names=").nth(1).unwrap();
    let names = names.split(" cwd=").next().unwrap();
    assert!(names.contains("PATH"), "{names}");
    // The join token the teammate holds (MESH_JOIN_TOKEN) stays behind.
    assert!(!names.contains("MESH_"), "{names}");
    assert!(!first.outcome.contains(&lead.join_token));
    let workspace = lea.workspace.canonicalize().unwrap();
    assert!(
        first
            .outcome
            .contains(&format!("cwd={}", workspace.display())),
        "{}",
        first.outcome
    );
    // What it left in the background went with it.
    dies(pid_after(&first.outcome, "bg=")).await;

    let second = events
        .tool_call("the hung command", |t| {
            t.member == "lea" && t.args_json.contains("hung.pid")
        })
        .await;
    assert!(second.outcome.contains("timed out"), "{}", second.outcome);
    let hung: i32 = std::fs::read_to_string(workspace.join("hung.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    dies(hung).await;
    shuts_down(&lead, "lea", &mut lea).await;
}
