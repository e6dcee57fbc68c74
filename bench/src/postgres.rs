//! The PostgreSQL store in the bench: one server of Debian's package for the
//! whole run (the tests' harness, `tests/src/pg.rs`, here flushing every
//! commit to the disk as a production server does), a fresh database for
//! each lead, and the figures set beside SQLite's.

use std::sync::Mutex;

use crate::stats::Report;

#[path = "../../tests/src/pg.rs"]
#[allow(unreachable_pub, dead_code)]
mod pg;

static SERVER: Mutex<Option<pg::PgServer>> = Mutex::new(None);

/// A fresh database on the bench's server (started on first use): its URL.
pub(crate) fn database() -> anyhow::Result<String> {
    let mut server = SERVER
        .lock()
        .map_err(|_| anyhow::anyhow!("the PostgreSQL server's lock is poisoned"))?;
    Ok(server
        .get_or_insert_with(pg::PgServer::start_durable)
        .database())
}

/// Stops the server, if one was started, when dropped.
#[derive(Debug)]
pub(crate) struct Stopper;

impl Drop for Stopper {
    fn drop(&mut self) {
        if let Ok(mut server) = SERVER.lock() {
            server.take();
        }
    }
}

/// The durable handshake and routing on PostgreSQL against SQLite, from
/// this run.
pub(crate) fn print(report: &Report) {
    let both = |figure: &str| {
        Some((
            report.median(&format!("[postgres] {figure}"))?,
            report.median(&format!("[sqlite] {figure}"))?,
        ))
    };
    let Some((pg, lite)) = both("handshake auto p50") else {
        return;
    };
    println!("\nPostgreSQL against SQLite (both --sync full, each commit flushed), this run:");
    println!(
        "  handshake auto p50: {pg:.0} us against {lite:.0} us ({:.2}x; target <= 2x)",
        pg / lite
    );
    for figure in ["handshake auto p99", "handshake manual p50", "shutdown p50"] {
        if let Some((pg, lite)) = both(figure) {
            println!(
                "  {figure}: {pg:.0} us against {lite:.0} us ({:.2}x)",
                pg / lite
            );
        }
    }
    if let Some((pg, lite)) = both("routing 16 in flight") {
        println!(
            "  routing 16 in flight: {pg:.0} against {lite:.0} msg/s ({:.2}x)",
            pg / lite
        );
    }
}
