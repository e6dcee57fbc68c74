//! Part 2: well-formed but absurd messages through the typed clients, one
//! RPC after another on one lead, each phase naming what the earlier ones
//! made (plans, permissions, tasks), then random calls from the pools. Every
//! call must end in OK or a clean status, and the streams opened before the
//! run must still be open after it.

use mesh_tests::{Lead, LeadApi, Member, Operator};
use shared::pb;
use tokio::task::JoinHandle;

use crate::fuzz::{
    report::{status_text, Report},
    rng::{seed, Rng},
};

/// One typed call under the timeout, judged; `Some` with the reply when OK.
macro_rules! call {
    ($report:expr, $rpc:literal, $client:expr, $method:ident, $request:expr) => {{
        let request = $request;
        let input = request.clone();
        let result =
            tokio::time::timeout($crate::fuzz::CALL_TIMEOUT, $client.$method(request)).await;
        $report.typed($rpc, || $crate::fuzz::report::shown(&input), result)
    }};
}

// The phases, one module per group of RPCs; the test below runs them in
// order.
#[path = "absurd/lists.rs"]
mod lists;
#[path = "absurd/members.rs"]
mod members;
#[path = "absurd/messages.rs"]
mod messages;
#[path = "absurd/permissions.rs"]
mod permissions;
#[path = "absurd/plans.rs"]
mod plans;
#[path = "absurd/random_calls.rs"]
mod random_calls;
#[path = "absurd/spawn.rs"]
mod spawn;
#[path = "absurd/tasks.rs"]
mod tasks;

/// A member, joined for one destructive call (Leave, an agreed shutdown).
async fn throwaway(lead: &Lead, counter: &mut usize) -> Member {
    *counter += 1;
    lead.join(&format!("tmp{counter}")).await
}

/// Reads a stream until it ends; returns how.
async fn drain<T>(mut stream: tonic::Streaming<T>) -> String {
    loop {
        match stream.message().await {
            Ok(Some(_)) => {}
            Ok(None) => return "ended".into(),
            Err(status) => return status_text(&status),
        }
    }
}

/// A message's text.
fn text(content: &str) -> Option<pb::Text> {
    Some(pb::Text {
        content: content.into(),
    })
}

/// A plan request: a plain plan, then `edit`ed.
fn plan(edit: &dyn Fn(&mut pb::Plan)) -> pb::PlanApprovalRequest {
    let mut plan = pb::Plan {
        summary: "absurd".into(),
        files: vec!["src/lib.rs".into()],
        ..Default::default()
    };
    edit(&mut plan);
    pb::PlanApprovalRequest {
        request_id: String::new(),
        plan: Some(plan),
        supersedes: String::new(),
    }
}

/// The run: the lead, its clients and members, the streams that watch it,
/// and what the calls made, for later calls to name.
struct Absurd {
    report: Report,
    rng: Rng,
    lead: Lead,
    op: Operator,
    joiner: LeadApi,
    alice: Member,
    /// Not called again; kept so that he stays as he joined.
    _bob: Member,
    /// Carol's inbox is the one the absurd Inbox calls replace.
    carol: Member,
    /// Streams that see everything the lead relays, each read to its end.
    streams: Vec<(&'static str, JoinHandle<String>)>,
    /// Throwaway members joined.
    tmp: usize,
    /// SpawnTeammate requests built.
    spawned: usize,
    /// The ids of the plans submitted.
    plans: Vec<String>,
    /// The ids of the permissions asked for.
    permissions: Vec<String>,
    /// The ids of the tasks created.
    tasks: Vec<String>,
}

impl Absurd {
    /// Starts the lead, joins alice, bob and carol, and opens the streams.
    async fn start() -> Absurd {
        let seed = seed();
        let mut report = Report::new("absurd", seed);
        let rng = Rng::derived(seed, "absurd");
        // A spawn request that gets through names `/bin/true` (as every one
        // below does): never a real teammate that would go looking for a model.
        let lead = Lead::start(&["--teammate-bin", "/bin/true"]).await;
        report.lead_started();
        let mut op = lead.operator().await;
        let joiner = lead.lead_api(&lead.join_token).await;

        // Streams that see everything the lead relays, absurd or not.
        let watch = op.watch(pb::WatchRequest {}).await.expect("watch");
        let watching = tokio::spawn(drain(watch.into_inner()));
        let mut alice = lead.join("alice").await;
        alice.open_inbox(0).await;
        let alice_reading = tokio::spawn(drain(alice.inbox.take().expect("inbox")));
        let mut bob = lead.join("bob").await;
        bob.open_inbox(0).await;
        let bob_reading = tokio::spawn(drain(bob.inbox.take().expect("inbox")));
        let carol = lead.join("carol").await;
        Absurd {
            report,
            rng,
            lead,
            op,
            joiner,
            alice,
            _bob: bob,
            carol,
            streams: vec![
                ("the Watch stream", watching),
                ("alice's inbox stream", alice_reading),
                ("bob's inbox stream", bob_reading),
            ],
            tmp: 0,
            spawned: 0,
            plans: Vec::new(),
            permissions: Vec::new(),
            tasks: Vec::new(),
        }
    }

    /// The streams are still open, the process runs, and it serves; fails
    /// the test on any finding.
    async fn finish(mut self) {
        for (what, reading) in std::mem::take(&mut self.streams) {
            if reading.is_finished() {
                let how = reading.await.unwrap_or_else(|e| e.to_string());
                self.report
                    .finding(format!("{what} ended during the run: {how}"));
            } else {
                reading.abort();
            }
        }
        self.report.lead_running(&mut self.lead, "after the run");
        self.report
            .lead_serving(
                &self.lead,
                &mut self.op,
                "afterwards",
                "after-absurd",
                "alice",
            )
            .await;
        println!(
            "absurd: {} spawn requests built, {} throwaway members",
            self.spawned, self.tmp
        );
        self.report.finish();
    }
}

#[tokio::test]
async fn absurd_well_formed_messages_get_clean_answers() {
    let mut run = Absurd::start().await;
    run.join().await;
    run.inbox_and_ack().await;
    run.send().await;
    run.submit_plan().await;
    run.review_plan().await;
    run.request_and_review_permission().await;
    run.request_and_respond_shutdown().await;
    run.report_idle_tool_call_and_leave().await;
    run.tasks().await;
    run.lists_get_request_and_watch().await;
    run.spawn_teammate().await;
    run.random_calls().await;
    run.finish().await;
}
