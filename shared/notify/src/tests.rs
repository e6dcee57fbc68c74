//! The worker and the escalations in paused time: the sinks' queues are
//! the test's own, so what each sink was handed, and when, is read
//! directly, and no test waits real minutes.

use std::time::Duration;

use tokio::{sync::mpsc::Receiver, time::Instant};

use crate::{outlet::Item, queue::test_outlets, Config, Event, Notice, Notifier};

const FILE: &str = r#"
[[sink]]
name = "now"
kind = "webhook"
url = "http://127.0.0.1:9/now"

[[sink]]
name = "later"
kind = "webhook"
url = "http://127.0.0.1:9/later"

[[route]]
kinds = ["plan"]
sinks = ["now"]

[[route]]
owners = ["@dba"]
sinks = ["now"]

[[route]]
owners = ["@dba"]
sinks = ["later"]
after = "30m"
"#;

fn notice(id: &str, kind: &str, owners: &[&str]) -> Notice {
    Notice {
        event: Event::Waiting,
        request_id: id.into(),
        kind: kind.into(),
        member: "alice".into(),
        title: format!("{kind} {id}"),
        paths: vec!["db/schema.sql".into()],
        waits_for: owners.iter().map(|o| format!("{o}: 0 of 1")).collect(),
        owners: owners.iter().map(|o| o.to_string()).collect(),
        url: format!("http://127.0.0.1:8080/console/requests/{id}"),
        at_unix_ms: 1,
    }
}

fn start() -> (Notifier, Vec<Receiver<Item>>) {
    let config = Config::parse_with_env(FILE, &|_| None).expect("the file parses");
    let (outlets, queues) = test_outlets(&config, 64);
    (Notifier::with_outlets(config, outlets), queues)
}

/// The next delivery a sink was handed: its request and event.
async fn next(queue: &mut Receiver<Item>) -> (String, Event) {
    match queue.recv().await {
        Some(Item::Deliver(notice)) => (notice.request_id.clone(), notice.event),
        other => panic!("expected a delivery, got {other:?}"),
    }
}

fn empty(queue: &mut Receiver<Item>) -> bool {
    queue.try_recv().is_err()
}

#[tokio::test(start_paused = true)]
async fn an_escalation_fires_for_a_request_still_waiting_and_not_for_one_settled() {
    let (notifier, mut queues) = start();
    let begun = Instant::now();
    notifier.waiting(notice("r1", "plan", &["@dba"]));
    notifier.waiting(notice("r2", "plan", &["@dba"]));
    // At once: each to "now" once, though two routes name it.
    assert_eq!(next(&mut queues[0]).await, ("r1".into(), Event::Waiting));
    assert_eq!(next(&mut queues[0]).await, ("r2".into(), Event::Waiting));
    notifier.settled("r2");

    let after = Duration::from_secs(30 * 60);
    assert_eq!(
        next(&mut queues[1]).await,
        ("r1".into(), Event::Escalated { after })
    );
    assert!(begun.elapsed() >= after);
    tokio::time::sleep(Duration::from_secs(3 * 3600)).await;
    assert!(empty(&mut queues[0]) && empty(&mut queues[1]));
    assert_eq!(notifier.stats().escalated, 1);
}

#[tokio::test(start_paused = true)]
async fn settled_before_the_worker_saw_the_notice_arms_nothing() {
    let (notifier, mut queues) = start();
    // The test's runtime has one thread: the worker runs only when this
    // test awaits, so both calls are made before it sees the notice.
    notifier.waiting(notice("r1", "result", &["@dba"]));
    notifier.settled("r1");
    assert_eq!(next(&mut queues[0]).await.0, "r1");
    tokio::time::sleep(Duration::from_secs(3 * 3600)).await;
    assert!(empty(&mut queues[1]));
}

#[tokio::test(start_paused = true)]
async fn a_later_notice_is_what_escalates_and_restarts_no_timer() {
    let (notifier, mut queues) = start();
    notifier.waiting(notice("r1", "plan", &["@dba", "carol"]));
    assert_eq!(next(&mut queues[0]).await.0, "r1");
    tokio::time::sleep(Duration::from_secs(20 * 60)).await;

    let mut later = notice("r1", "plan", &["@dba"]);
    later.title = "revised".into();
    notifier.waiting(later);
    assert_eq!(next(&mut queues[0]).await.0, "r1");
    let waited = Instant::now();
    match queues[1].recv().await {
        Some(Item::Deliver(notice)) => {
            assert_eq!(notice.title, "revised");
            assert!(matches!(notice.event, Event::Escalated { .. }));
        }
        other => panic!("expected the escalation, got {other:?}"),
    }
    // 30 minutes from the first notice, not from the second.
    assert_eq!(waited.elapsed(), Duration::from_secs(10 * 60));
}

#[tokio::test(start_paused = true)]
async fn an_escalation_whose_route_no_longer_matches_stays_quiet() {
    let (notifier, mut queues) = start();
    notifier.waiting(notice("r1", "plan", &["@dba"]));
    assert_eq!(next(&mut queues[0]).await.0, "r1");
    // @dba decided; the request now waits for carol only.
    notifier.waiting(notice("r1", "plan", &["carol"]));
    assert_eq!(next(&mut queues[0]).await.0, "r1");
    tokio::time::sleep(Duration::from_secs(3 * 3600)).await;
    assert!(empty(&mut queues[1]));
    assert_eq!(notifier.stats().escalated, 0);
}

#[tokio::test(start_paused = true)]
async fn a_notice_no_route_matches_goes_nowhere() {
    let (notifier, mut queues) = start();
    notifier.waiting(notice("r1", "shutdown", &["carol"]));
    notifier.waiting(notice("r2", "plan", &["carol"]));
    // The worker takes notices in order: r1 went nowhere.
    assert_eq!(next(&mut queues[0]).await.0, "r2");
    tokio::time::sleep(Duration::from_secs(3 * 3600)).await;
    assert!(empty(&mut queues[0]) && empty(&mut queues[1]));
}

#[tokio::test(start_paused = true)]
async fn a_full_sink_queue_drops_and_counts_without_holding_up_the_others() {
    let config = Config::parse_with_env(FILE, &|_| None).expect("the file parses");
    let (outlets, mut queues) = test_outlets(&config, 4);
    let notifier = Notifier::with_outlets(config, outlets);
    for i in 0..10 {
        notifier.waiting(notice(&format!("r{i}"), "plan", &["@dba"]));
    }
    tokio::time::sleep(Duration::from_secs(31 * 60)).await;
    let stats = notifier.stats();
    assert_eq!(stats.dropped, 0);
    assert_eq!(stats.sinks["now"].dropped, 6);
    assert_eq!(stats.sinks["later"].dropped, 6);
    for _ in 0..4 {
        assert_eq!(
            next(&mut queues[1]).await.1,
            Event::Escalated {
                after: Duration::from_secs(30 * 60)
            }
        );
    }
    assert_eq!(notifier.stats().escalated, 10);
}
