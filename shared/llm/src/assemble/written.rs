//! Tool calls a model wrote as text in `content` (the server did not parse
//! them into `tool_calls`), taken out of the text around them.
//!
//! The content is searched for JSON values: at each `{"` or `[{` not
//! already taken, one value is parsed; if it is a call or a list of calls (see
//! [`calls_in_json`]) it is taken, in order, else it stays text, whole. So
//! JSON lines, objects one after another, an array, several fenced blocks and
//! several `<tool_call>` blocks, with prose before, between and after them,
//! all come out as calls. Then the calls' JSON is cut out of the text with
//! what wraps it: a ```` ``` ```` fence whose block holds only calls, a
//! `<tool_call>`/`</tool_call>` tag next to a call, and the commas and stray
//! closing brackets right after a call (a small model sometimes closes one
//! brace too many). What is left, tidied, is the model's words. A value
//! that fails to parse only for raw newlines or tabs inside its strings (a
//! small model writing a file's lines) is read with them escaped.
//!
//! In a reply cut at the token limit, an unfinished call at the end (a JSON
//! value, a `<tool_call>` block or a fence left open) is dropped from the text
//! rather than kept as a blob of half a call.

use std::ops::Range;

use serde_json::Value;

/// How much of the content is searched; calls past it stay text. A reply is
/// bounded by the model's token limit; this bounds the work on whatever a
/// server sends. Only a `{"` or a `[{` starts a parse, a value that parses
/// is passed over whole, and a parse that fails stops at serde_json's
/// nesting limit of 128 unless it runs into an error or the end first, so
/// the work is at most about 128 times this (the worst case, 256 KiB of
/// `{"a":[` nested, takes about 0.7 s of a release build; a reply of calls
/// and prose takes microseconds). `IgnoredAny` would not allocate but has no
/// nesting limit, which makes that case quadratic.
const SCAN_LIMIT: usize = 256 * 1024;

/// The JSON value at the start of `text` with the control characters inside
/// its strings escaped, and how many bytes of `text` it took; `None` when it
/// does not close.
fn raw_controls_escaped(text: &str) -> Option<(String, usize)> {
    let mut out = String::with_capacity(text.len() + 16);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                '\n' => {
                    out.push_str("\\n");
                    continue;
                }
                '\r' => {
                    out.push_str("\\r");
                    continue;
                }
                '\t' => {
                    out.push_str("\\t");
                    continue;
                }
                c if (c as u32) < 0x20 => {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                    continue;
                }
                _ => {}
            }
            out.push(c);
            continue;
        }
        out.push(c);
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some((out, i + 1));
                }
            }
            _ => {}
        }
    }
    None
}

/// A call as (function name, arguments as JSON text).
pub(super) type Call = (String, String);

/// The content of a reply, split into calls and words.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Written {
    /// The calls found, in the order they were written.
    pub(super) calls: Vec<Call>,
    /// The text around them; the content unchanged when nothing was taken.
    pub(super) text: String,
}

/// Splits `content` into the calls written in it and the text around them;
/// `cut` says the reply was cut at the token limit.
pub(super) fn split(content: &str, cut: bool) -> Written {
    let scan = Scan::of(content);
    let end = if cut {
        trailing_fragment(content, &scan).unwrap_or(content.len())
    } else {
        content.len()
    };
    if scan.spans.is_empty() && end == content.len() {
        return Written {
            calls: Vec::new(),
            text: content.to_owned(),
        };
    }
    // Each step sees what the steps before it take out, in order.
    let mut removed = scan.extended(content);
    let tags = tags_beside_calls(content, &scan, &removed);
    removed.extend(tags);
    removed.sort_by_key(|r| r.start);
    let fences = fences_around_calls(content, &scan, &removed);
    removed.extend(fences);
    removed.sort_by_key(|r| r.start);
    let mut kept = String::with_capacity(end);
    let mut at = 0;
    for range in removed {
        if range.start > at {
            kept.push_str(slice(content, at..range.start.min(end)));
        }
        at = at.max(range.end);
    }
    kept.push_str(slice(content, at..end));
    Written {
        calls: scan.calls,
        text: tidy(&kept),
    }
}

/// Where the calls are in the content.
#[derive(Debug, Default)]
struct Scan {
    /// The calls, in order.
    calls: Vec<Call>,
    /// The byte ranges of the JSON values that held them, in order.
    spans: Vec<Range<usize>>,
    /// The first `{` or `[` from which the rest of the content is an
    /// unfinished JSON value (only when the whole content was searched).
    unfinished: Option<usize>,
}

