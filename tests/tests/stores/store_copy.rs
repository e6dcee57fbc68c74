//! `lead store copy` (issue 36): a team started on SQLite moves to a real
//! PostgreSQL and a lead there restores the same members, requests, tasks,
//! unacknowledged messages, event history and audit trail; a running lead's
//! state dir, a database that holds a team and one a lead leads on are
//! refused; a copy that does not read back the same is undone.

use std::{path::Path, time::Duration};

use mesh_tests::{approve, bin, pg::PgServer, team, webdriver::http_client, within, Lead, Member};
use serde_json::Value;
use shared::pb;

/// Runs `lead store copy --from FROM` with `args` and `env`: (success,
/// stdout, stderr).
async fn store_copy(from: &Path, args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let mut command = tokio::process::Command::new(bin("lead"));
    command
        .args(["store", "copy", "--from"])
        .arg(from)
        .args(args)
        .env_remove("MESH_STORE_URL")
        .envs(env.iter().copied())
        .kill_on_drop(true);
    let out = within("lead store copy", command.output())
        .await
        .expect("run lead store copy");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What a lead shows of its team, over the wire.
#[derive(Debug, PartialEq)]
struct View {
    /// Every member, without what a restart changes (its connection).
    members: Vec<pb::Member>,
    requests: Vec<pb::ProtocolState>,
    tasks: Vec<pb::Task>,
    /// The console's event history, oldest first: (id, event).
    history: Vec<(u64, Value)>,
    /// `lead audit export --json`.
    audit: String,
}

async fn view(lead: &Lead) -> View {
    let mut operator = lead.operator().await;
    let mut members = team(&mut operator).await;
    for member in &mut members {
        member.status = 0;
        member.joining = false;
    }
    let requests = within(
        "ListRequests",
        operator.list_requests(pb::ListRequestsRequest::default()),
    )
    .await
    .expect("ListRequests")
    .into_inner()
    .requests;
    let tasks = within(
        "ListTasks",
        operator.list_tasks(pb::ListTasksRequest::default()),
    )
    .await
    .expect("ListTasks")
    .into_inner()
    .tasks;
    let (ok, audit, err) = lead.cli(&["audit", "export", "--json"]).await;
    assert!(ok, "{err}");
    View {
        members,
        requests,
        tasks,
        history: history(lead).await,
        audit,
    }
}

/// Every entry of the console's event history, oldest first.
async fn history(lead: &Lead) -> Vec<(u64, Value)> {
    let http = http_client(reqwest::Client::builder());
    let console = lead.console.clone().expect("the console is on");
    let mut entries = Vec::new();
    let mut before = None;
    loop {
        let mut url = format!("{console}api/history?limit=500");
        if let Some(before) = before {
            url.push_str(&format!("&before={before}"));
        }
        let page = within(
            "the history",
            http.get(url).bearer_auth(&lead.operator_token).send(),
        )
        .await
        .expect("GET api/history");
        let page: Value =
            serde_json::from_slice(&page.bytes().await.expect("a body")).expect("JSON");
        for entry in page["entries"].as_array().expect("entries") {
            entries.push((entry["id"].as_u64().expect("an id"), entry["event"].clone()));
        }
        match page["next_before"].as_u64() {
            Some(next) => before = Some(next),
            None => break,
        }
    }
    entries.reverse();
    entries
}

/// The text of a text envelope.
fn text(envelope: &pb::Envelope) -> Option<&str> {
    match &envelope.body {
        Some(pb::envelope::Body::Text(text)) => Some(&text.content),
        _ => None,
    }
}

/// `name` with the session token it had on the lead before.
async fn again(lead: &Lead, member: &Member) -> Member {
    Member {
        name: member.name.clone(),
        token: member.token.clone(),
        api: lead.lead_api(&member.token).await,
        inbox: None,
    }
}

/// A team on SQLite: three members, a plan approved (a hold), one
/// rejected, one pending, direct and broadcast messages (some
/// acknowledged), a retried message id, tasks (one claimed), a budget.
/// Returns the members and, of ann's inbox, the envelopes not acknowledged.
async fn fill(lead: &Lead) -> (Vec<Member>, Vec<pb::Envelope>) {
    let mut operator = lead.operator().await;
    let mut ann = lead.join("ann").await;
    let mut bob = lead.join("bob").await;
    let mut cat = lead.join("cat").await;
    let approved = ann
        .submit("", "ann's plan", &["src/ann.rs"])
        .await
        .expect("SubmitPlan");
    approve(&mut operator, &approved).await;
    let rejected = bob
        .submit("", "bob's plan", &["src/bob.rs"])
        .await
        .expect("SubmitPlan");
    within(
        "ReviewPlan",
        operator.review_plan(pb::PlanReview {
            request_id: rejected.clone(),
            approve: false,
            feedback: "add a test".into(),
            ..Default::default()
        }),
    )
    .await
    .expect("reject");
    cat.submit("", "cat's plan", &["docs/cat.md"])
        .await
        .expect("SubmitPlan");
    // ann reads and acknowledges the approval; what comes after, she does not.
    let answer = ann
        .next_matching(|e| {
            matches!(&e.body, Some(pb::envelope::Body::PlanApprovalResponse(r)) if r.request_id == approved)
        })
        .await;
    within("Ack", ann.api.ack(pb::AckRequest { seq: answer.seq }))
        .await
        .expect("Ack");
    ann.send("bob", "hello bob", "m-1").await.expect("Send");
    ann.send("bob", "hello bob", "m-1").await.expect("a retry");
    cat.send("ann", "for ann", "").await.expect("Send");
    bob.send("*", "hello all", "").await.expect("broadcast");
    let unacknowledged = vec![ann.next().await, ann.next().await];
    assert_eq!(
        unacknowledged.iter().map(text).collect::<Vec<_>>(),
        [Some("for ann"), Some("hello all")]
    );
    for subject in ["write the parser", "review the parser"] {
        within(
            "CreateTask",
            operator.create_task(pb::CreateTaskRequest {
                subject: subject.into(),
                files: vec!["src/parser.rs".into()],
                ..Default::default()
            }),
        )
        .await
        .expect("CreateTask");
    }
    within(
        "ClaimTask",
        cat.api.claim_task(pb::ClaimTaskRequest::default()),
    )
    .await
    .expect("ClaimTask");
    within(
        "SetBudget",
        operator.set_budget(pb::SetBudgetRequest {
            name: "bob".into(),
            token_budget: 50_000,
        }),
    )
    .await
    .expect("SetBudget");
    (vec![ann, bob, cat], unacknowledged)
}

#[tokio::test]
async fn a_team_copied_from_sqlite_restores_on_postgresql() {
    let server = PgServer::start();
    let db = server.database();
    let mut sqlite = Lead::start(&[]).await;
    let (members, unacknowledged) = fill(&sqlite).await;

    // A running lead's state dir is refused, and nothing is written.
    let (ok, _, err) = store_copy(&sqlite.state_dir(), &["--to", &db], &[]).await;
    assert!(!ok);
    assert!(
        err.contains("in use by another lead") && err.contains("stop that lead"),
        "{err}"
    );
    assert_eq!(
        server.psql(
            &db,
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ),
        "0\n"
    );

    let before = view(&sqlite).await;
    assert_eq!(before.members.len(), 3);
    assert_eq!(before.requests.len(), 3);
    assert_eq!(before.tasks.len(), 2);
    assert!(before.history.len() > 10, "{:?}", before.history);
    assert_eq!(before.audit.lines().count(), 3, "{}", before.audit);
    sqlite.terminate().await;

    let (ok, out, err) = store_copy(&sqlite.state_dir(), &["--to", &db], &[]).await;
    assert!(ok, "{out}{err}");
    println!("{out}");
    assert!(
        out.starts_with("copied 3 members, ") && out.trim_end().ends_with("every record checked"),
        "{out}"
    );
    assert!(
        out.contains(" 3 requests, ") && out.contains(" 2 tasks, "),
        "{out}"
    );
    assert!(out.contains(" 3 audit entries "), "{out}");
    // Every history event the lead wrote, even those after the last look.
    let events = server.psql(&db, "SELECT count(*) FROM history");
    assert!(
        out.contains(&format!(" {} history events, ", events.trim())),
        "{out}"
    );

    // Into a database that holds a team (URL from MESH_STORE_URL): refused,
    // and the team there is untouched.
    let (ok, _, err) = store_copy(&sqlite.state_dir(), &[], &[("MESH_STORE_URL", &db)]).await;
    assert!(!ok);
    assert!(err.contains("is not empty: it holds 3 members, "), "{err}");
    assert_eq!(server.psql(&db, "SELECT count(*) FROM members"), "3\n");

    // A copy that does not read back what it wrote (a trigger changes one
    // audit entry on its way in) names the first difference and leaves the
    // database empty, and its lease free.
    let tampered = server.database();
    let target = lead::store::PgTarget::parse("url", &tampered).expect("url");
    lead::store::Lease::connect(&target, "test", "", Duration::from_secs(1))
        .await
        .expect("the mesh tables");
    server.psql(
        &tampered,
        "CREATE FUNCTION tamper() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN NEW.entry := NEW.entry || ' '; RETURN NEW; END $$;
         CREATE TRIGGER tamper BEFORE INSERT ON audit FOR EACH ROW WHEN (NEW.seq = 2)
             EXECUTE FUNCTION tamper();",
    );
    let (ok, _, err) = store_copy(&sqlite.state_dir(), &["--to", &tampered], &[]).await;
    assert!(!ok);
    assert!(
        err.contains("nothing was copied: audit row 2 (2): column entry: SQLite has "),
        "{err}"
    );
    assert_eq!(
        server.psql(
            &tampered,
            "SELECT (SELECT count(*) FROM members) + (SELECT count(*) FROM audit)"
        ),
        "0\n"
    );
    assert_eq!(
        server.psql(&tampered, "SELECT holder, expires_at FROM lease"),
        "store-copy|-infinity\n"
    );

    // A lead on PostgreSQL, with the same tokens, restores the same team.
    let mut pg = Lead::start_in(
        tempfile::tempdir().expect("tempdir"),
        "127.0.0.1:0",
        sqlite.join_token.clone(),
        sqlite.operator_token.clone(),
        &["--store", &db, "--lease", "3"],
    )
    .await;
    pg.says("leading (epoch").await;
    let after = view(&pg).await;
    assert_eq!(after.members, before.members);
    assert_eq!(after.requests, before.requests);
    assert_eq!(after.tasks, before.tasks);
    assert_eq!(after.audit, before.audit, "the trail, byte for byte");
    let last = before.history.last().map_or(0, |(id, _)| *id);
    let restored: Vec<_> = after
        .history
        .iter()
        .filter(|(id, _)| *id <= last)
        .cloned()
        .collect();
    assert_eq!(restored, before.history, "the event history");

    // The trail still verifies.
    let file = pg.dir.path().join("trail.jsonl");
    std::fs::write(&file, &after.audit).expect("write");
    let verified = std::process::Command::new(bin("lead"))
        .args(["audit", "verify"])
        .arg(&file)
        .output()
        .expect("lead audit verify");
    assert!(
        verified.status.success(),
        "{}{}",
        String::from_utf8_lossy(&verified.stdout),
        String::from_utf8_lossy(&verified.stderr)
    );

    // The members' sessions hold, and what they had not acknowledged comes
    // again (and nothing they had).
    let mut ann = again(&pg, &members[0]).await;
    assert_eq!(ann.next().await, unacknowledged[0]);
    assert_eq!(ann.next().await, unacknowledged[1]);
    let mut bob = again(&pg, &members[1]).await;
    let hello = bob.next_matching(|e| text(e) == Some("hello bob")).await;
    assert_eq!(hello.from, "ann");
    let mut cat = again(&pg, &members[2]).await;
    let all = cat.next_matching(|e| text(e).is_some()).await;
    assert_eq!(text(&all), Some("hello all"), "cat's inbox: {all:?}");

    // A database a lead leads on is refused.
    let (ok, _, err) = store_copy(&sqlite.state_dir(), &["--to", &db], &[]).await;
    assert!(!ok);
    assert!(
        err.contains("is in use: ") && err.contains("leads on it"),
        "{err}"
    );
    pg.terminate().await;
}
