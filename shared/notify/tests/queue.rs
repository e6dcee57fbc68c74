//! The notifier never slows its caller: with a sink that never answers (a
//! real listener on loopback that accepts nothing), ten thousand notices
//! are handed in at once, and what the queues cannot hold is counted.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use mesh_notify::{Config, Event, Notice, Notifier, QUEUE, SINK_QUEUE};

fn notice(i: usize) -> Notice {
    Notice {
        event: Event::Waiting,
        request_id: format!("r{i}"),
        kind: "plan".into(),
        member: "alice".into(),
        title: "a plan".into(),
        paths: vec![],
        waits_for: vec![],
        owners: vec![],
        url: format!("http://127.0.0.1/console/requests/r{i}"),
        at_unix_ms: 0,
    }
}

#[tokio::test]
async fn ten_thousand_notices_to_a_silent_sink_return_at_once_and_the_overflow_is_counted() {
    // Connections complete in the kernel's backlog; nothing ever reads them.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", silent.local_addr().unwrap());
    let config = Config::parse_with_env(
        &format!(
            "[[sink]]\nname = \"silent\"\nkind = \"webhook\"\nurl = \"{url}\"\ntimeout = \"30s\"\n\
             [[route]]\nsinks = [\"silent\"]\n"
        ),
        &|_| None,
    )
    .unwrap();
    let notifier = Notifier::start(config);

    let began = Instant::now();
    for i in 0..10_000 {
        notifier.waiting(notice(i));
    }
    let took = began.elapsed();
    assert!(took < Duration::from_secs(2), "10 000 calls took {took:?}");
    // This test's runtime has one thread and the loop above never yielded:
    // the worker has not run, so the queue holds its fill and the rest was
    // dropped.
    assert_eq!(notifier.stats().dropped, (10_000 - QUEUE) as u64);

    // The worker now hands the queue to the sink: it takes one to deliver
    // (and waits on it), its queue holds SINK_QUEUE, the rest is dropped.
    let expected = (QUEUE - SINK_QUEUE - 1) as u64;
    let waited = Instant::now();
    while notifier.stats().sinks["silent"].dropped < expected {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "{:?}",
            notifier.stats()
        );
        tokio::task::yield_now().await;
    }
    let stats = notifier.stats();
    let sink = stats.sinks["silent"];
    assert_eq!(
        (sink.dropped, sink.sent, sink.failed),
        (expected, 0, 0),
        "{stats:?}"
    );
    drop(silent);
}
