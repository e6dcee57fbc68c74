//! The grant binds the command too: real escape attempts through a granted
//! `run_command`, each judged from outside (a file that appears, a listener
//! that hears a connection, a process that dies, a secret that shows up),
//! and the legitimate work beside them. Everything lives in a directory in
//! the user's home, not under `/tmp`: the lead's state dir (`.mesh`, its
//! token files written as `lead serve` writes them), a private file, the team
//! repository and the teammate's worktree.
//!
//! Under default flags (`--sandbox auto`: Landlock here), under Landlock
//! alone (no bwrap on `PATH`, and a seccomp filter in the teammate's own
//! process that refuses user namespaces, as in a container or under
//! AppArmor's restriction), and under `--sandbox bwrap`: no attempt gets
//! through. Under `--sandbox none` the same attempts are made again, and the
//! ones an unconfined command can make do get through: the judges see what
//! they are meant to. Each run prints its row of docs/security.md's table.

use std::{
    collections::BTreeMap,
    net::{TcpListener, UdpSocket},
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use mesh_tests::{bin, process_running, within, Events, Lead};
use shared::pb;
use tokio::process::{Child, Command};

/// The attempts, in the order of the table.
const ATTEMPTS: [&str; 13] = [
    "read the lead's operator.token",
    "read a file elsewhere in the home directory",
    "write outside the workspace",
    "write a workspace file the grant does not name",
    "create a workspace file the grant does not name",
    "connect to a loopback TCP port",
    "send a UDP datagram",
    "kill -9 another process of the user",
    "read /proc/LEAD/environ",
    "leave a setsid process behind",
    "move a branch of the team repository",
    "read a lead's state dir inside the workspace",
    "connect to a UNIX socket of the user's",
];

/// The legitimate work, each of which must succeed.
const WORK: [&str; 5] = [
    "write the granted file",
    "run python3",
    "ls /usr/bin",
    "git status in the worktree",
    "the project's own test command",
];

/// How the teammate is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Setup {
    /// No `--sandbox` flag.
    Default,
    /// No `bwrap` on `PATH`, user namespaces refused in its process.
    LandlockAlone,
    /// `--sandbox bwrap`.
    Bwrap,
    /// `--sandbox none`.
    Unconfined,
}

/// What the world outside looks like, set up in the user's home.
struct World {
    /// The directory in the home that holds everything (the lead's).
    root: PathBuf,
    lead: Lead,
    operator_token: String,
    environ_secret: String,
    home_secret: String,
    listener: TcpListener,
    udp: UdpSocket,
    unix: std::os::unix::net::UnixListener,
    victim: Child,
    marker: String,
}

impl World {
    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn workspace(&self) -> PathBuf {
        self.path("ws/ann")
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The lead (`--approval auto`, its state dir `.mesh` with the token files
/// it reads), the team repository with the teammate's worktree, a private
/// file, a listener, a UDP socket and a victim process.
async fn world() -> World {
    let home = std::env::var("HOME").expect("HOME");
    let dir = tempfile::Builder::new()
        .prefix("mesh-sandbox-")
        .tempdir_in(&home)
        .expect("a directory in the home");
    let root = dir.path().to_owned();
    let state = root.join(".mesh");
    std::fs::create_dir(&state).expect("state dir");
    std::fs::set_permissions(&state, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod");
    let join_token = shared::auth::new_token();
    let operator_token = shared::auth::new_token();
    std::fs::write(state.join("join.token"), &join_token).expect("join token");
    std::fs::write(state.join("operator.token"), &operator_token).expect("operator token");
    let home_secret = format!("home-secret-{}", uuid::Uuid::new_v4().simple());
    std::fs::create_dir(root.join("private")).expect("private");
    std::fs::write(root.join("private/notes.txt"), &home_secret).expect("secret");
    std::fs::create_dir(root.join("outside")).expect("outside");

    let repo = root.join("repo");
    std::fs::create_dir(&repo).expect("repo");
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "# project\n").expect("readme");
    std::fs::write(repo.join("other.txt"), "original\n").expect("other");
    std::fs::write(
        repo.join("test_sum.py"),
        "import unittest\n\nclass T(unittest.TestCase):\n    def test_sum(self):\n        self.assertEqual(sum([1, 2]), 3)\n",
    )
    .expect("test");
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "start"]);
    std::fs::create_dir(root.join("ws")).expect("ws");
    git(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "ann",
            &root.join("ws/ann").display().to_string(),
        ],
    );

