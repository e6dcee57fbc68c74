//! What every store must do, as checks each store's tests run: what is
//! committed is loaded again after reopening, in the order it was made. The
//! SQLite store and the PostgreSQL store (on a real server) run the same
//! functions, in `tests/tests/stores/stores.rs`. Test code that imports the
//! stores; the lead's library holds no part of it.

use mesh_core::{
    effect::Message,
    grant::{Grant, Mode},
    names::RequestId,
    protocol::{Decision, Kind, Opening, Request, Status},
};
use shared::pb;

use lead::store::{Change, EnvelopeRecord, MemberRecord, Store, TeamChange};

/// Opens the store under test again, on what the last one left.
pub type Open<'a> = &'a mut dyn FnMut() -> Box<dyn Store>;

/// Every check, in turn, each on a fresh store `fresh` gives.
pub fn all(fresh: &mut dyn FnMut() -> Box<dyn FnMut() -> Box<dyn Store>>) {
    what_is_committed_is_loaded_again_after_reopening(&mut *fresh());
    tasks_created_in_one_millisecond_keep_the_order_they_were_created_in(&mut *fresh());
    the_event_history_is_kept_across_a_restart_and_trimmed(&mut *fresh());
    usage_accounts_are_replaced_in_place_and_loaded_again(&mut *fresh());
}

pub fn request(id: &str, status: Status) -> Request {
    Request {
        opening: Opening {
            id: RequestId::existing("id", id).expect("id"),
            kind: Kind::PlanApproval,
            sender: "alice".into(),
            target: "lead".into(),
            payload_json: "{}".into(),
            deadline_unix_ms: None,
        },
        status,
        decision: (status == Status::Approved).then(|| Decision {
            approve: true,
            feedback: "ok".into(),
            grant: Some(Grant {
                mode: Mode::Bypass,
                write_paths: vec!["src/**".into()],
                expires_at_unix_ms: None,
            }),
        }),
        feedback: String::new(),
        created_at_unix_ms: 1,
        resolved_at_unix_ms: None,
        reviews: vec![mesh_core::protocol::ReviewStep {
            reviewer: "program check".into(),
            verdict: "pass".into(),
            words: "no opinion".into(),
            at_unix_ms: 1,
            person: Some(mesh_core::access::Person {
                name: "dora@example.com".into(),
                role: mesh_core::access::Role::Reviewer,
                issuer: Some("http://127.0.0.1:1".into()),
                subject: Some("dora".into()),
                groups: vec!["dba".into()],
            }),
            owner_rules: vec!["db/**".into()],
        }],
        waits_for: Vec::new(),
    }
}

pub fn what_is_committed_is_loaded_again_after_reopening(open: Open<'_>) {
    let member = MemberRecord {
        name: "alice".into(),
        member_id: "m1".into(),
        role: "coder".into(),
        token_hash: Some("h".into()),
        mode: Mode::AcceptEdits,
        idle: true,
        idle_reason: "done: wrote hello.txt".into(),
        terminated: false,
        last_seq: 3,
        order: 1,
        sandbox: mesh_core::sandbox::Sandbox::decode("landlock\nreads,writes\nLandlock ABI 7"),
        decoding: Some(
            mesh_core::decoding::Decoding::parse(
                "decoding",
                "qwen2.5-coder:7b",
                "llama.cpp",
                "schema",
                "llama-server enforces a JSON schema\nin response_format",
            )
            .expect("a valid decoding"),
        ),
    };
    let envelope = |seq| EnvelopeRecord {
        member: "alice".into(),
        seq,
        message_id: format!("e{seq}"),
        from: "bob".into(),
        sent_at_unix_ms: 5,
        body: Some(Message::Text {
            content: format!("text {seq}"),
        }),
        shared: None,
    };
    {
        let mut store = open();
        store
            .commit(&[
                Change::Team(TeamChange::Member(Box::new(member.clone()))),
                Change::Envelope(envelope(1)),
                Change::Envelope(envelope(2)),
                Change::Envelope(envelope(3)),
                Change::Ack {
                    member: "alice".into(),
                    seq: 1,
                },
                Change::Team(TeamChange::Request(Box::new(request(
                    "r1",
                    Status::Pending,
                )))),
                Change::Team(TeamChange::Request(Box::new(request(
                    "r2",
                    Status::Pending,
                )))),
                Change::MessageId {
                    sender: "alice".into(),
                    message_id: "x".into(),
                    digest: "d".into(),
                },
            ])
            .expect("commit");
        store
            .commit(&[Change::Team(TeamChange::Request(Box::new(request(
                "r1",
                Status::Approved,
            ))))])
            .expect("commit");
    }
    let mut store = open();
    let snapshot = store.load().expect("load");
    assert_eq!(snapshot.members, vec![member]);
    assert_eq!(snapshot.envelopes, vec![envelope(2), envelope(3)]);
    let ids: Vec<&str> = snapshot
        .requests
        .iter()
        .map(|r| r.opening.id.as_str())
        .collect();
    assert_eq!(
        ids,
        vec!["r1", "r2"],
        "requests keep their order after an update"
    );
    assert_eq!(snapshot.requests[0], request("r1", Status::Approved));
    assert_eq!(
        snapshot.message_ids,
        vec![("alice".to_owned(), "x".to_owned(), "d".to_owned())]
    );
}

