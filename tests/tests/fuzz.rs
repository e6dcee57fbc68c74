//! Fuzz-style tests against a real lead, bounded to a few seconds each.
//!
//! 1. Arbitrary bytes to every RPC's decoding path: every method of
//!    `mesh.v1.Lead` and `mesh.v1.Operator` (read from the generated
//!    descriptor set, so a new RPC or field is fuzzed without touching this
//!    file) gets request messages of random bytes, randomised and mutated
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

use std::{
    collections::{BTreeMap, HashMap},
    fmt::Debug,
    time::{Duration, Instant},
};

use bytes::{Buf, BufMut, Bytes};
use http::uri::PathAndQuery;
use mesh_tests::{within, Lead, LeadApi, Member};
use shared::{limits, pb};
use tonic::{
    client::Grpc,
    codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder},
    transport::Channel,
    Code, Status,
};

/// The longest one call may take before it counts as unanswered.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Random byte strings per RPC.
const RANDOM_BYTES: usize = 45;
/// Randomised well-formed messages per RPC, every other one then mutated.
const RANDOM_MESSAGES: usize = 45;
/// Random absurd typed calls after the enumerated ones.
const RANDOM_TYPED: usize = 300;

// ---------------------------------------------------------------------------
// The seed and the PRNG.

/// The run's seed: `MESH_FUZZ_SEED`, else the clock.
fn seed() -> u64 {
    match std::env::var("MESH_FUZZ_SEED") {
        Ok(given) => {
            let given = given.trim();
            let parsed = match given.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => given.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("MESH_FUZZ_SEED={given:?} is not a u64"))
        }
        Err(_) => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            nanos ^ u64::from(std::process::id()).rotate_left(32)
        }
    }
}

/// xorshift64*, seeded through splitmix64: small, fast and reproducible.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Rng(if z == 0 { 0x2545_F491_4F6C_DD1D } else { z })
    }

    /// A PRNG for one stream of inputs (an RPC), independent of the others.
    fn derived(seed: u64, label: &str) -> Self {
        // FNV-1a of the label.
        let hash = label.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        Rng::new(seed ^ hash)
    }

    fn u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (0 for an empty range).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.u64() % n as u64) as usize
        }
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.u64() % 100 < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.u64() as u8).collect()
    }
}

// ---------------------------------------------------------------------------
// What the calls came to.

/// Whether `code` is an answer the lead may give to any input.
fn clean(code: Code) -> bool {
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
fn from_transport(status: &Status) -> bool {
    use std::error::Error as _;
    status.source().is_some()
        || status.message().starts_with("h2 protocol error")
        || status.message().starts_with("transport error")
}

/// A status for a report: code, message, and the transport's error if any.
fn status_text(status: &Status) -> String {
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
fn shown(value: &impl Debug) -> String {
    brief(&format!("{value:?}"))
}

/// Bytes as hex, shortened.
fn hex(bytes: &[u8]) -> String {
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
struct Report {
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
    fn new(test: &'static str, seed: u64) -> Self {
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
    fn lead_started(&mut self) {
        println!(
            "{}: the lead started in {:.2?} (building it if needed)",
            self.test,
            self.started.elapsed()
        );
        self.started = Instant::now();
        self.section = (self.started, self.calls);
    }

    /// Ends a section of the run: prints its calls and time.
    fn section(&mut self, name: &str) {
        let (since, calls) = self.section;
        println!(
            "{}: {name}: {} calls in {:.2?}",
            self.test,
            self.calls - calls,
            since.elapsed()
        );
        self.section = (Instant::now(), self.calls);
    }

    fn count(&mut self, code: &str) {
        self.calls += 1;
        *self.codes.entry(code.to_owned()).or_default() += 1;
    }

    fn finding(&mut self, finding: String) {
        println!("FINDING: {finding}");
        self.findings.push(finding);
    }

    /// Judges one typed call: OK or a clean status, within the timeout.
    fn typed<T>(
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
    fn finish(self) {
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

// ---------------------------------------------------------------------------
// The wire: writing protobuf by hand, and reading our own descriptor set.

const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LEN: u64 = 2;
const START_GROUP: u64 = 3;
const END_GROUP: u64 = 4;
const FIXED32: u64 = 5;

/// A field number no message of the contract uses.
const UNKNOWN: u64 = 4242;

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn key(out: &mut Vec<u8>, field: u64, wire: u64) {
    varint(out, (field << 3) | wire);
}

/// `field` as a length-delimited field holding `payload`.
fn delimited(field: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 8);
    key(&mut out, field, LEN);
    varint(&mut out, payload.len() as u64);
    out.extend_from_slice(payload);
    out
}

/// `field` as a varint field.
fn varint_field(field: u64, value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    key(&mut out, field, VARINT);
    varint(&mut out, value);
    out
}

/// `field` with wire type `wire` and the raw `rest` after its key.
fn raw_field(field: u64, wire: u64, rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    key(&mut out, field, wire);
    out.extend_from_slice(rest);
    out
}

/// `depth` unknown groups, one inside the other, closed.
fn nested_groups(depth: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..depth {
        key(&mut out, UNKNOWN, START_GROUP);
    }
    for _ in 0..depth {
        key(&mut out, UNKNOWN, END_GROUP);
    }
    out
}

/// `depth` unknown length-delimited fields, one inside the other.
fn nested_delimited(depth: usize) -> Vec<u8> {
    let mut out = b"bottom".to_vec();
    for _ in 0..depth {
        out = delimited(UNKNOWN, &out);
    }
    out
}

/// A value read from a descriptor.
#[derive(Debug, Clone, Copy)]
enum Value<'a> {
    Int(u64),
    Bytes(&'a [u8]),
}

fn read_varint(buf: &mut &[u8]) -> u64 {
    let mut value = 0;
    let mut shift = 0;
    loop {
        let byte = buf[0];
        *buf = &buf[1..];
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return value;
        }
        shift += 7;
    }
}

/// The next `n` bytes of `buf`.
fn take<'a>(buf: &mut &'a [u8], n: usize) -> Value<'a> {
    let (value, rest) = buf.split_at(n);
    *buf = rest;
    Value::Bytes(value)
}

/// The fields of one encoded message of the (well-formed) descriptor set.
fn read_fields(mut buf: &[u8]) -> Vec<(u64, Value<'_>)> {
    let mut fields = Vec::new();
    while !buf.is_empty() {
        let key = read_varint(&mut buf);
        let value = match key & 7 {
            VARINT => Value::Int(read_varint(&mut buf)),
            FIXED64 => take(&mut buf, 8),
            LEN => {
                let n = read_varint(&mut buf) as usize;
                take(&mut buf, n)
            }
            FIXED32 => take(&mut buf, 4),
            wire => panic!("wire type {wire} in the descriptor set"),
        };
        fields.push((key >> 3, value));
    }
    fields
}

fn text_of(value: Value<'_>) -> String {
    match value {
        Value::Bytes(b) => String::from_utf8(b.to_vec()).expect("UTF-8 in the descriptor set"),
        Value::Int(_) => panic!("a number where the descriptor set has text"),
    }
}

/// What a field holds on the wire.
#[derive(Debug, Clone)]
enum Kind {
    Str,
    Bytes,
    Varint,
    Fixed32,
    Fixed64,
    /// An embedded message, by its full name (`.mesh.v1.Plan`).
    Message(String),
}

#[derive(Debug, Clone)]
struct Field {
    number: u64,
    name: String,
    kind: Kind,
    repeated: bool,
}

/// Who may call an RPC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Caller {
    /// `Lead.Join`: the join token.
    Joiner,
    /// The rest of `Lead`: a member's session token.
    Member,
    /// `Operator`: the operator token.
    Operator,
}

#[derive(Debug, Clone)]
struct Rpc {
    /// `/mesh.v1.Lead/Join`.
    path: String,
    caller: Caller,
    server_streaming: bool,
    /// The request message's full name.
    input: String,
}

/// The messages and RPCs of the contract, from the descriptor set the
/// generated code carries.
#[derive(Debug, Default)]
struct Schema {
    messages: HashMap<String, Vec<Field>>,
    rpcs: Vec<Rpc>,
}

impl Schema {
    fn load() -> Self {
        let mut schema = Schema::default();
        for (number, file) in read_fields(pb::FILE_DESCRIPTOR_SET) {
            let Value::Bytes(file) = file else { continue };
            if number != 1 {
                continue;
            }
            let fields = read_fields(file);
            let package = fields
                .iter()
                .find(|(n, _)| *n == 2)
                .map(|(_, v)| text_of(*v))
                .unwrap_or_default();
            for (n, value) in &fields {
                match (n, value) {
                    (4, Value::Bytes(message)) => {
                        schema.message(&format!(".{package}"), message);
                    }
                    (6, Value::Bytes(service)) => schema.service(&package, service),
                    _ => {}
                }
            }
        }
        schema
    }

    fn message(&mut self, scope: &str, encoded: &[u8]) {
        let parts = read_fields(encoded);
        let name = parts
            .iter()
            .find(|(n, _)| *n == 1)
            .map(|(_, v)| text_of(*v))
            .expect("a message's name");
        let full = format!("{scope}.{name}");
        let mut fields = Vec::new();
        for (n, value) in &parts {
            match (n, value) {
                (2, Value::Bytes(field)) => fields.push(Self::field(field)),
                (3, Value::Bytes(nested)) => self.message(&full, nested),
                _ => {}
            }
        }
        self.messages.insert(full, fields);
    }

    fn field(encoded: &[u8]) -> Field {
        let (mut name, mut number, mut label, mut kind, mut type_name) =
            (String::new(), 0, 0, 0, String::new());
        for (n, value) in read_fields(encoded) {
            match (n, value) {
                (1, v) => name = text_of(v),
                (3, Value::Int(v)) => number = v,
                (4, Value::Int(v)) => label = v,
                (5, Value::Int(v)) => kind = v,
                (6, v) => type_name = text_of(v),
                _ => {}
            }
        }
        let kind = match kind {
            9 => Kind::Str,
            12 | 10 => Kind::Bytes,
            11 => Kind::Message(type_name),
            1 | 6 | 16 => Kind::Fixed64,
            2 | 7 | 15 => Kind::Fixed32,
            _ => Kind::Varint,
        };
        Field {
            number,
            name,
            kind,
            repeated: label == 3,
        }
    }

    fn service(&mut self, package: &str, encoded: &[u8]) {
        let parts = read_fields(encoded);
        let service = parts
            .iter()
            .find(|(n, _)| *n == 1)
            .map(|(_, v)| text_of(*v))
            .expect("a service's name");
        let full = format!("{package}.{service}");
        for (n, value) in &parts {
            let (2, Value::Bytes(method)) = (n, value) else {
                continue;
            };
            let (mut name, mut input, mut server_streaming) = (String::new(), String::new(), false);
            for (m, v) in read_fields(method) {
                match (m, v) {
                    (1, v) => name = text_of(v),
                    (2, v) => input = text_of(v),
                    (6, Value::Int(s)) => server_streaming = s != 0,
                    _ => {}
                }
            }
            let caller = match (full.as_str(), name.as_str()) {
                ("mesh.v1.Lead", "Join") => Caller::Joiner,
                ("mesh.v1.Lead", _) => Caller::Member,
                ("mesh.v1.Operator", _) => Caller::Operator,
                _ => continue,
            };
            self.rpcs.push(Rpc {
                path: format!("/{full}/{name}"),
                caller,
                server_streaming,
                input,
            });
        }
    }

    fn fields(&self, message: &str) -> &[Field] {
        self.messages
            .get(message)
            .unwrap_or_else(|| panic!("no message {message} in the descriptor set"))
    }
}

// ---------------------------------------------------------------------------
// A codec that sends and takes raw bytes.

#[derive(Debug, Clone, Copy, Default)]
struct RawCodec;

#[derive(Debug)]
struct RawEncoder;

#[derive(Debug)]
struct RawDecoder;

impl Encoder for RawEncoder {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for RawDecoder {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = RawEncoder;
    type Decoder = RawDecoder;

    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }

    fn decoder(&mut self) -> RawDecoder {
        RawDecoder
    }
}

/// One raw call: `body` as the request message of `rpc`, with `token`. For a
/// server stream, the answer is its headers' status; the stream is dropped.
async fn raw_call(
    grpc: &mut Grpc<Channel>,
    rpc: &Rpc,
    token: &str,
    body: Bytes,
) -> Result<(), Status> {
    let path: PathAndQuery = rpc.path.parse().expect("a path");
    let mut request = tonic::Request::new(body);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("a header value"),
    );
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(format!("the channel is not ready: {e}")))?;
    if rpc.server_streaming {
        grpc.server_streaming(request, path, RawCodec)
            .await
            .map(drop)
    } else {
        grpc.unary(request, path, RawCodec).await.map(drop)
    }
}