impl Scan {
    fn of(content: &str) -> Self {
        let limit = floor_boundary(content, SCAN_LIMIT);
        let text = slice(content, 0..limit);
        let bytes = text.as_bytes();
        let mut scan = Scan::default();
        let mut at = 0;
        while at < bytes.len() {
            if !may_start_calls(bytes, at) {
                at += 1;
                continue;
            }
            // `{` and `[` are ASCII: `at` is a char boundary.
            let rest = slice(text, at..limit);
            let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
            match values.next() {
                Some(Ok(value)) => {
                    let end = at + values.byte_offset();
                    if let Some(calls) = calls_in_json(&value) {
                        scan.calls.extend(calls);
                        scan.spans.push(at..end);
                    }
                    // Not calls: it stays text, whole, nothing inside it is
                    // searched.
                    at = end.max(at + 1);
                }
                // A small model writing a file's lines into `content`
                // leaves raw newlines and tabs in its strings: escaped, the
                // value may be a call.
                Some(Err(e)) if e.to_string().starts_with("control character") => {
                    match raw_controls_escaped(rest) {
                        Some((repaired, taken)) => {
                            let calls = serde_json::from_str::<Value>(&repaired)
                                .ok()
                                .as_ref()
                                .and_then(calls_in_json);
                            match calls {
                                Some(calls) => {
                                    scan.calls.extend(calls);
                                    scan.spans.push(at..at + taken);
                                    at += taken;
                                }
                                None => at += 1,
                            }
                        }
                        None => at += 1,
                    }
                }
                Some(Err(e)) if e.is_eof() => {
                    if limit == content.len() {
                        scan.unfinished.get_or_insert(at);
                    }
                    // Calls may still be inside (a list cut short).
                    at += 1;
                }
                _ => at += 1,
            }
        }
        scan
    }

    /// The spans, each with the commas, stray closing brackets and blanks
    /// right after it on its line.
    fn extended(&self, content: &str) -> Vec<Range<usize>> {
        let bytes = content.as_bytes();
        self.spans
            .iter()
            .map(|span| {
                let mut end = span.end;
                while let Some(b' ' | b'\t' | b',' | b'}' | b']') = bytes.get(end) {
                    end += 1;
                }
                span.start..end
            })
            .collect()
    }

    /// Whether `at` is inside a call's JSON.
    fn inside(&self, at: usize) -> bool {
        let next = self.spans.partition_point(|s| s.start <= at);
        next > 0 && self.spans.get(next - 1).is_some_and(|s| at < s.end)
    }
}

/// Whether a call, a list of calls, or the unfinished start of one may
/// begin at `at`: `{` then a key, or `[` then an object, past blanks. The
/// rest of `{` and `[` (prose, `[[`, `{}`) are passed over without a parse.
fn may_start_calls(bytes: &[u8], at: usize) -> bool {
    let inner = match bytes.get(at) {
        Some(b'{') => b'"',
        Some(b'[') => b'{',
        _ => return false,
    };
    let next = bytes
        .get(at + 1..)
        .unwrap_or_default()
        .iter()
        .find(|b| !b.is_ascii_whitespace());
    next.is_none_or(|b| *b == inner)
}

/// `<tool_call>` tags right before a call and `</tool_call>` right after one
/// (`calls` in order).
fn tags_beside_calls(content: &str, scan: &Scan, calls: &[Range<usize>]) -> Vec<Range<usize>> {
    let mut tags = Vec::new();
    for (at, tag) in content
        .match_indices("<tool_call>")
        .chain(content.match_indices("</tool_call>"))
    {
        let end = at + tag.len();
        let beside = if tag.starts_with("</") {
            preceded_by_call(content, at, calls)
        } else {
            followed_by_call(content, end, calls)
        };
        if beside && !scan.inside(at) {
            tags.push(at..end);
        }
    }
    tags
}

/// The markers of fenced blocks that hold nothing but calls and their tags
/// (and of a last fence left open right before a call); `calls` in order.
fn fences_around_calls(content: &str, scan: &Scan, calls: &[Range<usize>]) -> Vec<Range<usize>> {
    let fences = fences(content, scan);
    let mut markers = Vec::new();
    for pair in fences.chunks(2) {
        match pair {
            [open, close] if only_calls(content, open.end..close.start, calls) => {
                markers.push(open.clone());
                markers.push(close.clone());
            }
            [open] if followed_by_call(content, open.end, calls) => markers.push(open.clone()),
            _ => {}
        }
    }
    markers
}

/// Every ```` ``` ```` outside calls, with the info word after it
/// (`json`, `tool_call`): openers and closers alternate.
fn fences(content: &str, scan: &Scan) -> Vec<Range<usize>> {
    let bytes = content.as_bytes();
    content
        .match_indices("```")
        .filter(|(at, _)| !scan.inside(*at))
        .map(|(at, _)| {
            let mut end = at + 3;
            while bytes
                .get(end)
                .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
            {
                end += 1;
            }
            at..end
        })
        .collect()
}

