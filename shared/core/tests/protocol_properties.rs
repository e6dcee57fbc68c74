//! Property tests of the protocol state machine: arbitrary sequences of events
//! (opens with colliding ids, answers by the right and the wrong party, retries,
//! expiry at any `now`, members leaving, reviews, pruning, a restore) applied in
//! order to one [`Tracker`], checked after every step.
//!
//! Ids, names and payloads come from small pools so that collisions are common;
//! times mostly from a small range so that deadlines come due, now and then from
//! the extremes of `i64`.
//!
//! - `events`: the events ([`events::Op`]), the calls they become and what the
//!   calls return, and the strategies that draw them;
//! - `machine`: the API a sequence drives, on the tracker, and the runner that
//!   checks the tracker's invariants after every step;
//! - `model`: the contract written plainly, and the property that the tracker
//!   does what it does;
//! - `answers`: terminal states never change, one answer wins;
//! - `ids`: ids are unique;
//! - `replay`: what the lead commits rebuilds the tracker;
//! - `wild`: any call at all, and nothing panics.
//!
//! [`Tracker`]: mesh_core::protocol::Tracker
#![allow(clippy::unwrap_used)]

// The modules are in `protocol_properties/`: a test crate's root looks for its
// modules beside itself, hence the paths.

#[path = "protocol_properties/answers.rs"]
mod answers;
#[path = "protocol_properties/events.rs"]
mod events;
#[path = "protocol_properties/ids.rs"]
mod ids;
#[path = "protocol_properties/machine.rs"]
mod machine;
#[path = "protocol_properties/model.rs"]
mod model;
#[path = "protocol_properties/replay.rs"]
mod replay;
#[path = "protocol_properties/wild.rs"]
mod wild;

use mesh_core::{grant::Grant, names::RequestId, protocol::Decision};
use proptest::{prelude::ProptestConfig, test_runner::FileFailurePersistence};

const IDS: [&str; 4] = ["r0", "r1", "r2", "r3"];
const NAMES: [&str; 4] = ["alice", "bob", "carol", "lead"];
const PAYLOADS: [&str; 2] = [r#"{"summary":"x"}"#, r#"{"summary":"y"}"#];
const VERDICTS: [&str; 3] = ["approve", "reject", "pass"];
/// Times at which `due` is asked after every step.
const PROBES: [i64; 6] = [i64::MIN, -1, 50, 100, 200, i64::MAX];

/// Where the seeds of past failures are kept: beside this file, for every
/// property of every module (proptest would otherwise name the file after the
/// module a property is in).
const REGRESSIONS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/protocol_properties.proptest-regressions"
);

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(REGRESSIONS))),
        ..ProptestConfig::default()
    }
}

fn request_id(i: usize) -> RequestId {
    RequestId::existing("request_id", IDS[i]).unwrap()
}

/// The four answers: two approvals and two rejections, all different.
fn decision(i: usize) -> Decision {
    let (approve, feedback, grant) = match i {
        0 => (true, "", None),
        1 => (true, "ok", Some(Grant::plan())),
        2 => (false, "no", None),
        _ => (false, "other", None),
    };
    Decision {
        approve,
        feedback: feedback.into(),
        grant,
    }
}
