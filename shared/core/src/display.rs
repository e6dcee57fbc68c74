//! Peer text made safe to show: every control character (C0, DEL, C1),
//! every bidirectional mark or override, every line or paragraph separator
//! and every invisible character (zero-width, word joiners, tags) is written
//! as an escape, so that text a teammate chose cannot move the cursor,
//! recolour a terminal, forge a table row or a log line, reorder what an
//! operator reads, or hide words in it.

use std::{borrow::Cow, fmt};

/// Whether `c` must not reach a terminal or a log as itself.
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            // Soft hyphen, Arabic letter mark, Mongolian vowel separator.
            '\u{ad}' | '\u{61c}' | '\u{180e}'
            // Zero-width space, non-joiner, joiner; left-to-right and
            // right-to-left marks.
            | '\u{200b}'..='\u{200f}'
            // Line and paragraph separators; bidirectional embeddings and
            // overrides.
            | '\u{2028}'..='\u{202e}'
            // Word joiner, invisible operators, bidirectional isolates,
            // deprecated format characters.
            | '\u{2060}'..='\u{206f}'
            // Zero-width no-break space (byte order mark); interlinear
            // annotation.
            | '\u{feff}' | '\u{fff9}'..='\u{fffb}'
            // Tag characters.
            | '\u{e0000}'..='\u{e007f}'
        )
}

/// `text` with every unsafe character escaped (`\n`, `\r`, `\t`, `\\`, else
/// `\u{..}`); borrowed when there is nothing to escape.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| is_unsafe(c) || c == '\\') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\\' => out.push_str("\\\\"),
            c if is_unsafe(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Displays peer text escaped, for log fields: `tracing::info!(tool = %Escaped(&t))`.
#[derive(Debug, Clone, Copy)]
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&escape(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_bidi_characters_are_escaped_and_plain_text_is_not() {
        assert!(matches!(escape("plain text, ünïcode"), Cow::Borrowed(_)));
        assert_eq!(escape("a\nb\rc\td"), "a\\nb\\rc\\td");
        assert_eq!(escape("\u{1b}[2J"), "\\u{1b}[2J");
        assert_eq!(escape("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(escape("\u{7f}"), "\\u{7f}");
        assert_eq!(escape("a\u{202e}b"), "a\\u{202e}b");
        assert_eq!(escape("back\\slash"), "back\\\\slash");
        assert_eq!(Escaped("x\ny").to_string(), "x\\ny");
    }

    #[test]
    fn separators_marks_and_invisible_characters_are_escaped() {
        for (raw, shown) in [
            ("a\u{2028}b", "a\\u{2028}b"),
            ("a\u{2029}b", "a\\u{2029}b"),
            ("a\u{61c}b", "a\\u{61c}b"),
            ("a\u{200b}b", "a\\u{200b}b"),
            ("a\u{200d}b", "a\\u{200d}b"),
            ("a\u{2060}b", "a\\u{2060}b"),
            ("a\u{feff}b", "a\\u{feff}b"),
            ("a\u{e0041}b", "a\\u{e0041}b"),
            ("a\u{e007f}b", "a\\u{e007f}b"),
        ] {
            assert_eq!(escape(raw), shown);
        }
        // Visible text in other scripts stays as it is.
        assert!(matches!(escape("مرحبا שלום 你好 🎉"), Cow::Borrowed(_)));
    }
}
