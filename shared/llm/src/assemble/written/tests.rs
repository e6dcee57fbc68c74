//! The shapes calls are written in, one test each.

use proptest::prelude::*;
use serde_json::json;

use super::*;

const A: &str = r#"{"name": "read_file", "arguments": {"path": "a.rs"}}"#;
const B: &str = r#"{"name": "list_dir", "arguments": {"path": "src"}}"#;
const C: &str = r#"{"name": "search", "parameters": {"pattern": "fn"}}"#;

/// The calls' names and parsed arguments, and the text.
fn parts(content: &str, cut: bool) -> (Vec<(String, Value)>, String) {
    let written = split(content, cut);
    let calls = written
        .calls
        .into_iter()
        .map(|(name, args)| (name, serde_json::from_str(&args).expect("arguments")))
        .collect();
    (calls, written.text)
}

fn a() -> (String, Value) {
    ("read_file".into(), json!({"path": "a.rs"}))
}

fn b() -> (String, Value) {
    ("list_dir".into(), json!({"path": "src"}))
}

fn c() -> (String, Value) {
    ("search".into(), json!({"pattern": "fn"}))
}

#[test]
fn json_lines_with_prose_around_them() {
    let content = format!("I'll look at both.\n{A}\n{B}\n\n\nThen I'll report.  \n");
    assert_eq!(
        parts(&content, false),
        (
            vec![a(), b()],
            "I'll look at both.\n\nThen I'll report.".into()
        )
    );
}

#[test]
fn objects_one_after_another() {
    for content in [
        format!("{A}{B}{C}"),
        format!("{A} {B}\t{C}"),
        format!("{A},{B}, {C}"),
        format!("{A},\n{B},\n{C}\n"),
    ] {
        assert_eq!(parts(&content, false), (vec![a(), b(), c()], "".into()));
    }
}