    let environ_secret = format!("environ-secret-{}", uuid::Uuid::new_v4().simple());
    let mut command = Command::new(bin("lead"));
    command
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--approval",
            "auto",
            "--state-dir",
        ])
        .arg(&state)
        .env("RUST_LOG", "warn")
        .env("MESH_SANDBOX_TEST_SECRET", &environ_secret);
    let lead = Lead::spawn(command, dir, join_token, operator_token.clone()).await;

    let listener = TcpListener::bind("127.0.0.1:0").expect("listener");
    listener.set_nonblocking(true).expect("nonblocking");
    let udp = UdpSocket::bind("127.0.0.1:0").expect("udp");
    udp.set_nonblocking(true).expect("nonblocking");
    let unix = std::os::unix::net::UnixListener::bind(root.join("outside/service.sock"))
        .expect("unix listener");
    unix.set_nonblocking(true).expect("nonblocking");
    let victim = Command::new("sleep")
        .arg("1000")
        .kill_on_drop(true)
        .spawn()
        .expect("victim");
    World {
        root: lead.dir.path().canonicalize().expect("real"),
        lead,
        operator_token,
        environ_secret,
        home_secret,
        listener,
        udp,
        unix,
        victim,
        marker: format!("mesh-survivor-{}", uuid::Uuid::new_v4().simple()),
    }
}

/// The script: one plan naming `granted.txt`, the attempts, then the work.
fn script(world: &World) -> String {
    let root = &world.root;
    let lead_pid = world.lead.child.id().expect("lead pid");
    let tcp = world.listener.local_addr().expect("addr").port();
    let udp = world.udp.local_addr().expect("addr").port();
    let victim = world.victim.id().expect("victim pid");
    let attempts = [
        format!("cat {}/.mesh/operator.token | tee -a granted.txt", root.display()),
        format!("cat {}/private/notes.txt | tee -a granted.txt", root.display()),
        format!("echo pwned > {}/outside/pwned.txt", root.display()),
        "echo changed > other.txt".to_owned(),
        "echo new > new.txt; mkdir -p sub && echo new > sub/new.txt".to_owned(),
        format!(
            "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {tcp}), timeout=5)'"
        ),
        format!(
            "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b\"x\", (\"127.0.0.1\", {udp}))'"
        ),
        format!("kill -9 {victim}"),
        format!(
            "tr '\\0' '\\n' < /proc/{lead_pid}/environ | grep MESH_SANDBOX_TEST_SECRET | tee -a granted.txt"
        ),
        format!("setsid sh -c 'sleep 30; true' {} >/dev/null 2>&1 & sleep 0.2", world.marker),
        "git branch evil; git update-ref refs/heads/main HEAD~0 HEAD; echo 'gitdir: /nowhere' > .git".to_owned(),
        // Made by the second teammate, whose workspace is the lead's own.
        String::new(),
        format!(
            "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"{}/outside/service.sock\")'",
            root.display()
        ),
    ];
    let work = [
        "echo hello > granted.txt && cat granted.txt",
        "python3 -c 'print(6 * 7)'",
        "ls /usr/bin | grep -x python3",
        "git status",
        "python3 -m unittest test_sum",
    ];
    let mut toml = String::from(
        "[[plans]]\nsummary = \"Try every way out, then do the work\"\nfiles = [\"granted.txt\"]\n",
    );
    let mut action = |tag: String, command: &str| {
        toml.push_str(&format!(
            "\n[[actions]]\nphase = \"work\"\ntool = \"run_command\"\ncommand = '''\n: {tag}; {command}'''\n"
        ));
    };
    // The work first: unconfined, the attempts break the worktree.
    for (i, command) in work.iter().enumerate() {
        action(format!("work-{i}"), command);
    }
    for (i, command) in attempts.iter().enumerate() {
        if !command.is_empty() {
            action(format!("attempt-{i}"), command);
        }
    }
    toml
}

/// A seccomp filter that refuses to make namespaces (`unshare`, `setns`,
/// `clone` with a namespace flag; `clone3` answered ENOSYS), as a container
/// or AppArmor's restriction does: bubblewrap cannot start under it.
fn no_namespaces() -> [seccompiler::BpfProgram; 2] {
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    let arch = TargetArch::try_from(std::env::consts::ARCH).expect("arch");
    let user = nix::libc::CLONE_NEWUSER as u64;
    let mut rules = BTreeMap::new();
    rules.insert(nix::libc::SYS_unshare, Vec::new());
    rules.insert(nix::libc::SYS_setns, Vec::new());
    rules.insert(
        nix::libc::SYS_clone,
        vec![SeccompRule::new(vec![SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(user),
            user,
        )
        .expect("condition")])
        .expect("rule")],
    );
    let compile = |rules, errno: i32| {
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(errno as u32),
            arch,
        )
        .expect("filter");
        seccompiler::BpfProgram::try_from(filter).expect("compile")
    };
    [
        compile(rules, nix::libc::EPERM),
        compile(
            BTreeMap::from([(nix::libc::SYS_clone3, Vec::new())]),
            nix::libc::ENOSYS,
        ),
    ]
}

