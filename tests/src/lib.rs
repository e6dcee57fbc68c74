//! The harness for process-level tests: starts the real `lead` and `teammate`
//! binaries over loopback and talks to them with real gRPC clients. Every wait
//! is on an event (a line on stdout, an envelope, a process exit) under a
//! timeout; nothing sleeps in place of synchronisation.

#![allow(clippy::unwrap_used, unreachable_pub, missing_debug_implementations)]

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    sync::OnceLock,
    time::Duration,
};

use shared::{
    auth::BearerToken,
    pb::{self, lead_client::LeadClient, operator_client::OperatorClient},
};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};
use tokio_stream::StreamExt;
use tonic::{service::interceptor::InterceptedService, transport::Channel};

pub mod fake_model;
pub mod git;
pub mod notify;
pub mod oidc;
pub mod otlp;
pub mod pg;
pub mod pki;
pub mod store_conformance;
pub mod webdriver;

thread_local! {
    /// The database every lead this test starts keeps its state in, while
    /// [`on_postgres`] runs it.
    static POSTGRES: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Runs `test` with every lead it starts (and restarts) on one PostgreSQL
/// database of a server of its own, instead of SQLite: the same test,
/// the other store.
pub async fn on_postgres<T>(test: impl std::future::Future<Output = T>) -> T {
    let server = pg::PgServer::start();
    let url = server.database();
    POSTGRES.with(|p| *p.borrow_mut() = Some(url));
    let out = test.await;
    POSTGRES.with(|p| p.borrow_mut().take());
    drop(server);
    out
}

/// The database of [`on_postgres`], while it runs.
fn postgres_url() -> Option<String> {
    POSTGRES.with(|p| p.borrow().clone())
}

/// The longest any single wait in a test may take.
pub const TIMEOUT: Duration = Duration::from_secs(30);

pub type Operator = OperatorClient<InterceptedService<Channel, BearerToken>>;
pub type LeadApi = LeadClient<InterceptedService<Channel, BearerToken>>;
/// An operator client that follows the active lead, as the `lead` CLI's.
pub type FollowingOperator = OperatorClient<InterceptedService<shared::leads::Follow, BearerToken>>;

/// `await`s `future` under [`TIMEOUT`], panicking with `what` if it takes longer.
pub async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(TIMEOUT, future).await {
        Ok(value) => value,
        Err(_) => panic!("timed out after {TIMEOUT:?} waiting for {what}"),
    }
}

/// The directory holding the built `lead` and `teammate` binaries, building
/// them first if they are missing or older than this test binary's build
/// (the lead with its `faults` feature, the fault tests' hooks).
/// `MESH_TEST_BIN_DIR` names another directory of built binaries instead
/// (an older commit's, say, to see a new test fail against it).
pub fn bin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("MESH_TEST_BIN_DIR") {
            return PathBuf::from(dir);
        }
        // target/<profile>/deps/<test-binary>
        let exe = std::env::current_exe().expect("test binary path");
        let dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile>")
            .to_path_buf();
        let profile = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("debug")
            .to_owned();
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = std::process::Command::new(cargo);
        build
            .args([
                "build",
                "--quiet",
                "-p",
                "lead",
                "-p",
                "teammate",
                // The fault tests' hooks (a landing stopped at a chosen point).
                "--features",
                "lead/faults",
                "--manifest-path",
            ])
            .arg(&manifest);
        if profile == "release" {
            build.arg("--release");
        }
        let status = build.status().expect("run cargo build");
        assert!(status.success(), "cargo build -p lead -p teammate failed");
        dir
    })
}

/// The path of one of the workspace's binaries.
pub fn bin(name: &str) -> PathBuf {
    bin_dir().join(name)
}

/// A running `lead serve`.
pub struct Lead {
    /// The process.
    pub child: Child,
    /// `HOST:PORT`.
    pub addr: String,
    /// `http://HOST:PORT`.
    pub url: String,
    /// The web console's URL (`http://HOST:PORT/`), unless `--http off`.
    pub console: Option<String>,
    /// Its state directory (and room for workspaces and scripts).
    pub dir: tempfile::TempDir,
    /// What the harness's clients (gRPC, teammates, the CLI) trust and show
    /// over TLS; empty for a plain-text lead.
    pub tls: shared::transport::ClientTls,
    pub join_token: String,
    pub operator_token: String,
    /// What it printed after its first lines (and, once it starts again in
    /// its own process, as a lead on PostgreSQL does, everything after).
    pub said: tokio::sync::mpsc::UnboundedReceiver<String>,
}

