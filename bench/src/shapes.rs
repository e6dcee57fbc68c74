//! The shapes a real team produces (5 to 50 teammates, one or two calls
//! each outstanding), against the physical limit of a durable lead on this
//! disk: `in flight / (floor round trip + one flushed commit)`.

use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use shared::pb::{self, envelope::Body};
use tokio::task::JoinSet;

use crate::{
    mesh::{self, Lead},
    stats::{Report, Samples},
};

/// Messages in flight for the routing shapes: one per sender-recipient pair.
pub(crate) const ROUTING_IN_FLIGHT: [usize; 4] = [1, 4, 16, 64];
/// Teammates handshaking at once.
pub(crate) const HANDSHAKING: [usize; 3] = [1, 8, 64];

/// The cost of one flushed commit on the disk the leads' state goes to:
/// a one-row SQLite transaction with the lead's settings (WAL, exclusive
/// locking, `synchronous=FULL`). The median of `n`.
pub(crate) fn flush_cost(n: usize) -> anyhow::Result<Samples> {
    let dir = tempfile::tempdir()?;
    let conn = rusqlite::Connection::open(dir.path().join("flush.db"))?;
    conn.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
    let _: String = conn.query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB NOT NULL)")?;
    let row = vec![7u8; 200];
    let mut samples = Samples::with_capacity(n);
    for i in 0..n + n / 10 {
        let start = Instant::now();
        conn.execute_batch("BEGIN")?;
        conn.execute(
            "INSERT OR REPLACE INTO t (k, v) VALUES (?1, ?2)",
            rusqlite::params![i64::try_from(i % 64)?, row],
        )?;
        conn.execute_batch("COMMIT")?;
        // The first tenth warms the file up.
        if i >= n / 10 {
            samples.push(start.elapsed());
        }
    }
    Ok(samples)
}

/// `pairs` senders, each sending to its own recipient one message at a time:
/// the next once the recipient has read the last (`pairs` messages in
/// flight), `total` messages in all. Each recipient acknowledges every
/// envelope as it reads it, as a teammate does. Messages a second, and
/// send-to-read times.
pub(crate) async fn routing(
    lead: &Lead,
    prefix: &str,
    pairs: usize,
    total: usize,
) -> anyhow::Result<(f64, Samples)> {
    let each = (total / pairs).max(1);
    let mut members = Vec::new();
    for i in 0..pairs {
        let receiver = lead.member(&format!("{prefix}r{i}"), None).await?;
        let sender = lead.member(&format!("{prefix}s{i}"), None).await?;
        members.push((sender, receiver));
    }
    let start = Instant::now();
    let mut pairs_running = JoinSet::new();
    for (sender, mut receiver) in members {
        let to = receiver.name.clone();
        // The recipient tells its sender each time it has read a message.
        let (read_tx, mut read_rx) = tokio::sync::mpsc::channel::<()>(1);
        pairs_running.spawn(async move {
            let mut samples = Samples::with_capacity(each);
            while samples.len() < each {
                let envelope = tokio::time::timeout(mesh::WAIT, receiver.inbox.message())
                    .await
                    .context("waiting for an envelope")??
                    .ok_or_else(|| anyhow!("inbox ended"))?;
                if let Some(Body::Text(t)) = envelope.body {
                    let sent: u64 = t.content.parse()?;
                    let at = u64::try_from(start.elapsed().as_micros())?;
                    samples.push(Duration::from_micros(at.saturating_sub(sent)));
                    let _ = read_tx.send(()).await;
                }
                receiver
                    .api
                    .ack(pb::AckRequest { seq: envelope.seq })
                    .await?;
            }
            anyhow::Ok(samples)
        });
        let mut api = sender.api;
        pairs_running.spawn(async move {
            for _ in 0..each {
                let content = u64::try_from(start.elapsed().as_micros())?.to_string();
                api.send(pb::SendRequest {
                    to: to.clone(),
                    text: Some(pb::Text { content }),
                    message_id: String::new(),
                })
                .await?;
                tokio::time::timeout(mesh::WAIT, read_rx.recv())
                    .await
                    .context("waiting for the recipient")?;
            }
            anyhow::Ok(Samples::default())
        });
    }
    let mut all = Samples::with_capacity(pairs * each);
    while let Some(done) = pairs_running.join_next().await {
        all.extend(done??);
    }
    Ok(((pairs * each) as f64 / start.elapsed().as_secs_f64(), all))
}

/// Adds the shapes for `store` to the report: routing with each number in
/// flight, handshakes with each number of teammates at once.
pub(crate) async fn measure(
    lead: &Lead,
    store: &str,
    routed: usize,
    handshakes: usize,
    report: &mut Report,
) -> anyhow::Result<()> {
    for n in ROUTING_IN_FLIGHT {
        let (rate, delivery) = routing(lead, &format!("p{n}x"), n, routed.max(n)).await?;
        report.add(&routing_name(store, n), "msg/s", rate);
        report.add(
            &format!("[{store}] routing {n} in flight: send-to-read p50"),
            "us",
            delivery.quantile_us(0.5),
        );
    }
    for n in HANDSHAKING {
        let each = (handshakes / n).max(2);
        let (samples, rate) = mesh::handshakes_concurrent(lead, &format!("h{n}x"), n, each).await?;
        report.add(&handshake_name(store, n), "/s", rate);
        report.add(
            &format!("[{store}] handshakes {n} at once: p50"),
            "us",
            samples.quantile_us(0.5),
        );
    }
    Ok(())
}

fn routing_name(store: &str, n: usize) -> String {
    format!("[{store}] routing {n} in flight")
}

fn handshake_name(store: &str, n: usize) -> String {
    format!("[{store}] handshakes {n} at once")
}

/// Prints each shape's figure with its ratio to the physical limit and, for
/// the durable stores, to the memory store at the same shape.
pub(crate) fn print(report: &Report, stores: &[String]) {
    let (Some(floor), Some(flush)) = (
        report.median("floor unary p50"),
        report.median("flushed commit p50"),
    ) else {
        return;
    };
    let per_call = (floor + flush) / 1e6;
    println!(
        "\nteam shapes (medians): the limit of N in flight is N / (floor round trip {floor:.0} us \
         + one flushed commit {flush:.0} us)"
    );
    let mut rows: Vec<(String, usize)> = ROUTING_IN_FLIGHT
        .iter()
        .map(|&n| (routing_name("{store}", n), n))
        .collect();
    rows.extend(
        HANDSHAKING
            .iter()
            .map(|&n| (handshake_name("{store}", n), n)),
    );
    for (template, n) in rows {
        let limit = n as f64 / per_call;
        let memory = report.median(&template.replace("{store}", "memory"));
        for store in stores {
            let name = template.replace("{store}", store);
            let Some(value) = report.median(&name) else {
                continue;
            };
            let against_memory = match memory {
                Some(memory) if store != "memory" => {
                    format!(", {:.0}% of memory", 100.0 * value / memory)
                }
                _ => String::new(),
            };
            println!(
                "  {name}: {value:.0}/s, {:.0}% of the limit {limit:.0}/s{against_memory}",
                100.0 * value / limit
            );
        }
    }
}