#[test]
fn an_array_and_a_tool_calls_object() {
    let array = format!("Calls:\n[{A}, {B}]\ndone");
    assert_eq!(
        parts(&array, false),
        (vec![a(), b()], "Calls:\n\ndone".into())
    );
    let wrapped = format!(r#"{{"tool_calls": [{{"function": {A}}}, {C}]}}"#);
    assert_eq!(parts(&wrapped, false), (vec![a(), c()], "".into()));
}

#[test]
fn tool_call_blocks_with_prose_between() {
    let content = format!(
        "First the file:\n<tool_call>\n{A}\n</tool_call>\nthen the folder:\n<tool_call>{B}</tool_call>\n<tool_call>\n{C}\n"
    );
    assert_eq!(
        parts(&content, false),
        (
            vec![a(), b(), c()],
            "First the file:\n\nthen the folder:".into()
        )
    );
}

#[test]
fn fenced_blocks_of_every_kind() {
    let content = format!(
        "```json\n{A}\n```\nand\n```tool_call\n{B}\n```\n```\n{C}\n```\n```json\n{A}\n{B}\n```"
    );
    assert_eq!(
        parts(&content, false),
        (vec![a(), b(), c(), a(), b()], "and".into())
    );
}

#[test]
fn tool_call_blocks_in_a_fence() {
    let content =
        format!("```xml\n<tool_call>\n{A}\n</tool_call>\n<tool_call>\n{B}\n</tool_call>\n```\nok");
    assert_eq!(parts(&content, false), (vec![a(), b()], "ok".into()));
}

#[test]
fn other_fences_and_objects_stay_text() {
    let content = format!(
        "```python\nprint(1)\n```\n{A}\nThe answer is {{\"answer\": 42}}; the file is {{\"name\": \"a.txt\", \"size\": 3}}."
    );
    assert_eq!(
        parts(&content, false),
        (
            vec![a()],
            "```python\nprint(1)\n```\n\nThe answer is {\"answer\": 42}; the file is {\"name\": \"a.txt\", \"size\": 3}."
                .into()
        )
    );
    // A call inside an object that is not one stays text with it.
    let nested = format!(r#"{{"answer": {A}}}"#);
    assert_eq!(parts(&nested, false), (vec![], nested.clone()));
    // A fence inside a call's arguments is the call's.
    let fenced_args = r#"```json
{"name": "write_file", "arguments": {"path": "a.md", "content": "```rust\nfn main() {}\n```"}}
```"#;
    let (calls, text) = parts(fenced_args, false);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].1["content"], "```rust\nfn main() {}\n```");
    assert_eq!(text, "");
}

#[test]
fn stray_closing_braces_after_a_call_go_with_it() {
    let content = format!("{}}}\n{}}}}}\nok", &A, &B);
    assert_eq!(parts(&content, false), (vec![a(), b()], "ok".into()));
}

#[test]
fn text_without_calls_is_unchanged() {
    for text in [
        "Done.  \n\n\n",
        "{\"answer\": 42}",
        "[1, 2] and {oops",
        "<tool_call>oops",
        r#"{"name": "x", "argu"#,
        "Voilà ✓ {é",
        "",
    ] {
        assert_eq!(parts(text, false), (vec![], text.into()), "{text}");
    }
}

#[test]
fn multibyte_prose_around_a_call() {
    let content = format!("Voilà ✓\n{A}\n— fin");
    assert_eq!(
        parts(&content, false),
        (vec![a()], "Voilà ✓\n\n— fin".into())
    );
}

#[test]
fn a_cut_reply_drops_its_unfinished_call_from_the_text() {
    for (content, calls, text) in [
        (format!("{A}\n{{\"name\": \"write_file\", \"argu"), vec![a()], ""),
        (format!("[{A}, {B}, {{\"name\": \"se"), vec![a(), b()], ""),
        (
            "Let me write.\n<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"a\", \"con".into(),
            vec![],
            "Let me write.",
        ),
        ("Plan:\n```json\n{\"name\": \"".into(), vec![], "Plan:"),
        ("Plan:\n```json\n".into(), vec![], "Plan:"),
        (format!("{A}\n<tool_c"), vec![a()], ""),
        (format!("<tool_call>{A}</tool_"), vec![a()], ""),
        ("I will now".into(), vec![], "I will now"),
        ("Some code:\n```python\nprint(".into(), vec![], "Some code:\n```python\nprint("),
    ] {
        assert_eq!(parts(&content, true), (calls, text.into()), "{content}");
    }
    // Not cut: an unfinished value is text.
    let open = format!("{A}\n{{\"name\": \"write_file\", \"argu");
    assert_eq!(
        parts(&open, false),
        (vec![a()], "{\"name\": \"write_file\", \"argu".into())
    );
}

#[test]
fn pathological_content_is_bounded() {
    for content in [
        "[".repeat(400_000),
        "[\",".repeat(200_000),
        "{".repeat(400_000),
        // Each `{"a":` nests 128 deep before the parse fails: kept small
        // for debug builds.
        "{\"a\":[".repeat(5_000),
        format!("{}{}", "x".repeat(SCAN_LIMIT), A),
    ] {
        let written = split(&content, true);
        assert!(written.calls.is_empty());
    }
}

proptest! {
    #[test]
    fn any_content_is_split_without_a_panic(
        content in r#"([{}\[\]",:` \n<>/a-z_é✓]|tool_call|```json|"name"|"arguments"|\{\}){0,60}"#,
        cut in any::<bool>(),
    ) {
        let written = split(&content, cut);
        for (_, arguments) in &written.calls {
            prop_assert!(serde_json::from_str::<Value>(arguments).is_ok());
        }
        if written.calls.is_empty() && !cut {
            prop_assert_eq!(written.text, content);
        }
    }
}

#[test]
fn raw_newlines_and_tabs_in_a_calls_strings_are_escaped() {
    let content = "Writing it now.\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"a.py\", \"content\": \"def add(a, b):\n\treturn a + b\n\"}}\nDone.";
    assert_eq!(
        parts(content, false),
        (
            vec![(
                "write_file".into(),
                json!({"path": "a.py", "content": "def add(a, b):\n\treturn a + b\n"})
            )],
            "Writing it now.\n\nDone.".into()
        )
    );
    // Not a call once escaped: it stays text, whole.
    let prose = "Here: {\"note\": \"two\nlines\"} ok";
    assert_eq!(parts(prose, false), (Vec::new(), prose.into()));
    // Never closed: text.
    let open = "{\"name\": \"write_file\", \"arguments\": {\"content\": \"a\nb";
    assert_eq!(parts(open, false).0, Vec::new());
}