impl Lead {
    /// Starts `lead serve` on a free port with `extra` flags; returns once it
    /// printed its address.
    pub async fn start(extra: &[&str]) -> Lead {
        let dir = tempfile::tempdir().expect("tempdir");
        let join_token = shared::auth::new_token();
        let operator_token = shared::auth::new_token();
        Self::start_in(dir, "127.0.0.1:0", join_token, operator_token, extra).await
    }

    /// Starts `lead serve` on a free port with `extra` flags and `env` in
    /// its environment.
    pub async fn start_with_env(extra: &[&str], env: &[(&str, &str)]) -> Lead {
        let dir = tempfile::tempdir().expect("tempdir");
        let join_token = shared::auth::new_token();
        let operator_token = shared::auth::new_token();
        let mut command =
            Self::command_in(&dir, "127.0.0.1:0", &join_token, &operator_token, extra);
        command.envs(env.iter().copied());
        Self::spawn(command, dir, join_token, operator_token).await
    }

    /// Starts `lead serve` on `listen` with the state in `dir`.
    pub async fn start_in(
        dir: tempfile::TempDir,
        listen: &str,
        join_token: String,
        operator_token: String,
        extra: &[&str],
    ) -> Lead {
        let command = Self::command_in(&dir, listen, &join_token, &operator_token, extra);
        Self::spawn(command, dir, join_token, operator_token).await
    }

    /// The `lead serve` command on `listen` with the state in `dir`.
    fn command_in(
        dir: &tempfile::TempDir,
        listen: &str,
        join_token: &str,
        operator_token: &str,
        extra: &[&str],
    ) -> Command {
        let mut command = Command::new(bin("lead"));
        command
            .args(["serve", "--listen", listen, "--state-dir"])
            .arg(dir.path().join("state"))
            .args([
                "--join-token",
                join_token,
                "--operator-token",
                operator_token,
            ])
            .arg("--spawn-root")
            .arg(dir.path())
            .args(extra)
            // MESH_TEST_RUST_LOG: the leads' log level, to look into a failure.
            .env(
                "RUST_LOG",
                std::env::var("MESH_TEST_RUST_LOG").unwrap_or_else(|_| "warn".into()),
            );
        if let Some(url) = postgres_url() {
            command.args(["--store", &url, "--lease", "3"]);
        }
        command
    }

    /// Stops the lead (SIGTERM: it finishes what it was doing) and starts it
    /// again on the same state dir and port.
    pub async fn restart(self, extra: &[&str]) -> Lead {
        self.stop_and_start(nix::sys::signal::Signal::SIGTERM, extra)
            .await
    }

    /// `kill -9`s the lead and starts it again on the same state dir and port.
    pub async fn crash_and_restart(self, extra: &[&str]) -> Lead {
        self.stop_and_start(nix::sys::signal::Signal::SIGKILL, extra)
            .await
    }

    /// Sends `sig`, waits for the lead to exit, and starts it again on the
    /// same state dir and port.
    async fn stop_and_start(mut self, sig: nix::sys::signal::Signal, extra: &[&str]) -> Lead {
        signal(&self.child, sig);
        within(&format!("the lead to exit after {sig}"), self.child.wait())
            .await
            .expect("wait");
        let Lead {
            dir,
            addr,
            join_token,
            operator_token,
            ..
        } = self;
        Self::start_in(dir, &addr, join_token, operator_token, extra).await
    }

