//! Part 1's crafted cases: nasty bytes for every request message, field by
//! field (truncated varints, lengths past the end, deep nesting, invalid
//! UTF-8, unknown and out-of-range field numbers, wire-type mismatches), with
//! what the lead must answer each with.

use crate::fuzz::{
    schema::{Field, Kind, Schema},
    wire::{
        delimited, key, nested_delimited, nested_groups, raw_field, varint, varint_field,
        END_GROUP, FIXED32, FIXED64, LEN, START_GROUP, UNKNOWN, VARINT,
    },
};

/// What the lead must answer a case with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    /// The bytes do not decode: INVALID_ARGUMENT.
    Undecodable,
    /// Past the transport's 4 MiB: RESOURCE_EXHAUSTED.
    TooLarge,
    /// Anything clean.
    Clean,
}

#[derive(Debug)]
pub(crate) struct Case {
    pub(crate) what: String,
    pub(crate) bytes: Vec<u8>,
    pub(crate) expect: Expect,
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
pub(crate) fn crafted(schema: &Schema, message: &str, depth: usize) -> Vec<Case> {
    let mut cases = Vec::new();
    let mut add = |what: String, bytes: Vec<u8>, expect: Expect| {
        cases.push(Case {
            what,
            bytes,
            expect,
        })
    };
    keys(&mut add);
    groups(&mut add);
    lengths(&mut add);
    let fields = schema.fields(message);
    for field in fields {
        framing(&mut add, field);
        values(&mut add, schema, field, depth);
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
            Expect::Undecodable,
        );
    }
    cases
}

/// Keys: field number 0, cut short, too long, past the largest field number;
/// wire types that do not exist; unknown fields of every wire type.
fn keys(add: &mut impl FnMut(String, Vec<u8>, Expect)) {
    use Expect::{Clean, Undecodable};
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
}

/// Unknown groups: unopened, unclosed, closed by another field, deep.
fn groups(add: &mut impl FnMut(String, Vec<u8>, Expect)) {
    use Expect::{Clean, Undecodable};
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
}

/// Unknown fields whose lengths run past the end.
fn lengths(add: &mut impl FnMut(String, Vec<u8>, Expect)) {
    use Expect::Undecodable;
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
}

/// `field` framed wrongly: another wire type than its own, a length past the
/// end or cut short, and the field 5,000 times.
fn framing(add: &mut impl FnMut(String, Vec<u8>, Expect), field: &Field) {
    use Expect::{Clean, Undecodable};
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
}

/// `field`'s values: text that is not UTF-8 or is odd, numbers cut short or
/// extreme, a message's own crafted cases (one level down).
fn values(
    add: &mut impl FnMut(String, Vec<u8>, Expect),
    schema: &Schema,
    field: &Field,
    depth: usize,
) {
    use Expect::{Clean, Undecodable};
    let n = field.number;
    let name = &field.name;
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
