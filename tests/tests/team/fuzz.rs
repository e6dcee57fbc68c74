//! Fuzz-style tests against a real lead, bounded to a few seconds each.
//!
//! 1. Arbitrary bytes to every RPC's decoding path: every method of
//!    `mesh.v1.Lead` and `mesh.v1.Operator` (read from the generated
//!    descriptor set, so a new RPC or field is fuzzed without touching these
//!    tests) gets request messages of random bytes, randomised and mutated
//!    well-formed messages, and crafted nasty ones (truncated varints, lengths
//!    past the end, deep nesting, invalid UTF-8, unknown and out-of-range field
//!    numbers, wire-type mismatches, more than the transport's size limit),
//!    with the right credentials, through tonic's generic client and a codec
//!    that sends raw bytes.
//! 2. Well-formed but absurd messages through the typed clients: strings just
//!    under, at and over their limits and far past the transport's, empty
//!    everything, control characters, NULs, RTL marks and emoji, `u64::MAX`
//!    sequence numbers, negative and unknown enum values, request ids that are
//!    not UUIDs, thousands of list entries, globs that are not globs, deadlines
//!    in the past and the far future.
//!
//! Every call must end with a status the lead sent: OK or a clean error
//! (never INTERNAL, UNKNOWN, UNAVAILABLE, no answer, nor an answer the client
//! cannot read, such as response headers too large for it), bytes that do not
//! decode must be INVALID_ARGUMENT (RESOURCE_EXHAUSTED past the size limit),
//! and the lead must still be running and serving afterwards, with the
//! streams opened before the run still open.
//!
//! Inputs come from a seeded PRNG. The seed is printed (and repeated in a
//! failure); `MESH_FUZZ_SEED=<n>` (decimal or `0x` hex) replays a run.

// The modules are in `fuzz/`: a test crate's root looks for its modules
// beside itself, hence the paths.
//
// The machinery: the seed, what the calls came to, the wire by hand, the
// contract's schema from its descriptor set, raw calls.
#[path = "fuzz/raw.rs"]
mod raw;
#[path = "fuzz/report.rs"]
mod report;
#[path = "fuzz/rng.rs"]
mod rng;
#[path = "fuzz/schema.rs"]
mod schema;
#[path = "fuzz/wire.rs"]
mod wire;
// Part 1: bytes: the test, and its crafted and random cases.
#[path = "fuzz/arbitrary_bytes.rs"]
mod arbitrary_bytes;
#[path = "fuzz/crafted.rs"]
mod crafted;
#[path = "fuzz/random_messages.rs"]
mod random_messages;
// Part 2: absurd values through the typed clients: the test (its phases in
// `fuzz/absurd/`), and the pools of values.
#[path = "fuzz/absurd.rs"]
mod absurd;
#[path = "fuzz/pools.rs"]
mod pools;

use std::time::Duration;

/// The longest one call may take before it counts as unanswered.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Random byte strings per RPC.
const RANDOM_BYTES: usize = 45;
/// Randomised well-formed messages per RPC, every other one then mutated.
const RANDOM_MESSAGES: usize = 45;
/// Random absurd typed calls after the enumerated ones.
const RANDOM_TYPED: usize = 300;