pub fn tasks_created_in_one_millisecond_keep_the_order_they_were_created_in(open: Open<'_>) {
    let task = |id: &str, at: i64| mesh_core::tasks::Task {
        task_id: id.into(),
        subject: id.into(),
        description: String::new(),
        status: mesh_core::tasks::TaskStatus::Pending,
        owner: String::new(),
        blocked_by: Vec::new(),
        files: Vec::new(),
        created_at_unix_ms: at,
        updated_at_unix_ms: at,
        summary: String::new(),
        review: mesh_core::tasks::Review::Plan,
        origin: mesh_core::tasks::Origin::default(),
        outputs: Vec::new(),
        reply: false,
    };
    // One handed in from outside: where it came from is kept, and what it
    // produced.
    let handed_in = mesh_core::tasks::Task {
        origin: mesh_core::tasks::Origin {
            by: "a2a alice".into(),
            context_id: "goal-1".into(),
            message_id: "m-1".into(),
        },
        outputs: vec![
            mesh_core::tasks::Output {
                name: "report.md".into(),
                media_type: "text/markdown".into(),
                content: mesh_core::tasks::OutputContent::Text("# found".into()),
            },
            mesh_core::tasks::Output {
                name: "counts".into(),
                media_type: String::new(),
                content: mesh_core::tasks::OutputContent::DataJson(r#"{"n": 1}"#.into()),
            },
        ],
        reply: true,
        ..task("a", 7)
    };
    {
        let mut store = open();
        store
            .commit(&[
                Change::Team(TeamChange::Task(Box::new(task("c", 5)))),
                Change::Team(TeamChange::Task(Box::new(task("b", 5)))),
                Change::Team(TeamChange::Task(Box::new(handed_in.clone()))),
            ])
            .expect("commit");
        // An update keeps a task's place.
        store
            .commit(&[Change::Team(TeamChange::Task(Box::new(task("c", 5))))])
            .expect("commit");
    }
    let mut store = open();
    let tasks = store.load().expect("load").tasks;
    let ids: Vec<&str> = tasks.iter().map(|t| t.task_id.as_str()).collect();
    assert_eq!(ids, ["c", "b", "a"]);
    assert_eq!(tasks[2], handed_in);
}

pub fn the_event_history_is_kept_across_a_restart_and_trimmed(open: Open<'_>) {
    let entry = |id: u64| {
        lead::history::Entry::stored(
            id,
            1_000 + i64::try_from(id).expect("small"),
            "tool".into(),
            vec!["ann".into(), "bob".into()],
            prost::Message::encode_to_vec(&pb::Event {
                at_unix_ms: 7,
                kind: None,
            })
            .into(),
        )
    };
    {
        let mut store = open();
        store
            .commit(&[
                Change::History(std::sync::Arc::new(entry(1))),
                Change::History(std::sync::Arc::new(entry(2))),
                Change::History(std::sync::Arc::new(entry(3))),
                Change::HistoryTrim(2),
            ])
            .expect("commit");
    }
    let mut store = open();
    let history = store.load().expect("load").history;
    assert_eq!(history, vec![entry(2), entry(3)]);
}

/// An account with two epochs and an operator's budget.
pub fn alices_usage() -> mesh_core::usage::Account {
    let used = |tokens| mesh_core::usage::Usage {
        prompt_tokens: tokens,
        completion_tokens: 7,
        calls: 2,
        model_ms: 300,
    };
    mesh_core::usage::Account {
        name: "alice".into(),
        member: true,
        settled: used(1),
        epochs: vec![("e1".into(), used(10)), ("e2".into(), used(20))],
        operator_budget: Some(5_000),
        token_budget: 5_000,
    }
}

pub fn usage_accounts_are_replaced_in_place_and_loaded_again(open: Open<'_>) {
    let mut later = alices_usage();
    later
        .epochs
        .push(("e3".into(), mesh_core::usage::Usage::default()));
    {
        let mut store = open();
        store
            .commit(&[Change::Team(TeamChange::Usage(Box::new(alices_usage())))])
            .expect("commit");
        store
            .commit(&[Change::Team(TeamChange::Usage(Box::new(later.clone())))])
            .expect("commit");
    }
    let mut store = open();
    assert_eq!(store.load().expect("load").usage, vec![later]);
}
