//! Two leads on one real PostgreSQL (issue 36): one leads, the other
//! stands by and names the active lead to every caller; a SIGTERM hands
//! over at once; a paused lead writes nothing after the takeover and steps
//! down; the database restarted under load loses nothing answered as
//! durable, and the lead serves again on its own; the audit chain verifies
//! across a takeover.

use std::time::{Duration, Instant};

use mesh_tests::{bin, pg::PgServer, signal, within, Lead};
use nix::sys::signal::Signal;
use shared::pb::{self, operator_client::OperatorClient};
use tokio::io::AsyncBufReadExt as _;
use tonic::codegen::StdError;

/// What an operator client may run over: a channel to one lead, or one
/// that follows the active lead.
trait Transport:
    tonic::client::GrpcService<
    tonic::body::Body,
    Error: Into<StdError>,
    ResponseBody: tonic::codegen::Body<
        Data = tonic::codegen::Bytes,
        Error: Into<StdError> + Send,
    > + Send
                      + 'static,
>
{
}

impl<T> Transport for T where
    T: tonic::client::GrpcService<
        tonic::body::Body,
        Error: Into<StdError>,
        ResponseBody: tonic::codegen::Body<
            Data = tonic::codegen::Bytes,
            Error: Into<StdError> + Send,
        > + Send
                          + 'static,
    >
{
}

/// A lead on the database at `db` with a lease of `lease` seconds, sharing
/// the tokens of `like` (when given), without a console.
async fn lead_on(db: &str, lease: &str, like: Option<&Lead>) -> Lead {
    lead_with(db, lease, like, &["--http", "off"]).await
}

/// [`lead_on`] with `extra` flags.
async fn lead_with(db: &str, lease: &str, like: Option<&Lead>, extra: &[&str]) -> Lead {
    let (join, operator) = match like {
        Some(lead) => (lead.join_token.clone(), lead.operator_token.clone()),
        None => (shared::auth::new_token(), shared::auth::new_token()),
    };
    let dir = tempfile::tempdir().expect("tempdir");
    Lead::start_in(
        dir,
        "127.0.0.1:0",
        join,
        operator,
        &[&["--store", db, "--lease", lease], extra].concat(),
    )
    .await
}

/// `lead status --lead URLS`: whether it succeeded, and what it printed.
async fn status(lead: &Lead, urls: &[&str]) -> (bool, String) {
    let (ok, out, err) = lead.cli(&["status", "--lead", &urls.join(",")]).await;
    (ok, format!("{out}{err}"))
}

/// The row of `lead status` output for `url`.
fn row<'a>(out: &'a str, url: &str) -> &'a str {
    out.lines()
        .find(|line| line.starts_with(&format!("{url} ")))
        .unwrap_or_else(|| panic!("no row for {url} in\n{out}"))
}

async fn add_task<T: Transport>(
    operator: &mut OperatorClient<T>,
    subject: &str,
) -> Result<String, tonic::Status> {
    operator
        .create_task(pb::CreateTaskRequest {
            subject: subject.into(),
            ..Default::default()
        })
        .await
        .map(|r| r.into_inner().task_id)
}

async fn subjects<T: Transport>(operator: &mut OperatorClient<T>) -> Vec<String> {
    let tasks = within(
        "ListTasks",
        operator.list_tasks(pb::ListTasksRequest::default()),
    )
    .await
    .expect("ListTasks")
    .into_inner()
    .tasks;
    tasks.into_iter().map(|t| t.subject).collect()
}