// ---------------------------------------------------------------------------
// Part 1: bytes.

/// What the lead must answer a case with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// The bytes do not decode: INVALID_ARGUMENT.
    Undecodable,
    /// Past the transport's 4 MiB: RESOURCE_EXHAUSTED.
    TooLarge,
    /// Anything clean.
    Clean,
}

#[derive(Debug)]
struct Case {
    what: String,
    bytes: Vec<u8>,
    expect: Expect,
}

/// Text that is not UTF-8.
const NOT_UTF8: &[(&str, &[u8])] = &[
    ("a lone continuation byte", b"\x80"),
    ("0xFF", b"\xff"),
    ("an overlong '/'", b"\xc0\xaf"),
    ("a UTF-16 surrogate", b"\xed\xa0\x80"),
    ("past U+10FFFF", b"\xf4\x90\x80\x80"),
    ("a character cut short", b"ok\xe2\x82"),
    ("a stray byte after a name", b"alice\xfe"),
];

/// Text that is UTF-8, but odd.
const ODD_UTF8: &[(&str, &str)] = &[
    ("NUL", "a\0b"),
    ("control characters", "\x01\x1b[31m\x7f"),
    ("an RTL override", "\u{202E}gnp.exe"),
    ("a BOM", "\u{FEFF}"),
    ("U+10FFFF", "\u{10FFFF}"),
    ("an emoji sequence", "👩\u{200D}👩\u{200D}👧"),
];

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// Crafted cases for `message`; `depth` 0 is the request itself.
fn crafted(schema: &Schema, message: &str, depth: usize) -> Vec<Case> {
    use Expect::{Clean, Undecodable};
    let mut cases = Vec::new();
    let mut add = |what: String, bytes: Vec<u8>, expect: Expect| {
        cases.push(Case {
            what,
            bytes,
            expect,
        })
    };

    // Keys.
    add("the empty message".into(), vec![], Clean);
    add("field number 0".into(), vec![0x00], Undecodable);
    add(
        "field number 0, length-delimited".into(),
        vec![0x02, 0x00],
        Undecodable,
    );
    add("a key cut short".into(), vec![0x80], Undecodable);
    add(
        "a key cut short after 3 bytes".into(),
        vec![0xff, 0xff, 0xff],
        Undecodable,
    );
    add(
        "a key varint of 11 bytes".into(),
        cat(&[&[0xff; 10], &[0x01]]),
        Undecodable,
    );
    let mut past_u32 = Vec::new();
    varint(&mut past_u32, (1 << 32) | LEN);
    add("a key past u32::MAX".into(), past_u32, Undecodable);
    add(
        "field number 2^29 (one past the largest)".into(),
        varint_field(1 << 29, 1),
        Undecodable,
    );
    add(
        "field number 2^29-1 (the largest)".into(),
        varint_field((1 << 29) - 1, 1),
        Clean,
    );
    add(
        "field numbers 19000-19999 (reserved)".into(),
        varint_field(19_000, 1),
        Clean,
    );
    add(
        "wire type 6".into(),
        raw_field(UNKNOWN, 6, &[0]),
        Undecodable,
    );
    add(
        "wire type 7".into(),
        raw_field(UNKNOWN, 7, &[0]),
        Undecodable,
    );
    add(
        "an unknown field of every wire type".into(),
        cat(&[
            &varint_field(UNKNOWN, u64::MAX),
            &raw_field(UNKNOWN, FIXED64, &[7; 8]),
            &delimited(UNKNOWN, b"abc"),
            &raw_field(UNKNOWN, START_GROUP, &[]),
            &raw_field(UNKNOWN, END_GROUP, &[]),
            &raw_field(UNKNOWN, FIXED32, &[7; 4]),
        ]),
        Clean,
    );
    // Groups.
    add(
        "a lone end-group".into(),
        raw_field(UNKNOWN, END_GROUP, &[]),
        Undecodable,
    );
    add(
        "a group never closed".into(),
        cat(&[
            &raw_field(UNKNOWN, START_GROUP, &[]),
            &varint_field(UNKNOWN + 1, 1),
        ]),
        Undecodable,
    );
    add(
        "a group closed by another field's end".into(),
        cat(&[
            &raw_field(UNKNOWN, START_GROUP, &[]),
            &raw_field(UNKNOWN + 1, END_GROUP, &[]),
        ]),
        Undecodable,
    );
    add("groups nested 30 deep".into(), nested_groups(30), Clean);
    add(
        "groups nested 150 deep (past the recursion limit)".into(),
        nested_groups(150),
        Undecodable,
    );
    add(
        "groups nested 20,000 deep".into(),
        nested_groups(20_000),
        Undecodable,
    );
    add(
        "unknown length-delimited fields nested 2,000 deep".into(),
        nested_delimited(2_000),
        Clean,
    );
    // Lengths.
    let mut huge = Vec::new();
    key(&mut huge, UNKNOWN, LEN);
    varint(&mut huge, u64::MAX);
    huge.extend_from_slice(b"abc");
    add(
        "an unknown field claiming u64::MAX bytes".into(),
        huge,
        Undecodable,
    );
    add(
        "an unknown fixed64 cut short".into(),
        raw_field(UNKNOWN, FIXED64, &[1, 2, 3]),
        Undecodable,
    );
    add(
        "an unknown fixed32 cut short".into(),
        raw_field(UNKNOWN, FIXED32, &[1]),
        Undecodable,
    );

    let fields = schema.fields(message);
    for field in fields {
        let n = field.number;
        let name = &field.name;
        let length_delimited = matches!(field.kind, Kind::Str | Kind::Bytes | Kind::Message(_));
        if length_delimited {
            add(
                format!("{name}: a varint where a length is due"),
                varint_field(n, 1),
                Undecodable,
            );
            add(
                format!("{name}: a fixed64 where a length is due"),
                raw_field(n, FIXED64, &[0; 8]),
                Undecodable,
            );
            add(
                format!("{name}: a fixed32 where a length is due"),
                raw_field(n, FIXED32, &[0; 4]),
                Undecodable,
            );
            add(
                format!("{name}: a group where a length is due"),
                cat(&[
                    &raw_field(n, START_GROUP, &[]),
                    &raw_field(n, END_GROUP, &[]),
                ]),
                Undecodable,
            );
            for (claim, label) in [
                (u64::MAX, "u64::MAX"),
                (u64::from(u32::MAX), "u32::MAX"),
                (1 << 31, "2 GiB"),
                (4_097, "4,097"),
            ] {
                let mut bytes = Vec::new();
                key(&mut bytes, n, LEN);
                varint(&mut bytes, claim);
                bytes.extend_from_slice(b"only ten!!");
                add(
                    format!("{name}: claims {label} bytes, has 10"),
                    bytes,
                    Undecodable,
                );
            }
            let mut cut = Vec::new();
            key(&mut cut, n, LEN);
            cut.push(0x80);
            add(format!("{name}: a length cut short"), cut, Undecodable);
            let one = match field.kind {
                Kind::Message(_) => delimited(n, b""),
                _ => delimited(n, b"x"),
            };
            add(format!("{name}: 5,000 times"), one.repeat(5_000), Clean);
        } else {
            let mut packed = Vec::new();
            key(&mut packed, n, LEN);
            packed.extend_from_slice(&[1, 1]);
            add(
                format!("{name}: a length where a number is due"),
                packed,
                if field.repeated { Clean } else { Undecodable },
            );
            add(
                format!("{name}: a group where a number is due"),
                cat(&[
                    &raw_field(n, START_GROUP, &[]),
                    &raw_field(n, END_GROUP, &[]),
                ]),
                Undecodable,
            );
            add(
                format!("{name}: 5,000 times"),
                varint_field(n, 1).repeat(5_000),
                if matches!(field.kind, Kind::Varint) {
                    Clean
                } else {
                    Undecodable
                },
            );
        }
        match &field.kind {
            Kind::Str => {
                for (label, bytes) in NOT_UTF8 {
                    add(
                        format!("{name}: not UTF-8 ({label})"),
                        delimited(n, bytes),
                        Undecodable,
                    );
                }
                for (label, text) in ODD_UTF8 {
                    add(
                        format!("{name}: {label}"),
                        delimited(n, text.as_bytes()),
                        Clean,
                    );
                }
            }
            Kind::Bytes => {}
            Kind::Varint => {
                add(
                    format!("{name}: a fixed64 where a varint is due"),
                    raw_field(n, FIXED64, &[0; 8]),
                    Undecodable,
                );
                add(
                    format!("{name}: a fixed32 where a varint is due"),
                    raw_field(n, FIXED32, &[0; 4]),
                    Undecodable,
                );
                add(
                    format!("{name}: a value cut short"),
                    raw_field(n, VARINT, &[0x80]),
                    Undecodable,
                );
                add(
                    format!("{name}: a value of 11 bytes"),
                    raw_field(n, VARINT, &cat(&[&[0xff; 10], &[0x01]])),
                    Undecodable,
                );
                for (value, label) in [
                    (u64::MAX, "u64::MAX"),
                    (-1_i64 as u64, "-1"),
                    (i64::MIN as u64, "i64::MIN"),
                    (u64::from(u32::MAX) + 1, "2^32"),
                    (2, "2 (a bool past true)"),
                ] {
                    add(format!("{name}: {label}"), varint_field(n, value), Clean);
                }
                add(
                    format!("{name}: 1 in 5 bytes (overlong)"),
                    raw_field(n, VARINT, &[0x81, 0x80, 0x80, 0x80, 0x00]),
                    Clean,
                );
            }
            Kind::Fixed32 | Kind::Fixed64 => {
                let wire = if matches!(field.kind, Kind::Fixed32) {
                    FIXED32
                } else {
                    FIXED64
                };
                add(
                    format!("{name}: cut short"),
                    raw_field(n, wire, &[1]),
                    Undecodable,
                );
                add(
                    format!("{name}: a varint where fixed is due"),
                    varint_field(n, 1),
                    Undecodable,
                );
            }
            Kind::Message(inner) => {
                if depth == 0 {
                    for case in crafted(schema, inner, depth + 1) {
                        add(
                            format!("{name}: {}", case.what),
                            delimited(n, &case.bytes),
                            case.expect,
                        );
                    }
                }
                add(
                    format!("{name}: unknown fields nested 2,000 deep inside"),
                    delimited(n, &nested_delimited(2_000)),
                    Clean,
                );
            }
        }
    }
    if let Some(first) = fields.first() {
        let valid = match first.kind {
            Kind::Str | Kind::Bytes | Kind::Message(_) => delimited(first.number, b""),
            Kind::Varint => varint_field(first.number, 1),
            Kind::Fixed32 => raw_field(first.number, FIXED32, &[0; 4]),
            Kind::Fixed64 => raw_field(first.number, FIXED64, &[0; 8]),
        };
        add(
            format!("{}: then a stray 0xFF", first.name),
            cat(&[&valid, &[0xff]]),
            Undecodable,
        );
    }
    cases
}

