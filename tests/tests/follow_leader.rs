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

use mesh_tests::{bin, is, member_named, pg::PgServer, signal, team, within, Events, Operator};
use serde_json::{json, Value};
use shared::{
    auth::BearerToken,
    leads::LEADER_KEY,
    pb::{self, lead_client::LeadClient, operator_client::OperatorClient, RequestStatus},
};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines},
    process::{Child, ChildStdin, ChildStdout, Command},
    sync::mpsc,
};
use tonic::{transport::Channel, Code};
use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};

/// The tokens both leads share.
struct Tokens {
    join: String,
    operator: String,
}

impl Tokens {
    fn new() -> Self {
        Self {
            join: shared::auth::new_token(),
            operator: shared::auth::new_token(),
        }
    }
}

/// A `lead serve` on the database, and what it says on stdout, line by line.
struct PgLead {
    child: Child,
    url: String,
    lines: mpsc::UnboundedReceiver<String>,
}

impl PgLead {
    /// Starts `lead serve --store DB --lease 3` on `listen` with its state
    /// in `root/<name>` and `root` as its spawn root; returns once it
    /// listens.
    async fn start(
        name: &str,
        db: &str,
        tokens: &Tokens,
        root: &Path,
        listen: &str,
        extra: &[&str],
    ) -> PgLead {
        let mut child = Command::new(bin("lead"))
            .args(["serve", "--store", db, "--lease", "3", "--http", "off"])
            .args(["--listen", listen, "--state-dir"])
            .arg(root.join(name))
            .arg("--spawn-root")
            .arg(root)
            .args(extra)
            .env("MESH_JOIN_TOKEN", &tokens.join)
            .env("MESH_OPERATOR_TOKEN", &tokens.operator)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start lead");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let (tx, mut lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(line)) = stdout.next_line().await {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let first = within("the lead's first line", lines.recv())
            .await
            .expect("a line");
        let addr = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
        PgLead {
            child,
            url: format!("http://{addr}"),
            lines,
        }
    }

    /// Waits for a line of stdout that `pred` accepts.
    async fn says(&mut self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        within(what, async {
            loop {
                let line = self.lines.recv().await.expect("the lead's stdout ended");
                if pred(&line) {
                    return line;
                }
            }
        })
        .await
    }

