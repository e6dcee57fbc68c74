//! Clients follow the leader: two leads on one PostgreSQL database (the
//! real server, [`mesh_tests::pg`]), one active and one standing by. The
//! CLI given the standby (alone, or first) reaches the active lead through
//! the standby's `mesh-leader`; a teammate given both joins the active one,
//! and when that lead is killed it carries on with the other once it takes
//! over: the same session, every message delivered once and in order, its
//! own calls answered there; a teammate the killed lead spawned (told of
//! the other lead by `--peer`) does the same, and its plan, submitted
//! before the kill, is approved by the new lead.

#![allow(clippy::unwrap_used)]

use std::{path::Path, process::Stdio};

use mesh_tests::{bin, is, member_named, pg::PgServer, signal, team, within, Events, Lead};
use nix::sys::signal::Signal;
use serde_json::{json, Value};
use shared::{
    leads::LEADER_KEY,
    pb::{self, RequestStatus},
};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines},
    process::{Child, ChildStdin, ChildStdout, Command},
};
use tonic::Code;
use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};

/// A lead on the database `db` (`--lease 3`, no console, `extra` flags) on
/// `listen`, with the tokens of `like` when given.
async fn lead_on(db: &str, listen: &str, like: Option<&Lead>, extra: &[&str]) -> Lead {
    let (join, operator) = match like {
        Some(lead) => (lead.join_token.clone(), lead.operator_token.clone()),
        None => (shared::auth::new_token(), shared::auth::new_token()),
    };
    let mut flags = vec!["--store", db, "--http", "off", "--lease", "3"];
    flags.extend_from_slice(extra);
    let dir = tempfile::tempdir().expect("tempdir");
    Lead::start_in(dir, listen, join, operator, &flags).await
}

/// A database and two leads on it (with `extra` flags): the first leads,
/// the second stands by. `peers` gives each the other's URL (`--peer`), on
/// ports chosen first.
async fn two_leads(pg: &PgServer, peers: bool, extra: &[&str]) -> (Lead, Lead) {
    let db = pg.database();
    let (a_listen, b_listen) = if peers {
        (free_addr(), free_addr())
    } else {
        ("127.0.0.1:0".to_owned(), "127.0.0.1:0".to_owned())
    };
    let a_peer = format!("http://{b_listen}");
    let b_peer = format!("http://{a_listen}");
    let (mut a_extra, mut b_extra) = if peers {
        (
            vec!["--peer", a_peer.as_str()],
            vec!["--peer", b_peer.as_str()],
        )
    } else {
        (Vec::new(), Vec::new())
    };
    a_extra.extend_from_slice(extra);
    b_extra.extend_from_slice(extra);
    let mut a = lead_on(&db, &a_listen, None, &a_extra).await;
    a.says("leading (epoch").await;
    let mut b = lead_on(&db, &b_listen, Some(&a), &b_extra).await;
    b.says(&format!("leads at {} ", a.url)).await;
    (a, b)
}