    /// Starts `command` (a `lead serve`) and reads its first line.
    pub async fn spawn(
        mut command: Command,
        dir: tempfile::TempDir,
        join_token: String,
        operator_token: String,
    ) -> Lead {
        let args: Vec<String> = command
            .as_std()
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let console_off = args.windows(2).any(|w| w[0] == "--http" && w[1] == "off");
        let mut child = command
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start lead");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let first = within("the lead's first line", lines.next_line())
            .await
            .expect("read")
            .expect("a line");
        let addr = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .to_owned();
        // The console's line follows at once, on any store.
        let console = if console_off {
            None
        } else {
            let line = within("the lead's console line", lines.next_line())
                .await
                .expect("read")
                .expect("a console line");
            match line.strip_prefix("console on ") {
                Some(console) => Some(console.to_owned()),
                None => panic!("unexpected second line {line:?}"),
            }
        };
        // On PostgreSQL too the test goes on at once: a lead that took the
        // lease (a fresh database, or its own after a restart) says it
        // listens only once it can serve, as on SQLite. Keep draining
        // stdout so the lead never blocks on a full pipe.
        let (said_tx, said) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let _ = said_tx.send(line);
            }
        });
        let tls = args.iter().any(|a| a == "--tls-cert");
        Lead {
            child,
            url: format!("{}://{addr}", if tls { "https" } else { "http" }),
            tls: shared::transport::ClientTls::default(),
            console,
            addr,
            dir,
            join_token,
            operator_token,
            said,
        }
    }

    /// Waits for the lead to print a line containing `needle`: that line.
    pub async fn says(&mut self, needle: &str) -> String {
        within(&format!("the lead to say {needle:?}"), async {
            loop {
                match self.said.recv().await {
                    Some(line) if line.contains(needle) => return line,
                    Some(_) => {}
                    None => panic!("the lead's output ended before it said {needle:?}"),
                }
            }
        })
        .await
    }

    /// The state directory.
    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// A channel to the lead.
    pub async fn channel(&self) -> Channel {
        within(
            "connecting",
            self.tls.endpoint(&self.url).expect("endpoint").connect(),
        )
        .await
        .expect("connect")
    }

    /// An operator client.
    pub async fn operator(&self) -> Operator {
        OperatorClient::with_interceptor(
            self.channel().await,
            BearerToken::new(&self.operator_token).expect("token"),
        )
    }

    /// An operator client that follows the active lead among `urls` (this
    /// lead's when empty), as the `lead` CLI does.
    pub fn following_operator(&self, urls: &[&str]) -> FollowingOperator {
        let given: Vec<String> = match urls {
            [] => vec![self.url.clone()],
            urls => urls.iter().map(|u| u.to_string()).collect(),
        };
        let leads = shared::leads::Leads::new(&given, self.tls.clone()).expect("lead URLs");
        OperatorClient::with_interceptor(
            shared::leads::Follow::new(leads),
            BearerToken::new(&self.operator_token).expect("token"),
        )
    }

    /// A `Lead` client carrying `token`.
    pub async fn lead_api(&self, token: &str) -> LeadApi {
        LeadClient::with_interceptor(
            self.channel().await,
            BearerToken::new(token).expect("token"),
        )
    }

    /// Joins `name` with a plan of `files` approved in DEFAULT mode: each
    /// write asks.
    pub async fn granted(&self, operator: &mut Operator, name: &str, files: &[&str]) -> Member {
        let mut member = self.join(name).await;
        let id = member
            .submit(&uuid::Uuid::new_v4().to_string(), "work", files)
            .await
            .expect("SubmitPlan");
        within(
            "ReviewPlan",
            operator.review_plan(pb::PlanReview {
                request_id: id,
                approve: true,
                grant: Some(pb::PermissionGrant {
                    mode: pb::PermissionMode::Default as i32,
                    ..Default::default()
                }),
                ..Default::default()
            }),
        )
        .await
        .expect("ReviewPlan");
        member
    }

    /// Joins as `name` with a raw client.
    pub async fn join(&self, name: &str) -> Member {
        let mut joiner = self.lead_api(&self.join_token).await;
        let joined = joiner
            .join(pb::JoinRequest {
                name: name.into(),
                role: "tester".into(),
                ..Default::default()
            })
            .await
            .expect("join")
            .into_inner();
        let api = self.lead_api(&joined.session_token).await;
        Member {
            name: name.into(),
            token: joined.session_token,
            api,
            inbox: None,
        }
    }

    /// Writes `script` and starts a `teammate` process for `name` with it.
    pub fn teammate(&self, name: &str, script: &str) -> Teammate {
        self.teammate_with(name, script, &[])
    }

    /// [`Lead::teammate`] with extra flags.
    pub fn teammate_with(&self, name: &str, script: &str, extra: &[&str]) -> Teammate {
        let script_path = self.dir.path().join(format!("{name}.toml"));
        std::fs::write(&script_path, script).expect("write script");
        let mut args = vec!["--script".to_owned(), script_path.display().to_string()];
        args.extend(extra.iter().map(|a| a.to_string()));
        self.start_teammate(name, &args)
    }

    /// Starts a `teammate` process for `name` driven by the model at
    /// `base_url` (`--model test-model --task TASK`), with extra flags.
    pub fn model_teammate(
        &self,
        name: &str,
        base_url: &str,
        task: &str,
        extra: &[&str],
    ) -> Teammate {
        let mut command = self.model_command(name, base_url, task, extra);
        let child = command.spawn().expect("start teammate");
        Teammate {
            child,
            workspace: self.workspace(name),
        }
    }

    /// The command [`Lead::model_teammate`] runs, to adjust before spawning.
    pub fn model_command(&self, name: &str, base_url: &str, task: &str, extra: &[&str]) -> Command {
        let mut args: Vec<String> = [
            "--model",
            "test-model",
            "--base-url",
            base_url,
            "--task",
            task,
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        args.extend(extra.iter().map(|a| a.to_string()));
        self.teammate_command(name, &args)
    }

    /// Headless Chromium at 1280x800, logged in to this lead's console, the
    /// page live.
    pub async fn console_browser(&self) -> webdriver::Browser {
        let browser = webdriver::Browser::start(1280, 800).await;
        browser
            .open(self.console.as_deref().expect("the console is on"))
            .await;
        browser.log_in(&self.operator_token).await;
        browser
    }

    /// The workspace of `name`'s teammate: `ws/<name>` in the test's directory.
    pub fn workspace(&self, name: &str) -> PathBuf {
        self.dir.path().join("ws").join(name)
    }

    /// Starts a `teammate` process for `name` with `args` after the common ones.
    fn start_teammate(&self, name: &str, args: &[String]) -> Teammate {
        let child = self
            .teammate_command(name, args)
            .spawn()
            .expect("start teammate");
        Teammate {
            child,
            workspace: self.workspace(name),
        }
    }

    /// `teammate --lead URL --name NAME --role coder --workspace ws/NAME ARGS`,
    /// with the join token, quiet logs, no OpenAI key, and killed on drop.
    fn teammate_command(&self, name: &str, args: &[String]) -> Command {
        let mut command = Command::new(bin("teammate"));
        command
            .args([
                "--lead",
                &self.url,
                "--name",
                name,
                "--role",
                "coder",
                "--workspace",
            ])
            .arg(self.workspace(name))
            .args(self.tls.args())
            .args(args)
            .env("MESH_JOIN_TOKEN", &self.join_token)
            .env("RUST_LOG", "warn")
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    }

    /// Writes `script` to a file and returns its path (for `lead spawn`).
    pub fn script(&self, name: &str, script: &str) -> PathBuf {
        let path = self.dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, script).expect("write script");
        path
    }

    /// `lead ARGS --state-dir DIR` (an operator command), ready to run.
    pub fn cli_command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(bin("lead"));
        command
            .args(args)
            .arg("--state-dir")
            .arg(self.state_dir())
            .args(self.tls.args())
            .env("MESH_OPERATOR_TOKEN", &self.operator_token)
            .kill_on_drop(true);
        command
    }

    /// `lead watch`, once it says it is watching: the process (killed on
    /// drop) and its stdout, a line per event.
    pub async fn watch(
        &self,
    ) -> (
        Child,
        tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    ) {
        let mut watch = self
            .cli_command(&["watch"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start lead watch");
        let stdout = watch.stdout.take().expect("stdout");
        let stderr = watch.stderr.take().expect("stderr");
        let ready = within(
            "lead watch to connect",
            BufReader::new(stderr).lines().next_line(),
        )
        .await
        .expect("lead watch's stderr")
        .expect("a line");
        assert!(ready.starts_with("watching the lead"), "{ready}");
        (watch, BufReader::new(stdout).lines())
    }

    /// Runs `lead ARGS --state-dir DIR` (an operator command); returns (success, stdout, stderr).
    pub async fn cli(&self, args: &[&str]) -> (bool, String, String) {
        let output = within(&format!("lead {args:?}"), self.cli_command(args).output())
            .await
            .expect("run lead cli");
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// Sends SIGTERM and waits for the exit status.
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        signal(&self.child, nix::sys::signal::Signal::SIGTERM);
        within("the lead to exit", self.child.wait())
            .await
            .expect("wait")
    }
}

/// Sends `sig` to a child. For SIGSTOP, returns once every thread of the
/// child has stopped: `kill` only queues the signal, and a busy machine
/// can leave a thread running for milliseconds after it (a call sent then
/// was answered by a lead the test took for paused).
pub fn signal(child: &Child, sig: nix::sys::signal::Signal) {
    let pid = child.id().expect("running child") as i32;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig).expect("signal");
    if sig == nix::sys::signal::Signal::SIGSTOP {
        let started = std::time::Instant::now();
        while !all_threads_stopped(pid) {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(10),
                "process {pid} did not stop"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// Whether every thread of `pid` is stopped (state `T` in its
/// `/proc/PID/task/TID/stat`).
fn all_threads_stopped(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|task| {
        std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
            // The state follows the command's closing parenthesis.
            stat.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('T') || rest.starts_with('t'))
        })
    })
}