/// Approves a plan `name` submits on `lead`: the request id.
async fn plan_approved(lead: &Lead, name: &str) -> String {
    let mut member = lead.join(name).await;
    let id = member
        .submit("", &format!("{name}'s plan"), &[&format!("src/{name}.rs")])
        .await
        .expect("SubmitPlan");
    lead.operator()
        .await
        .review_plan(pb::PlanReview {
            request_id: id.clone(),
            approve: true,
            grant: Some(pb::PermissionGrant {
                mode: pb::PermissionMode::AcceptEdits as i32,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("ReviewPlan");
    id
}

#[tokio::test]
async fn a_standby_names_the_active_lead_and_a_sigterm_hands_over_at_once() {
    let server = PgServer::start();
    let db = server.database();
    // A lease far longer than the test may wait: the standby can only
    // take over this soon because the active lead resigned.
    let console = ["--http", "127.0.0.1:0"];
    let mut a = lead_with(&db, "120", None, &console).await;
    a.says("leading (epoch 1)").await;
    let mut b = lead_with(&db, "120", Some(&a), &console).await;
    b.says(&format!("leads at {} (epoch 1)", a.url)).await;
    let (a_console, b_console) = (
        a.console.clone().expect("a console"),
        b.console.clone().expect("a console"),
    );

    let refused = b
        .operator()
        .await
        .list_tasks(pb::ListTasksRequest::default())
        .await
        .expect_err("a standby serves nothing");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert_eq!(
        refused
            .metadata()
            .get("mesh-leader")
            .and_then(|v| v.to_str().ok()),
        Some(a.url.as_str()),
        "the standby names the active lead"
    );
    // `lead status` asks each lead.
    let (ok, out) = status(&a, &[&a.url, &b.url]).await;
    println!("{out}");
    assert!(ok, "{out}");
    assert!(row(&out, &a.url).contains(" active "), "{out}");
    assert!(row(&out, &a.url).contains("postgres://"), "{out}");
    assert!(row(&out, &a.url).contains("expires in"), "{out}");
    assert!(row(&out, &b.url).contains(" standby "), "{out}");
    assert!(row(&out, &b.url).contains(" 1 "), "the epoch: {out}");
    assert!(out.contains(&format!("active: {}", a.url)), "{out}");
    // The standby's console says so, and links to the active lead's.
    let http = mesh_tests::webdriver::http_client(reqwest::Client::builder());
    let page = http
        .get(&b_console)
        .send()
        .await
        .expect("the standby's console");
    assert_eq!(page.status(), reqwest::StatusCode::SERVICE_UNAVAILABLE);
    let page = page.text().await.expect("page");
    assert!(page.contains("This lead is a standby"), "{page}");
    assert!(page.contains(&format!("href=\"{a_console}\"")), "{page}");
    let api: serde_json::Value = http
        .get(format!("{b_console}api/state"))
        .send()
        .await
        .expect("the standby's api")
        .json()
        .await
        .expect("json");
    assert_eq!(api["role"], "standby", "{api}");
    assert_eq!(api["leader"], a.url.as_str(), "{api}");
    // `lead watch`, given both leads, follows the takeover.
    let mut watch = a
        .cli_command(&["watch", "--lead", &format!("{},{}", a.url, b.url)])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("lead watch");
    let mut watched = tokio::io::BufReader::new(watch.stdout.take().expect("stdout")).lines();
    let mut watch_said = tokio::io::BufReader::new(watch.stderr.take().expect("stderr")).lines();
    let ready = within("lead watch to start", watch_said.next_line())
        .await
        .expect("stderr")
        .expect("a line");
    assert!(ready.starts_with("watching the lead"), "{ready}");

    let mut operator = a.operator().await;
    add_task(&mut operator, "written by a")
        .await
        .expect("CreateTask");
    let approved_on_a = plan_approved(&a, "ann").await;

    let sent = Instant::now();
    signal(&a.child, Signal::SIGTERM);
    a.says("resigned the lease (epoch 1)").await;
    b.says("leading (epoch 2)").await;
    let mut operator = b.operator().await;
    let tasks = subjects(&mut operator).await;
    println!(
        "SIGTERM to the standby serving: {} ms",
        sent.elapsed().as_millis()
    );
    assert_eq!(
        tasks,
        ["written by a"],
        "the team restored from the database"
    );
    // Once `lead watch` follows, what the new lead does shows there.
    let followed = within("lead watch to follow", async {
        loop {
            let line = watch_said
                .next_line()
                .await
                .expect("stderr")
                .expect("a line");
            if line.starts_with("watching the active lead") {
                return line;
            }
        }
    })
    .await;
    println!("{followed}");
    let approved_on_b = plan_approved(&b, "bob").await;
    let line = within("lead watch to show an event of the new lead", async {
        loop {
            let line = watched.next_line().await.expect("stdout").expect("a line");
            if line.contains("bob") {
                return line;
            }
        }
    })
    .await;
    println!("{line}");
    let (ok, out) = status(&b, &[&a.url, &b.url]).await;
    println!("{out}");
    assert!(ok, "{out}");
    assert!(row(&out, &a.url).contains("unreachable"), "{out}");
    assert!(row(&out, &b.url).contains(" active "), "{out}");
    assert!(row(&out, &b.url).contains(" 2 "), "the epoch: {out}");
    let page = http.get(&b_console).send().await.expect("the console");
    assert_ne!(
        page.status(),
        reqwest::StatusCode::SERVICE_UNAVAILABLE,
        "the new lead's console serves"
    );

    // One chain across the takeover.
    let (ok, out, err) = b.cli(&["audit", "export", "--json"]).await;
    assert!(ok, "{err}");
    assert!(
        out.contains(&approved_on_a) && out.contains(&approved_on_b),
        "{out}"
    );
    let file = b.dir.path().join("trail.jsonl");
    std::fs::write(&file, &out).expect("write");
    let verified = std::process::Command::new(bin("lead"))
        .args(["audit", "verify"])
        .arg(&file)
        .output()
        .expect("verify");
    assert!(
        verified.status.success(),
        "{}{}",
        String::from_utf8_lossy(&verified.stdout),
        String::from_utf8_lossy(&verified.stderr)
    );
}

#[tokio::test]
async fn a_paused_lead_writes_nothing_after_the_takeover_sends_no_one_anything_and_steps_down() {
    let server = PgServer::start();
    let db = server.database();
    let mut a = lead_on(&db, "3", None).await;
    a.says("leading (epoch 1)").await;
    let mut b = lead_on(&db, "3", Some(&a)).await;
    b.says("(epoch 1); taking over").await;
    // Connections to A, open before it is paused: an operator's, and two
    // members', tom reading his inbox.
    let mut late = a.operator().await;
    subjects(&mut late).await;
    // And a client that follows the lead, given A alone.
    let mut follower = a.following_operator(&[]);
    subjects(&mut follower).await;
    let mut tom = a.join("tom").await;
    let mut ann = a.join("ann").await;
    ann.send("tom", "before the pause", "").await.expect("Send");
    let before = tom.next().await;
    assert!(format!("{before:?}").contains("before the pause"));

    let paused = Instant::now();
    signal(&a.child, Signal::SIGSTOP);
    // Calls that reach A while it is paused: they wait in its socket.
    let call = tokio::spawn(async move {
        let answer = add_task(&mut late, "from the paused lead").await;
        (answer, paused.elapsed())
    });
    let sent = tokio::spawn(async move {
        let answer = ann.send("tom", "during the pause", "").await;
        (answer, paused.elapsed())
    });
    b.says("leading (epoch 2)").await;
    let took_over = paused.elapsed();
    let mut operator = b.operator().await;
    add_task(&mut operator, "from the new lead")
        .await
        .expect("the new lead writes");

    let continued = paused.elapsed();
    signal(&a.child, Signal::SIGCONT);
    let stepped = a.says("stepped down: ").await;
    println!("{stepped}");
    let (answered, answered_at) = within("the paused call's answer", call)
        .await
        .expect("join");
    assert!(
        answered.is_err(),
        "the paused lead answered a write after the takeover: {answered:?}, {answered_at:?} \
         after the pause (B led at {took_over:?}, A went on at {continued:?}); tasks kept: {}, \
         lease: {}",
        server.psql(
            &db,
            "SELECT count(*) FROM tasks WHERE position('from the paused lead'::bytea in body) > 0"
        ),
        server.psql(&db, "SELECT holder, epoch, expires_at FROM lease"),
    );
    let (delivered, delivered_at) = within("the paused send's answer", sent)
        .await
        .expect("join");
    assert!(
        delivered.is_err(),
        "the paused lead accepted a message after the takeover: {delivered:?}, {delivered_at:?} \
         after the pause (B led at {took_over:?}, A went on at {continued:?}); kept: {}, lease: {}",
        server.psql(
            &db,
            "SELECT count(*) FROM envelopes WHERE position('during the pause'::bytea in body) > 0"
        ),
        server.psql(&db, "SELECT holder, epoch, expires_at FROM lease"),
    );
    // Tom's stream from A ends without another envelope.
    let inbox = tom.inbox.as_mut().expect("open inbox");
    let ended = within("tom's stream from the old lead to end", inbox.message()).await;
    assert!(
        !matches!(ended, Ok(Some(_))),
        "the old lead sent tom {ended:?}"
    );
    println!("tom's stream from the old lead ended: {ended:?}");
    a.says(&format!("leads at {} (epoch 2)", b.url)).await;
    // The following client's next call reaches A, a standby now, which
    // names B: the call goes there, done once.
    add_task(&mut follower, "sent to A, done by B")
        .await
        .expect("a call a standby answered goes on to the active lead");

    assert_eq!(
        subjects(&mut operator).await,
        ["from the new lead", "sent to A, done by B"]
    );
    assert_eq!(
        server.psql(&db, "SELECT count(*) FROM tasks"),
        "2\n",
        "no write of the old lead's after the takeover"
    );
    assert!(server
        .psql(&db, "SELECT holder, epoch FROM lease")
        .ends_with("|2\n"));
    // The message sent during the pause is nowhere: the new lead has only
    // what A committed before it.
    let mut tom_on_b = b.lead_api(&tom.token).await;
    let mut stream = tom_on_b
        .inbox(pb::InboxRequest {
            after_seq: before.seq,
        })
        .await
        .expect("tom's inbox on the new lead")
        .into_inner();
    // Something to find at the end of tom's inbox on B.
    let mut bob = b.join("bob").await;
    bob.send("tom", "from the new lead", "")
        .await
        .expect("Send");
    let next = within("tom's next envelope on B", stream.message())
        .await
        .expect("stream")
        .expect("an envelope");
    assert!(
        format!("{next:?}").contains("from the new lead"),
        "tom's inbox on the new lead holds a message of the old lead's after the takeover: {next:?}"
    );
}

#[tokio::test]
async fn the_database_restarted_under_load_loses_nothing_answered_and_the_lead_comes_back() {
    let server = PgServer::start();
    let db = server.database();
    let mut lead = lead_on(&db, "3", None).await;
    lead.says("leading (epoch 1)").await;
    // Calls go as the `lead` CLI and the teammate send them.
    let mut operator = lead.following_operator(&[]);
    let mut answered = Vec::new();
    let mut refused = Vec::new();
    let mut restarted = false;
    let mut after_restart = 0;
    let mut n = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while after_restart < 20 {
        assert!(
            Instant::now() < deadline,
            "the lead did not serve again within a minute of the restart ({} refused: {:?})",
            refused.len(),
            refused.last()
        );
        n += 1;
        let subject = format!("task {n}");
        match add_task(&mut operator, &subject).await {
            Ok(_) => {
                answered.push(subject);
                if restarted {
                    after_restart += 1;
                }
            }
            Err(status) => {
                assert!(restarted, "refused before the restart: {status:?}");
                // From the lead, or from a connection the lead closed
                // as it stepped down: either way UNAVAILABLE.
                assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
                refused.push(status.message().to_owned());
            }
        }
        if n == 30 {
            server.restart();
            restarted = true;
        }
    }
    println!(
        "{} calls answered, {} refused while the database restarted: {refused:?}",
        answered.len(),
        refused.len()
    );
    let kept = subjects(&mut operator).await;
    for subject in &answered {
        assert!(kept.contains(subject), "{subject} was answered but is lost");
    }
}

/// `lead serve --store postgres://...` started by hand, as a client that
/// does not follow leaders sees it: the moment `listening on` is printed on
/// a fresh database, `lead.addr` is written and a call is served, with no
/// retry; a second lead prints `listening on` first, then `standby;
/// active: URL`; SIGTERM ends each with status 0, and the first one's
/// lease is free after it.
#[tokio::test]
async fn a_lead_on_a_fresh_database_serves_the_moment_it_says_it_listens() {
    use tokio::io::BufReader;
    let server = PgServer::start();
    let db = server.database();
    let operator_token = shared::auth::new_token();
    let start = |dir: &std::path::Path| {
        let mut command = tokio::process::Command::new(bin("lead"));
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--http", "off"])
            .args(["--store", &db, "--state-dir"])
            .arg(dir)
            .env("MESH_OPERATOR_TOKEN", &operator_token)
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("start lead");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        (child, lines)
    };
    let first_dir = tempfile::tempdir().expect("tempdir");
    let (mut first, mut first_lines) = start(first_dir.path());
    let line = within("the first line", first_lines.next_line())
        .await
        .expect("read")
        .expect("a line");
    let addr = line
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("{line}"))
        .to_owned();
    assert!(first_dir.path().join("lead.addr").exists());
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    let mut client = OperatorClient::with_interceptor(
        channel,
        shared::auth::BearerToken::new(&operator_token).expect("token"),
    );
    let team = client
        .list_team(pb::ListTeamRequest::default())
        .await
        .expect("served at once, no retry");
    assert!(team.into_inner().members.is_empty());
    let (ok, out, err) = {
        let out = tokio::process::Command::new(bin("lead"))
            .args(["team", "--state-dir"])
            .arg(first_dir.path())
            .env("MESH_OPERATOR_TOKEN", &operator_token)
            .output()
            .await
            .expect("lead team");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert!(ok, "lead team found no lead: {out}{err}");

    let second_dir = tempfile::tempdir().expect("tempdir");
    let (mut second, mut second_lines) = start(second_dir.path());
    let mut said = Vec::new();
    for _ in 0..2 {
        let line = within("the second lead's lines", second_lines.next_line())
            .await
            .expect("read")
            .expect("a line");
        said.push(line);
    }
    let (listening, standby) = (&said[0], &said[1]);
    assert!(listening.starts_with("listening on "), "{listening}");
    assert_eq!(*standby, format!("standby; active: http://{addr}"));

    for (child, what) in [
        (&mut second, "the standby"),
        (&mut first, "the active lead"),
    ] {
        signal(child, Signal::SIGTERM);
        let status = within("the lead to exit", child.wait())
            .await
            .expect("wait");
        assert_eq!(status.code(), Some(0), "{what} exits 0, not {status:?}");
    }
    let free = server.psql(&db, "SELECT expires_at < now() FROM lease");
    assert_eq!(free.trim(), "t", "the lease is free");
}

/// Whether the lease is free (resigned or lapsed), and its epoch.
fn lease_row(server: &PgServer, db: &str) -> (bool, String) {
    let row = server.psql(
        db,
        "SELECT expires_at < clock_timestamp(), epoch FROM lease",
    );
    let (free, epoch) = row.trim().split_once('|').expect("free|epoch");
    (free == "t", epoch.to_owned())
}

/// A SIGTERM at each moment of start-up a script can see: the moment it
/// says it listens (the lease just taken, the team not yet restored), the
/// moment it says it leads, and as a standby. Each ends with status 0; a
/// lead that took the lease lets it go (a standby takes over at once), a
/// standby leaves the active lead's alone.
#[tokio::test]
async fn a_sigterm_at_any_moment_of_start_up_ends_with_status_0_and_the_lease_free() {
    let server = PgServer::start();
    let db = server.database();
    for (round, moment) in ["listening on ", "leading ("].into_iter().enumerate() {
        let mut lead = lead_on(&db, "3", None).await;
        if moment != "listening on " {
            lead.says(moment).await;
        }
        let status = lead.terminate().await;
        assert_eq!(status.code(), Some(0), "after {moment:?}: {status:?}");
        let (free, epoch) = lease_row(&server, &db);
        assert!(free, "the lease is free after a SIGTERM after {moment:?}");
        assert_eq!(epoch, (round + 1).to_string());
    }
    let mut active = lead_on(&db, "3", None).await;
    active.says("leading (epoch 3)").await;
    let mut standby = lead_on(&db, "3", Some(&active)).await;
    standby.says("standby; active: ").await;
    let status = standby.terminate().await;
    assert_eq!(status.code(), Some(0), "a standby: {status:?}");
    assert_eq!(lease_row(&server, &db), (false, "3".into()));
    let status = active.terminate().await;
    assert_eq!(status.code(), Some(0), "the active lead: {status:?}");
    assert_eq!(lease_row(&server, &db), (true, "3".into()));
}

/// The keeper renews on time while two busy loops hold both cores: the
/// database notes each renewal (a trigger on the lease row), and no gap
/// between two reaches the renew deadline (two thirds of the default lease
/// of 3 s), so the lead never steps down.
#[tokio::test]
async fn the_lease_is_renewed_on_time_on_a_saturated_machine() {
    let server = PgServer::start();
    let db = server.database();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut lead = Lead::start_in(
        dir,
        "127.0.0.1:0",
        shared::auth::new_token(),
        shared::auth::new_token(),
        &["--store", &db, "--http", "off"],
    )
    .await;
    lead.says("leading (epoch 1)").await;
    server.psql(
        &db,
        "CREATE TABLE renewals (at timestamptz NOT NULL);
         CREATE FUNCTION note_renewal() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN INSERT INTO renewals VALUES (clock_timestamp()); RETURN NULL; END $$;
         CREATE TRIGGER noted AFTER UPDATE ON lease FOR EACH ROW EXECUTE FUNCTION note_renewal();",
    );
    let busy: Vec<_> = (0..2)
        .map(|_| {
            tokio::process::Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .kill_on_drop(true)
                .spawn()
                .expect("a busy loop")
        })
        .collect();
    // The window watched: four leases' time, both cores busy throughout.
    tokio::time::sleep(Duration::from_secs(12)).await;
    drop(busy);
    let row = server.psql(
        &db,
        "SELECT count(*), coalesce(max(gap), 0) FROM (
             SELECT EXTRACT(EPOCH FROM at - lag(at) OVER (ORDER BY at))::float8 AS gap
             FROM renewals) g",
    );
    let (count, gap) = row.trim().split_once('|').expect("count|gap");
    let (count, gap): (u32, f64) = (count.parse().expect("count"), gap.parse().expect("gap"));
    println!("{count} renewals in 12 s beside two busy loops; the longest gap {gap:.3} s");
    assert!(count >= 10, "renewals every 0.6 s: {count} in 12 s");
    assert!(gap < 2.0, "a renewal came {gap:.3} s after the last");
    assert_eq!(
        lease_row(&server, &db),
        (false, "1".into()),
        "never stepped down"
    );
    let status = lead.terminate().await;
    assert_eq!(status.code(), Some(0));
}
