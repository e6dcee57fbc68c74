//! Part 2's pools of absurd values: strings no sane client sends, strings
//! around each limit, names, globs, JSON, enum values, sequence numbers, page
//! sizes and tokens, times.

use mesh_core::limits;

use crate::fuzz::rng::Rng;

/// Strings no sane client sends.
pub(crate) fn weird() -> Vec<String> {
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
pub(crate) fn weird_some() -> Vec<String> {
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
pub(crate) fn around(limit: usize) -> Vec<String> {
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
pub(crate) fn names() -> Vec<String> {
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
pub(crate) fn globs() -> Vec<String> {
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
pub(crate) fn json_args() -> Vec<String> {
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
pub(crate) const ENUMS: &[i32] = &[i32::MIN, -1, 0, 1, 2, 3, 4, 5, 99, i32::MAX];
/// Sequence numbers.
pub(crate) const SEQS: &[u64] = &[
    0,
    1,
    1 << 53,
    1 << 63,
    i64::MAX as u64,
    u64::MAX - 1,
    u64::MAX,
];
/// Page sizes.
pub(crate) const PAGE_SIZES: &[u32] = &[0, 1, 999, 1_000, 1_001, u32::MAX];

/// Unix times in ms: extremes, the past, the far future.
pub(crate) fn times() -> Vec<i64> {
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
pub(crate) fn page_tokens() -> Vec<String> {
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

/// A string for a random typed call.
pub(crate) fn absurd_text(rng: &mut Rng, known: &[String]) -> String {
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