/// Makes `command` start under [`no_namespaces`].
fn refusing_namespaces(command: &mut Command) {
    let filters = no_namespaces();
    // SAFETY: between fork and exec only prctl and seccomp run, on programs
    // compiled before the fork.
    unsafe {
        command.pre_exec(move || {
            for filter in &filters {
                seccompiler::apply_filter(filter)
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
            }
            Ok(())
        });
    }
}

/// `PATH` with each directory that holds `bwrap` replaced by one of links
/// to everything else in it.
fn path_without_bwrap(dir: &Path) -> String {
    let path = std::env::var_os("PATH").expect("PATH");
    let dirs: Vec<PathBuf> = std::env::split_paths(&path)
        .enumerate()
        .map(|(i, original)| {
            if !original.join("bwrap").exists() {
                return original;
            }
            let links = dir.join(format!("bin-{i}"));
            std::fs::create_dir_all(&links).expect("bin");
            for file in std::fs::read_dir(&original).into_iter().flatten().flatten() {
                if file.file_name() != "bwrap" {
                    let _ = std::os::unix::fs::symlink(file.path(), links.join(file.file_name()));
                }
            }
            links
        })
        .collect();
    std::env::join_paths(dirs)
        .expect("PATH")
        .to_string_lossy()
        .into_owned()
}

/// A teammate for `name` in `workspace` with `script`, started as `setup`.
fn teammate(world: &World, name: &str, workspace: &Path, script: &str, setup: Setup) -> Child {
    let script_path = world.path(&format!("{name}.toml"));
    std::fs::write(&script_path, script).expect("script");
    let mut command = Command::new(bin("teammate"));
    command
        .args(["--lead", &world.lead.url, "--name", name, "--workspace"])
        .arg(workspace)
        .arg("--script")
        .arg(&script_path)
        .env("MESH_JOIN_TOKEN", &world.lead.join_token)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    match setup {
        Setup::Default => {}
        Setup::Bwrap => {
            command.args(["--sandbox", "bwrap"]);
        }
        Setup::Unconfined => {
            command.args(["--sandbox", "none"]);
        }
        Setup::LandlockAlone => {
            command.env("PATH", path_without_bwrap(&world.root));
            refusing_namespaces(&mut command);
        }
    }
    command.spawn().expect("start teammate")
}

/// What one run found: for each attempt, whether it got through, and why.
type Row = BTreeMap<&'static str, (bool, String)>;