    /// Waits until it leads, and serves: between the two, it still
    /// answers as a standby (naming itself).
    async fn leads(&mut self, what: &str) {
        self.says(what, |l| l.starts_with("leading (epoch")).await;
        let mut health = HealthClient::new(channel(&self.url).await);
        within(&format!("{what}: serving"), async {
            while health.check(HealthCheckRequest::default()).await.is_err() {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
        .await;
    }

    /// Waits until it stands by for `active`.
    async fn stands_by_for(&mut self, what: &str, active: &str) {
        let named = format!(" leads at {active} ");
        self.says(what, |l| l.starts_with("standby: ") && l.contains(&named))
            .await;
    }

    /// `kill -9`, and waits for it to end.
    async fn kill(&mut self) {
        signal(&self.child, nix::sys::signal::Signal::SIGKILL);
        within("the killed lead to end", self.child.wait())
            .await
            .expect("wait");
    }
}

/// A database and two leads on it (with `extra` flags): the first leads,
/// the second stands by. `peers` gives each the other's URL (`--peer`), on
/// ports chosen first.
async fn two_leads(
    pg: &PgServer,
    tokens: &Tokens,
    root: &Path,
    peers: bool,
    extra: &[&str],
) -> (PgLead, PgLead) {
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
    let mut a = PgLead::start("a", &db, tokens, root, &a_listen, &a_extra).await;
    a.leads("the first lead to lead").await;
    let mut b = PgLead::start("b", &db, tokens, root, &b_listen, &b_extra).await;
    b.stands_by_for("the second lead to stand by", &a.url).await;
    (a, b)
}

/// A loopback address nothing listens on now.
fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

async fn channel(url: &str) -> Channel {
    within(
        "connecting",
        tonic::transport::Endpoint::from_shared(url.to_owned())
            .unwrap()
            .connect(),
    )
    .await
    .unwrap()
}

/// An operator client of the lead at `url` (that lead only).
async fn operator(url: &str, tokens: &Tokens) -> Operator {
    OperatorClient::with_interceptor(
        channel(url).await,
        BearerToken::new(&tokens.operator).unwrap(),
    )
}

/// A `Lead` client of the lead at `url` carrying `token`.
async fn lead_api(
    url: &str,
    token: &str,
) -> LeadClient<tonic::service::interceptor::InterceptedService<Channel, BearerToken>> {
    LeadClient::with_interceptor(channel(url).await, BearerToken::new(token).unwrap())
}

/// `lead ARGS`, as the operator: (success, stdout, stderr).
async fn cli(tokens: &Tokens, root: &Path, args: &[&str]) -> (bool, String, String) {
    let output = within(
        &format!("lead {args:?}"),
        Command::new(bin("lead"))
            .args(args)
            .arg("--state-dir")
            .arg(root.join("operator"))
            .env("MESH_OPERATOR_TOKEN", &tokens.operator)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_cli_follows_a_standby_to_the_active_lead() {
    let pg = PgServer::start();
    let tokens = Tokens::new();
    let root = tempfile::tempdir().unwrap();
    let (a, b) = two_leads(&pg, &tokens, root.path(), false, &[]).await;

    // The standby answers even the health check UNAVAILABLE, naming A.
    let status = HealthClient::new(channel(&b.url).await)
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
        let (ok, out, err) = cli(&tokens, root.path(), &args).await;
        assert!(ok && out.starts_with("NAME"), "lead {args:?}: {out}{err}");
    }

    // Where no lead answers, the error names every address and what it said.
    let dead = format!("http://{}", free_addr());
    let (ok, out, err) = cli(
        &tokens,
        root.path(),
        &["team", "--lead", &format!("{dead},{}", b.url)],
    )
    .await;
    assert!(ok, "B names A, which leads: {out}{err}");
    let dead_too = format!("http://{}", free_addr());
    let (ok, _, err) = cli(
        &tokens,
        root.path(),
        &["team", "--lead", &format!("{dead},{dead_too}")],
    )
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
    async fn start(leads: &str, name: &str, workspace: &Path, tokens: &Tokens) -> Mcp {
        std::fs::create_dir_all(workspace).unwrap();
        let mut child = Command::new(bin("teammate"))
            .args(["mcp", "--lead", leads, "--name", name, "--workspace"])
            .arg(workspace)
            .env("MESH_JOIN_TOKEN", &tokens.join)
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

/// Sends `text` from a member to `to` with the id `message_id`.
async fn send(
    api: &mut LeadClient<tonic::service::interceptor::InterceptedService<Channel, BearerToken>>,
    to: &str,
    text: &str,
    message_id: &str,
) {
    within(
        "Send",
        api.send(pb::SendRequest {
            to: to.into(),
            text: Some(pb::Text {
                content: text.into(),
            }),
            message_id: message_id.into(),
        }),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_teammate_follows_the_lead_through_a_failover_and_misses_nothing() {
    let pg = PgServer::start();
    let tokens = Tokens::new();
    let root = tempfile::tempdir().unwrap();
    let (mut a, mut b) = two_leads(&pg, &tokens, root.path(), false, &[]).await;
    let mut operator_a = operator(&a.url, &tokens).await;

    // bob, a member of A's, sends; alice is a teammate given the standby first.
    let mut joiner = lead_api(&a.url, &tokens.join).await;
    let bob = joiner
        .join(pb::JoinRequest {
            name: "bob".into(),
            role: "tester".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut bob_api = lead_api(&a.url, &bob.session_token).await;
    let leads = format!("{},{}", b.url, a.url);
    let mut alice = Mcp::start(&leads, "alice", &root.path().join("ws/alice"), &tokens).await;
    let joined = member_named(&mut operator_a, "alice").await;

    // One message before A dies (alice may or may not have acknowledged it).
    send(&mut bob_api, "alice", "m1", "id-1").await;
    a.kill().await;
    b.leads("the standby to take over").await;

    // bob's session goes on at B; so does alice's, and her inbox resumes.
    let mut bob_api = lead_api(&b.url, &bob.session_token).await;
    send(&mut bob_api, "alice", "m2", "id-2").await;
    send(&mut bob_api, "alice", "m3", "id-3").await;
    let heard = alice.messages_until("m3").await;
    assert_eq!(
        heard,
        ["bob: m1", "bob: m2", "bob: m3"],
        "once each, in order"
    );

    // The same member, not a second alice.
    let mut operator_b = operator(&b.url, &tokens).await;
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
    let mut inbox = bob_api
        .inbox(pb::InboxRequest { after_seq: 0 })
        .await
        .unwrap()
        .into_inner();
    let envelope = within("bob's message from alice", inbox.message())
        .await
        .unwrap()
        .unwrap();
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
    let tokens = Tokens::new();
    let root = tempfile::tempdir().unwrap();
    let (mut a, mut b) = two_leads(&pg, &tokens, root.path(), true, &[]).await;
    let both = format!("{},{}", a.url, b.url);
    let script = root.path().join("carol.toml");
    std::fs::write(&script, ONE_PLAN).unwrap();
    let workspace = root.path().join("ws/carol");
    let mut operator_a = operator(&a.url, &tokens).await;
    let mut events = Events::open(&mut operator_a).await;
    let script = script.display().to_string();
    let workspace_arg = workspace.display().to_string();
    let spawn = [
        "spawn",
        "carol",
        "--role",
        "coder",
        "--script",
        &script,
        "--workspace",
        &workspace_arg,
        "--lead",
        &both,
    ];
    let (ok, out, err) = cli(&tokens, root.path(), &spawn).await;
    assert!(ok, "{out}{err}");
    let plan = events
        .request("carol's plan", |r| {
            r.sender == "carol" && is(r.status, RequestStatus::Pending)
        })
        .await;
    let joined = member_named(&mut operator_a, "carol").await;

    a.kill().await;
    b.leads("the standby to take over").await;
    let mut operator_b = operator(&b.url, &tokens).await;
    let mut events = Events::open(&mut operator_b).await;
    // The dead lead first: the CLI goes on to the one that leads.
    let (ok, out, err) = cli(
        &tokens,
        root.path(),
        &["approve", &plan.request_id, "--lead", &both],
    )
    .await;
    assert!(ok, "{out}{err}");
    let wrote = events
        .tool_call("carol's write, at the new lead", |t| {
            t.member == "carol" && t.tool == "write_file"
        })
        .await;
    assert!(wrote.allowed, "{wrote:?}");
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
    let (ok, out, err) = cli(
        &tokens,
        root.path(),
        &["shutdown", "carol", "--lead", &b.url],
    )
    .await;
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
    let root = tempfile::tempdir().unwrap();
    let stubs = root.path().join("gen");
    let generated = std::process::Command::new(&python)
        .arg(example.join("gen_stubs.py"))
        .arg(&stubs)
        .status()
        .unwrap();
    assert!(generated.success(), "generating the stubs failed");
    let pg = PgServer::start();
    let tokens = Tokens::new();
    let auto = ["--approval", "auto"];
    let (mut a, mut b) = two_leads(&pg, &tokens, root.path(), false, &auto).await;
    let mut operator_a = operator(&a.url, &tokens).await;
    let mut events = Events::open(&mut operator_a).await;

    // The standby first: its mesh-leader sends the example to A.
    let mut py = Command::new(&python)
        .arg(example.join("teammate.py"))
        .args([
            "--lead", &b.url, "--lead", &a.url, "--name", "py", "--stubs",
        ])
        .arg(&stubs)
        .env("MESH_JOIN_TOKEN", &tokens.join)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    events.member_in("py", pb::MemberStatus::Idle).await;

    a.kill().await;
    b.leads("the standby to take over").await;
    let mut operator_b = operator(&b.url, &tokens).await;
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