/// `kill -9`s `active`, and waits until `next` has taken over and serves
/// (while it takes over, it still answers as a standby, naming itself).
async fn fail_over(active: &mut Lead, next: &mut Lead) {
    signal(&active.child, Signal::SIGKILL);
    within("the killed lead to end", active.child.wait())
        .await
        .expect("wait");
    next.says("leading (epoch").await;
    let mut health = HealthClient::new(next.channel().await);
    within("the new lead to serve", async {
        while health.check(HealthCheckRequest::default()).await.is_err() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
}

/// A loopback address nothing listens on now.
fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

#[tokio::test]
async fn the_cli_follows_a_standby_to_the_active_lead() {
    let pg = PgServer::start();
    let (a, b) = two_leads(&pg, false, &[]).await;

    // The standby answers even the health check UNAVAILABLE, naming A.
    let status = HealthClient::new(b.channel().await)
        .check(HealthCheckRequest::default())
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(
        status.metadata().get(LEADER_KEY).unwrap().to_str().unwrap(),
        a.url
    );

    let standby_first = format!("{},{}", b.url, a.url);
    for lead in [
        vec!["--lead", &standby_first],
        vec!["--lead", &b.url, "--lead", &a.url],
        vec!["--lead", &b.url],
    ] {
        let mut args = vec!["team"];
        args.extend(lead.iter().copied());
        let (ok, out, err) = b.cli(&args).await;
        assert!(ok && out.starts_with("NAME"), "lead {args:?}: {out}{err}");
    }

    // Where no lead answers, the error names every address and what it said.
    let dead = format!("http://{}", free_addr());
    let (ok, out, err) = b
        .cli(&["team", "--lead", &format!("{dead},{}", b.url)])
        .await;
    assert!(ok, "B names A, which leads: {out}{err}");
    let dead_too = format!("http://{}", free_addr());
    let (ok, _, err) = b
        .cli(&["team", "--lead", &format!("{dead},{dead_too}")])
        .await;
    assert!(!ok);
    assert!(
        err.contains("cannot reach the lead") && err.contains(&dead) && err.contains(&dead_too),
        "{err}"
    );
}

/// `teammate mcp`, driven over stdio with newline-delimited JSON-RPC.
struct Mcp {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    id: u64,
}

impl Mcp {
    /// Starts `teammate mcp --lead LEADS` as `name` and initializes it: it
    /// has joined once it answers.
    async fn start(leads: &str, name: &str, workspace: &Path, join_token: &str) -> Mcp {
        std::fs::create_dir_all(workspace).unwrap();
        let mut child = Command::new(bin("teammate"))
            .args(["mcp", "--lead", leads, "--name", name, "--workspace"])
            .arg(workspace)
            .env("MESH_JOIN_TOKEN", join_token)
            .env("RUST_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut mcp = Mcp {
            child,
            stdin,
            stdout,
            id: 0,
        };
        let params = json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": { "name": "follow_leader", "version": "0" }
        });
        mcp.request("initialize", params).await;
        mcp.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
            .await;
        mcp
    }

    async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// Sends a request; its result (notifications in between are passed over).
    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.id += 1;
        let id = self.id;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .await;
        within(&format!("the answer to {method}"), async {
            loop {
                let line = self.stdout.next_line().await.unwrap().expect("a line");
                let message: Value = serde_json::from_str(&line).unwrap();
                if message["id"] == id {
                    assert!(message.get("error").is_none(), "{message}");
                    return message["result"].clone();
                }
            }
        })
        .await
    }

    /// Calls a tool: its text, and whether it is an error result.
    async fn call(&mut self, tool: &str, arguments: Value) -> (String, bool) {
        let result = self
            .request(
                "tools/call",
                json!({ "name": tool, "arguments": arguments }),
            )
            .await;
        let text = result["content"][0]["text"].as_str().unwrap().to_owned();
        (text, result["isError"] == true)
    }

    /// The messages `check_inbox` lists, call after call, until one is `last`.
    async fn messages_until(&mut self, last: &str) -> Vec<String> {
        let mut heard = Vec::new();
        while !heard.iter().any(|m: &String| m.ends_with(last)) {
            let (text, error) = self.call("check_inbox", json!({})).await;
            assert!(!error, "{text}");
            heard.extend(
                text.lines()
                    .filter_map(|l| l.strip_prefix("- message from "))
                    .map(str::to_owned),
            );
        }
        heard
    }
}

