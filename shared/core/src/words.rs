//! Closed sets of words, as the wire and the store spell them: a table of
//! values and their words, the word of a value and the value of a word.

/// The word a table gives `value` (every value has one).
pub(crate) fn word_of<T: Copy + PartialEq>(table: &[(T, &'static str)], value: T) -> &'static str {
    table
        .iter()
        .find(|(v, _)| *v == value)
        .map_or("", |(_, word)| word)
}

/// The value a table gives `word`, if any.
pub(crate) fn value_of<T: Copy>(table: &[(T, &'static str)], word: &str) -> Option<T> {
    table.iter().find(|(_, w)| *w == word).map(|(v, _)| *v)
}