/// Numbers worth trying in any varint.
const NUMBERS: &[u64] = &[
    0,
    1,
    2,
    3,
    4,
    5,
    99,
    1_000,
    1_001,
    u32::MAX as u64,
    u64::MAX,
    u64::MAX - 1,
    1 << 63,
    i64::MAX as u64,
    -1_i64 as u64,
];

/// A string field's value: from `dict`, a name, odd text, a long run, or
/// random bytes (often not UTF-8).
fn random_text(rng: &mut Rng, dict: &[String]) -> Vec<u8> {
    const PIECES: &[&str] = &[
        "a", "z", "0", "-", "_", "é", "🦀", "\0", "\u{202E}", " ", "/", "*", "{", "[", "\\", "..",
        "\n",
    ];
    match rng.below(6) {
        0 | 1 => rng.pick(dict).clone().into_bytes(),
        2 => (0..1 + rng.below(70))
            .map(|_| b"abcdefghijklmnopqrstuvwxyz0123456789-_"[rng.below(38)])
            .collect(),
        3 => (0..rng.below(40))
            .map(|_| *rng.pick(PIECES))
            .collect::<String>()
            .into_bytes(),
        4 => {
            let len = *rng.pick(&[
                63, 64, 65, 128, 129, 256, 257, 1_024, 1_025, 4_096, 4_097, 16_384, 16_385, 65_536,
                65_537,
            ]);
            vec![b'x'; len]
        }
        _ => {
            let len = rng.below(32);
            rng.bytes(len)
        }
    }
}

/// A randomised message of type `message`: each field present or not, some
/// repeated, values from [`random_text`] and [`NUMBERS`], perhaps an unknown
/// field.
fn random_message(
    schema: &Schema,
    message: &str,
    rng: &mut Rng,
    dict: &[String],
    depth: usize,
) -> Vec<u8> {
    let mut out = Vec::new();
    for field in schema.fields(message) {
        if rng.chance(25) {
            continue;
        }
        let times = if field.repeated {
            if rng.chance(5) {
                2_000
            } else {
                rng.below(5)
            }
        } else if rng.chance(10) {
            2
        } else {
            1
        };
        for _ in 0..times {
            let n = field.number;
            match &field.kind {
                Kind::Str | Kind::Bytes => {
                    let text = if times > 10 {
                        rng.pick(dict).clone().into_bytes()
                    } else {
                        random_text(rng, dict)
                    };
                    out.extend(delimited(n, &text));
                }
                Kind::Varint => {
                    let value = if rng.chance(70) {
                        *rng.pick(NUMBERS)
                    } else {
                        rng.u64()
                    };
                    out.extend(varint_field(n, value));
                }
                Kind::Fixed32 => out.extend(raw_field(n, FIXED32, &rng.bytes(4))),
                Kind::Fixed64 => out.extend(raw_field(n, FIXED64, &rng.bytes(8))),
                Kind::Message(inner) => {
                    let inner = if depth < 3 {
                        random_message(schema, inner, rng, dict, depth + 1)
                    } else {
                        Vec::new()
                    };
                    out.extend(delimited(n, &inner));
                }
            }
        }
    }
    if rng.chance(20) {
        let n = 1 + rng.below(40) as u64;
        match rng.below(4) {
            0 => out.extend(varint_field(n, rng.u64())),
            1 => out.extend(delimited(n, &random_text(rng, dict))),
            2 => out.extend(raw_field(n, FIXED32, &rng.bytes(4))),
            _ => out.extend(raw_field(n, FIXED64, &rng.bytes(8))),
        }
    }
    out
}