#[tokio::test]
async fn a_teammate_follows_the_lead_through_a_failover_and_misses_nothing() {
    let pg = PgServer::start();
    let (mut a, mut b) = two_leads(&pg, false, &[]).await;
    let mut operator_a = a.operator().await;

    // bob, a member of A's, sends; alice is a teammate given the standby first.
    let mut bob = a.join("bob").await;
    let leads = format!("{},{}", b.url, a.url);
    let workspace = a.workspace("alice");
    let mut alice = Mcp::start(&leads, "alice", &workspace, &a.join_token).await;
    let joined = member_named(&mut operator_a, "alice").await;

    // One message before A dies (alice may or may not have acknowledged it).
    bob.send("alice", "m1", "id-1").await.unwrap();
    fail_over(&mut a, &mut b).await;

    // bob's session goes on at B; so does alice's, and her inbox resumes.
    bob.api = b.lead_api(&bob.token).await;
    bob.send("alice", "m2", "id-2").await.unwrap();
    bob.send("alice", "m3", "id-3").await.unwrap();
    let heard = alice.messages_until("m3").await;
    assert_eq!(
        heard,
        ["bob: m1", "bob: m2", "bob: m3"],
        "once each, in order"
    );

    // The same member, not a second alice.
    let mut operator_b = b.operator().await;
    let members = team(&mut operator_b).await;
    let alices: Vec<_> = members.iter().filter(|m| m.name == "alice").collect();
    assert_eq!(alices.len(), 1, "{members:?}");
    assert_eq!(alices[0].member_id, joined.member_id);
    assert_ne!(alices[0].status, pb::MemberStatus::Terminated as i32);

    // Her own calls reach B: bob hears her there.
    let (text, error) = alice
        .call("send_message", json!({ "to": "bob", "text": "back" }))
        .await;
    assert!(!error && text.contains("sent to bob"), "{text}");
    let envelope = bob.next().await;
    assert_eq!(envelope.from, "alice");
    assert!(
        matches!(&envelope.body, Some(pb::envelope::Body::Text(t)) if t.content == "back"),
        "{envelope:?}"
    );
    drop(alice.stdin);
    within("alice to leave", alice.child.wait()).await.unwrap();
}

const ONE_PLAN: &str = r#"
[[plans]]
summary = "Add the auth module"
files = ["src/auth.rs"]

[[actions]]
phase = "work"
tool = "write_file"
path = "src/auth.rs"
content = "pub fn login() {}\n"
"#;

