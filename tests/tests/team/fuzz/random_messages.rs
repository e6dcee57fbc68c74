//! Part 1's random cases: randomised well-formed messages of any request
//! type, and random edits of them.

use crate::fuzz::{
    rng::Rng,
    schema::{Kind, Schema},
    wire::{delimited, raw_field, varint_field, FIXED32, FIXED64},
};

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
pub(crate) fn random_message(
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
pub(crate) fn mutate(rng: &mut Rng, bytes: &mut Vec<u8>) {
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