/// A running `teammate` process.
pub struct Teammate {
    pub child: Child,
    pub workspace: PathBuf,
}

impl Teammate {
    /// Waits for the process to exit.
    pub async fn exit(&mut self) -> std::process::ExitStatus {
        within("the teammate to exit", self.child.wait())
            .await
            .expect("wait")
    }
}

/// A member joined with a raw client.
pub struct Member {
    pub name: String,
    pub token: String,
    pub api: LeadApi,
    pub inbox: Option<tonic::Streaming<pb::Envelope>>,
}

impl Member {
    /// Opens the inbox stream after `after_seq`.
    pub async fn open_inbox(&mut self, after_seq: u64) {
        let stream = self
            .api
            .inbox(pb::InboxRequest { after_seq })
            .await
            .expect("inbox")
            .into_inner();
        self.inbox = Some(stream);
    }

    /// The next envelope on the open stream.
    pub async fn next(&mut self) -> pb::Envelope {
        if self.inbox.is_none() {
            self.open_inbox(0).await;
        }
        let stream = self.inbox.as_mut().expect("open inbox");
        within(&format!("an envelope for {}", self.name), stream.message())
            .await
            .expect("stream")
            .expect("an envelope")
    }

    /// Envelopes until one matches `pred`, which is returned.
    pub async fn next_matching(
        &mut self,
        mut pred: impl FnMut(&pb::Envelope) -> bool,
    ) -> pb::Envelope {
        loop {
            let envelope = self.next().await;
            if pred(&envelope) {
                return envelope;
            }
        }
    }