/// A few random edits: flipped bits, odd bytes, insertions, cuts, repeats.
fn mutate(rng: &mut Rng, bytes: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(4) {
        if bytes.is_empty() {
            let len = 1 + rng.below(8);
            bytes.extend(rng.bytes(len));
            continue;
        }
        let at = rng.below(bytes.len());
        match rng.below(6) {
            0 => bytes[at] ^= 1 << rng.below(8),
            1 => {
                let random = rng.u64() as u8;
                bytes[at] = *rng.pick(&[0x00, 0x7f, 0x80, 0xff, random]);
            }
            2 => {
                let len = 1 + rng.below(8);
                let insert = rng.bytes(len);
                bytes.splice(at..at, insert);
            }
            3 => bytes.truncate(at),
            4 => {
                let end = (at + 1 + rng.below(16)).min(bytes.len());
                bytes.drain(at..end);
            }
            _ => {
                let end = (at + 1 + rng.below(64)).min(bytes.len());
                let copy = bytes[at..end].to_vec();
                bytes.splice(at..at, copy);
            }
        }
    }
}

/// Every case for one RPC: crafted, over the size limit, random bytes,
/// random and mutated messages.
fn cases_for(schema: &Schema, rpc: &Rpc, rng: &mut Rng, dict: &[String]) -> Vec<Case> {
    let mut cases = crafted(schema, &rpc.input, 0);
    cases.push(Case {
        what: "a message past the transport's 4 MiB".into(),
        bytes: delimited(UNKNOWN, &vec![b'x'; 4 << 20]),
        expect: Expect::TooLarge,
    });
    for i in 0..RANDOM_BYTES {
        let len = match i % 3 {
            0 => rng.below(16),
            1 => rng.below(256),
            _ => rng.below(4_097),
        };
        cases.push(Case {
            what: format!("random bytes #{i}"),
            bytes: rng.bytes(len),
            expect: Expect::Clean,
        });
    }
    for i in 0..RANDOM_MESSAGES {
        let mut bytes = random_message(schema, &rpc.input, rng, dict, 0);
        let what = if i % 2 == 1 {
            mutate(rng, &mut bytes);
            format!("a mutated random message #{i}")
        } else {
            format!("a random message #{i}")
        };
        cases.push(Case {
            what,
            bytes,
            expect: Expect::Clean,
        });
    }
    cases
}

/// A new member's session token: `{prefix}{n}` for the next free `n`.
async fn join_fresh(joiner: &mut LeadApi, prefix: &str, counter: &mut usize) -> String {
    loop {
        *counter += 1;
        let request = pb::JoinRequest {
            name: format!("{prefix}{counter}"),
            role: "fuzzer".into(),
        };
        match within("Join", joiner.join(request)).await {
            Ok(joined) => return joined.into_inner().session_token,
            // A fuzzed Join took the name first.
            Err(status) if status.code() == Code::AlreadyExists => {}
            Err(status) => panic!("joining a member to fuzz with: {status:?}"),
        }
    }
}

#[tokio::test]
async fn arbitrary_bytes_to_every_rpc_end_in_a_clean_status() {
    let seed = seed();
    let mut report = Report::new("bytes", seed);
    let schema = Schema::load();
    for expected in [
        "/mesh.v1.Lead/Join",
        "/mesh.v1.Lead/Inbox",
        "/mesh.v1.Lead/SubmitPlan",
        "/mesh.v1.Operator/ReviewPlan",
        "/mesh.v1.Operator/Watch",
        "/mesh.v1.Operator/SpawnTeammate",
    ] {
        assert!(
            schema.rpcs.iter().any(|r| r.path == expected),
            "{expected} is not in the descriptor set: {:?}",
            schema.rpcs
        );
    }
    // No teammate executable by default: a fuzzed SpawnTeammate never starts
    // a process, nor makes a workspace (a relative one would land in the
    // lead's working directory, this crate's).
    let mut lead = Lead::start(&["--teammate-bin", "/nonexistent/teammate"]).await;
    report.lead_started();
    let mut grpc = Grpc::new(lead.channel().await);
    // Someone for the messages to name.
    let _bob = lead.join("bob").await;
    let mut joiner = lead.lead_api(&lead.join_token).await;
    let mut dict: Vec<String> = [
        "bob",
        "*",
        "lead",
        "",
        "fz1",
        "m1",
        "r1",
        "t1",
        "1",
        "src/*.rs",
        "../up",
        "2f1c0e9a-7d2b-4c1e-9a4b-3f9d8e7c6b5a",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    dict.push(uuid::Uuid::new_v4().to_string());

    // One member per `Lead` RPC, joined again when a case made it leave.
    let mut sessions: HashMap<String, String> = HashMap::new();
    let mut joins = 0;
    'rpcs: for rpc in &schema.rpcs {
        let mut rng = Rng::derived(seed, &rpc.path);
        for case in cases_for(&schema, rpc, &mut rng, &dict) {
            let token = match rpc.caller {
                Caller::Joiner => lead.join_token.clone(),
                Caller::Operator => lead.operator_token.clone(),
                Caller::Member => match sessions.get(&rpc.path) {
                    Some(token) => token.clone(),
                    None => {
                        let token = join_fresh(&mut joiner, "fz", &mut joins).await;
                        sessions.insert(rpc.path.clone(), token.clone());
                        token
                    }
                },
            };
            let body = Bytes::from(case.bytes.clone());
            let result =
                tokio::time::timeout(CALL_TIMEOUT, raw_call(&mut grpc, rpc, &token, body)).await;
            let what = || format!("{} [{}] bytes {}", rpc.path, case.what, hex(&case.bytes));
            let status = match result {
                Err(_) => {
                    report.count("no answer");
                    report.finding(format!("{}: no status within {CALL_TIMEOUT:?}", what()));
                    continue;
                }
                Ok(Ok(())) => {
                    report.count("Ok");
                    if case.expect != Expect::Clean {
                        report.finding(format!(
                            "{}: OK, but the bytes do not decode ({:?} expected)",
                            what(),
                            case.expect
                        ));
                    }
                    continue;
                }
                Ok(Err(status)) => status,
            };
            let code = status.code();
            report.count(&format!("{code:?}"));
            let fine = !from_transport(&status)
                && match case.expect {
                    Expect::Undecodable => code == Code::InvalidArgument,
                    Expect::TooLarge => code == Code::ResourceExhausted,
                    Expect::Clean => {
                        clean(code)
                            || (code == Code::Unauthenticated && rpc.caller == Caller::Member)
                    }
                };
            if code == Code::Unauthenticated && rpc.caller == Caller::Member {
                // The case made the member leave (or shut down): a new one.
                sessions.remove(&rpc.path);
            }
            if !fine {
                report.finding(format!(
                    "{}: {} ({:?} expected)",
                    what(),
                    status_text(&status),
                    case.expect
                ));
                if let Ok(Some(exit)) = lead.child.try_wait() {
                    report.finding(format!("the lead exited ({exit}) after {}", what()));
                    break 'rpcs;
                }
            }
        }
        report.section(&rpc.path);
    }

    // Still running, and still serving.
    match lead.child.try_wait() {
        Ok(None) => {}
        other => report.finding(format!("the lead is not running after fuzzing: {other:?}")),
    }
    let mut operator = lead.operator().await;
    let team = within(
        "ListTeam after fuzzing",
        operator.list_team(pb::ListTeamRequest::default()),
    )
    .await;
    if let Err(status) = &team {
        report.finding(format!("ListTeam after fuzzing: {status:?}"));
    }
    let mut after = lead.join("after-fuzzing").await;
    if let Err(status) = after.send("bob", "still here", "").await {
        report.finding(format!("Send after fuzzing: {status:?}"));
    }
    println!("bytes: {joins} members joined for the Lead RPCs");
    report.finish();
}

// ---------------------------------------------------------------------------
// Part 2: absurd values through the typed clients.