/// Where an unfinished call at the end of a cut reply begins: a JSON value
/// that runs to the end, a `<tool_call>` never closed (or cut mid-tag), a
/// last fence left open on JSON.
fn trailing_fragment(content: &str, scan: &Scan) -> Option<usize> {
    let rest = |at: usize| slice(content, at..content.len());
    let tag = content
        .rmatch_indices("<tool_call>")
        .map(|(at, _)| at)
        .find(|at| !scan.inside(*at))
        .filter(|at| !rest(*at).contains("</tool_call>"));
    let half_tag = content.rfind('<').filter(|at| {
        let tail = rest(*at);
        "<tool_call>".starts_with(tail) || "</tool_call>".starts_with(tail)
    });
    let fences = fences(content, scan);
    let open_fence = fences
        .last()
        .filter(|_| fences.len() % 2 == 1)
        .filter(|fence| {
            let body = rest(fence.end).trim_start();
            body.is_empty() || body.starts_with(['{', '['])
        })
        .map(|fence| fence.start);
    [scan.unfinished, tag, half_tag, open_fence]
        .into_iter()
        .flatten()
        .min()
}

/// Whether the first thing at or after `at`, past blanks, is a call.
fn followed_by_call(content: &str, at: usize, calls: &[Range<usize>]) -> bool {
    let rest = slice(content, at..content.len());
    let start = at + (rest.len() - rest.trim_start().len());
    calls.binary_search_by_key(&start, |c| c.start).is_ok()
}

/// Whether the last thing before `at`, past blanks, is a call.
fn preceded_by_call(content: &str, at: usize, calls: &[Range<usize>]) -> bool {
    let end = slice(content, 0..at).trim_end().len();
    let next = calls.partition_point(|c| c.end < end);
    calls
        .get(next)
        .is_some_and(|c| c.start < end && c.end <= at)
}

/// Whether `range` holds at least one call and nothing else but blanks.
fn only_calls(content: &str, range: Range<usize>, calls: &[Range<usize>]) -> bool {
    let first = calls.partition_point(|c| c.start < range.start);
    let inner = calls
        .get(first..)
        .unwrap_or_default()
        .iter()
        .take_while(|c| c.end <= range.end);
    let mut at = range.start;
    let mut any = false;
    for call in inner {
        if !slice(content, at..call.start).trim().is_empty() {
            return false;
        }
        at = call.end;
        any = true;
    }
    any && slice(content, at..range.end).trim().is_empty()
}

/// `{"name", "arguments"}` (or `"parameters"`), `{"function": {..}}`, a list
/// of those, or `{"tool_calls": [..]}`. An object with a name but neither
/// arguments nor parameters is a call only if it has nothing else either
/// (`{"name": "list_tasks"}`), so `{"name": "a.txt", "size": 3}` is not.
pub(super) fn calls_in_json(value: &Value) -> Option<Vec<Call>> {
    match value {
        Value::Array(items) if !items.is_empty() => {
            let mut calls = Vec::new();
            for item in items {
                calls.extend(calls_in_json(item)?);
            }
            Some(calls)
        }
        Value::Object(map) => {
            if let Some(calls) = map.get("tool_calls") {
                return calls_in_json(calls);
            }
            if let Some(function) = map.get("function").filter(|f| f.is_object()) {
                return calls_in_json(function);
            }
            let name = map.get("name")?.as_str()?.to_owned();
            let arguments = match map.get("arguments").or_else(|| map.get("parameters")) {
                Some(Value::String(s)) => s.clone(),
                Some(args @ Value::Object(_)) => args.to_string(),
                None if map
                    .keys()
                    .all(|k| matches!(k.as_str(), "name" | "id" | "type")) =>
                {
                    "{}".into()
                }
                _ => return None,
            };
            Some(vec![(name, arguments)])
        }
        _ => None,
    }
}

/// Trailing blanks off every line, one blank line at most in a row, and
/// none at either end.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = false;
    for line in text.lines().map(str::trim_end) {
        if line.is_empty() {
            blank = !out.is_empty();
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
            if blank {
                out.push('\n');
            }
        }
        blank = false;
        out.push_str(if out.is_empty() {
            line.trim_start()
        } else {
            line
        });
    }
    out
}

/// `text[range]`, or "" where the range is not on char boundaries (never, as
/// every range here starts and ends at ASCII bytes or at the ends).
fn slice(text: &str, range: Range<usize>) -> &str {
    text.get(range).unwrap_or_default()
}

/// The largest char boundary of `text` at or below `at`.
fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests;