    /// `Send`s `content` to `to` (with `message_id`, empty for none).
    pub async fn send(
        &mut self,
        to: &str,
        content: &str,
        message_id: &str,
    ) -> Result<pb::SendResponse, tonic::Status> {
        self.api
            .send(pb::SendRequest {
                to: to.into(),
                text: Some(pb::Text {
                    content: content.into(),
                }),
                message_id: message_id.into(),
            })
            .await
            .map(tonic::Response::into_inner)
    }

    /// Submits a plan; returns its request id.
    pub async fn submit(
        &mut self,
        request_id: &str,
        summary: &str,
        files: &[&str],
    ) -> Result<String, tonic::Status> {
        let plan = pb::Plan {
            summary: summary.into(),
            files: files.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        self.api
            .submit_plan(pb::PlanApprovalRequest {
                request_id: request_id.into(),
                plan: Some(plan),
                supersedes: String::new(),
            })
            .await
            .map(|r| r.into_inner().request_id)
    }

    /// Claims a new task of `subject`, reviewed as `review`, and submits a
    /// plan for it (`summary`, one step, `files`); the task's and the
    /// plan's ids.
    pub async fn claim_and_plan(
        &mut self,
        operator: &mut Operator,
        subject: &str,
        review: pb::TaskReview,
        summary: &str,
        files: &[&str],
    ) -> (String, String) {
        let task = operator
            .create_task(pb::CreateTaskRequest {
                subject: subject.into(),
                review: review as i32,
                ..Default::default()
            })
            .await
            .expect("CreateTask")
            .into_inner()
            .task_id;
        self.api
            .claim_task(pb::ClaimTaskRequest {
                task_id: task.clone(),
            })
            .await
            .expect("ClaimTask");
        let plan = self
            .api
            .submit_plan(pb::PlanApprovalRequest {
                plan: Some(pb::Plan {
                    task_id: task.clone(),
                    summary: summary.into(),
                    steps: vec!["change it".into()],
                    files: files.iter().map(|f| f.to_string()).collect(),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .expect("SubmitPlan")
            .into_inner()
            .request_id;
        (task, plan)
    }

    /// Submits `diff` for `task_id` against the team branch's head, as
    /// `summary`; the result's id.
    pub async fn submit_result_at_head(
        &mut self,
        task_id: &str,
        diff: &str,
        summary: &str,
    ) -> String {
        let head = self
            .api
            .get_repo(pb::GetRepoRequest::default())
            .await
            .expect("GetRepo")
            .into_inner()
            .head;
        self.api
            .submit_result(pb::ResultRequest {
                task_id: task_id.into(),
                base: head,
                diff: diff.into(),
                summary: summary.into(),
                ..Default::default()
            })
            .await
            .expect("SubmitResult")
            .into_inner()
            .request_id
    }
}

/// The Python of a virtual environment under target/ with what the tests
/// need from PyPI (grpcio and grpcio-tools for the example teammate, the
/// official `mcp` SDK for `teammate mcp`, `a2a-sdk` for the A2A tests,
/// `opentelemetry-proto` for the
/// OTLP receiver, `aiosmtpd` for the notify tests' mail server), installed
/// on first use.
pub fn python() -> PathBuf {
    static READY: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = READY.lock().unwrap_or_else(|p| p.into_inner());
    let venv = bin_dir().parent().expect("target dir").join("py-venv");
    let python = venv.join("bin/python");
    let ready = std::process::Command::new(&python)
        .args([
            "-c",
            "import grpc, grpc_tools, mcp, opentelemetry.proto.collector.trace.v1, a2a.client, \
             aiosmtpd",
        ])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ready {
        let made = std::process::Command::new("python3")
            .arg("-m")
            .arg("venv")
            .arg(&venv)
            .status()
            .expect("python3 -m venv");
        assert!(made.success(), "python3 -m venv failed");
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        // `python -m pip`, not `bin/pip`: a venv copied from elsewhere keeps
        // its scripts' old `#!` line, and its Python still runs.
        let installed = std::process::Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(root.join("../examples/python/requirements.txt"))
            .arg("-r")
            .arg(root.join("mcp/requirements.txt"))
            .arg("-r")
            .arg(root.join("otlp/requirements.txt"))
            .arg("-r")
            .arg(root.join("a2a/requirements.txt"))
            .arg("-r")
            .arg(root.join("notify/requirements.txt"))
            .status()
            .expect("pip install");
        assert!(
            installed.success(),
            "pip install (grpcio, grpcio-tools, mcp, opentelemetry-proto, a2a-sdk, aiosmtpd) failed"
        );
    }
    python
}

/// A live `Watch` stream.
pub struct Events(pub tonic::Streaming<pb::Event>);

impl Events {
    /// Opens one.
    pub async fn open(operator: &mut Operator) -> Events {
        Events(
            operator
                .watch(pb::WatchRequest {})
                .await
                .expect("watch")
                .into_inner(),
        )
    }

    /// Events until `pick` returns something.
    pub async fn find<T>(
        &mut self,
        what: &str,
        mut pick: impl FnMut(&pb::event::Kind) -> Option<T>,
    ) -> T {
        within(what, async {
            while let Some(event) = self.0.next().await {
                if let Some(found) = event.expect("event").kind.as_ref().and_then(&mut pick) {
                    return found;
                }
            }
            panic!("the event stream ended while waiting for {what}");
        })
        .await
    }

    /// The next request state that matches.
    pub async fn request(
        &mut self,
        what: &str,
        mut pred: impl FnMut(&pb::ProtocolState) -> bool,
    ) -> pb::ProtocolState {
        self.find(what, |kind| match kind {
            pb::event::Kind::Request(r) if pred(r) => Some(r.clone()),
            _ => None,
        })
        .await
    }

    /// The next pending plan of `name`.
    pub async fn pending_plan(&mut self, name: &str) -> pb::ProtocolState {
        self.plan_of(name, true).await
    }

    /// The next decided (approved, rejected or expired) plan of `name`.
    pub async fn decided_plan(&mut self, name: &str) -> pb::ProtocolState {
        self.plan_of(name, false).await
    }

    async fn plan_of(&mut self, name: &str, pending: bool) -> pb::ProtocolState {
        let what = if pending { "a pending" } else { "a decided" };
        self.request(&format!("{what} plan of {name}"), |r| {
            r.sender == name
                && is(r.status, pb::RequestStatus::Pending) == pending
                && r.r#type == pb::RequestType::PlanApproval as i32
        })
        .await
    }

    /// The next tool-call report that matches.
    pub async fn tool_call(
        &mut self,
        what: &str,
        mut pred: impl FnMut(&pb::ToolCallReport) -> bool,
    ) -> pb::ToolCallReport {
        self.find(what, |kind| match kind {
            pb::event::Kind::ToolCall(t) if pred(t) => Some(t.clone()),
            _ => None,
        })
        .await
    }

    /// The reason of the next idle notification from `name`.
    pub async fn idle_reason(&mut self, name: &str) -> String {
        self.find(&format!("{name} to report idle"), |kind| match kind {
            pb::event::Kind::Envelope(e) if e.from == name => match &e.body {
                Some(pb::envelope::Body::IdleNotification(idle)) => Some(idle.reason.clone()),
                _ => None,
            },
            _ => None,
        })
        .await
    }

    /// The next event that shows member `name` in `status`.
    pub async fn member_in(&mut self, name: &str, status: pb::MemberStatus) -> pb::Member {
        let what = format!("{name} to be {}", status.as_str_name());
        self.member(&what, |m| m.name == name && m.status == status as i32)
            .await
    }

    /// The next member state that matches.
    pub async fn member(
        &mut self,
        what: &str,
        mut pred: impl FnMut(&pb::Member) -> bool,
    ) -> pb::Member {
        self.find(what, |kind| match kind {
            pb::event::Kind::Member(m) if pred(m) => Some(m.clone()),
            _ => None,
        })
        .await
    }
}

/// `status` as an int for comparisons with the generated enums.
pub fn is(status: i32, expected: pb::RequestStatus) -> bool {
    status == expected as i32
}

/// Whether any process's command line contains `needle` as one argument.
pub fn process_running(needle: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.filter_map(Result::ok).any(|entry| {
        std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmdline| {
            cmdline
                .split(|b| *b == 0)
                .any(|arg| arg == needle.as_bytes())
        })
    })
}

/// A TCP proxy that forwards until it is frozen; then it stops forwarding
/// but keeps every socket open, as a network that vanished would (no FIN, no
/// RST).
pub struct FreezingProxy {
    /// Where clients connect.
    pub addr: std::net::SocketAddr,
    /// Turns true to freeze.
    freeze: tokio::sync::watch::Sender<bool>,
    /// The accepting task.
    task: tokio::task::JoinHandle<()>,
}

impl FreezingProxy {
    /// Starts one in front of `target`.
    pub async fn start(target: std::net::SocketAddr) -> FreezingProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (freeze, frozen) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let mut frozen = frozen.clone();
                tokio::spawn(async move {
                    let Ok(mut upstream) = tokio::net::TcpStream::connect(target).await else {
                        return;
                    };
                    let freezing = async {
                        while !*frozen.borrow_and_update() {
                            if frozen.changed().await.is_err() {
                                return;
                            }
                        }
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => return,
                        () = freezing => {}
                    }
                    // Hold both sockets open, silent, until the test ends.
                    std::future::pending::<()>().await;
                    drop((client, upstream));
                });
            }
        });
        FreezingProxy { addr, freeze, task }
    }

    /// From now on nothing passes, and nothing closes.
    pub fn freeze(&self) {
        let _ = self.freeze.send(true);
    }
}

impl Drop for FreezingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Approves plan `id` as an operator would: the default grant, holds or not.
pub async fn approve(operator: &mut Operator, id: &str) {
    within(
        "ReviewPlan",
        operator.review_plan(pb::PlanReview {
            request_id: id.into(),
            approve: true,
            ..Default::default()
        }),
    )
    .await
    .expect("ReviewPlan");
}

/// Every member, as `ListTeam` has them.
pub async fn team(operator: &mut Operator) -> Vec<pb::Member> {
    within(
        "ListTeam",
        operator.list_team(pb::ListTeamRequest::default()),
    )
    .await
    .expect("ListTeam")
    .into_inner()
    .members
}

/// The member called `name`, as `ListTeam` has it.
pub async fn member_named(operator: &mut Operator, name: &str) -> pb::Member {
    let team = team(operator).await;
    team.into_iter()
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("no member {name}"))
}
