//! `ListTasks` page tokens: where the last page ended (its last task's
//! change time and id), opaque to the caller.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};

/// The token after the task changed at `at` with id `id`.
pub(super) fn make(at: i64, id: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{at}:{id}"))
}

/// What a token says, if it is one.
pub(super) fn parse(token: &str) -> Option<(i64, String)> {
    let bytes = URL_SAFE_NO_PAD.decode(token).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (at, id) = text.split_once(':')?;
    Some((at.parse().ok()?, id.to_owned()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_token_says_where_the_page_ended() {
        let token = super::make(1_700, "t-1");
        assert_eq!(super::parse(&token), Some((1_700, "t-1".to_owned())));
        assert_eq!(super::parse("not a token"), None);
    }
}