async fn run(setup: Setup) -> Row {
    let world = world().await;
    let mut operator = world.lead.operator().await;
    let mut events = Events::open(&mut operator).await;
    let ws = world.workspace();
    let script = script(&world);
    let mut ann = teammate(&world, "ann", &ws, &script, setup);

    // The second teammate works in the lead's own directory, which holds
    // its state dir `.mesh`.
    let bo_script = "[[plans]]\nsummary = \"Read the lead's tokens\"\nfiles = [\"bo.txt\"]\n\n\
        [[actions]]\nphase = \"work\"\ntool = \"run_command\"\n\
        command = ': attempt-11; cat .mesh/operator.token .mesh/join.token | tee -a bo.txt'\n";
    let mut bo = teammate(&world, "bo", &world.root, bo_script, setup);

    let mut outcomes: BTreeMap<String, pb::ToolCallReport> = BTreeMap::new();
    let expected = ATTEMPTS.len() + WORK.len();
    while outcomes.len() < expected {
        let call = events
            .tool_call("the commands' reports", |t| t.tool == "run_command")
            .await;
        let tag = call
            .args_json
            .split(": ")
            .nth(1)
            .and_then(|rest| rest.split(';').next())
            .unwrap_or_default()
            .to_owned();
        outcomes.insert(tag, call);
    }
    let all_outcomes: String = outcomes
        .values()
        .map(|c| c.outcome.clone())
        .collect::<Vec<_>>()
        .join("\n");
    let outcome = |i: usize| outcomes[&format!("attempt-{i}")].outcome.clone();

    // The legitimate work.
    for (i, what) in WORK.iter().enumerate() {
        let call = &outcomes[&format!("work-{i}")];
        assert!(
            call.allowed && call.outcome.contains("exit status: 0"),
            "{setup:?}: {what}: {}",
            call.outcome
        );
    }
    assert!(outcomes["work-1"].outcome.contains("42"));
    assert!(outcomes["work-3"].outcome.contains("On branch ann"));
    let granted = std::fs::read_to_string(ws.join("granted.txt")).expect("granted.txt");
    assert!(granted.starts_with("hello\n"), "{granted}");

    // The attempts, judged from outside.
    let mut row = Row::new();
    let mut judge = |i: usize, through: bool, why: String| {
        row.insert(ATTEMPTS[i], (through, why));
    };
    let leaked = |secret: &str| all_outcomes.contains(secret);
    judge(0, leaked(&world.operator_token), outcome(0));
    judge(1, leaked(&world.home_secret), outcome(1));
    judge(2, world.path("outside/pwned.txt").exists(), outcome(2));
    let other = std::fs::read_to_string(ws.join("other.txt")).expect("other.txt");
    judge(
        3,
        other != "original\n",
        format!("other.txt: {other:?}; {}", outcome(3)),
    );
    let made = ws.join("new.txt").exists() || ws.join("sub").exists();
    judge(4, made, outcome(4));
    judge(5, world.listener.accept().is_ok(), outcome(5));
    let mut buf = [0u8; 8];
    judge(6, world.udp.recv(&mut buf).is_ok(), outcome(6));
    let victim_dead = {
        let pid = world.victim.id().expect("pid");
        shared::procfs::Stat::of(&pid.to_string())
            .is_none_or(|stat| stat.field::<char>(3) == Some('Z'))
    };
    judge(7, victim_dead, outcome(7));
    judge(8, leaked(&world.environ_secret), outcome(8));
    let survived = within("the setsid survivor to be gone, or not", async {
        for _ in 0..100 {
            if !process_running(&world.marker) {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        true
    })
    .await;
    judge(9, survived, outcome(9));
    let branches = git(&world.path("repo"), &["branch", "--list", "evil"]);
    let pointer = std::fs::read_to_string(ws.join(".git")).expect(".git");
    judge(
        10,
        !branches.trim().is_empty() || pointer.contains("/nowhere"),
        outcome(10),
    );
    let bo_read = std::fs::read_to_string(world.path("bo.txt")).unwrap_or_default();
    judge(
        11,
        outcome(11).contains(&world.operator_token) || bo_read.contains(&world.operator_token),
        outcome(11),
    );

    judge(12, world.unix.accept().is_ok(), outcome(12));

    for (name, child) in [("ann", &mut ann), ("bo", &mut bo)] {
        let out = Command::new(bin("lead"))
            .args(["shutdown", name, "--state-dir"])
            .arg(world.path(".mesh"))
            .output()
            .await
            .expect("lead shutdown");
        assert!(out.status.success(), "lead shutdown {name}: {out:?}");
        let status = within("the teammate to exit", child.wait())
            .await
            .expect("wait");
        assert!(status.success(), "{name} exits 0, not {status:?}");
    }
    let shown: Vec<String> = row
        .iter()
        .map(|(what, (through, _))| {
            format!(
                "{what}: {}",
                if *through { "GOT THROUGH" } else { "stopped" }
            )
        })
        .collect();
    eprintln!("{setup:?}:\n  {}", shown.join("\n  "));
    row
}

fn assert_none_through(setup: Setup, row: &Row) {
    let through: Vec<String> = row
        .iter()
        .filter(|(_, (through, _))| *through)
        .map(|(what, (_, why))| format!("{what}: {why}"))
        .collect();
    assert!(
        through.is_empty(),
        "{setup:?}: got through:\n{}",
        through.join("\n")
    );
}

#[tokio::test]
async fn under_default_flags_no_attempt_gets_through() {
    let row = run(Setup::Default).await;
    assert_none_through(Setup::Default, &row);
}

#[tokio::test]
async fn without_bwrap_and_user_namespaces_landlock_alone_confines() {
    // The setup itself: bubblewrap cannot start under the filter.
    let mut probe = Command::new("bwrap");
    refusing_namespaces(&mut probe);
    let out = probe
        .args(["--ro-bind", "/", "/", "--unshare-user", "true"])
        .output()
        .await
        .expect("bwrap is installed (tests/run installs bubblewrap)");
    assert!(!out.status.success(), "bwrap started under the filter");

    let row = run(Setup::LandlockAlone).await;
    assert_none_through(Setup::LandlockAlone, &row);
}

#[tokio::test]
async fn under_bwrap_no_attempt_gets_through() {
    let row = run(Setup::Bwrap).await;
    assert_none_through(Setup::Bwrap, &row);
}

/// Unconfined, asked for by name: the attempts that a command of the same
/// user can make get through, which shows that each judge sees an escape.
#[tokio::test]
async fn unconfined_the_same_attempts_get_through() {
    let row = run(Setup::Unconfined).await;
    // What stops this one is not the sandbox: the teammate reaps what left
    // the command's group.
    for what in ATTEMPTS
        .iter()
        .filter(|w| **w != "leave a setsid process behind")
    {
        assert!(
            row[what].0,
            "unconfined, {what} was stopped: {}",
            row[what].1
        );
    }
}
