//! Text kept within a bound: what a peer wrote, cut with a marker that
//! says how long it was, so that nothing quoted grows with its input.

/// `value` cut to at most `limit` bytes (on a character boundary), ending in
/// a marker that says how long it was; unchanged if it fits.
pub fn cut(value: &str, limit: usize) -> String {
    if value.len() <= limit {
        return value.to_owned();
    }
    let marker = format!(" …[cut: {} bytes in all]", value.len());
    let mut end = limit.saturating_sub(marker.len());
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{marker}", &value[..end])
}
