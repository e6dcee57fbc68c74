//! What the calls came to: which statuses are clean, and the report of a run
//! that tallies every call and fails the test on any finding.

use std::{collections::BTreeMap, fmt::Debug, time::Instant};

use mesh_tests::{within, Lead, Operator};
use shared::pb;
use tonic::{Code, Status};

use crate::fuzz::CALL_TIMEOUT;

/// Whether `code` is an answer the lead may give to any input.
pub(crate) fn clean(code: Code) -> bool {
    matches!(
        code,
        Code::Ok
            | Code::InvalidArgument
            | Code::NotFound
            | Code::FailedPrecondition
            | Code::ResourceExhausted
            | Code::OutOfRange
            | Code::AlreadyExists
            | Code::PermissionDenied
    )
}

/// Whether `status` is the client's own (the connection or the HTTP/2
/// stream failed: the answer could not be read), not one the lead sent.
pub(crate) fn from_transport(status: &Status) -> bool {
    use std::error::Error as _;
    status.source().is_some()
        || status.message().starts_with("h2 protocol error")
        || status.message().starts_with("transport error")
}

/// A status for a report: code, message, and the transport's error if any.
pub(crate) fn status_text(status: &Status) -> String {
    use std::error::Error as _;
    let source = status
        .source()
        .map(|e| format!(" (client side: {e:?})"))
        .unwrap_or_default();
    format!(
        "{:?} {:?}{}",
        status.code(),
        brief(status.message()),
        brief(&source)
    )
}

/// `text`, shortened to a few hundred characters for a report.
fn brief(text: &str) -> String {
    const HEAD: usize = 240;
    const TAIL: usize = 60;
    let chars = text.chars().count();
    if chars <= HEAD + TAIL + 20 {
        return text.to_owned();
    }
    let head: String = text.chars().take(HEAD).collect();
    let tail: String = text.chars().skip(chars - TAIL).collect();
    format!("{head}…[{} bytes in all]…{tail}", text.len())
}

/// `value`'s `Debug`, shortened.
pub(crate) fn shown(value: &impl Debug) -> String {
    brief(&format!("{value:?}"))
}

/// Bytes as hex, shortened.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const SHOWN: usize = 160;
    let mut out: String = bytes
        .iter()
        .take(SHOWN)
        .map(|b| format!("{b:02x}"))
        .collect();
    if bytes.len() > SHOWN {
        out.push_str(&format!("…[{} bytes in all]", bytes.len()));
    }
    out
}

/// Every call's outcome, and what was wrong.
#[derive(Debug)]
pub(crate) struct Report {
    test: &'static str,
    seed: u64,
    started: Instant,
    calls: usize,
    codes: BTreeMap<String, usize>,
    findings: Vec<String>,
    /// Where the current section started: when, and after how many calls.
    section: (Instant, usize),
}

impl Report {
    pub(crate) fn new(test: &'static str, seed: u64) -> Self {
        println!("{test}: seed {seed} (MESH_FUZZ_SEED={seed} replays this run)");
        Self {
            test,
            seed,
            started: Instant::now(),
            calls: 0,
            codes: BTreeMap::new(),
            findings: Vec::new(),
            section: (Instant::now(), 0),
        }
    }

    /// Starts the clock again (once the lead is up: building it is not the
    /// run's time).
    pub(crate) fn lead_started(&mut self) {
        println!(
            "{}: the lead started in {:.2?} (building it if needed)",
            self.test,
            self.started.elapsed()
        );
        self.started = Instant::now();
        self.section = (self.started, self.calls);
    }

    /// Ends a section of the run: prints its calls and time.
    pub(crate) fn section(&mut self, name: &str) {
        let (since, calls) = self.section;
        println!(
            "{}: {name}: {} calls in {:.2?}",
            self.test,
            self.calls - calls,
            since.elapsed()
        );
        self.section = (Instant::now(), self.calls);
    }

    pub(crate) fn count(&mut self, code: &str) {
        self.calls += 1;
        *self.codes.entry(code.to_owned()).or_default() += 1;
    }

    pub(crate) fn finding(&mut self, finding: String) {
        println!("FINDING: {finding}");
        self.findings.push(finding);
    }

    /// Judges one typed call: OK or a clean status, within the timeout.
    pub(crate) fn typed<T>(
        &mut self,
        rpc: &str,
        input: impl FnOnce() -> String,
        result: Result<Result<tonic::Response<T>, Status>, tokio::time::error::Elapsed>,
    ) -> Option<T> {
        match result {
            Err(_) => {
                self.count("no answer");
                self.finding(format!(
                    "{rpc} {}: no status within {CALL_TIMEOUT:?}",
                    input()
                ));
                None
            }
            Ok(Ok(response)) => {
                self.count("Ok");
                Some(response.into_inner())
            }
            Ok(Err(status)) => {
                self.count(&format!("{:?}", status.code()));
                if !clean(status.code()) || from_transport(&status) {
                    self.finding(format!("{rpc} {}: {}", input(), status_text(&status)));
                }
                None
            }
        }
    }

    /// Prints the tally; fails the test if anything was wrong.
    pub(crate) fn finish(self) {
        let elapsed = self.started.elapsed();
        println!(
            "{}: {} calls in {elapsed:.2?}: {:?}",
            self.test, self.calls, self.codes
        );
        if !self.findings.is_empty() {
            let shown: Vec<&str> = self.findings.iter().take(40).map(String::as_str).collect();
            panic!(
                "{}: {} finding(s) in {} calls (seed {}; MESH_FUZZ_SEED={} replays it):\n  {}",
                self.test,
                self.findings.len(),
                self.calls,
                self.seed,
                self.seed,
                shown.join("\n  ")
            );
        }
    }
}

/// The checks at the end of a run: is the lead still running, and serving?
impl Report {
    /// A finding unless the lead's process is still running; `when` ends the
    /// finding ("after fuzzing").
    pub(crate) fn lead_running(&mut self, lead: &mut Lead, when: &str) {
        match lead.child.try_wait() {
            Ok(None) => {}
            other => self.finding(format!("the lead is not running {when}: {other:?}")),
        }
    }

    /// A finding unless the lead still serves: `operator` lists the team, and
    /// a member who joins now as `newcomer` sends `to` a message. `when` ends
    /// each finding ("after fuzzing").
    pub(crate) async fn lead_serving(
        &mut self,
        lead: &Lead,
        operator: &mut Operator,
        when: &str,
        newcomer: &str,
        to: &str,
    ) {
        let listing = format!("ListTeam {when}");
        let team = within(&listing, operator.list_team(pb::ListTeamRequest::default())).await;
        if let Err(status) = &team {
            self.finding(format!("{listing}: {status:?}"));
        }
        let mut after = lead.join(newcomer).await;
        if let Err(status) = after.send(to, "still here", "").await {
            self.finding(format!("Send {when}: {status:?}"));
        }
    }
}
