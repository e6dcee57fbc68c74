//! The wire: writing protobuf by hand, and reading it back (only as far as
//! the well-formed descriptor set needs).

pub(crate) const VARINT: u64 = 0;
pub(crate) const FIXED64: u64 = 1;
pub(crate) const LEN: u64 = 2;
pub(crate) const START_GROUP: u64 = 3;
pub(crate) const END_GROUP: u64 = 4;
pub(crate) const FIXED32: u64 = 5;

/// A field number no message of the contract uses.
pub(crate) const UNKNOWN: u64 = 4242;

pub(crate) fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

pub(crate) fn key(out: &mut Vec<u8>, field: u64, wire: u64) {
    varint(out, (field << 3) | wire);
}

/// `field` as a length-delimited field holding `payload`.
pub(crate) fn delimited(field: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 8);
    key(&mut out, field, LEN);
    varint(&mut out, payload.len() as u64);
    out.extend_from_slice(payload);
    out
}

/// `field` as a varint field.
pub(crate) fn varint_field(field: u64, value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    key(&mut out, field, VARINT);
    varint(&mut out, value);
    out
}

/// `field` with wire type `wire` and the raw `rest` after its key.
pub(crate) fn raw_field(field: u64, wire: u64, rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    key(&mut out, field, wire);
    out.extend_from_slice(rest);
    out
}

/// `depth` unknown groups, one inside the other, closed.
pub(crate) fn nested_groups(depth: usize) -> Vec<u8> {
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
pub(crate) fn nested_delimited(depth: usize) -> Vec<u8> {
    let mut out = b"bottom".to_vec();
    for _ in 0..depth {
        out = delimited(UNKNOWN, &out);
    }
    out
}

/// A value read from a descriptor.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Value<'a> {
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
pub(crate) fn read_fields(mut buf: &[u8]) -> Vec<(u64, Value<'_>)> {
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

pub(crate) fn text_of(value: Value<'_>) -> String {
    match value {
        Value::Bytes(b) => String::from_utf8(b.to_vec()).expect("UTF-8 in the descriptor set"),
        Value::Int(_) => panic!("a number where the descriptor set has text"),
    }
}
