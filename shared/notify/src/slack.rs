//! The Slack sink: a message to an incoming webhook in Block Kit: a header
//! with the request's title, a section with the member, the kind and whom
//! it waits for, a button "Review in the console" to its page, and a line
//! saying the message decides nothing. `text` holds the same in one line,
//! for notifications and clients without blocks.

use reqwest::{header::HeaderMap, Url};
use serde_json::{json, Value};

use crate::{
    http,
    notice::{Event, Notice},
    retry::with_retries,
    stats::SinkCounters,
};

/// The most characters Slack shows in a header.
const HEADER_MOST: usize = 150;
/// The most characters of a section's field.
const FIELD_MOST: usize = 1_900;
/// The most paths listed.
const PATHS_MOST: usize = 10;

/// A Slack sink, ready to post.
#[derive(Debug)]
pub(crate) struct Slack {
    pub(crate) client: reqwest::Client,
    pub(crate) url: Url,
}

impl Slack {
    /// Posts `notice` as a Block Kit message, trying again as
    /// [`crate::retry`] says.
    pub(crate) async fn deliver(&self, notice: &Notice, counters: &SinkCounters) {
        let body = payload(notice).to_string().into_bytes();
        let what = format!("slack message for {}", notice.request_id);
        with_retries(&what, counters, || {
            http::post(&self.client, &self.url, HeaderMap::new(), &body)
        })
        .await;
    }
}

/// The message for `notice`.
pub(crate) fn payload(notice: &Notice) -> Value {
    let header = match notice.event {
        Event::Waiting => notice.title.clone(),
        Event::Escalated { after } => format!(
            "Still waiting after {}: {}",
            humantime::format_duration(after),
            notice.title
        ),
    };
    let waits_for = if notice.waits_for.is_empty() {
        "a review".to_owned()
    } else {
        notice.waits_for.join(", ")
    };
    let mut fields = vec![
        field("Member", &notice.member),
        field("Kind", &notice.kind),
        field("Waits for", &waits_for),
    ];
    if !notice.paths.is_empty() {
        let mut paths: Vec<&str> = notice
            .paths
            .iter()
            .take(PATHS_MOST)
            .map(String::as_str)
            .collect();
        let more = notice.paths.len().saturating_sub(PATHS_MOST);
        let more = format!("and {more} more");
        if notice.paths.len() > PATHS_MOST {
            paths.push(&more);
        }
        fields.push(field("Paths", &paths.join("\n")));
    }
    json!({
        "text": notice.summary(),
        "blocks": [
            {
                "type": "header",
                "text": {"type": "plain_text", "text": cut(&header.replace(['\n', '\r'], " "), HEADER_MOST), "emoji": false},
            },
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": escape(&notice.summary())},
                "fields": fields,
            },
            {
                "type": "actions",
                "elements": [{
                    "type": "button",
                    "text": {"type": "plain_text", "text": "Review in the console"},
                    "url": notice.url,
                    "action_id": "review",
                    "style": "primary",
                }],
            },
            {
                "type": "context",
                "elements": [{
                    "type": "mrkdwn",
                    "text": escape(&format!(
                        "Request {}. This message approves nothing: sign in to decide.",
                        notice.request_id
                    )),
                }],
            },
        ],
    })
}

/// A section's field: its name in bold, its value below.
fn field(name: &str, value: &str) -> Value {
    json!({"type": "mrkdwn", "text": format!("*{name}*\n{}", escape(&cut(value, FIELD_MOST)))})
}

/// `text` with Slack's three control characters escaped.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `text` cut to `most` characters, with an ellipsis where it was cut.
fn cut(text: &str, most: usize) -> String {
    if text.chars().count() <= most {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(most.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_cut_and_the_paths_counted() {
        let notice = Notice {
            event: Event::Escalated {
                after: std::time::Duration::from_secs(1800),
            },
            request_id: "r1".into(),
            kind: "plan".into(),
            member: "a<b>&c".into(),
            title: format!("{}\nsecond line", "x".repeat(200)),
            paths: (0..12).map(|i| format!("src/{i}.rs")).collect(),
            waits_for: vec![],
            owners: vec![],
            url: "https://lead.example.com/console/requests/r1".into(),
            at_unix_ms: 0,
        };
        let body = payload(&notice);
        let header = body["blocks"][0]["text"]["text"].as_str().unwrap_or("");
        assert_eq!(header.chars().count(), HEADER_MOST);
        assert!(header.starts_with("Still waiting after 30m: xxx") && header.ends_with('…'));
        let fields = &body["blocks"][1]["fields"];
        assert_eq!(fields[0]["text"], "*Member*\na&lt;b&gt;&amp;c");
        assert_eq!(fields[2]["text"], "*Waits for*\na review");
        let paths = fields[3]["text"].as_str().unwrap_or("");
        assert!(paths.ends_with("src/9.rs\nand 2 more"), "{paths}");
        assert_eq!(
            body["text"],
            "still waiting after 30m: a<b>&c's plan waits for a review"
        );
    }
}