/// Strings no sane client sends.
fn weird() -> Vec<String> {
    [
        "",
        " ",
        "\t\r\n",
        "\0",
        "a\0b",
        "\x01\x02\x7f",
        "\x1b[2J\x1b[31mred",
        "\u{202E}txt.exe\u{202C}",
        "\u{200B}",
        "\u{FEFF}",
        "\u{10FFFF}",
        "\u{FFFD}",
        "🦀",
        "👩\u{200D}👩\u{200D}👧\u{200D}👦",
        "e\u{301}\u{301}\u{301}",
        "../../../../etc/passwd",
        "/etc/passwd",
        "C:\\Windows\\system32",
        "~",
        "$(reboot)",
        "%s%n%x",
        "{}",
        "'; DROP TABLE members; --",
        "<script>alert(1)</script>",
        "null",
        "lead",
        "*",
        "LEAD",
        "--help",
        "-",
        "not-a-uuid",
        "{00000000-0000-0000-0000-000000000000}",
        "00000000-0000-0000-0000-000000000000",
        "urn:uuid:2F1C0E9A-7D2B-4C1E-9A4B-3F9D8E7C6B5A",
        "2f1c0e9a-7d2b-4c1e-9a4b-3f9d8e7c6b5a ",
        "m1",
        "r1",
        "t1",
        "m18446744073709551615",
        "m-1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The oddest of [`weird`], for fields where each case costs a process
/// or a member.
fn weird_some() -> Vec<String> {
    [
        "",
        " ",
        "\0",
        "a\0b",
        "\x1b[2J\x1b[31mred",
        "\u{202E}txt.exe\u{202C}",
        "👩\u{200D}👩\u{200D}👧\u{200D}👦",
        "../../../../etc/passwd",
        "-",
        "lead",
        "not-a-uuid",
        "%s%n%x",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Strings around `limit` bytes: just under, at, just over, over with a
/// character across the limit, a run of 4-byte characters, and far over.
fn around(limit: usize) -> Vec<String> {
    vec![
        "x".repeat(limit - 1),
        "x".repeat(limit),
        "x".repeat(limit + 1),
        format!("{}é", "x".repeat(limit - 1)),
        "🦀".repeat(limit / 4 + 1),
        "y".repeat(limit * 4),
    ]
}

/// Member names: invalid ones, absurd ones, and a few real ones.
fn names() -> Vec<String> {
    let mut names = weird();
    names.extend(
        [
            "Alice", "-a", "_a", "a b", "a.b", "é", "0", "alice", "bob", "nobody", "a/b",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    names.push("a".repeat(64));
    names.push("a".repeat(65));
    names.push("🦀".repeat(4_000));
    names.push("n".repeat(1 << 20));
    names
}

/// Globs that are not globs, leave the workspace, or are merely absurd.
fn globs() -> Vec<String> {
    let mut globs: Vec<String> = [
        "",
        " ",
        "*",
        "**",
        "**/*",
        "/abs",
        "\\abs",
        "..",
        "a/../../b",
        "./a",
        "[",
        "[!]",
        "[z-a]",
        "{a,b",
        "{a,{b,c}}",
        "a\0b",
        "\u{202E}",
        "🦀/*",
        "a\\",
        "~/.ssh/*",
        "***",
        "a**b",
        "[[:alpha:]]",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    globs.push("x".repeat(limits::GLOB));
    globs.push("x".repeat(limits::GLOB + 1));
    globs.push(format!("{}x", "*/".repeat(400)));
    globs.push("{".repeat(500));
    globs.push("[".repeat(1_000));
    globs.push("a{b,c}".repeat(150));
    globs.push("?".repeat(1_000));
    globs
}

/// JSON that is not JSON, or is absurd.
fn json_args() -> Vec<String> {
    let mut args: Vec<String> = [
        "",
        "null",
        "{}",
        "[",
        "{\"a\":",
        "1e999999",
        "-0",
        "\"\\ud800\"",
        "\"\\u0000\"",
        "{\"path\": 5}",
        "{\"path\": \"/etc/passwd\"}",
        "{\"path\": \"../../x\"}",
        "{\"path\": \"\\u0000\"}",
        "{\"a\":1,\"a\":2}",
        "\u{FEFF}{}",
        "{\"command\": \"rm -rf /\"}",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(format!("{}{}", "[".repeat(100), "]".repeat(100)));
    args.push(format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)));
    args.push(format!("{}1{}", "{\"a\":".repeat(5_000), "}".repeat(5_000)));
    for len in [
        limits::ARGS_JSON - 1,
        limits::ARGS_JSON,
        limits::ARGS_JSON + 1,
    ] {
        args.push(format!("\"{}\"", "x".repeat(len - 2)));
    }
    args.extend(weird());
    args
}

/// Enum values: unknown, negative, extreme.
const ENUMS: &[i32] = &[i32::MIN, -1, 0, 1, 2, 3, 4, 5, 99, i32::MAX];
/// Sequence numbers.
const SEQS: &[u64] = &[
    0,
    1,
    1 << 53,
    1 << 63,
    i64::MAX as u64,
    u64::MAX - 1,
    u64::MAX,
];
/// Page sizes.
const PAGE_SIZES: &[u32] = &[0, 1, 999, 1_000, 1_001, u32::MAX];

/// Unix times in ms: extremes, the past, the far future.
fn times() -> Vec<i64> {
    let now = shared::auth::now_unix_ms();
    vec![
        i64::MIN,
        -1,
        0,
        1,
        now - 60_000,
        now + 1,
        now + 3_600_000,
        now + 100 * 365 * 86_400_000,
        i64::MAX - 1,
        i64::MAX,
    ]
}

/// Page tokens.
fn page_tokens() -> Vec<String> {
    let mut tokens = weird();
    tokens.extend(around(limits::PAGE_TOKEN));
    tokens.extend(
        [
            "t1",
            "t-1",
            "t18446744073709551615",
            "r18446744073709551615",
            "m0",
            "r0",
            "t0",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    tokens
}

/// One typed call under the timeout, judged; `Some` with the reply when OK.
macro_rules! call {
    ($report:expr, $rpc:literal, $client:expr, $method:ident, $request:expr) => {{
        let request = $request;
        let input = request.clone();
        let result = tokio::time::timeout(CALL_TIMEOUT, $client.$method(request)).await;
        $report.typed($rpc, || shown(&input), result)
    }};
}

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

/// A string for a random typed call.
fn absurd_text(rng: &mut Rng, known: &[String]) -> String {
    const LIMITS: &[usize] = &[
        64,
        limits::ID,
        limits::TOOL,
        limits::ROLE,
        limits::GLOB,
        limits::PATH,
        limits::REASON,
        limits::TEXT,
    ];
    const UNITS: &[&str] = &["x", "é", "🦀", "\0", "\u{202E}"];
    match rng.below(5) {
        0 | 1 => rng.pick(&weird()).clone(),
        2 if !known.is_empty() => rng.pick(known).clone(),
        3 => {
            let limit = *rng.pick(LIMITS);
            let unit = *rng.pick(UNITS);
            let bytes = limit - 1 + rng.below(3);
            unit.repeat(bytes.div_ceil(unit.len()))
        }
        _ => uuid::Uuid::new_v4().to_string(),
    }
}

#[tokio::test]
async fn absurd_well_formed_messages_get_clean_answers() {
    let seed = seed();
    let mut report = Report::new("absurd", seed);
    let mut rng = Rng::derived(seed, "absurd");
    // A spawn request that gets through names `/bin/true` (as every one
    // below does): never a real teammate that would go looking for a model.
    let mut lead = Lead::start(&["--teammate-bin", "/bin/true"]).await;
    report.lead_started();
    let mut op = lead.operator().await;
    let mut joiner = lead.lead_api(&lead.join_token).await;
    let mut tmp = 0;

    // Streams that see everything the lead relays, absurd or not.
    let watch = op.watch(pb::WatchRequest {}).await.expect("watch");
    let watching = tokio::spawn(drain(watch.into_inner()));
    let mut alice = lead.join("alice").await;
    alice.open_inbox(0).await;
    let alice_reading = tokio::spawn(drain(alice.inbox.take().expect("inbox")));
    let mut bob = lead.join("bob").await;
    bob.open_inbox(0).await;
    let bob_reading = tokio::spawn(drain(bob.inbox.take().expect("inbox")));
    // Carol's inbox is the one the absurd Inbox calls replace.
    let mut carol = lead.join("carol").await;

    // Join.
    for name in names() {
        let request = pb::JoinRequest {
            name,
            role: "tester".into(),
        };
        call!(report, "Join", joiner, join, request);
    }
    for (i, role) in weird().into_iter().chain(around(limits::ROLE)).enumerate() {
        let request = pb::JoinRequest {
            name: format!("role{i}"),
            role,
        };
        call!(report, "Join", joiner, join, request);
    }
    report.section("Join");

    // Inbox and Ack.
    for &after_seq in SEQS {
        let stream = call!(
            report,
            "Inbox",
            carol.api,
            inbox,
            pb::InboxRequest { after_seq }
        );
        drop(stream);
        call!(
            report,
            "Ack",
            carol.api,
            ack,
            pb::AckRequest { seq: after_seq }
        );
    }
    report.section("Inbox, Ack");

    // Send.
    let text = |content: &str| {
        Some(pb::Text {
            content: content.into(),
        })
    };
    for to in names() {
        let request = pb::SendRequest {
            to,
            text: text("hi"),
            message_id: String::new(),
        };
        call!(report, "Send", alice.api, send, request);
    }
    call!(
        report,
        "Send",
        alice.api,
        send,
        pb::SendRequest {
            to: "bob".into(),
            text: None,
            message_id: String::new(),
        }
    );
    let mut contents = weird();
    contents.extend(around(limits::TEXT));
    contents.push("z".repeat(1 << 20));
    contents.push("z".repeat(5 << 20));
    for content in contents {
        let request = pb::SendRequest {
            to: "bob".into(),
            text: text(&content),
            message_id: String::new(),
        };
        call!(report, "Send", alice.api, send, request);
    }
    call!(
        report,
        "Send",
        alice.api,
        send,
        pb::SendRequest {
            to: "*".into(),
            text: text(&"b".repeat(limits::TEXT)),
            message_id: String::new(),
        }
    );
    for id in weird().into_iter().chain(around(limits::ID)) {
        for content in ["once", "then something else"] {
            let request = pb::SendRequest {
                to: "bob".into(),
                text: text(content),
                message_id: id.clone(),
            };
            call!(report, "Send", alice.api, send, request);
        }
    }
    report.section("Send");

    // SubmitPlan.
    let plan = |edit: &dyn Fn(&mut pb::Plan)| {
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
    };
    let mut requests = vec![
        pb::PlanApprovalRequest::default(),
        plan(&|p| *p = pb::Plan::default()),
        plan(&|p| p.steps = vec![String::new(); limits::LIST_ITEMS]),
        plan(&|p| p.steps = vec!["s".into(); limits::LIST_ITEMS + 1]),
        plan(&|p| p.steps = vec!["step".into(); 5_000]),
        plan(&|p| p.steps = weird()),
        plan(&|p| p.steps = vec!["x".repeat(60_000)]),
        plan(&|p| p.steps = vec!["x".repeat(30_000); 3]),
        plan(&|p| p.files = vec!["a".into(); limits::LIST_ITEMS + 1]),
        plan(&|p| p.files = vec!["src/*.rs".into(); limits::LIST_ITEMS]),
        plan(&|p| p.files = Vec::new()),
        plan(&|p| p.tests = weird()),
        plan(&|p| p.tests = vec!["t".into(); 5_000]),
    ];
    for summary in weird().into_iter().chain(around(limits::PLAN)) {
        requests.push(plan(&|p| p.summary = summary.clone()));
    }
    for body in weird().into_iter().chain(around(limits::PLAN - 64)) {
        requests.push(plan(&|p| p.body = body.clone()));
    }
    for glob in globs() {
        requests.push(plan(&|p| p.files = vec![glob.clone()]));
    }
    for task_id in weird().into_iter().chain(around(limits::ID)) {
        requests.push(plan(&|p| p.task_id = task_id.clone()));
    }
    for id in weird().into_iter().chain(around(limits::ID)) {
        let mut request = plan(&|_| {});
        request.request_id = id.clone();
        requests.push(request.clone());
        // The same id with another plan.
        request.plan.as_mut().expect("plan").summary = "another".into();
        requests.push(request);
        let mut superseding = plan(&|_| {});
        superseding.supersedes = id;
        requests.push(superseding);
    }
    let mut plans = Vec::new();
    for request in requests {
        if let Some(reply) = call!(report, "SubmitPlan", alice.api, submit_plan, request) {
            plans.push(reply.request_id);
        }
    }
    report.section("SubmitPlan");

    // ReviewPlan: absurd grants and feedback, each on a fresh plan.
    let valid_plan = || plan(&|_| {});
    let mut grants = Vec::new();
    for &mode in ENUMS {
        grants.push(pb::PermissionGrant {
            mode,
            ..Default::default()
        });
    }
    for glob in globs() {
        grants.push(pb::PermissionGrant {
            mode: pb::PermissionMode::AcceptEdits as i32,
            write_paths: vec![glob],
            ..Default::default()
        });
    }
    grants.push(pb::PermissionGrant {
        mode: pb::PermissionMode::AcceptEdits as i32,
        write_paths: vec!["src/**".into(); limits::LIST_ITEMS + 1],
        ..Default::default()
    });
    grants.push(pb::PermissionGrant {
        mode: pb::PermissionMode::AcceptEdits as i32,
        write_paths: (0..limits::LIST_ITEMS)
            .map(|i| format!("d{i}/**"))
            .collect(),
        ..Default::default()
    });
    for expires_at_unix_ms in times() {
        grants.push(pb::PermissionGrant {
            mode: pb::PermissionMode::Bypass as i32,
            expires_at_unix_ms,
            ..Default::default()
        });
    }
    let mut reviews = Vec::new();
    for (i, grant) in grants.into_iter().enumerate() {
        reviews.push(pb::PlanReview {
            approve: true,
            grant: Some(grant),
            refuse_overlap: i % 2 == 0,
            ..Default::default()
        });
    }
    for (i, feedback) in weird()
        .into_iter()
        .chain(around(limits::REASON))
        .enumerate()
    {
        reviews.push(pb::PlanReview {
            approve: i % 4 == 0,
            feedback,
            ..Default::default()
        });
    }
    for (i, mut review) in reviews.into_iter().enumerate() {
        let Some(submitted) = call!(report, "SubmitPlan", alice.api, submit_plan, valid_plan())
        else {
            continue;
        };
        review.request_id = submitted.request_id.clone();
        call!(report, "ReviewPlan", op, review_plan, review.clone());
        if i % 8 == 0 {
            // A retry, and the other answer.
            call!(report, "ReviewPlan", op, review_plan, review.clone());
            review.approve = !review.approve;
            review.feedback = "changed my mind".into();
            call!(report, "ReviewPlan", op, review_plan, review);
        }
    }
    for request_id in weird()
        .into_iter()
        .chain(around(limits::ID))
        .chain(plans.iter().cloned())
    {
        let request = pb::PlanReview {
            request_id,
            approve: true,
            ..Default::default()
        };
        call!(report, "ReviewPlan", op, review_plan, request);
    }
    // Alice in DEFAULT, to ask for permissions.
    if let Some(submitted) = call!(report, "SubmitPlan", alice.api, submit_plan, valid_plan()) {
        let review = pb::PlanReview {
            request_id: submitted.request_id,
            approve: true,
            grant: Some(pb::PermissionGrant {
                mode: pb::PermissionMode::Default as i32,
                ..Default::default()
            }),
            ..Default::default()
        };
        call!(report, "ReviewPlan", op, review_plan, review);
    }
    report.section("ReviewPlan");

    // RequestPermission and ReviewPermission.
    let mut permission_requests = Vec::new();
    for tool in weird().into_iter().chain(around(limits::TOOL)) {
        permission_requests.push(pb::PermissionRequest {
            request_id: String::new(),
            tool,
            args_json: "{}".into(),
        });
    }
    for args_json in json_args() {
        permission_requests.push(pb::PermissionRequest {
            request_id: String::new(),
            tool: "write_file".into(),
            args_json,
        });
    }
    for request_id in weird().into_iter().chain(around(limits::ID)) {
        permission_requests.push(pb::PermissionRequest {
            request_id,
            tool: "run".into(),
            args_json: String::new(),
        });
    }
    let mut permissions = Vec::new();
    for request in permission_requests {
        if let Some(reply) = call!(
            report,
            "RequestPermission",
            alice.api,
            request_permission,
            request
        ) {
            permissions.push(reply.request_id);
        }
    }
    let feedbacks: Vec<String> = weird().into_iter().chain(around(limits::REASON)).collect();
    for (i, request_id) in permissions.iter().enumerate() {
        let review = pb::PermissionReview {
            request_id: request_id.clone(),
            approve: i % 2 == 0,
            feedback: feedbacks[i % feedbacks.len()].clone(),
        };
        call!(
            report,
            "ReviewPermission",
            op,
            review_permission,
            review.clone()
        );
        let other = pb::PermissionReview {
            approve: !review.approve,
            ..review
        };
        call!(report, "ReviewPermission", op, review_permission, other);
    }
    for request_id in weird()
        .into_iter()
        .chain(around(limits::ID))
        .chain(plans.iter().take(5).cloned())
    {
        let review = pb::PermissionReview {
            request_id,
            approve: true,
            feedback: String::new(),
        };
        call!(report, "ReviewPermission", op, review_permission, review);
    }
    report.section("RequestPermission, ReviewPermission");

    // RequestShutdown (of bob, who never answers) and RespondShutdown.
    let shutdown = |target: &str| pb::ShutdownRequest {
        request_id: String::new(),
        target: target.into(),
        reason: "absurd".into(),
        deadline_unix_ms: 0,
    };
    for target in names() {
        call!(
            report,
            "RequestShutdown",
            op,
            request_shutdown,
            shutdown(&target)
        );
    }
    for reason in weird().into_iter().chain(around(limits::REASON)) {
        let request = pb::ShutdownRequest {
            reason,
            ..shutdown("bob")
        };
        call!(report, "RequestShutdown", op, request_shutdown, request);
    }
    for deadline_unix_ms in times() {
        let request = pb::ShutdownRequest {
            deadline_unix_ms,
            ..shutdown("bob")
        };
        call!(report, "RequestShutdown", op, request_shutdown, request);
    }
    let mut bob_tickets = Vec::new();
    for request_id in weird().into_iter().chain(around(limits::ID)) {
        let request = pb::ShutdownRequest {
            request_id,
            ..shutdown("bob")
        };
        if let Some(ticket) = call!(report, "RequestShutdown", op, request_shutdown, request) {
            bob_tickets.push(ticket.request_id);
        }
    }
    for (i, reason) in weird_some()
        .into_iter()
        .chain(around(limits::REASON))
        .enumerate()
    {
        let mut member = throwaway(&lead, &mut tmp).await;
        let Some(ticket) = call!(
            report,
            "RequestShutdown",
            op,
            request_shutdown,
            shutdown(&member.name)
        ) else {
            continue;
        };
        let response = pb::ShutdownResponse {
            request_id: ticket.request_id,
            approve: i % 2 == 0,
            reason,
        };
        call!(
            report,
            "RespondShutdown",
            member.api,
            respond_shutdown,
            response
        );
    }
    for request_id in weird()
        .into_iter()
        .chain(around(limits::ID))
        .chain(bob_tickets.iter().take(3).cloned())
        .chain(plans.iter().take(3).cloned())
    {
        // Alice answering: unknown ids, bob's requests, her own plans.
        let response = pb::ShutdownResponse {
            request_id,
            approve: false,
            reason: "no".into(),
        };
        call!(
            report,
            "RespondShutdown",
            alice.api,
            respond_shutdown,
            response
        );
    }
    report.section("RequestShutdown, RespondShutdown");

    // ReportIdle, ReportToolCall, Leave.
    for reason in weird().into_iter().chain(around(limits::REASON)) {
        call!(
            report,
            "ReportIdle",
            alice.api,
            report_idle,
            pb::IdleNotification { reason }
        );
    }
    let mut reports = Vec::new();
    for (i, value) in weird()
        .into_iter()
        .chain(around(limits::TOOL))
        .chain(around(limits::REPORT_ARGS_JSON))
        .chain(std::iter::once("r".repeat(1 << 20)))
        .enumerate()
    {
        reports.push(pb::ToolCallReport {
            tool: value.clone(),
            args_json: value.clone(),
            allowed: i % 2 == 0,
            outcome: value.clone(),
            member: value,
        });
    }
    for report_ in reports {
        call!(
            report,
            "ReportToolCall",
            alice.api,
            report_tool_call,
            report_
        );
    }
    for reason in weird_some().into_iter().chain(around(limits::REASON)) {
        let mut member = throwaway(&lead, &mut tmp).await;
        call!(
            report,
            "Leave",
            member.api,
            leave,
            pb::LeaveRequest { reason }
        );
    }
    report.section("ReportIdle, ReportToolCall, Leave");

    // Tasks.
    let task = |edit: &dyn Fn(&mut pb::CreateTaskRequest)| {
        let mut task = pb::CreateTaskRequest {
            subject: "absurd".into(),
            ..Default::default()
        };
        edit(&mut task);
        task
    };
    let mut creates = vec![
        pb::CreateTaskRequest::default(),
        task(&|t| t.blocked_by = vec![String::new()]),
        task(&|t| t.blocked_by = vec!["nope".into()]),
        task(&|t| t.blocked_by = vec!["x".into(); limits::LIST_ITEMS + 1]),
        task(&|t| t.files = vec!["a".into(); limits::LIST_ITEMS + 1]),
        task(&|t| t.files = vec!["src/**".into(); limits::LIST_ITEMS]),
        task(&|t| t.description = "d".repeat(5 << 20)),
    ];
    for subject in weird()
        .into_iter()
        .chain(around(limits::SUBJECT))
        .chain(around(limits::REASON))
    {
        creates.push(task(&|t| t.subject = subject.clone()));
    }
    for description in weird()
        .into_iter()
        .chain(around(limits::TEXT))
        .chain(around(limits::PLAN))
    {
        creates.push(task(&|t| t.description = description.clone()));
    }
    for id in weird().into_iter().chain(around(limits::ID)) {
        creates.push(task(&|t| t.blocked_by = vec![id.clone()]));
    }
    for glob in globs() {
        creates.push(task(&|t| t.files = vec![glob.clone()]));
    }
    let mut tasks = Vec::new();
    for request in creates {
        if let Some(created) = call!(report, "CreateTask", op, create_task, request) {
            tasks.push(created.task_id);
        }
    }
    if let Some(first) = tasks.first().cloned() {
        let blocked = task(&|t| t.blocked_by = vec![first.clone(); limits::LIST_ITEMS]);
        if let Some(created) = call!(report, "CreateTask", op, create_task, blocked) {
            tasks.push(created.task_id);
        }
    }
    let mut lists: Vec<pb::ListTasksRequest> = ENUMS
        .iter()
        .map(|&status| pb::ListTasksRequest {
            status,
            ..Default::default()
        })
        .collect();
    lists.extend(PAGE_SIZES.iter().map(|&page_size| pb::ListTasksRequest {
        status: *rng.pick(ENUMS),
        page_size,
        ..Default::default()
    }));
    for request in lists {
        call!(
            report,
            "Operator.ListTasks",
            op,
            list_tasks,
            request.clone()
        );
        call!(report, "Lead.ListTasks", alice.api, list_tasks, request);
    }
    for page_token in page_tokens() {
        let request = pb::ListTasksRequest {
            page_token,
            ..Default::default()
        };
        call!(
            report,
            "Operator.ListTasks",
            op,
            list_tasks,
            request.clone()
        );
        call!(report, "Lead.ListTasks", alice.api, list_tasks, request);
    }
    let mut claims: Vec<String> = weird().into_iter().chain(around(limits::ID)).collect();
    claims.extend(tasks.iter().take(10).cloned());
    claims.push(String::new());
    let mut claimed = Vec::new();
    for task_id in claims {
        if let Some(task) = call!(
            report,
            "ClaimTask",
            alice.api,
            claim_task,
            pb::ClaimTaskRequest { task_id }
        ) {
            claimed.push(task.task_id);
        }
    }
    // A plan for a claimed task, with absurd plans around it.
    for task_id in claimed.iter().take(2) {
        let request = plan(&|p| p.task_id = task_id.clone());
        call!(report, "SubmitPlan", alice.api, submit_plan, request);
    }
    let summaries: Vec<String> = weird()
        .into_iter()
        .chain(around(limits::TEXT))
        .chain(std::iter::once("s".repeat(5 << 20)))
        .collect();
    for task_id in claimed.iter().take(2) {
        for summary in &summaries {
            let request = pb::CompleteTaskRequest {
                task_id: task_id.clone(),
                summary: summary.clone(),
            };
            call!(report, "CompleteTask", alice.api, complete_task, request);
        }
    }
    for (i, task_id) in weird().into_iter().chain(around(limits::ID)).enumerate() {
        let request = pb::CompleteTaskRequest {
            task_id,
            summary: summaries[i % summaries.len()].clone(),
        };
        call!(report, "CompleteTask", alice.api, complete_task, request);
    }
    report.section("tasks");

    // ListTeam, ListRequests, GetRequest, Watch.
    for &page_size in PAGE_SIZES {
        let request = pb::ListTeamRequest {
            page_size,
            page_token: String::new(),
        };
        call!(report, "ListTeam", op, list_team, request);
    }
    for page_token in page_tokens() {
        let request = pb::ListTeamRequest {
            page_size: *rng.pick(PAGE_SIZES),
            page_token,
        };
        call!(report, "ListTeam", op, list_team, request);
    }
    for &value in ENUMS {
        for (status, r#type) in [(value, 0), (0, value), (value, *rng.pick(ENUMS))] {
            let request = pb::ListRequestsRequest {
                status,
                r#type,
                page_size: *rng.pick(PAGE_SIZES),
                page_token: String::new(),
            };
            call!(report, "ListRequests", op, list_requests, request);
        }
    }
    for page_token in page_tokens() {
        let request = pb::ListRequestsRequest {
            page_token,
            ..Default::default()
        };
        call!(report, "ListRequests", op, list_requests, request);
    }
    for request_id in weird()
        .into_iter()
        .chain(around(limits::ID))
        .chain(plans.iter().take(5).cloned())
        .chain(permissions.iter().take(5).cloned())
    {
        call!(
            report,
            "GetRequest",
            op,
            get_request,
            pb::GetRequestRequest { request_id }
        );
    }
    for _ in 0..3 {
        let stream = call!(report, "Watch", op, watch, pb::WatchRequest {});
        drop(stream);
    }
    report.section("lists, GetRequest, Watch");

    // SpawnTeammate: refused before anything starts, or `/bin/true` started
    // (it exits at once), never a real teammate.
    let script = lead.script("absurd-script", "# never read: the teammate is /bin/true\n");
    let script = script.display().to_string();
    let plain = lead.dir.path().join("plain.txt");
    std::fs::write(&plain, "not a program\n").expect("write");
    let plain = plain.display().to_string();
    let inside = |name: &str| lead.dir.path().join("ws").join(name).display().to_string();
    let true_bin = "/bin/true".to_owned();
    let mut spawned = 0;
    let mut spawn = |edit: &dyn Fn(&mut pb::SpawnTeammateRequest)| {
        spawned += 1;
        let mut request = pb::SpawnTeammateRequest {
            name: format!("sp{spawned}"),
            role: "r".into(),
            script_path: script.clone(),
            teammate_bin: true_bin.clone(),
            ..Default::default()
        };
        edit(&mut request);
        request
    };
    let model = |request: &mut pb::SpawnTeammateRequest| {
        request.script_path = String::new();
        request.model = "m".into();
        request.task = "t".into();
    };
    let mut spawns = vec![
        spawn(&|r| *r = pb::SpawnTeammateRequest::default()),
        spawn(&|r| r.role = String::new()),
        spawn(&|r| r.script_path = String::new()),
        spawn(&|r| r.model = "m".into()),
        spawn(&|r| r.name = "alice".into()),
    ];
    for name in names() {
        spawns.push(spawn(&|r| r.name = name.clone()));
    }
    for role in weird_some()
        .into_iter()
        .chain(around(limits::ROLE))
        .chain(std::iter::once("r".repeat(200_000)))
    {
        spawns.push(spawn(&|r| r.role = role.clone()));
    }
    let mut paths = weird_some();
    paths.extend([
        "/nonexistent".to_owned(),
        "/etc".to_owned(),
        "/etc/passwd".to_owned(),
        "/dev/null".to_owned(),
        format!("{script}\0"),
        "x".repeat(limits::PATH + 1),
        format!("/{}", "p".repeat(100_000)),
    ]);
    for path in &paths {
        spawns.push(spawn(&|r| r.script_path = path.clone()));
        if path.contains("..") || !path.starts_with('/') {
            // A relative or escaping binary path is only looked up, but
            // keep the lead's working directory out of it.
            continue;
        }
        spawns.push(spawn(&|r| r.teammate_bin = path.clone()));
    }
    spawns.push(spawn(&|r| r.teammate_bin = plain.clone()));
    for workspace in [
        format!("{}\0", inside("nul")),
        format!("{plain}/below-a-file"),
        inside(&"w".repeat(300)),
        inside("\u{202E}rtl"),
        inside("🦀 \t\x01"),
    ] {
        spawns.push(spawn(&|r| r.workspace = workspace.clone()));
    }
    for value in weird_some()
        .into_iter()
        .chain(around(limits::ROLE))
        .filter(|v| !v.starts_with('-'))
    {
        spawns.push(spawn(&|r| {
            model(r);
            r.model = value.clone();
        }));
    }
    for task_ in weird_some().into_iter().chain(around(limits::TEXT)) {
        spawns.push(spawn(&|r| {
            model(r);
            r.task = task_.clone();
        }));
    }
    for url in weird_some().into_iter().chain([
        "ftp://x".to_owned(),
        "http://".to_owned(),
        "http://\0".to_owned(),
        format!("https://{}", "h".repeat(limits::PATH)),
    ]) {
        spawns.push(spawn(&|r| {
            model(r);
            r.base_url = url.clone();
        }));
    }
    for var in weird_some().into_iter().chain([
        "1X".to_owned(),
        "A-B".to_owned(),
        "PATH".to_owned(),
        "A".repeat(limits::TOOL + 1),
    ]) {
        spawns.push(spawn(&|r| {
            model(r);
            r.api_key_env = var.clone();
        }));
    }
    if std::path::Path::new(&true_bin).is_file() {
        for request in spawns {
            call!(report, "SpawnTeammate", op, spawn_teammate, request);
        }
    } else {
        println!("absurd: no /bin/true here; SpawnTeammate is left out");
    }
    report.section("SpawnTeammate");

    // Random absurd calls: fields from the pools, ids from what exists.
    let mut known: Vec<String> = plans.clone();
    known.extend(permissions.iter().cloned());
    known.extend(tasks.iter().cloned());
    known.extend(["alice", "bob", "carol", "*", "lead"].map(String::from));
    for _ in 0..RANDOM_TYPED {
        macro_rules! s {
            () => {
                absurd_text(&mut rng, &known)
            };
        }
        match rng.below(14) {
            0 => {
                let request = pb::SendRequest {
                    to: s!(),
                    text: text(&s!()),
                    message_id: s!(),
                };
                call!(report, "Send", alice.api, send, request);
            }
            1 => {
                let request = pb::PlanApprovalRequest {
                    request_id: s!(),
                    plan: Some(pb::Plan {
                        summary: s!(),
                        steps: vec![s!(), s!()],
                        files: vec![s!()],
                        tests: vec![s!()],
                        body: s!(),
                        task_id: s!(),
                    }),
                    supersedes: s!(),
                };
                call!(report, "SubmitPlan", alice.api, submit_plan, request);
            }
            2 => {
                let request = pb::PlanReview {
                    request_id: s!(),
                    approve: rng.chance(50),
                    feedback: s!(),
                    grant: Some(pb::PermissionGrant {
                        mode: *rng.pick(ENUMS),
                        write_paths: vec![s!()],
                        expires_at_unix_ms: *rng.pick(&times()),
                    }),
                    refuse_overlap: rng.chance(50),
                };
                call!(report, "ReviewPlan", op, review_plan, request);
            }
            3 => {
                let request = pb::PermissionRequest {
                    request_id: s!(),
                    tool: s!(),
                    args_json: s!(),
                };
                call!(
                    report,
                    "RequestPermission",
                    alice.api,
                    request_permission,
                    request
                );
            }
            4 => {
                let request = pb::PermissionReview {
                    request_id: s!(),
                    approve: rng.chance(50),
                    feedback: s!(),
                };
                call!(report, "ReviewPermission", op, review_permission, request);
            }
            5 => {
                let request = pb::ToolCallReport {
                    tool: s!(),
                    args_json: s!(),
                    allowed: rng.chance(50),
                    outcome: s!(),
                    member: s!(),
                };
                call!(
                    report,
                    "ReportToolCall",
                    alice.api,
                    report_tool_call,
                    request
                );
            }
            6 => {
                let request = pb::CreateTaskRequest {
                    subject: s!(),
                    description: s!(),
                    blocked_by: vec![s!()],
                    files: vec![s!()],
                };
                if let Some(created) = call!(report, "CreateTask", op, create_task, request) {
                    known.push(created.task_id);
                }
            }
            7 => {
                let request = pb::ClaimTaskRequest { task_id: s!() };
                call!(report, "ClaimTask", alice.api, claim_task, request);
            }
            8 => {
                let request = pb::CompleteTaskRequest {
                    task_id: s!(),
                    summary: s!(),
                };
                call!(report, "CompleteTask", alice.api, complete_task, request);
            }
            9 => {
                let request = pb::ListRequestsRequest {
                    status: *rng.pick(ENUMS),
                    r#type: *rng.pick(ENUMS),
                    page_size: *rng.pick(PAGE_SIZES),
                    page_token: s!(),
                };
                call!(report, "ListRequests", op, list_requests, request);
            }
            10 => {
                let request = pb::GetRequestRequest { request_id: s!() };
                call!(report, "GetRequest", op, get_request, request);
            }
            11 => {
                let request = pb::ShutdownRequest {
                    request_id: s!(),
                    target: if rng.chance(50) { "bob".into() } else { s!() },
                    reason: s!(),
                    deadline_unix_ms: *rng.pick(&times()),
                };
                call!(report, "RequestShutdown", op, request_shutdown, request);
            }
            12 => {
                let request = pb::IdleNotification { reason: s!() };
                call!(report, "ReportIdle", alice.api, report_idle, request);
            }
            _ => {
                let request = pb::JoinRequest {
                    name: s!(),
                    role: s!(),
                };
                call!(report, "Join", joiner, join, request);
            }
        }
    }
    report.section("random");

    // The streams are still open, the process runs, and it serves.
    for (what, reading) in [
        ("the Watch stream", watching),
        ("alice's inbox stream", alice_reading),
        ("bob's inbox stream", bob_reading),
    ] {
        if reading.is_finished() {
            let how = reading.await.unwrap_or_else(|e| e.to_string());
            report.finding(format!("{what} ended during the run: {how}"));
        } else {
            reading.abort();
        }
    }
    match lead.child.try_wait() {
        Ok(None) => {}
        other => report.finding(format!("the lead is not running after the run: {other:?}")),
    }
    let team = within(
        "ListTeam afterwards",
        op.list_team(pb::ListTeamRequest::default()),
    )
    .await;
    if let Err(status) = &team {
        report.finding(format!("ListTeam afterwards: {status:?}"));
    }
    let mut after = lead.join("after-absurd").await;
    if let Err(status) = after.send("alice", "still here", "").await {
        report.finding(format!("Send afterwards: {status:?}"));
    }
    println!("absurd: {spawned} spawn requests built, {tmp} throwaway members");
    report.finish();
}