#[tokio::test]
async fn a_teammate_the_killed_lead_spawned_carries_on_with_the_next() {
    let pg = PgServer::start();
    let (mut a, mut b) = two_leads(&pg, true, &[]).await;
    let both = format!("{},{}", a.url, b.url);
    let script = a.script("carol", ONE_PLAN).display().to_string();
    let mut operator_a = a.operator().await;
    let mut events = Events::open(&mut operator_a).await;
    let spawn = [
        "spawn", "carol", "--role", "coder", "--script", &script, "--lead", &both,
    ];
    let (ok, out, err) = a.cli(&spawn).await;
    assert!(ok, "{out}{err}");
    let plan = events
        .request("carol's plan", |r| {
            r.sender == "carol" && is(r.status, RequestStatus::Pending)
        })
        .await;
    let joined = member_named(&mut operator_a, "carol").await;

    fail_over(&mut a, &mut b).await;
    let mut operator_b = b.operator().await;
    let mut events = Events::open(&mut operator_b).await;
    // The dead lead first: the CLI goes on to the one that leads.
    let (ok, out, err) = b.cli(&["approve", &plan.request_id, "--lead", &both]).await;
    assert!(ok, "{out}{err}");
    let wrote = events
        .tool_call("carol's write, at the new lead", |t| {
            t.member == "carol" && t.tool == "write_file"
        })
        .await;
    assert!(wrote.allowed, "{wrote:?}");
    let workspace = a.state_dir().join("workspaces/carol");
    assert!(workspace.join("src/auth.rs").exists());
    let now = member_named(&mut operator_b, "carol").await;
    assert_eq!(now.member_id, joined.member_id, "the same session");
    let requests = operator_b
        .list_requests(pb::ListRequestsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .requests;
    let plans: Vec<_> = requests.iter().filter(|r| r.sender == "carol").collect();
    assert_eq!(plans.len(), 1, "one plan, answered once: {plans:?}");
    assert!(is(plans[0].status, RequestStatus::Approved));

    // The new lead asks her to stop; she agrees and exits.
    let (ok, out, err) = b.cli(&["shutdown", "carol", "--lead", &b.url]).await;
    assert!(
        ok && out.contains("carol agreed to shut down"),
        "{out}{err}"
    );
}

#[tokio::test]
async fn the_python_teammate_follows_the_lead_too() {
    // First: installing the venv blocks this thread.
    let python = mesh_tests::python();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/python");
    let scratch = tempfile::tempdir().unwrap();
    let stubs = scratch.path().join("gen");
    let generated = std::process::Command::new(&python)
        .arg(example.join("gen_stubs.py"))
        .arg(&stubs)
        .status()
        .unwrap();
    assert!(generated.success(), "generating the stubs failed");
    let pg = PgServer::start();
    let (mut a, mut b) = two_leads(&pg, false, &["--approval", "auto"]).await;
    let mut operator_a = a.operator().await;
    let mut events = Events::open(&mut operator_a).await;

    // The standby first: its mesh-leader sends the example to A.
    let mut py = Command::new(&python)
        .arg(example.join("teammate.py"))
        .args([
            "--lead", &b.url, "--lead", &a.url, "--name", "py", "--stubs",
        ])
        .arg(&stubs)
        .env("MESH_JOIN_TOKEN", &a.join_token)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    events.member_in("py", pb::MemberStatus::Idle).await;

    fail_over(&mut a, &mut b).await;
    let mut operator_b = b.operator().await;
    let ticket = operator_b
        .request_shutdown(pb::ShutdownRequest {
            target: "py".into(),
            reason: "test over".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let (status, out) = within("the python teammate to exit", async {
        let status = py.wait().await.unwrap();
        let mut out = String::new();
        tokio::io::AsyncReadExt::read_to_string(py.stdout.as_mut().unwrap(), &mut out)
            .await
            .unwrap();
        (status, out)
    })
    .await;
    assert!(status.success(), "{out}");
    let moved_to = |url: &str| format!("talking to the lead at {url}");
    let last_move = out.lines().rfind(|l| l.contains("talking to the lead at"));
    assert!(out.contains(&moved_to(&a.url)), "{out}");
    assert!(
        last_move.is_some_and(|l| l.ends_with(&moved_to(&b.url))),
        "{out}"
    );
    for line in ["plan approved", "shutdown agreed"] {
        assert!(out.contains(line), "{line:?} missing from:\n{out}");
    }
    let state = operator_b
        .get_request(pb::GetRequestRequest {
            request_id: ticket.request_id,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(is(state.status, RequestStatus::Approved));
}

/// The pid of the process whose arguments include each of `args`.
fn pid_of(args: &[&str]) -> Option<u32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let words: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            args.iter()
                .all(|arg| words.contains(&arg.as_bytes()))
                .then_some(pid)
        })
}

#[tokio::test]
async fn a_teammate_left_running_by_a_lead_that_stepped_down_is_reaped_when_it_exits() {
    let pg = PgServer::start();
    let db = pg.database();
    let mut a = lead_on(&db, "127.0.0.1:0", None, &[]).await;
    a.says("leading (epoch 1)").await;
    let script = a.script("carol", ONE_PLAN).display().to_string();
    let mut operator = a.operator().await;
    let mut events = Events::open(&mut operator).await;
    let (ok, out, err) = a
        .cli(&["spawn", "carol", "--role", "coder", "--script", &script])
        .await;
    assert!(ok, "{out}{err}");
    events
        .request("carol's plan", |r| {
            r.sender == "carol" && is(r.status, RequestStatus::Pending)
        })
        .await;
    let pid = pid_of(&["--name", "carol", &script]).expect("carol's process");

    // The database restarts under the lead: its next commit fails, and it
    // steps down (leaving carol running) and starts again in its place.
    pg.restart();
    let mut following = a.following_operator(&[]);
    within("a write after the restart", async {
        while following
            .create_task(pb::CreateTaskRequest {
                subject: "after the restart".into(),
                ..Default::default()
            })
            .await
            .is_err()
        {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await;
    a.says("stepped down").await;
    a.says("leading (epoch 2)").await;

    // Carol rejoins the lead in its new process, agrees to stop, exits,
    // and is reaped: no zombie is left.
    let (ok, out, err) = a.cli(&["shutdown", "carol"]).await;
    assert!(
        ok && out.contains("carol agreed to shut down"),
        "{out}{err}"
    );
    let proc = std::path::PathBuf::from(format!("/proc/{pid}"));
    within("carol to be reaped", async {
        while proc.exists() {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await;
}
